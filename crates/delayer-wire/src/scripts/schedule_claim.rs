//! The schedule claim script (`schedule_claim.lua`): a tick claimed and its jobs pushed, or a
//! run's job pushed, in one call.

use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

use super::{host_clock, leading, malformed};
use crate::keys::Keys;
use crate::name::JobId;
use crate::schedule::{Plan, run_id, seconds_text, tick_id};

script_type!(
    /// The schedule claim script.
    ScheduleClaimScript,
    "schedule_claim.lua"
);

/// What a claim came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claimed {
    /// Its jobs were pushed (how many: an id pushed already is not pushed again).
    Pushed(usize),
    /// The overlap policy skipped the tick: the last job is still waiting, ready or reserved.
    Skipped,
    /// Another claimed the tick first, or the schedule was paused: nothing changed.
    Lost,
    /// The definition changed since the claim was planned: nothing changed.
    Stale,
    /// There is no such schedule.
    Gone,
}

/// A claim: the schedule, the version of its definition it was planned with, and what to do.
pub enum Claim<'a> {
    /// Claim tick `claimed` (unix ms, the schedule's next as read) and do `plan`.
    Tick { claimed: i64, plan: &'a Plan },
    /// Push one job now, outside the ticks (its id made from `now`, unix ms).
    Run { now: i64 },
}

impl ScheduleClaimScript {
    /// Loads the script into Redis: calls sent together then find it, rather than each failing
    /// once and loading it again.
    pub async fn load(&self, connection: &mut impl ConnectionLike) -> RedisResult<()> {
        self.0
            .prepare_invoke()
            .load_async(connection)
            .await
            .map(drop)
    }

    /// Claims for schedule `name` under `keys` (its topic's). `lifetime` is how long a job's data
    /// outlives its due time, in seconds.
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        name: &str,
        version: u64,
        claim: Claim<'_>,
        lifetime: u64,
    ) -> RedisResult<Claimed> {
        let jobs: Vec<(JobId, String)> = match &claim {
            Claim::Tick { plan, .. } => plan
                .fire
                .iter()
                .map(|tick| (tick_id(name, *tick), seconds_text(*tick)))
                .collect(),
            Claim::Run { now } => vec![(run_id(name, *now), String::new())],
        };
        let mut call = self.0.key(keys.schedule(name));
        call.key(keys.schedules_by_next()).key(keys.pool());
        for (id, _) in &jobs {
            call.key(keys.bucket(id));
        }
        let (claimed, next, missed, caught_up) = match claim {
            Claim::Tick { claimed, plan } => (
                seconds_text(claimed),
                seconds_text(plan.next),
                plan.missed,
                plan.caught_up,
            ),
            Claim::Run { .. } => Default::default(),
        };
        call.arg(keys.registry_for_scripts())
            .arg(host_clock())
            .arg(name)
            .arg(claimed)
            .arg(version)
            .arg(next)
            .arg(missed)
            .arg(caught_up)
            .arg(lifetime)
            .arg(keys.bucket_prefix());
        for (id, due) in &jobs {
            call.arg(id).arg(due);
        }
        let reply: Value = call.invoke_async(connection).await?;
        let ([outcome, pushed], _) = leading(reply).ok_or_else(|| malformed("schedule_claim"))?;
        let outcome: String = redis::from_redis_value(outcome)?;
        let pushed: usize = redis::from_redis_value(pushed)?;
        match outcome.as_str() {
            "fired" => Ok(Claimed::Pushed(pushed)),
            "skipped" => Ok(Claimed::Skipped),
            "lost" => Ok(Claimed::Lost),
            "stale" => Ok(Claimed::Stale),
            "gone" => Ok(Claimed::Gone),
            _ => Err(malformed("schedule_claim")),
        }
    }
}
