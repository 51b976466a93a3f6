//! The stage script (`compact_stage.lua`): compact jobs written in the legacy form shortly before
//! they fall due (see [`crate::compact`]).

use redis::RedisResult;
use redis::aio::ConnectionLike;

use super::{host_clock, malformed};
use crate::compact::{CompactKeys, LEAD};
use crate::keys::Keys;

script_type!(
    /// The stage script: compact chunks due within the lead written in the legacy form.
    StageScript,
    "compact_stage.lua"
);

/// About how many jobs one call stages: whole chunks, about a millisecond of Redis's time each.
pub const STAGE_BATCH: usize = 2_000;

/// What one call staged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Staged {
    /// Jobs written in the legacy form.
    pub jobs: u64,
    /// Jobs dropped: their data had expired, or a legacy client pushed their id again since.
    pub dropped: u64,
    /// Whether chunks within the lead are left (call again at once).
    pub more: bool,
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
    /// Stages up to about [`STAGE_BATCH`] jobs of `compact`'s chunks into `keys`' pool.
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
        let (jobs, dropped, more): (u64, u64, u8) = self
            .0
            .key(keys.pool())
            .arg(compact.prefix())
            .arg(keys.bucket_prefix())
            .arg(reach)
            .arg(STAGE_BATCH)
            .arg(host_clock())
            .invoke_async(connection)
            .await?;
        if more > 1 {
            return Err(malformed("compact_stage"));
        }
        Ok(Staged {
            jobs,
            dropped,
            more: more == 1,
        })
    }
}
