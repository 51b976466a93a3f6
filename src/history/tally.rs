//! What this daemon counted for the history and has not written yet, by minute (of Redis's clock)
//! and topic: taken whole by each write, and put back when the write fails.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use delayer_wire::Topic;
use delayer_wire::history::{Counts, lag_bucket, minute_of};
use delayer_wire::scripts::move_due::Batch;
use delayer_wire::scripts::release::Released;

/// The most topics a minute of the tally holds apart; the others are summed, and go to the
/// history's total only. Redis keeps fewer apart ([`MAX_TOPICS`]), but several daemons each
/// offer theirs, busiest first, and the first counted in a minute win.
///
/// [`MAX_TOPICS`]: delayer_wire::history::MAX_TOPICS
const MOST_TOPICS: usize = 100;
/// The most minutes kept while Redis does not answer: an hour, a few MB at most.
const MOST_MINUTES: u64 = 60;

/// Counts not yet written, by unix minute. Nothing is counted until [`Tally::keep`]: a daemon
/// that writes no history (no console) must not hold its counts for ever.
#[derive(Default)]
pub struct Tally {
    minutes: Mutex<BTreeMap<u64, Minute>>,
    kept: AtomicBool,
}

/// One minute's counts not yet written.
#[derive(Debug, Default, PartialEq)]
pub struct Minute {
    /// By topic, at most [`MOST_TOPICS`].
    pub topics: HashMap<Topic, Counts>,
    /// The other topics', summed.
    pub others: Counts,
}

impl Minute {
    fn of(&mut self, topic: &Topic) -> &mut Counts {
        if self.topics.len() >= MOST_TOPICS && !self.topics.contains_key(topic) {
            return &mut self.others;
        }
        self.topics.entry(topic.clone()).or_default()
    }

    /// The topics busiest first (most jobs counted), then the others (topic `None`).
    pub fn busiest_first(&self) -> Vec<(Option<&Topic>, &Counts)> {
        let mut topics: Vec<(Option<&Topic>, &Counts)> = self
            .topics
            .iter()
            .map(|(topic, counts)| (Some(topic), counts))
            .collect();
        let jobs = |counts: &Counts| counts.moved + counts.again + counts.dead;
        topics.sort_by(|a, b| jobs(b.1).cmp(&jobs(a.1)).then(a.0.cmp(&b.0)));
        if !self.others.is_empty() {
            topics.push((None, &self.others));
        }
        topics
    }
}

impl Tally {
    /// Counts from now on: a writer takes what is counted.
    pub fn keep(&self) {
        self.kept.store(true, Ordering::Relaxed);
    }

    /// A call of the move script at `now` (unix seconds, Redis's clock).
    pub fn moved(&self, batch: &Batch, now: f64) {
        let (Some(first), Some(last)) = (batch.first_due, batch.last_due) else {
            return;
        };
        if !self.kept.load(Ordering::Relaxed) {
            return;
        }
        let mut minutes = self.minutes.lock().expect("not poisoned");
        let minute = minutes.entry(minute_of(now)).or_default();
        for (topic, ids) in &batch.moved {
            let counts = minute.of(topic);
            counts.moved += ids.len() as u64;
            // A batch's due times by topic are not known, only its first and last: each topic's
            // jobs are taken as spread over them (exact for one topic, as in a cluster).
            for lag in lags(first, last, ids.len(), now) {
                counts.lags[lag_bucket(lag)] += 1;
            }
        }
    }

    /// Jobs pushed by this daemon (its Kafka link's delay requests) at `now` (unix seconds,
    /// Redis's clock), one a topic of `topics`.
    pub fn pushed<'t>(&self, topics: impl IntoIterator<Item = &'t Topic>, now: f64) {
        if !self.kept.load(Ordering::Relaxed) {
            return;
        }
        let mut minutes = self.minutes.lock().expect("not poisoned");
        let minute = minutes.entry(minute_of(now)).or_default();
        for topic in topics {
            minute.of(topic).pushed += 1;
        }
    }

    /// A call of the release script at `now` (unix seconds, Redis's clock).
    pub fn released(&self, released: &Released, now: f64) {
        let again = released.retried.len() + released.blocked.len();
        if again + released.dead.len() == 0 || !self.kept.load(Ordering::Relaxed) {
            return;
        }
        let mut minutes = self.minutes.lock().expect("not poisoned");
        let minute = minutes.entry(minute_of(now)).or_default();
        for (topic, _) in released.retried.iter().chain(&released.blocked) {
            minute.of(topic).again += 1;
        }
        for (topic, _) in &released.dead {
            minute.of(topic).dead += 1;
        }
    }

    /// Everything counted, by minute, oldest first; the tally is empty after.
    pub fn take(&self) -> BTreeMap<u64, Minute> {
        std::mem::take(&mut *self.minutes.lock().expect("not poisoned"))
    }

    /// Puts back `minutes` that were taken and not written, but those older than
    /// [`MOST_MINUTES`] before unix minute `now`: while Redis does not answer, the tally holds
    /// the last hour.
    pub fn put_back(&self, minutes: BTreeMap<u64, Minute>, now: u64) {
        let oldest = now.saturating_sub(MOST_MINUTES);
        let mut kept = self.minutes.lock().expect("not poisoned");
        for (at, minute) in minutes.into_iter().filter(|(at, _)| *at >= oldest) {
            let into = kept.entry(at).or_default();
            for (topic, counts) in &minute.topics {
                into.of(topic).add(counts);
            }
            into.others.add(&minute.others);
        }
    }
}

