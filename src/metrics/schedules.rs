//! The schedules' families: what Redis holds of each schedule (the counts the claim script keeps
//! in its hash, its next tick, its pause), as the last census read it.
//!
//! The counts are exposed as counters (`_total`), not gauges: the claim script only adds to them
//! (HINCRBY), so `rate()` and `increase()` work on them, and a schedule removed and made again
//! starts from 0, which Prometheus takes for a counter reset. They are the sums of every daemon's
//! claims, so each daemon reports the same values (as it does `ready_jobs`): aggregate them with
//! `max`, not `sum`.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use delayer_client::inspector::{ScheduleList, Stored};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// The most schedules with series of their own unless `[http] max_listed_schedules` says
/// otherwise.
pub const DEFAULT_LISTED_SCHEDULES: usize = 500;

/// The schedules in Redis, as a census read them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schedules {
    /// Every schedule, those that cannot tick included.
    pub count: u64,
    /// Of those, the paused.
    pub paused: u64,
    /// Of those, the ones that cannot tick: their hash does not read, or their expression or
    /// zone cannot be used.
    pub unusable: u64,
    /// Of those whose hash reads, the first by name (at most `[http] max_listed_schedules`), each
    /// with its state.
    pub listed: Vec<Stored>,
    /// Those whose hash reads, beyond `listed`.
    pub unlisted: u64,
}

