//! The resume script (`resume.lua`): a paused topic's parked jobs due again.

use redis::RedisResult;
use redis::aio::ConnectionLike;

use super::move_due::STUCK_RECHECK;
use crate::keys::Keys;

script_type!(
    /// The resume script: ends a pause and makes its parked jobs due again.
    ResumeScript,
    "resume.lua"
);

impl ResumeScript {
    /// Deletes `topic`'s pause and makes up to `limit` of its parked jobs due again; returns
    /// (made due, still parked).
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
            .arg(keys.bucket_prefix())
            .arg(STUCK_RECHECK.as_secs())
            .arg(limit)
            .invoke_async(connection)
            .await
    }
}
