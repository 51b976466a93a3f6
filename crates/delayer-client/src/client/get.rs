//! Looking a job up by id: where it is, and what it holds.

use std::collections::HashMap;
use std::time::Duration;

use redis::{RedisResult, Value};

use super::{Client, check_id};
use crate::error::{Error, Result};
use crate::job::{JobInfo, State};
use delayer_wire::consumer::attempt_of_holder;
use delayer_wire::keys::field;
use delayer_wire::scripts::body::Body;
use delayer_wire::scripts::compact_job::CompactJob;
use delayer_wire::time::{from_deadline_score, from_unix};

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
    pub(crate) async fn get_up_to(&self, id: impl AsRef<[u8]>, limit: usize) -> Result<JobInfo> {
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
}
