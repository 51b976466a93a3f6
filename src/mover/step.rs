//! The step both loops take, on every topic's keys (one Redis) or one topic's (a cluster): move the
//! due jobs batch by batch, deliver lapsed reservations again, count and log what was done. And
//! what both say of failures: a lost reply each time, an outage once, when it begins and ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_redis::redis::aio::ConnectionLike;
use deadpool_redis::redis::{RedisError, RedisResult};
use delayer_client::keys::Keys;
use delayer_client::scripts::move_due::{Batch, MoveScript, STUCK_RECHECK};
use delayer_client::scripts::release::ReleaseScript;
use delayer_client::time::unix_now;
use tokio::time::Instant;
use tracing::{error, info};

use super::log::{self, StuckTopics};
use crate::metrics::Metrics;
use crate::redis::{Failure, RedisSettings, Trouble, describe_redis, reply_may_be_lost};

/// The least time between two looks woken by writes to the pool: a burst of pushes must not turn
/// into thousands of script calls, and a job due within this is at most this late.
pub(super) const MIN_LOOK_GAP: Duration = Duration::from_millis(5);
/// While a backlog drains, lapsed reservations are still delivered again this often: a long drain
/// must not hold up redelivery.
const RELEASE_EVERY: Duration = Duration::from_secs(1);
/// The first wait after a failed look; it doubles up to [`MAX_RETRY_WAIT`].
const FIRST_RETRY_WAIT: Duration = Duration::from_millis(50);
/// Capped well under a second so what fell due during an outage moves within a second of Redis
/// returning.
const MAX_RETRY_WAIT: Duration = Duration::from_millis(500);

/// `[delayer]`'s keys of the timer loop. `Default` is the blank that the key table
/// (`config/keys.rs`) fills in.
#[derive(Debug, Clone, Default)]
pub struct MoverSettings {
    /// `timer_interval`: the longest the loop sleeps between two looks at the pool.
    pub timer_interval: Duration,
    /// `batch_size`: the most jobs one script call moves.
    pub batch_size: usize,
    /// `max_attempts`: a reserved job whose time to run lapses after this many reservations goes
    /// to its topic's dead list instead of back to the pool.
    pub max_attempts: u32,
}

/// What both loops share: the scripts, the counts, and what has been said.
pub(super) struct Step {
    script: MoveScript,
    release: ReleaseScript,
    metrics: Arc<Metrics>,
    settings: MoverSettings,
    redis: RedisSettings,
    stuck: Mutex<StuckTopics>,
    /// What is failing now, by subject (`None`: Redis, or a cluster's registry; a topic), with
    /// the wait before its next try.
    failing: Mutex<HashMap<Option<String>, (Failure, Duration)>>,
    /// Redis refuses the release of lapsed reservations this way (jobs still move).
    release_refused: Mutex<Option<Failure>>,
}

/// How far one drain may go.
pub(super) struct Limits<'a> {
    /// Full batches a drain moves before it ends with more due (a cluster topic's turn, so that
    /// a long backlog takes turns with the other topics); `None`: no limit.
    pub turn: Option<usize>,
    /// Asked between two script calls: whether to stop (a stop was asked for, the master moved).
    pub stop: &'a (dyn Fn() -> bool + Sync),
}

/// A look that failed: why, and how to say it.
pub(super) struct Failed {
    pub trouble: Trouble,
    /// The failed call was a script call whose reply never came: it may have moved jobs.
    pub lost_reply: bool,
    /// Redis refused the call because its slot is moving to another master (a resharding):
    /// nothing is amiss. Redis's own words.
    pub slot_moving: Option<String>,
}

impl Failed {
    /// Getting a connection failed: no call went out.
    pub fn connecting(trouble: Trouble) -> Failed {
        Failed {
            trouble,
            lost_reply: false,
            slot_moving: None,
        }
    }

