//! Claiming schedules' ticks: a round reads each shard's schedules whose next tick is near,
//! plans each claim (the catch-up policy, by Redis's clock) and makes it with the claim script,
//! which pushes the tick's job only if the tick is still the schedule's next. Every daemon runs
//! rounds; of all that claim a tick, one pushes its job.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use delayer_wire::keys::{Keys, Layout};
use delayer_wire::redis::{self, RedisResult};
use delayer_wire::schedule::{
    self, CLAIM_AHEAD_MS, CLAIM_LATE_MS, Cadence, Definition, Invalid, Overlap, Stored, plan,
    seconds_text,
};
use delayer_wire::scripts::schedule_claim::{Claim, Claimed, ScheduleClaimScript};
use delayer_wire::shared_connection::{Commands, SharedConnection};
use delayer_wire::time::redis_now;
use futures_util::future::join_all;

/// The most schedules one round claims in a shard; the rest in the next round, at once.
const MAX_CLAIMS_PER_ROUND: usize = 1_000;
/// Placed per topic: how often the topics that have schedules are read again, besides whenever
/// the registry's length changes.
const SHARDS_READ_EVERY: Duration = Duration::from_secs(5);

/// Claims ticks round after round, and keeps what rounds learn from one to the next: the
/// definitions read, and (placed per topic) the topics that have schedules.
pub struct Claimer {
    redis: Arc<SharedConnection>,
    /// The layout's keys of no topic: the registries', and (one shard for every topic) the
    /// schedules'.
    keys: Keys,
    /// How long a pushed job's data outlives its due time, in seconds.
    lifetime: u64,
    script: ScheduleClaimScript,
    known: HashMap<String, Known>,
    /// Schedules whose definition cannot be used, told once each.
    refused: HashSet<String>,
    shards: Vec<String>,
    shards_read: Option<(Instant, usize)>,
    /// Whether the claim script was loaded into Redis (at the first round that claims).
    loaded: bool,
}

struct Known {
    version: u64,
    definition: Definition,
    cadence: Cadence,
}

/// What one round did.
#[derive(Debug, Default)]
pub struct Round {
    /// Redis's time at the start of the round, unix ms.
    pub now: i64,
    /// Each claim made: the schedule, the tick claimed (unix ms), and what came of it.
    pub claims: Vec<(String, i64, Claimed)>,
    /// Ticks counted missed by the claims made.
    pub missed: u64,
    /// Missed ticks caught up by the claims made.
    pub caught_up: u64,
    /// Schedules whose definition in Redis cannot be used (each told once), and why.
    pub refused: Vec<String>,
    /// When the next claim falls due by Redis's clock (unix ms), if any schedule ticks; a round
    /// that claimed its most has more due at once.
    pub next_claim: Option<i64>,
}

impl Claimer {
    /// Claims the ticks of the schedules in `layout` on `redis`; a tick's job keeps its data
    /// `lifetime` after it falls due (`ready_max_lifetime`).
    pub fn new(redis: Arc<SharedConnection>, layout: Layout, lifetime: Duration) -> Claimer {
        Claimer {
            redis,
            keys: layout.keys(""),
            lifetime: lifetime.as_secs(),
            script: ScheduleClaimScript::default(),
            known: HashMap::new(),
            refused: HashSet::new(),
            shards: Vec::new(),
            shards_read: None,
            loaded: false,
        }
    }

    /// Takes schedule `name` as unusable and told so already (by the caller): a round does not
    /// tell it again unless it was saved since.
    pub fn told_unusable(&mut self, name: &str) {
        self.refused.insert(name.to_string());
    }

    /// Claims every tick due now, or within [`CLAIM_AHEAD_MS`] (a schedule whose overlap policy
    /// is `skip`: at its time), in every shard.
    pub async fn round(&mut self) -> RedisResult<Round> {
        let mut connection = self.redis.get().await?;
        let now = (redis_now(&mut connection).await? * 1000.0) as i64;
        let mut round = Round {
            now,
            ..Round::default()
        };
        let shards: Vec<Keys> = match self.keys.every_topic() {
            Some(keys) => vec![keys.clone()],
            None => {
                let topics = self.schedule_topics(&mut connection).await?.to_vec();
                let keys = topics.iter().map(|topic| self.keys.of_topic(topic));
                keys.map(|keys| keys.into_owned()).collect()
            }
        };
        // A tick claimed within CLAIM_LATE_MS after its time is late, not missed: a daemon held up
        // for a moment, or claiming thousands of ticks at one instant, loses none.
        let on_time_from = now - CLAIM_LATE_MS;
        for keys in &shards {
            self.claim_shard(&mut connection, keys, &mut round, on_time_from)
                .await?;
        }
        Ok(round)
    }

