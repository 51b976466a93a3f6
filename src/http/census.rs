//! What Redis holds, for `/metrics` and the console: the pool's counts and every ready list's
//! length, read over the registry a slice at a time, at most [`TOPICS_PER_SECOND`], keeping the
//! topics with the most ready jobs and the sums of the others. However many topics there are, a
//! census asks Redis for as much a second and keeps as much in memory.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use delayer_client::Topic;
use delayer_client::inspector::{Inspector, Lengths};
use delayer_wire::time::unix_now;
use tokio::time::Instant;

use crate::metrics::{Census, Schedules};
use crate::text::escape::capped;

/// The reservations counted by topic for the listed topics (with one set of them for every
/// topic): those due back soonest.
pub const RESERVATIONS_COUNTED: usize = 1000;
/// Topics asked for in one SSCAN, and whose ready lists are read in one pipeline.
const SLICE: usize = 1000;
/// The most topics read a second: 200,000 topics take 4 s, and Redis spends a few ms a second.
const TOPICS_PER_SECOND: f64 = 50_000.0;

/// Reads what Redis holds: the topics this daemon counted (`own`), then those of the registry.
/// Names the `listed` topics with the most ready jobs and sums the others; a topic that is not
/// UTF-8 is read by its bytes and named escaped, as its log lines and counters name it. Without
/// the registry (a user not allowed SSCAN, say), `own` alone. Then the schedules, keeping the
/// first `listed_schedules` by name.
pub async fn take(
    inspector: &Inspector,
    own: Vec<Topic>,
    listed: usize,
    listed_schedules: usize,
) -> delayer_client::Result<Census> {
    let started = Instant::now();
    let mut tally = Tally::new(listed, unix_now());
    tally.add(&own, inspector.lengths(&own).await?);
    let own: HashSet<Topic> = own.into_iter().collect();
    let mut cursor = 0;
    let mut first = true;
    loop {
        let (next, mut topics) = match inspector.topics_page(cursor, SLICE).await {
            Ok(page) => page,
            Err(_) if first => break,
            Err(error) => return Err(error),
        };
        first = false;
        topics.retain(|topic| !own.contains(topic));
        if !topics.is_empty() {
            let lengths = inspector.lengths(&topics).await?;
            tally.add(&topics, lengths);
        }
        if next == 0 {
            break;
        }
        cursor = next;
        let pace = Duration::from_secs_f64(tally.census.topics as f64 / TOPICS_PER_SECOND);
        tokio::time::sleep_until(started + pace).await;
    }
    let mut census = tally.into_census();
    let ages = inspector.oldest_ready_ages(&census.listed_topics).await?;
    census.oldest_ready_age = census
        .listed_topics
        .iter()
        .zip(&census.listed)
        .filter_map(|(topic, (name, _))| Some((name.clone(), ages.get(topic)?.as_secs_f64())))
        .collect();
    // The console's extras: a Redis user that may not read them (an ACL without LINDEX, say)
    // must not cost `/metrics` its figures. The console shows dashes then.
    census.details = inspector
        .details(&census.listed_topics, RESERVATIONS_COUNTED)
        .await
        .unwrap_or_default();
    census.redis_version = inspector.server_version().await.ok().flatten();
    // Every schedule is read, to count the paused: 10,000 cost Redis some 25 ms, in pipelines.
    // A user that may not read them must not cost `/metrics` its other figures (a hash that does
    // not read is counted, never an error).
    census.schedules = inspector
        .schedules()
        .await
        .ok()
        .map(|all| Arc::new(Schedules::new(all, listed_schedules)));
    Ok(census)
}

/// A census as it is read.
struct Tally {
    census: Census,
    /// The `most` topics with the most ready jobs so far, the one with the fewest on top.
    top: BinaryHeap<Reverse<(u64, Reverse<String>)>>,
    /// Their topics and dead jobs, by name.
    names: HashMap<String, (Topic, u64)>,
    most: usize,
}

impl Tally {
    fn new(most: usize, read_at: f64) -> Tally {
        Tally {
            census: Census {
                read_at,
                ..Census::default()
            },
            top: BinaryHeap::with_capacity(most + 1),
            names: HashMap::with_capacity(most + 1),
            most,
        }
    }

