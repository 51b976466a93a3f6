//! Who is consuming: each consumer beats every few seconds (a Worker on its own, any other
//! through [`Client::beat`]) and its reserve tokens start with its id, so that the console lists
//! the live consumers and names the one holding each reservation.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::RedisResult;

use super::Client;
use crate::error::{Error, Result};
use crate::job::unique_id;
use delayer_wire::consumer::{Consumer, Heartbeat, KEPT, token};
use delayer_wire::keys::{CONSUMERS, consumer};

/// The consumers seen lately, as [`Client::consumers`] reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumers {
    /// The most recently seen first.
    pub listed: Vec<Consumer>,
    /// How many were seen lately (within [`KEPT`]), listed or not.
    pub total: usize,
    /// Now by Redis's clock, which they were judged by.
    pub now: SystemTime,
}

impl Client {
    /// A handle on the same connection whose reserves are made for consumer `id`: each reserve
    /// token starts with it (`<id>.<32 hex digits>`), so that the console names it as the holder
    /// of those reservations. Beat for it with [`beat`](Client::beat); a Worker does both itself.
    pub fn as_consumer(&self, id: impl Into<String>) -> Client {
        Client {
            inner: self.inner.clone(),
            consumer: Some(id.into().into()),
        }
    }

    /// The consumer this handle reserves for, if one (see [`as_consumer`](Client::as_consumer)).
    pub fn consumer(&self) -> Option<&str> {
        self.consumer.as_deref()
    }

    /// Writes consumer `beat.id`'s heartbeat, by Redis's clock: one script call. Beat every
    /// [`BEAT`](crate::consumer::BEAT) or so, well within `beat.lifetime`, after which the
    /// console marks the consumer gone.
    pub async fn beat(&self, beat: &Heartbeat) -> Result<()> {
        let heartbeat = &self.inner.scripts.heartbeat;
        let mut connection = self.connection().await?;
        let written = heartbeat.beat(&mut connection, beat).await;
        written.map_err(|error| Error::about_key(error, CONSUMERS))
    }

    /// Removes consumer `id` from the list at once: its clean stop.
    pub async fn forget_consumer(&self, id: &str) -> Result<()> {
        let heartbeat = &self.inner.scripts.heartbeat;
        let mut connection = self.connection().await?;
        let removed = heartbeat.forget(&mut connection, id).await;
        removed.map_err(|error| Error::about_key(error, CONSUMERS))
    }

    /// The consumers seen within [`KEPT`], the most recently seen first, at most `most`; each
    /// marked gone when its last beat is older than its lifetime (by Redis's clock). Three round
    /// trips (the time, the window of the set, the listed consumers' hashes), whatever the number
    /// of consumers.
    pub async fn consumers(&self, most: usize) -> Result<Consumers> {
        let now_ms = self.now().await? * 1000.0;
        let now = UNIX_EPOCH + Duration::from_millis(now_ms as u64);
        let since = now_ms - KEPT.as_millis() as f64;
        let mut redis = self.connection().await?;
        let about = |error| Error::about_key(error, CONSUMERS);
        let (seen, total): (Vec<(Vec<u8>, f64)>, usize) = redis::pipe()
            .zrevrangebyscore_limit_withscores(CONSUMERS, "+inf", since, 0, most as isize)
            .zcount(CONSUMERS, since, "+inf")
            .query_async(&mut redis)
            .await
            .map_err(about)?;
        if seen.is_empty() {
            let listed = Vec::new();
            return Ok(Consumers { listed, total, now });
        }
        let ids: Vec<String> = seen
            .iter()
            .map(|(id, _)| String::from_utf8_lossy(id).into_owned())
            .collect();
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.hgetall(consumer(id));
        }
        // A hash of the wrong type (no consumer wrote it) lists its consumer without details.
        let hashes: Vec<RedisResult<HashMap<String, Vec<u8>>>> =
            pipe.ignore_errors().query_async(&mut redis).await?;
        let listed = ids
            .into_iter()
            .zip(seen)
            .zip(hashes)
            .map(|((id, (_, last_ms)), fields)| {
                Consumer::read(id, last_ms, now_ms, &fields.unwrap_or_default())
            })
            .collect();
        Ok(Consumers { listed, total, now })
    }

    /// The token of a reserve call: starting with this handle's consumer, if it has one.
    pub(crate) fn reserve_token(&self) -> String {
        match self.consumer() {
            Some(consumer) => token(consumer, &unique_id()),
            None => unique_id(),
        }
    }
}
