//! Outages: what the loops log of failing polls, and when. By subject (`None`: Redis itself, or a
//! cluster's registry; `Some`: a cluster topic): a lost reply every time, anything else once when
//! the outage begins (or changes kind) and once when it ends; and the wait before the next try,
//! which doubles while the outage goes on. Redis refusing to release lapsed reservations (while
//! jobs still move) is told the same way: once when it begins, once when it ends.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Mutex;
use std::time::Duration;

use deadpool_redis::redis::RedisError;
use tracing::{error, info};

use crate::redis::{Failure, FailureKind, RedisSettings, reply_may_be_lost, slot_moving};
use crate::text::escape;

/// The first wait after a failed poll; it doubles up to [`MAX_RETRY_WAIT`].
const FIRST_RETRY_WAIT: Duration = Duration::from_millis(50);
/// Capped well under a second so what fell due during an outage moves within a second of Redis
/// returning.
const MAX_RETRY_WAIT: Duration = Duration::from_millis(500);

/// A poll that failed: the failure, and what the failed call means for the log.
pub(super) struct PollFailure {
    pub failure: Failure,
    /// The failed call was a script call whose reply never came: it may have moved jobs.
    pub lost_reply: bool,
    /// Redis refused the call because its slot is moving to another master (a resharding):
    /// nothing is amiss. Redis's own words.
    pub slot_moving: Option<String>,
}

impl PollFailure {
    /// A failure of no move: no connection, or the cluster's registry could not be read.
    pub fn not_a_move(failure: Failure) -> PollFailure {
        PollFailure {
            failure,
            lost_reply: false,
            slot_moving: None,
        }
    }

    /// A script call failed with `error`.
    pub fn call(error: &RedisError, redis: &RedisSettings) -> PollFailure {
        PollFailure {
            failure: Failure::of(error, redis),
            lost_reply: reply_may_be_lost(error),
            slot_moving: slot_moving(error).then(|| error.to_string()),
        }
    }
}

/// The outages under way, by subject, and the refused releases.
pub(super) struct Outages {
    /// Where Redis is, for the lines that say an outage ended.
    address: String,
    batch_size: usize,
    outages: Mutex<HashMap<Option<String>, Outage>>,
    /// Redis refuses the release of lapsed reservations this way (jobs still move).
    release_refused: Mutex<HashMap<Option<String>, FailureKind>>,
}

/// The outage of a subject whose polls fail.
struct Outage {
    /// The kind logged last; `None` once Redis answered again, before the poll ended well.
    logged: Option<FailureKind>,
    /// The wait before the next try.
    wait: Duration,
}

impl Outages {
    pub(super) fn new(redis: &RedisSettings, batch_size: usize) -> Outages {
        Outages {
            address: redis.address(),
            batch_size,
            outages: Mutex::default(),
            release_refused: Mutex::default(),
        }
    }

    /// A poll of `subject` failed: logs it (a lost reply every time, anything else once per
    /// kind), and returns the wait before the next try.
    pub(super) fn failed(&self, subject: Option<&str>, failed: &PollFailure) -> Duration {
        let kind = failed.failure.kind;
        let (new, wait) = match self.lock().entry(subject.map(str::to_string)) {
            Entry::Vacant(vacant) => {
                vacant.insert(Outage {
                    logged: Some(kind),
                    wait: FIRST_RETRY_WAIT,
                });
                (true, FIRST_RETRY_WAIT)
            }
            Entry::Occupied(mut occupied) => {
                let outage = occupied.get_mut();
                let new = outage.logged.replace(kind) != Some(kind);
                outage.wait = (outage.wait * 2).min(MAX_RETRY_WAIT);
                (new, outage.wait)
            }
        };
        if failed.lost_reply {
            log_lost_reply(&failed.failure, subject, self.batch_size);
        } else if new {
            log_begun(&failed.failure, subject, failed.slot_moving.as_deref());
        }
        wait
    }

    /// Redis answered a call of a poll of `subject`. For Redis itself, an outage is over: said
    /// at once, before what the poll moved is logged. (A topic's is said once its poll ended
    /// well: see [`succeeded`](Outages::succeeded).)
    pub(super) fn answered(&self, subject: Option<&str>) {
        if subject.is_none() {
            self.ended(None, false);
        }
    }

    /// A poll of `subject` ended well: its outage, if any, is over, and the next one waits from
    /// the start again.
    pub(super) fn succeeded(&self, subject: Option<&str>) {
        self.ended(subject, true);
    }

    fn ended(&self, subject: Option<&str>, forget: bool) {
        let logged = {
            let mut outages = self.lock();
            if outages.is_empty() {
                return;
            }
            let key = subject.map(str::to_string);
            let logged = outages
                .get_mut(&key)
                .and_then(|outage| outage.logged.take());
            if forget {
                outages.remove(&key);
            }
            logged
        };
        if let Some(kind) = logged {
            log_ended(kind, &self.address, subject);
        }
    }

    /// Redis refused to release `subject`'s lapsed reservations (said once per kind).
    pub(super) fn release_refused(&self, subject: Option<&str>, failure: &Failure) {
        let mut refused = self.release_refused.lock().expect("not poisoned");
        if refused.insert(subject.map(str::to_string), failure.kind) != Some(failure.kind) {
            log_release_refused(failure, subject);
        }
    }

