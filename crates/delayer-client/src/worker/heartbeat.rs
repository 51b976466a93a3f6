//! The worker's heartbeat: a task of its own that tells Redis every few seconds who the worker is
//! and how many jobs it holds, so that the console lists it, and marks it gone once the beats
//! stop (a kill, a hang, a lost network); removed from the list at a clean stop. Never on the
//! job path: a beat that fails is logged once and the jobs go on.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;
use tracing::{info, warn};

use crate::client::Client;
use delayer_wire::consumer::{BEAT, Heartbeat};

/// How long a stop waits for the worker's removal from the list; it is listed as gone after.
const FORGET_WAIT: Duration = Duration::from_secs(2);

/// The beats under way; [`stop`](Beating::stop) them at the worker's stop. Dropped (the worker's
/// `run` dropped), they stop at once, without the removal.
pub(super) struct Beating {
    done: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Beating {
    /// Beats for `beat` at once and every [`BEAT`], each with the jobs `held` then.
    pub(super) fn start(client: Client, beat: Heartbeat, held: Arc<AtomicUsize>) -> Beating {
        let (done, stopped) = oneshot::channel();
        let task = tokio::spawn(run(client, beat, held, stopped));
        Beating {
            done: Some(done),
            task,
        }
    }

    /// Stops the beats and removes the worker from the list.
    pub(super) async fn stop(mut self) {
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
        let _ = (&mut self.task).await;
    }
}

impl Drop for Beating {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run(
    client: Client,
    mut beat: Heartbeat,
    held: Arc<AtomicUsize>,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut every = tokio::time::interval(BEAT);
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tokio::select! {
            biased;
            _ = &mut stopped => break,
            _ = every.tick() => {}
        }
        beat.held = Some(held.load(Ordering::Relaxed));
        match client.beat(&beat).await {
            Ok(()) if failing => {
                failing = false;
                info!(consumer = beat.id, "worker heartbeat written again");
            }
            Ok(()) => {}
            // Once for a run of failures: a Redis that is down says so elsewhere too.
            Err(error) if !failing => {
                failing = true;
                warn!(
                    consumer = beat.id,
                    "cannot write the worker's heartbeat ({error}): its jobs go on, but the \
                     console may list it as gone"
                );
            }
            Err(_) => {}
        }
    }
    match tokio::time::timeout(FORGET_WAIT, client.forget_consumer(&beat.id)).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => warn!(
            consumer = beat.id,
            "cannot remove the stopped worker from the consumers' list ({error}): it shows as \
             gone until its entry ages out"
        ),
        Err(_) => warn!(
            consumer = beat.id,
            "Redis did not answer the stopped worker's removal from the consumers' list: it \
             shows as gone until its entry ages out"
        ),
    }
}
