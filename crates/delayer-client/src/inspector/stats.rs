//! What the queues hold, for `delayer stats`, `/metrics` and the console: counted with ZCARD,
//! ZCOUNT and LLEN, one pipeline a shard, never a SCAN (topics come from the registry
//! `delayer:topics`, which the daemon and our pushes keep).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, SystemTime};

use redis::{FromRedisValue, Pipeline, RedisError, RedisResult, Value};

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

/// A shard's replies (see [`Keys::shards`]): to the commands sent for the shard, then to those
/// sent for each of its topics.
struct Replies<'t> {
    /// Its topics, of those asked about.
    topics: &'t [Topic],
    /// Whether its keys are one topic's own (the cluster layout), not every topic's: its pool and
    /// reservations are then that topic's alone.
    own: bool,
    shard: Vec<RedisResult<Value>>,
    each: Vec<Vec<RedisResult<Value>>>,
}

impl Inspector {
    /// The queues now.
    pub async fn stats(&self) -> Result<Stats> {
        let now = self.client.now().await?;
        let mut topics = self.client.topics().await?;
        let (reserved, unread_reservations) = self.reserved_by_topic(&topics, usize::MAX).await?;
        topics.extend(reserved.keys().cloned());
        topics.sort();
        topics.dedup();
        let lengths = self.lengths(&topics).await?;
        let ready: HashMap<&Topic, u64> = lengths.ready.iter().map(|(t, n)| (t, *n)).collect();
        let paused: HashSet<&Topic> = lengths.paused.iter().collect();
        // A dead list of the wrong type is left out of the lengths.
        let dead: HashMap<&Topic, u64> = lengths.dead.iter().map(|(t, n)| (t, *n)).collect();
        let dead: Vec<Option<u64>> = topics.iter().map(|t| dead.get(t).copied()).collect();
        let (next, ages) = self.next_ready(&topics, now).await?;
        let unreadable: HashSet<&Topic> = lengths.unreadable.iter().collect();
        let mut rows = Vec::with_capacity(topics.len());
        for ((topic, dead), next) in topics.iter().zip(dead).zip(next) {
            let unread = dead.is_none()
                || next.is_none()
                || unreadable.contains(topic)
                || unread_reservations.contains(topic);
            let problem = if unread {
                // Empty when the key was mended meanwhile.
                Some(self.wrong_keys(topic).await?).filter(|problem| !problem.is_empty())
            } else {
                None
            };
            rows.push(TopicStats {
                topic: topic.clone(),
                ready: ready.get(topic).copied().unwrap_or(0),
                reserved: reserved.get(topic).copied().unwrap_or(0),
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
        let (reserved, _) = self.reserved_by_topic(topics, scanned).await?;
        // A topic's jobs waiting are known where it has a pool of its own.
        let shards = self.each_shard(topics, pool_size, |_, _, _| {}).await?;
        let mut waiting: HashMap<&Topic, u64> = HashMap::new();
        for shard in shards.into_iter().filter(|shard| shard.own) {
            let [pool, compact]: [_; 2] = shard.shard.try_into().expect("two commands");
            if let Some(pool) = parsed::<u64>(tolerate(pool)?)? {
                let jobs = pool + count(&compact);
                waiting.extend(shard.topics.iter().map(|topic| (topic, jobs)));
            }
        }
        Ok(topics
            .iter()
            .map(|topic| TopicDetails {
                reserved: reserved.get(topic).copied().unwrap_or(0),
                waiting: waiting.get(topic).copied(),
            })
            .collect())
    }

    /// Which of `topic`'s keys hold the wrong type of value, in words: its ready and dead lists,
    /// and the pool and reservations its jobs are in.
    async fn wrong_keys(&self, topic: &Topic) -> Result<String> {
        let keys = self.client.keys_for(topic);
        let expected = [
            (keys.ready(topic), "list"),
            (keys.dead(topic), "list"),
            (keys.pool().into(), "zset"),
            (keys.reserved().into(), "zset"),
        ];
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

    /// How many jobs of each topic are reserved, and the topics whose reservations cannot be
    /// read (their key holds another type of value). A topic's own set (the cluster layout) is
    /// counted. Reservations are few (what consumers hold right now): with one set of them for
    /// every topic, their topics are read one by one, of the first `scanned` (soonest deadlines)
    /// at most, and may be others than `topics`.
    async fn reserved_by_topic(
        &self,
        topics: &[Topic],
        scanned: usize,
    ) -> Result<(HashMap<Topic, u64>, HashSet<Topic>)> {
        let shards = self.each_shard(topics, reservations, |_, _, _| {}).await?;
        let (mut by_topic, mut unread) = (HashMap::new(), HashSet::new());
        for shard in shards {
            if !shard.own {
                for (_, _, topic) in self.scan_reservations(scanned).await? {
                    // A bucket of the wrong type is one job's trouble, not the stats'.
                    if let Some(topic) = tolerate(topic)?.flatten() {
                        *by_topic.entry(topic).or_default() += 1;
                    }
                }
                continue;
            }
            // A reservations key of the wrong type fails that topic's reserves, with its name.
            let [count]: [_; 1] = shard.shard.try_into().expect("one command");
            let count = parsed::<u64>(tolerate(count)?)?;
            for topic in shard.topics {
                match count {
                    Some(count) => by_topic.insert(topic.clone(), count),
                    None => unread.insert(topic.clone()).then_some(0),
                };
            }
        }
        Ok((by_topic, unread))
    }

    /// The counts of the pools and reservations `topics`' jobs are in (one pool for every topic,
    /// or in the cluster layout each topic's own), and the length of each of `topics`' ready and
    /// dead lists: O(1) and O(log n) commands only, never a scan, one pipeline a shard.
    pub async fn lengths(&self, topics: &[Topic]) -> Result<Lengths> {
        let now = self.client.now().await?;
        let shards = self
            .each_shard(
                topics,
                |pipe, keys| {
                    pipe.zcard(keys.pool())
                        .zcount(keys.pool(), "-inf", now)
                        .zrangebyscore_limit_withscores(
                            keys.pool(),
                            format!("({now}"),
                            "+inf",
                            0,
                            1,
                        )
                        .zcard(keys.reserved());
                    compact_size(pipe, keys);
                },
                // Each reply on its own: a list of the wrong type must not hide the other's count.
                |pipe, keys, topic| {
                    pipe.llen(keys.ready(topic))
                        .llen(keys.dead(topic))
                        .exists(keys.paused(topic));
                },
            )
            .await?;
        let mut lengths = Lengths {
            whole_pool: shards.iter().any(|shard| !shard.own),
            ..Lengths::default()
        };
        let mut next_due: Option<f64> = None;
        for shard in shards {
            let [size, due_now, next, reserved, compact]: [_; 5] =
                shard.shard.try_into().expect("five commands");
            let pool = [size, due_now, next].map(tolerate);
            match pool.into_iter().collect::<Result<Option<Vec<Value>>>>()? {
                Some(pool) => {
                    let (size, due_now, next): PoolCounts = one_of(pool)?;
                    lengths.waiting += size;
                    lengths.due_now += due_now;
                    if let Some(&(_, at)) = next.first() {
                        next_due = Some(next_due.map_or(at, |known| known.min(at)));
                    }
                }
                // The one pool of every topic: nothing is moved either, which must be said.
                None if !shard.own => {
                    let pool = self.client.keys().pool();
                    let mut redis = self.client.connection().await?;
                    let kind: String = redis::cmd("TYPE").arg(pool).query_async(&mut redis).await?;
                    let detail = format!("{pool} holds a {kind}, not a zset");
                    let key = pool.to_string();
                    return Err(Error::WrongType { key, detail });
                }
                // A topic's own pool: that topic's trouble.
                None => lengths.unreadable.extend(shard.topics.iter().cloned()),
            }
            lengths.reserved += parsed::<u64>(tolerate(reserved)?)?.unwrap_or(0);
            lengths.waiting += count(&compact);
            for (topic, replies) in shard.topics.iter().zip(shard.each) {
                let [ready, dead, paused]: [_; 3] =
                    replies.try_into().expect("three commands a topic");
                match parsed::<u64>(tolerate(ready)?)? {
                    Some(ready) => lengths.ready.push((topic.clone(), ready)),
                    None => lengths.unreadable.push(topic.clone()),
                }
                if let Some(dead) = parsed::<u64>(tolerate(dead)?)? {
                    lengths.dead.push((topic.clone(), dead));
                }
                if parsed::<bool>(tolerate(paused)?)? == Some(true) {
                    lengths.paused.push(topic.clone());
                }
            }
        }
        lengths.next_due = next_due.and_then(from_unix);
        Ok(lengths)
    }

    /// How long the job next in line on each of `topics`' ready lists has been ready (none for an
    /// empty list); see [`TopicStats::oldest_ready_age`].
    pub async fn oldest_ready_ages(&self, topics: &[Topic]) -> Result<HashMap<Topic, Duration>> {
        let now = self.client.now().await?;
        Ok(self.next_ready(topics, now).await?.1)
    }

    /// Each of `topics`' job next in line (`None` where its ready list could not be read), and
    /// how long those found have been due: from its `due` field, or for a legacy job from its
    /// TTL, which the legacy clients set to delay + ready_max_lifetime when pushing.
    async fn next_ready(
        &self,
        topics: &[Topic],
        now: f64,
    ) -> Result<(Vec<Option<Option<JobId>>>, HashMap<Topic, Duration>)> {
        let next: Vec<Option<Option<JobId>>> = self
            .each_topic(topics, |pipe, keys, topic| {
                pipe.lindex(keys.ready(topic), -1);
            })
            .await?;
        let oldest: BTreeMap<Topic, JobId> = topics
            .iter()
            .zip(&next)
            .filter_map(|(topic, next)| Some((topic.clone(), next.clone()??)))
            .collect();
        let topics: Vec<Topic> = oldest.keys().cloned().collect();
        let found: Vec<Option<(Option<f64>, i64)>> = self
            .each_topic(&topics, |pipe, keys, topic| {
                let bucket = keys.bucket(&oldest[topic]);
                pipe.hget(&bucket, field::DUE).pttl(&bucket);
            })
            .await?;
        let lifetime = self.client.settings().ready_max_lifetime.as_secs_f64();
        let ages = topics.into_iter().zip(found).filter_map(|(topic, found)| {
            let (due, ttl_ms) = found?;
            let age = match due {
                Some(due) => now - due,
                None if ttl_ms >= 0 => lifetime - ttl_ms as f64 / 1000.0,
                None => return None,
            };
            Some((topic, Duration::from_secs_f64(age.max(0.0))))
        });
        Ok((next, ages.collect()))
    }

    /// Sends `commands(pipe, keys, topic)` for each of `topics` and reads each topic's replies
    /// as one `T`, or `None` when they found a key of the wrong type.
    async fn each_topic<T: FromRedisValue>(
        &self,
        topics: &[Topic],
        commands: impl Fn(&mut Pipeline, &Keys, &Topic),
    ) -> Result<Vec<Option<T>>> {
        let shards = self.each_shard(topics, |_, _| {}, commands).await?;
        let mut read = Vec::with_capacity(topics.len());
        for replies in shards.into_iter().flat_map(|shard| shard.each) {
            let replies: Option<Vec<Value>> =
                replies.into_iter().map(tolerate).collect::<Result<_>>()?;
            read.push(match replies {
                Some(values) => Some(one_of(values)?),
                None => None,
            });
        }
        Ok(read)
    }

    /// Sends `shard(pipe, keys)` for each shard of `topics` (see [`Keys::shards`]), then
    /// `topic(pipe, keys, topic)` for each of its topics (as many commands for each), one
    /// pipeline a shard: in the cluster layout each topic is a shard, in a slot of its own,
    /// perhaps on another master. Every reply comes on its own, errors too.
    async fn each_shard<'t>(
        &self,
        topics: &'t [Topic],
        shard: impl Fn(&mut Pipeline, &Keys),
        topic: impl Fn(&mut Pipeline, &Keys, &Topic),
    ) -> Result<Vec<Replies<'t>>> {
        let mut redis = self.client.connection().await?;
        let mut read = Vec::new();
        for (keys, topics) in self.client.keys().shards(topics) {
            let mut pipe = redis::pipe();
            shard(&mut pipe, &keys);
            let of_shard = pipe.cmd_iter().count();
            for each in topics {
                topic(&mut pipe, &keys, each);
            }
            let sent = pipe.cmd_iter().count();
            // `topic` sends as many commands for each topic.
            let per_topic = (sent - of_shard) / topics.len().max(1);
            debug_assert_eq!(of_shard + per_topic * topics.len(), sent);
            let replies: Vec<RedisResult<Value>> = match sent {
                // Redis refuses an empty pipeline.
                0 => Vec::new(),
                _ => pipe.ignore_errors().query_async(&mut redis).await?,
            };
            let mut replies = replies.into_iter();
            let shard = replies.by_ref().take(of_shard).collect();
            let each = topics
                .iter()
                .map(|_| replies.by_ref().take(per_topic).collect())
                .collect();
            read.push(Replies {
                topics,
                own: keys.per_topic(),
                shard,
                each,
            });
        }
        Ok(read)
    }
}

/// A shard's pool size and jobs waiting compact, as [`Inspector::details`] reads them.
fn pool_size(pipe: &mut Pipeline, keys: &Keys) {
    pipe.zcard(keys.pool());
    compact_size(pipe, keys);
}

/// A shard's reservations' size.
fn reservations(pipe: &mut Pipeline, keys: &Keys) {
    pipe.zcard(keys.reserved());
}

/// How many jobs of a shard wait compact: its index holds one entry a job. (A reply that says
/// "none" where it has no compact keys.)
fn compact_size(pipe: &mut Pipeline, keys: &Keys) {
    match keys.compact() {
        Some(compact) => pipe.hlen(compact.index()),
        None => pipe.cmd("PING"),
    };
}

/// A count as [`compact_size`] reads it: an index that cannot be read (an ACL written before
/// the layout) counts none.
fn count(reply: &RedisResult<Value>) -> u64 {
    match reply {
        Ok(Value::Int(count)) => u64::try_from(*count).unwrap_or(0),
        _ => 0,
    }
}

/// The replies to one topic's commands, read as one `T`.
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
