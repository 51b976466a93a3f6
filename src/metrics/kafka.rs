//! The Kafka link's figures: its deliveries (jobs delivered, refused and in flight, due-to-acked
//! latency, whether the brokers take messages now: see [`Deliveries`]), broker errors, and the
//! delay requests waiting in each partition read. Written only when `[kafka]` is there: a daemon
//! without it shows none of these series.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::gauge::Gauge;

use super::Deliveries;

/// The link's figures.
#[derive(Debug)]
pub struct KafkaLink {
    /// Whether `[kafka]` turned the link on.
    on: AtomicBool,
    /// `[kafka] brokers`.
    brokers: Mutex<String>,
    /// Due jobs delivered to Kafka (Kafka out).
    pub out: Arc<Deliveries>,
    requests: Counter,
    bad_requests: Counter,
    superseded_requests: Counter,
    broker_errors: Counter,
    producers_remade: Counter,
    /// The requests topic's partitions this daemon reads; none before librdkafka first told.
    requests_read: Mutex<Option<RequestsRead>>,
}

/// How long a partition of the requests topic may hold requests without its offset moving before
/// it is said to be stalled (a warning, `/healthz` 503): a batch is pushed in milliseconds, and
/// librdkafka tells the offsets every 5 s.
pub const REQUESTS_STALL: Duration = Duration::from_secs(30);

/// The requests topic's partitions this daemon reads, as librdkafka's statistics last told.
#[derive(Debug, Clone, Default)]
struct RequestsRead {
    topic: String,
    partitions: BTreeMap<i32, Waiting>,
}

/// One partition of the requests topic.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    /// Requests after the committed offset.
    lag: i64,
    committed: i64,
    /// Since when the committed offset has not moved while requests wait.
    still_since: Option<Instant>,
    /// Whether its stall was told.
    told: bool,
}

/// A partition of the requests topic that stopped moving, or moves again (for the log).
#[derive(Debug, Clone, PartialEq)]
pub enum RequestsFlow {
    /// `waiting` requests wait in `partition` of `topic`, its offset still for `still`.
    Stalled {
        topic: String,
        partition: i32,
        waiting: i64,
        still: Duration,
    },
    /// Its offset moved again, or nothing waits.
    Moving { topic: String, partition: i32 },
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PartitionLabel {
    partition: i32,
}

impl Default for KafkaLink {
    fn default() -> KafkaLink {
        KafkaLink {
            on: AtomicBool::new(false),
            brokers: Mutex::default(),
            out: Arc::default(),
            requests: Counter::default(),
            bad_requests: Counter::default(),
            superseded_requests: Counter::default(),
            broker_errors: Counter::default(),
            producers_remade: Counter::default(),
            requests_read: Mutex::default(),
        }
    }
}

impl KafkaLink {
    /// Turns the series on, for a link to `brokers`.
    pub fn turn_on(&self, brokers: &str) {
        *self.brokers.lock().expect("not poisoned") = brokers.to_string();
        self.on.store(true, Ordering::Relaxed);
    }

    /// `[kafka] brokers`.
    pub fn brokers(&self) -> String {
        self.brokers.lock().expect("not poisoned").clone()
    }

    /// Whether the link is on.
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// An error librdkafka reported about a broker (a connection lost, a timeout).
    pub fn broker_error(&self) {
        self.broker_errors.inc();
    }

    /// The producer made again after a fatal error.
    pub fn producer_remade(&self) {
        self.producers_remade.inc();
    }

    /// How many times the producer was made again.
    #[cfg(test)]
    pub fn producers_remade(&self) -> u64 {
        self.producers_remade.get()
    }

    /// Delay requests read from `requests_topic`: `pushed` as jobs, `bad` skipped, and
    /// `superseded` left out for a later request of the same key.
    pub fn requests(&self, pushed: usize, bad: usize, superseded: usize) {
        self.requests.inc_by(pushed as u64);
        self.bad_requests.inc_by(bad as u64);
        self.superseded_requests.inc_by(superseded as u64);
    }

