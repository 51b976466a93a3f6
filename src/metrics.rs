//! What the daemon counts as it works (kept whether or not HTTP serves it: a counter costs
//! nanoseconds a batch), in Prometheus's text format, and the figures `/healthz` and the status page
//! show.

use std::collections::{BTreeSet, HashSet, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use delayer_client::Lengths;
use delayer_client::scripts::move_due::Batch;
use delayer_client::scripts::release::Released;
use delayer_client::time::unix_now;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// How many recent move lags the status page's percentiles are taken from.
const RECENT_LAGS: usize = 10_000;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TopicLabel {
    topic: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ScriptLabel {
    script: &'static str,
}

/// The daemon's figures.
pub struct Metrics {
    registry: Registry,
    moved: Family<TopicLabel, Counter>,
    orphans: Counter,
    delivered_again: Family<TopicLabel, Counter>,
    died: Family<TopicLabel, Counter>,
    script_seconds: Family<ScriptLabel, Histogram>,
    move_lag: Histogram,
    redis_up: Gauge,
    last_look: Gauge<f64, AtomicU64>,
    waiting: Gauge,
    due_now: Gauge,
    ready: Family<TopicLabel, Gauge>,
    /// The topics `ready` has a series for.
    measured: Mutex<HashSet<String>>,
    /// Every topic this daemon moved a job to: the ready lists `/metrics` measures (no SCAN).
    topics: Mutex<BTreeSet<String>>,
    /// The last [`RECENT_LAGS`] move lags, in seconds, for the status page.
    recent_lags: Mutex<VecDeque<f64>>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        let moved = Family::<TopicLabel, Counter>::default();
        let orphans = Counter::default();
        let delivered_again = Family::<TopicLabel, Counter>::default();
        let died = Family::<TopicLabel, Counter>::default();
        // 100 us to ~13 s.
        let script_seconds = Family::<ScriptLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0001, 2.0, 18))
        });
        // 1 ms to ~9 min.
        let move_lag = Histogram::new(exponential_buckets(0.001, 2.0, 20));
        let (redis_up, waiting, due_now) = (Gauge::default(), Gauge::default(), Gauge::default());
        let last_look = Gauge::<f64, AtomicU64>::default();
        let ready = Family::<TopicLabel, Gauge>::default();

        let mut registry = Registry::with_prefix("delayer");
        registry.register(
            "jobs_moved",
            "Jobs moved to their ready lists",
            moved.clone(),
        );
        registry.register(
            "orphans_dropped",
            "Jobs dropped from the pool because their data was gone",
            orphans.clone(),
        );
        registry.register(
            "jobs_delivered_again",
            "Reserved jobs delivered again because their time to run passed",
            delivered_again.clone(),
        );
        registry.register(
            "jobs_dead",
            "Reserved jobs sent to their dead list after their last attempt",
            died.clone(),
        );
        registry.register(
            "script_duration_seconds",
            "Script calls (move, release) and how long each took, round trip included",
            script_seconds.clone(),
        );
        registry.register(
            "move_lag_seconds",
            "How late each job was moved: moved at minus due at",
            move_lag.clone(),
        );
        registry.register(
            "redis_up",
            "1 when Redis answered the daemon's last look, else 0",
            redis_up.clone(),
        );
        registry.register(
            "last_look_timestamp_seconds",
            "When the daemon last looked at the pool successfully (unix time)",
            last_look.clone(),
        );
        registry.register("jobs_waiting", "Jobs in the pool", waiting.clone());
        registry.register(
            "jobs_due",
            "Jobs in the pool that are due now",
            due_now.clone(),
        );
        registry.register("ready_jobs", "Jobs on a topic's ready list", ready.clone());
        Metrics {
            registry,
            moved,
            orphans,
            delivered_again,
            died,
            script_seconds,
            move_lag,
            redis_up,
            last_look,
            waiting,
            due_now,
            ready,
            measured: Mutex::default(),
            topics: Mutex::default(),
            recent_lags: Mutex::new(VecDeque::with_capacity(RECENT_LAGS)),
        }
    }
}

