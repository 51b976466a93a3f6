//! One multiplexed connection shared by every clone of a client for the commands that do not block,
//! replaced when it breaks: the command that saw it break fails, the next one reconnects. With
//! Sentinel it is also replaced when the sentinels name another master (asked in the background
//! every [`MASTER_CHECK`], busy or idle): the old one may take writes for seconds after a
//! failover, writes the new master never sees.
//!
//! (redis's ConnectionManager does the same, but its per-command bookkeeping cost a fifth of the
//! push rate in the benchmark.)

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value};

use crate::connection::{Connection, MASTER_CHECK, Target};

/// Where to connect, and the connection while it works.
pub struct SharedConnection {
    redis: Target,
    /// The working connection, numbered so that a late failure of an old one cannot drop a new one.
    current: Mutex<Option<(u64, Connection)>>,
    /// With Sentinel: the address of the current connection.
    master: Mutex<String>,
    /// Whether the background check of the master's address runs.
    following: AtomicBool,
    next_generation: AtomicU64,
    /// Only one reconnect at a time; the others wait for it.
    connecting: tokio::sync::Mutex<()>,
}

impl SharedConnection {
    /// Connects at once, so that a wrong address or password is told at start.
    pub async fn connect(redis: Target) -> RedisResult<Arc<SharedConnection>> {
        let shared = SharedConnection::lazy(redis);
        shared.get().await?;
        Ok(shared)
    }

    /// Connects on the first command.
    pub fn lazy(redis: Target) -> Arc<SharedConnection> {
        Arc::new(SharedConnection {
            redis,
            current: Mutex::new(None),
            master: Mutex::new(String::new()),
            following: AtomicBool::new(false),
            next_generation: AtomicU64::new(0),
            connecting: tokio::sync::Mutex::new(()),
        })
    }

    /// Where it connects.
    pub fn target(&self) -> &Target {
        &self.redis
    }

    /// A handle for some commands; connects first if the last connection broke.
    pub async fn get(self: &Arc<Self>) -> RedisResult<Commands> {
        if let Some(working) = self.working() {
            return Ok(self.handle(working));
        }
        let _one_at_a_time = self.connecting.lock().await;
        if let Some(working) = self.working() {
            return Ok(self.handle(working));
        }
        let (connection, address) = match &self.redis {
            // A cluster connection finds the masters itself, and follows them when they move.
            Target::Cluster(_) => (self.redis.connect().await?, String::new()),
            single => {
                let info = single.resolve().await?;
                let address = info.addr().to_string();
                let target = Target::from(info);
                (target.connect().await?, address)
            }
        };
        let mut current = self.current.lock().expect("not poisoned");
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        *current = Some((generation, connection.clone()));
        *self.master.lock().expect("not poisoned") = address;
        drop(current);
        if let Target::Sentinel(_) = self.redis
            && !self.following.swap(true, Ordering::Relaxed)
        {
            tokio::spawn(follow_master(Arc::downgrade(self)));
        }
        Ok(self.handle((generation, connection)))
    }

    fn working(&self) -> Option<(u64, Connection)> {
        self.current.lock().expect("not poisoned").clone()
    }

    fn handle(self: &Arc<Self>, (generation, connection): (u64, Connection)) -> Commands {
        Commands {
            shared: self.clone(),
            generation,
            connection,
        }
    }

    /// Drops connection `generation` if `error` says it broke, or that it reaches a replica (the
    /// old master, after a failover).
    fn check(&self, generation: u64, error: &RedisError) {
        // Redis 6 wraps a script's READONLY in an ERR: the words tell.
        if error.is_io_error()
            || error.is_connection_dropped()
            || error.is_unrecoverable_error()
            || error.to_string().contains("READONLY")
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

/// Every [`MASTER_CHECK`] while the client lives: asks the sentinels where the master is, and
/// drops the connection when it goes elsewhere (the next command connects there).
async fn follow_master(shared: Weak<SharedConnection>) {
    loop {
        tokio::time::sleep(MASTER_CHECK).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let Ok(info) = shared.redis.resolve().await else {
            continue;
        };
        let moved = *shared.master.lock().expect("not poisoned") != info.addr().to_string();
        let current = shared.working().map(|(generation, _)| generation);
        if let (true, Some(generation)) = (moved, current) {
            shared.drop_connection(generation);
        }
    }
}

/// A handle on the shared connection; commands sent through it that find it broken have it
/// replaced.
#[derive(Clone)]
pub struct Commands {
    shared: Arc<SharedConnection>,
    generation: u64,
    connection: Connection,
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
