//! Delivery: one loop reserves the due jobs of a sink's topics, hands each to the sink, and acks,
//! gives back or dead-lists it as the sink reports; a [`Sink`] (Kafka, a webhook) only says how to send one
//! job and what a failure means. At least once and never early; each sink runs a loop of its own,
//! so that one that hangs holds up no other.

mod patterns;
mod reserve;
mod settle;
#[cfg(test)]
mod tests;
mod topics;

use std::sync::Mutex;
use std::time::Duration;

use delayer_client::{Client, Job};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use crate::metrics::Deliveries;
pub use patterns::matches;

/// Where due jobs go: how to send one, and what its failure means. The loop does the rest
/// (reserve, ack, give back, dead-list, touch, count).
pub trait Sink: Sync {
    /// What its log lines start with: "kafka".
    fn name(&self) -> &str;

    /// Where it sends (Kafka's brokers), for the log.
    fn address(&self) -> &str;

    /// The delayer topics whose due jobs it takes: names, or patterns where `*` matches any run
    /// of characters. A name is delivered before a push registers its topic.
    fn topics(&self) -> &[String];

    /// Whether it takes the due jobs of `topic`; by default, whether [`topics`](Sink::topics)
    /// matches it.
    fn takes(&self, topic: &str) -> bool {
        matches(self.topics(), topic)
    }

    /// How long a job is reserved for its delivery (touched every third of it while it waits).
    fn ttr(&self) -> Duration;

    /// The most jobs on their way at once (reserved, sent, not yet reported).
    fn room(&self) -> usize;

    /// How long a delivered job's data stays readable by `get`; `None`: deleted at its ack.
    fn keep(&self) -> Option<Duration>;

    /// How long `job`, whose delivery [failed](Outcome::Failed) at its `attempts`th try, waits
    /// before it is tried again; `None`: it was the last try, and it goes to the dead list.
    fn retry(&self, job: &Job) -> Option<Duration>;

    /// Sends `job`; what became of it, once known. The loop awaits up to [`room`](Sink::room)
    /// sends at once, touching their reservations meanwhile, so a send may take its time.
    fn send(&self, job: &Job) -> impl Future<Output = Outcome> + Send;
}

/// What became of a job handed to a sink.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Delivered: acked.
    Delivered,
    /// Refused for good (no such topic, too large): to the dead list with the reason.
    Refused(String),
    /// This try failed (a reply that asks for a retry): tried again after `after` when the
    /// receiver said so, else after the sink's [retry](Sink::retry) delay, or to the dead list
    /// with the reason once its tries are spent.
    Failed {
        /// Why, for the dead list and the log.
        why: String,
        /// The receiver's own wait (a `Retry-After`), before the sink's.
        after: Option<Duration>,
    },
    /// Not delivered for want of the receiver (the brokers down): given back untried, while the
    /// loop probes with one job at a time, with a backoff, until one gets through.
    Unreachable(String),
    /// Not sent, as the daemon stops before its turn came (a webhook's flow control held it):
    /// given back untried, for another daemon or the next start.
    NotSent,
}

/// The most jobs reserved at once (the client's most for one call).
const BATCH: usize = delayer_client::MAX_BATCH;
/// How long the loops wait to gather work into one Redis call (the room freed for a reserve,
/// outcomes to settle), rather than make one call a job.
const GATHER_WAIT: Duration = Duration::from_millis(1);
/// The first and the longest wait after a delivery failed for want of the receiver.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MOST_BACKOFF: Duration = Duration::from_secs(30);

/// What the two loops share: the room left in flight, and the backoff.
struct Flow {
    /// A permit a job in flight.
    room: Semaphore,
    /// The wait before the next probe while the receiver fails; `None` while it takes jobs.
    backoff: Mutex<Option<Duration>>,
}

/// Delivers the due jobs `sink` takes until `stop`, counting in `figures`. Two loops: one
/// reserves due jobs and hands them to the sink, while the other settles each as its outcome
/// comes (acked, dead-listed, given back or tried again later). At a stop, the jobs in flight are settled first, so a
/// stop delivers nothing twice.
pub async fn run(
    client: &Client,
    sink: &impl Sink,
    figures: &Deliveries,
    stop: &CancellationToken,
) {
    let flow = Flow {
        room: Semaphore::new(sink.room()),
        backoff: Mutex::new(None),
    };
    let (reserved, to_send) = mpsc::unbounded_channel();
    let reserving = reserve::run(client, sink, figures, stop, &flow, reserved);
    let settling = settle::run(client, sink, figures, &flow, to_send);
    tokio::join!(reserving, settling);
}
