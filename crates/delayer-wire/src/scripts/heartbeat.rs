//! The heartbeat script (`heartbeat.lua`): writes a consumer's beat, or removes the consumer.

use redis::RedisResult;
use redis::aio::ConnectionLike;

use super::host_clock;
use crate::consumer::{Heartbeat, KEPT};
use crate::keys::{CONSUMERS, consumer};

script_type!(
    /// The heartbeat script: a consumer's beat, or its removal.
    HeartbeatScript,
    "heartbeat.lua"
);

impl HeartbeatScript {
    /// Writes `beat` by Redis's clock: the consumer's hash and its place in the consumers' set.
    pub async fn beat(
        &self,
        connection: &mut impl ConnectionLike,
        beat: &Heartbeat,
    ) -> RedisResult<()> {
        let kept = KEPT.max(beat.lifetime).as_millis() as u64;
        let mut call = self.0.key(CONSUMERS);
        call.key(consumer(&beat.id))
            .arg(&beat.id)
            .arg(kept)
            .arg(host_clock());
        for (name, value) in beat.fields() {
            call.arg(name).arg(value);
        }
        call.invoke_async::<i64>(connection).await.map(drop)
    }

    /// Removes consumer `id`: its hash and its place in the consumers' set.
    pub async fn forget(&self, connection: &mut impl ConnectionLike, id: &str) -> RedisResult<()> {
        self.0
            .key(CONSUMERS)
            .key(consumer(id))
            .arg(id)
            .arg(0)
            .arg(host_clock())
            .invoke_async::<i64>(connection)
            .await
            .map(drop)
    }
}
