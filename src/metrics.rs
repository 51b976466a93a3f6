//! What the daemon counts as it works (kept whether or not HTTP serves it: a counter costs
//! nanoseconds a batch), in Prometheus's text format, and the figures `/healthz` and the console
//! show.

mod census;
mod deliveries;
mod kafka;
mod schedules;
mod text;
mod webhooks;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayer_wire::Topic;
use delayer_wire::scripts::move_due::Batch;
use delayer_wire::scripts::release::Released;
use delayer_wire::time::unix_now;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::history::{Tally, lags};
use crate::text::escape::capped;
pub use census::Census;
pub use deliveries::Deliveries;
pub use kafka::KafkaLink;
#[cfg(feature = "kafka")]
pub use kafka::RequestsFlow;
use schedules::ScheduleFamilies;
pub use schedules::{DEFAULT_LISTED_SCHEDULES, Schedules};
pub use text::Format;
use text::prometheus_text;
pub use webhooks::{Webhook, Webhooks};

/// How many recent move lags the console's percentiles are taken from.
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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

/// The daemon's figures.
pub struct Metrics {
    /// What the daemon counts itself: always known.
    registry: Registry,
    /// What Redis holds, as the last census read it: known only while Redis answers.
    holdings: Registry,
    moved: Family<TopicLabel, Counter>,
    orphans: Counter,
    compact_dropped: Family<ReasonLabel, Counter>,
    delivered_again: Family<TopicLabel, Counter>,
    died: Family<TopicLabel, Counter>,
    script_seconds: Family<ScriptLabel, Histogram>,
    move_lag: Histogram,
    redis_up: Gauge,
    last_look: Gauge<f64, AtomicU64>,
    waiting: Gauge,
    due_now: Gauge,
    ready: Family<TopicLabel, Gauge>,
    dead: Family<TopicLabel, Gauge>,
    unlisted_dead: Gauge,
    reserved: Gauge,
    paused: Family<TopicLabel, Gauge>,
    oldest_ready_age: Family<TopicLabel, Gauge<f64, AtomicU64>>,
    topics: Gauge,
    unlisted_topics: Gauge,
    unlisted_ready: Gauge,
    census_at: Gauge<f64, AtomicU64>,
    schedules: Arc<ScheduleFamilies>,
    /// The Kafka link's figures (none unless `[kafka]` turns it on).
    pub kafka: Arc<KafkaLink>,
    /// Each webhook's figures (none without `[webhook.NAME]` sections).
    pub webhooks: Arc<Webhooks>,
    /// Each sink that due jobs are delivered to, by what `/healthz` calls it ("Kafka at ...").
    sinks: Mutex<Vec<(String, Arc<Deliveries>)>>,
    /// The topics `ready` and `dead` have series for.
    measured: Mutex<HashSet<String>>,
    /// The topics the counters have series for, by label, each with the topic when the label
    /// names it whole (not cut): the first [`listed`](Self::listed) counted since the start; the
    /// others are counted as topic "".
    counted: Mutex<HashMap<String, Option<Topic>>>,
    /// The most topics a per-topic family has series for (`[http] max_listed_topics`).
    listed: AtomicUsize,
    /// Whether a poll has ended, well or not.
    polled: AtomicBool,
    /// When the last successful poll ended, by the monotonic clock (health's measure: a step of
    /// the wall clock must not make a healthy daemon look stalled).
    last_good_poll: Mutex<Option<Instant>>,
    /// The last [`RECENT_LAGS`] move lags, in seconds, for the console.
    recent_lags: Mutex<VecDeque<f64>>,
    /// What the history has not been told yet.
    history: Arc<Tally>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        let metrics = Metrics {
            // Each family is registered below, into one of these.
            registry: Registry::default(),
            holdings: Registry::default(),
            moved: Family::default(),
            orphans: Counter::default(),
            compact_dropped: Family::default(),
            delivered_again: Family::default(),
            died: Family::default(),
            // 100 us to ~13 s.
            script_seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.0001, 2.0, 18))
            }),
            // 1 ms to ~9 min.
            move_lag: Histogram::new(exponential_buckets(0.001, 2.0, 20)),
            redis_up: Gauge::default(),
            last_look: Gauge::default(),
            waiting: Gauge::default(),
            due_now: Gauge::default(),
            ready: Family::default(),
            dead: Family::default(),
            unlisted_dead: Gauge::default(),
            reserved: Gauge::default(),
            paused: Family::default(),
            oldest_ready_age: Family::default(),
            topics: Gauge::default(),
            unlisted_topics: Gauge::default(),
            unlisted_ready: Gauge::default(),
            census_at: Gauge::default(),
            schedules: Arc::default(),
            kafka: Arc::default(),
            webhooks: Arc::default(),
            sinks: Mutex::default(),
            measured: Mutex::default(),
            counted: Mutex::default(),
            listed: AtomicUsize::new(DEFAULT_LISTED_TOPICS),
            polled: AtomicBool::new(false),
            last_good_poll: Mutex::new(None),
            recent_lags: Mutex::new(VecDeque::with_capacity(RECENT_LAGS)),
            history: Arc::default(),
        };
        // In this order: it is the order `/metrics` lists them in.
        let mut registry = Registry::with_prefix("delayer");
        metrics.register_job_counts(&mut registry);
        metrics.register_script_times(&mut registry);
        metrics.register_polls(&mut registry);
        registry.register_collector(Box::new(metrics.kafka.clone()));
        registry.register_collector(Box::new(metrics.webhooks.clone()));
        let mut holdings = Registry::with_prefix("delayer");
        metrics.register_pool(&mut holdings);
        metrics.register_ready_lists(&mut holdings);
        metrics.register_dead_lists(&mut holdings);
        metrics.register_reservations(&mut holdings);
        metrics.register_topic_states(&mut holdings);
        holdings.register_collector(Box::new(metrics.schedules.clone()));
        Metrics {
            registry,
            holdings,
            ..metrics
        }
    }
}

