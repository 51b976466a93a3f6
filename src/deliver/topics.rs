//! The delayer topics whose due jobs go to a sink: the registry's that it takes, kept up to date
//! cheaply.

use std::time::{Duration, Instant};

use delayer_client::{Client, Inspector, Topic};

use super::Sink;

/// How often the registry's size is looked at (SCARD): a topic added is delivered within this.
pub const TOPICS_CHECK: Duration = Duration::from_millis(100);
/// How often the registry of topics is read again all the same (a topic replaced by another).
const TOPICS_EVERY: Duration = Duration::from_secs(2);

/// The delayer topics to deliver: the registry's that the sink takes, read again when the
/// registry's size changes (looked at every [`TOPICS_CHECK`]) and every [`TOPICS_EVERY`], in an
/// order that turns each round, so that a busy topic does not keep the others waiting (a
/// reserve takes the first topic's jobs first).
#[derive(Default)]
pub struct Topics {
    known: Vec<Topic>,
    /// The registry's size when last read.
    size: u64,
    read_at: Option<Instant>,
    checked_at: Option<Instant>,
    turn: usize,
}

impl Topics {
    /// The topics to reserve from, in this round's order.
    pub async fn current(
        &mut self,
        client: &Client,
        sink: &impl Sink,
    ) -> delayer_client::Result<Vec<Topic>> {
        let registry = Inspector::new(client);
        let mut stale = self.read_at.is_none_or(|at| at.elapsed() >= TOPICS_EVERY);
        if !stale
            && self
                .checked_at
                .is_none_or(|at| at.elapsed() >= TOPICS_CHECK)
        {
            self.checked_at = Some(Instant::now());
            stale = registry.topic_count().await? != self.size;
        }
        if stale {
            let registry = registry.topics().await?;
            self.size = registry.len() as u64;
            let mut known: Vec<Topic> = registry
                .into_iter()
                .filter(|topic| sink.takes(&String::from_utf8_lossy(topic.as_bytes())))
                .collect();
            // Names without a wildcard are delivered before any push registers them.
            let names = sink
                .topics()
                .iter()
                .filter(|pattern| !pattern.contains('*'));
            for pattern in names.filter(|name| sink.takes(name)) {
                let topic = Topic::from(pattern.as_str());
                if !known.contains(&topic) {
                    known.push(topic);
                }
            }
            known.sort();
            self.known = known;
            self.read_at = Some(Instant::now());
            self.checked_at = self.read_at;
        }
        let mut names = self.known.clone();
        if !names.is_empty() {
            self.turn = (self.turn + 1) % names.len();
            names.rotate_left(self.turn);
        }
        Ok(names)
    }
}
