//! The find_reserved script (`find_reserved.lua`): what a reserve call whose reply was lost
//! reserved.

use std::time::Duration;

use redis::RedisResult;
use redis::aio::ConnectionLike;
use tokio::time::Instant;

use super::reserve::{Reserved, read_jobs};
use super::{host_clock, malformed};
use crate::keys::Keys;

script_type!(
    /// The find_reserved script: what a reserve call whose reply was lost reserved.
    FindReservedScript,
    "find_reserved.lua"
);

impl FindReservedScript {
    /// The jobs still reserved by the call of `token` for `ttr`, which was `sent` then, reading
    /// bodies of at most `most_body` bytes, as [`ReserveScript`](super::reserve::ReserveScript).
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        (ttr, token, sent): (Duration, &str, Instant),
        most_body: Option<usize>,
    ) -> RedisResult<Reserved> {
        let reply = self
            .0
            .key(keys.reserved())
            .key(keys.holders())
            .arg(ttr.as_millis() as u64)
            .arg(token)
            .arg(keys.bucket_prefix())
            .arg(sent.elapsed().as_millis() as u64)
            .arg(host_clock())
            .arg(most_body.map(|most| most.to_string()).unwrap_or_default())
            .invoke_async(connection)
            .await?;
        read_jobs(reply).ok_or_else(|| malformed("find_reserved"))
    }
}
