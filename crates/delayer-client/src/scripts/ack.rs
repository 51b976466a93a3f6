//! The ack script (`ack.lua`): finishes a job so that it is never delivered again.

use redis::aio::ConnectionLike;
use redis::{RedisResult, Script};

use super::malformed;
use crate::keys::Keys;

pub struct AckScript(Script);

impl Default for AckScript {
    fn default() -> AckScript {
        AckScript(script!("ack.lua"))
    }
}

/// What an ack did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acked {
    /// The reservation was current: the job is finished, never delivered again.
    Done,
    /// Its time to run had passed, but nobody had reserved the job since: finished all the same.
    Late,
    /// Stale: the job was reserved again since (by another consumer, perhaps running it now), or
    /// pushed again. Nothing changed.
    Stale,
}

impl AckScript {
    /// Acks reservation `attempt` of job `id`; `None` when there is no such job.
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        id: &str,
        attempt: u32,
    ) -> RedisResult<Option<Acked>> {
        let code: i64 = self
            .0
            .key(keys.reserved())
            .key(keys.pool())
            .key(keys.bucket(id))
            .arg(id)
            .arg(attempt)
            .invoke_async(connection)
            .await?;
        match code {
            1 => Ok(Some(Acked::Done)),
            2 => Ok(Some(Acked::Late)),
            0 => Ok(Some(Acked::Stale)),
            -1 => Ok(None),
            _ => Err(malformed("ack")),
        }
    }
}
