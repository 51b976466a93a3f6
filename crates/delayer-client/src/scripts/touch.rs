//! The touch script (`touch.lua`): extends one reservation's deadline.

use redis::RedisResult;
use redis::aio::ConnectionLike;

use std::time::Duration;

use super::host_clock;
use crate::keys::Keys;

script_type!(
    /// The touch script: extends a reservation.
    TouchScript,
    "touch.lua"
);

impl TouchScript {
    /// Moves the deadline of reservation `attempt` of job `id` to `ttr` from now (by Redis's
    /// clock); false when that reservation is not current.
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        id: &[u8],
        attempt: u32,
        ttr: Duration,
    ) -> RedisResult<bool> {
        self.0
            .key(keys.reserved())
            .key(keys.bucket(id))
            .key(keys.holders())
            .arg(ttr.as_millis() as u64)
            .arg(id)
            .arg(attempt)
            .arg(host_clock())
            .invoke_async(connection)
            .await
    }
}
