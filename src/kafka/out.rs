//! Kafka out: due jobs of the configured topics, reserved as the Worker reserves them, produced to
//! Kafka, and acked in Redis only once the broker reported their delivery. At least once and never
//! early: a daemon killed in between leaves its jobs to be delivered again after their time to
//! run, with the same key. Several daemons share the work, since a reserve is atomic.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use delayer_client::{Client, Job, Topic};
use futures_util::future::join_all;
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::patterns::matches;
use super::producer::Reports;
use super::record::{self, Message};
use super::refusal;
use super::settings::{KafkaSettings, MessageForm};
use crate::metrics::KafkaLink;

/// The most jobs reserved and sent at once.
const BATCH: usize = 500;
/// How long a reserve waits for a job before the loop looks again (at its stop, and its topics).
const RESERVE_WAIT: Duration = Duration::from_millis(500);
/// How often the registry of topics is read again for topics the patterns match.
const TOPICS_EVERY: Duration = Duration::from_secs(2);
/// The first and the longest wait after a delivery failed for want of a broker.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MOST_BACKOFF: Duration = Duration::from_secs(30);

/// What became of one job.
enum Outcome {
    Delivered,
    Refused(String),
    NotNow(String),
}

/// Delivers due jobs to Kafka until `stop`; a batch under way is finished first (its deliveries
/// awaited and acked), so a stop delivers nothing twice.
pub async fn run(
    client: &Client,
    producer: &FutureProducer<Reports>,
    settings: &KafkaSettings,
    link: &Arc<KafkaLink>,
    stop: &CancellationToken,
) {
    let mut topics = Topics::default();
    let mut backoff: Option<Duration> = None;
    while !stop.is_cancelled() {
        let names = match topics.current(client, &settings.topics).await {
            Ok(names) if !names.is_empty() => names,
            Ok(_) => {
                pause(TOPICS_EVERY, stop).await;
                continue;
            }
            Err(error) => {
                // The mover tells Redis's outages.
                warn!("kafka: cannot list the topics to deliver: {error}");
                pause(Duration::from_secs(1), stop).await;
                continue;
            }
        };
        // While the brokers fail, one job at a time: a probe, not a batch given back each round.
        let most = if backoff.is_some() { 1 } else { BATCH };
        let jobs = match client
            .reserve_many(&names, settings.ttr, most, RESERVE_WAIT)
            .await
        {
            Ok(jobs) => jobs,
            Err(error) => {
                warn!("kafka: cannot reserve jobs to deliver: {error}");
                pause(Duration::from_secs(1), stop).await;
                continue;
            }
        };
        if jobs.is_empty() {
            continue;
        }
        let failed = deliver(client, producer, settings, link, jobs).await;
        match (failed, backoff) {
            (None, None) => {}
            (None, Some(_)) => {
                info!(brokers = settings.brokers, "kafka takes messages again");
                backoff = None;
            }
            (Some(why), None) => {
                warn!(
                    brokers = settings.brokers,
                    "kafka does not take messages ({why}): due jobs wait in Redis, tried again \
                     with a backoff"
                );
                backoff = Some(FIRST_BACKOFF);
            }
            (Some(_), Some(wait)) => backoff = Some((wait * 2).min(MOST_BACKOFF)),
        }
        if let Some(wait) = backoff {
            pause(wait, stop).await;
        }
    }
}

