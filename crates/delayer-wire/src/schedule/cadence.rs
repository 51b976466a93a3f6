//! When a schedule ticks: a cron expression read in a time zone (croner and the IANA database of
//! chrono-tz), or `every <duration>`. Ticks are whole unix milliseconds.
//!
//! Daylight saving time: a local time that does not exist (the spring forward) fires once, at the
//! first time after the gap, when the expression names a fixed time of day (`30 2 * * *`);
//! expressions that repeat within the day (`*/15 * * * *`) skip the times that do not exist (both
//! croner's rules). A local time that happens twice (the fall back) fires once, at its first
//! occurrence, whatever the expression: that rule is ours, not croner's ([`Cadence::next_after`]
//! takes only a tick after the last, and croner names a time in the repeated hour by its first
//! occurrence).
//! `every` counts elapsed time from the unix epoch, and no zone changes it.

use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use super::shortened;

/// The shortest `every`: one second, as the finest cron expression.
const MIN_EVERY_MS: i64 = 1_000;
/// How many occurrences a search for the next tick steps over before it gives up: only a
/// local time repeated by a fall back makes it step at all.
const MAX_STEPS: usize = 100_000;

/// When a schedule ticks.
#[derive(Debug, Clone)]
pub enum Cadence {
    /// A cron expression, its times local to `zone`.
    Cron { cron: Box<Cron>, zone: Tz },
    /// Every `period` milliseconds, counted from the unix epoch; `zone` only says how its times
    /// are shown.
    Every { period: i64, zone: Tz },
}

/// Why an expression or a zone cannot be used, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The field at fault: `cron` or `zone`.
    pub field: &'static str,
    pub why: String,
}

impl Cadence {
    /// Reads `expression` (5 fields, 6 with seconds first, an `@hourly`-style macro, or
    /// `every 30s`) in `zone` (an IANA name such as `Europe/Paris`), and checks that it fires at
    /// least once in the five years after `now` (unix ms).
    pub fn parse(expression: &str, zone: &str, now: i64) -> Result<Cadence, Refusal> {
        let zone = Tz::from_str(zone).map_err(|_| Refusal {
            field: "zone",
            why: format!(
                "{:?} is not a time zone of the IANA database (such as Europe/Paris or UTC)",
                shortened(zone)
            ),
        })?;
        let cron = |why: String| Refusal { field: "cron", why };
        let expression = expression.trim();
        let shown = shortened(expression);
        let cadence = if let Some(every) = expression.strip_prefix("every ") {
            // A unit is asked for: `every 500` could be meant as milliseconds.
            let with_unit = every.trim().parse::<f64>().is_err();
            let period = parse_duration(every).filter(|_| with_unit).ok_or_else(|| {
                cron(format!(
                    "{shown:?}: `every` takes a duration of whole seconds such as 30s, 5m, \
                     1h30m or 1d"
                ))
            })?;
            Cadence::Every {
                period: period.as_millis() as i64,
                zone,
            }
        } else {
            let parsed = CronParser::builder()
                .seconds(Seconds::Optional)
                .year(Year::Disallowed)
                .build()
                .parse(expression)
                .map_err(|error| {
                    cron(format!(
                        "{shown:?} is not a cron expression (5 fields, or 6 with seconds \
                         first; or @hourly, @daily, @weekly, @monthly, @yearly; or every 30s): \
                         {error}"
                    ))
                })?;
            Cadence::Cron {
                cron: Box::new(parsed),
                zone,
            }
        };
        match cadence.next_after(now) {
            Some(tick) if tick - now <= 5 * 366 * 86_400_000 => Ok(cadence),
            _ => Err(cron(format!(
                "{shown:?} never fires (no time in the next five years matches it)"
            ))),
        }
    }

    /// The first tick after `after` (unix ms); `None` when there is none (or none croner finds
    /// before the year 5000).
    pub fn next_after(&self, after: i64) -> Option<i64> {
        match self {
            Cadence::Every { period, .. } => Some((after.div_euclid(*period) + 1) * period),
            Cadence::Cron { cron, zone } => {
                // Whole seconds: croner steps on from the second `after` is in.
                let mut from = zone.timestamp_opt(after.div_euclid(1000), 0).single()?;
                for _ in 0..MAX_STEPS {
                    let tick = cron.find_next_occurrence(&from, false).ok()?;
                    let ms = tick.timestamp_millis();
                    if ms > after {
                        return Some(ms);
                    }
                    // A fall back's repeated hour: croner answers the first occurrence of a local
                    // time, which may be before `after`; step on until a later one.
                    from = tick;
                }
                None
            }
        }
    }

    /// `tick` as a time in this cadence's zone.
    pub fn local(&self, tick: i64) -> Option<DateTime<Tz>> {
        let (Cadence::Cron { zone, .. } | Cadence::Every { zone, .. }) = self;
        Utc.timestamp_millis_opt(tick)
            .single()
            .map(|time| time.with_timezone(zone))
    }
}

