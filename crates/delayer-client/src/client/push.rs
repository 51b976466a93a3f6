//! Pushing and removing jobs, as the legacy clients do: `client.push(topic, body).delay(d).await`
//! returns the new job's id.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use super::{Client, check_id};
use crate::error::{Error, Result};
use delayer_wire::history::field;
use delayer_wire::name::{JobId, Topic};
use delayer_wire::push::{Failure, NewPush};

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

    /// Removes a job wherever it is, as the legacy clients do (`ZREM` from the pool and `DEL` of
    /// its data, and its reservation if any), and says what it found.
    pub async fn remove(&self, id: impl AsRef<[u8]>) -> Result<Removed> {
        let id = id.as_ref();
        check_id(id)?;
        let Some(keys) = self.keys_of(id, None).await? else {
            return Ok(Removed::Unknown);
        };
        if let Some(compact) = keys.compact() {
            let mut connection = self.connection().await?;
            let scripts = &self.inner.scripts;
            if (scripts.compact_job)
                .remove(&mut connection, &keys, compact, id)
                .await?
            {
                return Ok(Removed::Waiting);
            }
        }
        let (from_pool, data): (i64, i64) = redis::pipe()
            .atomic()
            .zrem(keys.pool(), id)
            .del(keys.bucket(id))
            .zrem(keys.reserved(), id)
            .ignore()
            .hdel(keys.holders(), id)
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

/// A job to push; `.await` it (or call [`send`](Push::send)).
#[must_use = "a push does nothing until it is awaited"]
pub struct Push<'a> {
    client: &'a Client,
    job: NewPush,
}

impl<'a> Push<'a> {
    pub(crate) fn new(client: &'a Client, topic: Topic, body: Vec<u8>) -> Push<'a> {
        Push {
            client,
            job: NewPush::new(topic, body),
        }
    }

    /// Due `delay` from now (delayq's ProcessIn), to the millisecond.
    pub fn delay(self, delay: Duration) -> Push<'a> {
        self.with(|job| job.delay(delay))
    }

    /// Due at `time` (delayq's ProcessAt), to the millisecond; a time in the past is an error.
    pub fn at(self, time: SystemTime) -> Push<'a> {
        self.with(|job| job.at(time))
    }

    /// The job's id; without one, a new unique id is made. Pushing an id that exists replaces
    /// that job (as with the legacy clients).
    pub fn id(self, id: impl Into<JobId>) -> Push<'a> {
        self.with(|job| job.id(id))
    }

    fn with(self, change: impl FnOnce(NewPush) -> NewPush) -> Push<'a> {
        Push {
            client: self.client,
            job: change(self.job),
        }
    }

    /// Pushes the job and returns its id.
    pub async fn send(self) -> Result<JobId> {
        let mut ids = self
            .client
            .push_many([self.job])
            .await
            .map_err(|error| match error {
                Error::InBatch { error, .. } => *error,
                error => error,
            })?;
        Ok(ids.remove(0))
    }
}

impl<'a> IntoFuture for Push<'a> {
    type Output = Result<JobId>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<JobId>> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.send())
    }
}

impl Client {
    /// Pushes every job of `jobs` and returns their ids in order, [`MAX_PUSH_BATCH`] jobs a
    /// script call (in the cluster layout, each topic's jobs in calls of their own), each call
    /// writing all its jobs or none, with the layout and guarantees of [`push`](Client::push).
    ///
    /// Every job is checked before anything is sent: a job that [`push`](Client::push) would
    /// refuse, or an id given twice (pushed one after the other, the second would replace the
    /// first), refuses the whole batch with [`Error::InBatch`] naming it, and nothing is written.
    /// A refusal by Redis (a key of the wrong type, an ACL, no memory left) comes from one call:
    /// that call wrote nothing. Those before it (of a batch over [`MAX_PUSH_BATCH`] or over
    /// several topics in the cluster layout) are written, and then the error is
    /// [`Error::PartlyPushed`], naming them. A bucket of the wrong type is named by its job's
    /// index.
    ///
    /// [`MAX_PUSH_BATCH`]: crate::MAX_PUSH_BATCH
    pub async fn push_many(&self, jobs: impl IntoIterator<Item = NewPush>) -> Result<Vec<JobId>> {
        let mut connection = self.connection().await?;
        let pushed = self.inner.pusher.push(&mut connection, jobs, None).await;
        let written: Vec<&Topic> = match &pushed {
            Ok(jobs) => jobs.iter().map(|(_, topic)| topic).collect(),
            Err(Failure::Call { pushed, .. }) => pushed.iter().map(|(_, _, topic)| topic).collect(),
            Err(_) => Vec::new(),
        };
        self.counted(field::PUSHED, written.into_iter().map(Some));
        Ok(pushed?.into_iter().map(|(id, _)| id).collect())
    }
}
