//! What the queues hold, for `delayer stats`: counted with ZCARD, ZCOUNT and LLEN, never a SCAN
//! (topics come from the registry `delayer:topics`, which the daemon and our pushes keep).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime};

use crate::client::Client;
use crate::error::Result;
use crate::keys::field;
use crate::time::{from_unix, unix_now};

/// The queues at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// Jobs in the pool (not moved to a ready list yet).
    pub waiting: u64,
    /// Of those, the ones due now (a backlog the daemon has not moved yet).
    pub due_now: u64,
    /// When the next job not yet due falls due.
    pub next_due: Option<SystemTime>,
    /// Every topic seen, by name.
    pub topics: Vec<TopicStats>,
}

/// One topic's lists.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicStats {
    pub topic: String,
    /// Due jobs waiting for a consumer.
    pub ready: u64,
    /// Jobs taken by consumers, not acked yet.
    pub reserved: u64,
    /// Jobs that failed their last attempt.
    pub dead: u64,
    /// How long the job next in line has been ready; for jobs of legacy clients, which do not
    /// record their due time, estimated from their data's time to live.
    pub oldest_ready_age: Option<Duration>,
}

/// The pool's counts and some ready lists' lengths: what the daemon's `/metrics` reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lengths {
    /// Jobs in the pool.
    pub waiting: u64,
    /// Of those, the ones due now.
    pub due_now: u64,
    /// When the next job not yet due falls due.
    pub next_due: Option<SystemTime>,
    /// Each topic asked about, with its ready list's length.
    pub ready: Vec<(String, u64)>,
}

impl Client {
    /// The queues now.
    pub async fn stats(&self) -> Result<Stats> {
        let mut redis = self.connection().await?;
        let now = unix_now();
        let keys = self.keys();
        let (topics, reserved): (Vec<String>, Vec<String>) = redis::pipe()
            .smembers(keys.topics())
            .zrange(keys.reserved(), 0, -1)
            .query_async(&mut redis)
            .await?;

        // Reservations are few (what consumers hold right now): their topics are read one by one.
        let mut reserved_by_topic: HashMap<String, u64> = HashMap::new();
        if !reserved.is_empty() {
            let mut pipe = redis::pipe();
            for id in &reserved {
                pipe.hget(keys.bucket(id), field::TOPIC);
            }
            let topics: Vec<Option<String>> = pipe.query_async(&mut redis).await?;
            for topic in topics.into_iter().flatten() {
                *reserved_by_topic.entry(topic).or_default() += 1;
            }
        }

        let mut names: Vec<String> = topics;
        names.extend(reserved_by_topic.keys().cloned());
        names.sort();
        names.dedup();
        let lengths = self.lengths(&names).await?;
        let mut pipe = redis::pipe();
        for topic in &names {
            pipe.llen(keys.dead(topic)).lindex(keys.ready(topic), -1);
        }
        // Redis refuses an empty pipeline.
        let lists: Vec<(u64, Option<String>)> = if names.is_empty() {
            Vec::new()
        } else {
            pipe.query_async(&mut redis).await?
        };
        let oldest: BTreeMap<&str, String> = names
            .iter()
            .zip(&lists)
            .filter_map(|(topic, (_, oldest))| Some((topic.as_str(), oldest.clone()?)))
            .collect();
        let ages = self.ready_ages(oldest.values(), now).await?;

        let topics = lengths
            .ready
            .iter()
            .zip(lists)
            .map(|((topic, ready), (dead, _))| TopicStats {
                topic: topic.clone(),
                ready: *ready,
                reserved: reserved_by_topic.get(topic).copied().unwrap_or(0),
                dead,
                oldest_ready_age: oldest
                    .get(topic.as_str())
                    .and_then(|id| ages.get(id).copied()),
            })
            .collect();
        Ok(Stats {
            waiting: lengths.waiting,
            due_now: lengths.due_now,
            next_due: lengths.next_due,
            topics,
        })
    }

    /// The pool's counts, and the length of each of `topics`' ready lists: O(1) and O(log n)
    /// commands only, never a scan.
    pub async fn lengths(&self, topics: &[String]) -> Result<Lengths> {
        let mut redis = self.connection().await?;
        let now = unix_now();
        let pool = self.keys().pool();
        let (waiting, due_now, next): (u64, u64, Vec<(String, f64)>) = redis::pipe()
            .zcard(pool)
            .zcount(pool, "-inf", now)
            .zrangebyscore_limit_withscores(pool, format!("({now}"), "+inf", 0, 1)
            .query_async(&mut redis)
            .await?;
        let mut pipe = redis::pipe();
        for topic in topics {
            pipe.llen(self.keys().ready(topic));
        }
        // Redis refuses an empty pipeline.
        let ready: Vec<u64> = if topics.is_empty() {
            Vec::new()
        } else {
            pipe.query_async(&mut redis).await?
        };
        Ok(Lengths {
            waiting,
            due_now,
            next_due: next.first().and_then(|(_, score)| from_unix(*score)),
            ready: topics.iter().cloned().zip(ready).collect(),
        })
    }

    /// How long each of `ids` has been due: from its `due` field, or for a legacy job from its
    /// TTL, which the legacy clients set to delay + ready_max_lifetime when pushing.
    async fn ready_ages(
        &self,
        ids: impl Iterator<Item = &String>,
        now: f64,
    ) -> Result<HashMap<String, Duration>> {
        let ids: Vec<&String> = ids.collect();
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let mut pipe = redis::pipe();
        for id in &ids {
            let bucket = self.keys().bucket(id);
            pipe.hget(&bucket, field::DUE).pttl(&bucket);
        }
        let found: Vec<(Option<f64>, i64)> =
            pipe.query_async(&mut self.connection().await?).await?;
        let lifetime = self.settings().ready_max_lifetime.as_secs_f64();
        Ok(ids
            .into_iter()
            .zip(found)
            .filter_map(|(id, (due, ttl_ms))| {
                let age = match due {
                    Some(due) => now - due,
                    None if ttl_ms >= 0 => lifetime - ttl_ms as f64 / 1000.0,
                    None => return None,
                };
                Some((id.clone(), Duration::from_secs_f64(age.max(0.0))))
            })
            .collect())
    }
}
