//! The timer loop: runs the move script when jobs fall due, back to back while a backlog drains.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use anyhow::{Result, bail};
use deadpool_redis::redis::{self, RedisResult};
use deadpool_redis::{Connection, PoolError};
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use crate::config::{Config, RedisConfig};
use crate::metrics::Metrics;
use crate::move_log::{self, StuckTopics};
use crate::pool::{self, Failure, RedisPool, Trouble};
use crate::wakeup::PoolWatch;
use delayer_client::Target;
use delayer_client::keys::Keys;
use delayer_client::scripts::move_due::{Batch, MoveScript, STUCK_RECHECK};
use delayer_client::scripts::release::{ReleaseScript, Released};
use delayer_client::time::unix_now;

/// The first wait after a failed attempt; it doubles up to [`MAX_RETRY_WAIT`].
const FIRST_RETRY_WAIT: Duration = Duration::from_millis(50);
/// Capped well under a second so what fell due during an outage moves within a second of Redis returning.
const MAX_RETRY_WAIT: Duration = Duration::from_millis(500);
/// The least time between two looks woken by writes to the pool: a burst of pushes must not turn
/// into thousands of script calls, and a job due within this is at most this late.
pub(crate) const MIN_LOOK_GAP: Duration = Duration::from_millis(5);
/// How long before a known due time the timer wakes: enough to take a connection from the pool
/// (which checks it with a round trip) and to absorb tokio's whole-millisecond timer, so that the
/// first move goes out as the due time comes rather than a millisecond or two after.
const WAKE_EARLY: Duration = Duration::from_millis(3);
/// While a backlog drains, lapsed reservations are still delivered again this often: a long drain
/// must not hold up redelivery.
const RELEASE_EVERY: Duration = Duration::from_secs(1);

/// Moves due jobs from the job pool to the ready lists.
pub struct Mover {
    pool: RedisPool,
    redis: RedisConfig,
    script: MoveScript,
    /// The key names of the configured layout.
    keys: Keys,
    metrics: Arc<Metrics>,
    /// Ends reservations whose time to run lapsed.
    release: ReleaseScript,
    batch_size: usize,
    max_attempts: u32,
    timer_interval: Duration,
}

