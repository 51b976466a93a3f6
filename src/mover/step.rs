//! The step both loops take, on every topic's keys (one Redis) or one topic's (a cluster): move the
//! due jobs batch by batch, deliver lapsed reservations again, count and log what was done, and
//! tell the outages what failed ([`Outages`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use deadpool_redis::redis::aio::ConnectionLike;
use deadpool_redis::redis::{RedisError, RedisResult};
use delayer_wire::keys::Keys;
use delayer_wire::scripts::move_due::{Batch, MoveScript, STUCK_RECHECK};
use delayer_wire::scripts::release::ReleaseScript;
use tokio::time::Instant;
use tracing::warn;

use super::clock::RedisClock;
use super::log::{self, StuckTopics};
use super::outage::Outages;
use crate::metrics::Metrics;
use crate::redis::{Failure, FailureKind, RedisSettings, slot_moving};

/// The least time between two polls woken by writes to the pool: a burst of pushes must not turn
/// into thousands of script calls, and a job due within this is at most this late.
pub(super) const MIN_POLL_GAP: Duration = Duration::from_millis(5);
/// While a backlog drains, lapsed reservations are still delivered again this often: a long drain
/// must not hold up redelivery.
const RELEASE_EVERY: Duration = Duration::from_secs(1);

/// `[delayer]`'s keys of the timer loop. `Default` is the blank that the key table
/// (`config/keys/`) fills in.
#[derive(Debug, Clone, Default)]
pub struct MoverSettings {
    /// `timer_interval`: the longest the loop sleeps between two polls of the pool.
    pub timer_interval: Duration,
    /// `batch_size`: the most jobs one script call moves.
    pub batch_size: usize,
    /// `max_attempts`: a reserved job whose time to run lapses after this many reservations goes
    /// to its topic's dead list instead of back to the pool.
    pub max_attempts: u32,
}

/// What both loops share: the scripts, the counts, and the outages.
pub(super) struct Step {
    script: MoveScript,
    release: ReleaseScript,
    metrics: Arc<Metrics>,
    settings: MoverSettings,
    redis: RedisSettings,
    stuck: Mutex<StuckTopics>,
    outages: Outages,
    clock: RedisClock,
    /// Whether a move went by this host's clock (the Redis user may not run TIME), said once.
    host_clock_warned: AtomicBool,
    /// Whether this daemon's staging of compact jobs works (or has not failed yet): only then do
    /// moves hold back the jobs of a window being staged, so that a backlog leaves in due order.
    staging_works: AtomicBool,
}

/// How far one drain may go.
pub(super) struct Limits<'a> {
    /// Full batches a drain moves (and release calls it makes) before it ends with more to do:
    /// a cluster topic's turn, so that a long backlog takes turns with the other topics; `None`:
    /// no limit.
    pub turn: Option<usize>,
    /// Asked between two script calls: whether the drain ends (a stop was asked for, the master
    /// moved).
    pub end: &'a (dyn Fn() -> bool + Sync),
}

impl Step {
    pub(super) fn new(settings: &MoverSettings, redis: &RedisSettings) -> Step {
        Step {
            script: MoveScript::default(),
            release: ReleaseScript::default(),
            metrics: Arc::default(),
            settings: settings.clone(),
            redis: redis.clone(),
            stuck: Mutex::default(),
            outages: Outages::new(redis, settings.batch_size),
            clock: RedisClock::default(),
            host_clock_warned: AtomicBool::new(false),
            staging_works: AtomicBool::new(true),
        }
    }

    /// Tells the moves whether staging works (see `staging_works`).
    pub(super) fn staging_works(&self, works: bool) {
        self.staging_works.store(works, Ordering::Relaxed);
    }

    /// Now by Redis's clock (as last seen), in unix seconds: the clock every due time and
    /// deadline is on.
    pub(super) fn now(&self) -> f64 {
        self.clock.now()
    }

    /// Redis's clock, as the moves read it.
    pub(super) fn clock(&self) -> &RedisClock {
        &self.clock
    }

    pub(super) fn settings(&self) -> &MoverSettings {
        &self.settings
    }

    pub(super) fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    pub(super) fn outages(&self) -> &Outages {
        &self.outages
    }

    /// Moves `keys`' due jobs until a batch comes back short (or `limits` end the drain), then
    /// delivers again the jobs whose reservation lapsed; the jobs that puts back are due now, and
    /// moved in the same drain. Returns when to poll again: when the next job falls due or the
    /// next reservation lapses, or now when the drain ended with more to do. `subject` names
    /// what the keys are of (a topic, or `None` for every topic), for what is said.
    pub(super) async fn drain(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        subject: Option<&str>,
        limits: &Limits<'_>,
    ) -> RedisResult<Option<f64>> {
        let mut batches = 0;
        loop {
            let batch = self
                .move_due(connection, keys, subject, limits, &mut batches)
                .await?;
            if (limits.end)() {
                return Ok(Some(self.now()));
            }
            // After the moves, which are what is late when a burst falls due.
            let (next_deadline, put_back) = self
                .deliver_lapsed(connection, keys, subject, limits)
                .await?;
            if batch.is_full(self.settings.batch_size) {
                // Only a turn ends the moves with a full batch: more are due, moved again after
                // the other topics had theirs.
                return Ok(Some(self.now()));
            }
            if !put_back {
                return Ok(earliest(batch.next_due, next_deadline));
            }
            // The jobs put back are due now: moved in this same drain, unless it must stop.
            if (limits.end)() {
                return Ok(Some(self.now()));
            }
        }
    }

