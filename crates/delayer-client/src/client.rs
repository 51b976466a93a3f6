//! The client: push, remove and look up jobs, and consume them in either of two ways: `pop`
//! (at most once, exactly as the legacy clients do) or `reserve` then `ack` (at least once).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::{AsyncCommands, IntoConnectionInfo, RedisResult};
use tokio::time::Instant;
use tracing::warn;

use crate::connection::{self, Connection, Target};
use crate::error::{Error, Result, unanswered};
use crate::job::{Job, JobInfo, Receipt, State};
use crate::keys::{Keys, Layout, field};
use crate::push::{Push, unique_id};
use crate::scripts::ack::{AckScript, Acked};
use crate::scripts::find_reserved::FindReservedScript;
use crate::scripts::push::PushScript;
use crate::scripts::release::ReleaseScript;
use crate::scripts::requeue_dead::RequeueDeadScript;
use crate::scripts::reserve::ReserveScript;
use crate::scripts::touch::TouchScript;
use crate::shared_connection::{Commands, SharedConnection};
use crate::time::{from_deadline_score, from_unix, unix_now};
use crate::watch::{Ensured, KeyWatch};

/// The largest body a push takes unless told otherwise.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1 << 20;
/// How long a job's data outlives its due time, as the legacy clients' default `ready_max_lifetime`.
pub const DEFAULT_READY_MAX_LIFETIME: Duration = Duration::from_secs(604_800);
/// How many times a job is reserved before a failure sends it to its topic's dead list.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 25;

/// How long a blocking reserve waits between looks when Redis reports no writes (Redis 5, or
/// `CLIENT` denied by ACL), and, when it does, how long it trusts the reports alone.
const POLL_WITHOUT_WATCH: Duration = Duration::from_millis(20);
const POLL_WITH_WATCH: Duration = Duration::from_secs(1);
/// How long the watch of the ready lists runs on after its last waiter (longer than any wait
/// between two calls of `ensure`).
const WATCH_UNUSED: Duration = Duration::from_secs(3);
/// Blocking connections kept for the next `bpop`.
const IDLE_BLOCKING_CONNECTIONS: usize = 4;
/// Dead jobs requeued per script call.
const REQUEUE_BATCH: usize = 1000;
/// The most jobs one script call reserves or acks: it holds Redis up for about a millisecond.
pub const MAX_BATCH: usize = 100;

/// A handle on the delayer Redis; cheap to clone, one connection shared by all clones.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    /// Carries every command that does not block; replaced when it breaks.
    commands: Arc<SharedConnection>,
    redis: Target,
    /// Connections for `bpop`, whose BRPOP would hold up everything else on `commands`.
    idle_blocking: Mutex<Vec<Connection>>,
    /// Writes to any ready list, for blocking reserves.
    ready_lists: KeyWatch,
    scripts: Scripts,
    /// The key names of `settings.layout` (in the cluster layout, of no topic: the registry's,
    /// and the ready and dead lists', which name their topic).
    keys: Keys,
    settings: Settings,
}

#[derive(Default)]
struct Scripts {
    push: PushScript,
    reserve: ReserveScript,
    find_reserved: FindReservedScript,
    ack: AckScript,
    release: ReleaseScript,
    requeue_dead: RequeueDeadScript,
    touch: TouchScript,
}

/// What a client may be told besides where Redis is.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The largest body a push takes.
    pub max_body_bytes: usize,
    /// How long a job's data outlives its due time (the legacy clients' `ready_max_lifetime`).
    pub ready_max_lifetime: Duration,
    /// A nacked job that was reserved this many times goes to its topic's dead list. The daemon
    /// has its own setting for jobs whose reservation lapsed: keep the two the same.
    pub max_attempts: u32,
    /// The key names of the jobs: the same as the daemon's. A cluster has the cluster layout,
    /// whatever this says.
    pub layout: Layout,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            ready_max_lifetime: DEFAULT_READY_MAX_LIFETIME,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            layout: Layout::default(),
        }
    }
}

/// `get`'s three replies, each on its own: the pool's score, the reservation's, the bucket.
type Lookup = (
    RedisResult<Option<f64>>,
    RedisResult<Option<f64>>,
    RedisResult<HashMap<String, Vec<u8>>>,
);

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

