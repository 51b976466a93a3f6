//! The ack script (`ack.lua`): finishes a job so that it is never delivered again.

use redis::RedisResult;
use redis::aio::ConnectionLike;

use super::malformed;
use crate::keys::Keys;

script_type!(
    /// The ack script: finishes reservations.
    AckScript,
    "ack.lua"
);

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
    /// Acks each reservation (job id, attempt; each job named once), all in one call; `None` for
    /// a reservation whose job is gone.
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        reservations: &[(&[u8], u32)],
    ) -> RedisResult<Vec<Option<Acked>>> {
        let mut call = self.0.key(keys.reserved());
        call.key(keys.pool()).key(keys.holders());
        for (id, _) in reservations {
            call.key(keys.bucket(id)).arg(*id);
        }
        for (_, attempt) in reservations {
            call.arg(*attempt);
        }
        let codes: Vec<i64> = call.invoke_async(connection).await?;
        if codes.len() != reservations.len() {
            return Err(malformed("ack"));
        }
        codes
            .into_iter()
            .map(|code| match code {
                1 => Ok(Some(Acked::Done)),
                2 => Ok(Some(Acked::Late)),
                0 => Ok(Some(Acked::Stale)),
                -1 => Ok(None),
                _ => Err(malformed("ack")),
            })
            .collect()
    }
}
