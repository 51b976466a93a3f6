//! A schedule as people and programs read it: its ticks in its own zone (RFC 3339 with the zone's
//! offset), and the JSON that `delayer schedule list --json|show` and the HTTP API answer alike.

use delayer_client::Stored;
use delayer_client::schedule::Cadence;
use serde_json::{Value, json};

use super::bytes;

/// How many next ticks a list gives of each schedule.
pub const LISTED_TICKS: usize = 1;
/// How many next ticks one schedule's `show` gives.
pub const SHOWN_TICKS: usize = 5;

/// When the schedule ticks, if its definition reads (it was checked when it was written).
pub fn cadence(stored: &Stored) -> Option<Cadence> {
    stored
        .definition
        .check(stored.next.unwrap_or_default())
        .ok()
}

/// `tick` (unix ms) in the cadence's zone, RFC 3339 with its offset; the unix ms without one.
pub fn local(cadence: Option<&Cadence>, tick: i64) -> String {
    match cadence.and_then(|cadence| cadence.local(tick)) {
        Some(time) => time.to_rfc3339(),
        None => tick.to_string(),
    }
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

/// The next tick in the schedule's zone, "paused", or "none".
pub fn next_text(stored: &Stored) -> String {
    match stored.next {
        _ if stored.paused_since.is_some() => "paused".to_string(),
        Some(next) => local(cadence(stored).as_ref(), next),
        None => "none".to_string(),
    }
}

/// A schedule as JSON, with its next `ticks` ticks in its zone. A body that is not UTF-8 (which
/// only the Rust client can write) also comes whole as `body_base64`.
pub fn to_json(stored: &Stored, ticks: usize) -> Value {
    let definition = &stored.definition;
    let cadence = cadence(stored);
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
    });
    if let Some(encoded) = bytes::base64(&definition.body) {
        json["body_base64"] = encoded.into();
    }
    json
}

#[cfg(test)]
mod tests {
    use super::*;
    use delayer_client::{Definition, Source};

    fn stored(cron: &str, zone: &str, next: i64) -> Stored {
        let mut definition = Definition::new("nightly", cron, "report");
        definition.zone = zone.into();
        definition.body = b"\xff".to_vec();
        Stored {
            definition,
            source: Source::Api,
            version: 1,
            next: Some(next),
            paused_since: None,
            last_tick: None,
            last_job: None,
            fired: 0,
            skipped: 0,
            missed: 0,
            caught_up: 0,
            runs: 0,
        }
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
    }
}
