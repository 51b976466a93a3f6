//! Counting for the history (see [`delayer_wire::history`]): a client counts its pushes and
//! acks in memory and adds them to Redis's history every second (one script call, whatever it did
//! meanwhile), so that counting costs a push or an ack nothing in Redis;
//! [`Client::send_counts`] sends them at once, for a process about to exit. (An
//! [`Inspector`](crate::Inspector) reads the history back.)

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{Client, Inner};
use crate::error::Result;
use delayer_wire::name::Topic;
use delayer_wire::scripts::count::Count;

/// How often a client adds what it counted to the history: what a process that exits without
/// [`Client::send_counts`] loses, and how far a count may land after its minute.
const SEND_EVERY: Duration = Duration::from_secs(1);

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
    /// a second: for a process about to exit. Counts Redis did not take are kept for the
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
