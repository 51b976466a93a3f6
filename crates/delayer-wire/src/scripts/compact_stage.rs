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

/// The most entries one call stages: about as long a wait for Redis's other clients as a move of
/// 1,000 jobs (a job staged costs Redis about three times a job moved). Whole chunks of 1,000 at a
/// time held Redis 15 ms and more, and `get` waited as long.
pub const STAGE_BATCH: usize = 300;

/// What one call staged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Staged {
    /// Jobs written in the legacy form.
    pub jobs: u64,
    /// Jobs dropped: their data had expired, or a legacy client pushed their id again since.
    pub dropped: u64,
    /// Whether chunks within the lead are left (call again at once).
    pub more: bool,
    /// The start of the earliest window of the chunks left (unix seconds), if any is.
    pub next_window: Option<u64>,
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
        let reply: Vec<i64> = self
            .0
            .key(keys.pool())
            .arg(compact.prefix())
            .arg(keys.bucket_prefix())
            .arg(reach)
            .arg(STAGE_BATCH)
            .arg(host_clock())
            .invoke_async(connection)
            .await?;
        let (jobs, dropped, more, next_window) = match reply[..] {
            [jobs, dropped, more] => (jobs, dropped, more, None),
            [jobs, dropped, more, window] if window >= 0 => (jobs, dropped, more, Some(window)),
            _ => return Err(malformed("compact_stage")),
        };
        if jobs < 0 || dropped < 0 || !(0..=1).contains(&more) {
            return Err(malformed("compact_stage"));
        }
        Ok(Staged {
            jobs: jobs as u64,
            dropped: dropped as u64,
            more: more == 1,
            next_window: next_window.map(|window| window as u64),
        })
    }
}
