//! The reserve script (`reserve.lua`): takes a ready job and records its reservation in one step.

use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

use std::time::Duration;

use super::{host_clock, leading, malformed, name, seconds};
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
                reply => return read_jobs(reply).ok_or_else(|| malformed("reserve")),
            }
        }
    }
}

/// A reply of jobs, as reserve.lua and find_reserved.lua give them.
pub(super) fn read_jobs(reply: Value) -> Option<Vec<Job>> {
    match reply {
        Value::Array(items) => items.into_iter().map(read).collect(),
        _ => None,
    }
}

fn read(reply: Value) -> Option<Job> {
    let (
        [
            id,
            topic,
            Value::BulkString(body),
            Value::Int(attempts),
            due,
        ],
        _,
    ) = leading(reply)?
    else {
        return None;
    };
    Some(Job {
        id: name(id)?,
        topic: name(topic)?,
        body,
        attempts: u32::try_from(attempts).ok()?,
        due: seconds(due).and_then(from_unix),
    })
}
