//! The turns of QStash's queued messages: a message of a queue is sent once it is among the first
//! `parallelism` of its queue's line (`qstash::queues`), and leaves the line when it is done. Each
//! queue with messages waiting here is looked at every [`LOOK_EVERY`] (one call for all of them),
//! and at once when one of this daemon's leaves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayer_wire::shared_connection::SharedConnection;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::qstash::queues;
use crate::service::duty::Trouble;

/// How often a queue's line is read while messages here wait for their turn: how soon a turn
/// freed by another daemon is seen.
const LOOK_EVERY: Duration = Duration::from_millis(20);
/// A queue no message waits for is let go after this long.
const IDLE: Duration = Duration::from_secs(1);

/// The ids whose turn it is (`None`: the queue is gone, every message goes).
type Turns = Option<Vec<String>>;

/// A queue watched: its turns, and the nudge that has them read again at once.
type Watched = (watch::Sender<Turns>, Arc<Notify>);

/// The queues' lines, as this daemon watches them.
pub struct Lines {
    redis: Arc<SharedConnection>,
    watched: Mutex<HashMap<String, Watched>>,
}

impl Lines {
    pub fn new(redis: Arc<SharedConnection>) -> Lines {
        Lines {
            redis,
            watched: Mutex::default(),
        }
    }

    /// Waits for message `id`'s turn in `queue`: true then, false at `stop`.
    pub async fn wait_turn(
        self: &Arc<Self>,
        queue: &str,
        id: &str,
        stop: &CancellationToken,
    ) -> bool {
        let mut turns = self.watch(queue);
        loop {
            let ready = match &*turns.borrow_and_update() {
                None => true,
                Some(ids) => ids.iter().any(|turn| turn == id),
            };
            if ready {
                return true;
            }
            tokio::select! {
                changed = turns.changed() => {
                    if changed.is_err() {
                        // Let go while this waited: watch it again.
                        turns = self.watch(queue);
                    }
                }
                () = stop.cancelled() => return false,
            }
        }
    }

    /// Message `id` is done: out of `queue`'s line, and the next one's turn is looked at now.
    pub async fn leave(&self, queue: &str, id: &str) {
        let left = match self.redis.get().await {
            Ok(mut redis) => queues::leave(&mut redis, queue, id).await,
            Err(error) => Err(error),
        };
        if let Err(error) = left {
            warn!(%id, "qstash: cannot take a message out of queue {queue}'s line ({error}): the queue waits until it can");
        }
        if let Some((_, nudge)) = self.watched.lock().expect("not poisoned").get(queue) {
            nudge.notify_one();
        }
    }

    /// A watch of `queue`'s turns, starting the look at its line if none runs.
    fn watch(self: &Arc<Self>, queue: &str) -> watch::Receiver<Turns> {
        let mut watched = self.watched.lock().expect("not poisoned");
        if let Some((turns, _)) = watched.get(queue) {
            return turns.subscribe();
        }
        let (turns, receiver) = watch::channel(Some(Vec::new()));
        let nudge = Arc::new(Notify::new());
        watched.insert(queue.to_string(), (turns, nudge.clone()));
        tokio::spawn(self.clone().look(queue.to_string(), nudge));
        receiver
    }

    /// Reads `queue`'s turns until no message here waits for one.
    async fn look(self: Arc<Self>, queue: String, nudge: Arc<Notify>) {
        let mut trouble = Trouble::default();
        let mut idle_since = None;
        loop {
            let read = match self.redis.get().await {
                Ok(mut redis) => queues::sendable(&mut redis, &queue).await,
                Err(error) => Err(error),
            };
            match read {
                Ok(turns) => {
                    trouble.worked();
                    let watched = self.watched.lock().expect("not poisoned");
                    if let Some((sender, _)) = watched.get(&queue) {
                        sender.send_replace(turns);
                    }
                }
                Err(error) => {
                    if trouble.failed() {
                        warn!(
                            "qstash: cannot read queue {queue}'s line ({error}): its messages wait"
                        );
                    }
                }
            }
            {
                let mut watched = self.watched.lock().expect("not poisoned");
                let waiting = watched
                    .get(&queue)
                    .is_some_and(|(sender, _)| sender.receiver_count() > 0);
                if waiting {
                    idle_since = None;
                } else if idle_since
                    .get_or_insert_with(tokio::time::Instant::now)
                    .elapsed()
                    >= IDLE
                {
                    watched.remove(&queue);
                    return;
                }
            }
            tokio::select! {
                () = nudge.notified() => {}
                () = tokio::time::sleep(LOOK_EVERY) => {}
            }
        }
    }
}