    /// One call of the move script, counted in the metrics. It goes by Redis's clock, or by `now`
    /// (unix seconds) when the Redis user may not run TIME.
    pub(super) async fn move_once(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        now: f64,
    ) -> RedisResult<Batch> {
        let started = std::time::Instant::now();
        let batch = self
            .script
            .run(
                connection,
                keys,
                now,
                self.settings.batch_size,
                self.staging_works.load(Ordering::Relaxed),
            )
            .await?;
        if batch.by_redis {
            self.clock
                .saw(batch.now, started, std::time::Instant::now());
        } else if !self.host_clock_warned.swap(true, Ordering::Relaxed) {
            warn!(
                "the Redis user may not run TIME: jobs move by this host's clock, and a host whose \
                 clock is ahead moves them early (allow +time in its ACL)"
            );
        }
        self.metrics.moved(&batch, batch.now, started.elapsed());
        Ok(batch)
    }

    /// Moves batches until one comes back short, `limits` end the drain, or a call fails,
    /// delivering lapsed reservations again every [`RELEASE_EVERY`] meanwhile; returns the last
    /// batch. `batches` counts the drain's moves, for its turn. Stuck topics found are said at
    /// the end.
    async fn move_due(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        subject: Option<&str>,
        limits: &Limits<'_>,
        batches: &mut usize,
    ) -> RedisResult<Batch> {
        let moved = async {
            let mut batch = self.move_once(connection, keys, self.now()).await?;
            self.outages.answered(subject);
            self.stuck().note(&batch, keys);
            *batches += 1;
            let mut released_at = Instant::now();
            while batch.is_full(self.settings.batch_size)
                && limits.turn.is_none_or(|turn| *batches < turn)
                && !(limits.end)()
            {
                if released_at.elapsed() >= RELEASE_EVERY {
                    self.deliver_lapsed(connection, keys, subject, limits)
                        .await?;
                    released_at = Instant::now();
                }
                // The next call goes out before this batch is logged, so Redis works while we
                // format.
                let (next, ()) = tokio::join!(
                    biased;
                    self.move_once(connection, keys, self.now()),
                    async { log::moves(&batch) },
                );
                batch = next?;
                self.stuck().note(&batch, keys);
                *batches += 1;
            }
            log::moves(&batch);
            Ok(batch)
        };
        let moved = moved.await;
        self.stuck().report(STUCK_RECHECK, keys);
        moved
    }

    /// Ends the reservations whose deadline passed (their jobs go back to the pool, due now, or
    /// to their dead list), a batch at a time until one comes back short, `limits` stop the
    /// drain, or a turn is taken (one batch a turn); returns the next deadline and whether it put
    /// jobs back. When Redis refuses the release itself (no permission for the reservations' key,
    /// a key of the wrong type) that is said once and jobs keep moving: a user of the legacy keys
    /// alone loses nothing.
    async fn deliver_lapsed(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        subject: Option<&str>,
        limits: &Limits<'_>,
    ) -> RedisResult<(Option<f64>, bool)> {
        let mut put_back = false;
        loop {
            let started = std::time::Instant::now();
            let released = self
                .release
                .lapsed(
                    connection,
                    keys,
                    self.settings.max_attempts,
                    self.settings.batch_size,
                )
                .await;
            let released = match released {
                Ok(released) => released,
                Err(error) => {
                    let failure = Failure::of(&error, &self.redis);
                    if !refuses_release(&error, failure.kind) {
                        return Err(error);
                    }
                    self.outages.answered(subject);
                    self.outages.release_refused(subject, &failure);
                    return Ok((None, put_back));
                }
            };
            self.metrics
                .released(&released, self.now(), started.elapsed());
            self.outages.answered(subject);
            self.outages.release_works(subject);
            log::released(&released, self.settings.max_attempts, keys);
            put_back |= !released.retried.is_empty() || !released.blocked.is_empty();
            let more = released.ended >= self.settings.batch_size;
            if !more || limits.turn.is_some() || (limits.end)() {
                return Ok((released.next_deadline, put_back));
            }
        }
    }

    fn stuck(&self) -> MutexGuard<'_, StuckTopics> {
        self.stuck.lock().expect("not poisoned")
    }
}

/// Whether Redis refused a release of lapsed reservations (a failure of this `kind`) for a reason
/// of its keys or its user (no permission, a key of the wrong type), not because a cluster is on
/// the move or down: then jobs still move, and the release is tried again at the next poll.
fn refuses_release(error: &RedisError, kind: FailureKind) -> bool {
    let cluster_moving_or_down = error.is_cluster_error()
        || slot_moving(error)
        || matches!(error.code(), Some("CROSSSLOT" | "MASTERDOWN"));
    matches!(kind, FailureKind::NoPermission | FailureKind::Other) && !cluster_moving_or_down
}

/// How long to sleep at `now`: until `next_due` (unix seconds, both by Redis's clock), but never
/// longer than `timer_interval`, so that jobs pushed with an earlier due time are found in time.
pub(super) fn wait_until(next_due: Option<f64>, now: f64, timer_interval: Duration) -> Duration {
    next_due.map_or(timer_interval, |due| {
        // max/min rather than clamp: a score of +inf must mean "a long way off", not a panic.
        let seconds = (due - now).max(0.0).min(timer_interval.as_secs_f64());
        Duration::from_secs_f64(seconds)
    })
}

/// The earlier of two times, either of which may be unknown.
fn earliest(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
