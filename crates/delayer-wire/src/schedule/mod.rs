//! Recurring schedules: what one is ([`definition`]), when it ticks ([`cadence`]), and what a
//! claim of its next tick does ([`plan`]). A schedule is a hash in Redis (see
//! [`Keys::schedule`](crate::keys::Keys::schedule)) and an entry of its shard's queue of
//! schedules scored by its next tick; the claim script claims a tick by compare-and-set of that
//! next tick and pushes its job in the same call, so that a tick is pushed once however many
//! daemons claim it. Each tick's job is an ordinary job whose id is the schedule's name and the
//! tick ([`tick_id`]).

pub mod cadence;
pub mod definition;
pub mod plan;

use std::borrow::Cow;
use std::collections::HashMap;

use chrono::{TimeZone, Utc};
use redis::RedisResult;
use redis::aio::ConnectionLike;

pub use cadence::{Cadence, parse_duration};
pub use definition::{CatchUp, Definition, Invalid, Overlap};
pub use plan::Plan;

use crate::keys::Keys;
use crate::name::JobId;

/// How long before its time a tick is claimed and its job pushed into the pool, due at the tick:
/// the mover then moves it with its own precision.
pub const CLAIM_AHEAD_MS: i64 = 500;
/// The longest a daemon waits between two rounds of claims when it knows of no tick due sooner.
pub const MOST_BETWEEN_ROUNDS_MS: i64 = 1000;
/// A schedule's first tick (and its next after a change of its expression or zone) is at least
/// this long after it is written: a daemon whose next round is a second later still claims it
/// ahead of its time.
pub const FIRST_TICK_AFTER_MS: i64 = CLAIM_AHEAD_MS + MOST_BETWEEN_ROUNDS_MS;
/// How late a tick may be claimed and still be on time (pushed, not missed): a daemon held up for
/// a moment loses no tick. A schedule whose overlap policy is `skip` is claimed at its time, not
/// ahead, to see whether the last job is still there.
pub const CLAIM_LATE_MS: i64 = 1000;

/// The fields of a schedule's hash: its definition's, then its state's.
pub mod field {
    pub const CRON: &str = "cron";
    pub const ZONE: &str = "zone";
    pub const TOPIC: &str = "topic";
    pub const BODY: &str = "body";
    pub const CATCH_UP: &str = "catch_up";
    /// Whole seconds.
    pub const CATCH_UP_WINDOW: &str = "catch_up_window";
    pub const OVERLAP: &str = "overlap";
    /// Who wrote it: [`super::Source`]'s word.
    pub const SOURCE: &str = "source";
    /// The definition's version (Redis's time of its last change, in microseconds): a claim
    /// planned from another is refused.
    pub const VERSION: &str = "version";
    /// The next tick, unix seconds to the millisecond: what a claim compares and sets.
    pub const NEXT: &str = "next";
    /// While paused: since when, unix seconds.
    pub const PAUSED: &str = "paused";
    /// The last tick a job was pushed for, unix seconds.
    pub const LAST_TICK: &str = "last_tick";
    /// The id of the last job pushed (by a tick or a run).
    pub const LAST_JOB: &str = "last_job";
    /// Counters: ticks that pushed a job, ticks skipped by the overlap policy, ticks missed,
    /// missed ticks caught up, and runs asked for.
    pub const FIRED: &str = "fired";
    pub const SKIPPED: &str = "skipped";
    pub const MISSED: &str = "missed";
    pub const CAUGHT_UP: &str = "caught_up";
    pub const RUNS: &str = "runs";
}

/// Who wrote a schedule: a daemon from its configuration file (which may remove it again when it
/// leaves the file), or a client at run time (never removed but by a client).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    File,
    Api,
}

impl Source {
    pub fn word(self) -> &'static str {
        match self {
            Source::File => "file",
            Source::Api => "api",
        }
    }
}

/// A schedule as Redis holds it: its definition and state.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub definition: Definition,
    pub source: Source,
    pub version: u64,
    /// The next tick, unix ms.
    pub next: Option<i64>,
    /// While paused, since when (unix seconds).
    pub paused_since: Option<f64>,
    /// The last tick a job was pushed for, unix ms.
    pub last_tick: Option<i64>,
    pub last_job: Option<JobId>,
    pub fired: u64,
    pub skipped: u64,
    pub missed: u64,
    pub caught_up: u64,
    pub runs: u64,
}

