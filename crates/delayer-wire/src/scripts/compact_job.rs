//! The compact job script (`compact_job.lua`): one job of the compact layout by id (see
//! [`crate::compact`]), read, removed or staged now.

use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

use super::{malformed, name};
use crate::compact::CompactKeys;
use crate::keys::Keys;
use crate::scripts::body::Body;

script_type!(
    /// The compact job script.
    CompactJobScript,
    "compact_job.lua"
);

/// What a compact job holds, as [`CompactJobScript::get`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactJob {
    pub topic: Vec<u8>,
    pub body: Body,
    /// Its due time and delay as its push wrote them (the bucket's `due` and `delay`).
    pub due: Vec<u8>,
    pub delay: Vec<u8>,
}

impl CompactJobScript {
    /// Job `id` if it waits compact, its body read only when at most `limit` bytes long.
    pub async fn get(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        compact: &CompactKeys,
        id: &[u8],
        limit: usize,
    ) -> RedisResult<Option<CompactJob>> {
        let reply = self
            .call(connection, keys, compact, id, "get", limit)
            .await?;
        let Value::Array(fields) = reply else {
            return match reply {
                Value::Nil => Ok(None),
                _ => Err(malformed("compact_job")),
            };
        };
        let [topic, body, due, delay]: [Value; 4] =
            fields.try_into().map_err(|_| malformed("compact_job"))?;
        let body = match body {
            Value::Int(size) => Body::TooLong(size as usize),
            body => Body::Read(name(body).ok_or_else(|| malformed("compact_job"))?),
        };
        let text = |value| name::<Vec<u8>>(value).ok_or_else(|| malformed("compact_job"));
        Ok(Some(CompactJob {
            topic: text(topic)?,
            body,
            due: text(due)?,
            delay: text(delay)?,
        }))
    }

    /// Removes job `id` if it waits compact; whether it did.
    pub async fn remove(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        compact: &CompactKeys,
        id: &[u8],
    ) -> RedisResult<bool> {
        let reply = self
            .call(connection, keys, compact, id, "remove", 0)
            .await?;
        Ok(reply != Value::Nil)
    }

    /// Writes job `id` in the legacy form now, with its own due time, if it waits compact;
    /// whether it did. From then on it is a legacy job of `keys`' pool.
    pub async fn stage(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        compact: &CompactKeys,
        id: &[u8],
    ) -> RedisResult<bool> {
        let reply = self.call(connection, keys, compact, id, "stage", 0).await?;
        Ok(reply != Value::Nil)
    }

    async fn call(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        compact: &CompactKeys,
        id: &[u8],
        action: &str,
        limit: usize,
    ) -> RedisResult<Value> {
        self.0
            .key(keys.pool())
            .arg(compact.prefix())
            .arg(keys.bucket_prefix())
            .arg(id)
            .arg(action)
            .arg(limit)
            .invoke_async(connection)
            .await
    }
}
