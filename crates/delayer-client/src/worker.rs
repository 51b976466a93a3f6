//! A worker: runs an async handler for each reserved job of its topics, at least once.
//!
//! ```no_run
//! # async fn example(client: delayer_client::Client) -> delayer_client::Result<()> {
//! use delayer_client::Worker;
//! Worker::new(client)
//!     .handle("order.close", |job| async move {
//!         println!("closing {}", job.body_text().unwrap_or("?"));
//!         Ok::<(), String>(())
//!     })
//!     .run(async { tokio::signal::ctrl_c().await.ok(); })
//!     .await
//! # }
//! ```
//!
//! A handler's `Ok` acks the job; an `Err` (or a panic) nacks it, to be tried again after an
//! exponential backoff until the job has been reserved `max_attempts` times, when it goes to its
//! topic's dead list. While a handler runs, its reservation is touched every half `ttr`, so a long
//! job is not delivered twice; if the worker dies, the daemon delivers the job again once `ttr`
//! passes. While jobs are ready, a slot whose handler finished acks its job and reserves the next
//! in one round trip, together with every other slot that finished meanwhile: one call acks them
//! all and one reserves their next jobs (one a topic in the cluster layout; nacks one a job), so a
//! busy worker costs Redis a fraction of a call a job. An ack Redis does not answer is sent again
//! until it does, or the job's `ttr` has passed. On stop the worker reserves nothing more
//! and starts no handler, lets running handlers finish (up to `stop_timeout`), then stops the rest
//! and gives their jobs back (the attempt not counted): no job is lost. A round trip to Redis
//! under way is never cut short, so that no job is left reserved by nobody; stop a worker through
//! `run`'s stop future, not by dropping `run` (or a timeout around it), which would cut them short.
//! A handler that ignores being stopped (blocking work) may still run while its job is given back;
//! one that blocks its thread also holds up the touches and the stop on a runtime with few
//! threads: run blocking work with `tokio::task::spawn_blocking`.

use std::collections::{HashMap, HashSet};
use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};
use tracing::{info, warn};

use crate::client::{Client, MAX_BATCH, Nacked};
use crate::error::{Error, Result, unanswered};
use crate::job::{Job, Receipt};
use crate::scripts::ack::Acked;

/// Handlers running at once, unless told otherwise.
pub const DEFAULT_CONCURRENCY: usize = 10;
/// A job's time to run, unless told otherwise.
pub const DEFAULT_TTR: Duration = Duration::from_secs(60);
/// How long a stop waits for running handlers, unless told otherwise.
pub const DEFAULT_STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// The first retry's delay; each next one doubles, up to [`DEFAULT_MAX_BACKOFF`].
pub const DEFAULT_FIRST_BACKOFF: Duration = Duration::from_secs(1);
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(3600);

/// The shortest time to run: a reservation is touched every half of it.
const MIN_TTR: Duration = Duration::from_secs(1);
/// How long one reserve waits before the loop looks at its slots again.
const RESERVE_WAIT: Duration = Duration::from_secs(1);
/// The wait before an ack that Redis did not answer is sent again; it doubles up to
/// [`ACK_RETRY_MAX_WAIT`].
const ACK_RETRY_FIRST_WAIT: Duration = Duration::from_millis(100);
const ACK_RETRY_MAX_WAIT: Duration = Duration::from_secs(2);
/// How long the loop waits after Redis failed it.
const TROUBLE_WAIT: Duration = Duration::from_millis(500);

type Handler =
    Arc<dyn Fn(Job) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> + Send + Sync>;

/// Runs handlers for reserved jobs; see the module docs.
pub struct Worker {
    client: Client,
    handlers: HashMap<String, Handler>,
    concurrency: usize,
    ttr: Duration,
    stop_timeout: Duration,
    first_backoff: Duration,
    max_backoff: Duration,
}

impl Worker {
    pub fn new(client: Client) -> Worker {
        Worker {
            client,
            handlers: HashMap::new(),
            concurrency: DEFAULT_CONCURRENCY,
            ttr: DEFAULT_TTR,
            stop_timeout: DEFAULT_STOP_TIMEOUT,
            first_backoff: DEFAULT_FIRST_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
        }
    }