    /// Redis released `subject`'s lapsed reservations (said when it had refused).
    pub(super) fn release_works(&self, subject: Option<&str>) {
        let mut refused = self.release_refused.lock().expect("not poisoned");
        if !refused.is_empty() && refused.remove(&subject.map(str::to_string)).is_some() {
            log_release_works(subject);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Option<String>, Outage>> {
        self.outages.lock().expect("not poisoned")
    }
}

/// Logs a script call whose reply never came, of every topic's jobs or of `topic`'s: every one is
/// said, since each may hide moved jobs that no other line lists.
fn log_lost_reply(failure: &Failure, topic: Option<&str>, batch_size: usize) {
    let of_topic = topic.map_or_else(String::new, |topic| {
        format!(" of topic {}", escape::field(topic))
    });
    error!(
        "The reply to a move{of_topic} never came ({failure}): it may have moved up to \
         {batch_size} jobs that no \"Job is ready\" line lists; {}",
        failure.kind.waiting_for()
    );
}

/// Logs the start of an outage of every topic's poll, or of `topic`'s; `slot_moving` holds
/// Redis's words when the topic's slot is moving to another master (a resharding: nothing is
/// amiss).
fn log_begun(failure: &Failure, topic: Option<&str>, slot_moving: Option<&str>) {
    let waiting = failure.kind.waiting_for();
    match (topic, slot_moving) {
        (None, _) => error!("{failure}; {waiting}"),
        (Some(topic), Some(moving)) => info!(
            "Topic {} waits while its slot moves to another master ({moving}); tried again",
            escape::field(topic)
        ),
        (Some(topic), None) => error!(
            "Topic {} cannot move: {failure}; {waiting}",
            escape::field(topic)
        ),
    }
}

/// Logs the end of an outage of `kind` (of every topic's poll, or of `topic`'s).
fn log_ended(kind: FailureKind, address: &str, topic: Option<&str>) {
    let recovered = kind.recovered(address);
    match topic {
        None => info!("{recovered}"),
        Some(topic) => info!("{recovered}: topic {} moves again", escape::field(topic)),
    }
}

/// Logs that Redis refuses to deliver lapsed reservations again (of every topic, or of `topic`),
/// while jobs still move.
fn log_release_refused(failure: &Failure, topic: Option<&str>) {
    let of_topic = topic.map_or_else(String::new, |topic| {
        format!(" (topic {})", escape::field(topic))
    });
    error!(
        "Jobs whose reservation lapsed cannot be delivered again{of_topic} ({failure}); jobs \
         still move as they fall due"
    );
}

/// Logs that lapsed reservations are delivered again after a refusal.
fn log_release_works(topic: Option<&str>) {
    match topic {
        None => info!("Jobs whose reservation lapsed are delivered again"),
        Some(topic) => info!(
            "Jobs whose reservation lapsed are delivered again (topic {})",
            escape::field(topic)
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// The lines logged while `f` runs, one string each.
    fn logged(f: impl FnOnce()) -> Vec<String> {
        #[derive(Clone, Default)]
        struct Lines(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Lines {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .without_time()
            .with_target(false)
            .with_level(false)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        text.lines().map(str::to_string).collect()
    }

    fn failed(kind: FailureKind) -> PollFailure {
        PollFailure::not_a_move(Failure {
            kind,
            message: format!("{kind:?}"),
        })
    }

    #[test]
    fn an_outage_is_said_when_it_begins_and_when_it_ends_and_waits_double() {
        let outages = Outages::new(&RedisSettings::default(), 10);
        let mut waits = Vec::new();
        let lines = logged(|| {
            for _ in 0..6 {
                waits.push(outages.failed(None, &failed(FailureKind::Unreachable)));
            }
            outages.answered(None);
            outages.succeeded(None);
            waits.push(outages.failed(None, &failed(FailureKind::Unreachable)));
        });
        let millis: Vec<u128> = waits.iter().map(Duration::as_millis).collect();
        assert_eq!(millis, [50, 100, 200, 400, 500, 500, 50]);
        assert_eq!(
            lines,
            [
                "Unreachable; retrying until it answers",
                "Redis at :0 answers again",
                "Unreachable; retrying until it answers",
            ]
        );
    }

    #[test]
    fn a_new_kind_is_said_again_and_a_topic_ends_only_with_a_good_poll() {
        let outages = Outages::new(&RedisSettings::default(), 10);
        let lines = logged(|| {
            outages.failed(Some("t"), &failed(FailureKind::Unreachable));
            outages.failed(Some("t"), &failed(FailureKind::OutOfMemory));
            outages.answered(Some("t"));
            outages.succeeded(Some("t"));
            outages.succeeded(Some("t"));
        });
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert!(lines[0].starts_with("Topic t cannot move: Unreachable; "));
        assert!(lines[1].starts_with("Topic t cannot move: OutOfMemory; "));
        assert_eq!(
            lines[2],
            "Redis at :0 accepts writes again: topic t moves again"
        );
    }
}
