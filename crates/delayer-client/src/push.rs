//! A push being built: `client.push(topic, body).delay(d).await` returns the new job's id.

use std::collections::hash_map::RandomState;
use std::future::{Future, IntoFuture};
use std::hash::BuildHasher;
use std::pin::Pin;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::scripts::push::NewJob;
use crate::time::{to_unix, unix_now};

/// How far in the past an [`at`](Push::at) time may be and still mean "now": a time computed a
/// moment ago must not fail for the microseconds that passed since.
const PAST_TOLERANCE: Duration = Duration::from_secs(1);

/// The longest delay a push takes: 2^31 - 1 s, about 68 years (go-delay-queue's limit). Longer is
/// a mistake (milliseconds given for seconds), and Redis refuses to expire a bucket much later.
pub const MAX_DELAY: Duration = Duration::from_secs(i32::MAX as u64);

/// A job to push; `.await` it (or call [`send`](Push::send)).
#[must_use = "a push does nothing until it is awaited"]
pub struct Push<'a> {
    client: &'a Client,
    topic: String,
    body: Vec<u8>,
    id: Option<String>,
    due: Due,
}

enum Due {
    In(Duration),
    At(SystemTime),
}

impl<'a> Push<'a> {
    pub(crate) fn new(client: &'a Client, topic: String, body: Vec<u8>) -> Push<'a> {
        Push {
            client,
            topic,
            body,
            id: None,
            due: Due::In(Duration::ZERO),
        }
    }

    /// Due `delay` from now (delayq's ProcessIn), to the millisecond.
    pub fn delay(mut self, delay: Duration) -> Push<'a> {
        self.due = Due::In(delay);
        self
    }

    /// Due at `time` (delayq's ProcessAt), to the millisecond; a time in the past is an error.
    pub fn at(mut self, time: SystemTime) -> Push<'a> {
        self.due = Due::At(time);
        self
    }

    /// The job's id; without one, a new unique id is made. Pushing an id that exists replaces
    /// that job (as with the legacy clients).
    pub fn id(mut self, id: impl Into<String>) -> Push<'a> {
        self.id = Some(id.into());
        self
    }

    /// Pushes the job and returns its id.
    pub async fn send(self) -> Result<String> {
        crate::client::check_topic_in(self.client.settings().layout, &self.topic)?;
        if self.body.is_empty() {
            return Err(Error::EmptyBody);
        }
        let limit = self.client.settings().max_body_bytes;
        if self.body.len() > limit {
            return Err(Error::BodyTooLarge {
                size: self.body.len(),
                limit,
            });
        }
        let id = match self.id {
            Some(id) if id.is_empty() => return Err(Error::EmptyId),
            Some(id) => id,
            None => unique_id(),
        };
        let now = unix_now();
        let delay = match self.due {
            Due::In(delay) => delay.as_secs_f64(),
            Due::At(time) => {
                let delay = to_unix(time) - now;
                if delay < -PAST_TOLERANCE.as_secs_f64() {
                    return Err(Error::InThePast(time));
                }
                delay.max(0.0)
            }
        };
        if delay > MAX_DELAY.as_secs_f64() {
            return Err(Error::TooFar(delay));
        }
        // As the legacy clients set it: the delay (whole seconds, rounded up) plus the lifetime.
        let lifetime = self.client.settings().ready_max_lifetime.as_secs();
        let ttl_seconds = (delay.ceil() as u64).saturating_add(lifetime);
        let job = NewJob {
            id: &id,
            topic: &self.topic,
            body: &self.body,
            due: now + delay,
            ttl_seconds,
            delay,
        };
        self.client.push_validated(&job).await?;
        Ok(id)
    }
}

impl<'a> IntoFuture for Push<'a> {
    type Output = Result<String>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<String>> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.send())
    }
}

/// 32 hex digits, like the md5 ids the legacy clients' users make: the time in nanoseconds, then a
/// hash of a per-process random key, the process id and a counter, so that ids made at the same
/// nanosecond by other processes or hosts differ too.
pub(crate) fn unique_id() -> String {
    static KEY: OnceLock<RandomState> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64);
    let salt = KEY
        .get_or_init(RandomState::new)
        .hash_one((std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
    format!("{nanos:016x}{salt:016x}")
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::unique_id;

    #[test]
    fn unique_ids_are_32_hex_digits_and_unique() {
        let ids: HashSet<String> = (0..10_000).map(|_| unique_id()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(
            ids.iter()
                .all(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        );
    }
}
