//! Jobs moved and delivered again per minute, per topic: from this daemon's counters, sampled
//! when the overview is made, over the last minute (or since the start, when that is shorter).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// The span rates are taken over.
const WINDOW: Duration = Duration::from_secs(60);

/// Counts by topic label: (moved, delivered again).
pub type Counts = HashMap<String, (u64, u64)>;

/// The samples of the last [`WINDOW`], and the last one before it.
pub struct Rates {
    samples: Mutex<VecDeque<(Instant, Counts)>>,
}

impl Rates {
    /// Every counter is 0 at `start`.
    pub fn new(start: Instant) -> Rates {
        Rates {
            samples: Mutex::new(VecDeque::from([(start, Counts::new())])),
        }
    }

    /// Takes `counts` as of `now`; each topic's (moved, delivered again) per minute since the
    /// oldest sample kept. `None` right at the start.
    pub fn per_minute(&self, now: Instant, counts: Counts) -> HashMap<String, (f64, f64)> {
        let mut samples = self.samples.lock().expect("not poisoned");
        // The newest sample at least a window old stays as the base.
        while samples.len() > 1 && now.duration_since(samples[1].0) >= WINDOW {
            samples.pop_front();
        }
        let (base_at, base) = samples.front().expect("never empty");
        let minutes = now.duration_since(*base_at).as_secs_f64() / 60.0;
        let rates = counts
            .iter()
            .filter(|_| minutes > 0.0)
            .map(|(topic, (moved, again))| {
                let (moved_then, again_then) = base.get(topic).copied().unwrap_or((0, 0));
                let rate = |now: u64, then: u64| now.saturating_sub(then) as f64 / minutes;
                (
                    topic.clone(),
                    (rate(*moved, moved_then), rate(*again, again_then)),
                )
            })
            .collect();
        // A sample a second at most is enough for a window of a minute.
        let newest = samples.back().expect("never empty").0;
        if now.duration_since(newest) >= Duration::from_secs(1) {
            samples.push_back((now, counts));
        }
        rates
    }
}

#[cfg(test)]
mod tests {
    use super::{Counts, Rates};
    use std::time::Duration;
    use tokio::time::Instant;

    fn counts(moved: u64, again: u64) -> Counts {
        Counts::from([("t".to_string(), (moved, again))])
    }

    #[test]
    fn rates_are_taken_since_the_start_then_over_the_last_minute() {
        let start = Instant::now();
        let rates = Rates::new(start);
        let at = |seconds| start + Duration::from_secs(seconds);
        assert_eq!(rates.per_minute(at(30), counts(60, 3))["t"], (120.0, 6.0));
        assert_eq!(rates.per_minute(at(60), counts(60, 3))["t"], (60.0, 3.0));
        // The base is now the sample at 30 s: 120 - 60 jobs in 60 s.
        assert_eq!(rates.per_minute(at(90), counts(120, 3))["t"], (60.0, 0.0));
        assert!(Rates::new(start).per_minute(start, counts(1, 1)).is_empty());
    }
}
