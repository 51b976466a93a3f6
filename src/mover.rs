//! The timer loop: runs the move script when jobs fall due, back to back while a backlog drains.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use anyhow::{Result, bail};
use deadpool_redis::redis::{self, ErrorKind, RedisResult, Script, Value};
use deadpool_redis::{Connection, Pool, PoolError};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::config::{Config, RedisConfig};
use crate::keys;
use crate::pool::{self, Failure, Trouble};
use crate::wakeup::PoolWatch;

/// The first wait after a failed attempt; it doubles up to [`MAX_RETRY_WAIT`].
const FIRST_RETRY_WAIT: Duration = Duration::from_millis(50);
/// Capped well under a second so what fell due during an outage moves within a second of Redis returning.
const MAX_RETRY_WAIT: Duration = Duration::from_millis(500);
/// The least time between two looks woken by writes to the pool: a burst of pushes must not turn
/// into thousands of script calls, and a job due within this is at most this late.
const MIN_LOOK_GAP: Duration = Duration::from_millis(5);

/// What one run of the move script did.
#[derive(Debug, Default, PartialEq)]
pub struct Batch {
    /// How many ids left the pool (moved or dropped); equal to the batch size when more may be due.
    pub taken: usize,
    /// When the earliest job that is not due yet falls due, in unix seconds.
    pub next_due: Option<f64>,
    /// Ids dropped from the pool because their bucket or its topic is gone.
    pub orphans: Vec<String>,
    /// Ids left in the pool because their ready list key holds something other than a list.
    pub stuck: Vec<String>,
    /// Each topic pushed to, with its ids in due order.
    pub moved: Vec<(String, Vec<String>)>,
}

impl Batch {
    /// How many jobs were pushed onto ready lists.
    pub fn moved_count(&self) -> usize {
        self.moved.iter().map(|(_, ids)| ids.len()).sum()
    }

    /// More jobs may be due right now.
    fn is_full(&self, batch_size: usize) -> bool {
        self.taken >= batch_size
    }
}

/// Moves due jobs from the job pool to the ready lists.
pub struct Mover {
    pool: Pool,
    redis: RedisConfig,
    script: Script,
    batch_size: usize,
    timer_interval: Duration,
}

impl Mover {
    pub fn new(config: &Config) -> Result<Mover> {
        Ok(Mover {
            pool: pool::build(&config.redis)?,
            redis: config.redis.clone(),
            script: Script::new(include_str!("move_due.lua")),
            batch_size: config.batch_size,
            timer_interval: config.timer_interval,
        })
    }

    /// Fails if Redis answers but refuses the configured password or database; an unreachable
    /// Redis is not an error here, the loop waits for it.
    pub async fn check_redis(&self) -> Result<()> {
        let reply = match self.pool.get().await {
            Ok(mut connection) => redis::cmd("PING").query_async::<()>(&mut connection).await,
            Err(PoolError::Backend(error)) => Err(error),
            Err(_) => return Ok(()),
        };
        match reply {
            Err(error) if pool::is_config_error(&error) => {
                bail!(pool::describe_redis(&error, &self.redis))
            }
            _ => Ok(()),
        }
    }

    /// Runs the script once, as of `now` (unix seconds).
    pub async fn tick(&self, now: f64) -> Result<Batch> {
        let mut connection = self.pool.get().await?;
        Ok(self.run_script(&mut connection, now).await?)
    }

