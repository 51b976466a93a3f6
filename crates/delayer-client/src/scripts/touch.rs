//! The touch script (`touch.lua`): extends one reservation's deadline.

use redis::RedisResult;
use redis::aio::ConnectionLike;

use crate::keys::Keys;
use crate::time::deadline_score;

script_type!(
    /// The touch script: extends a reservation.
    TouchScript,
    "touch.lua"
);

impl TouchScript {
    /// Moves the deadline of reservation `attempt` of job `id` to `deadline` (unix seconds); false
    /// when that reservation is not current.
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        id: &str,
        attempt: u32,
        deadline: f64,
    ) -> RedisResult<bool> {
        self.0
            .key(keys.reserved())
            .key(keys.bucket(id))
            .arg(deadline_score(deadline))
            .arg(id)
            .arg(attempt)
            .invoke_async(connection)
            .await
    }
}