/// Sends `jobs` and waits for each one's report, touching their reservations meanwhile; then acks
/// the delivered, buries the refused and gives back the rest. The reason deliveries failed for
/// want of a broker, if they did.
async fn deliver(
    client: &Client,
    producer: &FutureProducer<Reports>,
    settings: &KafkaSettings,
    link: &KafkaLink,
    jobs: Vec<Job>,
) -> Option<String> {
    link.sending(jobs.len());
    let messages: Vec<Result<Message, String>> = jobs
        .iter()
        .map(|job| record::message(job, settings))
        .collect();
    let sends = messages.iter().map(|message| async {
        match message {
            Ok(message) => outcome(send(producer, message).await),
            Err(why) => Outcome::Refused(why.clone()),
        }
    });
    let reports = join_all(sends);
    tokio::pin!(reports);
    // Touched every third of the time to run: a slow broker never lets a reservation lapse
    // while its message may still be delivered.
    let every = settings.ttr / 3;
    let outcomes = loop {
        tokio::select! {
            outcomes = &mut reports => break outcomes,
            () = tokio::time::sleep(every) => {
                for job in &jobs {
                    if let Err(error) = client.touch(job, settings.ttr).await {
                        warn!(id = %job.id, "kafka: cannot extend the reservation of a job in flight: {error}");
                    }
                }
            }
        }
    };
    let mut delivered = Vec::new();
    let mut failed = None;
    for (job, outcome) in jobs.iter().zip(outcomes) {
        match outcome {
            Outcome::Delivered => delivered.push(job),
            Outcome::Refused(why) => {
                warn!(id = %job.id, topic = %job.topic, "kafka: job sent to the dead list: {why}");
                if let Err(error) = client.bury(job, &why).await {
                    warn!(id = %job.id, "kafka: cannot send a refused job to the dead list ({error}): it is tried again after its time to run");
                }
                link.refused(1);
            }
            Outcome::NotNow(why) => {
                if let Err(error) = client.give_back(job).await {
                    warn!(id = %job.id, "kafka: cannot give back a job not delivered ({error}): it is tried again after its time to run");
                }
                link.given_back(1, &why);
                failed.get_or_insert(why);
            }
        }
    }
    if !delivered.is_empty() {
        let keep = (settings.message == MessageForm::Id).then_some(settings.keep_delivered);
        let acked = client.ack_keeping(delivered.iter().copied(), keep).await;
        let now = SystemTime::now();
        let mut late = Vec::with_capacity(delivered.len());
        for (job, acked) in delivered.iter().zip(acked) {
            if let Err(error) = acked {
                // Delivered all the same: it goes out again after its time to run, with its key.
                warn!(id = %job.id, "kafka: cannot ack a delivered job: {error}");
            }
            let due = job.due.unwrap_or(now);
            late.push(now.duration_since(due).unwrap_or_default());
        }
        link.delivered(late);
    }
    failed
}

/// Sends one message and waits for its delivery report.
async fn send(producer: &FutureProducer<Reports>, message: &Message) -> Result<(), KafkaError> {
    let mut headers = OwnedHeaders::new_with_capacity(message.headers.len());
    for (key, value) in &message.headers {
        headers = headers.insert(Header {
            key,
            value: Some(value),
        });
    }
    let record = FutureRecord::to(&message.topic)
        .key(&message.key)
        .payload(&message.value)
        .headers(headers);
    // A full queue waits (there is room for far more than a batch): the timeout is the delivery's.
    match producer.send(record, Duration::from_secs(5)).await {
        Ok(_) => Ok(()),
        Err((error, _)) => Err(error),
    }
}

fn outcome(sent: Result<(), KafkaError>) -> Outcome {
    match sent {
        Ok(()) => Outcome::Delivered,
        Err(error) if refusal::is_permanent(&error) => Outcome::Refused(refusal::reason(&error)),
        Err(error) => Outcome::NotNow(error.to_string()),
    }
}

/// The delayer topics to deliver: the registry's that the patterns match, read again every
/// [`TOPICS_EVERY`], in an order that turns each round, so that a busy topic does not keep the
/// others waiting (a reserve takes the first topic's jobs first).
#[derive(Default)]
struct Topics {
    known: Vec<Topic>,
    read_at: Option<Instant>,
    turn: usize,
}

impl Topics {
    async fn current(
        &mut self,
        client: &Client,
        patterns: &[String],
    ) -> delayer_client::Result<Vec<Topic>> {
        if self.read_at.is_none_or(|at| at.elapsed() >= TOPICS_EVERY) {
            let mut known: Vec<Topic> = client
                .topics()
                .await?
                .into_iter()
                .filter(|topic| matches(patterns, &String::from_utf8_lossy(topic.as_bytes())))
                .collect();
            // Names without a wildcard are delivered before any push registers them.
            for pattern in patterns.iter().filter(|pattern| !pattern.contains('*')) {
                let topic = Topic::from(pattern.as_str());
                if !known.contains(&topic) {
                    known.push(topic);
                }
            }
            known.sort();
            self.known = known;
            self.read_at = Some(Instant::now());
        }
        let mut names = self.known.clone();
        if !names.is_empty() {
            self.turn = (self.turn + 1) % names.len();
            names.rotate_left(self.turn);
        }
        Ok(names)
    }
}

async fn pause(wait: Duration, stop: &CancellationToken) {
    tokio::select! {
        () = tokio::time::sleep(wait) => {}
        () = stop.cancelled() => {}
    }
}
