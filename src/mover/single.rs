//! The loop for one Redis (or the master its sentinels name): one pool holds every topic's jobs,
//! drained by one step as they fall due, back to back while a backlog drains.

use std::time::Duration;

use anyhow::{Result, bail};
use deadpool_redis::PoolError;
use deadpool_redis::redis;
use delayer_wire::Target;
use delayer_wire::keys::Keys;
use delayer_wire::scripts::move_due::Batch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::outage::PollFailure;
use super::stager::Stager;
use super::step::{Limits, MIN_POLL_GAP, MoverSettings, Step, wait_until};
use super::wakeup::PoolWatch;
use crate::redis::{Failure, FailureKind, RedisPool, RedisSettings, target};

/// How long before a known due time the timer wakes: enough to take a connection from the pool
/// (which checks it with a round trip) and to absorb tokio's whole-millisecond timer, so that the
/// first move goes out as the due time comes rather than a millisecond or two after.
const WAKE_EARLY: Duration = Duration::from_millis(3);

/// Moves due jobs from the job pool to the ready lists of one Redis.
pub struct SingleMover {
    pool: RedisPool,
    redis: RedisSettings,
    /// The key names of the configured layout.
    keys: Keys,
    step: Step,
    stager: Stager,
}

impl SingleMover {
    pub(super) fn new(settings: &MoverSettings, redis: &RedisSettings) -> Result<SingleMover> {
        Ok(SingleMover {
            pool: RedisPool::new(redis, target(redis)?)?,
            redis: redis.clone(),
            keys: redis.layout.keys(""),
            step: Step::new(settings, redis),
            stager: Stager::new(&redis.layout.keys("")),
        })
    }

    pub(super) fn step(&self) -> &Step {
        &self.step
    }

    /// Fails if Redis answers but refuses the configured password or database; an unreachable
    /// Redis is not an error here, the loop waits for it.
    pub(super) async fn check_redis(&self) -> Result<()> {
        let reply = match self.pool.get().await {
            Ok(mut connection) => redis::cmd("PING").query_async::<()>(&mut connection).await,
            Err(PoolError::Backend(error)) => Err(error),
            Err(_) => return Ok(()),
        };
        match reply {
            Err(error) if FailureKind::of(&error).is_config_error() => {
                bail!(Failure::refusal(&error, &self.redis).await)
            }
            _ => Ok(()),
        }
    }

    /// Runs the move script once, as of `now` (unix seconds).
    pub(super) async fn tick(&self, now: f64) -> Result<Batch> {
        let mut connection = self.pool.get().await?;
        Ok(self
            .step
            .move_once(&mut connection, &self.keys, now)
            .await?)
    }

    /// Where Redis is, for the daemon's other connections: one `Target`, so that a failover is
    /// found (and told) once.
    pub(super) fn target(&self) -> Target {
        self.pool.target()
    }

    /// Moves jobs as they fall due until `stop` is cancelled. A script call that has started
    /// always finishes: Redis is never left with a job half-moved.
    pub(super) async fn run(&self, stop: &CancellationToken) {
        let watch = PoolWatch::new(self.pool.target(), &self.keys, self.redis.address());
        let pushed = watch.subscribe();
        tokio::join!(
            self.poll(watch, stop),
            self.pool.follow_master(stop),
            self.stager.run(&self.pool, &self.step, Some(pushed), stop)
        );
    }

    /// The loop itself: a poll of the pool, then a sleep until the next job falls due.
    async fn poll(&self, mut watch: PoolWatch, stop: &CancellationToken) {
        let timer_interval = self.step.settings().timer_interval;
        // The due time the timer woke early for, if it did.
        let mut aim = None;
        loop {
            watch.seen();
            let drained = self.drain(stop, aim.take()).await;
            self.step.metrics().polled(drained.is_ok());
            if drained.is_ok() {
                self.step.outages().succeeded(None);
            }
            let polled_at = Instant::now();
            if stop.is_cancelled() {
                return;
            }
            let mut due_at = None;
            let wait = match drained {
                Ok(next_due) => {
                    // Connecting the watch may take a while; nothing changes until it succeeds.
                    tokio::select! {
                        () = watch.ensure() => {}
                        () = stop.cancelled() => return,
                    }
                    let wait = wait_until(next_due, self.step.now(), timer_interval);
                    // Only for a wait of a millisecond or more: jobs due closer together than that
                    // are moved a tick at a time, as before, not in one poll each.
                    if wait >= Duration::from_millis(1) && wait < timer_interval {
                        due_at = next_due;
                    }
                    wait
                }
                Err(failed) => {
                    // With Sentinel, the next try asks where the master is now.
                    self.pool.forget_master();
                    self.step.outages().failed(None, &failed)
                }
            };
            let early = if due_at.is_some() {
                WAKE_EARLY
            } else {
                Duration::ZERO
            };
            tokio::select! {
                () = tokio::time::sleep(wait.saturating_sub(early)) => aim = due_at,
                // A client pushed: poll again, but not more often than MIN_POLL_GAP.
                () = async {
                    watch.written().await;
                    tokio::time::sleep_until(polled_at + MIN_POLL_GAP).await;
                } => {}
                () = stop.cancelled() => return,
            }
        }
    }

    /// One drain of the pool (see [`Step::drain`]), on a connection of the pool. Given `aim`,
    /// the due time the timer woke early for, the first move waits for it once it holds a
    /// connection. A drain under way stops when the master is found elsewhere (the next poll is
    /// there, at once).
    async fn drain(
        &self,
        stop: &CancellationToken,
        aim: Option<f64>,
    ) -> Result<Option<f64>, PollFailure> {
        self.pool.prune();
        // Waiting for a connection is cancellable; the script calls are not.
        let mut connection = tokio::select! {
            connection = self.pool.get() => connection
                .map_err(|error| PollFailure::not_a_move(Failure::connecting(&error, &self.redis)))?,
            () = stop.cancelled() => return Ok(None),
        };
        if let Some(due) = aim {
            sleep_precisely(due - self.step.now()).await;
        }
        let master_moves = self.pool.master_moves();
        let must_end = || stop.is_cancelled() || self.pool.master_moves() != master_moves;
        let limits = Limits {
            turn: None,
            end: &must_end,
        };
        self.step
            .drain(&mut connection, &self.keys, None, &limits)
            .await
            .map_err(|error| PollFailure::call(&error, &self.redis))
    }
}

/// Sleeps for `left` seconds (at most [`WAKE_EARLY`]) to within a fraction of a millisecond,
/// never less: tokio's timer rounds up to whole milliseconds, a thread's sleep does not. A
/// blocking-pool thread sleeps, so the runtime goes on serving HTTP meanwhile.
async fn sleep_precisely(left: f64) {
    let left = left.min(WAKE_EARLY.as_secs_f64());
    if left > 0.0 {
        let left = Duration::from_secs_f64(left);
        // A panic in a sleep is not possible; a failed join would only mean waking early.
        let _ = tokio::task::spawn_blocking(move || std::thread::sleep(left)).await;
    }
}
