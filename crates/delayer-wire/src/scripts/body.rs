//! The body script (`body.lua`): a job's body, read only when it is no longer than a limit.

use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

use super::malformed;

script_type!(
    /// The body script: reads a body up to a length.
    BodyScript,
    "body.lua"
);

/// A job's body as [`BodyScript`] read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// The body, no longer than the limit.
    Read(Vec<u8>),
    /// Longer than the limit: its length in bytes, and nothing read.
    TooLong(usize),
    /// The job has none.
    Missing,
}

impl BodyScript {
    /// The body of the job whose bucket is `bucket`, if it is at most `limit` bytes long.
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        bucket: &[u8],
        limit: usize,
    ) -> RedisResult<Body> {
        let reply: Value = self
            .0
            .key(bucket)
            .arg(limit)
            .invoke_async(connection)
            .await?;
        match reply {
            Value::BulkString(body) => Ok(Body::Read(body)),
            Value::Int(size) => Ok(Body::TooLong(usize::try_from(size).unwrap_or(usize::MAX))),
            Value::Nil => Ok(Body::Missing),
            _ => Err(malformed("body")),
        }
    }
}
