//! Stages compact jobs (see `delayer_wire::compact`): once a second, the chunks whose window
//! starts within the lead are written in the legacy form, where the move script takes them as
//! any job. A daemon tells pushers that it stages (a beat), so that they write compact jobs only
//! while one does; until a push asks for it (the `wanted` key) or compact jobs exist, it writes
//! nothing, so that a drop-in install holds no key of the layout. It checks for that key when a
//! client pushes and often besides (a read), so that the first pushes after a daemon starts wait
//! compact within a moment.

use std::time::Duration;

use deadpool_redis::redis::{self, AsyncCommands, RedisError, RedisResult};
use delayer_wire::compact::{BEAT_EVERY, CompactKeys, STAGE_EVERY};
use delayer_wire::keys::Keys;
use delayer_wire::scripts::compact_stage::{Reach, StageScript, Staged};
use tokio::sync::watch;
use tokio::time::{Instant, Interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::step::Step;
use crate::redis::RedisPool;
use crate::service::duty::Trouble;

/// How long a daemon's beat is kept after it stopped beating (for the console to count).
const BEATS_KEPT: Duration = Duration::from_secs(86_400);
/// How often a daemon that does not stage yet checks for the `wanted` key (one read), and the least
/// time between two checks woken by pushes: a push that found no daemon staging is followed by
/// compact pushes within about this, at most (the push itself wakes a check where Redis reports
/// writes).
const WANTED_CHECK: Duration = Duration::from_millis(50);

/// One daemon's staging of compact jobs.
pub(super) struct Stager {
    keys: Keys,
    script: StageScript,
    /// This daemon, in the beats.
    name: String,
}

impl Stager {
    pub(super) fn new(keys: &Keys) -> Stager {
        let started = delayer_wire::time::unix_now();
        Stager {
            keys: keys.clone(),
            script: StageScript::default(),
            name: format!("{}:{started:.6}", std::process::id()),
        }
    }

    /// The stage script.
    pub(super) fn script(&self) -> &StageScript {
        &self.script
    }

    /// Stages until `stop` is cancelled; nothing where the layout has no compact keys. Until
    /// it stages, `pushed` (writes to the pool) wakes a check for the `wanted` key. A script call
    /// that has started finishes.
    pub(super) async fn run(
        &self,
        pool: &RedisPool,
        step: &Step,
        mut pushed: Option<watch::Receiver<u64>>,
        stop: &CancellationToken,
    ) {
        let Some(compact) = self.keys.compact() else {
            return;
        };
        let mut active = false;
        let mut beaten: Option<Instant> = None;
        let mut trouble = Trouble::default();
        let mut passes = passes();
        let mut wanted_checks = wanted_checks();
        let mut checked = Instant::now();
        loop {
            let next = next_pass(&mut passes, &mut wanted_checks, active, stop);
            let woken = async {
                let Some(pushed) = pushed.as_mut().filter(|_| !active) else {
                    return std::future::pending().await;
                };
                if pushed.changed().await.is_err() {
                    // Cannot happen (the watch owns the sender); never wake for it.
                    return std::future::pending().await;
                }
                tokio::time::sleep_until(checked + WANTED_CHECK).await;
            };
            tokio::select! {
                going = next => if !going { return },
                () = woken => wanted_checks.reset(),
            }
            checked = Instant::now();
            let Ok(mut connection) = pool.get().await else {
                // The mover tells of an unreachable Redis.
                continue;
            };
            let result = async {
                if !active {
                    // A user the ACL does not let look (written before the layout) never
                    // stages: pushers then write every job in the legacy form.
                    active = in_use(&mut connection, compact).await.unwrap_or(false);
                    if !active {
                        return Ok(0);
                    }
                    info!("Staging compact jobs: our pushes write them now");
                }
                let mut jobs = 0;
                loop {
                    let staged = self
                        .script
                        .run(&mut connection, &self.keys, compact, Reach::Lead)
                        .await?;
                    report(&staged, step, None);
                    jobs += staged.jobs;
                    if !staged.more || stop.is_cancelled() {
                        break;
                    }
                }
                // Only a daemon that could stage tells pushers it does.
                if beaten.is_none_or(|at| at.elapsed() >= BEAT_EVERY) {
                    self.beat(&mut connection, compact, step).await?;
                    beaten = Some(Instant::now());
                }
                RedisResult::Ok(jobs)
            }
            .await;
            tell(
                step,
                &mut trouble,
                result.err().as_ref().map(|error| (None, error)),
            );
        }
    }

    /// Tells pushers that this daemon stages (by Redis's clock), and forgets beats a day old.
    pub(super) async fn beat(
        &self,
        connection: &mut impl redis::aio::ConnectionLike,
        compact: &CompactKeys,
        step: &Step,
    ) -> RedisResult<()> {
        let now_ms = (step.now() * 1000.0) as i64;
        let kept_ms = BEATS_KEPT.as_millis() as i64;
        redis::pipe()
            .zadd(compact.stagers(), &self.name, now_ms)
            .ignore()
            .zrembyscore(compact.stagers(), "-inf", now_ms - kept_ms)
            .ignore()
            .query_async(connection)
            .await
    }
}

/// Whether compact jobs are wanted or exist.
async fn in_use(connection: &mut impl AsyncCommands, compact: &CompactKeys) -> RedisResult<bool> {
    let found: usize = connection
        .exists(&[compact.wanted(), &compact.chunks()])
        .await?;
    Ok(found > 0)
}

/// Tells the moves whether staging works, and says when it begins to fail (`failed`: the topic
/// staged, in the cluster layout, and the error) and when it works again.
pub(super) fn tell(
    step: &Step,
    trouble: &mut Trouble,
    failed: Option<(Option<&str>, &RedisError)>,
) {
    step.staging_works(failed.is_none());
    match failed {
        None if trouble.worked() => info!("Staging compact jobs again"),
        Some((topic, error)) if trouble.failed() => warn!(
            topic = topic.unwrap_or(""),
            "Could not stage compact jobs (tried again every second): {error}"
        ),
        _ => {}
    }
}

/// Counts and logs what a stage call dropped (`topic`: the cluster layout's topic staged).
pub(super) fn report(staged: &Staged, step: &Step, topic: Option<&str>) {
    let topic = topic.unwrap_or("");
    step.metrics()
        .compact_dropped(staged.expired, staged.replaced);
    if staged.expired > 0 {
        warn!(
            topic,
            count = staged.expired,
            "compact jobs dropped: their data expired before a daemon staged them (daemons were \
             down longer than their ready_max_lifetime)"
        );
    }
    if staged.replaced > 0 {
        info!(
            topic,
            count = staged.replaced,
            "compact jobs dropped: a legacy client pushed their ids again, and the newer jobs stay"
        );
    }
    for (key, kind) in &staged.foreign {
        warn!(
            topic,
            key = %key,
            kind = %kind,
            "compact chunk {key} holds a {kind}, not a list: another client wrote it over ours, \
             whose jobs are gone; it is left as it is, and no longer staged"
        );
    }
}

/// The stagers' passes, one every [`STAGE_EVERY`], the first at once: jobs that fell due while no
/// daemon ran are staged without waiting a second more.
pub(super) fn passes() -> Interval {
    every(STAGE_EVERY)
}

/// The checks of a stager that does not stage yet, one every [`WANTED_CHECK`].
pub(super) fn wanted_checks() -> Interval {
    every(WANTED_CHECK)
}

fn every(period: Duration) -> Interval {
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticks
}

/// Waits for the next pass, or while not `active` the next check for `wanted`: false once `stop` is
/// cancelled.
pub(super) async fn next_pass(
    passes: &mut Interval,
    wanted_checks: &mut Interval,
    active: bool,
    stop: &CancellationToken,
) -> bool {
    let ticks = if active { passes } else { wanted_checks };
    tokio::select! {
        _ = ticks.tick() => true,
        () = stop.cancelled() => false,
    }
}
