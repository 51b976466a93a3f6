//! The reserve script (`reserve.lua`): takes a ready job and records its reservation in one step.

use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

use std::time::Duration;

use super::{host_clock, malformed, name, seconds};
use crate::job::Job;
use crate::keys::Keys;
use crate::time::from_unix;

script_type!(
    /// The reserve script: takes ready jobs and records their reservations.
    ReserveScript,
    "reserve.lua"
);

impl ReserveScript {
    /// Reserves the oldest ready jobs of `topics`, at most `most` (at least 1), those of the first
    /// topic first, for `ttr` from now by Redis's clock, marked as reserved by `token`; none when
    /// every list is empty.
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        (ttr, token): (Duration, &str),
        most: usize,
        topics: &[impl AsRef<[u8]>],
    ) -> RedisResult<Vec<Job>> {
        let mut call = self.0.key(keys.reserved());
        call.key(keys.pool())
            .key(keys.holders())
            .arg(ttr.as_millis() as u64)
            .arg(keys.bucket_prefix())
            .arg(&keys.ready_affixes().prefix)
            .arg(&keys.ready_affixes().suffix)
            .arg(most.max(1))
            .arg(token)
            .arg(keys.topic_for_scripts())
            .arg(host_clock());
        for topic in topics {
            call.arg(topic.as_ref());
        }
        loop {
            match call.invoke_async(connection).await? {
                Value::Nil => return Ok(Vec::new()),
                // It dropped many ids whose bucket had expired, and stopped: there may be more.
                Value::Array(items) if items.is_empty() => continue,
                reply => return read_jobs(reply, token).ok_or_else(|| malformed("reserve")),
            }
        }
    }
}

/// A reply of jobs, as reserve.lua and find_reserved.lua give them, in one flat array: a topic,
/// how many of its jobs follow, and four items a job (id, body, attempts, due); again for the next
/// topic. Each reserved by the call of `token`.
pub(super) fn read_jobs(reply: Value, token: &str) -> Option<Vec<Job>> {
    let Value::Array(items) = reply else {
        return None;
    };
    let mut items = items.into_iter();
    let mut jobs = Vec::new();
    while let Some(topic) = items.next() {
        let topic: Vec<u8> = name(topic)?;
        let Value::Int(count) = items.next()? else {
            return None;
        };
        for _ in 0..count {
            let (id, body, attempts, due) =
                (items.next()?, items.next()?, items.next()?, items.next()?);
            let (Value::BulkString(body), Value::Int(attempts)) = (body, attempts) else {
                return None;
            };
            jobs.push(Job {
                id: name(id)?,
                topic: topic.clone().into(),
                body,
                attempts: u32::try_from(attempts).ok()?,
                due: seconds(due).and_then(from_unix),
                token: Some(token.to_string()),
            });
        }
    }
    Some(jobs)
}
