//! The history (see [`delayer_wire::history`]) read back a minute at a time: what clients and
//! daemons counted, of every topic or of one.

use redis::Value;

use super::handle::Inspector;
use crate::error::Result;
use delayer_wire::history::{Counts, minute_of};
use delayer_wire::keys::{history_minute, history_topic_minute};
use delayer_wire::name::Topic;

/// What the history holds of the minutes up to now: of every topic, or of one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    /// The current unix minute, by Redis's clock: the last of [`minutes`](Self::minutes).
    pub now: u64,
    /// Each minute's counts, oldest first (empty for a minute with none).
    pub minutes: Vec<Counts>,
}

impl History {
    /// The unix minute of `minutes[index]`.
    pub fn minute(&self, index: usize) -> u64 {
        self.now + 1 + index as u64 - self.minutes.len() as u64
    }
}

impl Inspector {
    /// The last `minutes` minutes of the history up to now by Redis's clock, of every topic or
    /// of `topic` (empty for the minutes it was not one of the topics counted apart).
    pub async fn history(&self, topic: Option<&Topic>, minutes: usize) -> Result<History> {
        let mut connection = self.client.connection().await?;
        let (seconds, _): (u64, u64) = redis::cmd("TIME").query_async(&mut connection).await?;
        let now = minute_of(seconds as f64);
        let first = (now + 1).saturating_sub(minutes as u64);
        let mut read = redis::pipe();
        for minute in first..=now {
            match topic {
                Some(topic) => read.hgetall(history_topic_minute(minute, topic)),
                None => read.hgetall(history_minute(minute)),
            };
        }
        let hashes: Vec<Value> = read.query_async(&mut connection).await?;
        let minutes = hashes.into_iter().map(counts_in).collect();
        Ok(History { now, minutes })
    }
}

/// The counts of one HGETALL reply (a map in RESP3, a flat array in RESP2); none for anything
/// else.
fn counts_in(hash: Value) -> Counts {
    let bytes = |value: &Value| match value {
        Value::BulkString(bytes) => Some(bytes.clone()),
        _ => None,
    };
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = match hash {
        Value::Map(pairs) => pairs
            .iter()
            .filter_map(|(name, value)| Some((bytes(name)?, bytes(value)?)))
            .collect(),
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|pair| Some((bytes(pair.first()?)?, bytes(pair.get(1)?)?)))
            .collect(),
        _ => Vec::new(),
    };
    Counts::from_fields(
        pairs
            .iter()
            .map(|(name, value)| (name.as_slice(), value.as_slice())),
    )
}
