//! The promote script (`promote.lua`): waiting jobs due now ("run now").

use redis::RedisResult;
use redis::aio::ConnectionLike;

use super::{host_clock, malformed};
use crate::keys::Keys;

script_type!(
    /// The promote script: waiting jobs due now, by Redis's clock.
    PromoteScript,
    "promote.lua"
);

/// The most ids one call takes.
pub const MOST_IDS: usize = 1000;

/// What the promote script found of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Promotion {
    /// It was waiting: it is due now.
    Due,
    /// It was due already (the daemon had not moved it yet): unchanged.
    WasDue,
    /// It is not waiting (ready, reserved, dead; or of another topic than the one asked).
    NotWaiting,
    /// There is no such job.
    Unknown,
}

impl PromoteScript {
    /// Makes `ids` (at most [`MOST_IDS`]) due now where they wait in `keys`' pool, each only if
    /// it is of `topic` when one is given; what it found of each, in order.
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        topic: Option<&[u8]>,
        ids: &[impl AsRef<[u8]>],
    ) -> RedisResult<Vec<Promotion>> {
        let mut invocation = self.0.key(keys.pool());
        invocation
            .arg(host_clock())
            .arg(keys.bucket_prefix())
            .arg(topic.unwrap_or_default());
        for id in ids {
            invocation.arg(id.as_ref());
        }
        let codes: Vec<i64> = invocation.invoke_async(connection).await?;
        if codes.len() != ids.len() {
            return Err(malformed("promote"));
        }
        codes
            .into_iter()
            .map(|code| match code {
                1 => Ok(Promotion::Due),
                2 => Ok(Promotion::WasDue),
                0 => Ok(Promotion::NotWaiting),
                -1 => Ok(Promotion::Unknown),
                _ => Err(malformed("promote")),
            })
            .collect()
    }
}
