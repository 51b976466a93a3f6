//! The log lines that tell what the scripts did (the original's "Job is ready", dropped orphans,
//! topics whose jobs cannot move, reservations that lapsed). What kept them from running is
//! logged by [`outage`](super::outage).

use std::collections::{BTreeMap, HashMap};
use std::fmt::{Display, Formatter};
use std::time::Duration;

use tracing::{error, info, warn};

use crate::text::escape;
use delayer_wire::keys::Keys;
use delayer_wire::scripts::move_due::{Batch, Stuck, StuckBecause};
use delayer_wire::scripts::release::Released;
use delayer_wire::{JobId, Topic};

/// Logs the jobs a batch moved and the orphans it dropped.
pub fn moves(batch: &Batch) {
    // These lines keep the original's exact wording: people grep their logs for them.
    for (topic, ids) in &batch.moved {
        info!(
            topic = %escape::capped(topic),
            ids = %JsonIds(ids),
            count = ids.len(),
            "Job is ready, Topic: {}, IDs: [{}]",
            escape::field(topic),
            escape::list(ids)
        );
    }
    if !batch.orphans.is_empty() {
        warn!(
            ids = %JsonIds(&batch.orphans),
            count = batch.orphans.len(),
            "Dropped orphan jobs (bucket or topic gone), IDs: [{}]",
            escape::list(&batch.orphans)
        );
    }
    if !batch.replaced.is_empty() {
        warn!(
            ids = %JsonIds(&batch.replaced),
            count = batch.replaced.len(),
            "compact jobs dropped: a legacy client pushed their ids again, and the newer jobs \
             moved, IDs: [{}]",
            escape::list(&batch.replaced)
        );
    }
}

/// Logs the reservations that lapsed: jobs delivered again, or dead after their last attempt.
pub fn released(released: &Released, max_attempts: u32, keys: &Keys) {
    for (topic, ids) in by_topic(&released.retried) {
        info!(
            topic = %escape::capped(topic),
            ids = %JsonIds(&ids),
            count = ids.len(),
            "Job is delivered again (its time to run passed), Topic: {}, IDs: [{}]",
            escape::field(topic),
            escape::list(&ids)
        );
    }
    for (topic, ids) in by_topic(&released.dead) {
        warn!(
            topic = %escape::capped(topic),
            ids = %JsonIds(&ids),
            count = ids.len(),
            "Job is dead after {max_attempts} attempts, Topic: {}, IDs: [{}]",
            escape::field(topic),
            escape::list(&ids)
        );
    }
    if !released.dropped.is_empty() {
        warn!(
            ids = %JsonIds(&released.dropped),
            count = released.dropped.len(),
            "Dropped lapsed reservations of jobs whose data is gone, IDs: [{}]",
            escape::list(&released.dropped)
        );
    }
    for (topic, ids) in by_topic(&released.blocked) {
        error!(
            topic = %escape::capped(topic),
            ids = %JsonIds(&ids),
            count = ids.len(),
            "Job should be dead after {max_attempts} attempts but {} cannot take it (not a list, \
             or not writable by this Redis user): delivered again instead, Topic: {}, IDs: [{}]",
            escape::field(&keys.dead(topic)),
            escape::field(topic),
            escape::list(&ids)
        );
    }
}

/// Ids as a JSON array, for the `ids` field of JSON log lines (the text lines print the message
/// alone, so this is only written there).
struct JsonIds<'a>(&'a [JobId]);

impl Display for JsonIds<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<_> = self.0.iter().map(|id| escape::capped(id)).collect();
        f.write_str(&serde_json::to_string(&ids).map_err(|_| std::fmt::Error)?)
    }
}

/// (topic, id) pairs grouped by topic, topics in their first order.
fn by_topic(pairs: &[(Topic, JobId)]) -> Vec<(&Topic, Vec<JobId>)> {
    let mut groups: Vec<(&Topic, Vec<JobId>)> = Vec::new();
    for (topic, id) in pairs {
        match groups.iter_mut().find(|(seen, _)| *seen == topic) {
            Some((_, ids)) => ids.push(id.clone()),
            None => groups.push((topic, vec![id.clone()])),
        }
    }
    groups
}

/// Topics whose jobs cannot move (a ready list key that is not a list) or may not (paused). Each
/// is said once when it is found, with how many jobs were parked, and once when it moves again:
/// not once per job, nor on every poll.
#[derive(Debug, Default)]
pub struct StuckTopics {
    /// Already reported, not yet seen moving again, with why.
    reported: HashMap<Topic, StuckBecause>,
    /// Found in the current drain, not reported yet: why, and how many jobs were parked so far.
    found: BTreeMap<Topic, (StuckBecause, usize)>,
}

impl StuckTopics {
    /// Takes note of one batch of a drain (recoveries are said at once).
    pub fn note(&mut self, batch: &Batch, keys: &Keys) {
        for Stuck { topic, why, parked } in &batch.stuck {
            if !self.reported.contains_key(topic) {
                let entry = self
                    .found
                    .entry(topic.clone())
                    .or_insert_with(|| (why.clone(), 0));
                entry.1 += parked;
            }
        }
        for (topic, _) in &batch.moved {
            match self.reported.remove(topic) {
                Some(StuckBecause::Paused) => {
                    info!("Topic {} moves again: it was resumed", escape::field(topic))
                }
                Some(_) => info!(
                    "Topic {} moves again: {} is a list now",
                    escape::field(topic),
                    escape::field(&keys.ready(topic))
                ),
                None => {}
            }
        }
    }

    /// At the end of a drain: says which topics were found stuck in it.
    pub fn report(&mut self, recheck: Duration, keys: &Keys) {
        for (topic, (why, parked)) in std::mem::take(&mut self.found) {
            let key = escape::field(&keys.ready(&topic)).into_owned();
            let text = match &why {
                StuckBecause::WrongType(key_type) => {
                    format!("{key} holds a {}, not a list", escape::field(key_type))
                }
                StuckBecause::NoPermission => format!("the Redis user may not write {key} (ACL)"),
                StuckBecause::Paused => {
                    info!(
                        topic = %escape::capped(&topic),
                        count = parked,
                        "Topic {} is paused: {parked} of its due jobs wait in the pool until it \
                         is resumed (delayer resume)",
                        escape::field(&topic),
                    );
                    self.reported.insert(topic, why);
                    continue;
                }
            };
            error!(
                topic = %escape::capped(&topic),
                count = parked,
                "Topic {} cannot move: {text}; {parked} of its jobs wait in the pool, looked at \
                 again every {} s until that is fixed",
                escape::field(&topic),
                recheck.as_secs()
            );
            self.reported.insert(topic, why);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_original_lines_are_logged_from_where_the_logging_expects_them() {
        let here = module_path!().strip_suffix("::tests");
        assert_eq!(here, Some(crate::service::logging::ORIGINAL_LINES));
    }
}
