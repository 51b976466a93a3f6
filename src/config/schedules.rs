//! `[schedule.NAME]` sections: one recurring schedule each (see `docs/schedules.md`). Every
//! daemon writes its file's schedules to Redis at start; what each key means is in
//! [`delayer_client::Definition`].

use std::str::FromStr;

use delayer_client::schedule::parse_duration;
use delayer_client::{CatchUp, Definition, Overlap};

use super::ini::IniFile;

/// What starts a schedule's section name.
pub(super) const PREFIX: &str = "schedule.";
/// The keys of a schedule's section.
pub(super) const KEYS: [&str; 7] = [
    "cron",
    "topic",
    "body",
    "zone",
    "catch_up",
    "catch_up_window",
    "overlap",
];

/// Every schedule section of `ini`, checked as of `now` (unix ms); and the problems, one a line
/// (`[schedule.NAME] key = "value": why`).
pub(super) fn read(ini: &IniFile, now: i64) -> (Vec<Definition>, Vec<String>) {
    let (mut schedules, mut problems) = (Vec::new(), Vec::new());
    for section in ini.sections().into_iter().flatten() {
        let Some(name) = section.strip_prefix(PREFIX) else {
            continue;
        };
        match definition(ini, section, name, now) {
            Ok(definition) => schedules.push(definition),
            Err(problem) => problems.push(problem),
        }
    }
    (schedules, problems)
}

fn definition(ini: &IniFile, section: &str, name: &str, now: i64) -> Result<Definition, String> {
    let wrong = |key: &str, why: &str| {
        let value = ini.get(section, key).unwrap_or_default();
        format!("[{section}] {key} = {value:?}: {why}")
    };
    let required = |key: &'static str| -> Result<String, String> {
        ini.get(section, key).map(str::to_string).ok_or_else(|| {
            format!("[{section}] {key} is missing: a schedule needs a cron and a topic")
        })
    };
    let mut definition = Definition::new(name, &required("cron")?, &required("topic")?);
    if let Some(body) = ini.get(section, "body") {
        definition.body = body.as_bytes().to_vec();
    }
    if let Some(zone) = ini.get(section, "zone") {
        definition.zone = zone.to_string();
    }
    if let Some(policy) = ini.get(section, "catch_up") {
        definition.catch_up = CatchUp::from_str(policy).map_err(|why| wrong("catch_up", &why))?;
    }
    if let Some(window) = ini.get(section, "catch_up_window") {
        definition.catch_up_window = parse_duration(window).ok_or_else(|| {
            wrong(
                "catch_up_window",
                "is not a duration such as 90s, 30m, 12h or 2d",
            )
        })?;
    }
    if let Some(policy) = ini.get(section, "overlap") {
        definition.overlap = Overlap::from_str(policy).map_err(|why| wrong("overlap", &why))?;
    }
    definition
        .check(now)
        .map_err(|invalid| wrong(invalid.field, &invalid.why))?;
    Ok(definition)
}
