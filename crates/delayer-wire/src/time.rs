//! Time as Redis holds it: unix seconds, fractional (whole seconds from the legacy clients).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::RedisResult;
use redis::aio::ConnectionLike;

/// The current time in unix seconds, with sub-second precision.
pub fn unix_now() -> f64 {
    to_unix(SystemTime::now())
}

/// Now by Redis's clock (`TIME`), in unix seconds: the clock that decides what is due. By this
/// host's when the Redis user may not run TIME, as the scripts then go by it too.
pub async fn redis_now(connection: &mut impl ConnectionLike) -> RedisResult<f64> {
    let time = redis::cmd("TIME")
        .query_async::<(u64, u64)>(connection)
        .await;
    match time {
        Ok((seconds, micros)) => Ok(seconds as f64 + micros as f64 / 1e6),
        Err(error) if error.code() == Some("NOPERM") => Ok(unix_now()),
        Err(error) => Err(error),
    }
}

/// `time` in unix seconds (negative before 1970).
pub fn to_unix(time: SystemTime) -> f64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(since) => since.as_secs_f64(),
        Err(before) => -before.duration().as_secs_f64(),
    }
}

/// `time` in whole unix milliseconds.
pub fn to_unix_ms(time: SystemTime) -> i64 {
    (to_unix(time) * 1000.0).round() as i64
}

/// The time `seconds` after the epoch; `None` for what no `SystemTime` holds (NaN, infinities).
pub fn from_unix(seconds: f64) -> Option<SystemTime> {
    if !seconds.is_finite() {
        return None;
    }
    let offset = Duration::try_from_secs_f64(seconds.abs()).ok()?;
    if seconds >= 0.0 {
        UNIX_EPOCH.checked_add(offset)
    } else {
        UNIX_EPOCH.checked_sub(offset)
    }
}

/// A due time as a score, to the millisecond, rounded up: a job is never due before it was asked
/// to be.
pub fn score(seconds: f64) -> String {
    format!("{:.3}", (seconds * 1000.0).ceil() / 1000.0)
}

/// A reservation's deadline as its score: whole unix milliseconds, rounded up (a job is never
/// delivered again before its time to run ends). Whole, because a small sorted set (a listpack)
/// parses every fractional score it holds again on each insert: at 64 reservations, fractional
/// scores made each ZADD cost 4 times as much.
pub fn deadline_score(seconds: f64) -> i64 {
    (seconds * 1000.0).ceil() as i64
}

/// A reservation's score back in unix seconds.
pub fn from_deadline_score(milliseconds: f64) -> f64 {
    milliseconds / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_seconds_round_trip() {
        let time = UNIX_EPOCH + Duration::from_millis(1_800_000_000_123);
        assert_eq!(to_unix(time), 1_800_000_000.123);
        let back = from_unix(to_unix(time)).unwrap();
        let error = back.duration_since(time).unwrap_or_else(|e| e.duration());
        assert!(error < Duration::from_micros(1));
        assert_eq!(from_unix(f64::INFINITY), None);
        assert_eq!(
            from_unix(-1.5),
            Some(UNIX_EPOCH - Duration::from_millis(1500))
        );
        assert_eq!(score(1_800_000_000.123_4), "1800000000.124", "never early");
        assert_eq!(score(1_800_000_000.123), "1800000000.123");
        assert_eq!(deadline_score(1_800_000_000.123_4), 1_800_000_000_124);
        assert_eq!(from_deadline_score(1_800_000_000_124.0), 1_800_000_000.124);
    }
}
