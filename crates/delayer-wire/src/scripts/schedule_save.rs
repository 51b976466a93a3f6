//! The schedule save script (`schedule_save.lua`): a schedule's definition written, or left
//! as it is when it is the same.

use redis::RedisResult;
use redis::aio::ConnectionLike;

use super::{host_clock, malformed};
use crate::keys::Keys;
use crate::schedule::{Definition, Source, seconds_text};

script_type!(
    /// The schedule save script: creates or changes a schedule.
    ScheduleSaveScript,
    "schedule_save.lua"
);

/// What a save did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saved {
    Created,
    Changed,
    /// The definition was the same: nothing changed.
    Same,
    /// Asked to create it, and one of that name exists: nothing changed.
    Exists,
}

impl ScheduleSaveScript {
    /// Writes `definition` under `keys` (its topic's); `next` (unix ms) is its next tick if it is
    /// new or ticks otherwise now; `create` refuses to change one that exists.
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        definition: &Definition,
        next: i64,
        create: bool,
        source: Source,
    ) -> RedisResult<Saved> {
        let mut call = self.0.key(keys.schedule(&definition.name));
        call.key(keys.schedules_by_next())
            .arg(keys.schedules_for_scripts())
            .arg(&definition.name)
            .arg(seconds_text(next))
            .arg(if create { "create" } else { "save" })
            .arg(source.word())
            .arg(host_clock());
        for (field, value) in definition.fields() {
            call.arg(field).arg(value);
        }
        let outcome: String = call.invoke_async(connection).await?;
        match outcome.as_str() {
            "created" => Ok(Saved::Created),
            "changed" => Ok(Saved::Changed),
            "same" => Ok(Saved::Same),
            "exists" => Ok(Saved::Exists),
            _ => Err(malformed("schedule_save")),
        }
    }
}