    /// Runs `handler` for each job of `topic`: `Ok` finishes the job, `Err` retries it later.
    pub fn handle<F, Fut, E>(mut self, topic: impl Into<String>, handler: F) -> Worker
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Display,
    {
        let handler = Arc::new(handler);
        self.handlers.insert(
            topic.into(),
            Arc::new(move |job| {
                let future = handler(job);
                Box::pin(async move { future.await.map_err(|error| error.to_string()) })
            }),
        );
        self
    }

    /// At most this many handlers at once (at least 1).
    pub fn concurrency(mut self, concurrency: usize) -> Worker {
        self.concurrency = concurrency.max(1);
        self
    }

    /// Each job's time to run (at least a second): touched every half of it while its handler
    /// runs.
    pub fn ttr(mut self, ttr: Duration) -> Worker {
        self.ttr = ttr.max(MIN_TTR);
        self
    }

    /// How long a stop waits for running handlers before it stops them and gives their jobs back.
    pub fn stop_timeout(mut self, timeout: Duration) -> Worker {
        self.stop_timeout = timeout;
        self
    }

    /// A failed job is tried again after `first`, then twice as long each time, at most `max`.
    pub fn retry_backoff(mut self, first: Duration, max: Duration) -> Worker {
        self.first_backoff = first;
        self.max_backoff = max;
        self
    }

    /// Runs until `stop` completes, then stops gracefully (see the module docs).
    pub async fn run(self, stop: impl Future<Output = ()>) -> Result<()> {
        let (stopping, stopped) = watch::channel(false);
        let serving = self.serve(stopped);
        tokio::pin!(serving, stop);
        let mut stop_seen = false;
        loop {
            tokio::select! {
                result = &mut serving => return result,
                () = &mut stop, if !stop_seen => {
                    stop_seen = true;
                    stopping.send_replace(true);
                }
            }
        }
    }

    async fn serve(self, mut stopped: watch::Receiver<bool>) -> Result<()> {
        let topics: Vec<String> = self.handlers.keys().cloned().collect();
        let slots = Arc::new(Semaphore::new(self.concurrency));
        let mut running = JoinSet::new();
        info!(topics = ?topics, concurrency = self.concurrency, "worker started");
        let (abandon, abandoned) = watch::channel(false);
        let shared = Arc::new(Shared {
            client: self.client.clone(),
            handlers: self.handlers,
            topics,
            turn: AtomicUsize::new(0),
            ttr: self.ttr,
            first_backoff: self.first_backoff,
            max_backoff: self.max_backoff,
            unfinished: Mutex::default(),
            stopped: stopped.clone(),
            abandoned,
        });
        let (to_batches, batches) = mpsc::unbounded_channel();
        let finishing = tokio::spawn(shared.clone().finish_in_batches(batches));
        loop {
            let slot = tokio::select! {
                biased;
                _ = stopped.wait_for(|stop| *stop) => break,
                slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            };
            // Every free slot is filled in one call.
            let mut free = vec![slot];
            while free.len() < MAX_BATCH {
                match slots.clone().try_acquire_owned() {
                    Ok(slot) => free.push(slot),
                    Err(_) => break,
                }
            }
            while running.try_join_next().is_some() {}
            let mut stop = stopped.clone();
            let give_up = async move {
                let _ = stop.wait_for(|stop| *stop).await;
            };
            let jobs = match self
                .client
                .reserve_up_to(&shared.order(), self.ttr, free.len(), RESERVE_WAIT, give_up)
                .await
            {
                Ok(jobs) => jobs,
                Err(error) => {
                    warn!("worker cannot reserve: {error}");
                    tokio::select! {
                        () = tokio::time::sleep(TROUBLE_WAIT) => continue,
                        _ = stopped.wait_for(|stop| *stop) => break,
                    }
                }
            };
            // A call returns at most as many as asked; were it more, the rest would be given back
            // at the stop, not lost.
            for job in &jobs {
                shared.hold(job);
            }
            for (job, slot) in jobs.into_iter().zip(free) {
                running.spawn(shared.clone().run_slot(job, slot, to_batches.clone()));
            }
        }

        // Stopping: no more reservations; running handlers get `stop_timeout` to finish, then
        // are stopped. Slots are never aborted: one may be waiting for Redis to ack its job and
        // reserve the next, and a reply dropped would leave a job reserved by nobody.
        let waited = tokio::time::timeout(self.stop_timeout, async {
            while running.join_next().await.is_some() {}
        })
        .await;
        if waited.is_err() {
            abandon.send_replace(true);
            while running.join_next().await.is_some() {}
        }
        // The slots are gone: so is every sender, and the batches end once done.
        drop(to_batches);
        finishing.await.expect("finishing does not panic");
        let abandoned: Vec<Receipt> = shared
            .unfinished
            .lock()
            .expect("not poisoned")
            .drain()
            .collect();
        // All at once: with Redis not answering, each waits out the reply timeout, together.
        let mut giving_back = JoinSet::new();
        for reservation in abandoned.iter().cloned() {
            let client = self.client.clone();
            giving_back.spawn(async move {
                let given = client.give_back(reservation.clone()).await;
                (reservation.id, given)
            });
        }
        while let Some(given) = giving_back.join_next().await {
            let (id, given) = given.expect("giving back does not panic");
            // Back at once for another consumer, the attempt not counted: nothing is lost, and a
            // job on its last attempt is not sent to the dead list for a stop.
            match given {
                Ok(_) => warn!(id = %id, "stopping before the job was done: given back"),
                Err(error) => {
                    warn!(id = %id, "stopping before the job was done, and giving it back failed ({error}): it is delivered again once its time to run passes")
                }
            }
        }
        info!(abandoned = abandoned.len(), "worker stopped");
        Ok(())
    }
}

