//! Redis's clock as the daemon sees it. The scripts decide by Redis's clock (what is due, which
//! reservations lapsed), so that hosts whose clocks disagree never move or deliver a job early;
//! the daemon needs it only to know how long to sleep until the next due time.

use std::sync::atomic::{AtomicI64, Ordering};

use delayer_client::time::unix_now;

/// How far Redis's clock is ahead of this host's (behind when negative), as last seen.
#[derive(Debug, Default)]
pub(super) struct RedisClock {
    ahead_micros: AtomicI64,
}

impl RedisClock {
    /// Now by Redis's clock, in unix seconds: this host's clock, corrected by what was last seen.
    pub(super) fn now(&self) -> f64 {
        unix_now() + self.ahead_micros.load(Ordering::Relaxed) as f64 / 1e6
    }

    /// Takes note of `redis_now`, the time a script went by, for a call sent at `sent` and
    /// answered at `answered` (this host's unix seconds). The script ran in between: the middle
    /// is off by half a round trip at most.
    pub(super) fn saw(&self, redis_now: f64, sent: f64, answered: f64) {
        let ahead = redis_now - (sent + answered) / 2.0;
        if ahead.is_finite() {
            self.ahead_micros
                .store((ahead * 1e6) as i64, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_what_redis_said() {
        let clock = RedisClock::default();
        let here = unix_now();
        assert!((clock.now() - here).abs() < 1.0, "none seen: this host's");
        clock.saw(here + 10.0, here - 0.002, here + 0.002);
        assert!((clock.now() - (here + 10.0)).abs() < 0.5, "10 s ahead");
        clock.saw(here - 10.0, here, here);
        assert!((clock.now() - (here - 10.0)).abs() < 0.5, "10 s behind");
    }
}