/// The families, registered one group at a time.
impl Metrics {
    /// What the scripts did to jobs.
    fn register_job_counts(&self, registry: &mut Registry) {
        registry.register(
            "jobs_moved",
            "Jobs moved to their ready lists",
            self.moved.clone(),
        );
        registry.register(
            "orphans_dropped",
            "Jobs dropped from the pool because their data was gone",
            self.orphans.clone(),
        );
        // Each reason from the start, so that increase() sees the first drop.
        for reason in ["expired", "replaced"] {
            let _ = self.compact_dropped.get_or_create(&ReasonLabel { reason });
        }
        registry.register(
            "compact_jobs_dropped",
            "Compact jobs dropped: their data expired before they were staged, or a legacy client \
             pushed their id again (the newer job is delivered)",
            self.compact_dropped.clone(),
        );
        registry.register(
            "jobs_delivered_again",
            "Reserved jobs delivered again because their time to run passed",
            self.delivered_again.clone(),
        );
        registry.register(
            "jobs_dead",
            "Reserved jobs sent to their dead list after their last attempt",
            self.died.clone(),
        );
    }

    /// How long the script calls took, and how late the jobs moved.
    fn register_script_times(&self, registry: &mut Registry) {
        // Each series from the start, so that increase() sees the first call.
        for script in ["move", "release"] {
            let _ = self.script_seconds.get_or_create(&ScriptLabel { script });
        }
        registry.register(
            "script_duration_seconds",
            "Script calls (move, release) and how long each took, round trip included",
            self.script_seconds.clone(),
        );
        registry.register(
            "move_lag_seconds",
            "How late each job was moved: moved at minus due at",
            self.move_lag.clone(),
        );
    }

    /// Whether the polls work.
    fn register_polls(&self, registry: &mut Registry) {
        registry.register(
            "redis_up",
            "1 when Redis answered the daemon's last look, else 0",
            self.redis_up.clone(),
        );
        registry.register(
            "last_look_timestamp_seconds",
            "When the daemon last looked at the pool successfully (unix time)",
            self.last_look.clone(),
        );
    }

    /// The pool's jobs, as the census read them.
    fn register_pool(&self, holdings: &mut Registry) {
        holdings.register(
            "jobs_waiting",
            "Jobs waiting: in the pool, or compact",
            self.waiting.clone(),
        );
        holdings.register(
            "jobs_due",
            "Jobs in the pool that are due now",
            self.due_now.clone(),
        );
    }

    /// The ready lists' lengths, the topics they were read for, and when the census read them.
    fn register_ready_lists(&self, holdings: &mut Registry) {
        holdings.register(
            "ready_jobs",
            "Jobs on a topic's ready list, for the topics with the most",
            self.ready.clone(),
        );
        holdings.register(
            "ready_jobs_unlisted",
            "Jobs on the ready lists of the topics ready_jobs leaves out",
            self.unlisted_ready.clone(),
        );
        holdings.register(
            "topics",
            "Topics whose ready lists were read: the registry's and those counted here",
            self.topics.clone(),
        );
        holdings.register(
            "topics_unlisted",
            "Topics ready_jobs leaves out (beyond [http] max_listed_topics)",
            self.unlisted_topics.clone(),
        );
        holdings.register(
            "census_timestamp_seconds",
            "When jobs_waiting, jobs_due, ready_jobs and topics were read (unix time)",
            self.census_at.clone(),
        );
    }

