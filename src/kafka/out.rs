//! Kafka out: due jobs of the configured topics, reserved as the Worker reserves them, produced to
//! Kafka, and acked in Redis only once the broker reported their delivery. At least once and never
//! early: a daemon killed in between leaves its jobs to be delivered again after their time to
//! run, with the same key. Several daemons share the work, since a reserve is atomic.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use delayer_client::{Client, Job};
use futures_util::FutureExt;
use futures_util::future::join_all;
use futures_util::stream::{FuturesUnordered, StreamExt};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::FutureRecord;
use rdkafka::producer::future_producer::OwnedDeliveryResult;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::producer::Producers;
use super::record::{self, Message};
use super::refusal;
use super::settings::{KafkaSettings, MessageForm};
use super::topics::{TOPICS_CHECK, Topics};
use crate::metrics::KafkaLink;

/// The most jobs reserved at once (the client's most for one call).
const BATCH: usize = delayer_client::MAX_BATCH;
/// The most jobs on their way at once (reserved, sent, their reports awaited): jobs are
/// reserved while earlier ones are in flight, so a slow report does not hold up the next due
/// jobs, and never so many that a broker outage gives back more than this.
const MOST_IN_FLIGHT: usize = 2_000;
/// How long a reserve waits for a job before the loop looks again (at its stop, and its topics).
const RESERVE_WAIT: Duration = Duration::from_millis(500);
/// The first and the longest wait after a delivery failed for want of a broker.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MOST_BACKOFF: Duration = Duration::from_secs(30);

/// What became of one job.
enum Outcome {
    Delivered,
    Refused(String),
    NotNow(String),
}

/// A job handed to the producer (or refused before), on its way to the settler.
struct Sent {
    job: Job,
    report: Report,
}

enum Report {
    /// Its delivery report, from the producer of this generation.
    Awaited(u64, rdkafka::producer::DeliveryFuture),
    /// Known at once: a message it cannot be, or one the producer did not take.
    Known(Outcome),
}

/// What the two loops share: the room left in flight, and the backoff.
struct Flow {
    /// A permit a job in flight.
    room: Semaphore,
    /// The wait before the next probe while the brokers fail; `None` while they take messages.
    backoff: Mutex<Option<Duration>>,
}

/// Delivers due jobs to Kafka until `stop`. Two loops: one reserves due jobs and hands them to
/// the producer, while the other settles each as its report comes (acked, buried or given
/// back). At a stop, the jobs in flight are settled first, so a stop delivers nothing twice.
pub async fn run(
    client: &Client,
    producers: &Producers,
    settings: &KafkaSettings,
    link: &Arc<KafkaLink>,
    stop: &CancellationToken,
) {
    let flow = Flow {
        room: Semaphore::new(MOST_IN_FLIGHT),
        backoff: Mutex::new(None),
    };
    let (sent, to_settle) = mpsc::unbounded_channel();
    let reserving = reserve(client, producers, settings, link, stop, &flow, sent);
    let settling = settle(client, producers, settings, link, &flow, to_settle);
    tokio::join!(reserving, settling);
}

