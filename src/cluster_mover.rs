//! The timer loop for Redis Cluster (`[redis] cluster`). In the cluster layout each topic's keys
//! share one hash slot, so the move script runs once per topic, on the master that holds it; the
//! registry of topics (written by pushers) says which pools there are. Every look drains all
//! topics at once: each master works through its own topics while the others work on theirs.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Result, bail};
use deadpool_redis::redis::{AsyncCommands, RedisResult};
use futures_util::StreamExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use crate::cluster_watch::ClusterWatch;
use crate::config::{Config, RedisConfig};
use crate::metrics::Metrics;
use crate::move_log::{self, StuckTopics};
use crate::mover::{MIN_LOOK_GAP, earliest, wait_until};
use crate::pool::{self, Failure};
use delayer_client::Target;
use delayer_client::connection::Connection;
use delayer_client::keys::{Keys, Layout};
use delayer_client::scripts::move_due::{MoveScript, STUCK_RECHECK};
use delayer_client::scripts::release::ReleaseScript;
use delayer_client::time::unix_now;

/// Topics drained at once. Each holds one script call in flight; the cluster connection carries
/// them to the masters side by side.
const TOPICS_AT_ONCE: usize = 64;
/// The first wait after a failed look; it doubles up to [`MAX_RETRY_WAIT`].
const FIRST_RETRY_WAIT: Duration = Duration::from_millis(50);
const MAX_RETRY_WAIT: Duration = Duration::from_millis(500);

/// Moves due jobs from each topic's pool to its ready list, across a cluster.
pub struct ClusterMover {
    target: Target,
    /// The working connection; dropped after a failure, so that the next look reconnects.
    connection: tokio::sync::Mutex<Option<Connection>>,
    redis: RedisConfig,
    script: MoveScript,
    release: ReleaseScript,
    metrics: Arc<Metrics>,
    stuck: Mutex<StuckTopics>,
    /// Any topic's keys: the registry's name, and the ready and dead list names of every topic.
    keys: Keys,
    batch_size: usize,
    max_attempts: u32,
    timer_interval: Duration,
}

impl ClusterMover {
    pub fn new(config: &Config) -> Result<ClusterMover> {
        Ok(ClusterMover {
            target: pool::target(&config.redis)?,
            connection: tokio::sync::Mutex::new(None),
            redis: config.redis.clone(),
            script: MoveScript::default(),
            release: ReleaseScript::default(),
            metrics: Arc::default(),
            stuck: Mutex::default(),
            keys: Layout::Cluster.keys(""),
            batch_size: config.batch_size,
            max_attempts: config.max_attempts,
            timer_interval: config.timer_interval,
        })
    }

    /// Fails if the nodes answer but are no cluster, or refuse the credentials; an unreachable
    /// cluster is not an error here, the loop waits for it.
    pub async fn check_redis(&self) -> Result<()> {
        match self.connection().await {
            Err(error) if pool::is_config_error(&error) => {
                bail!(pool::describe_refusal(&error, &self.redis).await)
            }
            _ => Ok(()),
        }
    }

    /// The cluster, for the daemon's other connections.
    pub fn target(&self) -> Target {
        self.target.clone()
    }

