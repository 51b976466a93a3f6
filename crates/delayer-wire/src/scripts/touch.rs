//! The touch script (`touch.lua`): extends one reservation's deadline.

use redis::RedisResult;
use redis::aio::ConnectionLike;

use std::time::Duration;

use super::{Named, host_clock, malformed};
use crate::keys::Keys;

script_type!(
    /// The touch script: extends a reservation.
    TouchScript,
    "touch.lua"
);

impl TouchScript {
    /// Moves the deadline of the reservation of job `id` that `(attempt, token)` names ("" for
    /// no token) to `ttr` from now (by Redis's clock), if that reservation is current.
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        id: &[u8],
        (attempt, token): (u32, &str),
        ttr: Duration,
    ) -> RedisResult<Named> {
        let code: i64 = self
            .0
            .key(keys.reserved())
            .key(keys.bucket(id))
            .key(keys.holders())
            .arg(ttr.as_millis() as u64)
            .arg(id)
            .arg(attempt)
            .arg(host_clock())
            .arg(token)
            .invoke_async(connection)
            .await?;
        match code {
            1 => Ok(Named::Current),
            0 => Ok(Named::NotCurrent),
            -2 => Ok(Named::TokenNeeded),
            _ => Err(malformed("touch")),
        }
    }
}
