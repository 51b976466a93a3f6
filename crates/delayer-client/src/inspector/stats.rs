//! What the queues hold, for `delayer stats`: counted with ZCARD, ZCOUNT and LLEN, never a SCAN
//! (topics come from the registry `delayer:topics`, which the daemon and our pushes keep).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, SystemTime};

use redis::{AsyncCommands, FromRedisValue, Pipeline, RedisError, RedisResult, Value};

use super::handle::Inspector;
use crate::error::{Error, Result};
use delayer_wire::keys::{Keys, field};
use delayer_wire::name::{JobId, Text, Topic};
use delayer_wire::time::from_unix;

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
    /// The topic.
    pub topic: Topic,
    /// Due jobs waiting for a consumer.
    pub ready: u64,
    /// Jobs taken by consumers, not acked yet.
    pub reserved: u64,
    /// Jobs that failed their last attempt.
    pub dead: u64,
    /// How long the job next in line has been ready; for jobs of legacy clients, which do not
    /// record their due time, estimated from their data's time to live.
    pub oldest_ready_age: Option<Duration>,
    /// Whether the topic is paused ([`Inspector::pause`]): its due jobs wait in the pool.
    pub paused: bool,
    /// What keeps the topic's lists from being read (`KEY holds a string, not a list`); the
    /// counts that could not be read are 0. One broken key does not hide the other topics.
    pub problem: Option<String>,
}

/// What [`Inspector::details`] reads of one topic.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TopicDetails {
    /// Jobs reserved (of the reservations counted).
    pub reserved: u64,
    /// Jobs in the topic's own pool: the cluster layout's only (one pool for every topic tells
    /// no topic's share without a scan).
    pub waiting: Option<u64>,
}

/// The pool's counts and some ready lists' lengths: what the daemon's `/metrics` reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lengths {
    /// Jobs waiting: in the pool, or compact (see `docs/compact.md`).
    pub waiting: u64,
    /// Of those, the ones due now.
    pub due_now: u64,
    /// When the next job not yet due falls due.
    pub next_due: Option<SystemTime>,
    /// Each topic asked about, with its ready list's length.
    pub ready: Vec<(Topic, u64)>,
    /// Each topic asked about, with its dead list's length (those of the wrong type left out).
    pub dead: Vec<(Topic, u64)>,
    /// Jobs reserved (in the cluster layout, those of the topics asked about).
    pub reserved: u64,
    /// The topics asked about that are paused.
    pub paused: Vec<Topic>,
    /// Topics left out of the counts: their ready list, or in the cluster layout their pool,
    /// holds another type of value.
    pub unreadable: Vec<Topic>,
    /// Whether `waiting`, `due_now` and `reserved` count every topic's jobs (one pool for every
    /// topic), not only those of the topics asked about (each topic's own, in the cluster
    /// layout): lengths of several slices of the topics then add up only without it.
    pub whole_pool: bool,
}

/// A pool's ZCARD, its ZCOUNT of jobs due now, and its first job not due yet with its score.
type PoolCounts = (u64, u64, Vec<(JobId, f64)>);

impl Inspector {
    /// The queues now.
    pub async fn stats(&self) -> Result<Stats> {
        let now = self.client.now().await?;
        let mut topics = self.client.topics().await?;
        let reserved_by_topic = self.reserved_by_topic(&topics, usize::MAX).await?;
        topics.extend(reserved_by_topic.keys().cloned());
        topics.sort();
        topics.dedup();
        let lengths = self.lengths(&topics).await?;
        let ready: HashMap<&Topic, u64> = lengths.ready.iter().map(|(t, n)| (t, *n)).collect();
        let paused: HashSet<&Topic> = lengths.paused.iter().collect();
        // A dead list of the wrong type is left out of the lengths.
        let dead: HashMap<&Topic, u64> = lengths.dead.iter().map(|(t, n)| (t, *n)).collect();
        let dead: Vec<Option<u64>> = topics.iter().map(|t| dead.get(t).copied()).collect();
        let (next, ages) = self.next_ready(&topics, now).await?;

        // Each topic's own reservations key, when it has one, was read for its count.
        let own_reservations = self.client.keys().every_topic().is_none();
        let unreadable: HashSet<&Topic> = lengths.unreadable.iter().collect();
        let mut rows = Vec::with_capacity(topics.len());
        for ((topic, dead), next) in topics.iter().zip(dead).zip(next) {
            let unread = dead.is_none()
                || next.is_none()
                || unreadable.contains(topic)
                || (own_reservations && !reserved_by_topic.contains_key(topic));
            let problem = if unread {
                // Empty when the key was mended meanwhile.
                Some(self.wrong_keys(topic).await?).filter(|problem| !problem.is_empty())
            } else {
                None
            };
            rows.push(TopicStats {
                topic: topic.clone(),
                ready: ready.get(topic).copied().unwrap_or(0),
                reserved: reserved_by_topic.get(topic).copied().unwrap_or(0),
                dead: dead.unwrap_or(0),
                oldest_ready_age: ages.get(topic).copied(),
                paused: paused.contains(topic),
                problem,
            });
        }
        Ok(Stats {
            waiting: lengths.waiting,
            due_now: lengths.due_now,
            next_due: lengths.next_due,
            topics: rows,
        })
    }

