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
            .call(connection, keys, compact, "get", limit, &[id])
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
            .call(connection, keys, compact, "remove", 0, &[id])
            .await?;
        Ok(reply != Value::Nil)
    }

    /// Writes those of `ids` that wait compact in the legacy form now, each with its own due
    /// time; how many did. From then on they are legacy jobs of `keys`' pool.
    pub async fn stage(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        compact: &CompactKeys,
        ids: &[&[u8]],
    ) -> RedisResult<usize> {
        match self
            .call(connection, keys, compact, "stage", 0, ids)
            .await?
        {
            Value::Int(staged) => Ok(staged as usize),
            _ => Err(malformed("compact_job")),
        }
    }

    async fn call(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        compact: &CompactKeys,
        action: &str,
        limit: usize,
        ids: &[&[u8]],
    ) -> RedisResult<Value> {
        let mut call = self.0.key(keys.pool());
        call.arg(compact.prefix())
            .arg(keys.bucket_prefix())
            .arg(action)
            .arg(limit);
        for id in ids {
            call.arg(*id);
        }
        call.invoke_async(connection).await
    }
}