    /// The dead lists' lengths.
    fn register_dead_lists(&self, holdings: &mut Registry) {
        holdings.register(
            "dead_jobs",
            "Jobs on a topic's dead list, for the topics ready_jobs names",
            self.dead.clone(),
        );
        holdings.register(
            "dead_jobs_unlisted",
            "Jobs on the dead lists of the topics ready_jobs leaves out",
            self.unlisted_dead.clone(),
        );
    }

    /// The reservations.
    fn register_reservations(&self, holdings: &mut Registry) {
        holdings.register(
            "reserved_jobs",
            "Jobs reserved by consumers and not yet acked",
            self.reserved.clone(),
        );
    }

    /// Each topic's oldest ready job, and its pause.
    fn register_topic_states(&self, holdings: &mut Registry) {
        holdings.register(
            "oldest_ready_age_seconds",
            "How long the job next in line on a topic's ready list has been ready, for the topics \
             ready_jobs names (none while the list is empty)",
            self.oldest_ready_age.clone(),
        );
        holdings.register(
            "topic_paused",
            "1 for each paused topic: its due jobs wait in the pool until it is resumed",
            self.paused.clone(),
        );
    }
}

impl Metrics {
    /// Compact jobs dropped: `expired` whose data expired, `replaced` pushed again by a legacy
    /// client.
    pub fn compact_dropped(&self, expired: u64, replaced: u64) {
        for (reason, count) in [("expired", expired), ("replaced", replaced)] {
            if count > 0 {
                self.compact_dropped
                    .get_or_create(&ReasonLabel { reason })
                    .inc_by(count);
            }
        }
    }

    /// A call of the move script that took `took`, made at `now` (unix seconds).
    pub fn moved(&self, batch: &Batch, now: f64, took: Duration) {
        self.script("move", took);
        self.orphans.inc_by(batch.orphans.len() as u64);
        self.compact_dropped(0, batch.replaced.len() as u64);
        if batch.moved.is_empty() {
            return;
        }
        self.history.moved(batch, now);
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
        for lag in lags(first, last, count, now) {
            self.move_lag.observe(lag);
            if recent.len() == RECENT_LAGS {
                recent.pop_front();
            }
            recent.push_back(lag);
        }
    }

    /// A call of the release script that took `took`, made at `now` (unix seconds).
    pub fn released(&self, released: &Released, now: f64, took: Duration) {
        self.script("release", took);
        self.history.released(released, now);
        for (topic, _) in released.retried.iter().chain(&released.blocked) {
            self.delivered_again.get_or_create(&self.label(topic)).inc();
        }
        for (topic, _) in &released.dead {
            self.died.get_or_create(&self.label(topic)).inc();
        }
    }

    /// What the history has not been told yet (shared with the task that writes it).
    pub fn history(&self) -> Arc<Tally> {
        self.history.clone()
    }

    /// The most topics a per-topic family has series for; the others are summed.
    pub fn set_listed(&self, most: usize) {
        self.listed.store(most, Ordering::Relaxed);
    }

    /// How many topics a per-topic family has series for, at most.
    pub fn listed(&self) -> usize {
        self.listed.load(Ordering::Relaxed)
    }

    /// The most schedules a per-schedule family has series for; the others are counted.
    pub fn set_listed_schedules(&self, most: usize) {
        self.schedules.set_listed(most);
    }