    /// What the console shows of each of `topics` beyond its lists' lengths: reserved jobs, and
    /// in the cluster layout its jobs waiting. With one set of reservations for every topic, only
    /// its first `scanned` are counted by topic. A few commands a topic, never a scan of a list.
    pub async fn details(&self, topics: &[Topic], scanned: usize) -> Result<Vec<TopicDetails>> {
        let reserved = self.reserved_by_topic(topics, scanned).await?;
        // A topic's jobs waiting are known where it has a pool of its own.
        let mut waiting: Vec<Option<u64>> = match self.client.keys().every_topic() {
            Some(_) => vec![None; topics.len()],
            None => {
                self.each_topic_tolerant(topics, |pipe, keys, _| {
                    pipe.zcard(keys.pool());
                })
                .await?
            }
        };
        for (waiting, topic) in waiting.iter_mut().zip(topics) {
            if let Some(waiting) = waiting {
                *waiting += self.waiting_compact(&self.client.keys_for(topic)).await?;
            }
        }
        Ok(topics
            .iter()
            .zip(waiting)
            .map(|(topic, waiting)| TopicDetails {
                reserved: reserved.get(topic).copied().unwrap_or(0),
                waiting,
            })
            .collect())
    }

    /// How many jobs wait compact under `keys` (one shard): the index holds one entry a job.
    /// An index that cannot be read (an ACL written before the layout) counts none.
    async fn waiting_compact(&self, keys: &Keys) -> Result<u64> {
        let Some(compact) = keys.compact() else {
            return Ok(0);
        };
        let mut connection = self.client.connection().await?;
        Ok(connection.hlen(compact.index()).await.unwrap_or(0))
    }

    /// Which of `topic`'s keys hold the wrong type of value, in words: its ready and dead lists,
    /// and in the cluster layout its own pool and reservations too.
    async fn wrong_keys(&self, topic: &Topic) -> Result<String> {
        let keys = self.client.keys_for(topic);
        let mut expected = vec![(keys.ready(topic), "list"), (keys.dead(topic), "list")];
        if keys.every_topic().is_none() {
            // The topic's own pool and reservations.
            expected.push((keys.pool().into(), "zset"));
            expected.push((keys.reserved().into(), "zset"));
        }
        let mut pipe = redis::pipe();
        for (key, _) in &expected {
            pipe.cmd("TYPE").arg(key);
        }
        let kinds: Vec<String> = pipe
            .query_async(&mut self.client.connection().await?)
            .await?;
        Ok(expected
            .iter()
            .zip(kinds)
            .filter(|((_, expected), kind)| kind != expected && kind != "none")
            .map(|((key, expected), kind)| {
                format!("{} holds a {kind}, not a {expected}", Text(key))
            })
            .collect::<Vec<_>>()
            .join("; "))
    }

