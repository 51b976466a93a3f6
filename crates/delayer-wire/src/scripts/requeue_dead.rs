//! The requeue script (`requeue_dead.lua`): dead jobs back to the pool for another round.

use redis::RedisResult;
use redis::aio::ConnectionLike;

use crate::keys::Keys;

script_type!(
    /// The requeue script: dead jobs back to the pool.
    RequeueDeadScript,
    "requeue_dead.lua"
);

impl RequeueDeadScript {
    /// Moves up to `limit` of `topic`'s dead jobs (oldest first) back to the pool, due at `now`;
    /// returns (requeued, dropped because their bucket had expired).
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        topic: &[u8],
        limit: usize,
    ) -> RedisResult<(usize, usize)> {
        self.0
            .key(keys.dead(topic))
            .key(keys.pool())
            .key(keys.reserved())
            .arg(super::host_clock())
            .arg(keys.bucket_prefix())
            .arg(limit)
            .invoke_async(connection)
            .await
    }
}
