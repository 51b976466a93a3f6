//! One multiplexed connection shared by every clone of a client for the commands that do not block,
//! replaced when it breaks: the command that saw it break fails, the next one reconnects. With
//! Sentinel it is also replaced when the sentinels name another master (asked in the background
//! every [`MASTER_CHECK`]): the old one may take writes for seconds after a failover, writes the
//! new master never sees.
//!
//! (redis's ConnectionManager does the same, but its per-command bookkeeping cost a fifth of the
//! push rate in the benchmark.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value};

use crate::connection::{self, MASTER_CHECK, Target};

/// Where to connect, and the connection while it works.
pub(crate) struct SharedConnection {
    redis: Target,
    /// The working connection, numbered so that a late failure of an old one cannot drop a new one.
    current: Mutex<Option<(u64, MultiplexedConnection)>>,
    /// With Sentinel: the address of the current connection, and when the sentinels were asked.
    master: Mutex<(String, Option<Instant>)>,
    next_generation: AtomicU64,
    /// Only one reconnect at a time; the others wait for it.
    connecting: tokio::sync::Mutex<()>,
}

impl SharedConnection {
    /// Connects at once, so that a wrong address or password is told at start.
    pub(crate) async fn connect(redis: Target) -> RedisResult<Arc<SharedConnection>> {
        let shared = SharedConnection::lazy(redis);
        shared.get().await?;
        Ok(shared)
    }

    /// Connects on the first command.
    pub(crate) fn lazy(redis: Target) -> Arc<SharedConnection> {
        Arc::new(SharedConnection {
            redis,
            current: Mutex::new(None),
            master: Mutex::new((String::new(), None)),
            next_generation: AtomicU64::new(0),
            connecting: tokio::sync::Mutex::new(()),
        })
    }

    /// A handle for some commands; connects first if the last connection broke.
    pub(crate) async fn get(self: &Arc<Self>) -> RedisResult<Commands> {
        if let Some(working) = self.working() {
            if let Target::Sentinel(_) = self.redis {
                self.follow_master(working.0);
            }
            return Ok(self.handle(working));
        }
        let _one_at_a_time = self.connecting.lock().await;
        if let Some(working) = self.working() {
            return Ok(self.handle(working));
        }
        let info = self.redis.resolve().await?;
        let address = info.addr().to_string();
        let connection = redis::Client::open(info)?
            .get_multiplexed_async_connection_with_config(&connection::config())
            .await?;
        let mut current = self.current.lock().expect("not poisoned");
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        *current = Some((generation, connection.clone()));
        *self.master.lock().expect("not poisoned") = (address, Some(Instant::now()));
        Ok(self.handle((generation, connection)))
    }

    /// At most every [`MASTER_CHECK`], in the background: asks the sentinels where the master is,
    /// and drops connection `generation` when it is elsewhere.
    fn follow_master(self: &Arc<Self>, generation: u64) {
        {
            let mut master = self.master.lock().expect("not poisoned");
            if master.1.is_some_and(|asked| asked.elapsed() < MASTER_CHECK) {
                return;
            }
            master.1 = Some(Instant::now());
        }
        let shared = self.clone();
        tokio::spawn(async move {
            let Ok(info) = shared.redis.resolve().await else {
                return;
            };
            if shared.master.lock().expect("not poisoned").0 != info.addr().to_string() {
                shared.drop_connection(generation);
            }
        });
    }

    fn working(&self) -> Option<(u64, MultiplexedConnection)> {
        self.current.lock().expect("not poisoned").clone()
    }

    fn handle(
        self: &Arc<Self>,
        (generation, connection): (u64, MultiplexedConnection),
    ) -> Commands {
        Commands {
            shared: self.clone(),
            generation,
            connection,
        }
    }

    /// Drops connection `generation` if `error` says it broke, or that it reaches a replica (the
    /// old master, after a failover).
    fn check(&self, generation: u64, error: &RedisError) {
        if error.is_io_error()
            || error.is_connection_dropped()
            || error.is_unrecoverable_error()
            || error.code() == Some("READONLY")
        {
            self.drop_connection(generation);
        }
    }

    /// Drops connection `generation` if it is still the current one: the next command connects.
    fn drop_connection(&self, generation: u64) {
        let mut current = self.current.lock().expect("not poisoned");
        if current
            .as_ref()
            .is_some_and(|(current, _)| *current == generation)
        {
            *current = None;
        }
    }
}

/// A handle on the shared connection; commands sent through it that find it broken have it
/// replaced.
#[derive(Clone)]
pub(crate) struct Commands {
    shared: Arc<SharedConnection>,
    generation: u64,
    connection: MultiplexedConnection,
}

impl ConnectionLike for Commands {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let reply = self.connection.req_packed_command(cmd).await;
            if let Err(error) = &reply {
                self.shared.check(self.generation, error);
            }
            reply
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let replies = self
                .connection
                .req_packed_commands(cmd, offset, count)
                .await;
            if let Err(error) = &replies {
                self.shared.check(self.generation, error);
            }
            replies
        })
    }

    fn get_db(&self) -> i64 {
        self.connection.get_db()
    }
}