impl Stored {
    /// A schedule just saved through the API: version 1, ticking next at `next` (unix ms), with
    /// nothing counted yet.
    pub fn new(definition: Definition, next: Option<i64>) -> Stored {
        Stored {
            definition,
            source: Source::Api,
            version: 1,
            next,
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

    /// Reads a schedule's hash.
    pub fn from_fields(name: &str, fields: &HashMap<String, Vec<u8>>) -> Result<Stored, Invalid> {
        let text = |field: &str| {
            fields
                .get(field)
                .and_then(|value| std::str::from_utf8(value).ok())
        };
        let count = |field: &str| text(field).and_then(|t| t.parse().ok()).unwrap_or(0);
        let ms = |field: &str| text(field).and_then(parse_ms);
        Ok(Stored {
            definition: Definition::from_fields(name, fields)?,
            source: if text(field::SOURCE) == Some("file") {
                Source::File
            } else {
                Source::Api
            },
            version: count(field::VERSION),
            next: ms(field::NEXT),
            paused_since: text(field::PAUSED).and_then(|t| t.parse().ok()),
            last_tick: ms(field::LAST_TICK),
            last_job: fields
                .get(field::LAST_JOB)
                .map(|id| JobId::from(id.clone())),
            fired: count(field::FIRED),
            skipped: count(field::SKIPPED),
            missed: count(field::MISSED),
            caught_up: count(field::CAUGHT_UP),
            runs: count(field::RUNS),
        })
    }
}

/// Schedules read in one pipeline: Redis answers their HGETALLs (some 2.5 us each) in one go,
/// so other clients wait half a millisecond at most.
const READ_AT_ONCE: usize = 200;

/// The hashes of schedules `names`, all under `keys` (one shard), read 200 to a
/// pipeline: each in order, `None` for one that is gone, why for one that does not read.
pub async fn read(
    connection: &mut impl ConnectionLike,
    keys: &Keys,
    names: &[&str],
) -> RedisResult<Vec<Option<Result<Stored, Invalid>>>> {
    let mut read = Vec::with_capacity(names.len());
    for slice in names.chunks(READ_AT_ONCE) {
        let mut pipe = redis::pipe();
        for name in slice {
            pipe.hgetall(keys.schedule(name));
        }
        let replies: Vec<HashMap<String, Vec<u8>>> = pipe.query_async(connection).await?;
        for (name, fields) in slice.iter().zip(replies) {
            read.push((!fields.is_empty()).then(|| Stored::from_fields(name, &fields)));
        }
    }
    Ok(read)
}

/// The longest value a message quotes whole.
const SHOWN_WHOLE: usize = 64;
/// How many characters of a longer one a message quotes.
const SHOWN_START: usize = 40;

/// `text` as a message shows a value: whole when it is short; else its first characters, then
/// `…` and its length, so that a refusal of a 100 kB value is not 100 kB long itself.
pub fn shortened(text: &str) -> Cow<'_, str> {
    if text.len() <= SHOWN_WHOLE {
        return Cow::Borrowed(text);
    }
    let start: String = text.chars().take(SHOWN_START).collect();
    Cow::Owned(format!("{start}… ({} bytes)", text.len()))
}

/// This host's clock in unix ms: for checks only (Redis's clock decides every tick).
pub fn unix_ms_now() -> i64 {
    (crate::time::unix_now() * 1000.0) as i64
}

/// Unix ms as Redis holds a tick: seconds with three decimals (as the pool's scores).
pub fn seconds_text(ms: i64) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

/// A tick as Redis holds it, back in unix ms.
pub fn parse_ms(text: &str) -> Option<i64> {
    let seconds: f64 = text.parse().ok()?;
    seconds
        .is_finite()
        .then(|| (seconds * 1000.0).round() as i64)
}

/// The id of the job schedule `name` pushes for `tick` (unix ms): `nightly@2026-11-26T03:00:00Z`.
/// The same tick always gets the same id, so that it is never pushed twice.
pub fn tick_id(name: &str, tick: i64) -> JobId {
    JobId::from(format!("{name}@{}", utc_text(tick)))
}

/// The id of the job a run of schedule `name` asked for at `now` (unix ms) pushes:
/// `nightly@2026-11-26T12:34:56.789Z/run`.
pub fn run_id(name: &str, now: i64) -> JobId {
    JobId::from(format!("{name}@{}/run", utc_text(now)))
}

/// `ms` in UTC, RFC 3339, with milliseconds only when it has some.
fn utc_text(ms: i64) -> String {
    let format = if ms.rem_euclid(1000) == 0 {
        "%Y-%m-%dT%H:%M:%SZ"
    } else {
        "%Y-%m-%dT%H:%M:%S%.3fZ"
    };
    match Utc.timestamp_millis_opt(ms).single() {
        Some(time) => time.format(format).to_string(),
        None => ms.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_ids_name_the_schedule_and_the_tick() {
        assert_eq!(
            tick_id("nightly", 1_795_000_000_000).to_string(),
            "nightly@2026-11-18T11:06:40Z"
        );
        assert_eq!(
            run_id("n", 1_795_000_000_123).to_string(),
            "n@2026-11-18T11:06:40.123Z/run"
        );
        assert_eq!(seconds_text(1_795_000_000_007), "1795000000.007");
        assert_eq!(parse_ms("1795000000.007"), Some(1_795_000_000_007));
    }

    #[test]
    fn a_long_value_is_shortened_to_its_start_and_length() {
        assert_eq!(shortened("nightly"), "nightly");
        let long = "é".repeat(5_000);
        let shown = shortened(&long);
        assert_eq!(shown, format!("{}… (10000 bytes)", "é".repeat(40)));
    }
}
