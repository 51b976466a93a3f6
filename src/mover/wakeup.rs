//! Wakes the timer loop when anyone writes the job pool, so a job pushed while the loop sleeps is
//! seen at once rather than after up to `timer_interval` (see `delayer_wire::watch`). Where Redis
//! cannot report writes (Redis 5, `CLIENT` denied by ACL) the loop polls every `timer_interval`.

use delayer_wire::keys::Keys;
use delayer_wire::watch::{Ensured, KeyWatch};
use delayer_wire::{Target, connection};
use tokio::sync::watch;
use tracing::info;

/// Watches the job pool for writes.
pub struct PoolWatch {
    watch: KeyWatch,
    written: watch::Receiver<u64>,
    address: String,
    pool: String,
}

impl PoolWatch {
    /// A watch on `keys`' pool in `redis`; `address` names it in messages.
    pub fn new(redis: Target, keys: &Keys, address: String) -> PoolWatch {
        let watch = KeyWatch::new(redis, connection::config(), keys.pool());
        PoolWatch {
            written: watch.subscribe(),
            watch,
            address,
            pool: keys.pool().to_string(),
        }
    }

    /// Starts watching if not yet (or no longer) watching; quick when already watching. Failures
    /// while Redis is unreachable are left to the loop's outage handling: it will be tried again.
    pub async fn ensure(&mut self) {
        if let Ensured::Unsupported(Some(refusal)) = self.watch.ensure().await {
            info!(
                "Jobs pushed to fall due sooner than the loop's next look wait up to timer_interval: \
                 Redis at {} cannot report writes to {} ({refusal}; CLIENT TRACKING needs Redis 6)",
                self.address, self.pool
            );
        }
    }

    /// A receiver of the writes, for another task that looks when a client pushed (the
    /// stager, for the `wanted` key a push leaves beside its jobs).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.watch.subscribe()
    }

    /// Forgets the writes so far: the poll about to start sees them.
    pub fn seen(&mut self) {
        self.written.mark_unchanged();
    }

    /// Completes when the pool was written since the last [`seen`](PoolWatch::seen).
    pub async fn written(&mut self) {
        if self.written.changed().await.is_err() {
            // Cannot happen (the watch owns the sender); never wake for it.
            std::future::pending::<()>().await;
        }
    }
}
