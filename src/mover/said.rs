//! What the loops have said of failures, by subject (`None`: Redis itself, or a cluster's
//! registry; `Some`: a cluster topic): a lost reply each time, anything else once per cause, when
//! it begins and when it ends; and the wait before the next try, which doubles while the failures
//! go on.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Mutex;
use std::time::Duration;

use deadpool_redis::redis::RedisError;

use super::log;
use crate::redis::{Failure, FailureKind, RedisSettings, reply_may_be_lost, slot_moving};

/// The first wait after a failed poll; it doubles up to [`MAX_RETRY_WAIT`].
const FIRST_RETRY_WAIT: Duration = Duration::from_millis(50);
/// Capped well under a second so what fell due during an outage moves within a second of Redis
/// returning.
const MAX_RETRY_WAIT: Duration = Duration::from_millis(500);

/// A poll that failed: why, and how to say it.
pub(super) struct Failed {
    pub failure: Failure,
    /// The failed call was a script call whose reply never came: it may have moved jobs.
    pub lost_reply: bool,
    /// Redis refused the call because its slot is moving to another master (a resharding):
    /// nothing is amiss. Redis's own words.
    pub slot_moving: Option<String>,
}

impl Failed {
    /// A failure of no move: no connection, or the cluster's registry could not be read.
    pub fn not_a_move(failure: Failure) -> Failed {
        Failed {
            failure,
            lost_reply: false,
            slot_moving: None,
        }
    }

    /// A script call failed with `error`.
    pub fn call(error: &RedisError, redis: &RedisSettings) -> Failed {
        Failed {
            failure: Failure::of(error, redis),
            lost_reply: reply_may_be_lost(error),
            slot_moving: slot_moving(error).then(|| error.to_string()),
        }
    }
}

/// What has been said, by subject.
pub(super) struct Said {
    /// Where Redis is, for the lines that say a failure ended.
    address: String,
    batch_size: usize,
    failing: Mutex<HashMap<Option<String>, Failing>>,
    /// Redis refuses the release of lapsed reservations this way (jobs still move).
    release_refused: Mutex<HashMap<Option<String>, FailureKind>>,
}

/// A subject whose polls fail.
struct Failing {
    /// The cause said last; `None` once Redis answered again, before the poll ended well.
    said: Option<FailureKind>,
    /// The wait before the next try.
    wait: Duration,
}

impl Said {
    pub(super) fn new(redis: &RedisSettings, batch_size: usize) -> Said {
        Said {
            address: redis.address(),
            batch_size,
            failing: Mutex::default(),
            release_refused: Mutex::default(),
        }
    }

    /// A poll of `subject` failed: says so (a lost reply every time, anything else once per
    /// cause), and returns the wait before the next try.
    pub(super) fn failed(&self, subject: Option<&str>, failed: &Failed) -> Duration {
        let kind = failed.failure.kind;
        let (new, wait) = match self.lock().entry(subject.map(str::to_string)) {
            Entry::Vacant(vacant) => {
                vacant.insert(Failing {
                    said: Some(kind),
                    wait: FIRST_RETRY_WAIT,
                });
                (true, FIRST_RETRY_WAIT)
            }
            Entry::Occupied(mut occupied) => {
                let failing = occupied.get_mut();
                let new = failing.said.replace(kind) != Some(kind);
                failing.wait = (failing.wait * 2).min(MAX_RETRY_WAIT);
                (new, failing.wait)
            }
        };
        if failed.lost_reply {
            log::lost_reply(&failed.failure, subject, self.batch_size);
        } else if new {
            log::failing(&failed.failure, subject, failed.slot_moving.as_deref());
        }
        wait
    }

    /// Redis answered a call of a poll of `subject`. For Redis itself, a failure is over: said
    /// at once, before what the poll moved is logged. (A topic's is said once its poll ended
    /// well: see [`drained`](Said::drained).)
    pub(super) fn answered(&self, subject: Option<&str>) {
        if subject.is_none() {
            self.ended(None, false);
        }
    }

    /// A poll of `subject` ended well: its failure, if any, is over, and the next one waits
    /// from the start again.
    pub(super) fn drained(&self, subject: Option<&str>) {
        self.ended(subject, true);
    }

    fn ended(&self, subject: Option<&str>, forget: bool) {
        let said = {
            let mut failing = self.lock();
            if failing.is_empty() {
                return;
            }
            let key = subject.map(str::to_string);
            let said = failing
                .get_mut(&key)
                .and_then(|failing| failing.said.take());
            if forget {
                failing.remove(&key);
            }
            said
        };
        if let Some(kind) = said {
            log::recovered(kind, &self.address, subject);
        }
    }

    /// Redis refused to release `subject`'s lapsed reservations (said once per cause).
    pub(super) fn release_refused(&self, subject: Option<&str>, failure: &Failure) {
        let mut refused = self.release_refused.lock().expect("not poisoned");
        if refused.insert(subject.map(str::to_string), failure.kind) != Some(failure.kind) {
            log::release_refused(failure, subject);
        }
    }

    /// Redis released `subject`'s lapsed reservations (said when it had refused).
    pub(super) fn release_works(&self, subject: Option<&str>) {
        let mut refused = self.release_refused.lock().expect("not poisoned");
        if !refused.is_empty() && refused.remove(&subject.map(str::to_string)).is_some() {
            log::release_works(subject);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Option<String>, Failing>> {
        self.failing.lock().expect("not poisoned")
    }
}