    /// What librdkafka told of the partitions of `topic` (the requests topic) this daemon reads:
    /// each one's requests waiting after the committed offset, and that offset. Returns the
    /// partitions that just stalled (requests wait, the offset still for [`REQUESTS_STALL`]) and
    /// those that move again.
    pub fn requests_read(&self, topic: &str, partitions: &[(i32, i64, i64)]) -> Vec<RequestsFlow> {
        let mut held = self.requests_read.lock().expect("not poisoned");
        let before = held.take().unwrap_or_default();
        let mut now = RequestsRead {
            topic: topic.to_string(),
            partitions: BTreeMap::new(),
        };
        let mut flows = Vec::new();
        for &(partition, lag, committed) in partitions {
            let last = before.partitions.get(&partition);
            let still_since = if lag <= 0 {
                None
            } else {
                match last {
                    Some(last) if last.committed == committed => {
                        Some(last.still_since.unwrap_or_else(Instant::now))
                    }
                    _ => Some(Instant::now()),
                }
            };
            let stalled = still_since.filter(|since| since.elapsed() >= REQUESTS_STALL);
            let was_told = last.is_some_and(|last| last.told);
            if let Some(since) = stalled
                && !was_told
            {
                flows.push(RequestsFlow::Stalled {
                    topic: topic.to_string(),
                    partition,
                    waiting: lag,
                    still: since.elapsed(),
                });
            }
            if stalled.is_none() && was_told {
                flows.push(RequestsFlow::Moving {
                    topic: topic.to_string(),
                    partition,
                });
            }
            now.partitions.insert(
                partition,
                Waiting {
                    lag,
                    committed,
                    still_since,
                    told: stalled.is_some(),
                },
            );
        }
        *held = Some(now);
        flows
    }

    /// The partition of the requests topic stalled longest, if one is: the topic, the partition,
    /// the requests waiting in it and for how long its offset has not moved.
    pub fn requests_stalled(&self) -> Option<(String, i32, i64, Duration)> {
        let held = self.requests_read.lock().expect("not poisoned");
        let read = held.as_ref()?;
        read.partitions
            .iter()
            .filter_map(|(partition, waiting)| {
                let still = waiting.still_since?.elapsed();
                (still >= REQUESTS_STALL).then_some((*partition, waiting.lag, still))
            })
            .max_by_key(|(_, _, still)| *still)
            .map(|(partition, lag, still)| (read.topic.clone(), partition, lag, still))
    }

