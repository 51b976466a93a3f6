//! Claiming schedules' ticks: a round reads each shard's schedules whose next tick is near,
//! plans each claim (the catch-up policy, by Redis's clock) and makes it with the fire script,
//! which pushes the tick's job only if the tick is still the schedule's next. Every daemon runs
//! rounds; of all that claim a tick, one pushes its job.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::Client;
use crate::error::Result;
use crate::keys::Keys;
use crate::scripts::schedule_fire::{Claim, Fired};
use delayer_wire::schedule::{
    CLAIM_AHEAD_MS, CLAIM_LATE_MS, Cadence, Definition, Overlap, Stored, plan, seconds_text,
};

/// The most schedules one round claims in a shard; the rest in the next round, at once.
const MAX_CLAIMS_PER_ROUND: usize = 1_000;
/// Placed per topic: how often the topics that have schedules are read again, besides whenever
/// the registry's length changes.
const SHARDS_READ_EVERY: Duration = Duration::from_secs(5);

/// What rounds keep from one to the next: the definitions read, and (placed per topic) the
/// topics that have schedules.
#[derive(Default)]
pub struct Firing {
    known: HashMap<String, Known>,
    /// Schedules whose definition cannot be used, told once each.
    refused: HashSet<String>,
    shards: Vec<String>,
    shards_read: Option<(Instant, usize)>,
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
    pub claims: Vec<(String, i64, Fired)>,
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

impl Client {
    /// Claims every tick due now, or within [`CLAIM_AHEAD_MS`] (a schedule whose overlap policy
    /// is `skip`: at its time), in every shard.
    pub async fn fire_schedules(&self, firing: &mut Firing) -> Result<Round> {
        let now = (self.now().await? * 1000.0) as i64;
        let mut round = Round {
            now,
            ..Round::default()
        };
        let shards: Vec<Keys> = match self.keys().every_topic() {
            Some(keys) => vec![keys.clone()],
            None => self
                .schedule_topics(firing)
                .await?
                .iter()
                .map(|topic| self.keys_for(topic).into_owned())
                .collect(),
        };
        for keys in &shards {
            self.fire_shard(keys, firing, &mut round).await?;
        }
        Ok(round)
    }

    async fn fire_shard(&self, keys: &Keys, firing: &mut Firing, round: &mut Round) -> Result<()> {
        let now = round.now;
        let mut connection = self.connection().await?;
        let due: Vec<(String, f64)> = redis::cmd("ZRANGEBYSCORE")
            .arg(keys.schedules_by_next())
            .arg("-inf")
            .arg(seconds_text(now + CLAIM_AHEAD_MS))
            .arg("WITHSCORES")
            .arg("LIMIT")
            .arg(0)
            .arg(MAX_CLAIMS_PER_ROUND)
            .query_async(&mut connection)
            .await?;
        let mut wake = |at: i64| {
            round.next_claim = Some(round.next_claim.map_or(at, |known: i64| known.min(at)));
        };
        if due.len() == MAX_CLAIMS_PER_ROUND {
            wake(now);
        }
        let mut claims = Vec::new();
        for (name, score) in due {
            let next = (score * 1000.0).round() as i64;
            let Some(known) = self.known(keys, &name, firing, &mut round.refused).await? else {
                continue;
            };
            let overlap = known.definition.overlap;
            let on_time_from = match overlap {
                // Claimed at its time, to see whether the last job is still there.
                Overlap::Skip if next > now => {
                    wake(next);
                    continue;
                }
                Overlap::Skip | Overlap::Allow => now - CLAIM_LATE_MS,
            };
            let Some(plan) = plan::plan(&known.definition, &known.cadence, next, now, on_time_from)
            else {
                if firing.refused.insert(name.clone()) {
                    round.refused.push(format!(
                        "schedule {name:?} has no tick after {}",
                        seconds_text(next)
                    ));
                }
                continue;
            };
            let fired = self
                .inner
                .scripts
                .schedule_fire
                .run(
                    &mut connection,
                    keys,
                    &name,
                    known.version,
                    Claim::Tick {
                        claimed: next,
                        plan: &plan,
                    },
                    self.inner.settings.ready_max_lifetime.as_secs(),
                )
                .await?;
            if fired == Fired::Stale || fired == Fired::Gone {
                // Read again in the next round, which is due at once.
                firing.known.remove(&name);
                wake(now);
            }
            if let Fired::Pushed(_) | Fired::Skipped = fired {
                round.missed += plan.missed;
                round.caught_up += plan.caught_up;
                // Its next claim: at once when it still has missed ticks to catch up.
                wake(match overlap {
                    Overlap::Skip => plan.next,
                    Overlap::Allow => plan.next - CLAIM_AHEAD_MS,
                });
            }
            claims.push((name, next, fired));
        }
        round.claims.extend(claims);
        // The first schedule not due in this round.
        let later: Vec<(String, f64)> = redis::cmd("ZRANGEBYSCORE")
            .arg(keys.schedules_by_next())
            .arg(format!("({}", seconds_text(now + CLAIM_AHEAD_MS)))
            .arg("+inf")
            .arg("WITHSCORES")
            .arg("LIMIT")
            .arg(0)
            .arg(1)
            .query_async(&mut connection)
            .await?;
        if let Some((_, score)) = later.first() {
            wake((score * 1000.0).round() as i64 - CLAIM_AHEAD_MS);
        }
        Ok(())
    }

