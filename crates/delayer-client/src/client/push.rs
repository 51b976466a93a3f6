//! Pushing and removing jobs, as the legacy clients do: `client.push(topic, body).delay(d).await`
//! returns the new job's id.

use std::collections::{HashMap, HashSet};
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use redis::AsyncCommands;

use super::{Client, check_id, check_topic_to_write_in};
use crate::error::{Error, Result};
use crate::job::unique_id;
use crate::settings::{MAX_DELAY, MAX_PUSH_BATCH};
use delayer_wire::history::field;
use delayer_wire::name::{JobId, Topic};
use delayer_wire::scripts::push::{Mark, NewJob};
use delayer_wire::time::{to_unix, unix_now};

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

/// How far in the past an [`at`](Push::at) time may be and still mean "now": a time computed a
/// moment ago must not fail for the microseconds that passed since.
const PAST_TOLERANCE: Duration = Duration::from_secs(1);

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

/// A job for [`Client::push_many`]: what [`Client::push`] takes, built the same way
/// (`NewPush::new(topic, body).delay(d).id(id)`), without a client.
#[derive(Debug, Clone)]
pub struct NewPush {
    topic: Topic,
    body: Vec<u8>,
    id: Option<JobId>,
    due: Due,
}

#[derive(Debug, Clone, Copy)]
enum Due {
    In(Duration),
    At(SystemTime),
}

impl NewPush {
    /// A new job on `topic`, due at once unless [`delay`](NewPush::delay) or
    /// [`at`](NewPush::at) say otherwise.
    pub fn new(topic: impl Into<Topic>, body: impl Into<Vec<u8>>) -> NewPush {
        NewPush {
            topic: topic.into(),
            body: body.into(),
            id: None,
            due: Due::In(Duration::ZERO),
        }
    }

    /// As [`Push::delay`].
    pub fn delay(mut self, delay: Duration) -> NewPush {
        self.due = Due::In(delay);
        self
    }

    /// As [`Push::at`].
    pub fn at(mut self, time: SystemTime) -> NewPush {
        self.due = Due::At(time);
        self
    }

    /// As [`Push::id`].
    pub fn id(mut self, id: impl Into<JobId>) -> NewPush {
        self.id = Some(id.into());
        self
    }

    /// The job as the push script takes it, or why it may not be pushed.
    fn checked(self, client: &Client) -> Result<Checked> {
        check_topic_to_write_in(client.layout(), self.topic.as_bytes())?;
        if self.body.is_empty() {
            return Err(Error::EmptyBody);
        }
        let limit = client.settings().max_body_bytes;
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
        let lifetime = client.settings().ready_max_lifetime.as_secs();
        Ok(Checked {
            id,
            topic: self.topic,
            body: self.body,
            due,
            ttl_seconds: (delay.ceil() as u64).saturating_add(lifetime),
            delay,
        })
    }
}

/// A job that passed the client's checks, ready for the script.
struct Checked {
    id: JobId,
    topic: Topic,
    body: Vec<u8>,
    due: Option<f64>,
    ttl_seconds: u64,
    delay: f64,
}

impl Checked {
    fn script_job(&self) -> NewJob<'_> {
        NewJob {
            id: self.id.as_bytes(),
            topic: self.topic.as_bytes(),
            body: &self.body,
            due: self.due,
            ttl_seconds: self.ttl_seconds,
            delay: self.delay,
        }
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
    pub async fn push_many(&self, jobs: impl IntoIterator<Item = NewPush>) -> Result<Vec<JobId>> {
        self.push_many_marked(jobs, None).await
    }

