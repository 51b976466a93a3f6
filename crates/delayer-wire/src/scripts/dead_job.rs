//! The dead-job script (`dead_job.lua`): one dead job requeued or deleted, by id.

use redis::RedisResult;
use redis::aio::ConnectionLike;

use crate::keys::Keys;

script_type!(
    /// The dead-job script: one dead job back to the pool, or deleted.
    DeadJobScript,
    "dead_job.lua"
);

/// What to do with a dead job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadAction {
    /// Back to the pool, due now, its attempts counted afresh.
    Requeue,
    /// Its data deleted.
    Delete,
}

impl DeadJobScript {
    /// Does `action` to job `id` of `topic`'s dead list; the script's reply (0: not on the dead
    /// list, 1: done, 2: a stale entry, dropped).
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        topic: &[u8],
        id: &[u8],
        action: DeadAction,
    ) -> RedisResult<u8> {
        self.0
            .key(keys.dead(topic))
            .key(keys.pool())
            .key(keys.reserved())
            .arg(super::host_clock())
            .arg(keys.bucket_prefix())
            .arg(id)
            .arg(match action {
                DeadAction::Requeue => "requeue",
                DeadAction::Delete => "delete",
            })
            .invoke_async(connection)
            .await
    }
}