    /// Schedule `name`'s definition, read when it is not known yet; `None` (told once) when it
    /// cannot be used.
    async fn known<'f>(
        &self,
        keys: &Keys,
        name: &str,
        firing: &'f mut Firing,
        refused: &mut Vec<String>,
    ) -> Result<Option<&'f Known>> {
        if !firing.known.contains_key(name) {
            let Some(stored) = self.read_known(keys, name, firing, refused).await? else {
                return Ok(None);
            };
            firing.known.insert(name.to_string(), stored);
        }
        Ok(firing.known.get(name))
    }

    async fn read_known(
        &self,
        keys: &Keys,
        name: &str,
        firing: &mut Firing,
        refused: &mut Vec<String>,
    ) -> Result<Option<Known>> {
        let stored: std::result::Result<Option<Stored>, String> =
            match self.read_schedule(keys, name).await {
                Ok(stored) => Ok(stored),
                Err(crate::Error::InvalidSchedule(invalid)) => Err(invalid.to_string()),
                Err(error) => return Err(error),
            };
        let known = stored.and_then(|stored| {
            let Some(stored) = stored else {
                return Err(format!("schedule {name:?} is queued but has no hash"));
            };
            let cadence = stored
                .definition
                .check(stored.next.unwrap_or_default())
                .map_err(|invalid| invalid.to_string())?;
            Ok(Known {
                version: stored.version,
                definition: stored.definition,
                cadence,
            })
        });
        match known {
            Ok(known) => {
                firing.refused.remove(name);
                Ok(Some(known))
            }
            Err(why) => {
                if firing.refused.insert(name.to_string()) {
                    refused.push(why);
                }
                Ok(None)
            }
        }
    }

    /// Placed per topic: the topics that have schedules, read again when the registry's length
    /// changed or a while passed.
    async fn schedule_topics<'f>(&self, firing: &'f mut Firing) -> Result<&'f [String]> {
        let mut connection = self.connection().await?;
        let length: usize = redis::cmd("HLEN")
            .arg(self.keys().schedules())
            .query_async(&mut connection)
            .await?;
        let fresh = firing
            .shards_read
            .is_some_and(|(read, known)| known == length && read.elapsed() < SHARDS_READ_EVERY);
        if !fresh {
            let mut topics: Vec<String> = redis::cmd("HVALS")
                .arg(self.keys().schedules())
                .query_async(&mut connection)
                .await?;
            topics.sort();
            topics.dedup();
            firing.shards = topics;
            firing.shards_read = Some((Instant::now(), length));
        }
        Ok(&firing.shards)
    }
}
