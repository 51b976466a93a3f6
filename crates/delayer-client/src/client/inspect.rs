//! Looking jobs up: one job by id, a topic's dead list, and dead jobs sent back for another round.

use std::collections::HashMap;
use std::time::Duration;

use redis::{AsyncCommands, RedisResult};

use super::{Client, check_id, check_topic_in};
use crate::error::{Error, Result};
use crate::job::{JobInfo, State};
use crate::keys::field;
use crate::name::JobId;
use crate::time::{from_deadline_score, from_unix};

/// Dead jobs requeued per script call.
const REQUEUE_BATCH: usize = 1000;

/// `get`'s three replies, each on its own: the pool's score, the reservation's, the bucket.
type Lookup = (
    RedisResult<Option<f64>>,
    RedisResult<Option<f64>>,
    RedisResult<HashMap<Vec<u8>, Vec<u8>>>,
);

impl Client {
    /// Where a job is, and what it holds.
    pub async fn get(&self, id: impl AsRef<[u8]>) -> Result<JobInfo> {
        let id = id.as_ref();
        check_id(id)?;
        let Some(keys) = self.keys_of(id, None).await? else {
            return Ok(JobInfo::unknown(id));
        };
        let bucket = keys.bucket(id);
        // Each reply on its own, so that a key of the wrong type is named.
        let (due, deadline, fields): Lookup = redis::pipe()
            .atomic()
            .ignore_errors()
            .zscore(keys.pool(), id)
            .zscore(keys.reserved(), id)
            .hgetall(&bucket)
            .query_async(&mut self.connection().await?)
            .await?;
        let due = due.map_err(|error| Error::about_key(error, keys.pool()))?;
        let deadline = deadline.map_err(|error| Error::about_key(error, keys.reserved()))?;
        let fields = fields.map_err(|error| Error::about_key(error, &bucket))?;
        let field = |name: &str| fields.get(name.as_bytes());
        let number = |name: &str| std::str::from_utf8(field(name)?).ok()?.parse::<f64>().ok();
        let state = if field(field::TOPIC).is_none() {
            State::Unknown
        } else if due.is_some() {
            State::Waiting
        } else if deadline.is_some() {
            State::Reserved
        } else if field(field::DIED_AT).is_some() {
            State::Dead
        } else {
            State::Ready
        };
        Ok(JobInfo {
            id: id.into(),
            state,
            topic: field(field::TOPIC).map(|topic| topic.clone().into()),
            body: field(field::BODY).cloned(),
            due: due.or_else(|| number(field::DUE)).and_then(from_unix),
            delay: number(field::DELAY).and_then(|delay| Duration::try_from_secs_f64(delay).ok()),
            // As the scripts count it: a whole number below 2^31 - 1, anything else none.
            attempts: number(field::ATTEMPTS)
                .filter(|attempts| {
                    (0.0..2_147_483_647.0).contains(attempts) && attempts.fract() == 0.0
                })
                .map_or(0, |attempts| attempts as u32),
            deadline: deadline.map(from_deadline_score).and_then(from_unix),
        })
    }

    /// The ids on `topic`'s dead list, oldest first, at most `limit`.
    pub async fn dead(&self, topic: impl AsRef<[u8]>, limit: usize) -> Result<Vec<JobId>> {
        let topic = topic.as_ref();
        check_topic_in(self.layout(), topic)?;
        let dead = self.keys_for(topic).dead(topic);
        if limit == 0 {
            return Ok(Vec::new());
        }
        // LPUSHed: the oldest are at the end.
        let last = isize::try_from(limit).unwrap_or(isize::MAX);
        let mut ids: Vec<JobId> = self
            .connection()
            .await?
            .lrange(&dead, -last, -1)
            .await
            .map_err(|error| Error::about_key(error, &dead))?;
        ids.reverse();
        Ok(ids)
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