/// Reserves due jobs while there is room in flight, and sends them, until `stop`.
async fn reserve(
    client: &Client,
    producers: &Producers,
    settings: &KafkaSettings,
    link: &KafkaLink,
    stop: &CancellationToken,
    flow: &Flow,
    sent: mpsc::UnboundedSender<Sent>,
) {
    let Flow { room, backoff } = flow;
    let mut topics = Topics::default();
    while !stop.is_cancelled() {
        let names = match topics.current(client, settings).await {
            Ok(names) if !names.is_empty() => names,
            Ok(_) => {
                pause(TOPICS_CHECK, stop).await;
                continue;
            }
            Err(error) => {
                // The mover tells Redis's outages.
                warn!("kafka: cannot list the topics to deliver: {error}");
                pause(Duration::from_secs(1), stop).await;
                continue;
            }
        };
        let wait = *backoff.lock().expect("not poisoned");
        let most = match wait {
            // While the brokers fail, one job at a time once the others settled: a probe, not
            // thousands given back each round.
            Some(wait) => {
                let all = tokio::select! {
                    all = room.acquire_many(MOST_IN_FLIGHT as u32) => all,
                    () = stop.cancelled() => break,
                };
                all.expect("never closed").forget();
                room.add_permits(MOST_IN_FLIGHT - 1);
                pause(wait, stop).await;
                if stop.is_cancelled() {
                    room.add_permits(1);
                    break;
                }
                1
            }
            None => {
                let first = tokio::select! {
                    first = room.acquire() => first,
                    () = stop.cancelled() => break,
                };
                first.expect("never closed").forget();
                let more = room.available_permits().min(BATCH - 1);
                if let Ok(more) = room.try_acquire_many(more as u32) {
                    more.forget();
                }
                1 + more
            }
        };
        let jobs = match client
            .reserve_many(&names, settings.ttr, most, RESERVE_WAIT)
            .await
        {
            Ok(jobs) => jobs,
            Err(error) => {
                room.add_permits(most);
                warn!("kafka: cannot reserve jobs to deliver: {error}");
                pause(Duration::from_secs(1), stop).await;
                continue;
            }
        };
        room.add_permits(most - jobs.len());
        link.out.sending(jobs.len());
        let (generation, producer) = producers.current();
        for job in jobs {
            let report = match record::message(&job, settings) {
                Ok(message) => match producer.send_result(record(&message)) {
                    Ok(report) => Report::Awaited(generation, report),
                    Err((error, _)) => {
                        producers.failed(generation, &error);
                        Report::Known(outcome(Err(error)))
                    }
                },
                Err(why) => Report::Known(Outcome::Refused(why)),
            };
            // The settler ends after this loop: the channel is open.
            let _ = sent.send(Sent { job, report });
        }
    }
}

/// Settles each job as its report comes, until the reserving loop ended and nothing is in
/// flight: acks the delivered (together, those whose reports came at once), buries the refused
/// and gives back the rest; touches the reservations of jobs in flight for long.
async fn settle(
    client: &Client,
    producers: &Producers,
    settings: &KafkaSettings,
    link: &KafkaLink,
    flow: &Flow,
    mut to_settle: mpsc::UnboundedReceiver<Sent>,
) {
    let Flow { room, backoff } = flow;
    // Touched every third of the time to run: a slow broker never lets a reservation lapse
    // while its message may still be delivered.
    let every = settings.ttr / 3;
    let mut touches = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    // Each job in flight by a number of its own, with when it was reserved or last touched.
    let mut in_flight: HashMap<u64, (Job, Instant)> = HashMap::new();
    let mut reports = FuturesUnordered::new();
    let mut numbered = 0u64;
    let mut open = true;
    while open || !in_flight.is_empty() {
        let (mut arrived, mut reported) = (Vec::new(), Vec::new());
        tokio::select! {
            sent = to_settle.recv(), if open => match sent {
                Some(sent) => arrived.push(sent),
                None => open = false,
            },
            Some(report) = reports.next(), if !reports.is_empty() => reported.push(report),
            _ = touches.tick() => {
                touch(client, settings, &mut in_flight, every).await;
                continue;
            }
        }
        // And whatever else came meanwhile, settled together.
        while let Ok(sent) = to_settle.try_recv() {
            arrived.push(sent);
        }
        let mut done = Vec::new();
        for Sent { job, report } in arrived {
            match report {
                Report::Known(outcome) => done.push((job, outcome)),
                Report::Awaited(generation, report) => {
                    numbered += 1;
                    let number = numbered;
                    in_flight.insert(number, (job, Instant::now()));
                    reports.push(report.map(move |report| (number, generation, report)));
                }
            }
        }
        while let Some(Some(report)) = reports.next().now_or_never() {
            reported.push(report);
        }
        for (number, generation, report) in reported {
            let (job, _) = in_flight.remove(&number).expect("a job in flight");
            done.push((job, outcome(delivery(producers, generation, report))));
        }
        if done.is_empty() {
            continue;
        }
        let count = done.len();
        let failed = finish(client, settings, link, done).await;
        let mut wait = backoff.lock().expect("not poisoned");
        match (failed, *wait) {
            (None, None) => {}
            (None, Some(_)) => {
                info!(brokers = settings.brokers, "kafka takes messages again");
                *wait = None;
            }
            (Some(why), None) => {
                warn!(
                    brokers = settings.brokers,
                    "kafka does not take messages ({why}): due jobs wait in Redis, tried again \
                     with a backoff"
                );
                *wait = Some(FIRST_BACKOFF);
            }
            // A probe failed (not one of the jobs sent before the outage, still coming back).
            (Some(_), Some(last)) if in_flight.is_empty() => {
                *wait = Some((last * 2).min(MOST_BACKOFF));
            }
            (Some(_), Some(_)) => {}
        }
        drop(wait);
        room.add_permits(count);
    }
}

