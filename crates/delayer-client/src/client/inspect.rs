//! Looking jobs up: one job by id, a topic's dead list, and dead jobs sent back for another round.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use redis::{AsyncCommands, RedisResult, Value};

use super::{Client, check_id, check_topic_in};
use crate::error::{Error, Result};
use crate::job::{JobInfo, State};
use delayer_wire::consumer::consumer_of_holder;
use delayer_wire::keys::field;
use delayer_wire::name::JobId;
use delayer_wire::scripts::body::Body;
use delayer_wire::scripts::compact_job::CompactJob;
use delayer_wire::scripts::dead_job::DeadAction;
use delayer_wire::time::{from_deadline_score, from_unix};

/// Dead jobs requeued per script call.
const REQUEUE_BATCH: usize = 1000;

/// `get`'s five replies, each on its own: the pool's score, the reservation's, the bucket's
/// [`GET_FIELDS`], the reservation's holder, whether the compact layout's index holds the id.
type Lookup = (
    RedisResult<Option<f64>>,
    RedisResult<Option<f64>>,
    RedisResult<Vec<Option<Vec<u8>>>>,
    RedisResult<Option<Vec<u8>>>,
    RedisResult<Value>,
);

/// The bucket fields `get` reads besides the body (which it reads apart, up to a length).
const GET_FIELDS: [&str; 7] = [
    field::TOPIC,
    field::DUE,
    field::DELAY,
    field::ATTEMPTS,
    field::DIED_AT,
    field::DIED_WHY,
    field::DELIVERED_AT,
];

/// What [`Client::job_times`] reads of a job: its due time, attempts, death time and holder.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobTimes {
    /// When it fell (or falls) due; known for jobs our pushes wrote.
    pub due: Option<SystemTime>,
    /// How many times it was reserved.
    pub attempts: u32,
    /// When it went to its topic's dead list.
    pub died: Option<SystemTime>,
    /// While it is reserved, the consumer holding it, when its reserve token names one (see
    /// [`Client::as_consumer`]); `None` for a reservation made without one.
    pub holder: Option<String>,
}

/// What `get` says of a job waiting compact: waiting, never reserved yet.
fn compact_info(id: &[u8], job: CompactJob) -> JobInfo {
    let number = |text: &[u8]| std::str::from_utf8(text).ok()?.parse::<f64>().ok();
    let (body, body_size) = match job.body {
        Body::Read(body) => {
            let size = body.len();
            (Some(body), Some(size))
        }
        Body::TooLong(size) => (None, Some(size)),
        Body::Missing => (None, None),
    };
    JobInfo {
        state: State::Waiting,
        topic: Some(job.topic.into()),
        body_size,
        body,
        due: number(&job.due).and_then(from_unix),
        delay: number(&job.delay).and_then(|delay| Duration::try_from_secs_f64(delay).ok()),
        ..JobInfo::unknown(id)
    }
}

impl Client {
    /// Where a job is, and what it holds (its body only up to
    /// [`Settings::max_body_read`](crate::Settings::max_body_read)).
    pub async fn get(&self, id: impl AsRef<[u8]>) -> Result<JobInfo> {
        let limit = self.inner.settings.max_body_read.unwrap_or(usize::MAX);
        self.get_up_to(id, limit).await
    }

