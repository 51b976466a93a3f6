//! The reserve script (`reserve.lua`): takes a ready job and records its reservation in one step.

use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

use std::time::Duration;

use std::time::SystemTime;

use super::{host_clock, malformed, name, seconds};
use crate::keys::Keys;
use crate::name::{JobId, Topic};
use crate::time::from_unix;

script_type!(
    /// The reserve script: takes ready jobs and records their reservations.
    ReserveScript,
    "reserve.lua"
);

/// The shortest time to run a reservation gets (a shorter one is made this long): less would
/// deliver a job again before a consumer could touch it, every few hundred milliseconds. The
/// daemon counts on it: a reservation written now lapses no sooner.
pub const MIN_TTR: Duration = Duration::from_secs(1);

/// A job a reserve call took.
#[derive(Debug, Clone, PartialEq)]
pub struct ReservedJob {
    pub id: JobId,
    pub topic: Topic,
    pub body: Vec<u8>,
    /// Which attempt this reservation is (1 for the first).
    pub attempt: u32,
    /// When it fell due; `None` for a job pushed by a legacy client, which does not record it.
    pub due: Option<SystemTime>,
}

/// What a reserve call (or the look for what one reserved) took.
#[derive(Debug, Default, PartialEq)]
pub struct Reserved {
    /// The jobs, oldest first.
    pub jobs: Vec<ReservedJob>,
    /// The jobs whose body is longer than the call's limit, each with its body left out (empty),
    /// and the body's length: reserved all the same, for the caller to give back.
    pub too_large: Vec<(ReservedJob, usize)>,
}

impl ReserveScript {
    /// Reserves the oldest ready jobs of `topics`, at most `most` (at least 1), those of the first
    /// topic first, for `ttr` from now by Redis's clock, marked as reserved by `token`, reading
    /// bodies of at most `most_body` bytes (see [`Reserved::too_large`]; `None`: any); none when
    /// every list is empty.
    #[allow(clippy::too_many_arguments)]
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        (ttr, token): (Duration, &str),
        most: usize,
        most_body: Option<usize>,
        topics: &[impl AsRef<[u8]>],
    ) -> RedisResult<Reserved> {
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
            .arg(host_clock())
            .arg(most_body.map(|most| most.to_string()).unwrap_or_default());
        for topic in topics {
            call.arg(topic.as_ref());
        }
        loop {
            match call.invoke_async(connection).await? {
                Value::Nil => return Ok(Reserved::default()),
                // It dropped many ids whose bucket had expired, and stopped: there may be more.
                Value::Array(items) if items.is_empty() => continue,
                reply => return read_jobs(reply).ok_or_else(|| malformed("reserve")),
            }
        }
    }
}

/// A reply of jobs, as reserve.lua and find_reserved.lua give them, in one flat array: a topic,
/// how many of its jobs follow, and four items a job (id, body or its length, attempts, due);
/// again for the next topic.
pub(super) fn read_jobs(reply: Value) -> Option<Reserved> {
    let Value::Array(items) = reply else {
        return None;
    };
    let mut items = items.into_iter();
    let mut reserved = Reserved::default();
    while let Some(topic) = items.next() {
        let topic: Vec<u8> = name(topic)?;
        let Value::Int(count) = items.next()? else {
            return None;
        };
        for _ in 0..count {
            let (id, body, attempts, due) =
                (items.next()?, items.next()?, items.next()?, items.next()?);
            let Value::Int(attempts) = attempts else {
                return None;
            };
            let mut job = ReservedJob {
                id: name(id)?,
                topic: topic.clone().into(),
                body: Vec::new(),
                attempt: u32::try_from(attempts).ok()?,
                due: seconds(due).and_then(from_unix),
            };
            match body {
                Value::BulkString(body) => {
                    job.body = body;
                    reserved.jobs.push(job);
                }
                Value::Int(size) => reserved.too_large.push((job, usize::try_from(size).ok()?)),
                _ => return None,
            }
        }
    }
    Some(reserved)
}
