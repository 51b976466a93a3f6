//! The stage script (`compact_stage.lua`): compact jobs written in the legacy form shortly before
//! they fall due (see [`crate::compact`]).

use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

use super::{host_clock, leading, malformed, name};
use crate::compact::{CompactKeys, LEAD};
use crate::keys::Keys;

script_type!(
    /// The stage script: compact chunks due within the lead written in the legacy form.
    StageScript,
    "compact_stage.lua"
);

/// The most entries one call stages: about as long a wait for Redis's other clients as a move of
/// 1,000 jobs (a job staged costs Redis about three times a job moved). Whole chunks of 1,000 at a
/// time held Redis 15 ms and more, and `get` waited as long.
pub const STAGE_BATCH: usize = 300;

/// What one call staged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Staged {
    /// Jobs written in the legacy form.
    pub jobs: u64,
    /// Jobs dropped because their data had expired (daemons were down longer than their
    /// lifetime).
    pub expired: u64,
    /// Jobs dropped because a legacy client pushed their id again since: the newer job stays.
    pub replaced: u64,
    /// Whether chunks within the lead are left (call again at once).
    pub more: bool,
    /// The start of the earliest window of the chunks left (unix seconds), if any is.
    pub next_window: Option<u64>,
    /// Chunk keys that hold another type (written over by another client), with that type:
    /// taken out of the chunks and left as they are.
    pub foreign: Vec<(String, String)>,
}

/// Which chunks a call stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Those whose window starts within [`LEAD`].
    Lead,
    /// Every chunk, whatever its window (going back to the legacy layout).
    All,
}

impl StageScript {
    /// Stages up to [`STAGE_BATCH`] jobs of `compact`'s chunks into `keys`' pool.
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        compact: &CompactKeys,
        reach: Reach,
    ) -> RedisResult<Staged> {
        let reach = match reach {
            Reach::Lead => LEAD.as_secs().to_string(),
            Reach::All => "all".to_string(),
        };
        let reply: Value = self
            .0
            .key(keys.pool())
            .arg(compact.prefix())
            .arg(keys.bucket_prefix())
            .arg(reach)
            .arg(STAGE_BATCH)
            .arg(host_clock())
            .invoke_async(connection)
            .await?;
        read(reply).ok_or_else(|| malformed("compact_stage"))
    }
}

fn read(reply: Value) -> Option<Staged> {
    let (
        [
            jobs,
            expired,
            replaced,
            Value::Int(more),
            window,
            Value::Array(foreign),
        ],
        _,
    ) = leading(reply)?
    else {
        return None;
    };
    let count = |value| match value {
        Value::Int(count) => u64::try_from(count).ok(),
        _ => None,
    };
    let next_window = match window {
        Value::Int(window) => Some(u64::try_from(window).ok()?),
        _ => None,
    };
    let foreign = foreign
        .into_iter()
        .map(|entry| {
            let ([key, kind], _) = leading(entry)?;
            let text = |value| {
                name::<Vec<u8>>(value).map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            };
            Some((text(key)?, text(kind)?))
        })
        .collect::<Option<_>>()?;
    Some(Staged {
        jobs: count(jobs)?,
        expired: count(expired)?,
        replaced: count(replaced)?,
        more: more == 1,
        next_window,
        foreign,
    })
}