impl Schedules {
    /// `all` counted, and the first `most` that read kept: by name, so that a schedule keeps its
    /// series from one scrape to the next.
    pub fn new(all: ScheduleList, most: usize) -> Schedules {
        let ScheduleList {
            readable: mut listed,
            unreadable,
        } = all;
        let paused = listed.iter().filter(|s| s.paused_since.is_some()).count();
        let unusable = listed
            .iter()
            .filter(|s| s.definition.check(s.next.unwrap_or_default()).is_err())
            .count()
            + unreadable.len();
        let count = listed.len() + unreadable.len();
        let unlisted = listed.len().saturating_sub(most);
        listed.truncate(most);
        Schedules {
            count: count as u64,
            paused: paused as u64,
            unusable: unusable as u64,
            listed,
            unlisted: unlisted as u64,
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ScheduleLabel {
    schedule: String,
}

/// The schedules' families, written at each scrape from the last census's reading.
#[derive(Debug)]
pub struct ScheduleFamilies {
    /// The last census's reading; none when it could not read the schedules (a Redis user not
    /// allowed HGETALL, say), and the families are left out.
    held: Mutex<Option<Arc<Schedules>>>,
    /// The most schedules with series of their own (`[http] max_listed_schedules`).
    listed: AtomicUsize,
}

impl Default for ScheduleFamilies {
    fn default() -> ScheduleFamilies {
        ScheduleFamilies {
            held: Mutex::new(None),
            listed: AtomicUsize::new(DEFAULT_LISTED_SCHEDULES),
        }
    }
}

impl ScheduleFamilies {
    /// What a census read of the schedules.
    pub fn hold(&self, schedules: Option<Arc<Schedules>>) {
        *self.held.lock().expect("not poisoned") = schedules;
    }

    /// The most schedules with series of their own from the next census on.
    pub fn set_listed(&self, most: usize) {
        self.listed.store(most, Ordering::Relaxed);
    }

    /// How many schedules have series of their own, at most.
    pub fn listed(&self) -> usize {
        self.listed.load(Ordering::Relaxed)
    }
}

/// A count from a schedule's hash.
type Count = fn(&Stored) -> u64;

const COUNTERS: [(&str, &str, Count); 5] = [
    (
        "schedule_ticks_fired",
        "Ticks of a schedule that pushed a job, caught up ones included (by every daemon)",
        |s| s.fired,
    ),
    (
        "schedule_ticks_skipped",
        "Ticks of a schedule skipped by its overlap policy: its last job was still there",
        |s| s.skipped,
    ),
    (
        "schedule_ticks_missed",
        "Ticks of a schedule that passed unclaimed and that its catch-up policy left without a job",
        |s| s.missed,
    ),
    (
        "schedule_ticks_caught_up",
        "Ticks of a schedule that passed unclaimed and got a job late, by its catch-up policy",
        |s| s.caught_up,
    ),
    (
        "schedule_runs",
        "Jobs of a schedule pushed by a run, outside its ticks",
        |s| s.runs,
    ),
];

impl Collector for ScheduleFamilies {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let Some(held) = self.held.lock().expect("not poisoned").clone() else {
            return Ok(());
        };
        let totals = [
            ("schedules", "Schedules in Redis", held.count),
            ("schedules_paused", "Schedules paused", held.paused),
            (
                "schedules_unusable",
                "Schedules no daemon claims ticks of: their hash in Redis does not read, or their \
                 cron or zone cannot be used (a newer version's, or a hand edit); the log and \
                 delayer schedule list say why",
                held.unusable,
            ),
            (
                "schedules_unlisted",
                "Schedules without series of their own (beyond [http] max_listed_schedules)",
                held.unlisted,
            ),
        ];
        for (name, help, value) in totals {
            let metric = ConstGauge::new(value);
            metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)?;
        }
        let labels: Vec<ScheduleLabel> = held
            .listed
            .iter()
            .map(|s| ScheduleLabel {
                schedule: s.definition.name.clone(),
            })
            .collect();
        for (name, help, count) in COUNTERS {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (stored, label) in held.listed.iter().zip(&labels) {
                ConstCounter::new(count(stored)).encode(family.encode_family(label)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "schedule_next_tick_timestamp_seconds",
            "When a schedule ticks next (unix time; none while it is paused)",
            None,
            MetricType::Gauge,
        )?;
        for (stored, label) in held.listed.iter().zip(&labels) {
            if let (Some(next), None) = (stored.next, stored.paused_since) {
                ConstGauge::new(next as f64 / 1000.0).encode(family.encode_family(label)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "schedule_paused",
            "1 for a paused schedule, else 0",
            None,
            MetricType::Gauge,
        )?;
        for (stored, label) in held.listed.iter().zip(&labels) {
            let paused = i64::from(stored.paused_since.is_some());
            ConstGauge::new(paused).encode(family.encode_family(label)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{ScheduleFamilies, Schedules};
    use delayer_client::inspector::{Definition, ScheduleList, Stored};
    use delayer_wire::schedule::Invalid;
    use prometheus_client::encoding::text::encode_registry;
    use prometheus_client::registry::Registry;

    fn stored(name: &str, paused: bool) -> Stored {
        Stored {
            paused_since: paused.then_some(1.0),
            ..Stored::new(Definition::new(name, "every 1s", "t"), Some(1_000))
        }
    }

    fn list(readable: Vec<Stored>) -> ScheduleList {
        ScheduleList {
            readable,
            unreadable: Vec::new(),
        }
    }

    #[test]
    fn counts_every_schedule_and_keeps_the_first_by_name() {
        let all = vec![stored("a", false), stored("b", true), stored("c", true)];
        let schedules = Schedules::new(list(all), 2);
        assert_eq!((schedules.count, schedules.paused), (3, 2));
        let names: Vec<&str> = schedules
            .listed
            .iter()
            .map(|s| s.definition.name.as_str())
            .collect();
        assert_eq!(names, ["a", "b"]);
        assert!(Schedules::new(list(Vec::new()), 2).listed.is_empty());
    }

    #[test]
    fn the_schedules_that_cannot_tick_are_counted_and_the_others_keep_their_series() {
        let mut zone = stored("odd-zone", false);
        zone.definition.zone = "Mars/Olympus".into();
        let all = ScheduleList {
            readable: vec![stored("a", false), zone],
            unreadable: vec![Invalid {
                schedule: "bad".into(),
                field: "catch_up",
                why: "bogus".into(),
            }],
        };
        let schedules = Schedules::new(all, 1);
        assert_eq!(
            (schedules.count, schedules.unusable, schedules.unlisted),
            (3, 2, 1)
        );
        assert_eq!(schedules.listed[0].definition.name, "a");
    }

    #[test]
    fn writes_the_counts_as_counters_and_nothing_before_a_reading() {
        let families = Arc::new(ScheduleFamilies::default());
        let mut registry = Registry::with_prefix("delayer");
        registry.register_collector(Box::new(families.clone()));
        let text = || {
            let mut text = String::new();
            encode_registry(&mut text, &registry).unwrap();
            text
        };
        assert_eq!(text(), "", "no reading: no families");

        let mut ticking = stored("ticking", false);
        (ticking.fired, ticking.skipped, ticking.missed) = (7, 2, 3);
        (ticking.caught_up, ticking.runs, ticking.next) = (1, 4, Some(1_795_000_000_250));
        let all = vec![ticking, stored("paused", true), stored("unlisted", false)];
        families.hold(Some(Arc::new(Schedules::new(list(all), 2))));
        let text = text();
        for line in [
            "delayer_schedules 3\n",
            "delayer_schedules_paused 1\n",
            "delayer_schedules_unlisted 1\n",
            "delayer_schedules_unusable 0\n",
            "# TYPE delayer_schedule_ticks_fired counter\n",
            "delayer_schedule_ticks_fired_total{schedule=\"ticking\"} 7\n",
            "delayer_schedule_ticks_skipped_total{schedule=\"ticking\"} 2\n",
            "delayer_schedule_ticks_missed_total{schedule=\"ticking\"} 3\n",
            "delayer_schedule_ticks_caught_up_total{schedule=\"ticking\"} 1\n",
            "delayer_schedule_runs_total{schedule=\"ticking\"} 4\n",
            "delayer_schedule_ticks_fired_total{schedule=\"paused\"} 0\n",
            "delayer_schedule_next_tick_timestamp_seconds{schedule=\"ticking\"} 1795000000.25\n",
            "delayer_schedule_paused{schedule=\"ticking\"} 0\n",
            "delayer_schedule_paused{schedule=\"paused\"} 1\n",
        ] {
            assert!(text.contains(line), "{line}in:\n{text}");
        }
        assert!(!text.contains("unlisted\""), "{text}");
        assert!(
            !text.contains("next_tick_timestamp_seconds{schedule=\"paused\"}"),
            "{text}"
        );
    }
}
