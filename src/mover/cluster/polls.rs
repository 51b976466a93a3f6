//! When each topic is polled next, kept in due order: a poll costs in proportion to the topics
//! that are due, however many the registry holds.

use std::collections::{BTreeSet, HashMap, HashSet};

use delayer_wire::Topic;
use delayer_wire::keys::Layout;
use tracing::error;

use crate::text::escape;

/// When each topic is to be drained next.
#[derive(Default)]
pub(super) struct Polls {
    /// The next poll of each topic not being drained, in unix seconds (Redis's clock).
    due: HashMap<String, f64>,
    /// The same in due order, by whole microseconds.
    queue: BTreeSet<(i64, String)>,
    /// Topics being drained now, each with the earliest time it was woken for meanwhile.
    draining: HashMap<String, Option<f64>>,
    /// Topics of the registry that the cluster layout cannot hold, said once each.
    refused: HashSet<Topic>,
}

impl Polls {
    /// Takes note of the registry's `topics`: those not known yet are polled `now`. Each one
    /// that `layout` cannot hold (one that is not UTF-8 among them: see [`Layout::refusal`]) is
    /// said once and left alone.
    pub(super) fn add_topics(&mut self, topics: Vec<Topic>, layout: Layout, now: f64) {
        for topic in topics {
            let text = match (layout.refusal(&topic), topic.to_str()) {
                (None, Some(text)) => text,
                (why, _) => {
                    if !self.refused.contains(&topic) {
                        let why = why.unwrap_or("is not UTF-8");
                        error!(
                            "Topic {} of the registry is left alone: it {why}",
                            escape::field(&topic)
                        );
                        self.refused.insert(topic);
                    }
                    continue;
                }
            };
            if !self.due.contains_key(text) && !self.draining.contains_key(text) {
                self.set(text.to_string(), now);
            }
        }
    }

    /// Polls `topic` no later than `at` (after its drain, if one is under way: the write that
    /// woke it may have come after the drain read the pool).
    pub(super) fn wake(&mut self, topic: &str, at: f64) {
        if let Some(woken) = self.draining.get_mut(topic) {
            *woken = Some(woken.map_or(at, |earlier| earlier.min(at)));
        } else if self.due.get(topic).is_none_or(|due| *due > at) {
            self.set(topic.to_string(), at);
        }
    }

    /// Polls every topic known no later than `at`.
    pub(super) fn wake_all(&mut self, at: f64) {
        let topics: Vec<String> = self
            .due
            .keys()
            .chain(self.draining.keys())
            .cloned()
            .collect();
        for topic in topics {
            self.wake(&topic, at);
        }
    }

    /// Up to `most` topics due at `now`, earliest first, marked as being drained.
    pub(super) fn take_due(&mut self, now: f64, most: usize) -> Vec<String> {
        let mut taken = Vec::new();
        while taken.len() < most
            && let Some(first) = self.queue.first()
            && first.0 <= micros(now)
        {
            let (_, topic) = self.queue.pop_first().expect("not empty");
            self.due.remove(&topic);
            self.draining.insert(topic.clone(), None);
            taken.push(topic);
        }
        taken
    }

    /// A drain of `topic` ended: it is polled again at `next`, or, when it was woken meanwhile,
    /// at that time but no sooner than `woken_not_before`.
    pub(super) fn drained(&mut self, topic: String, next: f64, woken_not_before: f64) {
        let woken = self.draining.remove(&topic).flatten();
        let at = woken.map_or(next, |woken| next.min(woken.max(woken_not_before)));
        self.set(topic, at);
    }

    /// When the next topic not being drained is due.
    pub(super) fn next(&self) -> Option<f64> {
        self.queue.first().map(|(at, _)| *at as f64 / 1e6)
    }

    fn set(&mut self, topic: String, at: f64) {
        if let Some(old) = self.due.insert(topic.clone(), at) {
            self.queue.remove(&(micros(old), topic.clone()));
        }
        self.queue.insert((micros(at), topic));
    }
}

/// `at` in whole microseconds; `as` saturates, so +inf is the end of time, never a panic.
fn micros(at: f64) -> i64 {
    (at * 1e6).round() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topics(names: &[&str]) -> Vec<Topic> {
        names.iter().map(|name| Topic::from(*name)).collect()
    }

    #[test]
    fn takes_topics_in_due_order_a_bounded_number_at_a_time() {
        let mut polls = Polls::default();
        polls.add_topics(topics(&["a", "b", "c"]), Layout::CLUSTER, 10.0);
        polls.wake("b", 5.0);
        assert_eq!(polls.take_due(10.0, 2), ["b", "a"]);
        assert_eq!(polls.next(), Some(10.0));
        polls.drained("b".into(), 20.0, 0.0);
        polls.drained("a".into(), f64::INFINITY, 0.0);
        assert_eq!(polls.take_due(10.0, 5), ["c"]);
        assert!(polls.take_due(19.0, 5).is_empty());
        assert_eq!(polls.next(), Some(20.0));
    }

    #[test]
    fn a_topic_woken_while_drained_is_looked_at_again_after_its_drain() {
        let mut polls = Polls::default();
        polls.add_topics(topics(&["t"]), Layout::CLUSTER, 0.0);
        assert_eq!(polls.take_due(0.0, 1), ["t"]);
        polls.wake("t", 1.0);
        polls.add_topics(topics(&["t"]), Layout::CLUSTER, 0.0);
        polls.drained("t".into(), 100.0, 1.005);
        assert_eq!(polls.next(), Some(1.005));
        polls.wake("t", 50.0);
        assert_eq!(polls.next(), Some(1.005), "a later wake changes nothing");
    }

    #[test]
    fn topics_the_layout_cannot_hold_are_left_alone() {
        let mut polls = Polls::default();
        let mut registry = topics(&["}bad", "good"]);
        registry.push(Topic::from(&b"t\xff"[..]));
        polls.add_topics(registry.clone(), Layout::CLUSTER, 0.0);
        assert_eq!(polls.take_due(0.0, 5), ["good"]);
        polls.add_topics(registry, Layout::CLUSTER, 0.0);
        assert_eq!(polls.refused.len(), 2, "each said once");
        assert!(polls.take_due(0.0, 5).is_empty());
    }
}