    /// Like [`get`](Client::get), reading the body only when it is at most `limit` bytes long (0:
    /// never); [`JobInfo::body_size`] tells its length all the same.
    pub async fn get_up_to(&self, id: impl AsRef<[u8]>, limit: usize) -> Result<JobInfo> {
        let id = id.as_ref();
        check_id(id)?;
        let Some(keys) = self.keys_of(id, None).await? else {
            return Ok(JobInfo::unknown(id));
        };
        // Whether the compact layout was looked in: once, then the job is read as a legacy one.
        let mut looked_compact = false;
        loop {
            let bucket = keys.bucket(id);
            // Each reply on its own, so that a key of the wrong type is named. A job waiting compact
            // is read apart (its index entry says so; an ACL that denies it: none).
            let mut lookup = redis::pipe();
            lookup
                .atomic()
                .ignore_errors()
                .zscore(keys.pool(), id)
                .zscore(keys.reserved(), id)
                .hmget(&bucket, &GET_FIELDS)
                .hget(keys.holders(), id);
            match keys.compact() {
                Some(compact) => lookup.hexists(compact.index(), id),
                // No key of another slot in the transaction (the cluster layout): a reply that
                // says "not compact".
                None => lookup.cmd("PING"),
            };
            let (due, deadline, fields, holder, compact): Lookup =
                lookup.query_async(&mut self.connection().await?).await?;
            if let (Some(keys_compact), Ok(Value::Int(1)), false) =
                (keys.compact(), compact, looked_compact)
            {
                looked_compact = true;
                let scripts = &self.inner.scripts;
                let mut connection = self.connection().await?;
                match (scripts.compact_job)
                    .get(&mut connection, &keys, keys_compact, id, limit)
                    .await?
                {
                    Some(job) => return Ok(compact_info(id, job)),
                    // Staged since: a legacy job now, read again. (An index entry whose chunk
                    // key another client wrote over names no job: read as a legacy one too.)
                    None => continue,
                }
            }
            let due = due.map_err(|error| Error::about_key(error, keys.pool()))?;
            let deadline = deadline.map_err(|error| Error::about_key(error, keys.reserved()))?;
            let fields: HashMap<&str, Vec<u8>> = GET_FIELDS
                .into_iter()
                .zip(fields.map_err(|error| Error::about_key(error, &bucket))?)
                .filter_map(|(name, value)| Some((name, value?)))
                .collect();
            let body = match fields.contains_key(field::TOPIC) {
                true => {
                    let mut connection = self.connection().await?;
                    self.body_up_to(&mut connection, &bucket, limit).await?
                }
                false => Body::Missing,
            };
            let body_size = match &body {
                Body::Read(body) => Some(body.len()),
                Body::TooLong(size) => Some(*size),
                Body::Missing => None,
            };
            // Until a reservation ends, its attempt is its holder's (none for one made before the
            // holders hash: the bucket's then).
            let held_as = match holder {
                Ok(Some(holder)) => attempt_of_holder(&holder),
                _ => None,
            };
            let field = |name: &str| fields.get(name);
            let number = |name: &str| std::str::from_utf8(field(name)?).ok()?.parse::<f64>().ok();
            let state = if field(field::TOPIC).is_none() {
                State::Unknown
            } else if due.is_some() {
                State::Waiting
            } else if deadline.is_some() {
                State::Reserved
            } else if field(field::DIED_AT).is_some() {
                State::Dead
            } else if field(field::DELIVERED_AT).is_some() {
                State::Delivered
            } else {
                State::Ready
            };
            return Ok(JobInfo {
                id: id.into(),
                state,
                topic: field(field::TOPIC).map(|topic| topic.clone().into()),
                body: match body {
                    Body::Read(body) => Some(body),
                    _ => None,
                },
                body_size,
                due: due.or_else(|| number(field::DUE)).and_then(from_unix),
                delay: number(field::DELAY)
                    .and_then(|delay| Duration::try_from_secs_f64(delay).ok()),
                // As the scripts count it: a whole number below 2^31 - 1, anything else none.
                attempts: held_as.unwrap_or_else(|| {
                    number(field::ATTEMPTS)
                        .filter(|attempts| {
                            (0.0..2_147_483_647.0).contains(attempts) && attempts.fract() == 0.0
                        })
                        .map_or(0, |attempts| attempts as u32)
                }),
                deadline: deadline.map(from_deadline_score).and_then(from_unix),
                died_why: match state {
                    State::Dead => {
                        field(field::DIED_WHY).map(|why| String::from_utf8_lossy(why).into_owned())
                    }
                    _ => None,
                },
            });
        }
    }

    /// The ids on `topic`'s dead list, oldest first, at most `limit`.
    pub async fn dead(&self, topic: impl AsRef<[u8]>, limit: usize) -> Result<Vec<JobId>> {
        self.dead_window(topic, 0, limit).await
    }

