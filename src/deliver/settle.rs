//! The settling loop: sends each job the reserving loop handed on, and settles it as its outcome
//! comes: acked (those whose outcomes came together, together), given back, tried again later or
//! dead-listed; touches the reservations of jobs in flight for long; tells when the receiver
//! stops taking jobs and when it takes them again (the backoff the reserving loop probes by).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use delayer_client::{Client, Job, MAX_DELAY, Nacked};
use futures_util::FutureExt;
use futures_util::future::join_all;
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::{FIRST_BACKOFF, Flow, GATHER_WAIT, MOST_BACKOFF, Outcome, Sink};

/// Outcomes settled together: up to this many, gathered for up to [`GATHER_WAIT`].
const GATHER: usize = 100;
use crate::metrics::Deliveries;

/// Sends and settles each job as its outcome comes, until the reserving loop ended and nothing
/// is in flight.
pub(super) async fn run(
    client: &Client,
    sink: &impl Sink,
    figures: &Deliveries,
    flow: &Flow,
    mut to_send: mpsc::UnboundedReceiver<Vec<Job>>,
) {
    let Flow { room, backoff } = flow;
    let (name, address) = (sink.name(), sink.address());
    // Touched every third of the time to run: a slow receiver never lets a reservation lapse
    // while its job may still be delivered.
    let every = sink.ttr() / 3;
    let mut touches = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    // Each job in flight by a number of its own, with when it was reserved or last touched.
    let mut in_flight: HashMap<u64, (Arc<Job>, Instant)> = HashMap::new();
    let mut sending = FuturesUnordered::new();
    let mut numbered = 0u64;
    let mut open = true;
    // Outcomes known, settled together once GATHER came, or GATHER_WAIT after the first (a
    // reply comes at a time: one call for many costs Redis far less than one a job).
    let mut reported = Vec::new();
    let mut settle_at: Option<tokio::time::Instant> = None;
    while open || !in_flight.is_empty() {
        let mut arrived = Vec::new();
        tokio::select! {
            jobs = to_send.recv(), if open => match jobs {
                Some(jobs) => arrived.extend(jobs),
                None => open = false,
            },
            Some(report) = sending.next(), if !sending.is_empty() => reported.push(report),
            () = tokio::time::sleep_until(settle_at.unwrap_or_else(tokio::time::Instant::now)),
                if settle_at.is_some() => {}
            _ = touches.tick() => {
                touch(client, sink, &mut in_flight, every).await;
                continue;
            }
        }
        // And whatever else came meanwhile.
        while let Ok(jobs) = to_send.try_recv() {
            arrived.extend(jobs);
        }
        for job in arrived {
            numbered += 1;
            let number = numbered;
            let job = Arc::new(job);
            in_flight.insert(number, (job.clone(), Instant::now()));
            sending.push(async move { (number, sink.send(&job).await) });
        }
        // A send starts when first polled, here (Kafka's message is queued then); one whose
        // outcome is known at once (a job that cannot be a message) is settled with the others.
        while let Some(Some(report)) = sending.next().now_or_never() {
            reported.push(report);
        }
        if reported.is_empty() {
            continue;
        }
        let now = tokio::time::Instant::now();
        let due = *settle_at.get_or_insert(now + GATHER_WAIT);
        if reported.len() < GATHER && !sending.is_empty() && now < due {
            continue;
        }
        settle_at = None;
        let reported = std::mem::take(&mut reported);
        let count = reported.len();
        let done = reported
            .into_iter()
            .map(|(number, outcome)| {
                let (job, _) = in_flight.remove(&number).expect("a job in flight");
                (job, outcome)
            })
            .collect();
        let unreachable = finish(client, sink, figures, done).await;
        let mut wait = backoff.lock().expect("not poisoned");
        match (unreachable, *wait) {
            (None, None) => {}
            (None, Some(_)) => {
                info!(address, "{name} takes messages again");
                *wait = None;
            }
            (Some(why), None) => {
                warn!(
                    address,
                    "{name} does not take messages ({why}): due jobs wait in Redis, tried again \
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

/// Extends the reservations of the jobs in flight for `every` or more, all at once (one round
/// trip's wait, not one a job).
async fn touch(
    client: &Client,
    sink: &impl Sink,
    in_flight: &mut HashMap<u64, (Arc<Job>, Instant)>,
    every: Duration,
) {
    let touches = in_flight
        .iter()
        .filter(|(_, (_, since))| since.elapsed() >= every)
        .map(|(&number, (job, _))| async move {
            (
                number,
                job.id.clone(),
                client.touch(&**job, sink.ttr()).await,
            )
        });
    for (number, id, touched) in join_all(touches).await {
        match touched {
            Ok(()) => {
                if let Some((_, since)) = in_flight.get_mut(&number) {
                    *since = Instant::now();
                }
            }
            Err(error) => warn!(
                %id,
                "{}: cannot extend the reservation of a job in flight: {error}",
                sink.name()
            ),
        }
    }
}

/// Acks the delivered jobs of `done`, dead-lists the refused, gives back or retries the rest;
/// the reason jobs were not delivered for want of the receiver, if some were not.
async fn finish(
    client: &Client,
    sink: &impl Sink,
    figures: &Deliveries,
    done: Vec<(Arc<Job>, Outcome)>,
) -> Option<String> {
    let name = sink.name();
    let mut delivered = Vec::new();
    let mut unreachable = None;
    for (job, outcome) in done {
        match outcome {
            Outcome::Delivered => delivered.push(job),
            Outcome::Refused(why) => bury(client, name, figures, &job, &why).await,
            Outcome::Failed { why, after } => match sink.retry(&job) {
                Some(wait) => {
                    let wait = after.unwrap_or(wait).min(MAX_DELAY);
                    debug!(id = %job.id, topic = %job.topic, "{name}: delivery failed, tried again in {} s: {why}", wait.as_secs_f64());
                    match client.nack(&*job, wait).await {
                        // Its reserves reached `max_attempts`.
                        Ok(Nacked::Dead) => figures.refused(1),
                        Ok(_) => figures.retried(1),
                        Err(error) => {
                            warn!(id = %job.id, "{name}: cannot give back a job not delivered ({error}): it is tried again after its time to run");
                            figures.retried(1);
                        }
                    }
                }
                None => bury(client, name, figures, &job, &why).await,
            },
            Outcome::NotSent => {
                if let Err(error) = client.give_back(&*job).await {
                    warn!(id = %job.id, "{name}: cannot give back a job not sent ({error}): it is tried again after its time to run");
                }
                figures.not_sent(1);
            }
            Outcome::Unreachable(why) => {
                if let Err(error) = client.give_back(&*job).await {
                    warn!(id = %job.id, "{name}: cannot give back a job not delivered ({error}): it is tried again after its time to run");
                }
                figures.given_back(1, &why);
                unreachable.get_or_insert(why);
            }
        }
    }
    if !delivered.is_empty() {
        let acked = client
            .ack_keeping(delivered.iter().map(|job| &**job), sink.keep())
            .await;
        let now = SystemTime::now();
        let mut late = Vec::with_capacity(delivered.len());
        for (job, acked) in delivered.iter().zip(acked) {
            if let Err(error) = acked {
                // Delivered all the same: it goes out again after its time to run.
                warn!(id = %job.id, "{name}: cannot ack a delivered job: {error}");
            }
            let due = job.due.unwrap_or(now);
            late.push(now.duration_since(due).unwrap_or_default());
        }
        figures.delivered(late);
    }
    unreachable
}

/// Sends `job` to its topic's dead list with `why`.
async fn bury(client: &Client, name: &str, figures: &Deliveries, job: &Job, why: &str) {
    warn!(id = %job.id, topic = %job.topic, "{name}: job sent to the dead list: {why}");
    if let Err(error) = client.bury(job, why).await {
        warn!(id = %job.id, "{name}: cannot send a refused job to the dead list ({error}): it is tried again after its time to run");
    }
    figures.refused(1);
}
