//! Who is consuming: the consumers that beat lately (see [`Client::beat`](crate::Client::beat)),
//! the most recently seen first, each marked gone once its last beat is older than its lifetime.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::RedisResult;

use super::handle::Inspector;
use crate::error::{Error, Result};
use delayer_wire::consumer::{Consumer, KEPT};
use delayer_wire::keys::{CONSUMERS, consumer};

/// The consumers seen lately, as [`Inspector::consumers`] reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumers {
    /// The most recently seen first.
    pub listed: Vec<Consumer>,
    /// How many were seen lately (within [`KEPT`]), listed or not.
    pub total: usize,
    /// Now by Redis's clock, which they were judged by.
    pub now: SystemTime,
}

impl Inspector {
    /// The consumers seen within [`KEPT`], the most recently seen first, at most `most`; each
    /// marked gone when its last beat is older than its lifetime (by Redis's clock). Three round
    /// trips (the time, the window of the set, the listed consumers' hashes), whatever the number
    /// of consumers.
    pub async fn consumers(&self, most: usize) -> Result<Consumers> {
        let now_ms = self.client.now().await? * 1000.0;
        let now = UNIX_EPOCH + Duration::from_millis(now_ms as u64);
        let since = now_ms - KEPT.as_millis() as f64;
        let mut redis = self.client.connection().await?;
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
}
