//! The resume script (`resume.lua`): a paused topic's parked jobs due again, in due order.

use redis::RedisResult;
use redis::aio::ConnectionLike;

use crate::keys::Keys;

script_type!(
    /// The resume script: ends a pause and makes its parked jobs due again.
    ResumeScript,
    "resume.lua"
);

impl ResumeScript {
    /// Deletes `topic`'s pause and makes up to `limit` (at most 1,000) of its parked jobs due
    /// again, earliest first, each at its own due time; returns (made due, still parked).
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        topic: &[u8],
        limit: usize,
    ) -> RedisResult<(usize, usize)> {
        self.0
            .key(keys.pool())
            .key(keys.paused(topic))
            .key(keys.parked(topic))
            .key(keys.parked_set(topic))
            .arg(keys.bucket_prefix())
            .arg(limit)
            .invoke_async(connection)
            .await
    }
}