/// What became of a nacked (or given back) job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nacked {
    /// Back in the pool, due again after the delay given (or at the time it was pushed again
    /// for, when it was pushed again while reserved).
    Retry,
    /// It had been reserved `max_attempts` times: on its topic's dead list.
    Dead,
    /// Its data had expired meanwhile: nothing left to deliver.
    Gone,
}

impl Client {
    /// Connects with default [`Settings`]. `redis` is a URL (`redis://:password@host:6379/0`,
    /// `redis+unix:///run/redis.sock`) or a [`redis::ConnectionInfo`].
    pub async fn connect(redis: impl IntoConnectionInfo) -> Result<Client> {
        Client::connect_with(redis, Settings::default()).await
    }

    /// Connects, failing at once if Redis is unreachable or refuses the credentials.
    pub async fn connect_with(
        redis: impl IntoConnectionInfo,
        settings: Settings,
    ) -> Result<Client> {
        Client::connect_to(redis.into_connection_info()?, settings).await
    }

    /// Connects to `redis` (an address, or a master found through Redis Sentinel), failing at
    /// once if it is unreachable or refuses the credentials.
    pub async fn connect_to(redis: impl Into<Target>, settings: Settings) -> Result<Client> {
        let redis = redis.into();
        if settings.layout == Layout::Cluster && !redis.is_cluster() {
            // No daemon moves the cluster layout's jobs on a single Redis: they would wait for ever.
            return Err(Error::Redis(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "the cluster layout wants a Redis Cluster (Target::cluster)",
            ))));
        }
        let commands = SharedConnection::connect(redis.clone()).await?;
        Ok(Client::with(redis, commands, settings))
    }

    /// A client that connects on its first command (and again whenever the connection broke):
    /// for a server that must start while Redis is down.
    pub fn lazy(redis: impl Into<Target>, settings: Settings) -> Client {
        let redis = redis.into();
        let commands = SharedConnection::lazy(redis.clone());
        Client::with(redis, commands, settings)
    }

    fn with(redis: Target, commands: Arc<SharedConnection>, mut settings: Settings) -> Client {
        if redis.is_cluster() {
            settings.layout = Layout::Cluster;
        }
        let keys = settings.layout.keys("");
        Client {
            inner: Arc::new(Inner {
                commands,
                ready_lists: KeyWatch::new(
                    redis.clone(),
                    connection::config(),
                    &keys.ready_affixes().prefix,
                ),
                redis,
                idle_blocking: Mutex::new(Vec::new()),
                scripts: Scripts::default(),
                keys,
                settings,
            }),
        }
    }

    /// The key names this client uses: every topic's, or in the cluster layout the registry's
    /// and the lists' (see [`keys_for`](Client::keys_for)).
    pub fn keys(&self) -> &Keys {
        &self.inner.keys
    }

    /// The key names of `topic`'s jobs.
    pub fn keys_for(&self, topic: &str) -> Cow<'_, Keys> {
        match self.inner.settings.layout {
            Layout::Cluster => Cow::Owned(Layout::Cluster.keys(topic)),
            _ => Cow::Borrowed(&self.inner.keys),
        }
    }

    /// The key names of job `id`'s data. In the cluster layout, where they depend on the topic:
    /// those of `topic` when known, else of the first topic of the registry (in name order) that
    /// holds the id; `None` when none does.
    async fn keys_of(&self, id: &str, topic: Option<&str>) -> Result<Option<Cow<'_, Keys>>> {
        if self.inner.settings.layout != Layout::Cluster {
            return Ok(Some(Cow::Borrowed(&self.inner.keys)));
        }
        if let Some(topic) = topic {
            return Ok(Some(self.keys_for(topic)));
        }
        let mut topics = self.topics().await?;
        topics.sort();
        let mut connection = self.connection().await?;
        let mut found = Vec::new();
        for topic in topics {
            if Layout::Cluster.refusal(&topic).is_some() {
                continue;
            }
            let keys = Layout::Cluster.keys(&topic);
            // Its data, or (an orphan) its pool entry alone.
            let (data, pooled): (bool, Option<f64>) = redis::pipe()
                .exists(keys.bucket(id))
                .zscore(keys.pool(), id)
                .query_async(&mut connection)
                .await?;
            if data || pooled.is_some() {
                found.push(topic);
            }
        }
        match &found[..] {
            [] => Ok(None),
            [topic] => Ok(Some(Cow::Owned(Layout::Cluster.keys(topic)))),
            _ => Err(Error::AmbiguousId {
                id: id.to_string(),
                topics: found,
            }),
        }
    }

    /// The settings this client was made with.
    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// A new job on `topic`, due at once unless [`Push::delay`] or [`Push::at`] say otherwise;
    /// `.await` it for its id.
    pub fn push(&self, topic: impl Into<String>, body: impl Into<Vec<u8>>) -> Push<'_> {
        Push::new(self, topic.into(), body.into())
    }

    /// Writes a job that [`Push`] validated.
    pub(crate) async fn push_validated(
        &self,
        job: &crate::scripts::push::NewJob<'_>,
    ) -> Result<()> {
        let mut connection = self.connection().await?;
        let keys = self.keys_for(job.topic);
        self.inner
            .scripts
            .push
            .run(&mut connection, &keys, job)
            .await
            .map_err(|error| Error::about_key(error, &keys.bucket(job.id)))
    }

    /// Removes a job wherever it is, as the legacy clients do (`ZREM` from the pool and `DEL` of
    /// its data, and its reservation if any), and says what it found.
    pub async fn remove(&self, id: &str) -> Result<Removed> {
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

    /// Where a job is, and what it holds.
    pub async fn get(&self, id: &str) -> Result<JobInfo> {
        check_id(id)?;
        let Some(keys) = self.keys_of(id, None).await? else {
            return Ok(JobInfo::unknown(id));
        };
        let bucket = keys.bucket(id);
        // Each reply on its own, so that a key of the wrong type is named.
        let (due, deadline, fields): Lookup = redis::pipe()
            .atomic()
            .ignore_errors()
            .zscore(keys.pool(), id)
            .zscore(keys.reserved(), id)
            .hgetall(&bucket)
            .query_async(&mut self.connection().await?)
            .await?;
        let due = due.map_err(|error| Error::about_key(error, keys.pool()))?;
        let deadline = deadline.map_err(|error| Error::about_key(error, keys.reserved()))?;
        let fields = fields.map_err(|error| Error::about_key(error, &bucket))?;
        let text = |name: &str| {
            fields
                .get(name)
                .map(|value| String::from_utf8_lossy(value).into_owned())
        };
        let number = |name: &str| text(name).and_then(|value| value.parse::<f64>().ok());
        let state = if !fields.contains_key(field::TOPIC) {
            State::Unknown
        } else if due.is_some() {
            State::Waiting
        } else if deadline.is_some() {
            State::Reserved
        } else if fields.contains_key(field::DIED_AT) {
            State::Dead
        } else {
            State::Ready
        };
        Ok(JobInfo {
            id: id.to_string(),
            state,
            topic: text(field::TOPIC),
            body: fields.get(field::BODY).cloned(),
            due: due.or_else(|| number(field::DUE)).and_then(from_unix),
            delay: number(field::DELAY).and_then(|delay| Duration::try_from_secs_f64(delay).ok()),
            attempts: number(field::ATTEMPTS).map_or(0, |attempts| attempts as u32),
            deadline: deadline.map(from_deadline_score).and_then(from_unix),
        })
    }

    /// The legacy pop: takes the oldest ready job of `topic` and deletes its data, so a consumer
    /// that dies before finishing it loses it. `None` when there is none.
    pub async fn pop(&self, topic: &str) -> Result<Option<Job>> {
        check_topic_in(self.inner.settings.layout, topic)?;
        let keys = self.keys_for(topic);
        let ready = keys.ready(topic);
        let id: Option<String> = self
            .connection()
            .await?
            .rpop(&ready, None)
            .await
            .map_err(|error| Error::about_key(error, &ready))?;
        match id {
            Some(id) => {
                let bucket = keys.bucket(&id);
                take(id, &bucket, &mut self.connection().await?)
                    .await
                    .map(Some)
            }
            None => Ok(None),
        }
    }

    /// The legacy blocking pop: like [`pop`](Client::pop) on the first of `topics` that has a
    /// job, waiting up to `timeout` for one (`Duration::ZERO`: for ever, as BRPOP's 0).
    pub async fn bpop(&self, topics: &[&str], timeout: Duration) -> Result<Option<Job>> {
        for topic in topics {
            check_topic_in(self.inner.settings.layout, topic)?;
        }
        if self.inner.settings.layout == Layout::Cluster && topics.len() > 1 {
            return self.bpop_polling(topics, timeout).await;
        }
        let ready: Vec<String> = topics
            .iter()
            .map(|topic| self.keys_for(topic).ready(topic))
            .collect();
        let mut connection = self.blocking_connection().await?;
        let popped: Option<(String, String)> = redis::cmd("BRPOP")
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
                Error::about_key(error, &ready.join(" "))
            })?;
        let job = match popped {
            Some((list, id)) => {
                let topic = topics
                    .iter()
                    .zip(&ready)
                    .find_map(|(topic, ready)| (*ready == list).then_some(*topic))
                    .unwrap_or_default();
                let bucket = self.keys_for(topic).bucket(&id);
                Some(take(id, &bucket, &mut connection).await?)
            }
            None => None,
        };
        self.return_blocking_connection(connection);
        Ok(job)
    }

    /// `bpop` of several topics in the cluster layout, where one BRPOP cannot wait on lists in
    /// different slots: pops each in turn, every [`POLL_WITHOUT_WATCH`] until `timeout`.
    async fn bpop_polling(&self, topics: &[&str], timeout: Duration) -> Result<Option<Job>> {
        let until = (timeout > Duration::ZERO).then(|| Instant::now() + timeout);
        loop {
            for topic in topics {
                if let Some(job) = self.pop(topic).await? {
                    return Ok(Some(job));
                }
            }
            let wait = match until {
                Some(until) if Instant::now() >= until => return Ok(None),
                Some(until) => (until - Instant::now()).min(POLL_WITHOUT_WATCH),
                None => POLL_WITHOUT_WATCH,
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// Reserves the oldest ready job of the first of `topics` that has one, for `ttr` (its time
    /// to run): unless it is acked, touched or nacked by then, the daemon delivers it again.
    /// Waits up to `timeout` for a job (`Duration::ZERO`: only looks once).
    pub async fn reserve(
        &self,
        topics: &[&str],
        ttr: Duration,
        timeout: Duration,
    ) -> Result<Option<Job>> {
        self.reserve_or(topics, ttr, timeout, std::future::pending())
            .await
    }

    /// Like [`reserve`](Client::reserve), but stops waiting when `give_up` completes. Only the
    /// wait: a script call in flight is always let finish, so that a job it reserved is returned
    /// rather than left reserved by nobody until its time to run passes.
    pub async fn reserve_or(
        &self,
        topics: &[&str],
        ttr: Duration,
        timeout: Duration,
        give_up: impl Future<Output = ()>,
    ) -> Result<Option<Job>> {
        let jobs = self.reserve_up_to(topics, ttr, 1, timeout, give_up).await?;
        Ok(jobs.into_iter().next())
    }

    /// Like [`reserve`](Client::reserve), but takes up to `most` jobs (at most
    /// [`MAX_BATCH`] a call) in one round trip, oldest first, those of the first topic first:
    /// for a consumer that runs several at once. Each has its own reservation, to ack (see
    /// [`ack_many`](Client::ack_many)), touch or nack on its own. Waits up to `timeout` for the
    /// first; empty when none came.
    pub async fn reserve_many(
        &self,
        topics: &[&str],
        ttr: Duration,
        most: usize,
        timeout: Duration,
    ) -> Result<Vec<Job>> {
        self.reserve_up_to(topics, ttr, most, timeout, std::future::pending())
            .await
    }

    /// Reserves up to `most` jobs, waiting up to `timeout` for the first, or until `give_up`.
    pub(crate) async fn reserve_up_to(
        &self,
        topics: &[&str],
        ttr: Duration,
        most: usize,
        timeout: Duration,
        give_up: impl Future<Output = ()>,
    ) -> Result<Vec<Job>> {
        for topic in topics {
            check_topic_in(self.inner.settings.layout, topic)?;
        }
        if most == 0 {
            return Ok(Vec::new());
        }
        let most = most.min(MAX_BATCH);
        // A first look without the watch of the ready lists, whose reports cost Redis and this
        // client a message for each job taken while it runs: a busy consumer (or one that only
        // looks) never needs it, and one that stays busy stops it.
        let jobs = self.reserve_once(topics, ttr, most).await?;
        if !jobs.is_empty() {
            self.inner.ready_lists.release_unused(WATCH_UNUSED);
        }
        if !jobs.is_empty() || timeout.is_zero() {
            return Ok(jobs);
        }
        tokio::pin!(give_up);
        let until = Instant::now() + timeout;
        loop {
            let poll = match self.inner.ready_lists.ensure().await {
                Ensured::Watching => POLL_WITH_WATCH,
                Ensured::Unsupported(refusal) => {
                    if let Some(refusal) = refusal {
                        warn!(
                            "Redis cannot report writes to ready lists ({refusal}): blocking \
                             reserves look every {} ms",
                            POLL_WITHOUT_WATCH.as_millis()
                        );
                    }
                    POLL_WITHOUT_WATCH
                }
                Ensured::Failed(_) => POLL_WITHOUT_WATCH,
            };
            // Subscribed before looking: a job pushed meanwhile wakes us.
            let mut written = self.inner.ready_lists.subscribe();
            let jobs = self.reserve_once(topics, ttr, most).await?;
            let now = Instant::now();
            if !jobs.is_empty() || now >= until {
                return Ok(jobs);
            }
            tokio::select! {
                // A consumer that gives up (stops) reserves nothing more, even with a push seen.
                biased;
                () = &mut give_up => return Ok(Vec::new()),
                _ = written.changed() => {}
                () = tokio::time::sleep((until - now).min(poll)) => {}
            }
        }
    }

    /// One look for up to `most` jobs to reserve for `ttr`: one script call for all `topics`, or
    /// in the cluster layout (where they are in different slots) one per topic, in order, until
    /// it has `most`.
    async fn reserve_once(&self, topics: &[&str], ttr: Duration, most: usize) -> Result<Vec<Job>> {
        let mut connection = self.connection().await?;
        let groups: Vec<&[&str]> = match self.inner.settings.layout {
            Layout::Cluster => topics.chunks(1).collect(),
            _ => vec![topics],
        };
        let (mut jobs, mut failed) = (Vec::new(), None);
        for group in groups {
            let keys = self.keys_for(group.first().copied().unwrap_or_default());
            let wanted = most.saturating_sub(jobs.len());
            let more = self
                .reserve_call(&mut connection, &keys, group, ttr, wanted)
                .await;
            // A topic that fails keeps neither the jobs reserved from the topics before it (they
            // are returned, not left held by nobody) nor the topics after it from being served:
            // its error comes when the look found nothing, as one call for all topics does.
            match more {
                Ok(more) => jobs.extend(more),
                Err(error) => {
                    failed.get_or_insert(error);
                }
            }
            if jobs.len() >= most {
                break;
            }
        }
        match failed {
            Some(error) if jobs.is_empty() => Err(error),
            Some(error) => {
                warn!("cannot reserve from every topic: {error}");
                Ok(jobs)
            }
            None => Ok(jobs),
        }
    }

    /// One reserve call for `topics` (all in one slot): up to `most` jobs for `ttr`. When it
    /// fails, its reply may be lost while the call ran (it timed out, the connection broke, or a
    /// cluster connection sent it again and that failed): what it reserved is looked for, and
    /// returned while at least half its time to run is left. With less, a consumer that touches
    /// every half ttr (as the Worker does) could lose a job to another meanwhile: such jobs are
    /// left to lapse and be delivered again. (An error Redis answered about the keys or
    /// permissions is the script's own: nothing to look for.)
    async fn reserve_call(
        &self,
        connection: &mut Commands,
        keys: &Keys,
        topics: &[&str],
        ttr: Duration,
        most: usize,
    ) -> Result<Vec<Job>> {
        let (token, started) = (unique_id(), Instant::now());
        let call = (unix_now() + ttr.as_secs_f64(), token.as_str());
        let reserve = &self.inner.scripts.reserve;
        let error = match reserve.run(connection, keys, call, most, topics).await {
            Ok(jobs) => return Ok(jobs),
            Err(error) => error,
        };
        if unanswered(&error)
            && started.elapsed() < ttr / 2
            && let Some(found) = self.find_reserved(keys, call, topics, most).await
            && started.elapsed() < ttr / 2
        {
            return Ok(found);
        }
        Err(Error::about_key(error, keys.reserved()))
    }

    /// What a reserve `call` (deadline, token) that failed had reserved all the same, at most
    /// `most` jobs; `None` when it reserved nothing, or that cannot be known. Best effort: a call
    /// still waiting in Redis (behind a slow command) may run after this look, and a call a
    /// cluster connection sent again with success had run once before; the jobs of those are
    /// delivered again once their deadline passes, as they were before this look existed.
    async fn find_reserved(
        &self,
        keys: &Keys,
        call: (f64, &str),
        topics: &[&str],
        most: usize,
    ) -> Option<Vec<Job>> {
        let found = match self.connection().await {
            Ok(mut connection) => {
                let scripts = &self.inner.scripts;
                scripts.find_reserved.run(&mut connection, keys, call).await
            }
            Err(error) => Err(error),
        };
        let mut jobs = match found {
            Ok(jobs) if !jobs.is_empty() => jobs,
            Ok(_) => return None,
            Err(error) => {
                warn!(
                    "a reserve failed, and what it reserved cannot be looked for ({error}): jobs \
                     it may have reserved are delivered again once their time to run ends"
                );
                return None;
            }
        };
        // The topic is the bucket's: a job whose list was another's (an id pushed again to
        // another topic) is left to lapse rather than given to a consumer of other topics. More
        // than asked for: a cluster connection ran the call twice. The rest are delivered again
        // once their time to run ends.
        jobs.retain(|job| topics.contains(&job.topic.as_str()));
        jobs.truncate(most);
        if jobs.is_empty() {
            return None;
        }
        warn!(
            jobs = jobs.len(),
            "a reserve's reply was lost, but what it reserved was found"
        );
        Some(jobs)
    }

    /// Finishes a reserved job: it is deleted and never delivered again. Names the reservation
    /// (`client.ack(&job)`): a stale one changes nothing (see [`Acked`]). An error when there is
    /// no such job.
    pub async fn ack(&self, reservation: impl Into<Receipt>) -> Result<Acked> {
        let mut acked = self.ack_many([reservation]).await;
        acked.pop().expect("one result a reservation")
    }

    /// Acks several reservations in one round trip (in the cluster layout, one a topic), as
    /// [`ack`](Client::ack) acks one: what each ack did, in order. Each has its own result: one
    /// that fails (a bad id, a topic whose keys are broken) does not keep the others from being
    /// acked.
    pub async fn ack_many<R: Into<Receipt>>(
        &self,
        reservations: impl IntoIterator<Item = R>,
    ) -> Vec<Result<Acked>> {
        let reservations: Vec<Receipt> = reservations.into_iter().map(Into::into).collect();
        let mut acked: Vec<Result<Acked>> = reservations
            .iter()
            .map(|reservation| Err(Error::UnknownJob(reservation.id.clone())))
            .collect();
        // The reservations of each topic's keys (all of them but in the cluster layout).
        let mut groups: Vec<(Cow<'_, Keys>, Vec<usize>)> = Vec::new();
        let mut named = HashSet::new();
        for (index, reservation) in reservations.iter().enumerate() {
            // A job named again is acked once: its second ack would find the job lapsed, and
            // finish it even if it was pushed again after the first ended the reservation.
            let cluster = self.inner.settings.layout == Layout::Cluster;
            if !named.insert((&reservation.id, cluster.then_some(&reservation.topic))) {
                continue;
            }
            let keys = match check_id(&reservation.id) {
                Ok(()) => {
                    self.keys_of(&reservation.id, reservation.topic.as_deref())
                        .await
                }
                Err(error) => Err(error),
            };
            match keys {
                Ok(Some(keys)) => match groups.iter_mut().find(|(known, _)| *known == keys) {
                    Some((_, members)) => members.push(index),
                    None => groups.push((keys, vec![index])),
                },
                Ok(None) => {}
                Err(error) => acked[index] = Err(error),
            }
        }
        if groups.is_empty() {
            return acked;
        }
        let mut connection = match self.connection().await {
            Ok(connection) => connection,
            Err(error) => {
                for &index in groups.iter().flat_map(|(_, members)| members) {
                    acked[index] = Err(error.clone().into());
                }
                return acked;
            }
        };
        for (keys, members) in &groups {
            for members in members.chunks(MAX_BATCH) {
                let pairs: Vec<(&str, u32)> = members
                    .iter()
                    .map(|&index| (reservations[index].id.as_str(), reservations[index].attempt))
                    .collect();
                let codes = self
                    .inner
                    .scripts
                    .ack
                    .run(&mut connection, keys, &pairs)
                    .await
                    .map_err(|error| Error::about_key(error, keys.pool()));
                match codes {
                    Ok(codes) => {
                        for (&index, code) in members.iter().zip(codes) {
                            if let Some(code) = code {
                                acked[index] = Ok(code);
                            }
                        }
                    }
                    Err(error) => {
                        for &index in members {
                            acked[index] = Err(error.clone());
                        }
                    }
                }
            }
        }
        acked
    }

    /// Gives a reserved job back after a failed attempt, to be delivered again after
    /// `retry_in`, or, when it was reserved `max_attempts` times, sent to its topic's dead list.
    /// An error when that reservation is not current (its time ran out first).
    pub async fn nack(
        &self,
        reservation: impl Into<Receipt>,
        retry_in: Duration,
    ) -> Result<Nacked> {
        self.release(reservation.into(), true, retry_in).await
    }

    /// Gives a reserved job back untried (a consumer that stops before running it): due again at
    /// once, and the attempt not counted, so it never goes to the dead list for it.
    pub async fn give_back(&self, reservation: impl Into<Receipt>) -> Result<Nacked> {
        self.release(reservation.into(), false, Duration::ZERO)
            .await
    }

    async fn release(
        &self,
        reservation: Receipt,
        counted: bool,
        retry_in: Duration,
    ) -> Result<Nacked> {
        let Receipt { id, attempt, topic } = reservation;
        check_id(&id)?;
        if retry_in > crate::push::MAX_DELAY {
            return Err(Error::TooFar(retry_in.as_secs_f64()));
        }
        let Some(keys) = self.keys_of(&id, topic.as_deref()).await? else {
            return Err(Error::NotReserved(id));
        };
        let now = unix_now();
        let released = self
            .inner
            .scripts
            .release
            .one(
                &mut self.connection().await?,
                &keys,
                &id,
                attempt,
                counted,
                now,
                now + retry_in.as_secs_f64(),
                // Bounded as a push's delay is: the TTL must stay a number Redis takes.
                self.inner
                    .settings
                    .ready_max_lifetime
                    .min(crate::push::MAX_DELAY)
                    .as_secs_f64(),
                self.inner.settings.max_attempts,
            )
            .await
            .map_err(|error| Error::about_key(error, keys.reserved()))?;
        if released.ended == 0 {
            Err(Error::NotReserved(id))
        } else if !released.dead.is_empty() {
            Ok(Nacked::Dead)
        } else if !released.dropped.is_empty() {
            Ok(Nacked::Gone)
        } else {
            Ok(Nacked::Retry)
        }
    }

    /// Extends a reservation: the job must be acked within `ttr` from now. An error when that
    /// reservation is not current.
    pub async fn touch(&self, reservation: impl Into<Receipt>, ttr: Duration) -> Result<()> {
        let Receipt { id, attempt, topic } = reservation.into();
        check_id(&id)?;
        let Some(keys) = self.keys_of(&id, topic.as_deref()).await? else {
            return Err(Error::NotReserved(id));
        };
        let deadline = unix_now() + ttr.as_secs_f64();
        let touched = self
            .inner
            .scripts
            .touch
            .run(&mut self.connection().await?, &keys, &id, attempt, deadline)
            .await
            .map_err(|error| Error::about_key(error, keys.reserved()))?;
        if touched {
            Ok(())
        } else {
            Err(Error::NotReserved(id))
        }
    }

    /// The ids on `topic`'s dead list, oldest first, at most `limit`.
    pub async fn dead(&self, topic: &str, limit: usize) -> Result<Vec<String>> {
        check_topic_in(self.inner.settings.layout, topic)?;
        let dead = self.keys_for(topic).dead(topic);
        if limit == 0 {
            return Ok(Vec::new());
        }
        // LPUSHed: the oldest are at the end.
        let last = isize::try_from(limit).unwrap_or(isize::MAX);
        let mut ids: Vec<String> = self
            .connection()
            .await?
            .lrange(&dead, -last, -1)
            .await
            .map_err(|error| Error::about_key(error, &dead))?;
        ids.reverse();
        Ok(ids)
    }

    /// Moves every dead job of `topic` back to the pool, due now, its attempts counted afresh.
    /// Returns how many went back (those whose data had expired are dropped).
    pub async fn requeue_dead(&self, topic: &str) -> Result<usize> {
        check_topic_in(self.inner.settings.layout, topic)?;
        let mut total = 0;
        loop {
            let (requeued, dropped) = self
                .inner
                .scripts
                .requeue_dead
                .run(
                    &mut self.connection().await?,
                    &self.keys_for(topic),
                    topic,
                    unix_now(),
                    REQUEUE_BATCH,
                )
                .await
                .map_err(|error| Error::about_key(error, &self.keys_for(topic).dead(topic)))?;
            total += requeued;
            if requeued + dropped < REQUEUE_BATCH {
                return Ok(total);
            }
        }
    }

    /// The connection for commands that do not block (a cheap handle on a shared one).
    pub(crate) async fn connection(&self) -> RedisResult<Commands> {
        self.inner.commands.get().await
    }

    async fn blocking_connection(&self) -> RedisResult<Connection> {
        let idle = self.inner.idle_blocking.lock().expect("not poisoned").pop();
        match idle {
            Some(connection) => Ok(connection),
            // No reply timeout: BRPOP's own timeout bounds the wait.
            None => self.inner.redis.connect_blocking().await,
        }
    }

    fn return_blocking_connection(&self, connection: Connection) {
        let mut idle = self.inner.idle_blocking.lock().expect("not poisoned");
        if idle.len() < IDLE_BLOCKING_CONNECTIONS {
            idle.push(connection);
        }
    }
}

/// The legacy pop's second half: reads the job's data and deletes it.
async fn take(
    id: String,
    bucket: &str,
    connection: &mut (impl redis::aio::ConnectionLike + Send + Sync),
) -> Result<Job> {
    let fields: HashMap<String, Vec<u8>> = connection
        .hgetall(bucket)
        .await
        .map_err(|error| Error::about_key(error, bucket))?;
    let (Some(topic), Some(body)) = (fields.get(field::TOPIC), fields.get(field::BODY)) else {
        return Err(Error::Incomplete(id));
    };
    let _: () = connection.del(bucket).await?;
    Ok(Job {
        topic: String::from_utf8_lossy(topic).into_owned(),
        body: body.clone(),
        attempts: 0,
        due: fields
            .get(field::DUE)
            .and_then(|due| String::from_utf8_lossy(due).parse().ok())
            .and_then(from_unix),
        id,
    })
}

/// A topic must not be empty, and must fit the layout (see [`Layout::refusal`]).
pub(crate) fn check_topic_in(layout: Layout, topic: &str) -> Result<()> {
    if topic.is_empty() {
        return Err(Error::EmptyTopic);
    }
    match layout.refusal(topic) {
        Some(why) => Err(Error::TopicRefused(topic.to_string(), why)),
        None => Ok(()),
    }
}

fn check_id(id: &str) -> Result<()> {
    if id.is_empty() {
        Err(Error::EmptyId)
    } else {
        Ok(())
    }
}
