//! Pushing and removing jobs, as the legacy clients do: `client.push(topic, body).delay(d).await`
//! returns the new job's id.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use super::{Client, check_id, check_topic_in};
use crate::error::{Error, Result};
use crate::job::unique_id;
use crate::name::{JobId, Topic};
use crate::scripts::push::NewJob;
use crate::settings::MAX_DELAY;
use crate::time::{to_unix, unix_now};

/// What [`Client::remove`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removed {
    /// It was waiting: it is gone, never delivered.
    Waiting,
    /// It had fallen due already: its data is gone, so a consumer that takes it finds nothing
    /// (the legacy pop reports it expired; reserve skips it).
    Due,
    /// There was no such job.
    Unknown,
}

impl Client {
    /// A new job on `topic`, due at once unless [`Push::delay`] or [`Push::at`] say otherwise;
    /// `.await` it for its id.
    pub fn push(&self, topic: impl Into<Topic>, body: impl Into<Vec<u8>>) -> Push<'_> {
        Push::new(self, topic.into(), body.into())
    }

    /// Writes a job that [`Push`] validated.
    pub(crate) async fn push_validated(
        &self,
        job: &crate::scripts::push::NewJob<'_>,
    ) -> Result<f64> {
        let mut connection = self.connection().await?;
        let keys = self.keys_for(job.topic);
        self.inner
            .scripts
            .push
            .run(&mut connection, &keys, job)
            .await
            .map_err(|error| Error::about_key(error, keys.bucket(job.id)))
    }

    /// Removes a job wherever it is, as the legacy clients do (`ZREM` from the pool and `DEL` of
    /// its data, and its reservation if any), and says what it found.
    pub async fn remove(&self, id: impl AsRef<[u8]>) -> Result<Removed> {
        let id = id.as_ref();
        check_id(id)?;
        let Some(keys) = self.keys_of(id, None).await? else {
            return Ok(Removed::Unknown);
        };
        let (from_pool, data): (i64, i64) = redis::pipe()
            .atomic()
            .zrem(keys.pool(), id)
            .del(keys.bucket(id))
            .zrem(keys.reserved(), id)
            .ignore()
            .query_async(&mut self.connection().await?)
            .await?;
        Ok(match (from_pool, data) {
            (1, 1) => Removed::Waiting,
            (_, 1) => Removed::Due,
            _ => Removed::Unknown,
        })
    }
}

/// How far in the past an [`at`](Push::at) time may be and still mean "now": a time computed a
/// moment ago must not fail for the microseconds that passed since.
const PAST_TOLERANCE: Duration = Duration::from_secs(1);

/// A job to push; `.await` it (or call [`send`](Push::send)).
#[must_use = "a push does nothing until it is awaited"]
pub struct Push<'a> {
    client: &'a Client,
    topic: Topic,
    body: Vec<u8>,
    id: Option<JobId>,
    due: Due,
}

enum Due {
    In(Duration),
    At(SystemTime),
}

impl<'a> Push<'a> {
    pub(crate) fn new(client: &'a Client, topic: Topic, body: Vec<u8>) -> Push<'a> {
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
    pub fn id(mut self, id: impl Into<JobId>) -> Push<'a> {
        self.id = Some(id.into());
        self
    }

    /// Pushes the job and returns its id.
    pub async fn send(self) -> Result<JobId> {
        check_topic_in(self.client.layout(), self.topic.as_bytes())?;
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
            None => unique_id().into(),
        };
        // A delay counts from now by Redis's clock; a time is the caller's, taken as it is.
        let (delay, due) = match self.due {
            Due::In(delay) => (delay.as_secs_f64(), None),
            Due::At(time) => {
                let delay = to_unix(time) - unix_now();
                if delay < -PAST_TOLERANCE.as_secs_f64() {
                    return Err(Error::InThePast(time));
                }
                (delay.max(0.0), Some(to_unix(time)))
            }
        };
        if delay > MAX_DELAY.as_secs_f64() {
            return Err(Error::TooFar(delay));
        }
        // As the legacy clients set it: the delay (whole seconds, rounded up) plus the lifetime.
        let lifetime = self.client.settings().ready_max_lifetime.as_secs();
        let ttl_seconds = (delay.ceil() as u64).saturating_add(lifetime);
        let job = NewJob {
            id: id.as_bytes(),
            topic: self.topic.as_bytes(),
            body: &self.body,
            due,
            ttl_seconds,
            delay,
        };
        self.client.push_validated(&job).await?;
        Ok(id)
    }
}

impl<'a> IntoFuture for Push<'a> {
    type Output = Result<JobId>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<JobId>> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.send())
    }
}
