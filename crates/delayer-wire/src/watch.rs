//! Tells when keys under a prefix are written, so that a waiter looks again at once rather than
//! after a polling interval: the daemon watches the job pool, blocking reserves the ready lists.
//!
//! The legacy clients cannot be changed to signal anyone, but Redis 6+ can: on a connection of its
//! own, `CLIENT TRACKING ON BCAST PREFIX <prefix>` makes Redis push an invalidation for every write
//! to a matching key, with no change to the server's configuration. Where that is refused (Redis
//! 5, or an ACL denying `CLIENT`), [`KeyWatch::ensure`] says so and waiters fall back to polling.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{
    AsyncConnectionConfig, ErrorKind, ProtocolVersion, PushInfo, PushKind, RedisError, RedisResult,
    Value,
};
use tokio::sync::{Mutex, watch};

use crate::connection::Target;

/// Watches the keys under one prefix for writes.
pub struct KeyWatch {
    redis: Target,
    config: AsyncConnectionConfig,
    prefix: String,
    /// Only writes to keys ending so count (the others under the prefix are ignored); none: all.
    suffixes: Vec<String>,
    /// Counts writes (and losses of the watch); waiters subscribe before they look.
    written: watch::Sender<u64>,
    /// The keys written since [`take_written`](KeyWatch::take_written) last took them.
    keys: Arc<StdMutex<Written>>,
    lost: Arc<AtomicBool>,
    state: Mutex<State>,
}

enum State {
    NotWatching,
    Watching {
        /// Kept open: the reports come on it.
        #[allow(dead_code)]
        connection: MultiplexedConnection,
        /// When [`ensure`](KeyWatch::ensure) last found or started it.
        wanted: Instant,
    },
    Unsupported,
}

/// The keys written, as far as they are known.
#[derive(Debug, Default, PartialEq)]
pub struct Written {
    /// The keys named (those that end with a suffix asked for).
    pub keys: HashSet<String>,
    /// Writes that name no key (a flush), too many keys to keep, or a watch lost: any key may
    /// have been written.
    pub any: bool,
}

/// The most keys [`Written`] names; past that it says `any`.
const MOST_NAMED: usize = 10_000;

impl Written {
    fn add(&mut self, keys: &Value, suffixes: &[String]) {
        match keys {
            Value::Array(keys) => keys.iter().for_each(|key| self.add(key, suffixes)),
            Value::BulkString(key) if suffixes.iter().any(|s| key.ends_with(s.as_bytes())) => {
                match String::from_utf8(key.clone()) {
                    Ok(key) if self.keys.len() < MOST_NAMED => {
                        self.keys.insert(key);
                    }
                    _ => self.any = true,
                }
            }
            Value::BulkString(_) => {}
            _ => self.any = true,
        }
    }
}

/// How [`KeyWatch::ensure`] went.
#[derive(Debug)]
pub enum Ensured {
    /// Writes will be reported.
    Watching,
    /// This Redis cannot report writes: waiters must poll. Carries Redis's refusal the first
    /// time (to be told once), `None` after.
    Unsupported(Option<RedisError>),
    /// Redis could not be reached or refused us; the next call tries again.
    Failed(RedisError),
}

impl KeyWatch {
    /// A watch of the keys starting with `prefix` on `redis` (connected by
    /// [`ensure`](KeyWatch::ensure)). `config` carries the timeouts; RESP3 is set when connecting.
    pub fn new(redis: impl Into<Target>, config: AsyncConnectionConfig, prefix: &str) -> KeyWatch {
        KeyWatch {
            redis: redis.into(),
            config,
            prefix: prefix.to_string(),
            suffixes: Vec::new(),
            written: watch::Sender::new(0),
            keys: Arc::default(),
            lost: Arc::new(AtomicBool::new(false)),
            state: Mutex::new(State::NotWatching),
        }
    }

    /// Counts only writes to keys that end with `suffix`, or with a suffix given before (Redis
    /// can match prefixes only).
    pub fn only_ending_with(mut self, suffix: &str) -> KeyWatch {
        self.suffixes.push(suffix.to_string());
        self
    }

    /// The keys written since the last call (with suffixes given, those that end with one):
    /// take them after [`subscribe`](KeyWatch::subscribe)'s receiver was marked seen, and none
    /// is missed.
    pub fn take_written(&self) -> Written {
        std::mem::take(&mut *self.keys.lock().expect("not poisoned"))
    }

