//! The history (see [`delayer_wire::history`]): counting what happened, and reading it back a
//! minute at a time. A client counts its pushes and acks in memory and adds them to Redis's
//! history every [`SEND_EVERY`] (one script call, whatever it did meanwhile), so that counting
//! costs a push or an ack nothing in Redis; [`Client::send_counts`] sends them at once, for a
//! process about to exit.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use redis::Value;

use super::{Client, Inner};
use crate::error::Result;
use delayer_wire::history::{Counts, minute_of};
use delayer_wire::keys::{history_minute, history_topic_minute};
use delayer_wire::name::Topic;
use delayer_wire::scripts::count::Count;

/// How often a client adds what it counted to the history: what a process that exits without
/// [`Client::send_counts`] loses, and how far a count may land after its minute.
pub const SEND_EVERY: Duration = Duration::from_secs(1);
/// The most counts a client holds apart between two sends (pushes and acks of 100 topics); the
/// others are summed as of no topic, and go to the history's total only. Redis keeps fewer
/// topics apart (see [`delayer_wire::history::MAX_TOPICS`]).
const MOST_COUNTS: usize = 200;

/// Counts not yet sent: by topic (`None`: beyond [`MOST_COUNTS`], or not known) and field.
#[derive(Default)]
pub(crate) struct Unsent {
    counts: Mutex<HashMap<(Option<Topic>, &'static str), u64>>,
    /// Whether the task that sends them runs.
    sending: AtomicBool,
}

impl Unsent {
    /// Adds `n` to `field` of `topic`.
    fn add(&self, topic: Option<&Topic>, field: &'static str, n: u64) {
        let mut counts = self.counts.lock().expect("not poisoned");
        let mut key = (topic.cloned(), field);
        if counts.len() >= MOST_COUNTS && !counts.contains_key(&key) {
            key = (None, field);
        }
        *counts.entry(key).or_default() += n;
    }

    fn take(&self) -> HashMap<(Option<Topic>, &'static str), u64> {
        std::mem::take(&mut *self.counts.lock().expect("not poisoned"))
    }

    /// Puts back counts that could not be sent.
    fn put_back(&self, taken: HashMap<(Option<Topic>, &'static str), u64>) {
        let mut counts = self.counts.lock().expect("not poisoned");
        for (key, n) in taken {
            *counts.entry(key).or_default() += n;
        }
    }
}

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

impl Client {
    /// Counts one more of `field` for each of `topics` (`None` when not known), to be sent
    /// within [`SEND_EVERY`]. A run of one topic is counted at once: a batch's jobs cost a
    /// count, not one each.
    pub(crate) fn counted<'t>(
        &self,
        field: &'static str,
        topics: impl IntoIterator<Item = Option<&'t Topic>>,
    ) {
        let mut runs: Vec<(Option<&Topic>, u64)> = Vec::new();
        for topic in topics {
            match runs.last_mut() {
                Some((last, n)) if *last == topic => *n += 1,
                _ => runs.push((topic, 1)),
            }
        }
        if runs.is_empty() || !self.inner.settings.count_history {
            return;
        }
        let unsent = &self.inner.unsent;
        for (topic, n) in runs {
            unsent.add(topic, field, n);
        }
        if !unsent.sending.swap(true, Ordering::Relaxed) {
            tokio::spawn(send_every(Arc::downgrade(&self.inner)));
        }
    }

    /// Adds what this client counted (pushes and acks) to the history now, rather than within
    /// [`SEND_EVERY`]: for a process about to exit. Counts Redis did not take are kept for the
    /// next send.
    pub async fn send_counts(&self) -> Result<()> {
        let taken = self.inner.unsent.take();
        if taken.is_empty() {
            return Ok(());
        }
        // Busiest first: they are the ones a minute with little room counts apart.
        let mut ordered: Vec<_> = taken.iter().collect();
        ordered.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let counts: Vec<Count<'_>> = ordered
            .iter()
            .map(|((topic, field), n)| Count {
                topic: topic.as_ref().map_or(&b""[..], |topic| topic.as_bytes()),
                field,
                n: **n,
            })
            .collect();
        let sent = match self.connection().await {
            Ok(mut connection) => {
                let count = &self.inner.scripts.count;
                count.run(&mut connection, None, &counts).await
            }
            Err(error) => Err(error),
        };
        match sent {
            // Not kept (this Redis user may not write the history): dropped, not kept growing.
            Ok(_) => Ok(()),
            Err(error) => {
                drop(counts);
                self.inner.unsent.put_back(taken);
                Err(error.into())
            }
        }
    }

    /// The last `minutes` minutes of the history up to now by Redis's clock, of every topic or
    /// of `topic` (empty for the minutes it was not one of the topics counted apart).
    pub async fn history(&self, topic: Option<&Topic>, minutes: usize) -> Result<History> {
        let mut connection = self.connection().await?;
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

/// Sends a client's counts every [`SEND_EVERY`] for as long as the client lives.
async fn send_every(inner: Weak<Inner>) {
    loop {
        tokio::time::sleep(SEND_EVERY).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        // Best effort: what Redis did not take waits for the next send.
        let _ = Client {
            inner,
            consumer: None,
        }
        .send_counts()
        .await;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_wait_summed_by_topic_and_those_beyond_the_most_count_as_of_no_topic() {
        let unsent = Unsent::default();
        let topic = |index: usize| Topic::from(format!("t{index}"));
        for index in 0..MOST_COUNTS + 3 {
            unsent.add(Some(&topic(index)), "pushed", 1);
        }
        unsent.add(Some(&topic(0)), "pushed", 4);
        unsent.add(None, "acked", 2);
        let taken = unsent.take();
        assert_eq!(taken.len(), MOST_COUNTS + 2);
        assert_eq!(taken[&(Some(topic(0)), "pushed")], 5);
        assert_eq!(taken[&(None, "pushed")], 3);
        assert_eq!(taken[&(None, "acked")], 2);
        assert!(unsent.take().is_empty(), "taken whole");
        unsent.add(Some(&topic(0)), "pushed", 1);
        unsent.put_back(taken);
        assert_eq!(unsent.take()[&(Some(topic(0)), "pushed")], 6);
    }
}
