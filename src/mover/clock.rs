//! Redis's clock as the daemon sees it. The scripts decide by Redis's clock (what is due, which
//! reservations lapsed), so that hosts whose clocks disagree never move or deliver a job early;
//! the daemon needs it only to know when to poll next.
//!
//! What Redis said is kept against this host's monotonic clock, not its wall clock: a step of the
//! wall clock (NTP, a VM resumed from a snapshot, `date -s`) must not make every due time look an
//! hour away, or none would be polled until a script ran again.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

use deadpool_redis::redis::aio::ConnectionLike;
use deadpool_redis::redis::{self, RedisResult};
use delayer_wire::time::unix_now;

/// Marks a clock that has not read Redis's time yet.
const UNSEEN: i64 = i64::MIN;

/// Redis's clock, as last seen.
#[derive(Debug)]
pub(super) struct RedisClock {
    /// The instant the readings are counted from.
    start: Instant,
    /// Redis's unix time at `start`, in microseconds, as last seen; [`UNSEEN`] before that.
    at_start_micros: AtomicI64,
}

impl Default for RedisClock {
    fn default() -> RedisClock {
        RedisClock {
            start: Instant::now(),
            at_start_micros: AtomicI64::new(UNSEEN),
        }
    }
}

impl RedisClock {
    /// Now by Redis's clock, in unix seconds: the last reading, plus the time since by this
    /// host's monotonic clock. Before any reading (or where the Redis user may not run TIME, and
    /// the scripts go by this host's clock), this host's wall clock.
    pub(super) fn now(&self) -> f64 {
        match self.at_start_micros.load(Ordering::Relaxed) {
            UNSEEN => unix_now(),
            at_start => (at_start as f64 + self.start.elapsed().as_micros() as f64) / 1e6,
        }
    }

    /// Whether Redis's time was read: the scripts go by it.
    pub(super) fn seen(&self) -> bool {
        self.at_start_micros.load(Ordering::Relaxed) != UNSEEN
    }

    /// Takes note of `redis_now`, the time a script went by (unix seconds), for a call sent at
    /// `sent` and answered at `answered`. The script ran in between: the middle is off by half a
    /// round trip at most.
    pub(super) fn saw(&self, redis_now: f64, sent: Instant, answered: Instant) {
        let middle = sent + answered.saturating_duration_since(sent) / 2;
        let since_start = middle.saturating_duration_since(self.start).as_micros() as f64;
        let at_start = redis_now * 1e6 - since_start;
        // A NaN or an infinity (a reply gone wrong) is no reading.
        if at_start.is_finite() {
            self.at_start_micros
                .store(at_start as i64, Ordering::Relaxed);
        }
    }

    /// Reads Redis's `TIME` on `connection` and takes note of it. For a loop that may run no
    /// script for a long while (a cluster's idle topics): a step of Redis's own clock, or time
    /// this host spent suspended (which its monotonic clock does not count), is caught up with.
    pub(super) async fn read(&self, connection: &mut impl ConnectionLike) -> RedisResult<()> {
        let sent = Instant::now();
        let (seconds, micros): (u64, u64) = redis::cmd("TIME").query_async(connection).await?;
        self.saw(seconds as f64 + micros as f64 / 1e6, sent, Instant::now());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_what_redis_said() {
        let clock = RedisClock::default();
        let here = unix_now();
        assert!(!clock.seen());
        assert!((clock.now() - here).abs() < 1.0, "none seen: this host's");
        let now = Instant::now();
        clock.saw(here + 10.0, now, now);
        assert!(clock.seen());
        assert!((clock.now() - (here + 10.0)).abs() < 0.5, "10 s ahead");
        clock.saw(here - 10.0, now, now);
        assert!((clock.now() - (here - 10.0)).abs() < 0.5, "10 s behind");
        clock.saw(f64::NAN, now, now);
        assert!((clock.now() - (here - 10.0)).abs() < 0.5, "no reading");
    }

    #[test]
    fn counts_on_from_the_reading_by_the_monotonic_clock() {
        let clock = RedisClock::default();
        let sent = Instant::now();
        // A call that took 20 ms: Redis's time was read at its middle, 10 ms after it was sent.
        clock.saw(1000.0, sent, sent + std::time::Duration::from_millis(20));
        let expected = 1000.0 + sent.elapsed().as_secs_f64() - 0.010;
        assert!((clock.now() - expected).abs() < 0.005, "{}", clock.now());
    }
}
