//! The legacy pop: a job is deleted as it is handed out, so it is taken at most once. A server that
//! may not be able to hand a job over (its caller went away) holds it instead, its data kept, and
//! finishes the pop once the job is handed over, or puts it back.

use std::collections::HashMap;
use std::time::Duration;

use redis::AsyncCommands;
use tokio::time::Instant;

use super::{Client, check_topic_in};
use crate::error::{Error, Result};
use crate::job::Job;
use delayer_wire::keys::field;
use delayer_wire::name::JobId;
use delayer_wire::scripts::body::Body;
use delayer_wire::time::from_unix;

/// How often `bpop` of several topics in the cluster layout looks at each.
const POLL_TOPICS: Duration = Duration::from_millis(20);

/// A job taken off its ready list whose data is kept until the pop is finished
/// ([`Client::finish_pop`]) or undone ([`Client::put_back`]).
#[derive(Debug)]
pub struct HeldJob {
    /// The job, as a pop hands it out.
    pub job: Job,
    /// The list it was taken from, and its data.
    ready: Vec<u8>,
    bucket: Vec<u8>,
}

impl Client {
    /// The legacy pop: takes the oldest ready job of `topic` and deletes its data, so a consumer
    /// that dies before finishing it loses it. `None` when there is none.
    pub async fn pop(&self, topic: impl AsRef<[u8]>) -> Result<Option<Job>> {
        match self.pop_held(topic).await? {
            Some(held) => self.finish_pop(held).await.map(Some),
            None => Ok(None),
        }
    }

    /// The legacy blocking pop: like [`pop`](Client::pop) on the first of `topics` that has a
    /// job, waiting up to `timeout` for one (`Duration::ZERO`: for ever, as BRPOP's 0).
    pub async fn bpop(
        &self,
        topics: &[impl AsRef<[u8]>],
        timeout: Duration,
    ) -> Result<Option<Job>> {
        match self.bpop_held(topics, timeout).await? {
            Some(held) => self.finish_pop(held).await.map(Some),
            None => Ok(None),
        }
    }

    /// Like [`pop`](Client::pop), but the job's data is kept until [`finish_pop`] or
    /// [`put_back`].
    ///
    /// [`finish_pop`]: Client::finish_pop
    /// [`put_back`]: Client::put_back
    pub async fn pop_held(&self, topic: impl AsRef<[u8]>) -> Result<Option<HeldJob>> {
        let topic = topic.as_ref();
        check_topic_in(self.layout(), topic)?;
        let ready = self.keys_for(topic).ready(topic);
        let id: Option<JobId> = self
            .connection()
            .await?
            .rpop(&ready, None)
            .await
            .map_err(|error| Error::about_key(error, &ready))?;
        match id {
            Some(id) => self
                .read_held(id, topic, ready, &mut self.connection().await?)
                .await
                .map(Some),
            None => Ok(None),
        }
    }

    /// Like [`bpop`](Client::bpop), but the job's data is kept until [`finish_pop`] or
    /// [`put_back`].
    ///
    /// [`finish_pop`]: Client::finish_pop
    /// [`put_back`]: Client::put_back
    pub async fn bpop_held(
        &self,
        topics: &[impl AsRef<[u8]>],
        timeout: Duration,
    ) -> Result<Option<HeldJob>> {
        for topic in topics {
            check_topic_in(self.layout(), topic.as_ref())?;
        }
        // One BRPOP waits on lists of one shard (one cluster slot) only.
        if self.keys().shards(topics).len() > 1 {
            return self.bpop_polling(topics, timeout).await;
        }
        let ready: Vec<Vec<u8>> = topics
            .iter()
            .map(|topic| self.keys_for(topic).ready(topic))
            .collect();
        let mut connection = self.blocking_connection().await?;
        let popped: Option<(Vec<u8>, JobId)> = redis::cmd("BRPOP")
            .arg(&ready)
            .arg(timeout.as_secs_f64())
            .query_async(&mut connection)
            .await
            .map_err(|error| {
                if error.is_io_error() || error.is_connection_dropped() {
                    // The idle ones broke with it (a Redis restart): none of them is tried next.
                    self.inner
                        .idle_blocking
                        .lock()
                        .expect("not poisoned")
                        .clear();
                }
                Error::about_key(error, ready.join(&b' '))
            })?;
        let held = match popped {
            Some((list, id)) => {
                let topic = topics
                    .iter()
                    .zip(&ready)
                    .find_map(|(topic, ready)| (*ready == list).then_some(topic.as_ref()))
                    .unwrap_or_default();
                Some(self.read_held(id, topic, list, &mut connection).await?)
            }
            None => None,
        };
        self.return_blocking_connection(connection);
        Ok(held)
    }