/// What a delivery report says: delivered, or the error (a producer made again after a fatal
/// error drops what it held: those fail as canceled).
fn delivery<Canceled>(
    producers: &Producers,
    generation: u64,
    report: Result<OwnedDeliveryResult, Canceled>,
) -> Result<(), KafkaError> {
    match report {
        Ok(Ok(_)) => Ok(()),
        Ok(Err((error, _))) => {
            producers.failed(generation, &error);
            Err(error)
        }
        Err(_) => Err(KafkaError::Canceled),
    }
}

/// Extends the reservations of the jobs in flight for `every` or more, all at once (one round
/// trip's wait, not one a job).
async fn touch(
    client: &Client,
    settings: &KafkaSettings,
    in_flight: &mut HashMap<u64, (Job, Instant)>,
    every: Duration,
) {
    let touches = in_flight
        .iter()
        .filter(|(_, (_, since))| since.elapsed() >= every)
        .map(|(&number, (job, _))| async move {
            (
                number,
                job.id.clone(),
                client.touch(job, settings.ttr).await,
            )
        });
    for (number, id, touched) in join_all(touches).await {
        match touched {
            Ok(()) => {
                if let Some((_, since)) = in_flight.get_mut(&number) {
                    *since = Instant::now();
                }
            }
            Err(error) => {
                warn!(%id, "kafka: cannot extend the reservation of a job in flight: {error}")
            }
        }
    }
}

/// Acks the delivered jobs of `done`, buries the refused and gives back the rest; the reason
/// deliveries failed for want of a broker, if they did.
async fn finish(
    client: &Client,
    settings: &KafkaSettings,
    link: &KafkaLink,
    done: Vec<(Job, Outcome)>,
) -> Option<String> {
    let mut delivered = Vec::new();
    let mut failed = None;
    for (job, outcome) in done {
        match outcome {
            Outcome::Delivered => delivered.push(job),
            Outcome::Refused(why) => {
                warn!(id = %job.id, topic = %job.topic, "kafka: job sent to the dead list: {why}");
                if let Err(error) = client.bury(&job, &why).await {
                    warn!(id = %job.id, "kafka: cannot send a refused job to the dead list ({error}): it is tried again after its time to run");
                }
                link.out.refused(1);
            }
            Outcome::NotNow(why) => {
                if let Err(error) = client.give_back(&job).await {
                    warn!(id = %job.id, "kafka: cannot give back a job not delivered ({error}): it is tried again after its time to run");
                }
                link.out.given_back(1, &why);
                failed.get_or_insert(why);
            }
        }
    }
    if !delivered.is_empty() {
        let keep = (settings.message == MessageForm::Id).then_some(settings.keep_delivered);
        let acked = client.ack_keeping(delivered.iter(), keep).await;
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
        link.out.delivered(late);
    }
    failed
}

/// The record of `message`, for the producer.
fn record(message: &Message) -> FutureRecord<'_, [u8], [u8]> {
    let mut headers = OwnedHeaders::new_with_capacity(message.headers.len());
    for (key, value) in &message.headers {
        headers = headers.insert(Header {
            key,
            value: Some(value),
        });
    }
    FutureRecord::to(&message.topic)
        .key(&message.key[..])
        .payload(&message.value[..])
        .headers(headers)
}

fn outcome(sent: Result<(), KafkaError>) -> Outcome {
    match sent {
        Ok(()) => Outcome::Delivered,
        Err(error) if refusal::is_permanent(&error) => Outcome::Refused(refusal::reason(&error)),
        Err(error) => Outcome::NotNow(error.to_string()),
    }
}

async fn pause(wait: Duration, stop: &CancellationToken) {
    tokio::select! {
        () = tokio::time::sleep(wait) => {}
        () = stop.cancelled() => {}
    }
}
