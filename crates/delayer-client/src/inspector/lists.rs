//! A topic's lists a page at a time, as a topic's page shows them (its ready jobs, its reserved
//! jobs with their deadlines, and what those jobs record), and one job as its page shows it.

use std::time::SystemTime;

use redis::{AsyncCommands, RedisResult, Value};

use super::handle::Inspector;
use crate::client::check_topic_in;
use crate::error::{Error, Result};
use crate::job::JobInfo;
use delayer_wire::consumer::{attempt_of_holder, consumer_of_holder};
use delayer_wire::keys::field;
use delayer_wire::name::{JobId, Topic};
use delayer_wire::time::{from_deadline_score, from_unix};

/// What [`Inspector::job_times`] reads of a job: its due time, attempts, death time and holder.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobTimes {
    /// When it fell (or falls) due; known for jobs our pushes wrote.
    pub due: Option<SystemTime>,
    /// How many times it was reserved.
    pub attempts: u32,
    /// When it went to its topic's dead list.
    pub died: Option<SystemTime>,
    /// While it is reserved, the consumer holding it, when its reserve token names one (see
    /// [`Client::as_consumer`](crate::Client::as_consumer)); `None` for a reservation made without one.
    pub holder: Option<String>,
}

impl Inspector {
    /// Where a job is, and what it holds, as [`Client::get`](crate::Client::get) reads it, the
    /// body only when it is at most `limit` bytes long (0: never); [`JobInfo::body_size`] tells
    /// its length all the same.
    pub async fn get_up_to(&self, id: impl AsRef<[u8]>, limit: usize) -> Result<JobInfo> {
        self.client.get_up_to(id, limit).await
    }

    /// A page of `topic`'s ready list: `count` ids at most, next in line first, after skipping
    /// the `skip` next in line. One LRANGE of the page, whatever the list's length.
    pub async fn ready_page(
        &self,
        topic: impl AsRef<[u8]>,
        skip: usize,
        count: usize,
    ) -> Result<Vec<JobId>> {
        let topic = topic.as_ref();
        check_topic_in(self.client.layout(), topic)?;
        self.page_of(self.client.keys_for(topic).ready(topic), skip, count)
            .await
    }

    /// `count` ids of the list `key` at most, from its end (where the LPUSHed lists have their
    /// oldest) inwards, after skipping `skip`.
    pub(super) async fn page_of(
        &self,
        key: Vec<u8>,
        skip: usize,
        count: usize,
    ) -> Result<Vec<JobId>> {
        if count == 0 {
            return Ok(Vec::new());
        }
        let index = |n: usize| -isize::try_from(n).unwrap_or(isize::MAX);
        let (first, last) = (index(skip.saturating_add(count)), index(skip) - 1);
        let mut ids: Vec<JobId> = self
            .client
            .connection()
            .await?
            .lrange(&key, first, last)
            .await
            .map_err(|error| Error::about_key(error, &key))?;
        ids.reverse();
        Ok(ids)
    }

    /// A page of `topic`'s reserved jobs, with the deadline of each, soonest first: `count` at
    /// most after skipping `skip`. With one set of reservations for every topic, only its first
    /// `scanned` (soonest deadlines) are looked through for the topic's; in the cluster layout
    /// the topic's own set is read a page at a time.
    pub async fn reserved_page(
        &self,
        topic: impl AsRef<[u8]>,
        skip: usize,
        count: usize,
        scanned: usize,
    ) -> Result<Vec<(JobId, Option<SystemTime>)>> {
        let topic = topic.as_ref();
        check_topic_in(self.client.layout(), topic)?;
        let keys = self.client.keys_for(topic);
        let mut redis = self.client.connection().await?;
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

    /// For each of `ids` (jobs of `topic`, a page shows): when it fell due (our pushes
    /// record it), its attempts, when it died, and the consumer holding it. One HMGET a job in one pipeline; a job whose
    /// data is gone or of the wrong type has none of them.
    pub async fn job_times(&self, topic: impl AsRef<[u8]>, ids: &[JobId]) -> Result<Vec<JobTimes>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys = self.client.keys_for(topic);
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
            .query_async(&mut self.client.connection().await?)
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
}