    /// Finishes a held pop: the job's data is deleted; the job is the caller's alone now.
    pub async fn finish_pop(&self, held: HeldJob) -> Result<Job> {
        let _: () = self.connection().await?.del(&held.bucket).await?;
        Ok(held.job)
    }

    /// Undoes a held pop: the job is next in line again on the list it was taken from, its data
    /// as it was. For a server whose caller went away before the job could be handed over.
    pub async fn put_back(&self, held: &HeldJob) -> Result<()> {
        // RPUSH: the right end, where consumers pop from.
        let _: () = self
            .connection()
            .await?
            .rpush(&held.ready, &held.job.id)
            .await
            .map_err(|error| Error::about_key(error, &held.ready))?;
        Ok(())
    }

    /// `bpop_held` of several topics in the cluster layout, where one BRPOP cannot wait on lists
    /// in different slots: pops each in turn, every [`POLL_TOPICS`] until `timeout`.
    async fn bpop_polling(
        &self,
        topics: &[impl AsRef<[u8]>],
        timeout: Duration,
    ) -> Result<Option<HeldJob>> {
        let until = (timeout > Duration::ZERO).then(|| Instant::now() + timeout);
        loop {
            for topic in topics {
                if let Some(held) = self.pop_held(topic).await? {
                    return Ok(Some(held));
                }
            }
            let wait = match until {
                Some(until) if Instant::now() >= until => return Ok(None),
                Some(until) => (until - Instant::now()).min(POLL_TOPICS),
                None => POLL_TOPICS,
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// A pop's second half: reads the data of job `id`, taken from `ready` (`topic`'s list). A
    /// body over [`Settings::max_body_read`](crate::Settings::max_body_read) is not read: the job
    /// goes back to the end of the line.
    async fn read_held(
        &self,
        id: JobId,
        topic: &[u8],
        ready: Vec<u8>,
        connection: &mut (impl redis::aio::ConnectionLike + Send + Sync),
    ) -> Result<HeldJob> {
        let bucket = self.keys_for(topic).bucket(&id);
        let (topic, body, due) = match self.inner.settings.max_body_read {
            None => {
                // The legacy clients' read. Field names as bytes too: a field that is not UTF-8
                // must not fail it.
                let mut fields: HashMap<Vec<u8>, Vec<u8>> = connection
                    .hgetall(&bucket)
                    .await
                    .map_err(|error| Error::about_key(error, &bucket))?;
                let mut take = |name: &str| fields.remove(name.as_bytes());
                (take(field::TOPIC), take(field::BODY), take(field::DUE))
            }
            Some(limit) => {
                let (topic, due): (Option<Vec<u8>>, Option<Vec<u8>>) = connection
                    .hmget(&bucket, &[field::TOPIC, field::DUE])
                    .await
                    .map_err(|error| Error::about_key(error, &bucket))?;
                let body = match self.body_up_to(connection, &bucket, limit).await? {
                    Body::Read(body) => Some(body),
                    Body::Missing => None,
                    Body::TooLong(size) => {
                        // LPUSH: the end of the line, so that the jobs behind it are popped.
                        let _: () = connection
                            .lpush(&ready, &id)
                            .await
                            .map_err(|error| Error::about_key(error, &ready))?;
                        return Err(Error::BodyTooLargeToRead { id, size, limit });
                    }
                };
                (topic, body, due)
            }
        };
        let (Some(topic), Some(body)) = (topic, body) else {
            return Err(Error::Incomplete(id));
        };
        let job = Job {
            topic: topic.into(),
            body,
            attempts: 0,
            due: due
                .and_then(|due| std::str::from_utf8(&due).ok()?.parse().ok())
                .and_then(from_unix),
            id,
            token: None,
        };
        Ok(HeldJob { job, ready, bucket })
    }
}