    /// Moves jobs as they fall due until `shutdown` is cancelled. A script call that has started
    /// always finishes: Redis is never left with a job half-moved.
    pub async fn run(&self, shutdown: &CancellationToken) {
        let mut watch = PoolWatch::new(&self.redis);
        let mut outage: Option<Failure> = None;
        let mut retry_wait = FIRST_RETRY_WAIT;
        loop {
            let drained = self.drain(shutdown).await;
            let looked_at = Instant::now();
            if shutdown.is_cancelled() {
                return;
            }
            let wait = match drained {
                Ok(next_due) => {
                    if outage.take().is_some() {
                        info!(address = %self.redis.address(), "redis is reachable again");
                    }
                    retry_wait = FIRST_RETRY_WAIT;
                    // Connecting the watch may take a while; nothing changes until it succeeds.
                    tokio::select! {
                        () = watch.ensure() => {}
                        () = shutdown.cancelled() => return,
                    }
                    self.wait_until(next_due)
                }
                Err(trouble) => {
                    // Once per outage (or change of cause), not on every retry.
                    if outage != Some(trouble.kind) {
                        error!("{trouble}; retrying until it answers");
                        outage = Some(trouble.kind);
                    }
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

    /// Runs the script until a batch comes back short (or a stop is asked for), and returns when
    /// the next job falls due.
    async fn drain(&self, shutdown: &CancellationToken) -> Result<Option<f64>, Trouble> {
        pool::prune(&self.pool, &self.redis);
        // Waiting for a connection is cancellable; the script call below is not.
        let mut connection = tokio::select! {
            connection = self.pool.get() => {
                connection.map_err(|error| pool::describe(&error, &self.redis))?
            }
            () = shutdown.cancelled() => return Ok(None),
        };
        let describe = |error| pool::describe_redis(&error, &self.redis);
        let mut batch = self
            .run_script(&mut connection, unix_now())
            .await
            .map_err(describe)?;
        while batch.is_full(self.batch_size) && !shutdown.is_cancelled() {
            // The next call goes out before this batch is logged, so Redis works while we format.
            let (next, ()) = tokio::join!(
                biased;
                self.run_script(&mut connection, unix_now()),
                async { log_moves(&batch) },
            );
            batch = next.map_err(describe)?;
        }
        log_moves(&batch);
        // Stuck ids come back in every batch of a drain: said once per drain.
        log_stuck(&batch);
        Ok(batch.next_due)
    }

    async fn run_script(&self, connection: &mut Connection, now: f64) -> RedisResult<Batch> {
        let reply: Value = self
            .script
            .key(keys::JOB_POOL)
            .arg(format!("{now:.6}"))
            .arg(self.batch_size)
            .arg(keys::JOB_BUCKET_PREFIX)
            .arg(keys::READY_QUEUE_PREFIX)
            .invoke_async(connection)
            .await?;
        parse_reply(reply)
    }

    /// How long to sleep: until the next job is due, but never longer than `timer_interval`, so
    /// that jobs added with an earlier due time are found in time.
    fn wait_until(&self, next_due: Option<f64>) -> Duration {
        next_due.map_or(self.timer_interval, |due| {
            // max/min rather than clamp: a score of +inf must mean "a long way off", not a panic.
            let seconds = (due - unix_now())
                .max(0.0)
                .min(self.timer_interval.as_secs_f64());
            Duration::from_secs_f64(seconds)
        })
    }
}

fn log_moves(batch: &Batch) {
    // These lines keep the original's exact wording: people grep their logs for them.
    for (topic, ids) in &batch.moved {
        info!("Job is ready, Topic: {topic}, IDs: [{}]", ids.join(","));
    }
    if !batch.orphans.is_empty() {
        warn!(
            "dropped orphan jobs (bucket or topic gone), IDs: [{}]",
            batch.orphans.join(",")
        );
    }
}

fn log_stuck(batch: &Batch) {
    if !batch.stuck.is_empty() {
        error!(
            "jobs left in the pool: their ready list key ({}<topic>) is not a list, IDs: [{}]",
            keys::READY_QUEUE_PREFIX,
            batch.stuck.join(",")
        );
    }
}

/// The current time in unix seconds, with sub-second precision.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}

/// Reads the script's reply (see the header of `move_due.lua`).
fn parse_reply(reply: Value) -> RedisResult<Batch> {
    let malformed = || {
        redis::RedisError::from((
            ErrorKind::UnexpectedReturnType,
            "malformed move script reply",
        ))
    };
    let Value::Array(items) = reply else {
        return Err(malformed());
    };
    let mut items = items.into_iter();
    let (Some(Value::Int(taken)), Some(next_due), Some(orphans), Some(stuck)) =
        (items.next(), items.next(), items.next(), items.next())
    else {
        return Err(malformed());
    };
    let mut batch = Batch {
        taken: usize::try_from(taken).map_err(|_| malformed())?,
        next_due: text(next_due).and_then(|score| score.parse().ok()),
        orphans: texts(orphans).ok_or_else(malformed)?,
        stuck: texts(stuck).ok_or_else(malformed)?,
        moved: Vec::new(),
    };
    while let (Some(topic), Some(ids)) = (items.next(), items.next()) {
        batch.moved.push((
            text(topic).ok_or_else(malformed)?,
            texts(ids).ok_or_else(malformed)?,
        ));
    }
    Ok(batch)
}

/// Ids and topics are whatever bytes clients wrote; they are only printed, so lossy is fine.
fn text(value: Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
        _ => None,
    }
}

fn texts(value: Value) -> Option<Vec<String>> {
    match value {
        Value::Array(items) => items.into_iter().map(text).collect(),
        _ => None,
    }
}