    /// A window of `topic`'s dead list: `count` ids at most, oldest first, after skipping the
    /// `skip` oldest. One LRANGE of the window, whatever the list's length.
    pub async fn dead_window(
        &self,
        topic: impl AsRef<[u8]>,
        skip: usize,
        count: usize,
    ) -> Result<Vec<JobId>> {
        let topic = topic.as_ref();
        check_topic_in(self.layout(), topic)?;
        self.window(self.keys_for(topic).dead(topic), skip, count)
            .await
    }

    /// A window of `topic`'s ready list: `count` ids at most, next in line first, after skipping
    /// the `skip` next in line. One LRANGE of the window, whatever the list's length.
    pub async fn ready_window(
        &self,
        topic: impl AsRef<[u8]>,
        skip: usize,
        count: usize,
    ) -> Result<Vec<JobId>> {
        let topic = topic.as_ref();
        check_topic_in(self.layout(), topic)?;
        self.window(self.keys_for(topic).ready(topic), skip, count)
            .await
    }

    /// `count` ids of the list `key` at most, from its end (where the LPUSHed lists have their
    /// oldest) inwards, after skipping `skip`.
    async fn window(&self, key: Vec<u8>, skip: usize, count: usize) -> Result<Vec<JobId>> {
        if count == 0 {
            return Ok(Vec::new());
        }
        let index = |n: usize| -isize::try_from(n).unwrap_or(isize::MAX);
        let (first, last) = (index(skip.saturating_add(count)), index(skip) - 1);
        let mut ids: Vec<JobId> = self
            .connection()
            .await?
            .lrange(&key, first, last)
            .await
            .map_err(|error| Error::about_key(error, &key))?;
        ids.reverse();
        Ok(ids)
    }

    /// A window of `topic`'s reserved jobs, with the deadline of each, soonest first: `count` at
    /// most after skipping `skip`. With one set of reservations for every topic, only its first
    /// `scanned` (soonest deadlines) are looked through for the topic's; in the cluster layout
    /// the topic's own set is read in a window.
    pub async fn reserved_window(
        &self,
        topic: impl AsRef<[u8]>,
        skip: usize,
        count: usize,
        scanned: usize,
    ) -> Result<Vec<(JobId, Option<SystemTime>)>> {
        let topic = topic.as_ref();
        check_topic_in(self.layout(), topic)?;
        let keys = self.keys_for(topic);
        let mut redis = self.connection().await?;
        let deadline = |score: f64| from_unix(from_deadline_score(score));
        if keys.every_topic().is_none() {
            // The topic's own reservations.
            let last = isize::try_from(skip.saturating_add(count)).unwrap_or(isize::MAX) - 1;
            let first = isize::try_from(skip).unwrap_or(isize::MAX);
            let held: Vec<(JobId, f64)> = redis
                .zrange_withscores(keys.reserved(), first, last)
                .await
                .map_err(|error| Error::about_key(error, keys.reserved()))?;
            return Ok(held.into_iter().map(|(id, s)| (id, deadline(s))).collect());
        }
        let held = self
            .scan_reservations(scanned)
            .await
            .map_err(|error| Error::about_key(error, keys.reserved()))?;
        Ok(held
            .into_iter()
            .filter(|(_, _, of)| matches!(of, Ok(Some(of)) if of.as_bytes() == topic))
            .skip(skip)
            .take(count)
            .map(|(id, score, _)| (id, deadline(score)))
            .collect())
    }

