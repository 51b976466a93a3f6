//! The find_reserved script (`find_reserved.lua`): what a reserve call whose reply was lost
//! reserved.

use redis::RedisResult;
use redis::aio::ConnectionLike;

use super::malformed;
use super::reserve::read_jobs;
use crate::job::Job;
use crate::keys::Keys;
use crate::time::deadline_score;

script_type!(
    /// The find_reserved script: what a reserve call whose reply was lost reserved.
    FindReservedScript,
    "find_reserved.lua"
);

impl FindReservedScript {
    /// The jobs still reserved until `deadline` (unix seconds) by the call of `token`.
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        (deadline, token): (f64, &str),
    ) -> RedisResult<Vec<Job>> {
        let reply = self
            .0
            .key(keys.reserved())
            .arg(deadline_score(deadline))
            .arg(token)
            .arg(keys.bucket_prefix())
            .invoke_async(connection)
            .await?;
        read_jobs(reply).ok_or_else(|| malformed("find_reserved"))
    }
}
