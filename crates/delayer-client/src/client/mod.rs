//! The client: a handle on the delayer Redis for applications, cheap to clone. What it does is
//! split by concern: [`push`] (push and remove), [`pop`] (the legacy pop, at most once),
//! [`reserve`] and [`finish`] (at least once: reserve, then ack, nack or touch), [`get`] (one job
//! by id), [`consumers`] (heartbeats: who is consuming) and [`history`] (pushes and acks counted
//! for the history). What operators look at and act on is the [`Inspector`](crate::Inspector)'s.

pub(crate) mod consumers;
pub(crate) mod finish;
pub(crate) mod get;
pub(crate) mod history;
pub(crate) mod pop;
pub(crate) mod push;
pub(crate) mod reserve;
mod unsent;

use redis::{AsyncCommands, IntoConnectionInfo, RedisResult};
use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::settings::{MIN_TTR, Settings};
use delayer_wire::connection::{self, Connection, Target};
use delayer_wire::keys::{Keys, Layout};
use delayer_wire::name::Topic;
use delayer_wire::push::{Limits, Pusher, topic_refusal};
use delayer_wire::scripts::ack::AckScript;
use delayer_wire::scripts::body::{Body, BodyScript};
use delayer_wire::scripts::compact_job::CompactJobScript;
use delayer_wire::scripts::count::CountScript;
use delayer_wire::scripts::find_reserved::FindReservedScript;
use delayer_wire::scripts::heartbeat::HeartbeatScript;
use delayer_wire::scripts::release::ReleaseScript;
use delayer_wire::scripts::reserve::ReserveScript;
use delayer_wire::scripts::touch::TouchScript;
use delayer_wire::shared_connection::{Commands, SharedConnection};
use delayer_wire::time::redis_now;
use delayer_wire::watch::KeyWatch;
use unsent::Unsent;

/// Blocking connections kept for the next `bpop`.
const IDLE_BLOCKING_CONNECTIONS: usize = 4;

/// A handle on the delayer Redis; cheap to clone, one connection shared by all clones.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
    /// The consumer this handle reserves for (see [`Client::as_consumer`]).
    consumer: Option<Arc<str>>,
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
    /// Checks and writes pushes.
    pusher: Pusher,
    /// Pushes and acks counted, not yet added to the history.
    unsent: Unsent,
}

