//! `[schedule.NAME]` sections: one recurring schedule each (see `docs/schedules.md`). Every
//! daemon writes its file's schedules to Redis at start; what each key means is in
//! [`delayer_wire::schedule::Definition`].

use std::str::FromStr;

use delayer_wire::schedule::definition::DEFAULT_CATCH_UP_WINDOW;
use delayer_wire::schedule::{CatchUp, Definition, Overlap};
use delayer_wire::schedule::{parse_duration, shortened};

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
    // A long name or value is quoted by its start: the message stays readable.
    let shown = format!("{PREFIX}{}", shortened(name));
    let wrong = |key: &str, why: &str| {
        let value = ini.get(section, key).unwrap_or_default();
        format!("[{shown}] {key} = {:?}: {why}", shortened(value))
    };
    let required = |key: &'static str| -> Result<String, String> {
        ini.get(section, key).map(str::to_string).ok_or_else(|| {
            format!("[{shown}] {key} is missing: a schedule needs a cron and a topic")
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

/// `definition` as its section in the file: the keys that are not their default.
pub(super) fn render(definition: &Definition) -> String {
    let mut text = format!(
        "\n[{PREFIX}{}]\ncron = {}\ntopic = {}\n",
        definition.name, definition.cron, definition.topic
    );
    if !definition.body.is_empty() {
        let body = String::from_utf8_lossy(&definition.body);
        // Quoted where a ` #` or ` ;` would start a comment.
        if body.contains(" #") || body.contains(" ;") {
            text += &format!("body = \"{body}\"\n");
        } else {
            text += &format!("body = {body}\n");
        }
    }
    if definition.zone != "UTC" {
        text += &format!("zone = {}\n", definition.zone);
    }
    if definition.catch_up != CatchUp::default() {
        text += &format!("catch_up = {}\n", definition.catch_up);
    }
    if definition.catch_up_window != DEFAULT_CATCH_UP_WINDOW {
        text += &format!(
            "catch_up_window = {}\n",
            definition.catch_up_window.as_secs()
        );
    }
    if definition.overlap != Overlap::default() {
        text += &format!("overlap = {}\n", definition.overlap);
    }
    text
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use crate::config::Config;

    use super::*;

    fn parse(text: &str) -> Result<Config, String> {
        Config::parse(text, Path::new("test.conf")).map_err(|error| format!("{error:#}"))
    }

    #[test]
    fn a_hash_in_an_expression_and_a_quoted_body_survive_the_comment_stripping() {
        let config = parse(
            "[schedule.second-monday]\n\
             cron = 0 9 * * 1#2   ; the second Monday\n\
             topic = report.build # a comment\n\
             body = \"order # 42 ; all of it\"\n\
             zone = Europe/Paris\n\
             catch_up = latest\n\
             catch_up_window = 2d\n\
             overlap = skip\n",
        )
        .unwrap();
        let definition = &config.schedules[0];
        assert_eq!(definition.name, "second-monday");
        assert_eq!(definition.cron, "0 9 * * 1#2");
        assert_eq!(definition.topic, "report.build");
        assert_eq!(definition.body, b"order # 42 ; all of it");
        assert_eq!(definition.catch_up, CatchUp::Latest);
        assert_eq!(definition.catch_up_window, Duration::from_secs(2 * 86_400));
        assert_eq!(definition.overlap, Overlap::Skip);
        assert!(config.unknown.is_empty(), "{:?}", config.unknown);
        // And back: the rendered file reads as the same schedule.
        let again = parse(&render(definition)).unwrap();
        assert_eq!(again.schedules[0], *definition);
    }

    #[test]
    fn each_bad_key_is_named_with_its_section() {
        let error = |section: &str| parse(&format!("[schedule.s]\n{section}")).unwrap_err();
        assert!(error("topic = t").contains("[schedule.s] cron is missing"));
        assert!(error("cron = @daily").contains("[schedule.s] topic is missing"));
        let never = error("cron = 0 0 30 2 *\ntopic = t");
        assert!(
            never.contains("[schedule.s] cron = \"0 0 30 2 *\": ") && never.contains("never fires"),
            "{never}"
        );
        assert!(
            error("cron = @daily\ntopic = t\nzone = Paris")
                .contains("[schedule.s] zone = \"Paris\"")
        );
        assert!(
            error("cron = @daily\ntopic = t\ncatch_up = some").contains("[schedule.s] catch_up")
        );
        assert!(
            error("cron = @daily\ntopic = t\ncatch_up_window = soon").contains("catch_up_window")
        );
        assert!(error("cron = @daily\ntopic = t\noverlap = no").contains("[schedule.s] overlap"));
        let config = parse("[schedule.s]\ncron = @daily\ntopic = t\ncorn = x\n").unwrap();
        assert!(
            config.unknown[0].contains("unknown key [schedule.s] corn"),
            "{:?}",
            config.unknown
        );
        assert!(parse("").unwrap().schedules.is_empty());
    }

    #[test]
    fn a_long_name_or_expression_is_refused_quoting_only_its_start() {
        let name = "n".repeat(10_000);
        let error = parse(&format!("[schedule.{name}]\ncron = @daily\ntopic = t\n")).unwrap_err();
        assert!(
            error.len() < 400 && error.contains("(10000 bytes)"),
            "{error}"
        );
        let cron = format!("{} * * * *", "0,".repeat(50_000) + "0");
        let error = parse(&format!("[schedule.s]\ncron = {cron}\ntopic = t\n")).unwrap_err();
        assert!(
            error.len() < 400 && error.contains("longer than 1000 bytes"),
            "{error}"
        );
    }
}
