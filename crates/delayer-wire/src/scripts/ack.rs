//! The ack script (`ack.lua`): finishes a job so that it is never delivered again.

use std::time::Duration;

use redis::RedisResult;
use redis::aio::ConnectionLike;

use super::malformed;
use crate::keys::Keys;

script_type!(
    /// The ack script: finishes reservations.
    AckScript,
    "ack.lua"
);

/// What an ack did to one reservation (ack.lua's codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The reservation was current: the job is finished, never delivered again.
    Done,
    /// It had ended, and nothing happened to the job since: finished all the same.
    Late,
    /// Stale: the job was reserved again since, pushed again or requeued. Nothing changed.
    Stale,
    /// There is no such job.
    Unknown,
    /// The receipt has no token, and the job's attempts were counted afresh since its first
    /// reservation: the attempt alone names more than one. Nothing changed.
    TokenNeeded,
}

impl AckScript {
    /// Acks each reservation (job id, attempt, token or "" for none; each job named once), all
    /// in one call. The finished jobs' data is deleted, or with `keep` kept that long, marked
    /// delivered.
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        reservations: &[(&[u8], u32, &str)],
        keep: Option<Duration>,
    ) -> RedisResult<Vec<Outcome>> {
        let mut call = self.0.key(keys.reserved());
        call.key(keys.pool()).key(keys.holders());
        for (id, _, _) in reservations {
            call.key(keys.bucket(id)).arg(*id);
        }
        for (_, attempt, _) in reservations {
            call.arg(*attempt);
        }
        for (_, _, token) in reservations {
            call.arg(*token);
        }
        if let Some(keep) = keep {
            call.arg(keep.as_millis() as u64).arg(super::host_clock());
        }
        let codes: Vec<i64> = call.invoke_async(connection).await?;
        if codes.len() != reservations.len() {
            return Err(malformed("ack"));
        }
        codes
            .into_iter()
            .map(|code| match code {
                1 => Ok(Outcome::Done),
                2 => Ok(Outcome::Late),
                0 => Ok(Outcome::Stale),
                -1 => Ok(Outcome::Unknown),
                -2 => Ok(Outcome::TokenNeeded),
                _ => Err(malformed("ack")),
            })
            .collect()
    }
}
