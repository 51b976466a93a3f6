//! One sink's deliveries, as its loop counts them: jobs delivered, refused, given back, tried
//! again and in flight, due-to-acked latency, and whether the receiver takes jobs now (for
//! `/healthz`). Each sink's series name them (`delayer_kafka_*`); these are the counts behind.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// One sink's deliveries.
#[derive(Debug)]
pub struct Deliveries {
    pub(super) delivered: Counter,
    pub(super) refused: Counter,
    pub(super) given_back: Counter,
    pub(super) retried: Counter,
    pub(super) in_flight: Gauge,
    pub(super) due_to_acked: Histogram,
    state: Mutex<SinkState>,
}

/// Whether a sink's receiver takes jobs, as the last deliveries found.
#[derive(Debug, Clone, Default)]
pub struct SinkState {
    /// Since when (monotonic) deliveries fail for want of the receiver, and the last reason;
    /// `None` while they succeed.
    pub failing: Option<(Instant, String)>,
    /// Whether a delivery has succeeded since the start.
    pub delivered_once: bool,
}

impl Default for Deliveries {
    fn default() -> Deliveries {
        Deliveries {
            delivered: Counter::default(),
            refused: Counter::default(),
            given_back: Counter::default(),
            retried: Counter::default(),
            in_flight: Gauge::default(),
            // 1 ms to ~9 min.
            due_to_acked: Histogram::new(exponential_buckets(0.001, 2.0, 20)),
            state: Mutex::default(),
        }
    }
}

impl Deliveries {
    /// Jobs handed to the sink, their outcome not known yet.
    pub fn sending(&self, jobs: usize) {
        self.in_flight.inc_by(jobs as i64);
    }

    /// Jobs the receiver acknowledged, and acked in Redis; each fell due `late` before its ack.
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

    /// Jobs refused for good, or out of tries: sent to the dead list.
    pub fn refused(&self, jobs: usize) {
        self.refused.inc_by(jobs as u64);
        self.in_flight.dec_by(jobs as i64);
    }

    /// Jobs whose try failed: given back, to be tried again after a wait.
    pub fn retried(&self, jobs: usize) {
        self.retried.inc_by(jobs as u64);
        self.in_flight.dec_by(jobs as i64);
    }

    /// Jobs not sent at a stop: given back untried.
    pub fn not_sent(&self, jobs: usize) {
        self.in_flight.dec_by(jobs as i64);
    }

    /// Jobs not delivered for want of the receiver (down or slow): given back untried, to be
    /// delivered later.
    pub fn given_back(&self, jobs: usize, why: &str) {
        self.given_back.inc_by(jobs as u64);
        self.in_flight.dec_by(jobs as i64);
        let mut state = self.state.lock().expect("not poisoned");
        match &mut state.failing {
            Some((_, last)) => *last = why.to_string(),
            None => state.failing = Some((Instant::now(), why.to_string())),
        }
    }

    /// The state now.
    pub fn state(&self) -> SinkState {
        self.state.lock().expect("not poisoned").clone()
    }

    /// `(delivered, refused, given back, tried again, in flight)`, for the console.
    pub fn counts(&self) -> [u64; 5] {
        [
            self.delivered.get(),
            self.refused.get(),
            self.given_back.get(),
            self.retried.get(),
            self.in_flight.get().max(0) as u64,
        ]
    }
}
