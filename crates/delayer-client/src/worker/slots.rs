//! The worker's slots: each runs one job's handler at a time, touching its reservation, and hands
//! the finished job to the batches, which ack (or nack) it and reserve the slot's next job together
//! with every other slot that finished meanwhile.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};
use tracing::{info, warn};

use crate::client::Client;
use crate::client::finish::Nacked;
use crate::error::{Error, unanswered};
use crate::job::{Job, Receipt};
use crate::name::Topic;
use crate::scripts::ack::Acked;
use crate::settings::MAX_BATCH;

/// The wait before an ack that Redis did not answer is sent again; it doubles up to
/// [`ACK_RETRY_MAX_WAIT`].
const ACK_RETRY_FIRST_WAIT: Duration = Duration::from_millis(100);
const ACK_RETRY_MAX_WAIT: Duration = Duration::from_secs(2);
pub(super) type Handler =
    Arc<dyn Fn(Job) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> + Send + Sync>;

/// What the worker's slots share.
pub(super) struct Shared {
    pub(super) client: Client,
    pub(super) handlers: HashMap<Topic, Handler>,
    pub(super) topics: Vec<Topic>,
    /// Counts reserves, each starting with another topic.
    pub(super) turn: AtomicUsize,
    pub(super) ttr: Duration,
    pub(super) first_backoff: Duration,
    pub(super) max_backoff: Duration,
    /// The reservations held: given back on stop unless their handlers finished.
    pub(super) unfinished: Mutex<HashSet<Receipt>>,
    pub(super) stopped: watch::Receiver<bool>,
    /// Set when the stop has waited `stop_timeout`: running handlers are stopped.
    pub(super) abandoned: watch::Receiver<bool>,
}

/// A slot's job whose handler ended, for the batches to ack or nack.
pub(super) struct Finished {
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
    pub(super) fn order(&self) -> Vec<&Topic> {
        let turn = self.turn.fetch_add(1, Ordering::Relaxed);
        let count = self.topics.len();
        (0..count)
            .map(|index| &self.topics[(turn + index) % count])
            .collect()
    }

    pub(super) fn hold(&self, job: &Job) {
        let mut unfinished = self.unfinished.lock().expect("not poisoned");
        unfinished.insert(Receipt::from(job));
    }

    /// Runs handlers in one slot: this job's, then, while jobs are ready and the worker is not
    /// stopping, the next one's, reserved in the same round trip as this one's ack or nack (a
    /// busy worker takes jobs in all its slots at once, not one at a time in its loop).
    pub(super) async fn run_slot(
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
    pub(super) async fn finish_in_batches(
        self: Arc<Self>,
        mut batches: mpsc::UnboundedReceiver<Finished>,
    ) {
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
                    Err(error) => {
                        warn!(id = %id, "cannot ack the job ({error}): it is delivered again once its time to run passes")
                    }
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
