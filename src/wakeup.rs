//! Wakes the timer loop when anyone writes the job pool, so a job pushed while the loop sleeps is
//! seen at once rather than after up to `timer_interval`.
//!
//! The legacy clients cannot be changed to signal us, but Redis 6+ can: on a connection of its own,
//! `CLIENT TRACKING ON BCAST PREFIX delayer:job_pool` makes Redis push an invalidation for every
//! write to the pool, with no change to the server's configuration. Where that is not available
//! (Redis 5, a `CLIENT` command denied by ACL) the loop keeps looking every `timer_interval`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use deadpool_redis::redis::aio::MultiplexedConnection;
use deadpool_redis::redis::{self, ProtocolVersion, PushInfo, PushKind, RedisResult};
use tokio::sync::Notify;
use tracing::info;

use crate::config::RedisConfig;
use crate::pool;
use delayer_client::keys;

/// Watches the job pool for writes.
pub struct PoolWatch {
    redis: RedisConfig,
    written: Arc<Notify>,
    lost: Arc<AtomicBool>,
    /// The tracking connection while watching; `None` before, or once it was lost.
    connection: Option<MultiplexedConnection>,
    /// This Redis cannot do it (told once); the loop relies on `timer_interval`.
    unsupported: bool,
}

impl PoolWatch {
    pub fn new(redis: &RedisConfig) -> PoolWatch {
        PoolWatch {
            redis: redis.clone(),
            written: Arc::new(Notify::new()),
            lost: Arc::new(AtomicBool::new(false)),
            connection: None,
            unsupported: false,
        }
    }

    /// Starts watching if not yet (or no longer) watching; quick when already watching. Failures
    /// while Redis is unreachable are left to the loop's outage handling: it will be tried again.
    pub async fn ensure(&mut self) {
        if self.lost.swap(false, Ordering::Relaxed) {
            self.connection = None;
        }
        if self.connection.is_some() || self.unsupported {
            return;
        }
        match self.connect().await {
            Ok(connection) => self.connection = Some(connection),
            // Redis unreachable or refusing the password: the loop says so; try again later.
            Err(error) if pool::is_retryable(&error) => {}
            Err(error) => {
                info!(
                    "jobs pushed to fall due sooner than the loop's next look wait up to timer_interval: \
                     Redis at {} cannot report writes to {} ({error}; CLIENT TRACKING needs Redis 6)",
                    self.redis.address(),
                    keys::JOB_POOL
                );
                self.unsupported = true;
            }
        }
    }

    /// Completes when the pool was written since the last call (or the watch was lost).
    pub async fn written(&self) {
        self.written.notified().await;
    }

    async fn connect(&self) -> RedisResult<MultiplexedConnection> {
        let info = pool::connection_info(&self.redis, ProtocolVersion::RESP3)?;
        let (written, lost) = (self.written.clone(), self.lost.clone());
        let on_push = move |push: PushInfo| -> Result<(), std::convert::Infallible> {
            if push.kind == PushKind::Disconnection {
                lost.store(true, Ordering::Relaxed);
            }
            // One stored permit however many pushes: the loop looks once for all of them.
            written.notify_one();
            Ok(())
        };
        let config = pool::connection_config().set_push_sender(on_push);
        let mut connection = redis::Client::open(info)?
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        redis::cmd("CLIENT")
            .arg(&["TRACKING", "ON", "BCAST", "PREFIX", keys::JOB_POOL][..])
            .query_async::<()>(&mut connection)
            .await?;
        Ok(connection)
    }
}