impl Metrics {
    /// A call of the move script that took `took`, made at `now` (unix seconds).
    pub fn moved(&self, batch: &Batch, now: f64, took: Duration) {
        self.script("move", took);
        self.orphans.inc_by(batch.orphans.len() as u64);
        if batch.moved.is_empty() {
            return;
        }
        let mut topics = self.topics.lock().expect("not poisoned");
        for (topic, ids) in &batch.moved {
            let label = TopicLabel {
                topic: topic.clone(),
            };
            self.moved.get_or_create(&label).inc_by(ids.len() as u64);
            if !topics.contains(topic) {
                topics.insert(topic.clone());
            }
        }
        drop(topics);
        // Each job's due time lies between the batch's first and last (it takes them in due
        // order); spread evenly, which is exact for a whole second's burst.
        let count = batch.moved_count();
        let (Some(first), Some(last)) = (batch.first_due, batch.last_due) else {
            return;
        };
        let mut recent = self.recent_lags.lock().expect("not poisoned");
        for index in 0..count {
            let share = if count > 1 {
                index as f64 / (count - 1) as f64
            } else {
                0.0
            };
            let lag = (now - (first + (last - first) * share)).max(0.0);
            self.move_lag.observe(lag);
            if recent.len() == RECENT_LAGS {
                recent.pop_front();
            }
            recent.push_back(lag);
        }
    }

    /// A call of the release script that took `took`.
    pub fn released(&self, released: &Released, took: Duration) {
        self.script("release", took);
        for (topic, _) in released.retried.iter().chain(&released.blocked) {
            let label = TopicLabel {
                topic: topic.clone(),
            };
            self.delivered_again.get_or_create(&label).inc();
        }
        for (topic, _) in &released.dead {
            let label = TopicLabel {
                topic: topic.clone(),
            };
            self.died.get_or_create(&label).inc();
        }
    }

    /// A script call Redis answered: the loop is looking, even in the middle of a long drain.
    fn script(&self, script: &'static str, took: Duration) {
        self.script_seconds
            .get_or_create(&ScriptLabel { script })
            .observe(took.as_secs_f64());
        self.looked(true);
    }

    /// A look ended: Redis answered all of it (`true`), or failed it.
    pub fn looked(&self, answered: bool) {
        self.redis_up.set(i64::from(answered));
        if answered {
            self.last_look.set(unix_now());
        }
    }

    /// Whether Redis answered the last look, and when the last successful look was (unix time).
    pub fn last_look(&self) -> (bool, f64) {
        (self.redis_up.get() == 1, self.last_look.get())
    }

    /// The topics moved to so far.
    pub fn topics(&self) -> Vec<String> {
        self.topics
            .lock()
            .expect("not poisoned")
            .iter()
            .cloned()
            .collect()
    }

    /// The median, 99th percentile and maximum of the recent move lags, in seconds.
    pub fn recent_lag_percentiles(&self) -> Option<(f64, f64, f64)> {
        let mut lags: Vec<f64> = self
            .recent_lags
            .lock()
            .expect("not poisoned")
            .iter()
            .copied()
            .collect();
        if lags.is_empty() {
            return None;
        }
        lags.sort_by(f64::total_cmp);
        let at = |share: f64| lags[((lags.len() - 1) as f64 * share) as usize];
        Some((at(0.5), at(0.99), lags[lags.len() - 1]))
    }

    /// The Prometheus text format, with what Redis holds as of `lengths` (when it answered).
    pub fn encode(&self, lengths: Option<&Lengths>) -> String {
        if let Some(lengths) = lengths {
            self.waiting.set(lengths.waiting as i64);
            self.due_now.set(lengths.due_now as i64);
            let now: HashSet<String> = lengths.ready.iter().map(|(t, _)| t.clone()).collect();
            let mut measured = self.measured.lock().expect("not poisoned");
            // A list left out (of the wrong type now) must not keep its last length.
            for topic in measured.difference(&now) {
                self.ready.remove(&TopicLabel {
                    topic: topic.clone(),
                });
            }
            for (topic, length) in &lengths.ready {
                let label = TopicLabel {
                    topic: topic.clone(),
                };
                self.ready.get_or_create(&label).set(*length as i64);
            }
            *measured = now;
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}
