//! Times as JSON and people read them. Any score is a due time a client may have written, some far
//! beyond what a calendar date can hold: those print as unix seconds instead of failing.

use std::time::SystemTime;

use chrono::{DateTime, Local, SecondsFormat, Utc};
use delayer_wire::time::to_unix;

/// RFC 3339 in UTC, to the millisecond: `2026-12-24T18:00:00.000Z`.
pub fn rfc3339(time: SystemTime) -> String {
    match utc(time) {
        Some(time) => time.to_rfc3339_opts(SecondsFormat::Millis, true),
        None => beyond_calendar(time),
    }
}

/// Local time, to the millisecond: `2026-12-24 19:00:00.000`.
pub fn local(time: SystemTime) -> String {
    match utc(time) {
        Some(time) => time
            .with_timezone(&Local)
            .format("%Y-%m-%d %H:%M:%S%.3f")
            .to_string(),
        None => beyond_calendar(time),
    }
}

fn utc(time: SystemTime) -> Option<DateTime<Utc>> {
    let unix = to_unix(time);
    let seconds = unix.floor();
    // Checked as a float first: `as i64` saturates, and chrono's range is far inside i64.
    if !(-1e15..1e15).contains(&seconds) {
        return None;
    }
    let nanos = ((unix - seconds) * 1e9) as u32;
    DateTime::from_timestamp(seconds as i64, nanos.min(999_999_999))
}

fn beyond_calendar(time: SystemTime) -> String {
    format!("unix {}", to_unix(time))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::{local, rfc3339};

    #[test]
    fn times_within_and_beyond_the_calendar() {
        let christmas = SystemTime::UNIX_EPOCH + Duration::from_secs(1_798_135_200);
        assert_eq!(rfc3339(christmas), "2026-12-24T18:00:00.000Z");
        let far = SystemTime::UNIX_EPOCH + Duration::from_secs(10u64.pow(16));
        assert_eq!(rfc3339(far), "unix 10000000000000000");
        assert_eq!(local(far), "unix 10000000000000000");
    }
}