    /// What the daemon has counted, for `/metrics` and `/healthz`.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// Moves jobs as they fall due until `shutdown` is cancelled; script calls that have started
    /// always finish.
    pub async fn run(&self, shutdown: &CancellationToken) {
        let mut outage: Option<Failure> = None;
        let mut retry_wait = FIRST_RETRY_WAIT;
        let mut watch = ClusterWatch::new(&self.redis);
        loop {
            watch.seen();
            let looked = self.look(shutdown).await;
            let looked_at = Instant::now();
            self.metrics.looked(looked.is_ok());
            if shutdown.is_cancelled() {
                return;
            }
            let wait = match looked {
                Ok(next_due) => {
                    if let Some(failure) = outage.take() {
                        info!("{}", failure.recovered(&self.redis.address()));
                    }
                    retry_wait = FIRST_RETRY_WAIT;
                    if let Ok(mut connection) = self.connection().await {
                        // Connecting the watches may take a while; nothing changes until then.
                        tokio::select! {
                            () = watch.ensure(&mut connection) => {}
                            () = shutdown.cancelled() => return,
                        }
                    }
                    wait_until(next_due, self.timer_interval)
                }
                Err(error) => {
                    *self.connection.lock().await = None;
                    let trouble = pool::describe_redis(&error, &self.redis);
                    // Once per outage (or change of cause), not on every retry.
                    if outage != Some(trouble.kind) {
                        error!("{trouble}; {}", trouble.kind.waiting_for());
                    }
                    outage = Some(trouble.kind);
                    let wait = retry_wait;
                    retry_wait = (retry_wait * 2).min(MAX_RETRY_WAIT);
                    wait
                }
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                // A client pushed: look again, but not more often than MIN_LOOK_GAP.
                () = async {
                    watch.written().await;
                    tokio::time::sleep_until(looked_at + MIN_LOOK_GAP).await;
                } => {}
                () = shutdown.cancelled() => return,
            }
        }
    }

    /// One look: reads the registry, then drains every topic; returns when the next job falls due
    /// (or reservation lapses).
    async fn look(&self, shutdown: &CancellationToken) -> RedisResult<Option<f64>> {
        let mut connection = self.connection().await?;
        let topics: Vec<String> = connection.smembers(self.keys.topics()).await?;
        let mut drains = futures_util::stream::iter(topics)
            .map(|topic| self.drain(connection.clone(), topic, shutdown))
            .buffer_unordered(TOPICS_AT_ONCE);
        let mut next_due = None;
        let mut failure = None;
        // Every drain runs to its end, even after one failed: the others' moves must be logged.
        while let Some(drained) = drains.next().await {
            match drained {
                Ok(due) => next_due = earliest(next_due, due),
                Err(error) => failure = Some(error),
            }
        }
        self.stuck
            .lock()
            .expect("not poisoned")
            .report(STUCK_RECHECK, &self.keys);
        match failure {
            Some(error) => Err(error),
            None => Ok(next_due),
        }
    }

    /// Moves `topic`'s due jobs until a batch comes back short (or a stop is asked for), then
    /// delivers again its jobs whose reservation lapsed; returns when its next job falls due.
    async fn drain(
        &self,
        mut connection: Connection,
        topic: String,
        shutdown: &CancellationToken,
    ) -> RedisResult<Option<f64>> {
        let keys = Layout::Cluster.keys(&topic);
        loop {
            let batch = loop {
                let now = unix_now();
                let started = std::time::Instant::now();
                let batch = self
                    .script
                    .run(&mut connection, &keys, now, self.batch_size)
                    .await?;
                self.metrics.moved(&batch, now, started.elapsed());
                self.stuck.lock().expect("not poisoned").note(&batch, &keys);
                move_log::moves(&batch);
                if !batch.is_full(self.batch_size) || shutdown.is_cancelled() {
                    break batch;
                }
            };
            let started = std::time::Instant::now();
            let released = self
                .release
                .lapsed(
                    &mut connection,
                    &keys,
                    unix_now(),
                    self.max_attempts,
                    self.batch_size,
                )
                .await?;
            self.metrics.released(&released, started.elapsed());
            move_log::released(&released, self.max_attempts, &keys);
            let put_back = !released.retried.is_empty() || !released.blocked.is_empty();
            if !put_back || shutdown.is_cancelled() {
                return Ok(earliest(batch.next_due, released.next_deadline));
            }
            // The jobs put back are due now: moved in this same look.
        }
    }

    async fn connection(&self) -> RedisResult<Connection> {
        let mut current = self.connection.lock().await;
        if let Some(connection) = current.as_ref() {
            return Ok(connection.clone());
        }
        let connection = self.target.connect().await?;
        *current = Some(connection.clone());
        Ok(connection)
    }
}