    /// How many jobs of each topic are reserved. Reservations are few (what consumers hold right
    /// now): with one set of them for all topics, their topics are read one by one, of the first
    /// `scanned` (soonest deadlines) at most.
    async fn reserved_by_topic(
        &self,
        topics: &[Topic],
        scanned: usize,
    ) -> Result<HashMap<Topic, u64>> {
        if self.client.keys().every_topic().is_none() {
            // Each topic's own set. A reservations key of the wrong type fails that topic's
            // reserves, with its name.
            let counts: Vec<Option<u64>> = self
                .each_topic_tolerant(topics, |pipe, keys, _| {
                    pipe.zcard(keys.reserved());
                })
                .await?;
            return Ok(topics
                .iter()
                .zip(counts)
                .filter_map(|(topic, count)| Some((topic.clone(), count?)))
                .collect());
        }
        let mut by_topic: HashMap<Topic, u64> = HashMap::new();
        for (_, _, topic) in self.scan_reservations(scanned).await? {
            // A bucket of the wrong type is one job's trouble, not the stats'.
            let Some(topic) = tolerate(topic)?.flatten() else {
                continue;
            };
            *by_topic.entry(topic).or_default() += 1;
        }
        Ok(by_topic)
    }

    /// The first `scanned` reservations (soonest deadlines) of the one set for every topic, each
    /// with its deadline's score and its bucket's topic as read (none: the bucket is gone): how
    /// a topic's reservations are found outside the cluster layout.
    pub(super) async fn scan_reservations(
        &self,
        scanned: usize,
    ) -> RedisResult<Vec<(JobId, f64, RedisResult<Option<Topic>>)>> {
        let mut redis = self.client.connection().await?;
        let last = isize::try_from(scanned).unwrap_or(isize::MAX) - 1;
        let held: Vec<(JobId, f64)> = redis
            .zrange_withscores(self.client.keys().reserved(), 0, last)
            .await?;
        if held.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for (id, _) in &held {
            pipe.hget(self.client.keys().bucket(id), field::TOPIC);
        }
        let topics: Vec<RedisResult<Option<Topic>>> =
            pipe.ignore_errors().query_async(&mut redis).await?;
        Ok(held
            .into_iter()
            .zip(topics)
            .map(|((id, score), topic)| (id, score, topic))
            .collect())
    }

    /// The counts of the pools and reservations `topics`' jobs are in (one pool for every topic,
    /// or in the cluster layout each topic's own), and the length of each of `topics`' ready and
    /// dead lists: O(1) and O(log n) commands only, never a scan.
    pub async fn lengths(&self, topics: &[Topic]) -> Result<Lengths> {
        let now = self.client.now().await?;
        let shards = self.client.keys().shards(topics);
        let counts: Vec<Option<PoolCounts>> = self
            .each_shard_tolerant(&shards, |pipe, keys| {
                pipe.zcard(keys.pool())
                    .zcount(keys.pool(), "-inf", now)
                    .zrangebyscore_limit_withscores(keys.pool(), format!("({now}"), "+inf", 0, 1);
            })
            .await?;
        if let (Some(every), Some(None)) = (self.client.keys().every_topic(), counts.first()) {
            // The one pool of every topic: nothing is moved either, which must be said.
            let pool = every.pool();
            let kind: String = redis::cmd("TYPE")
                .arg(pool)
                .query_async(&mut self.client.connection().await?)
                .await?;
            return Err(Error::WrongType {
                key: pool.to_string(),
                detail: format!("{pool} holds a {kind}, not a zset"),
            });
        }
        // Each reply on its own: a list of the wrong type must not hide the other's count.
        let lists = self
            .each_topic(topics, |pipe, keys, topic| {
                pipe.llen(keys.ready(topic))
                    .llen(keys.dead(topic))
                    .exists(keys.paused(topic));
            })
            .await?;
        let (mut ready, mut dead, mut paused) = (Vec::new(), Vec::new(), Vec::new());
        for replies in lists {
            let [ready_length, dead_length, pause]: [Option<Value>; 3] =
                replies.try_into().expect("three commands a topic");
            ready.push(parsed::<u64>(ready_length)?);
            dead.push(parsed::<u64>(dead_length)?);
            paused.push(parsed::<bool>(pause)?);
        }
        let reserved: Vec<Option<u64>> = self
            .each_shard_tolerant(&shards, |pipe, keys| {
                pipe.zcard(keys.reserved());
            })
            .await?;
        // A pool that could not be read is its shard's topics' trouble (none of the one pool for
        // every topic: that is the error above).
        let unread_pools = shards
            .iter()
            .zip(&counts)
            .filter(|(_, read)| read.is_none());
        let unread_lists = topics.iter().zip(&ready).filter(|(_, read)| read.is_none());
        let unreadable = unread_pools
            .flat_map(|((_, topics), _)| topics.iter().cloned())
            .chain(unread_lists.map(|(topic, _)| topic.clone()))
            .collect();
        let counts: Vec<&PoolCounts> = counts.iter().flatten().collect();
        let next_due = counts
            .iter()
            .filter_map(|(_, _, next)| Some(next.first()?.1))
            .min_by(f64::total_cmp);
        let mut compact = 0;
        for (keys, _) in &shards {
            compact += self.waiting_compact(keys).await?;
        }
        Ok(Lengths {
            waiting: compact + counts.iter().map(|(waiting, _, _)| waiting).sum::<u64>(),
            due_now: counts.iter().map(|(_, due_now, _)| due_now).sum(),
            next_due: next_due.and_then(from_unix),
            ready: topics
                .iter()
                .zip(ready)
                .filter_map(|(topic, ready)| Some((topic.clone(), ready?)))
                .collect(),
            dead: topics
                .iter()
                .zip(dead)
                .filter_map(|(topic, dead)| Some((topic.clone(), dead?)))
                .collect(),
            reserved: reserved.into_iter().flatten().sum(),
            whole_pool: self.client.keys().every_topic().is_some(),
            paused: topics
                .iter()
                .zip(paused)
                .filter(|(_, paused)| paused == &Some(true))
                .map(|(topic, _)| topic.clone())
                .collect(),
            unreadable,
        })
    }