    /// For each of `ids` (jobs of `topic`, a window a page shows): when it fell due (our pushes
    /// record it), its attempts, when it died, and the consumer holding it. One HMGET a job in one pipeline; a job whose
    /// data is gone or of the wrong type has none of them.
    pub async fn job_times(&self, topic: impl AsRef<[u8]>, ids: &[JobId]) -> Result<Vec<JobTimes>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys = self.keys_for(topic);
        let mut pipe = redis::pipe();
        for id in ids {
            pipe.cmd("HMGET").arg(keys.bucket(id)).arg(&[
                field::DUE,
                field::ATTEMPTS,
                field::DIED_AT,
            ]);
            pipe.hget(keys.holders(), id);
        }
        type Fields = (Option<String>, Option<String>, Option<String>);
        let found: Vec<RedisResult<Value>> = pipe
            .ignore_errors()
            .query_async(&mut self.connection().await?)
            .await?;
        let time = |value: Option<String>| value?.parse().ok().and_then(from_unix);
        Ok(found
            .chunks(2)
            .map(|pair| {
                // A bucket of the wrong type (an error) or gone has none.
                let fields: Option<Fields> = match &pair[0] {
                    Ok(value) => redis::from_redis_value(value.clone()).ok(),
                    Err(_) => None,
                };
                let (due, attempts, died) = fields.unwrap_or_default();
                // A job reserved is at its holder's attempt (the bucket counts those ended).
                let holder = match &pair[1] {
                    Ok(Value::BulkString(holder)) => Some(holder.as_slice()),
                    _ => None,
                };
                let held_as = holder.and_then(attempt_of_holder);
                JobTimes {
                    due: time(due),
                    attempts: held_as
                        .or_else(|| attempts.and_then(|n| n.parse().ok()))
                        .unwrap_or(0),
                    died: time(died),
                    holder: holder.and_then(consumer_of_holder).map(str::to_string),
                }
            })
            .collect())
    }

    /// Moves dead job `id` of `topic` back to the pool, due now, its attempts counted afresh;
    /// [`Error::NotDead`] when it is not on the topic's dead list. Atomic: the job is never both
    /// dead and waiting, nor neither. `false` when its entry was stale (the job pushed again
    /// since, or its data expired): the entry is dropped and nothing else changes.
    pub async fn requeue_dead_job(
        &self,
        topic: impl AsRef<[u8]>,
        id: impl AsRef<[u8]>,
    ) -> Result<bool> {
        self.dead_job(topic.as_ref(), id.as_ref(), DeadAction::Requeue)
            .await
    }

    /// Deletes dead job `id` of `topic` (its dead-list entry and its data); [`Error::NotDead`]
    /// when it is not on the topic's dead list. `false` when its entry was stale (see
    /// [`requeue_dead_job`](Client::requeue_dead_job)): only the entry is dropped.
    pub async fn delete_dead_job(
        &self,
        topic: impl AsRef<[u8]>,
        id: impl AsRef<[u8]>,
    ) -> Result<bool> {
        self.dead_job(topic.as_ref(), id.as_ref(), DeadAction::Delete)
            .await
    }

    async fn dead_job(&self, topic: &[u8], id: &[u8], action: DeadAction) -> Result<bool> {
        check_topic_in(self.layout(), topic)?;
        check_id(id)?;
        let keys = self.keys_for(topic);
        let done = self
            .inner
            .scripts
            .dead_job
            .run(&mut self.connection().await?, &keys, topic, id, action)
            .await
            .map_err(|error| Error::about_key(error, keys.dead(topic)))?;
        match done {
            0 => Err(Error::NotDead {
                id: id.into(),
                topic: topic.into(),
            }),
            done => Ok(done == 1),
        }
    }

    /// Moves every dead job of `topic` back to the pool, due now, its attempts counted afresh.
    /// Returns how many went back (those whose data had expired are dropped).
    pub async fn requeue_dead(&self, topic: impl AsRef<[u8]>) -> Result<usize> {
        let topic = topic.as_ref();
        check_topic_in(self.layout(), topic)?;
        let mut total = 0;
        loop {
            let (requeued, dropped) = self
                .inner
                .scripts
                .requeue_dead
                .run(
                    &mut self.connection().await?,
                    &self.keys_for(topic),
                    topic,
                    REQUEUE_BATCH,
                )
                .await
                .map_err(|error| Error::about_key(error, self.keys_for(topic).dead(topic)))?;
            total += requeued;
            if requeued + dropped < REQUEUE_BATCH {
                return Ok(total);
            }
        }
    }
}

/// The attempt in a holders entry (`<attempt>:<token>`), as the scripts read it.
fn attempt_of_holder(holder: &[u8]) -> Option<u32> {
    let digits = &holder[..holder.iter().position(|&byte| byte == b':')?];
    std::str::from_utf8(digits).ok()?.parse().ok()
}
