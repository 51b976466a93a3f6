//! The log lines that tell what the move script did: the original's "Job is ready", dropped
//! orphans, and topics whose jobs cannot move.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use tracing::{error, info, warn};

use crate::escape;
use delayer_client::keys;
use delayer_client::scripts::move_due::{Batch, Stuck, StuckBecause};

/// Logs the jobs a batch moved and the orphans it dropped.
pub fn moves(batch: &Batch) {
    // These lines keep the original's exact wording: people grep their logs for them.
    for (topic, ids) in &batch.moved {
        info!(
            "Job is ready, Topic: {}, IDs: [{}]",
            escape::field(topic),
            escape::list(ids)
        );
    }
    if !batch.orphans.is_empty() {
        warn!(
            "Dropped orphan jobs (bucket or topic gone), IDs: [{}]",
            escape::list(&batch.orphans)
        );
    }
}

/// Topics whose ready list key is not a list. Each is said once when it is found, with how many
/// jobs were parked, and once when it moves again: not once per job, nor on every look.
#[derive(Debug, Default)]
pub struct StuckTopics {
    /// Already reported, not yet seen moving again.
    reported: HashSet<String>,
    /// Found in the current drain, not reported yet: why, and how many jobs were parked so far.
    found: BTreeMap<String, (StuckBecause, usize)>,
}

impl StuckTopics {
    /// Takes note of one batch of a drain (recoveries are said at once).
    pub fn note(&mut self, batch: &Batch) {
        for Stuck { topic, why, parked } in &batch.stuck {
            if !self.reported.contains(topic) {
                let entry = self
                    .found
                    .entry(topic.clone())
                    .or_insert_with(|| (why.clone(), 0));
                entry.1 += parked;
            }
        }
        for (topic, _) in &batch.moved {
            if self.reported.remove(topic) {
                info!(
                    "Topic {} moves again: {} is a list now",
                    escape::field(topic),
                    escape::field(&keys::ready_queue(topic))
                );
            }
        }
    }

    /// At the end of a drain: says which topics were found stuck in it.
    pub fn report(&mut self, recheck: Duration) {
        for (topic, (why, parked)) in std::mem::take(&mut self.found) {
            let key = escape::field(&keys::ready_queue(&topic)).into_owned();
            let why = match why {
                StuckBecause::WrongType(key_type) => {
                    format!("{key} holds a {}, not a list", escape::field(&key_type))
                }
                StuckBecause::NoPermission => {
                    format!("the Redis user may not write {key} (ACL)")
                }
            };
            error!(
                "Topic {} cannot move: {why}; {parked} of its jobs wait in the pool, looked at \
                 again every {} s until that is fixed",
                escape::field(&topic),
                recheck.as_secs()
            );
            self.reported.insert(topic);
        }
    }
}