#[derive(Default)]
struct Scripts {
    reserve: ReserveScript,
    find_reserved: FindReservedScript,
    heartbeat: HeartbeatScript,
    ack: AckScript,
    body: BodyScript,
    compact_job: CompactJobScript,
    count: CountScript,
    release: ReleaseScript,
    touch: TouchScript,
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
        if settings.layout.per_topic() && !redis.is_cluster() {
            // No daemon moves the cluster layout's jobs on a single Redis: they would wait for ever.
            return Err(Error::Redis(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "the cluster layout wants a Redis Cluster (Target::cluster)",
            ))));
        }
        let commands = SharedConnection::connect(redis.clone()).await?;
        Ok(Client::with(redis, commands, settings))
    }

    /// A client on `connection`, which the caller may use for commands of its own too. It
    /// connects when `connection` does: made with [`SharedConnection::lazy`], at its first
    /// command (and again whenever it broke), for a server that must start while Redis is down.
    pub fn on(connection: Arc<SharedConnection>, settings: Settings) -> Client {
        let redis = connection.target().clone();
        Client::with(redis, connection, settings)
    }

    fn with(redis: Target, commands: Arc<SharedConnection>, mut settings: Settings) -> Client {
        if redis.is_cluster() {
            settings.layout = Layout::CLUSTER;
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
                pusher: Pusher::new(settings.layout, Limits::from(&settings)),
                unsent: Unsent::default(),
                settings,
            }),
            consumer: None,
        }
    }

    /// The key names this client uses: every topic's, or in the cluster layout the registry's
    /// and the lists' (see [`Keys::of_topic`]).
    pub(crate) fn keys(&self) -> &Keys {
        &self.inner.keys
    }

    /// The key names of `topic`'s jobs.
    pub(crate) fn keys_for(&self, topic: impl AsRef<[u8]>) -> Cow<'_, Keys> {
        self.inner.keys.of_topic(topic)
    }

    pub(crate) fn layout(&self) -> Layout {
        self.inner.settings.layout
    }

    /// The key names of job `id`'s data. In the cluster layout, where they depend on the topic:
    /// those of `topic` when known, else of the first topic of the registry (in name order) that
    /// holds the id; `None` when none does.
    pub(crate) async fn keys_of(
        &self,
        id: &[u8],
        topic: Option<&Topic>,
    ) -> Result<Option<Cow<'_, Keys>>> {
        if let Some(keys) = self.inner.keys.every_topic() {
            return Ok(Some(Cow::Borrowed(keys)));
        }
        if let Some(topic) = topic {
            return Ok(Some(self.keys_for(topic)));
        }
        let mut topics = self.topics().await?;
        topics.sort();
        let mut connection = self.connection().await?;
        let mut found = Vec::new();
        for topic in topics {
            if self.layout().refusal(&topic).is_some() {
                continue;
            }
            let keys = self.keys_for(&topic);
            // Its data, (an orphan) its pool entry alone, or its place waiting compact (an ACL
            // that denies the compact keys: none there).
            let mut lookup = redis::pipe();
            lookup
                .ignore_errors()
                .exists(keys.bucket(id))
                .zscore(keys.pool(), id);
            match keys.compact() {
                Some(compact) => lookup.hexists(compact.index(), id),
                None => lookup.cmd("PING"),
            };
            let (data, pooled, compact): (
                RedisResult<bool>,
                RedisResult<Option<f64>>,
                RedisResult<redis::Value>,
            ) = lookup.query_async(&mut connection).await?;
            if data? || pooled?.is_some() || matches!(compact, Ok(redis::Value::Int(1))) {
                found.push(topic);
            }
        }
        match &found[..] {
            [] => Ok(None),
            [topic] => Ok(Some(self.keys_for(topic))),
            _ => Err(Error::AmbiguousId {
                id: id.into(),
                topics: found,
            }),
        }
    }

    /// The settings this client was made with.
    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// The connection for commands that do not block (a cheap handle on a shared one).
    pub(crate) async fn connection(&self) -> RedisResult<Commands> {
        self.inner.commands.get().await
    }

    /// Now by Redis's clock, which decides what is due, in unix seconds; by this host's when
    /// this Redis user may not run TIME.
    pub(crate) async fn now(&self) -> Result<f64> {
        Ok(redis_now(&mut self.connection().await?).await?)
    }

    /// The topics of the registry (`delayer:topics`): every topic our pushes, the daemon's moves
    /// and its dead lists have seen.
    pub(crate) async fn topics(&self) -> Result<Vec<Topic>> {
        let mut connection = self.connection().await?;
        Ok(connection.smembers(self.keys().topics()).await?)
    }

    /// `ttr` as a reserve or touch takes it: at least [`MIN_TTR`]; one over
    /// [`Settings::max_ttr`] is an error.
    fn checked_ttr(&self, ttr: Duration) -> Result<Duration> {
        let max = self.inner.settings.max_ttr;
        if ttr > max {
            return Err(Error::TtrTooLong { ttr, max });
        }
        Ok(ttr.max(MIN_TTR))
    }

    /// The body of the job whose bucket is `bucket`, read only if it is at most `limit` bytes.
    async fn body_up_to(
        &self,
        connection: &mut (impl redis::aio::ConnectionLike + Send + Sync),
        bucket: &[u8],
        limit: usize,
    ) -> Result<Body> {
        let read = self.inner.scripts.body.run(connection, bucket, limit).await;
        read.map_err(|error| Error::about_key(error, bucket))
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

/// A topic must not be empty, and must fit the layout (see [`Layout::refusal`]).
pub(crate) fn check_topic_in(layout: Layout, topic: &[u8]) -> Result<()> {
    check_topic(topic, layout.refusal(topic))
}

/// A topic to write new jobs or a pause to: as [`check_topic_in`], and see
/// [`Layout::write_refusal`].
pub(crate) fn check_topic_to_write_in(layout: Layout, topic: &[u8]) -> Result<()> {
    check_topic(topic, layout.write_refusal(topic))
}

fn check_topic(topic: &[u8], refusal: Option<&'static str>) -> Result<()> {
    match topic_refusal(topic, refusal) {
        Some(refusal) => Err(refusal.into()),
        None => Ok(()),
    }
}

/// An id must not be empty.
pub(crate) fn check_id(id: &[u8]) -> Result<()> {
    if id.is_empty() {
        Err(Error::EmptyId)
    } else {
        Ok(())
    }
}