    /// How many schedules a per-schedule family has series for, at most.
    pub fn listed_schedules(&self) -> usize {
        self.schedules.listed()
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

    /// A script call Redis answered: the loop is polling, even in the middle of a long drain.
    fn script(&self, script: &'static str, took: Duration) {
        self.script_seconds
            .get_or_create(&ScriptLabel { script })
            .observe(took.as_secs_f64());
        self.polled(true);
    }

    /// A poll ended: Redis answered all of it (`true`), or failed it.
    pub fn polled(&self, answered: bool) {
        self.polled.store(true, Ordering::Relaxed);
        self.redis_up.set(i64::from(answered));
        if answered {
            self.last_look.set(unix_now());
            *self.last_good_poll.lock().expect("not poisoned") = Some(Instant::now());
        }
    }

    /// Whether a poll has ended yet, well or not. This and [`last_look`](Self::last_look) keep
    /// the word of `/healthz` and of the metric `last_look_timestamp_seconds`: a look is a poll.
    pub fn has_looked(&self) -> bool {
        self.polled.load(Ordering::Relaxed)
    }

    /// Counts a sink's deliveries in `deliveries`, for `/healthz` to tell when its receiver does
    /// not take jobs; `title` names it there ("Kafka at k1:9092").
    pub fn add_sink(&self, title: String, deliveries: Arc<Deliveries>) {
        let mut sinks = self.sinks.lock().expect("not poisoned");
        sinks.push((title, deliveries));
    }

    /// Each sink's title and deliveries, in the order they were added.
    pub fn sinks(&self) -> Vec<(String, Arc<Deliveries>)> {
        self.sinks.lock().expect("not poisoned").clone()
    }

    /// Whether Redis answered the last poll, and how long ago the last successful poll was.
    pub fn last_look(&self) -> (bool, Option<Duration>) {
        let last = *self.last_good_poll.lock().expect("not poisoned");
        (self.redis_up.get() == 1, last.map(|at| at.elapsed()))
    }

    /// The topics the counters have series for (at most [`listed`](Self::listed)), less those
    /// too long for a label to name whole: those this daemon moved jobs to first, whether or not
    /// the registry lists them.
    pub fn counted_topics(&self) -> Vec<Topic> {
        let counted = self.counted.lock().expect("not poisoned");
        counted.values().flatten().cloned().collect()
    }

    /// `topic`'s counts of jobs moved and delivered again, by its counters' label (its own, or
    /// "" with the topics beyond the first counted).
    pub fn counts(&self, topic: &Topic) -> (String, u64, u64) {
        let label = self.label(topic);
        let moved = self.moved.get_or_create(&label).get();
        let again = self.delivered_again.get_or_create(&label).get();
        (label.topic, moved, again)
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
        self.unlisted_dead.set(census.unlisted_dead as i64);
        self.reserved.set(census.reserved as i64);
        self.census_at.set(census.read_at);
        self.schedules.hold(census.schedules.clone());
        // The counters of each topic listed (as far as they may have series) from the start: a
        // series that appears at its first event hides that event from increase().
        let mut labels: Vec<TopicLabel> =
            census.listed_topics.iter().map(|t| self.label(t)).collect();
        if census.unlisted_topics > 0 {
            labels.push(TopicLabel {
                topic: String::new(),
            });
        }
        for label in &labels {
            let _ = self.moved.get_or_create(label);
            let _ = self.delivered_again.get_or_create(label);
            let _ = self.died.get_or_create(label);
        }
        let now: HashSet<String> = census.listed.iter().map(|(t, _)| t.clone()).collect();
        let mut measured = self.measured.lock().expect("not poisoned");
        // A topic no longer listed (fewer jobs than others now, or a list of the wrong type)
        // must not keep its last length.
        for topic in measured.difference(&now) {
            let label = TopicLabel {
                topic: topic.clone(),
            };
            self.ready.remove(&label);
            self.dead.remove(&label);
        }
        for ((topic, ready), (_, dead)) in census.listed.iter().zip(&census.dead) {
            let label = TopicLabel {
                topic: topic.clone(),
            };
            self.ready.get_or_create(&label).set(*ready as i64);
            self.dead.get_or_create(&label).set(*dead as i64);
        }
        *measured = now;
        // An empty list has no age: its series goes, rather than keep the last one.
        self.oldest_ready_age.clear();
        for (topic, age) in &census.oldest_ready_age {
            self.oldest_ready_age
                .get_or_create(&TopicLabel {
                    topic: topic.clone(),
                })
                .set(*age);
        }
        // Few, and each worth an alert: every one of them, not only the listed.
        self.paused.clear();
        for topic in &census.paused {
            self.paused
                .get_or_create(&TopicLabel {
                    topic: topic.clone(),
                })
                .set(1);
        }
    }

    /// The figures in `format`; what Redis holds only when it is known (`holdings`): while Redis
    /// does not answer, an old or zero count would pass for a fresh one.
    pub fn encode(&self, holdings: bool, format: Format) -> String {
        use prometheus_client::encoding::text::{encode_eof, encode_registry};
        let mut text = String::new();
        let unfailing = "writing to a String cannot fail";
        encode_registry(&mut text, &self.registry).expect(unfailing);
        if holdings {
            encode_registry(&mut text, &self.holdings).expect(unfailing);
        }
        match format {
            Format::OpenMetrics => {
                encode_eof(&mut text).expect(unfailing);
                text
            }
            Format::Prometheus => prometheus_text(&text),
        }
    }
}