    /// A script call failed with `error`.
    pub fn call(error: &RedisError, redis: &RedisSettings) -> Failed {
        Failed {
            trouble: describe_redis(error, redis),
            lost_reply: reply_may_be_lost(error),
            slot_moving: slot_moving(error).then(|| error.to_string()),
        }
    }
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
            failing: Mutex::default(),
            release_refused: Mutex::default(),
        }
    }

    pub(super) fn settings(&self) -> &MoverSettings {
        &self.settings
    }

    pub(super) fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// Moves `keys`' due jobs until a batch comes back short (or `limits` end the drain), then
    /// delivers again the jobs whose reservation lapsed; the jobs that puts back are due now, and
    /// moved in the same drain. Returns when to look again: when the next job falls due or the
    /// next reservation lapses, or now when the drain ended with more to do. `subject` names
    /// what the keys are of (a topic, or `None` for every topic), for what is said.
    pub(super) async fn drain(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        subject: Option<&str>,
        limits: &Limits<'_>,
    ) -> RedisResult<Option<f64>> {
        loop {
            let batch = self.move_due(connection, keys, subject, limits).await?;
            if (limits.stop)() {
                return Ok(Some(unix_now()));
            }
            // After the moves, which are what is late when a burst falls due.
            let (next_deadline, put_back) = self.deliver_lapsed(connection, keys, subject).await?;
            if batch.is_full(self.settings.batch_size) {
                // Its turn is over, with more due: again after the others had theirs.
                return Ok(Some(unix_now()));
            }
            if !put_back || (limits.stop)() {
                return Ok(earliest(batch.next_due, next_deadline));
            }
        }
    }

    /// Moves batches until one comes back short, `limits` end the drain, or a call fails,
    /// delivering lapsed reservations again every [`RELEASE_EVERY`] meanwhile; returns the last
    /// batch. Stuck topics found are said at the end.
    async fn move_due(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        subject: Option<&str>,
        limits: &Limits<'_>,
    ) -> RedisResult<Batch> {
        let moved = async {
            let mut batch = self.move_once(connection, keys, unix_now()).await?;
            self.answered(subject);
            self.stuck().note(&batch, keys);
            let (mut batches, mut released_at) = (1, Instant::now());
            while batch.is_full(self.settings.batch_size)
                && limits.turn.is_none_or(|turn| batches < turn)
                && !(limits.stop)()
            {
                if released_at.elapsed() >= RELEASE_EVERY {
                    self.deliver_lapsed(connection, keys, subject).await?;
                    released_at = Instant::now();
                }
                // The next call goes out before this batch is logged, so Redis works while we
                // format.
                let (next, ()) = tokio::join!(
                    biased;
                    self.move_once(connection, keys, unix_now()),
                    async { log::moves(&batch) },
                );
                batch = next?;
                self.stuck().note(&batch, keys);
                batches += 1;
            }
            log::moves(&batch);
            Ok(batch)
        };
        let moved = moved.await;
        self.stuck().report(STUCK_RECHECK, keys);
        moved
    }

    /// Ends the reservations whose deadline passed (their jobs go back to the pool, due now, or
    /// to their dead list), and returns the next deadline and whether it put jobs back. When
    /// Redis refuses the release itself (no permission for the reservations' key, a key of the
    /// wrong type) that is said once and jobs keep moving: a user of the legacy keys alone loses
    /// nothing.
    async fn deliver_lapsed(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        subject: Option<&str>,
    ) -> RedisResult<(Option<f64>, bool)> {
        let mut put_back = false;
        loop {
            let started = std::time::Instant::now();
            let released = self
                .release
                .lapsed(
                    connection,
                    keys,
                    unix_now(),
                    self.settings.max_attempts,
                    self.settings.batch_size,
                )
                .await;
            let released = match released {
                Ok(released) => released,
                Err(error) => {
                    let trouble = describe_redis(&error, &self.redis);
                    let refused = matches!(trouble.kind, Failure::NoPermission | Failure::Other);
                    if !refused || slot_moving(&error) {
                        return Err(error);
                    }
                    self.answered(subject);
                    self.release_refused(&trouble);
                    return Ok((None, put_back));
                }
            };
            self.metrics.released(&released, started.elapsed());
            self.answered(subject);
            if self
                .release_refused
                .lock()
                .expect("not poisoned")
                .take()
                .is_some()
            {
                info!("Jobs whose reservation lapsed are delivered again");
            }
            log::released(&released, self.settings.max_attempts, keys);
            put_back |= !released.retried.is_empty() || !released.blocked.is_empty();
            if released.ended < self.settings.batch_size {
                return Ok((released.next_deadline, put_back));
            }
        }
    }

    fn release_refused(&self, trouble: &Trouble) {
        let mut refused = self.release_refused.lock().expect("not poisoned");
        if *refused != Some(trouble.kind) {
            error!(
                "Jobs whose reservation lapsed cannot be delivered again ({trouble}); jobs still \
                 move as they fall due"
            );
            *refused = Some(trouble.kind);
        }
    }

    /// One call of the move script as of `now` (unix seconds), counted in the metrics.
    pub(super) async fn move_once(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        now: f64,
    ) -> RedisResult<Batch> {
        let started = std::time::Instant::now();
        let batch = self
            .script
            .run(connection, keys, now, self.settings.batch_size)
            .await?;
        self.metrics.moved(&batch, now, started.elapsed());
        Ok(batch)
    }

    fn stuck(&self) -> std::sync::MutexGuard<'_, StuckTopics> {
        self.stuck.lock().expect("not poisoned")
    }

    /// A look at `subject` (a topic, or `None`: Redis, or a cluster's registry) failed: says so
    /// (a lost reply every time, anything else once per cause), and returns the wait before the
    /// next try, which doubles while the failures go on.
    pub(super) fn failed(&self, subject: Option<&str>, failed: &Failed) -> Duration {
        let mut failing = self.failing.lock().expect("not poisoned");
        let (kind, wait) = failing
            .entry(subject.map(str::to_string))
            .or_insert((failed.trouble.kind, Duration::ZERO));
        let new = *kind != failed.trouble.kind || wait.is_zero();
        *kind = failed.trouble.kind;
        *wait = if wait.is_zero() {
            FIRST_RETRY_WAIT
        } else {
            (*wait * 2).min(MAX_RETRY_WAIT)
        };
        let wait = *wait;
        drop(failing);
        if failed.lost_reply {
            log::lost_reply(&failed.trouble, subject, self.settings.batch_size);
        } else if new {
            log::failing(&failed.trouble, subject, failed.slot_moving.as_deref());
        }
        wait
    }

    /// Redis answered a look at `subject`: an outage, if there was one, is over (said before
    /// what the look did).
    pub(super) fn answered(&self, subject: Option<&str>) {
        let ended = {
            let mut failing = self.failing.lock().expect("not poisoned");
            if failing.is_empty() {
                return;
            }
            failing.remove(&subject.map(str::to_string))
        };
        if let Some((kind, _)) = ended {
            log::recovered(kind, &self.redis.address(), subject);
        }
    }
}

/// Whether `error` says the keys' slot is moving between masters (a resharding): MOVED, ASK,
/// TRYAGAIN, or a script that met a key already moved. Redis refused the call before any write.
fn slot_moving(error: &RedisError) -> bool {
    matches!(error.code(), Some("MOVED" | "ASK" | "TRYAGAIN"))
        || error.to_string().contains("non local key")
}

/// How long to sleep: until `next_due` (unix seconds), but never longer than `timer_interval`,
/// so that jobs pushed with an earlier due time are found in time.
pub(super) fn wait_until(next_due: Option<f64>, timer_interval: Duration) -> Duration {
    next_due.map_or(timer_interval, |due| {
        // max/min rather than clamp: a score of +inf must mean "a long way off", not a panic.
        let seconds = (due - unix_now())
            .max(0.0)
            .min(timer_interval.as_secs_f64());
        Duration::from_secs_f64(seconds)
    })
}

/// The earlier of two times, either of which may be unknown.
pub(super) fn earliest(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