/// A duration of whole seconds as schedules take them (see [`crate::duration`]: `30s`, `5m`,
/// `1h30m`, `1d`, or a number of seconds); at least one second.
pub fn parse_duration(text: &str) -> Option<std::time::Duration> {
    let duration = crate::duration::parse(text).ok()?;
    let whole = duration.subsec_nanos() == 0 && duration.as_millis() >= MIN_EVERY_MS as u128;
    // Periods are unix ms in an i64.
    (whole && duration.as_millis() <= i64::MAX as u128).then_some(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unix ms of a UTC time.
    fn utc(text: &str) -> i64 {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .timestamp_millis()
    }

    /// The next `count` ticks after `from`, as local times with their offsets.
    fn ticks(expression: &str, zone: &str, from: &str, count: usize) -> Vec<String> {
        let now = utc(from);
        let cadence = Cadence::parse(expression, zone, now).unwrap();
        let mut at = now;
        (0..count)
            .map(|_| {
                at = cadence.next_after(at).unwrap();
                cadence.local(at).unwrap().to_rfc3339()
            })
            .collect()
    }

    #[test]
    fn spring_forward_fires_a_missing_time_once_after_the_gap() {
        // Europe/Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST.
        assert_eq!(
            ticks("30 2 * * *", "Europe/Berlin", "2026-03-27T12:00:00Z", 3),
            [
                "2026-03-28T02:30:00+01:00",
                "2026-03-29T03:00:00+02:00",
                "2026-03-30T02:30:00+02:00"
            ]
        );
        // America/New_York, 2026-03-08: 02:00 EST becomes 03:00 EDT; the 02:xx quarters do not exist.
        assert_eq!(
            ticks(
                "*/30 * * * *",
                "America/New_York",
                "2026-03-08T06:00:00Z",
                4
            ),
            [
                "2026-03-08T01:30:00-05:00",
                "2026-03-08T03:00:00-04:00",
                "2026-03-08T03:30:00-04:00",
                "2026-03-08T04:00:00-04:00"
            ]
        );
    }

    #[test]
    fn fall_back_fires_a_repeated_time_once() {
        // Europe/Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:30 happens twice.
        assert_eq!(
            ticks("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", 3),
            [
                "2026-10-25T02:30:00+02:00",
                "2026-10-26T02:30:00+01:00",
                "2026-10-27T02:30:00+01:00"
            ]
        );
        // America/New_York, 2026-11-01: 02:00 EDT becomes 01:00 EST; the hour of 01:xx repeats.
        assert_eq!(
            ticks(
                "0,30 1,2 * * *",
                "America/New_York",
                "2026-11-01T04:00:00Z",
                4
            ),
            [
                "2026-11-01T01:00:00-04:00",
                "2026-11-01T01:30:00-04:00",
                "2026-11-01T02:00:00-05:00",
                "2026-11-01T02:30:00-05:00"
            ]
        );
        // Every expression, one that repeats within the hour too: the repeated hour fires once.
        assert_eq!(
            ticks("* * * * *", "America/New_York", "2026-11-01T05:58:00Z", 2),
            ["2026-11-01T01:59:00-04:00", "2026-11-01T02:00:00-05:00"],
            "61 minutes apart"
        );
        assert_eq!(
            ticks("0 * * * *", "America/New_York", "2026-11-01T04:30:00Z", 2),
            ["2026-11-01T01:00:00-04:00", "2026-11-01T02:00:00-05:00"],
            "two hours apart"
        );
        // From inside the repeated hour (its second pass), the next tick is still later.
        let cadence = Cadence::parse("*/15 * * * *", "America/New_York", 0).unwrap();
        let inside = utc("2026-11-01T06:20:00Z"); // 01:20 EST, the second 01:20
        let next = cadence.next_after(inside).unwrap();
        assert!(next > inside);
        assert_eq!(
            cadence.local(next).unwrap().to_rfc3339(),
            "2026-11-01T02:00:00-05:00"
        );
    }

    #[test]
    fn seconds_macros_last_day_and_nth_weekday() {
        assert_eq!(
            ticks("*/20 * * * * *", "UTC", "2026-01-01T00:00:00Z", 3),
            [
                "2026-01-01T00:00:20+00:00",
                "2026-01-01T00:00:40+00:00",
                "2026-01-01T00:01:00+00:00"
            ]
        );
        assert_eq!(
            ticks("0 9 L * *", "Europe/Paris", "2026-01-31T12:00:00Z", 3),
            [
                "2026-02-28T09:00:00+01:00",
                "2026-03-31T09:00:00+02:00",
                "2026-04-30T09:00:00+02:00"
            ]
        );
        assert_eq!(
            ticks("0 9 * * 1#2", "UTC", "2026-01-01T00:00:00Z", 2),
            ["2026-01-12T09:00:00+00:00", "2026-02-09T09:00:00+00:00"]
        );
        assert_eq!(
            ticks("@hourly", "UTC", "2026-01-01T00:10:00Z", 1),
            ["2026-01-01T01:00:00+00:00"]
        );
        assert_eq!(
            ticks("every 90s", "UTC", "2026-01-01T00:00:10Z", 2),
            ["2026-01-01T00:01:30+00:00", "2026-01-01T00:03:00+00:00"]
        );
    }

    #[test]
    fn bad_expressions_and_zones_name_their_field() {
        let now = utc("2026-01-01T00:00:00Z");
        let refused =
            |expression: &str, zone: &str| Cadence::parse(expression, zone, now).unwrap_err();
        assert_eq!(refused("0 0 30 2 *", "UTC").field, "cron");
        assert!(refused("0 0 30 2 *", "UTC").why.contains("never fires"));
        assert_eq!(refused("61 * * * *", "UTC").field, "cron");
        assert_eq!(refused("* * *", "UTC").field, "cron");
        assert_eq!(refused("every 0s", "UTC").field, "cron");
        assert_eq!(refused("every 5x", "UTC").field, "cron");
        assert_eq!(refused("every 500", "UTC").field, "cron");
        assert_eq!(refused("* * * * *", "Mars/Olympus").field, "zone");
    }
}
