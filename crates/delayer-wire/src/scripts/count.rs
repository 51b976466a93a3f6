//! The count script (`count.lua`): adds counts to the history.

use redis::RedisResult;
use redis::aio::ConnectionLike;

use super::host_clock;
use crate::history::{KEPT, MAX_TOPICS};
use crate::keys::HISTORY;

script_type!(
    /// The count script: adds counts to one minute of the history.
    CountScript,
    "count.lua"
);

/// A count for [`CountScript::run`]: `n` more of `field` (see
/// [`history::field`](crate::history::field)) for `topic`.
pub struct Count<'a> {
    pub topic: &'a [u8],
    pub field: &'a str,
    pub n: u64,
}

impl CountScript {
    /// Adds `counts` to unix minute `minute` of the history, or to the current one by Redis's
    /// clock (`None`). Returns whether Redis kept them: not when this Redis user may not write
    /// the history, nor for a minute no longer kept.
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        minute: Option<u64>,
        counts: &[Count<'_>],
    ) -> RedisResult<bool> {
        let mut call = self.0.key(HISTORY);
        call.arg(minute.map(|minute| minute.to_string()).unwrap_or_default())
            .arg(host_clock())
            .arg(MAX_TOPICS)
            .arg(KEPT.as_secs());
        for count in counts {
            call.arg(count.topic).arg(count.field).arg(count.n);
        }
        let written: i64 = call.invoke_async(connection).await?;
        Ok(written == 1)
    }
}
