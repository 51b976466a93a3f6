//! What a client counted for the history and has not sent yet: by topic and field, so that a
//! batch's jobs cost a count, not one each.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use delayer_wire::name::Topic;

/// The most counts a client holds apart between two sends (pushes and acks of 100 topics); the
/// others are summed as of no topic, and go to the history's total only. Redis keeps fewer
/// topics apart (see [`delayer_wire::history::MAX_TOPICS`]).
const MOST_COUNTS: usize = 200;

/// Counts not yet sent: by topic (`None`: beyond [`MOST_COUNTS`], or not known) and field.
#[derive(Default)]
pub(super) struct Unsent {
    counts: Mutex<HashMap<(Option<Topic>, &'static str), u64>>,
    /// Whether the task that sends them runs.
    pub(super) sending: AtomicBool,
}

impl Unsent {
    /// Adds `n` to `field` of `topic`.
    pub(super) fn add(&self, topic: Option<&Topic>, field: &'static str, n: u64) {
        let mut counts = self.counts.lock().expect("not poisoned");
        let mut key = (topic.cloned(), field);
        if counts.len() >= MOST_COUNTS && !counts.contains_key(&key) {
            key = (None, field);
        }
        *counts.entry(key).or_default() += n;
    }

    pub(super) fn take(&self) -> HashMap<(Option<Topic>, &'static str), u64> {
        std::mem::take(&mut *self.counts.lock().expect("not poisoned"))
    }

    /// Puts back counts that could not be sent.
    pub(super) fn put_back(&self, taken: HashMap<(Option<Topic>, &'static str), u64>) {
        let mut counts = self.counts.lock().expect("not poisoned");
        for (key, n) in taken {
            *counts.entry(key).or_default() += n;
        }
    }
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