/// What the worker's slots share.
struct Shared {
    client: Client,
    handlers: HashMap<String, Handler>,
    topics: Vec<String>,
    /// Counts reserves, each starting with another topic.
    turn: AtomicUsize,
    ttr: Duration,
    first_backoff: Duration,
    max_backoff: Duration,
    /// The reservations held: given back on stop unless their handlers finished.
    unfinished: Mutex<HashSet<Receipt>>,
    stopped: watch::Receiver<bool>,
    /// Set when the stop has waited `stop_timeout`: running handlers are stopped.
    abandoned: watch::Receiver<bool>,
}

/// A slot's job whose handler ended, for the batches to ack or nack.
struct Finished {
    reservation: Receipt,
    /// Why the handler failed; `None` when it succeeded.
    failure: Option<String>,
    /// When a failed job is tried again.
    backoff: Duration,
    /// Where the slot waits for its next job; `None` when it wants none (the worker stops).
    next: Option<oneshot::Sender<Option<Job>>>,
}

/// How a handler's run ended.
enum Outcome {
    Succeeded,
    Failed(String),
    /// Stopped by the worker's stop.
    Abandoned,
}

impl Shared {
    /// The topics to reserve from, starting with another one each time, so that a busy topic
    /// cannot starve the rest.
    fn order(&self) -> Vec<&str> {
        let turn = self.turn.fetch_add(1, Ordering::Relaxed);
        let count = self.topics.len();
        (0..count)
            .map(|index| self.topics[(turn + index) % count].as_str())
            .collect()
    }

    fn hold(&self, job: &Job) {
        let mut unfinished = self.unfinished.lock().expect("not poisoned");
        unfinished.insert(Receipt::from(job));
    }

    /// Runs handlers in one slot: this job's, then, while jobs are ready and the worker is not
    /// stopping, the next one's, reserved in the same round trip as this one's ack or nack (a
    /// busy worker takes jobs in all its slots at once, not one at a time in its loop).
    async fn run_slot(
        self: Arc<Self>,
        mut job: Job,
        slot: OwnedSemaphorePermit,
        to_batches: mpsc::UnboundedSender<Finished>,
    ) {
        loop {
            let reservation = Receipt::from(&job);
            let backoff = backoff(self.first_backoff, self.max_backoff, job.attempts);
            let failure = match self.attempt(job, &reservation).await {
                Outcome::Succeeded => None,
                Outcome::Failed(message) => Some(message),
                // Left unfinished, to be given back.
                Outcome::Abandoned => break,
            };
            let (next, reply) = oneshot::channel();
            let finished = Finished {
                reservation,
                failure,
                backoff,
                next: (!*self.stopped.borrow()).then_some(next),
            };
            to_batches
                .send(finished)
                .expect("the batches end only once every slot has");
            match reply.await {
                Ok(Some(next)) => job = next,
                _ => break,
            }
        }
        drop(slot);
    }

