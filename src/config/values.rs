//! The kinds of value a key takes: each read from the file's text, or the reason it is wrong (the
//! caller names file, section, key and value around it).

use std::fmt::Display;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// Puts `value` into `slot`, or passes on what is wrong with it.
pub(super) fn assign<T>(slot: &mut T, value: Result<T, String>) -> Result<(), String> {
    *slot = value?;
    Ok(())
}

/// A whole number within `range`.
pub(super) fn number<T>(raw: &str, range: RangeInclusive<T>) -> Result<T, String>
where
    T: FromStr + PartialOrd + Display,
{
    match raw.parse::<T>() {
        Ok(value) if range.contains(&value) => Ok(value),
        _ => Err(format!(
            "expected a whole number from {} to {}",
            range.start(),
            range.end()
        )),
    }
}

/// A duration within `range`: a number of seconds, or with units (`30s`, `5m`, `1h30m`: see
/// `delayer_wire::duration`).
pub(super) fn duration(raw: &str, range: RangeInclusive<Duration>) -> Result<Duration, String> {
    match delayer_wire::duration::parse(raw) {
        Ok(duration) if range.contains(&duration) => Ok(duration),
        _ => Err(format!(
            "expected a duration from {} to {} seconds (a number of seconds, or 30s, 5m, 1h)",
            range.start().as_secs_f64(),
            range.end().as_secs_f64()
        )),
    }
}

/// One of `choices`, by name, in any case.
pub(super) fn choice<T: Copy>(raw: &str, choices: &[(&str, T)]) -> Result<T, String> {
    match choices
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(raw))
    {
        Some((_, value)) => Ok(*value),
        None => {
            let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
            Err(format!("expected one of {}", names.join(", ")))
        }
    }
}

/// The name of `value` among `choices`.
pub(super) fn name_of<T: PartialEq>(value: T, choices: &[(&str, T)]) -> String {
    choices
        .iter()
        .find(|(_, choice)| *choice == value)
        .map_or_else(String::new, |(name, _)| name.to_string())
}

/// `true` or `false` (also `yes` or `no`).
pub(super) fn boolean(raw: &str) -> Result<bool, String> {
    choice(
        raw,
        &[
            ("false", false),
            ("true", true),
            ("no", false),
            ("yes", true),
        ],
    )
}

/// A number of seconds where 0 means "never".
pub(super) fn seconds(raw: &str) -> Result<Option<Duration>, String> {
    let seconds = number(raw, 0..=u64::from(u32::MAX))?;
    Ok((seconds > 0).then(|| Duration::from_secs(seconds)))
}

/// A path made absolute against the working directory, as the original resolved it.
pub(super) fn path(raw: &str) -> Result<PathBuf, String> {
    std::path::absolute(raw).map_err(|error| format!("not a usable path ({error})"))
}

/// A comma-separated list of `host:port` (`example_port` for the message).
pub(super) fn addresses(raw: &str, example_port: u16) -> Result<Vec<(String, u16)>, String> {
    raw.split(',')
        .map(str::trim)
        .map(|address| {
            // An IPv6 address in brackets, as in a URL: `[::1]:26379`.
            let (host, port) = match address.strip_prefix('[') {
                Some(rest) => rest.split_once("]:").unwrap_or_default(),
                None => address
                    .rsplit_once(':')
                    .filter(|(host, _)| !host.contains(':'))
                    .unwrap_or_default(),
            };
            match port.parse::<u16>() {
                Ok(port) if !host.is_empty() && port > 0 => Ok((host.to_string(), port)),
                _ => Err(format!(
                    "{address:?} is not host:port (like 10.0.0.5:{example_port}, or \
                     [::1]:{example_port})"
                )),
            }
        })
        .collect()
}
