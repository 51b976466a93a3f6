//! Finishing the worker's jobs: acks of the jobs whose handlers succeeded in one call a batch,
//! nacks of those that failed, and acks Redis did not answer sent again.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{info, warn};

use crate::client::Client;
use crate::client::finish::Acked;
use crate::client::finish::Nacked;
use crate::error::Error;
use crate::job::Receipt;
use delayer_wire::connection::unanswered;

/// The wait before an ack that Redis did not answer is sent again; it doubles up to
/// [`ACK_RETRY_MAX_WAIT`].
const ACK_RETRY_FIRST_WAIT: Duration = Duration::from_millis(100);
const ACK_RETRY_MAX_WAIT: Duration = Duration::from_secs(2);

/// A job whose handler ended, to be acked (or nacked).
pub(super) struct Finished {
    pub(super) reservation: Receipt,
    /// Why the handler failed; `None` when it succeeded.
    pub(super) failure: Option<String>,
    /// When a failed job is tried again.
    pub(super) backoff: Duration,
}

/// What the finishing of jobs needs: the acks, nacks and the acks sent again.
pub(super) struct Finisher {
    pub(super) client: Client,
    pub(super) ttr: Duration,
    pub(super) stopped: watch::Receiver<bool>,
}

impl Finisher {
    /// Sends the ack of a finished job again, after a wait, while Redis does not answer it: until
    /// the job's time to run has passed (it is delivered again then anyway), or once more at the
    /// stop. Without it, an outage shorter than `ttr` would have every job finished during it run
    /// twice.
    pub(super) async fn ack_again(self: Arc<Self>, reservation: Receipt) {
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
    pub(super) async fn finish(self: Arc<Self>, batch: Vec<Finished>) -> Vec<Receipt> {
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
        for done in &batch {
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
}

/// The delay before attempt `attempts + 1`: `first`, doubled per attempt made, at most `max`.
pub(super) fn backoff(first: Duration, max: Duration, attempts: u32) -> Duration {
    let doublings = attempts.saturating_sub(1).min(31);
    first.saturating_mul(1 << doublings).min(max)
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