    /// Finishes the jobs slots send, in batches: those that finished while the last batch was at
    /// Redis are acked in one call, their next jobs reserved in another, at the same time. Runs
    /// until every slot has ended; a batch under way is never cut short (a reply dropped would
    /// leave jobs reserved by nobody).
    async fn finish_in_batches(self: Arc<Self>, mut batches: mpsc::UnboundedReceiver<Finished>) {
        let mut batch = Vec::new();
        // Acks that Redis did not answer, sent again until it does.
        let mut acking_again = JoinSet::new();
        while batches.recv_many(&mut batch, MAX_BATCH).await > 0 {
            let wanted = if *self.stopped.borrow() {
                0
            } else {
                batch.iter().filter(|done| done.next.is_some()).count()
            };
            let reserving = async {
                if wanted == 0 {
                    return Vec::new();
                }
                let reserved = self
                    .client
                    .reserve_many(&self.order(), self.ttr, wanted, Duration::ZERO)
                    .await;
                reserved.unwrap_or_else(|error| {
                    warn!("worker cannot reserve: {error}");
                    Vec::new()
                })
            };
            let (unanswered, reserved) = tokio::join!(self.finish(&batch), reserving);
            while acking_again.try_join_next().is_some() {}
            for reservation in unanswered {
                acking_again.spawn(self.clone().ack_again(reservation));
            }
            let mut unfinished = self.unfinished.lock().expect("not poisoned");
            for done in &batch {
                unfinished.remove(&done.reservation);
            }
            for job in &reserved {
                unfinished.insert(Receipt::from(job));
            }
            drop(unfinished);
            let mut reserved = reserved.into_iter();
            for done in batch.drain(..) {
                if let Some(next) = done.next {
                    // Its slot waits for the reply: it cannot be gone.
                    let _ = next.send(reserved.next());
                }
            }
        }
        acking_again.join_all().await;
    }

