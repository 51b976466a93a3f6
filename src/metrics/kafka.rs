//! The Kafka link's figures: jobs delivered, refused and in flight, broker errors, due-to-acked
//! latency, and whether the brokers take messages now. Written only when `[kafka]` is there: a
//! daemon without it shows none of these series.

use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// The link's figures.
#[derive(Debug)]
pub struct KafkaLink {
    /// Whether `[kafka]` turned the link on.
    on: AtomicBool,
    delivered: Counter,
    refused: Counter,
    given_back: Counter,
    requests: Counter,
    bad_requests: Counter,
    broker_errors: Counter,
    producers_remade: Counter,
    in_flight: Gauge,
    due_to_acked: Histogram,
    state: Mutex<LinkState>,
}

/// Whether the brokers take messages, as the last delivery found.
#[derive(Debug, Clone, Default)]
pub struct LinkState {
    /// `[kafka] brokers`.
    pub brokers: String,
    /// Since when (monotonic) deliveries fail, and the last reason; `None` while they succeed.
    pub failing: Option<(Instant, String)>,
    /// Whether a delivery has succeeded since the start.
    pub delivered_once: bool,
}

impl Default for KafkaLink {
    fn default() -> KafkaLink {
        KafkaLink {
            on: AtomicBool::new(false),
            delivered: Counter::default(),
            refused: Counter::default(),
            given_back: Counter::default(),
            requests: Counter::default(),
            bad_requests: Counter::default(),
            broker_errors: Counter::default(),
            producers_remade: Counter::default(),
            in_flight: Gauge::default(),
            // 1 ms to ~9 min.
            due_to_acked: Histogram::new(exponential_buckets(0.001, 2.0, 20)),
            state: Mutex::default(),
        }
    }
}

impl KafkaLink {
    /// Turns the series on, for a link to `brokers`.
    pub fn turn_on(&self, brokers: &str) {
        self.state.lock().expect("not poisoned").brokers = brokers.to_string();
        self.on.store(true, Ordering::Relaxed);
    }

    /// Whether the link is on.
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Jobs handed to the producer, not yet reported.
    pub fn sending(&self, jobs: usize) {
        self.in_flight.inc_by(jobs as i64);
    }

    /// Jobs the broker acknowledged, and acked in Redis; each fell due `late` before its ack.
    pub fn delivered(&self, late: impl IntoIterator<Item = Duration>) {
        let mut count = 0;
        for late in late {
            self.due_to_acked.observe(late.as_secs_f64());
            count += 1;
        }
        self.delivered.inc_by(count);
        self.in_flight.dec_by(count as i64);
        let mut state = self.state.lock().expect("not poisoned");
        state.failing = None;
        state.delivered_once = true;
    }

    /// Jobs Kafka refused for good: sent to the dead list.
    pub fn refused(&self, jobs: usize) {
        self.refused.inc_by(jobs as u64);
        self.in_flight.dec_by(jobs as i64);
    }

    /// Jobs not delivered for now (the broker down or slow): given back, to be delivered later.
    pub fn given_back(&self, jobs: usize, why: &str) {
        self.given_back.inc_by(jobs as u64);
        self.in_flight.dec_by(jobs as i64);
        let mut state = self.state.lock().expect("not poisoned");
        if state.failing.is_none() {
            state.failing = Some((Instant::now(), why.to_string()));
        } else if let Some((_, last)) = &mut state.failing {
            *last = why.to_string();
        }
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

    /// Delay requests read from `requests_topic`: `pushed` as jobs, and `bad` skipped.
    pub fn requests(&self, pushed: usize, bad: usize) {
        self.requests.inc_by(pushed as u64);
        self.bad_requests.inc_by(bad as u64);
    }

    /// The link's state now.
    pub fn state(&self) -> LinkState {
        self.state.lock().expect("not poisoned").clone()
    }

    /// `(delivered, refused, given back, in flight, broker errors)`, for the console.
    pub fn counts(&self) -> [u64; 5] {
        [
            self.delivered.get(),
            self.refused.get(),
            self.given_back.get(),
            self.in_flight.get().max(0) as u64,
            self.broker_errors.get(),
        ]
    }
}

impl Collector for KafkaLink {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        if !self.is_on() {
            return Ok(());
        }
        let counters = [
            (
                "kafka_delivered_jobs",
                "Jobs the Kafka broker acknowledged and that were then acked in Redis",
                &self.delivered,
            ),
            (
                "kafka_refused_jobs",
                "Jobs Kafka refused for good (no such topic, too large, not allowed): sent to the dead list",
                &self.refused,
            ),
            (
                "kafka_given_back_jobs",
                "Jobs not delivered for now (the broker down or slow): given back, delivered later",
                &self.given_back,
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
        self.in_flight.encode(encoder.encode_descriptor(
            "kafka_in_flight_jobs",
            "Jobs handed to the Kafka producer whose delivery is not reported yet",
            None,
            self.in_flight.metric_type(),
        )?)?;
        let up = Gauge::<i64>::default();
        up.set(i64::from(self.state().failing.is_none()));
        up.encode(encoder.encode_descriptor(
            "kafka_up",
            "1 while deliveries to Kafka succeed, 0 while they fail",
            None,
            up.metric_type(),
        )?)?;
        self.due_to_acked.encode(encoder.encode_descriptor(
            "kafka_due_to_acked_seconds",
            "From a job's due time to its ack in Redis after Kafka acknowledged it",
            None,
            self.due_to_acked.metric_type(),
        )?)?;
        Ok(())
    }
}
