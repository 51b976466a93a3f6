//! What the daemon counts as it works (kept whether or not HTTP serves it: a counter costs
//! nanoseconds a batch), in Prometheus's text format, and the figures `/healthz` and the status page
//! show.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use delayer_client::Topic;
use delayer_client::scripts::move_due::Batch;
use delayer_client::scripts::release::Released;
use delayer_client::time::unix_now;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::text::escape::capped;

/// How many recent move lags the status page's percentiles are taken from.
const RECENT_LAGS: usize = 10_000;
/// The most topics with series of their own unless `[http] max_listed_topics` says otherwise.
pub const DEFAULT_LISTED_TOPICS: usize = 500;

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
    topics: Gauge,
    unlisted_topics: Gauge,
    unlisted_ready: Gauge,
    census_at: Gauge<f64, AtomicU64>,
    /// The topics `ready` has a series for.
    measured: Mutex<HashSet<String>>,
    /// The topics the counters have series for, by label, each with the topic when the label
    /// names it whole (not cut): the first [`listed`](Self::listed) counted since the start; the
    /// others are counted as topic "".
    counted: Mutex<HashMap<String, Option<Topic>>>,
    /// The most topics a per-topic family has series for (`[http] max_listed_topics`).
    listed: AtomicUsize,
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
        let (topics, unlisted_topics, unlisted_ready) =
            (Gauge::default(), Gauge::default(), Gauge::default());
        let census_at = Gauge::<f64, AtomicU64>::default();

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
        registry.register(
            "ready_jobs",
            "Jobs on a topic's ready list, for the topics with the most",
            ready.clone(),
        );
        registry.register(
            "ready_jobs_unlisted",
            "Jobs on the ready lists of the topics ready_jobs leaves out",
            unlisted_ready.clone(),
        );
        registry.register(
            "topics",
            "Topics whose ready lists were read: the registry's and those counted here",
            topics.clone(),
        );
        registry.register(
            "topics_unlisted",
            "Topics ready_jobs leaves out (beyond [http] max_listed_topics)",
            unlisted_topics.clone(),
        );
        registry.register(
            "census_timestamp_seconds",
            "When jobs_waiting, jobs_due, ready_jobs and topics were read (unix time)",
            census_at.clone(),
        );
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
            topics,
            unlisted_topics,
            unlisted_ready,
            census_at,
            measured: Mutex::default(),
            counted: Mutex::default(),
            listed: AtomicUsize::new(DEFAULT_LISTED_TOPICS),
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
        for (topic, ids) in &batch.moved {
            let label = self.label(topic);
            self.moved.get_or_create(&label).inc_by(ids.len() as u64);
        }
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
            self.delivered_again.get_or_create(&self.label(topic)).inc();
        }
        for (topic, _) in &released.dead {
            self.died.get_or_create(&self.label(topic)).inc();
        }
    }

    /// The most topics a per-topic family has series for; the others are summed.
    pub fn set_listed(&self, most: usize) {
        self.listed.store(most, Ordering::Relaxed);
    }

    /// How many topics a per-topic family has series for, at most.
    pub fn listed(&self) -> usize {
        self.listed.load(Ordering::Relaxed)
    }

    /// The label of `topic`'s counters: its own while it is one of the first [`listed`] topics
    /// counted; else "", which sums the rest. A counter's series must not come and go, so those
    /// first topics keep theirs.
    ///
    /// [`listed`]: Self::listed
    fn label(&self, topic: &Topic) -> TopicLabel {
        let label = capped(topic);
        let mut counted = self.counted.lock().expect("not poisoned");
        if !counted.contains_key(label.as_ref()) {
            if counted.len() >= self.listed() {
                return TopicLabel {
                    topic: String::new(),
                };
            }
            // Whole when it is the topic as it prints (escaped, when it is not UTF-8), not cut.
            let whole = label == topic.to_string();
            counted.insert(label.to_string(), whole.then(|| topic.clone()));
        }
        TopicLabel {
            topic: label.into_owned(),
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

    /// The topics the counters have series for (at most [`listed`](Self::listed)), less those
    /// too long for a label to name whole: those this daemon moved jobs to first, whether or not
    /// the registry lists them.
    pub fn counted_topics(&self) -> Vec<Topic> {
        let counted = self.counted.lock().expect("not poisoned");
        counted.values().flatten().cloned().collect()
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

    /// What Redis holds, as a census read it: the gauges take its figures.
    pub fn hold(&self, census: &Census) {
        self.waiting.set(census.waiting as i64);
        self.due_now.set(census.due_now as i64);
        self.topics.set(census.topics as i64);
        self.unlisted_topics.set(census.unlisted_topics as i64);
        self.unlisted_ready.set(census.unlisted_ready as i64);
        self.census_at.set(census.read_at);
        let now: HashSet<String> = census.listed.iter().map(|(t, _)| t.clone()).collect();
        let mut measured = self.measured.lock().expect("not poisoned");
        // A topic no longer listed (fewer jobs than others now, or a list of the wrong type)
        // must not keep its last length.
        for topic in measured.difference(&now) {
            self.ready.remove(&TopicLabel {
                topic: topic.clone(),
            });
        }
        for (topic, length) in &census.listed {
            let label = TopicLabel {
                topic: topic.clone(),
            };
            self.ready.get_or_create(&label).set(*length as i64);
        }
        *measured = now;
    }

    /// The Prometheus text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

/// What Redis holds, read in whole: the pools' counts, and the ready lists' lengths of the
/// topics with the most ready jobs and the sum of the others'.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Census {
    /// Jobs in the pool (or pools).
    pub waiting: u64,
    /// Of those, the ones due now.
    pub due_now: u64,
    /// When the next job not yet due falls due.
    pub next_due: Option<SystemTime>,
    /// Topics whose ready lists were read (those holding another type of value included, which
    /// are left out of the rest).
    pub topics: u64,
    /// The topics with the most ready jobs, most first (ties by name), as labels name them;
    /// at most `[http] max_listed_topics`.
    pub listed: Vec<(String, u64)>,
    /// The other topics whose ready lists were read.
    pub unlisted_topics: u64,
    /// Their ready jobs.
    pub unlisted_ready: u64,
    /// When the read began (unix time).
    pub read_at: f64,
}