    /// Sends the ack of a finished job again, after a wait, while Redis does not answer it: until
    /// the job's time to run has passed (it is delivered again then anyway), or once more at the
    /// stop. Without it, an outage shorter than `ttr` would have every job finished during it run
    /// twice.
    async fn ack_again(self: Arc<Self>, reservation: Receipt) {
        let id = &reservation.id;
        let give_up_at = tokio::time::Instant::now() + self.ttr;
        let mut stopped = self.stopped.clone();
        let mut wait = ACK_RETRY_FIRST_WAIT;
        loop {
            let last =
                *stopped.borrow_and_update() || tokio::time::Instant::now() + wait >= give_up_at;
            if !last {
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    // One more try at once, then the stop goes on.
                    _ = stopped.changed() => {}
                }
            }
            match self.client.ack(reservation.clone()).await {
                Ok(Acked::Done | Acked::Late) => {
                    info!(id = %id, "job acked once Redis answered again");
                    return;
                }
                // The ack that got no answer had run.
                Err(Error::UnknownJob(_)) => return,
                Ok(Acked::Stale) => {
                    warn!(id = %id, "job finished, but its time to run passed before Redis answered, and it was delivered again: it may run twice");
                    return;
                }
                Err(Error::Redis(error)) if unanswered(&error) && !last => {
                    wait = (wait * 2).min(ACK_RETRY_MAX_WAIT);
                }
                Err(error) => {
                    warn!(id = %id, "cannot ack the job ({error}): it is delivered again once its time to run passes");
                    return;
                }
            }
        }
    }

    /// Acks the jobs whose handlers succeeded (in one call), nacks those whose handlers failed;
    /// returns the reservations whose ack Redis did not answer, to be acked again.
    async fn finish(&self, batch: &[Finished]) -> Vec<Receipt> {
        let succeeded: Vec<&Receipt> = batch
            .iter()
            .filter(|done| done.failure.is_none())
            .map(|done| &done.reservation)
            .collect();
        let acking = async {
            let mut again = Vec::new();
            if succeeded.is_empty() {
                return again;
            }
            let acked = self
                .client
                .ack_many(succeeded.iter().copied().cloned())
                .await;
            for (reservation, acked) in succeeded.iter().zip(acked) {
                let id = &reservation.id;
                match acked {
                    Ok(Acked::Done) => {}
                    Ok(Acked::Late) => warn!(id = %id, "job finished after its time to run"),
                    Ok(Acked::Stale) => {
                        warn!(id = %id, "job finished after its time to run, and was delivered again meanwhile: it may run twice")
                    }
                    Err(Error::Redis(error)) if unanswered(&error) => {
                        warn!(id = %id, "cannot ack the job yet ({error}): trying again");
                        again.push((*reservation).clone());
                    }
                    Err(error) => warn!(id = %id, "cannot ack the job: {error}"),
                }
            }
            again
        };
        let mut nacking = JoinSet::new();
        for done in batch {
            if let Some(message) = &done.failure {
                let (client, reservation) = (self.client.clone(), done.reservation.clone());
                let (message, backoff) = (message.clone(), done.backoff);
                nacking.spawn(async move {
                    let id = &reservation.id;
                    match client.nack(reservation.clone(), backoff).await {
                        Ok(Nacked::Dead) => {
                            warn!(id = %id, "job failed its last attempt, now dead: {message}")
                        }
                        Ok(_) => warn!(id = %id, retry_in = ?backoff, "job failed: {message}"),
                        Err(error) => {
                            warn!(id = %id, "job failed ({message}) and cannot be given back: {error}")
                        }
                    }
                });
            }
        }
        let (again, _) = tokio::join!(acking, nacking.join_all());
        again
    }

    /// Runs one job's handler, touching its reservation meanwhile, until it ends or the stop
    /// abandons it.
    async fn attempt(&self, job: Job, reservation: &Receipt) -> Outcome {
        let (client, ttr) = (&self.client, self.ttr);
        let handler = self.handlers[&job.topic].clone();
        let id = &reservation.id;
        let mut abandoned = self.abandoned.clone();
        // A job reserved as the stop came is not started: given back untried.
        if *self.stopped.borrow() || *abandoned.borrow_and_update() {
            return Outcome::Abandoned;
        }
        // Its own task (the handler called in it too), so that a panic is a failed attempt
        // rather than a dead slot; aborted when dropped.
        let mut handling = AbortOnDrop(tokio::spawn(async move { handler(job).await }));
        let mut touching = tokio::time::interval_at(tokio::time::Instant::now() + ttr / 2, ttr / 2);
        let outcome = loop {
            tokio::select! {
                // A handler that ended is never taken for abandoned.
                biased;
                outcome = &mut handling.0 => break outcome,
                // It is only ever set, once.
                Ok(()) = abandoned.changed() => return Outcome::Abandoned,
                _ = touching.tick() => {
                    if let Err(error) = client.touch(reservation.clone(), ttr).await {
                        warn!(id = %id, "cannot extend the job's time to run: {error}");
                    }
                }
            }
        };
        match outcome {
            Ok(Ok(())) => Outcome::Succeeded,
            Ok(Err(message)) => Outcome::Failed(message),
            Err(error) => Outcome::Failed(format!("the handler panicked: {error}")),
        }
    }
}

/// The delay before attempt `attempts + 1`: `first`, doubled per attempt made, at most `max`.
fn backoff(first: Duration, max: Duration, attempts: u32) -> Duration {
    let doublings = attempts.saturating_sub(1).min(31);
    first.saturating_mul(1 << doublings).min(max)
}

/// A task that is aborted when its handle is dropped (by a stop that gives up on it).
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_most() {
        let second = Duration::from_secs(1);
        let delays: Vec<u64> = (1..=6)
            .map(|attempts| backoff(second, Duration::from_secs(10), attempts).as_secs())
            .collect();
        assert_eq!(delays, [1, 2, 4, 8, 10, 10]);
        assert_eq!(
            backoff(second, Duration::MAX, 1000),
            Duration::from_secs(1 << 31)
        );
    }
}