    /// How long the job next in line on each of `topics`' ready lists has been ready (none for an
    /// empty list); see [`TopicStats::oldest_ready_age`].
    pub async fn oldest_ready_ages(&self, topics: &[Topic]) -> Result<HashMap<Topic, Duration>> {
        let now = self.client.now().await?;
        Ok(self.next_ready(topics, now).await?.1)
    }

    /// Each of `topics`' job next in line (`None` where its ready list could not be read), and
    /// how long those found have been ready.
    async fn next_ready(
        &self,
        topics: &[Topic],
        now: f64,
    ) -> Result<(Vec<Option<Option<JobId>>>, HashMap<Topic, Duration>)> {
        let next: Vec<Option<Option<JobId>>> = self
            .each_topic_tolerant(topics, |pipe, keys, topic| {
                pipe.lindex(keys.ready(topic), -1);
            })
            .await?;
        let oldest: BTreeMap<Topic, JobId> = topics
            .iter()
            .zip(&next)
            .filter_map(|(topic, next)| Some((topic.clone(), next.clone()??)))
            .collect();
        let ages = self.ready_ages(&oldest, now).await?;
        Ok((next, ages))
    }

    /// How long each topic's job next in line (`oldest`: topic -> id) has been due: from its
    /// `due` field, or for a legacy job from its TTL, which the legacy clients set to delay +
    /// ready_max_lifetime when pushing.
    async fn ready_ages(
        &self,
        oldest: &BTreeMap<Topic, JobId>,
        now: f64,
    ) -> Result<HashMap<Topic, Duration>> {
        let topics: Vec<Topic> = oldest.keys().cloned().collect();
        let found: Vec<Option<(Option<f64>, i64)>> = self
            .each_topic_tolerant(&topics, |pipe, keys, topic| {
                let bucket = keys.bucket(&oldest[topic]);
                pipe.hget(&bucket, field::DUE).pttl(&bucket);
            })
            .await?;
        let lifetime = self.client.settings().ready_max_lifetime.as_secs_f64();
        Ok(topics
            .into_iter()
            .zip(found)
            .filter_map(|(topic, found)| {
                let (due, ttl_ms) = found?;
                let age = match due {
                    Some(due) => now - due,
                    None if ttl_ms >= 0 => lifetime - ttl_ms as f64 / 1000.0,
                    None => return None,
                };
                Some((topic, Duration::from_secs_f64(age.max(0.0))))
            })
            .collect())
    }

