//! The schedule state script (`schedule_state.lua`): pause, resume or remove a schedule.

use redis::RedisResult;
use redis::aio::ConnectionLike;

use super::{host_clock, malformed};
use crate::keys::Keys;

script_type!(
    /// The schedule state script.
    ScheduleStateScript,
    "schedule_state.lua"
);

/// What to do to a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Pause,
    Resume,
    Remove,
}

/// What a change found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Changed {
    Done,
    /// Paused already (for a pause), or not paused (for a resume).
    Already,
    /// There is no such schedule.
    Gone,
}

impl ScheduleStateScript {
    /// Makes `change` to schedule `name`, whose keys `keys` are (its topic's).
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        name: &str,
        change: Change,
    ) -> RedisResult<Changed> {
        let action = match change {
            Change::Pause => "pause",
            Change::Resume => "resume",
            Change::Remove => "remove",
        };
        let outcome: String = self
            .0
            .key(keys.schedule(name))
            .key(keys.schedules_by_next())
            .arg(action)
            .arg(name)
            .arg(keys.schedules_for_scripts())
            .arg(host_clock())
            .invoke_async(connection)
            .await?;
        match outcome.as_str() {
            "done" => Ok(Changed::Done),
            "already" => Ok(Changed::Already),
            "gone" => Ok(Changed::Gone),
            _ => Err(malformed("schedule_state")),
        }
    }
}