    /// Claims a shard's due ticks, a tick at or after `on_time_from` (unix ms) being on time.
    async fn claim_shard(
        &mut self,
        connection: &mut Commands,
        keys: &Keys,
        round: &mut Round,
        on_time_from: i64,
    ) -> RedisResult<()> {
        let now = round.now;
        let due: Vec<(String, f64)> = redis::cmd("ZRANGEBYSCORE")
            .arg(keys.schedules_by_next())
            .arg("-inf")
            .arg(seconds_text(now + CLAIM_AHEAD_MS))
            .arg("WITHSCORES")
            .arg("LIMIT")
            .arg(0)
            .arg(MAX_CLAIMS_PER_ROUND)
            .query_async(connection)
            .await?;
        let mut wake = |at: i64| {
            round.next_claim = Some(round.next_claim.map_or(at, |known: i64| known.min(at)));
        };
        if due.len() == MAX_CLAIMS_PER_ROUND {
            wake(now);
        }
        let names: Vec<&str> = due.iter().map(|(name, _)| name.as_str()).collect();
        self.read_unknown(connection, keys, &names, &mut round.refused)
            .await?;
        let mut planned = Vec::new();
        for (name, score) in due {
            let next = (score * 1000.0).round() as i64;
            let Some(known) = self.known.get(&name) else {
                continue;
            };
            let overlap = known.definition.overlap;
            if overlap == Overlap::Skip && next > now {
                // Claimed at its time, to see whether the last job is still there.
                wake(next);
                continue;
            }
            let version = known.version;
            let Some(plan) = plan::plan(&known.definition, &known.cadence, next, now, on_time_from)
            else {
                if self.refused.insert(name.clone()) {
                    round.refused.push(format!(
                        "schedule {name:?} has no tick after {}",
                        seconds_text(next)
                    ));
                }
                continue;
            };
            planned.push((name, next, version, overlap, plan));
        }
        // Sent all at once, pipelined on the one connection: each call is a compare-and-set of
        // its own schedule's next tick, so no claim waits for another's reply. One after the
        // other, a round of 1,000 took most of the half second that ticks are claimed ahead.
        if !self.loaded && !planned.is_empty() {
            self.script.load(connection).await?;
            self.loaded = true;
        }
        let (script, lifetime) = (&self.script, self.lifetime);
        let calls = planned.iter().map(|(name, next, version, _, plan)| {
            let mut connection = connection.clone();
            async move {
                let claim = Claim::Tick {
                    claimed: *next,
                    plan,
                };
                script
                    .run(&mut connection, keys, name, *version, claim, lifetime)
                    .await
            }
        });
        let replies = join_all(calls).await;
        let mut failed = None;
        for ((name, next, _, overlap, plan), fired) in planned.into_iter().zip(replies) {
            let fired = match fired {
                Ok(fired) => fired,
                Err(error) => {
                    // The round fails with the first error once the others' outcomes are kept:
                    // their calls went through.
                    failed.get_or_insert(error);
                    continue;
                }
            };
            if fired == Claimed::Stale || fired == Claimed::Gone {
                // Read again in the next round, which is due at once.
                self.known.remove(&name);
                wake(now);
            }
            if let Claimed::Pushed(_) | Claimed::Skipped = fired {
                round.missed += plan.missed;
                round.caught_up += plan.caught_up;
                // Its next claim: at once when it still has missed ticks to catch up.
                wake(match overlap {
                    Overlap::Skip => plan.next,
                    Overlap::Allow => plan.next - CLAIM_AHEAD_MS,
                });
            }
            round.claims.push((name, next, fired));
        }
        if let Some(error) = failed {
            return Err(error);
        }
        // The first schedule not due in this round.
        let later: Vec<(String, f64)> = redis::cmd("ZRANGEBYSCORE")
            .arg(keys.schedules_by_next())
            .arg(format!("({}", seconds_text(now + CLAIM_AHEAD_MS)))
            .arg("+inf")
            .arg("WITHSCORES")
            .arg("LIMIT")
            .arg(0)
            .arg(1)
            .query_async(connection)
            .await?;
        if let Some((_, score)) = later.first() {
            wake((score * 1000.0).round() as i64 - CLAIM_AHEAD_MS);
        }
        Ok(())
    }

    /// Reads the definitions of `names` not known yet, in one pipeline; those that cannot be used
    /// are told once each.
    async fn read_unknown(
        &mut self,
        connection: &mut Commands,
        keys: &Keys,
        names: &[&str],
        refused: &mut Vec<String>,
    ) -> RedisResult<()> {
        let unknown: Vec<&str> = names
            .iter()
            .copied()
            .filter(|name| !self.known.contains_key(*name))
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        let read = schedule::read(connection, keys, &unknown).await?;
        for (name, stored) in unknown.into_iter().zip(read) {
            self.learn(name, stored, refused);
        }
        Ok(())
    }

    /// Keeps schedule `name`'s definition as read, or tells (once) why it cannot be used.
    fn learn(
        &mut self,
        name: &str,
        stored: Option<Result<Stored, Invalid>>,
        refused: &mut Vec<String>,
    ) {
        let known = match stored {
            None => Err(format!("schedule {name:?} is queued but has no hash")),
            Some(Err(invalid)) => Err(invalid.to_string()),
            Some(Ok(stored)) => stored
                .definition
                .check(stored.next.unwrap_or_default())
                .map(|cadence| Known {
                    version: stored.version,
                    definition: stored.definition,
                    cadence,
                })
                .map_err(|invalid| invalid.to_string()),
        };
        match known {
            Ok(known) => {
                self.refused.remove(name);
                self.known.insert(name.to_string(), known);
            }
            Err(why) => {
                if self.refused.insert(name.to_string()) {
                    refused.push(why);
                }
            }
        }
    }

    /// Placed per topic: the topics that have schedules, read again when the registry's length
    /// changed or a while passed.
    async fn schedule_topics(&mut self, connection: &mut Commands) -> RedisResult<&[String]> {
        let length: usize = redis::cmd("HLEN")
            .arg(self.keys.schedules())
            .query_async(connection)
            .await?;
        let fresh = self
            .shards_read
            .is_some_and(|(read, known)| known == length && read.elapsed() < SHARDS_READ_EVERY);
        if !fresh {
            let mut topics: Vec<String> = redis::cmd("HVALS")
                .arg(self.keys.schedules())
                .query_async(connection)
                .await?;
            topics.sort();
            topics.dedup();
            self.shards = topics;
            self.shards_read = Some((Instant::now(), length));
        }
        Ok(&self.shards)
    }
}
