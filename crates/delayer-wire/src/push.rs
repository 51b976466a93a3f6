//! A push, as the client's pushes and the daemon's Kafka requests make it: jobs checked as the
//! layout and the legacy clients take them ([`NewPush`]), then written by the push script
//! ([`crate::scripts::push`]) a shard at a time, at most [`MAX_PUSH_BATCH`] jobs a call, each call
//! all or nothing ([`Pusher`]). Jobs due far enough ahead wait compact while a daemon stages them
//! (see [`crate::compact`]).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use redis::aio::ConnectionLike;
use redis::{AsyncCommands, RedisError, RedisResult};

use crate::compact::{BEAT_EVERY, BEAT_FRESH, WANTED_KEPT};
use crate::keys::{Keys, Layout};
use crate::name::{JobId, Topic, unique_id};
use crate::scripts::push::{Form, MAX_PUSH_BATCH, Mark, NewJob, PushScript};
use crate::scripts::wrong_type;
use crate::time::{redis_now, to_unix, unix_now};

/// The longest delay a push takes: 2^31 - 1 s, about 68 years (go-delay-queue's limit). Longer is
/// a mistake (milliseconds given for seconds), and Redis refuses to expire a bucket much later.
pub const MAX_DELAY: Duration = Duration::from_secs(i32::MAX as u64);
/// How far in the past an `at` time may be and still mean "now": a time computed a moment ago
/// must not fail for the microseconds that passed since.
const PAST_TOLERANCE: Duration = Duration::from_secs(1);
/// How soon "no daemon stages" is read again: a daemon starts staging within a moment of a push
/// that wanted it, and the pushes after should see it as soon.
pub const NONE_STAGES_READ_AGAIN: Duration = Duration::from_millis(100);

/// A job to push, built as `NewPush::new(topic, body).delay(d).id(id)`.
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

/// Why a job may not be pushed (the client says it in words: its `Error`).
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// Its topic is empty.
    EmptyTopic,
    /// The layout cannot take new jobs of its topic, for the reason given (see
    /// [`Layout::write_refusal`]).
    TopicRefused(Topic, &'static str),
    /// Its body is empty, which the legacy clients take for an expired job.
    EmptyBody,
    /// Its body is over the limit.
    BodyTooLarge { size: usize, limit: usize },
    /// Its id is empty.
    EmptyId,
    /// It was given a due time in the past.
    InThePast(SystemTime),
    /// Its delay, in seconds, is over [`MAX_DELAY`].
    TooFar(f64),
    /// Its id is in the batch more than once.
    DuplicateId(JobId),
}

/// Why `topic`, with the layout's `refusal` of it, takes no job: it is empty, or refused.
pub fn topic_refusal(topic: &[u8], refusal: Option<&'static str>) -> Option<Refusal> {
    if topic.is_empty() {
        return Some(Refusal::EmptyTopic);
    }
    refusal.map(|why| Refusal::TopicRefused(topic.into(), why))
}

