//! The release script (`release.lua`): ends reservations, sending each job back to the pool or,
//! after its last attempt, to its topic's dead list. A consumer's nack and the daemon's
//! re-delivery of lapsed reservations are the same script, and so is a stopping worker's give-back.

use redis::aio::ConnectionLike;
use redis::{RedisResult, ScriptInvocation, Value};

use super::{host_clock, leading, malformed, names, pairs, seconds};
use crate::keys::Keys;
use crate::name::{JobId, Topic};
use crate::time::from_deadline_score;

script_type!(
    /// The release script: ends reservations (lapsed, nacked, given back).
    ReleaseScript,
    "release.lua"
);

/// What one call did.
#[derive(Debug, Default, PartialEq)]
pub struct Released {
    /// How many reservations it ended; equal to the limit when more may have lapsed.
    pub ended: usize,
    /// The earliest deadline still ahead, in unix seconds.
    pub next_deadline: Option<f64>,
    /// (topic, id) of the jobs put back in the pool.
    pub retried: Vec<(Topic, JobId)>,
    /// (topic, id) of the jobs moved to their topic's dead list.
    pub dead: Vec<(Topic, JobId)>,
    /// Ids whose bucket was gone: only their reservation ended.
    pub dropped: Vec<JobId>,
    /// (topic, id) of jobs that should be dead, but whose dead list key is not a list (or not
    /// writable): put back in the pool instead.
    pub blocked: Vec<(Topic, JobId)>,
    /// The receipt of [`one`](ReleaseScript::one) had no token, and the job's attempts were
    /// counted afresh since its first reservation: nothing changed.
    pub token_needed: bool,
}

impl ReleaseScript {
    /// Ends up to `limit` reservations whose deadline has passed (by Redis's clock); their jobs
    /// are due again at once.
    pub async fn lapsed(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        max_attempts: u32,
        limit: usize,
    ) -> RedisResult<Released> {
        let call = self.call(
            keys,
            [0.0, 0.0],
            max_attempts,
            limit,
            ("lapsed", b"", (0, "")),
            "",
        );
        read(call.invoke_async(connection).await?).ok_or_else(|| malformed("release"))
    }

    /// Ends the reservation of job `id` that `(attempt, token)` names ("" for no token), if it
    /// is current, the job due again `retry_in` seconds from now: as a failed attempt (`counted`;
    /// its data then kept at least `lifetime` seconds past that), or as one never really tried
    /// (not counted, and never dead).
    #[allow(clippy::too_many_arguments)]
    pub async fn one(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        id: &[u8],
        receipt: (u32, &str),
        counted: bool,
        retry_in: f64,
        lifetime: f64,
        max_attempts: u32,
    ) -> RedisResult<Released> {
        let mode = if counted { "nack" } else { "give_back" };
        let times = [retry_in, lifetime];
        let call = self.call(keys, times, max_attempts, 1, (mode, id, receipt), "");
        read(call.invoke_async(connection).await?).ok_or_else(|| malformed("release"))
    }

    /// Ends the reservation of job `id` that `(attempt, token)` names, if it is current, sending
    /// the job to its topic's dead list at once, whatever its attempts, with `why` (a job that can
    /// never be delivered, as one Kafka refuses): a nack with max attempts 1.
    pub async fn bury(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        id: &[u8],
        receipt: (u32, &str),
        why: &str,
    ) -> RedisResult<Released> {
        let call = self.call(keys, [0.0, 0.0], 1, 1, ("nack", id, receipt), why);
        read(call.invoke_async(connection).await?).ok_or_else(|| malformed("release"))
    }

    /// `[retry_in, lifetime]` in seconds; `(mode, id, (attempt, token))` are the script's
    /// ARGV[8..10] and ARGV[14], `why` its ARGV[15].
    fn call(
        &self,
        keys: &Keys,
        [retry_in, lifetime]: [f64; 2],
        max_attempts: u32,
        limit: usize,
        (mode, id, (attempt, token)): (&str, &[u8], (u32, &str)),
        why: &str,
    ) -> ScriptInvocation<'_> {
        let mut call = self.0.key(keys.reserved());
        call.key(keys.pool())
            .key(keys.holders())
            .arg(host_clock())
            .arg(format!("{retry_in:.6}"))
            .arg(max_attempts)
            .arg(keys.bucket_prefix())
            .arg(&keys.dead_affixes().prefix)
            .arg(limit)
            .arg(keys.registry_for_scripts())
            .arg(mode)
            .arg(id)
            .arg(attempt)
            .arg(&keys.dead_affixes().suffix)
            .arg(keys.topic_for_scripts())
            .arg(lifetime)
            .arg(token)
            .arg(why);
        call
    }
}

fn read(reply: Value) -> Option<Released> {
    let (
        [
            Value::Int(ended),
            next_deadline,
            retried,
            dead,
            dropped,
            blocked,
            Value::Int(token_needed),
        ],
        _,
    ) = leading(reply)?
    else {
        return None;
    };
    Some(Released {
        ended: usize::try_from(ended).ok()?,
        next_deadline: seconds(next_deadline).map(from_deadline_score),
        retried: pairs(retried)?,
        dead: pairs(dead)?,
        dropped: names(dropped)?,
        blocked: pairs(blocked)?,
        token_needed: token_needed == 1,
    })
}
