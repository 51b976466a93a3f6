//! A part of a page read from Redis and kept a moment for every request: the overview's charts
//! and consumers, which would otherwise cost Redis a read per request (the day's charts, over a
//! thousand hashes).

use std::future::Future;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

/// How long a part is kept: the figures above it are as old (see `figures`).
const KEPT_FOR: Duration = Duration::from_secs(1);

/// A part, with when it was read.
pub(super) struct Kept<V> {
    slot: Mutex<Option<(Instant, V)>>,
}

impl<V> Default for Kept<V> {
    fn default() -> Kept<V> {
        Kept {
            slot: Mutex::new(None),
        }
    }
}

impl<V: Clone> Kept<V> {
    /// The part, read by `read` when it is older than [`KEPT_FOR`]; requests meanwhile wait for
    /// that one read.
    pub(super) async fn get<F: Future<Output = V>>(&self, read: impl FnOnce() -> F) -> V {
        let mut slot = self.slot.lock().await;
        if let Some((at, value)) = &*slot
            && at.elapsed() < KEPT_FOR
        {
            return value.clone();
        }
        let value = read().await;
        *slot = Some((Instant::now(), value.clone()));
        value
    }
}