    /// Pushes as [`push_many`](Client::push_many) does, and sets the fields of `mark` in its
    /// hash with the jobs: on one Redis, in the script call of the last jobs, so that a batch of
    /// at most [`MAX_PUSH_BATCH`] and its mark are written together or not at all; in the
    /// cluster layout (the hash in another slot), after the jobs. For a producer that must push
    /// each thing once: the daemon's Kafka link marks the offsets of the requests it pushed.
    pub async fn push_many_marked(
        &self,
        jobs: impl IntoIterator<Item = NewPush>,
        mark: Option<&Mark>,
    ) -> Result<Vec<JobId>> {
        let mut checked = Vec::new();
        let mut seen = HashSet::new();
        for (index, job) in jobs.into_iter().enumerate() {
            let in_batch = |error| Error::InBatch {
                index,
                error: Box::new(error),
            };
            let job = job.checked(self).map_err(in_batch)?;
            if !seen.insert(job.id.clone()) {
                return Err(in_batch(Error::DuplicateId(job.id)));
            }
            checked.push(job);
        }
        // The jobs of each shard (one pool), in the order their shards first come.
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut by_pool: HashMap<String, usize> = HashMap::new();
        for (index, job) in checked.iter().enumerate() {
            let pool = self.keys_for(job.topic.as_bytes()).pool().to_string();
            let group = *by_pool.entry(pool).or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
            groups[group].push(index);
        }
        // The topics of the jobs that may wait compact.
        let after = self.settings().compact_after;
        let mut far: Vec<&Topic> = checked
            .iter()
            .filter(|job| after.is_some_and(|after| job.delay >= after.as_secs_f64()))
            .map(|job| &job.topic)
            .collect();
        far.sort_unstable();
        far.dedup();
        let form = self.push_form(&far).await?;
        let mut connection = self.connection().await?;
        // Set by the last script call on one Redis; else (the cluster layout, or no jobs) after.
        let (mut apart, calls) = (
            mark,
            groups.iter().map(|g| g.len().div_ceil(MAX_PUSH_BATCH)),
        );
        let (mut left, one_redis) = (
            calls.sum::<usize>(),
            self.inner.keys.every_topic().is_some(),
        );
        // The indexes of the jobs written so far.
        let mut pushed: Vec<usize> = Vec::new();
        for group in &groups {
            let keys = self.keys_for(checked[group[0]].topic.as_bytes());
            for call in group.chunks(MAX_PUSH_BATCH) {
                left -= 1;
                let with = if left == 0 && one_redis {
                    apart.take()
                } else {
                    None
                };
                let jobs: Vec<NewJob<'_>> = call
                    .iter()
                    .map(|&index| checked[index].script_job())
                    .collect();
                let refused = self
                    .inner
                    .scripts
                    .push
                    .run(&mut connection, &keys, form, &jobs, with)
                    .await;
                let refused = refused.map_err(|error| {
                    let error = Error::about_key(error, keys.pool());
                    let Error::WrongType { key, .. } = &error else {
                        return error;
                    };
                    match call
                        .iter()
                        .find(|&&index| keys.bucket(checked[index].id.as_bytes()) == key.as_bytes())
                    {
                        Some(&index) => Error::InBatch {
                            index,
                            error: Box::new(error),
                        },
                        None => error,
                    }
                });
                match refused {
                    Ok(()) => {
                        pushed.extend_from_slice(call);
                        let topics = call.iter().map(|&index| Some(&checked[index].topic));
                        self.counted(field::PUSHED, topics);
                    }
                    Err(error) if pushed.is_empty() => return Err(error),
                    Err(error) => {
                        pushed.sort_unstable();
                        let pushed = pushed
                            .into_iter()
                            .map(|index| (index, checked[index].id.clone()))
                            .collect();
                        return Err(Error::PartlyPushed {
                            pushed,
                            error: Box::new(error),
                        });
                    }
                }
            }
        }
        if let Some(mark) = apart.filter(|mark| !mark.fields.is_empty()) {
            let fields: Vec<(&str, &str)> = mark
                .fields
                .iter()
                .map(|(field, value)| (field.as_str(), value.as_str()))
                .collect();
            connection
                .hset_multiple::<_, _, _, ()>(&mark.key, &fields)
                .await
                .map_err(|error| Error::about_key(error, &mark.key))?;
        }
        Ok(checked.into_iter().map(|job| job.id).collect())
    }
}