/// The lags at `now` of `count` jobs whose due times are spread evenly from `first` to `last`
/// (unix seconds), in seconds.
pub fn lags(first: f64, last: f64, count: usize, now: f64) -> impl Iterator<Item = f64> {
    (0..count).map(move |index| {
        let share = if count > 1 {
            index as f64 / (count - 1) as f64
        } else {
            0.0
        };
        (now - (first + (last - first) * share)).max(0.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use delayer_wire::JobId;

    fn batch(moved: &[(&str, usize)], first: f64, last: f64) -> Batch {
        Batch {
            moved: moved
                .iter()
                .map(|(topic, count)| (Topic::from(*topic), vec![JobId::from("id"); *count]))
                .collect(),
            first_due: Some(first),
            last_due: Some(last),
            ..Batch::default()
        }
    }

    #[test]
    fn moves_and_releases_are_counted_in_the_minute_of_redis_clock() {
        let tally = Tally::default();
        tally.moved(&batch(&[("a", 1)], 59.0, 59.0), 60.0);
        assert!(tally.take().is_empty(), "nothing counted before keep");
        tally.keep();
        tally.moved(&batch(&[("a", 3), ("b", 1)], 59.0, 59.9985), 60.0);
        tally.moved(&batch(&[("a", 2)], 119.0, 119.0), 119.5);
        let released = Released {
            retried: vec![("a".into(), "x".into())],
            dead: vec![("b".into(), "y".into()), ("b".into(), "z".into())],
            ..Released::default()
        };
        tally.released(&released, 125.0);
        let minutes = tally.take();
        assert!(tally.take().is_empty(), "taken whole");
        let a = &minutes[&1].topics[&Topic::from("a")];
        assert_eq!(a.moved, 5);
        // Lags of 1 s, 0.5 s and 1.5 ms; then 0.5 s twice.
        assert_eq!(a.lags[lag_bucket(1.0)], 1);
        assert_eq!(a.lags[lag_bucket(0.5)], 3);
        assert_eq!(a.lags[lag_bucket(0.002)], 1);
        assert_eq!(minutes[&2].topics[&Topic::from("a")].again, 1);
        assert_eq!(minutes[&2].topics[&Topic::from("b")].dead, 2);
        let order: Vec<_> = minutes[&1]
            .busiest_first()
            .iter()
            .map(|(topic, _)| topic.cloned())
            .collect();
        assert_eq!(order, [Some("a".into()), Some("b".into())]);
    }

    #[test]
    fn topics_beyond_the_most_are_summed_and_what_is_put_back_is_an_hour_at_most() {
        let tally = Tally::default();
        tally.keep();
        for topic in 0..MOST_TOPICS + 5 {
            tally.moved(&batch(&[(&topic.to_string(), 1)], 0.0, 0.0), 60.0);
        }
        let minutes = tally.take();
        assert_eq!(minutes[&1].topics.len(), MOST_TOPICS);
        assert_eq!(minutes[&1].others.moved, 5);
        assert_eq!(minutes[&1].busiest_first().last().unwrap().0, None);
        tally.put_back(minutes, 1 + MOST_MINUTES);
        tally.moved(&batch(&[("0", 1)], 0.0, 0.0), 60.0);
        assert_eq!(tally.take()[&1].topics[&Topic::from("0")].moved, 2);
        tally.moved(&batch(&[("0", 1)], 0.0, 0.0), 60.0);
        tally.put_back(tally.take(), 2 + MOST_MINUTES);
        assert!(tally.take().is_empty(), "older than an hour: dropped");
    }
}