    /// The lengths read of `topics`: each slice's pools are its topics' own, to add up (the
    /// cluster layout); or each slice reads the one pool again, and the last read holds.
    fn add(&mut self, topics: &[Topic], lengths: Lengths) {
        let census = &mut self.census;
        if !lengths.whole_pool {
            census.waiting += lengths.waiting;
            census.due_now += lengths.due_now;
            census.reserved += lengths.reserved;
            census.next_due = census.next_due.into_iter().chain(lengths.next_due).min();
        } else {
            (census.waiting, census.due_now) = (lengths.waiting, lengths.due_now);
            census.reserved = lengths.reserved;
            census.next_due = lengths.next_due;
        }
        census.topics += topics.len() as u64;
        let dead: HashMap<Topic, u64> = lengths.dead.into_iter().collect();
        census.paused.extend(
            lengths
                .paused
                .iter()
                .map(|topic| capped(topic).into_owned()),
        );
        for (topic, ready) in lengths.ready {
            let name = capped(&topic).into_owned();
            // SSCAN may give a topic twice: one listed is not counted again (one that is not is,
            // rarely, in the sums).
            if self.names.contains_key(&name) {
                continue;
            }
            let dead = dead.get(&topic).copied().unwrap_or(0);
            self.names.insert(name.clone(), (topic, dead));
            self.top.push(Reverse((ready, Reverse(name))));
            if self.top.len() > self.most {
                let Reverse((ready, Reverse(name))) = self.top.pop().expect("not empty");
                let (_, dead) = self.names.remove(&name).expect("named");
                self.census.unlisted_topics += 1;
                self.census.unlisted_ready += ready;
                self.census.unlisted_dead += dead;
            }
        }
    }

    fn into_census(self) -> Census {
        let mut census = self.census;
        for Reverse((ready, Reverse(name))) in self.top.into_sorted_vec() {
            let (topic, dead) = self.names[&name].clone();
            census.listed_topics.push(topic);
            census.dead.push((name.clone(), dead));
            census.listed.push((name, ready));
        }
        census
    }
}

#[cfg(test)]
mod tests {
    use super::Tally;
    use delayer_client::Topic;
    use delayer_client::inspector::Lengths;

    fn slice(topics: &[(&str, u64)], waiting: u64) -> (Vec<Topic>, Lengths) {
        let names = topics
            .iter()
            .map(|(topic, _)| Topic::from(*topic))
            .collect();
        let lengths = Lengths {
            waiting,
            ready: topics.iter().map(|(t, n)| (Topic::from(*t), *n)).collect(),
            ..Lengths::default()
        };
        (names, lengths)
    }

    #[test]
    fn keeps_the_topics_with_the_most_and_sums_the_others_once() {
        let mut tally = Tally::new(3, 0.0);
        let (names, lengths) = slice(&[("a", 5), ("b", 1), ("c", 9), ("d", 5)], 10);
        tally.add(
            &names,
            Lengths {
                whole_pool: true,
                ..lengths
            },
        );
        // SSCAN gave "c" and "a" again; "e" is of the wrong type (not among the lengths read).
        let (mut names, mut lengths) = slice(&[("c", 9), ("a", 5), ("f", 2)], 12);
        names.push("e".into());
        lengths.ready.retain(|(topic, _)| topic != "e");
        tally.add(
            &names,
            Lengths {
                whole_pool: true,
                ..lengths
            },
        );
        let census = tally.into_census();
        // Ties by name.
        let listed: Vec<(&str, u64)> = census
            .listed
            .iter()
            .map(|(t, n)| (t.as_str(), *n))
            .collect();
        assert_eq!(listed, [("c", 9), ("a", 5), ("d", 5)]);
        assert_eq!((census.unlisted_topics, census.unlisted_ready), (2, 3));
        assert_eq!(census.topics, 8);
        assert_eq!(census.waiting, 12, "the one pool, as last read");
    }

    #[test]
    fn sums_the_pools_of_the_cluster_layout_and_lists_none_when_told_so() {
        let mut tally = Tally::new(0, 0.0);
        for topics in [[("a", 1)], [("b", 2)]] {
            let (names, lengths) = slice(&topics, 4);
            tally.add(&names, lengths);
        }
        let census = tally.into_census();
        assert!(census.listed.is_empty());
        assert_eq!((census.unlisted_topics, census.unlisted_ready), (2, 3));
        assert_eq!(census.waiting, 8);
    }

    #[test]
    fn a_topic_that_is_not_utf8_is_listed_escaped() {
        let mut tally = Tally::new(2, 0.0);
        let (mut names, mut lengths) = slice(&[("a", 1)], 0);
        let odd = Topic::from(&b"t\xff"[..]);
        names.push(odd.clone());
        lengths.ready.push((odd, 3));
        tally.add(
            &names,
            Lengths {
                whole_pool: true,
                ..lengths
            },
        );
        let census = tally.into_census();
        assert_eq!(
            census.listed,
            [(r#""t\xff""#.to_string(), 3), ("a".to_string(), 1)]
        );
    }
}