/// What a pusher may take, besides what the layout refuses.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The largest body.
    pub max_body_bytes: usize,
    /// How long a job's data outlives its due time (the legacy clients' `ready_max_lifetime`).
    pub ready_max_lifetime: Duration,
    /// Jobs due at least this long after their push wait compact while a daemon stages them;
    /// `None`: every job in the legacy form.
    pub compact_after: Option<Duration>,
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

    /// Due `delay` from now (delayq's ProcessIn), to the millisecond, by Redis's clock.
    pub fn delay(mut self, delay: Duration) -> NewPush {
        self.due = Due::In(delay);
        self
    }

    /// Due at `time` (delayq's ProcessAt), to the millisecond; a time in the past is refused.
    pub fn at(mut self, time: SystemTime) -> NewPush {
        self.due = Due::At(time);
        self
    }

    /// The job's id; without one, a new unique id is made. Pushing an id that exists replaces
    /// that job (as with the legacy clients).
    pub fn id(mut self, id: impl Into<JobId>) -> NewPush {
        self.id = Some(id.into());
        self
    }

    /// The job as the push script takes it, or why it may not be pushed.
    fn checked(self, layout: Layout, limits: &Limits) -> Result<Checked, Refusal> {
        let topic = self.topic.as_bytes();
        if let Some(refusal) = topic_refusal(topic, layout.write_refusal(topic)) {
            return Err(refusal);
        }
        if self.body.is_empty() {
            return Err(Refusal::EmptyBody);
        }
        let limit = limits.max_body_bytes;
        if self.body.len() > limit {
            let size = self.body.len();
            return Err(Refusal::BodyTooLarge { size, limit });
        }
        let id = match self.id {
            Some(id) if id.is_empty() => return Err(Refusal::EmptyId),
            Some(id) => id,
            None => unique_id().into(),
        };
        // A delay counts from now by Redis's clock; a time is the caller's, taken as it is.
        let (delay, due) = match self.due {
            Due::In(delay) => (delay.as_secs_f64(), None),
            Due::At(time) => {
                let delay = to_unix(time) - unix_now();
                if delay < -PAST_TOLERANCE.as_secs_f64() {
                    return Err(Refusal::InThePast(time));
                }
                (delay.max(0.0), Some(to_unix(time)))
            }
        };
        if delay > MAX_DELAY.as_secs_f64() {
            return Err(Refusal::TooFar(delay));
        }
        // As the legacy clients set it: the delay (whole seconds, rounded up) plus the lifetime.
        let lifetime = limits.ready_max_lifetime.as_secs();
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

/// A job that passed the checks, ready for the script.
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

/// Why a push failed, and what it wrote before.
#[derive(Debug)]
pub enum Failure {
    /// Job `index` of the batch (from 0) may not be pushed: nothing was written.
    Refused { index: usize, why: Refusal },
    /// Redis refused a script call, about `key`: the pool, or (`index`) that job's bucket, which
    /// holds another type of value. The jobs of the calls before it were written: `pushed`, each
    /// by its index in the batch, id and topic.
    Call {
        pushed: Vec<(usize, JobId, Topic)>,
        index: Option<usize>,
        key: String,
        error: RedisError,
    },
    /// Every job was written, but not the mark, set after them in the cluster layout (its hash
    /// in another slot): `key` is that hash.
    Mark { key: String, error: RedisError },
}

/// Pushes batches of jobs with the push script; holds what pushes learn of the daemons that
/// stage compact jobs.
pub struct Pusher {
    layout: Layout,
    /// The layout's keys of no topic.
    keys: Keys,
    limits: Limits,
    script: PushScript,
    /// Whether a daemon stages compact jobs as last read, and when (the cluster layout).
    beats: Mutex<Option<(Instant, bool)>>,
}

impl Pusher {
    /// A pusher of jobs in `layout`, within `limits`.
    pub fn new(layout: Layout, limits: Limits) -> Pusher {
        Pusher {
            layout,
            keys: layout.keys(""),
            limits,
            script: PushScript::default(),
            beats: Mutex::new(None),
        }
    }

    /// Pushes every job of `jobs` and returns each one's id and topic, in order:
    /// [`MAX_PUSH_BATCH`] jobs a script call (in the cluster layout, each topic's jobs in calls
    /// of their own), each call writing all its jobs or none. Every job is checked before
    /// anything is sent; one refused, or an id given twice, refuses the batch. With `mark`, the
    /// fields of its hash are set with the jobs: on one Redis in the script call of the last jobs,
    /// so that a batch of at most [`MAX_PUSH_BATCH`] and its mark are written together or not at
    /// all; in the cluster layout (the hash in another slot), after the jobs. For a producer that
    /// must push each thing once, as the daemon's Kafka link marks the offsets of the requests it
    /// pushed.
    pub async fn push(
        &self,
        connection: &mut (impl ConnectionLike + Send + Sync),
        jobs: impl IntoIterator<Item = NewPush>,
        mark: Option<&Mark>,
    ) -> Result<Vec<(JobId, Topic)>, Failure> {
        let mut checked = Vec::new();
        let mut seen = HashSet::new();
        for (index, job) in jobs.into_iter().enumerate() {
            let refused = |why| Failure::Refused { index, why };
            let job = job.checked(self.layout, &self.limits).map_err(refused)?;
            if !seen.insert(job.id.clone()) {
                return Err(refused(Refusal::DuplicateId(job.id)));
            }
            checked.push(job);
        }
        // The jobs of each shard (one pool), in the order their shards first come.
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut by_pool: HashMap<String, usize> = HashMap::new();
        for (index, job) in checked.iter().enumerate() {
            let pool = self.keys.of_topic(job.topic.as_bytes()).pool().to_string();
            let group = *by_pool.entry(pool).or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
            groups[group].push(index);
        }
        let form = self.form(connection, &checked).await;
        // Set by the last script call on one Redis; else (the cluster layout, or no jobs) after.
        let calls = groups.iter().map(|g| g.len().div_ceil(MAX_PUSH_BATCH));
        let (mut apart, mut left) = (mark, calls.sum::<usize>());
        let one_redis = self.keys.every_topic().is_some();
        // The indexes of the jobs written so far.
        let mut pushed: Vec<usize> = Vec::new();
        for group in &groups {
            let keys = self.keys.of_topic(checked[group[0]].topic.as_bytes());
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
                let run = self.script.run(connection, &keys, form, &jobs, with).await;
                if let Err(error) = run {
                    // A bucket of the wrong type is named by its job's index.
                    let named = wrong_type(&error).and_then(|(_, named)| named);
                    let index = named.and_then(|named| {
                        let id = |index: usize| checked[index].id.as_bytes();
                        let named = |&index: &usize| keys.bucket(id(index)) == named.as_bytes();
                        call.iter().copied().find(named)
                    });
                    pushed.sort_unstable();
                    let pushed = pushed.into_iter().map(|index| {
                        let job = &checked[index];
                        (index, job.id.clone(), job.topic.clone())
                    });
                    let key = keys.pool().to_string();
                    let pushed = pushed.collect();
                    return Err(Failure::Call {
                        pushed,
                        index,
                        key,
                        error,
                    });
                }
                pushed.extend_from_slice(call);
            }
        }
        if let Some(mark) = apart.filter(|mark| !mark.fields.is_empty()) {
            let fields: Vec<(&str, &str)> = mark
                .fields
                .iter()
                .map(|(field, value)| (field.as_str(), value.as_str()))
                .collect();
            let set = connection.hset_multiple::<_, _, _, ()>(&mark.key, &fields);
            set.await.map_err(|error| Failure::Mark {
                key: mark.key.clone(),
                error,
            })?;
        }
        Ok(checked.into_iter().map(|job| (job.id, job.topic)).collect())
    }

    /// How a push of `jobs` writes them (see [`Limits::compact_after`]), by the delays of the
    /// jobs due at least that long ahead (by this host's clock: the script decides by Redis's).
    /// In the cluster layout, where the beats are in another slot than a topic's keys, out of the
    /// push script's reach, the pusher reads them (every [`BEAT_EVERY`] at most, by Redis's
    /// clock) and tells the script; a topic is added to the compact topics before any of its jobs
    /// waits compact, so that a daemon stages it, and no daemon removes one, so that no push
    /// races a removal.
    async fn form(
        &self,
        connection: &mut (impl ConnectionLike + Send + Sync),
        jobs: &[Checked],
    ) -> Form {
        let Some(after) = self.limits.compact_after else {
            return Form::Legacy;
        };
        let compact = match self.keys.compact() {
            Some(compact) if self.keys.every_topic().is_none() => compact,
            _ => return Form::CompactAfter(after),
        };
        // The topics of the jobs that may wait compact.
        let mut far: Vec<&Topic> = jobs
            .iter()
            .filter(|job| job.delay >= after.as_secs_f64())
            .map(|job| &job.topic)
            .collect();
        far.sort_unstable();
        far.dedup();
        if far.is_empty() {
            return Form::CompactAfterTold(after, false);
        }
        if !self.stagers_alive(connection).await {
            // As the push script does on one Redis: a daemon that can stage starts when it sees
            // it. A user that may not write it pushes in the legacy form all the same.
            let _: RedisResult<()> = redis::cmd("SET")
                .arg(compact.wanted())
                .arg(1)
                .arg("EX")
                .arg(WANTED_KEPT.as_secs())
                .query_async(connection)
                .await;
            return Form::CompactAfterTold(after, false);
        }
        let added: RedisResult<()> = redis::cmd("SADD")
            .arg(compact.topics())
            .arg(far)
            .query_async(connection)
            .await;
        // Not added, not staged: the legacy form then.
        Form::CompactAfterTold(after, added.is_ok())
    }

    /// Whether a daemon beat within [`BEAT_FRESH`], by Redis's clock; read again once the last
    /// answer is [`BEAT_EVERY`] old ([`NONE_STAGES_READ_AGAIN`] for a "no"). A failed read is
    /// "no": the legacy form is always safe.
    async fn stagers_alive(&self, connection: &mut (impl ConnectionLike + Send + Sync)) -> bool {
        let known = *self.beats.lock().expect("not poisoned");
        if let Some((read_at, alive)) = known
            && read_at.elapsed()
                < if alive {
                    BEAT_EVERY
                } else {
                    NONE_STAGES_READ_AGAIN
                }
        {
            return alive;
        }
        let alive = self.read_beats(connection).await.unwrap_or(false);
        *self.beats.lock().expect("not poisoned") = Some((Instant::now(), alive));
        alive
    }

    async fn read_beats(
        &self,
        connection: &mut (impl ConnectionLike + Send + Sync),
    ) -> RedisResult<bool> {
        let Some(compact) = self.keys.compact() else {
            return Ok(false);
        };
        let now = redis_now(connection).await?;
        let fresh = ((now - BEAT_FRESH.as_secs_f64()) * 1000.0).ceil() as i64;
        let found: Vec<Vec<u8>> = redis::cmd("ZRANGEBYSCORE")
            .arg(compact.stagers())
            .arg(fresh)
            .arg("+inf")
            .arg("LIMIT")
            .arg(0)
            .arg(1)
            .query_async(connection)
            .await?;
        Ok(!found.is_empty())
    }
}