impl Mover {
    pub fn new(config: &Config) -> Result<Mover> {
        Ok(Mover {
            pool: RedisPool::new(&config.redis, pool::target(&config.redis)?)?,
            redis: config.redis.clone(),
            script: MoveScript::default(),
            keys: config.redis.layout.keys(""),
            metrics: Arc::default(),
            release: ReleaseScript::default(),
            batch_size: config.batch_size,
            max_attempts: config.max_attempts,
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
                bail!(pool::describe_refusal(&error, &self.redis).await)
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
        tokio::join!(self.look(shutdown), self.pool.follow_master(shutdown));
    }

    /// The loop itself: a look at the pool, then a sleep until the next job falls due.
    async fn look(&self, shutdown: &CancellationToken) {
        let mut watch = PoolWatch::new(self.pool.target(), &self.keys, self.redis.address());
        let mut said = Said::default();
        let mut retry_wait = FIRST_RETRY_WAIT;
        // The due time the timer woke early for, if it did.
        let mut aim = None;
        loop {
            watch.seen();
            let drained = self.drain(shutdown, &mut said, aim.take()).await;
            self.metrics.looked(drained.is_ok());
            let looked_at = Instant::now();
            if shutdown.is_cancelled() {
                return;
            }
            let mut due_at = None;
            let wait = match drained {
                Ok(next_due) => {
                    retry_wait = FIRST_RETRY_WAIT;
                    // Connecting the watch may take a while; nothing changes until it succeeds.
                    tokio::select! {
                        () = watch.ensure() => {}
                        () = shutdown.cancelled() => return,
                    }
                    let wait = wait_until(next_due, self.timer_interval);
                    // Only for a wait of a millisecond or more: jobs due closer together than that
                    // are moved a tick at a time, as before, not in one look each.
                    if wait >= Duration::from_millis(1) && wait < self.timer_interval {
                        due_at = next_due;
                    }
                    wait
                }
                Err(Stopped {
                    trouble,
                    lost_reply,
                }) => {
                    // With Sentinel, the next try asks where the master is now.
                    self.pool.forget_master();
                    let waiting = trouble.kind.waiting_for();
                    if lost_reply {
                        // Every lost reply is said: each may hide moved jobs no other line lists.
                        error!(
                            "The reply to a move never came ({trouble}): it may have moved up to {} \
                             jobs that no \"Job is ready\" line lists; {waiting}",
                            self.batch_size
                        );
                    } else if said.outage != Some(trouble.kind) {
                        // Once per outage (or change of cause), not on every retry.
                        error!("{trouble}; {waiting}");
                    }
                    said.outage = Some(trouble.kind);
                    let wait = retry_wait;
                    retry_wait = (retry_wait * 2).min(MAX_RETRY_WAIT);
                    wait
                }
            };
            let early = if due_at.is_some() {
                WAKE_EARLY
            } else {
                Duration::ZERO
            };
            tokio::select! {
                () = tokio::time::sleep(wait.saturating_sub(early)) => aim = due_at,
                // A client pushed: look again, but not more often than MIN_LOOK_GAP.
                () = async {
                    watch.written().await;
                    tokio::time::sleep_until(looked_at + MIN_LOOK_GAP).await;
                } => {}
                () = shutdown.cancelled() => return,
            }
        }
    }

    /// Runs the move script until a batch comes back short (or a stop is asked for), then delivers
    /// again the jobs whose reservation lapsed; returns when the next job falls due or the next
    /// reservation lapses (now, when jobs were put back: the next look moves them at once). Given
    /// `aim`, the due time the timer woke early for, the first move waits for it once it holds a
    /// connection.
    async fn drain(
        &self,
        shutdown: &CancellationToken,
        said: &mut Said,
        aim: Option<f64>,
    ) -> Result<Option<f64>, Stopped> {
        self.pool.prune();
        // Waiting for a connection is cancellable; the script calls below are not.
        let mut connection = tokio::select! {
            connection = self.pool.get() => connection.map_err(|error| Stopped {
                trouble: pool::describe(&error, &self.redis),
                lost_reply: false,
            })?,
            () = shutdown.cancelled() => return Ok(None),
        };
        if let Some(due) = aim {
            sleep_precisely(due).await;
        }
        let master_moves = self.pool.master_moves();
        let mut batch = self.move_due(&mut connection, shutdown, said).await?;
        loop {
            if self.pool.master_moves() != master_moves {
                // The master is elsewhere now: nothing more on this connection; look there at once.
                return Ok(Some(unix_now()));
            }
            // After the moves, which are what is late when a burst falls due.
            let (next_deadline, put_back) = self
                .deliver_lapsed(&mut connection, shutdown, said)
                .await
                .map_err(|error| self.stopped(error))?;
            if !put_back || shutdown.is_cancelled() {
                return Ok(earliest(batch.next_due, next_deadline));
            }
            // The jobs put back are due now: moved in this same look.
            batch = self.move_due(&mut connection, shutdown, said).await?;
        }
    }

    /// Runs the move script until a batch comes back short (or a stop is asked for), delivering
    /// lapsed reservations again every [`RELEASE_EVERY`] meanwhile; returns the last batch.
    async fn move_due(
        &self,
        connection: &mut Connection,
        shutdown: &CancellationToken,
        said: &mut Said,
    ) -> Result<Batch, Stopped> {
        let mut batch = self
            .run_script(connection, unix_now())
            .await
            .map_err(|error| self.stopped(error))?;
        said.redis_works(&self.redis.address());
        said.stuck.note(&batch, &self.keys);
        let mut released_at = Instant::now();
        let master_moves = self.pool.master_moves();
        while batch.is_full(self.batch_size)
            && !shutdown.is_cancelled()
            && self.pool.master_moves() == master_moves
        {
            if released_at.elapsed() >= RELEASE_EVERY {
                if let Err(error) = self.deliver_lapsed(connection, shutdown, said).await {
                    said.stuck.report(STUCK_RECHECK, &self.keys);
                    return Err(self.stopped(error));
                }
                released_at = Instant::now();
            }
            // The next call goes out before this batch is logged, so Redis works while we format.
            let (next, ()) = tokio::join!(
                biased;
                self.run_script(connection, unix_now()),
                async { move_log::moves(&batch) },
            );
            batch = match next {
                Ok(next) => next,
                Err(error) => {
                    said.stuck.report(STUCK_RECHECK, &self.keys);
                    return Err(self.stopped(error));
                }
            };
            said.stuck.note(&batch, &self.keys);
        }
        move_log::moves(&batch);
        said.stuck.report(STUCK_RECHECK, &self.keys);
        Ok(batch)
    }

    /// A drain stopped by `error` from a script call.
    fn stopped(&self, error: redis::RedisError) -> Stopped {
        Stopped {
            lost_reply: pool::reply_may_be_lost(&error),
            trouble: pool::describe_redis(&error, &self.redis),
        }
    }

    /// Ends the reservations whose deadline passed (their jobs go back to the pool, due now, or to
    /// their dead list), and returns the next deadline and whether it put jobs back. When Redis
    /// refuses the release itself (no permission for `delayer:reserved`, a key of the wrong type)
    /// that is said once and jobs keep moving: a user of the legacy keys alone loses nothing.
    async fn deliver_lapsed(
        &self,
        connection: &mut Connection,
        shutdown: &CancellationToken,
        said: &mut Said,
    ) -> RedisResult<(Option<f64>, bool)> {
        let mut put_back = false;
        loop {
            let released = match self.release_lapsed(connection).await {
                Ok(released) => released,
                Err(error) => {
                    let trouble = pool::describe_redis(&error, &self.redis);
                    if !matches!(trouble.kind, Failure::NoPermission | Failure::Other) {
                        return Err(error);
                    }
                    said.redis_works(&self.redis.address());
                    said.release_refused(&trouble);
                    return Ok((None, put_back));
                }
            };
            said.redis_works(&self.redis.address());
            said.release_works();
            move_log::released(&released, self.max_attempts, &self.keys);
            put_back |= !released.retried.is_empty() || !released.blocked.is_empty();
            if released.ended < self.batch_size || shutdown.is_cancelled() {
                return Ok((released.next_deadline, put_back));
            }
        }
    }

    /// Ends up to a batch of reservations whose deadline passed.
    async fn release_lapsed(&self, connection: &mut Connection) -> RedisResult<Released> {
        let started = std::time::Instant::now();
        let released = self
            .release
            .lapsed(
                connection,
                &self.keys,
                unix_now(),
                self.max_attempts,
                self.batch_size,
            )
            .await?;
        self.metrics.released(&released, started.elapsed());
        Ok(released)
    }

    /// One move as of `now` (unix seconds), counted in the metrics.
    async fn run_script(&self, connection: &mut Connection, now: f64) -> RedisResult<Batch> {
        let started = std::time::Instant::now();
        let batch = self
            .script
            .run(connection, &self.keys, now, self.batch_size)
            .await?;
        self.metrics.moved(&batch, now, started.elapsed());
        Ok(batch)
    }

    /// What the daemon has counted, for `/metrics` and `/healthz`.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// Where Redis is, for the daemon's other connections: one `Target`, so that a failover is
    /// found (and told) once.
    pub fn target(&self) -> Target {
        self.pool.target()
    }
}

/// What the loop has told the log, so that each state is said once, when it begins and ends.
#[derive(Default)]
struct Said {
    stuck: StuckTopics,
    /// Redis failed the last look this way.
    outage: Option<Failure>,
    /// Redis refuses the release of lapsed reservations this way (jobs still move).
    release_refusal: Option<Failure>,
}

impl Said {
    /// A script call succeeded: an outage, if any, is over. Said before what that call did.
    fn redis_works(&mut self, address: &str) {
        if let Some(failure) = self.outage.take() {
            info!("{}", failure.recovered(address));
        }
    }

    fn release_refused(&mut self, trouble: &Trouble) {
        if self.release_refusal != Some(trouble.kind) {
            error!(
                "Jobs whose reservation lapsed cannot be delivered again ({trouble}); jobs still \
                 move as they fall due"
            );
            self.release_refusal = Some(trouble.kind);
        }
    }

    fn release_works(&mut self) {
        if self.release_refusal.take().is_some() {
            info!("Jobs whose reservation lapsed are delivered again");
        }
    }
}

/// Sleeps until `due` (unix seconds, at most [`WAKE_EARLY`] ahead) to within a fraction of a
/// millisecond, never less: tokio's timer rounds up to whole milliseconds, a thread's sleep does
/// not. A blocking-pool thread sleeps, so the runtime goes on serving HTTP meanwhile.
async fn sleep_precisely(due: f64) {
    let left = (due - unix_now()).min(WAKE_EARLY.as_secs_f64());
    if left > 0.0 {
        let left = Duration::from_secs_f64(left);
        // A panic in a sleep is not possible; a failed join would only mean waking early.
        let _ = tokio::task::spawn_blocking(move || std::thread::sleep(left)).await;
    }
}

/// The earlier of two times, either of which may be unknown.
/// How long to sleep: until the next job is due (or reservation lapses), but never longer than
/// `timer_interval`, so that jobs added with an earlier due time are found in time.
pub(crate) fn wait_until(next_due: Option<f64>, timer_interval: Duration) -> Duration {
    next_due.map_or(timer_interval, |due| {
        // max/min rather than clamp: a score of +inf must mean "a long way off", not a panic.
        let seconds = (due - unix_now())
            .max(0.0)
            .min(timer_interval.as_secs_f64());
        Duration::from_secs_f64(seconds)
    })
}

pub(crate) fn earliest(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A drain that failed: why, and whether the failed call was a move whose reply never came.
struct Stopped {
    trouble: Trouble,
    lost_reply: bool,
}