    /// Starts watching if not yet (or no longer) watching; quick when already watching.
    pub async fn ensure(&self) -> Ensured {
        if self.redis.is_cluster() {
            // Its writes happen on many masters: not watched, waiters poll.
            return Ensured::Unsupported(None);
        }
        let mut state = self.state.lock().await;
        if self.lost.swap(false, Ordering::Relaxed) {
            *state = State::NotWatching;
        }
        match &mut *state {
            State::Watching { wanted, .. } => {
                *wanted = Instant::now();
                return Ensured::Watching;
            }
            State::Unsupported => return Ensured::Unsupported(None),
            State::NotWatching => {}
        }
        match self.connect().await {
            Ok(connection) => {
                *state = State::Watching {
                    connection,
                    wanted: Instant::now(),
                };
                Ensured::Watching
            }
            Err(error) if is_refusal(&error) => {
                *state = State::Unsupported;
                Ensured::Unsupported(Some(error))
            }
            Err(error) => Ensured::Failed(error),
        }
    }

    /// Stops watching when nobody has wanted the watch for `unused_for` and nobody waits on it:
    /// while it runs, every write costs Redis and this process a message. A waiter wants it again
    /// (through [`ensure`](KeyWatch::ensure)) before each wait, so `unused_for` longer than any
    /// wait never stops a watch someone relies on.
    pub fn release_unused(&self, unused_for: Duration) {
        if self.written.receiver_count() > 0 {
            return;
        }
        let Ok(mut state) = self.state.try_lock() else {
            return;
        };
        if matches!(*state, State::Watching { wanted, .. } if wanted.elapsed() >= unused_for) {
            *state = State::NotWatching;
        }
    }

    /// A receiver whose `changed()` completes at the next write after this call: subscribe
    /// before looking, then wait on it, and no write in between is missed.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.written.subscribe()
    }

    async fn connect(&self) -> RedisResult<MultiplexedConnection> {
        let (written, lost, keys) = (self.written.clone(), self.lost.clone(), self.keys.clone());
        let suffixes = self.suffixes.clone();
        let on_push = move |push: PushInfo| -> Result<(), std::convert::Infallible> {
            if push.kind == PushKind::Disconnection {
                lost.store(true, Ordering::Relaxed);
                keys.lock().expect("not poisoned").any = true;
            }
            if push.kind == PushKind::Invalidate {
                if !suffixes.is_empty()
                    && !push
                        .data
                        .iter()
                        .any(|keys| names_a_key_ending(keys, &suffixes))
                {
                    return Ok(());
                }
                let mut keys = keys.lock().expect("not poisoned");
                push.data
                    .iter()
                    .for_each(|named| keys.add(named, &suffixes));
            }
            // Waiters look once for however many writes came meanwhile.
            written.send_modify(|count| *count = count.wrapping_add(1));
            Ok(())
        };
        let config = self.config.clone().set_push_sender(on_push);
        let info = self.redis.resolve().await?;
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        let mut connection = redis::Client::open(info.set_redis_settings(settings))?
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        redis::cmd("CLIENT")
            .arg(&["TRACKING", "ON", "BCAST", "PREFIX", &self.prefix][..])
            .query_async::<()>(&mut connection)
            .await?;
        Ok(connection)
    }
}

/// Whether an invalidation's keys include one ending with one of `suffixes`; a flush (no keys)
/// does.
fn names_a_key_ending(keys: &Value, suffixes: &[String]) -> bool {
    match keys {
        Value::Nil => true,
        Value::Array(keys) => keys.iter().any(|key| names_a_key_ending(key, suffixes)),
        Value::BulkString(key) => suffixes.iter().any(|s| key.ends_with(s.as_bytes())),
        _ => false,
    }
}

/// Redis answered but will not track: too old for RESP3 or CLIENT TRACKING, or denied by ACL.
fn is_refusal(error: &RedisError) -> bool {
    matches!(
        error.kind(),
        ErrorKind::RESP3NotSupported | ErrorKind::Server(_) | ErrorKind::Extension
    ) && !matches!(error.code(), Some("NOAUTH" | "WRONGPASS" | "LOADING"))
}