    /// How many errors librdkafka reported about the brokers, for the console.
    pub fn broker_errors(&self) -> u64 {
        self.broker_errors.get()
    }
}

impl Collector for KafkaLink {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        if !self.is_on() {
            return Ok(());
        }
        let out = &self.out;
        let counters = [
            (
                "kafka_delivered_jobs",
                "Jobs the Kafka broker acknowledged and that were then acked in Redis",
                &out.delivered,
            ),
            (
                "kafka_refused_jobs",
                "Jobs Kafka refused for good (no such topic, too large, not allowed): sent to the dead list",
                &out.refused,
            ),
            (
                "kafka_given_back_jobs",
                "Jobs not delivered for now (the broker down or slow): given back, delivered later",
                &out.given_back,
            ),
            (
                "kafka_requests",
                "Delay requests read from [kafka] requests_topic and pushed as jobs",
                &self.requests,
            ),
            (
                "kafka_bad_requests",
                "Delay requests skipped as bad (no topic or time, not a JSON envelope, refused by the push): logged with their offsets",
                &self.bad_requests,
            ),
            (
                "kafka_superseded_requests",
                "Delay requests left out for a later request of the same key read with them (in Kafka, a key's later message is the current one)",
                &self.superseded_requests,
            ),
            (
                "kafka_broker_errors",
                "Errors librdkafka reported about the brokers (connections lost, timeouts)",
                &self.broker_errors,
            ),
            (
                "kafka_producers_remade",
                "Times the Kafka producer failed for good (a fatal error) and was made again",
                &self.producers_remade,
            ),
        ];
        for (name, help, counter) in counters {
            counter.encode(encoder.encode_descriptor(
                name,
                help,
                None,
                counter.metric_type(),
            )?)?;
        }
        out.in_flight.encode(encoder.encode_descriptor(
            "kafka_in_flight_jobs",
            "Jobs handed to the Kafka producer whose delivery is not reported yet",
            None,
            out.in_flight.metric_type(),
        )?)?;
        let up = Gauge::<i64>::default();
        up.set(i64::from(out.state().failing.is_none()));
        up.encode(encoder.encode_descriptor(
            "kafka_up",
            "1 while deliveries to Kafka succeed, 0 while they fail",
            None,
            up.metric_type(),
        )?)?;
        out.due_to_acked.encode(encoder.encode_descriptor(
            "kafka_due_to_acked_seconds",
            "From a job's due time to its ack in Redis after Kafka acknowledged it",
            None,
            out.due_to_acked.metric_type(),
        )?)?;
        let read = self.requests_read.lock().expect("not poisoned").clone();
        if let Some(read) = read {
            let mut family = encoder.encode_descriptor(
                "kafka_requests_lag",
                "Delay requests waiting in a partition of [kafka] requests_topic that this daemon reads (after the committed offset)",
                None,
                MetricType::Gauge,
            )?;
            for (partition, waiting) in &read.partitions {
                let label = PartitionLabel {
                    partition: *partition,
                };
                ConstGauge::new(waiting.lag).encode(family.encode_family(&label)?)?;
            }
            let still = read
                .partitions
                .values()
                .filter_map(|waiting| waiting.still_since)
                .map(|since| since.elapsed().as_secs_f64())
                .fold(0.0, f64::max);
            let metric = ConstGauge::new(still);
            metric.encode(encoder.encode_descriptor(
                "kafka_requests_stalled_seconds",
                "How long delay requests have waited in a partition of [kafka] requests_topic without its offset moving (the longest; 0 while they move)",
                None,
                metric.metric_type(),
            )?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_whose_offset_stands_still_while_requests_wait_is_told_once() {
        let link = KafkaLink::default();
        assert_eq!(link.requests_read("req", &[(0, 0, 10), (1, 5, 3)]), []);
        assert_eq!(link.requests_stalled(), None, "not yet");
        // Moved: counted afresh.
        assert_eq!(link.requests_read("req", &[(0, 0, 10), (1, 5, 4)]), []);
        let mut held = link.requests_read.lock().unwrap();
        let still = held.as_mut().unwrap().partitions.get_mut(&1).unwrap();
        still.still_since = Some(Instant::now() - REQUESTS_STALL);
        drop(held);
        let flows = link.requests_read("req", &[(0, 0, 10), (1, 6, 4)]);
        assert!(
            matches!(
                &flows[..],
                [RequestsFlow::Stalled {
                    partition: 1,
                    waiting: 6,
                    ..
                }]
            ),
            "{flows:?}"
        );
        assert_eq!(
            link.requests_read("req", &[(0, 0, 10), (1, 6, 4)]),
            [],
            "told once"
        );
        let (topic, partition, waiting, still) = link.requests_stalled().unwrap();
        assert_eq!((topic.as_str(), partition, waiting), ("req", 1, 6));
        assert!(still >= REQUESTS_STALL);
        let flows = link.requests_read("req", &[(0, 0, 10), (1, 0, 10)]);
        assert_eq!(
            flows,
            [RequestsFlow::Moving {
                topic: "req".into(),
                partition: 1
            }]
        );
        assert_eq!(link.requests_stalled(), None);
    }
}
