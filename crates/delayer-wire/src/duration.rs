//! Durations as people write them: `90s`, `5m`, `1h30m`, `1d`, `250ms`, `1.5s`, or a bare number
//! of seconds. One parser for the command line, schedules and the configuration.

use std::time::Duration;

/// The units a duration takes, in milliseconds (`ms` before `m`: the longest name first).
const UNITS: [(&str, f64); 5] = [
    ("ms", 1.0),
    ("s", 1_000.0),
    ("m", 60_000.0),
    ("h", 3_600_000.0),
    ("d", 86_400_000.0),
];

/// `text` as a duration: a bare number is seconds; otherwise numbers each followed by a unit
/// (`ms`, `s`, `m`, `h`, `d`), added up. What is wrong otherwise, quoting the text.
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let wrong = || format!("{text:?} is not a duration like 90s, 5m, 1h30m, 1d or 250ms");
    if let Ok(seconds) = text.parse::<f64>() {
        return seconds_of(seconds).ok_or_else(wrong);
    }
    if text.is_empty() {
        return Err(wrong());
    }
    let mut rest = text;
    let mut ms = 0.0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(digits);
        let number: f64 = number.parse().map_err(|_| wrong())?;
        let Some((unit, scale)) = UNITS.iter().find(|(unit, _)| after.starts_with(unit)) else {
            let word: String = after.chars().take_while(|c| !c.is_ascii_digit()).collect();
            return Err(match word.is_empty() {
                true => format!("{text:?}: a number needs a unit (ms, s, m, h or d) after it"),
                false => format!("{text:?}: unknown unit {word:?} (use ms, s, m, h or d)"),
            });
        };
        ms += number * scale;
        rest = &after[unit.len()..];
    }
    seconds_of(ms / 1000.0).ok_or_else(wrong)
}

/// `seconds` as a duration, if it is one (not negative, finite, in range).
fn seconds_of(seconds: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(seconds).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_the_usual_units_and_sums_of_them() {
        let cases = [
            ("90s", 90_000),
            ("5m", 300_000),
            ("2h", 7_200_000),
            ("1d", 86_400_000),
            ("250ms", 250),
            ("1.5s", 1_500),
            ("42", 42_000),
            ("0.25", 250),
            ("1h30m", 5_400_000),
            (" 1d2h3m4s5ms ", 93_784_005),
        ];
        for (text, ms) in cases {
            assert_eq!(parse(text), Ok(Duration::from_millis(ms)), "{text}");
        }
        for bad in [
            "", "s", "5x", "-1s", "1e400", "1.2.3s", "5 m", "m5", "1h30", "nan",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(parse("5x").unwrap_err().contains("unknown unit \"x\""));
        assert!(parse("1h30").unwrap_err().contains("needs a unit"));
    }
}
