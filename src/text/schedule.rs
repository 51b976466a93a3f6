//! A schedule as people and programs read it: its ticks in its own zone (RFC 3339 with the zone's
//! offset), and the JSON that `delayer schedule list --json|show` and the HTTP API answer alike.
//! A schedule Redis holds that cannot tick (its hash does not read, or its expression or zone
//! cannot be used: a newer version's, or a hand edit) is said so, with why.

use chrono::{TimeZone, Utc};
use delayer_client::inspector::{ScheduleList, Stored};
use delayer_wire::schedule::{Cadence, Invalid};
use serde_json::{Value, json};

use super::bytes;

/// How many next ticks a list gives of each schedule.
pub const LISTED_TICKS: usize = 1;
/// How many next ticks one schedule's `show` gives.
pub const SHOWN_TICKS: usize = 5;

/// When the schedule ticks; why it cannot, when its expression or zone cannot be used (it was
/// checked when it was written, by this version or another).
pub fn cadence(stored: &Stored) -> Result<Cadence, String> {
    stored
        .definition
        .check(stored.next.unwrap_or_default())
        .map_err(|invalid| why(&invalid))
}

/// What is wrong with a schedule, without its name: the field and why.
pub fn why(invalid: &Invalid) -> String {
    format!("{}: {}", invalid.field, invalid.why)
}

/// `tick` (unix ms) in the cadence's zone, RFC 3339 with its offset; in UTC without one.
pub fn local(cadence: Option<&Cadence>, tick: i64) -> String {
    let time = match cadence {
        Some(cadence) => cadence.local(tick).map(|time| time.to_rfc3339()),
        None => Utc
            .timestamp_millis_opt(tick)
            .single()
            .map(|time| time.to_rfc3339()),
    };
    time.unwrap_or_else(|| format!("unix ms {tick}"))
}

/// Up to `count` ticks from the schedule's next one (kept while it is paused), unix ms.
pub fn upcoming(stored: &Stored, cadence: Option<&Cadence>, count: usize) -> Vec<i64> {
    let (Some(cadence), Some(mut tick)) = (cadence, stored.next) else {
        return Vec::new();
    };
    let mut ticks = Vec::with_capacity(count);
    while ticks.len() < count {
        ticks.push(tick);
        match cadence.next_after(tick) {
            Some(next) => tick = next,
            None => break,
        }
    }
    ticks
}

/// The next tick in the schedule's zone, "paused", "none", or "unusable: " and why.
pub fn next_text(stored: &Stored) -> String {
    match (cadence(stored), stored.next) {
        (Err(why), _) => format!("unusable: {why}"),
        _ if stored.paused_since.is_some() => "paused".to_string(),
        (Ok(cadence), Some(next)) => local(Some(&cadence), next),
        (Ok(_), None) => "none".to_string(),
    }
}

/// A schedule whose hash does not read, as JSON: its name, and why.
pub fn unreadable_json(invalid: &Invalid) -> Value {
    json!({"name": invalid.schedule, "unreadable": why(invalid)})
}

/// Every schedule as JSON, by name, each with its next `ticks` ticks; those whose hash does not
/// read with why instead (see [`unreadable_json`]).
pub fn list_json(list: &ScheduleList, ticks: usize) -> Vec<Value> {
    let mut all: Vec<(&str, Value)> = list
        .readable
        .iter()
        .map(|stored| (stored.definition.name.as_str(), to_json(stored, ticks)))
        .chain(
            list.unreadable
                .iter()
                .map(|invalid| (invalid.schedule.as_str(), unreadable_json(invalid))),
        )
        .collect();
    all.sort_by(|a, b| a.0.cmp(b.0));
    all.into_iter().map(|(_, json)| json).collect()
}

/// A schedule as JSON, with its next `ticks` ticks in its zone; `unusable` says why it cannot
/// tick, when it cannot (null otherwise). A body that is not UTF-8 (which only the Rust client
/// can write) also comes whole as `body_base64`.
pub fn to_json(stored: &Stored, ticks: usize) -> Value {
    let definition = &stored.definition;
    let (cadence, unusable) = match cadence(stored) {
        Ok(cadence) => (Some(cadence), None),
        Err(why) => (None, Some(why)),
    };
    let next_ticks: Vec<String> = upcoming(stored, cadence.as_ref(), ticks)
        .into_iter()
        .map(|tick| local(cadence.as_ref(), tick))
        .collect();
    let mut json = json!({
        "name": definition.name,
        "cron": definition.cron,
        "zone": definition.zone,
        "topic": definition.topic,
        "body": bytes::text(&definition.body),
        "catch_up": definition.catch_up.word(),
        "catch_up_window_seconds": definition.catch_up_window.as_secs(),
        "overlap": definition.overlap.word(),
        "source": stored.source.word(),
        "paused": stored.paused_since.is_some(),
        "next_ticks": next_ticks,
        "last_tick": stored.last_tick.map(|tick| local(cadence.as_ref(), tick)),
        "last_job": stored.last_job.as_ref().map(|id| id.to_string()),
        "fired": stored.fired,
        "skipped": stored.skipped,
        "missed": stored.missed,
        "caught_up": stored.caught_up,
        "runs": stored.runs,
        "unusable": unusable,
    });
    if let Some(encoded) = bytes::base64(&definition.body) {
        json["body_base64"] = encoded.into();
    }
    json
}

#[cfg(test)]
mod tests {
    use super::*;
    use delayer_client::inspector::Definition;

    fn stored(cron: &str, zone: &str, next: i64) -> Stored {
        let mut definition = Definition::new("nightly", cron, "report");
        definition.zone = zone.into();
        definition.body = b"\xff".to_vec();
        Stored::new(definition, Some(next))
    }

    #[test]
    fn ticks_read_in_the_schedules_zone_with_its_offset() {
        // 2026-11-27T00:00:00Z is 09:00 in Tokyo.
        let tokyo = stored("0 9 * * *", "Asia/Tokyo", 1_795_737_600_000);
        let json = to_json(&tokyo, 2);
        assert_eq!(
            json["next_ticks"],
            json!(["2026-11-27T09:00:00+09:00", "2026-11-28T09:00:00+09:00"])
        );
        assert_eq!(
            (&json["body"], &json["body_base64"]),
            (&json!("\u{fffd}"), &json!("/w=="))
        );
        let mut paused = tokyo.clone();
        paused.paused_since = Some(1.0);
        assert_eq!(next_text(&paused), "paused");
        assert_eq!(next_text(&tokyo), "2026-11-27T09:00:00+09:00");
        assert_eq!(json["unusable"], Value::Null);
    }

    #[test]
    fn a_schedule_that_cannot_tick_says_why_instead_of_a_raw_time() {
        for (cron, zone, field) in [
            ("0 9 * * *", "Mars/Olympus", "zone"),
            ("@reboot", "UTC", "cron"),
        ] {
            let mut bad = stored(cron, zone, 1_795_737_600_000);
            bad.last_tick = Some(1_795_651_200_000);
            let next = next_text(&bad);
            assert!(next.starts_with(&format!("unusable: {field}: ")), "{next}");
            let json = to_json(&bad, 2);
            assert!(
                json["unusable"].as_str().unwrap().starts_with(field),
                "{json}"
            );
            assert_eq!(json["next_ticks"], json!([]));
            assert_eq!(
                json["last_tick"], "2026-11-26T00:00:00+00:00",
                "in UTC, not unix ms"
            );
        }
    }
}