    /// Sends `commands(pipe, keys, topic)` for each of `topics` and reads each topic's replies
    /// as one `T`, or `None` when they found a key of the wrong type (see
    /// [`each_topic`](Inspector::each_topic)).
    async fn each_topic_tolerant<T: FromRedisValue>(
        &self,
        topics: &[Topic],
        commands: impl Fn(&mut Pipeline, &Keys, &Topic),
    ) -> Result<Vec<Option<T>>> {
        let replies = self.each_topic(topics, commands).await?;
        replies
            .into_iter()
            .map(
                |replies| match replies.into_iter().collect::<Option<Vec<Value>>>() {
                    Some(values) => one_of(values).map(Some),
                    None => Ok(None),
                },
            )
            .collect()
    }

    /// Sends `commands(pipe, keys)` for each shard of `shards` (the same commands for each) and
    /// reads each shard's replies as one `T`, or `None` when they found a key of the wrong type.
    async fn each_shard_tolerant<T: FromRedisValue>(
        &self,
        shards: &[(Cow<'_, Keys>, &[Topic])],
        commands: impl Fn(&mut Pipeline, &Keys),
    ) -> Result<Vec<Option<T>>> {
        let mut redis = self.client.connection().await?;
        let mut read = Vec::with_capacity(shards.len());
        for (keys, _) in shards {
            let mut pipe = redis::pipe();
            commands(&mut pipe, keys);
            let values: Vec<RedisResult<Value>> =
                pipe.ignore_errors().query_async(&mut redis).await?;
            let values: Option<Vec<Value>> =
                values.into_iter().map(tolerate).collect::<Result<_>>()?;
            read.push(match values {
                Some(values) => Some(one_of(values)?),
                None => None,
            });
        }
        Ok(read)
    }

    /// Sends `commands(pipe, keys, topic)` (as many for each) for each of `topics` and reads
    /// each reply on its own, `None` for one that found a key of the wrong type: one pipeline a
    /// shard (in the cluster layout one a topic, whose keys are in a slot of their own, perhaps
    /// on another master).
    async fn each_topic(
        &self,
        topics: &[Topic],
        commands: impl Fn(&mut Pipeline, &Keys, &Topic),
    ) -> Result<Vec<Vec<Option<Value>>>> {
        // Redis refuses an empty pipeline.
        if topics.is_empty() {
            return Ok(Vec::new());
        }
        let mut redis = self.client.connection().await?;
        let pipes: Vec<(Pipeline, usize)> = self
            .client
            .keys()
            .shards(topics)
            .into_iter()
            .map(|(keys, topics)| {
                let mut pipe = redis::pipe();
                for topic in topics {
                    commands(&mut pipe, &keys, topic);
                }
                (pipe, topics.len())
            })
            .collect();
        let mut replies = Vec::with_capacity(topics.len());
        for (mut pipe, topics) in pipes {
            // `commands` sends as many commands for each topic.
            let each = pipe.cmd_iter().count() / topics;
            debug_assert_eq!(each * topics, pipe.cmd_iter().count());
            let values: Vec<RedisResult<Value>> =
                pipe.ignore_errors().query_async(&mut redis).await?;
            let mut values = values.into_iter();
            for _ in 0..topics {
                let topic: Result<Vec<Option<Value>>> =
                    values.by_ref().take(each).map(tolerate).collect();
                replies.push(topic?);
            }
        }
        Ok(replies)
    }
}

/// The replies to one topic's or shard's commands, read as one `T`.
fn one_of<T: FromRedisValue>(values: Vec<Value>) -> Result<T> {
    let mut one = T::from_redis_values(values).map_err(RedisError::from)?;
    Ok(one
        .pop()
        .ok_or_else(|| RedisError::from((redis::ErrorKind::UnexpectedReturnType, "no reply")))?)
}

/// A reply tolerated by [`tolerate`], read as a `T`.
fn parsed<T: FromRedisValue>(reply: Option<Value>) -> Result<Option<T>> {
    let value = reply.map(T::from_redis_value).transpose();
    Ok(value.map_err(RedisError::from)?)
}

/// A reply, `None` when it is Redis's WRONGTYPE: the key is not one of ours to count.
fn tolerate<T>(reply: RedisResult<T>) -> Result<Option<T>> {
    match reply {
        Ok(value) => Ok(Some(value)),
        Err(error) if error.code() == Some("WRONGTYPE") => Ok(None),
        Err(error) => Err(error.into()),
    }
}
