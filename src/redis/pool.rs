//! The deadpool-redis pool built from `[redis]` (for the master its sentinels name, with
//! Sentinel), nothing connected until first used.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};
use deadpool_redis::redis::{self, ConnectionInfo, ErrorKind};
use deadpool_redis::{Connection, Manager, Pool, PoolError};
use delayer_wire::Target;
use delayer_wire::connection::{self, MASTER_CHECK};
use tokio_util::sync::CancellationToken;

use super::RedisSettings;
use crate::service::duty::sleep_or_stop;

/// Connections to the configured Redis, nothing connected until first used. With Sentinel, the
/// pool is for the master found last, checked every [`MASTER_CHECK`]
/// ([`follow_master`](RedisPool::follow_master)) and after a failure
/// ([`forget_master`](RedisPool::forget_master)).
pub struct RedisPool {
    target: Target,
    config: RedisSettings,
    /// The pool, and the address it connects to.
    pool: Mutex<Option<(String, Pool)>>,
    /// Counts the times the master was found elsewhere: a drain under way on the old one stops.
    moves: AtomicU64,
}

impl RedisPool {
    /// The pool for `target`, which `[redis]` of `config` names.
    pub fn new(config: &RedisSettings, target: Target) -> Result<RedisPool> {
        let pool = match &target {
            Target::Address(info) => Some((info.addr().to_string(), build(*info.clone(), config)?)),
            // Built for the master once found; never for a cluster (ClusterMover's own).
            Target::Sentinel(_) | Target::Cluster(_) => None,
        };
        Ok(RedisPool {
            target,
            config: config.clone(),
            pool: Mutex::new(pool),
            moves: AtomicU64::new(0),
        })
    }

    /// How many times the master was found elsewhere so far: a drain that sees this change stops
    /// writing to the old master.
    pub fn master_moves(&self) -> u64 {
        self.moves.load(Ordering::Relaxed)
    }

    /// A connection from the pool (a new one when none is idle).
    pub async fn get(&self) -> Result<Connection, PoolError> {
        let current = self.pool.lock().expect("not poisoned").clone();
        let pool = match current {
            Some((_, pool)) => pool,
            None => {
                let info = self.target.resolve().await.map_err(PoolError::Backend)?;
                self.use_master(info)?
            }
        };
        pool.get().await
    }

    /// With Sentinel, until `stop`: every [`MASTER_CHECK`] asks where the master is, and when it
    /// moved, drops the pool so that the next connection goes there. Beside the loop, never in
    /// its way: a sentinel slow to answer holds up no move, and one that does not answer changes
    /// nothing (the connections say whether the master still works).
    pub async fn follow_master(&self, stop: &CancellationToken) {
        if let Target::Address(_) = self.target {
            return;
        }
        while sleep_or_stop(MASTER_CHECK, stop).await {
            // Sentinels that hang must not hold up a stop.
            let found = tokio::select! {
                found = self.target.resolve() => found,
                () = stop.cancelled() => return,
            };
            let Ok(info) = found else {
                continue;
            };
            let mut pool = self.pool.lock().expect("not poisoned");
            if pool
                .as_ref()
                .is_some_and(|(address, _)| *address != info.addr().to_string())
            {
                *pool = None;
                self.moves.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// After a failure: with Sentinel, the master may have changed; ask again on the next `get`.
    pub fn forget_master(&self) {
        if let Target::Sentinel(_) = self.target {
            *self.pool.lock().expect("not poisoned") = None;
        }
    }

    fn use_master(&self, info: ConnectionInfo) -> Result<Pool, PoolError> {
        let address = info.addr().to_string();
        let pool = build(info, &self.config).map_err(|error| {
            PoolError::Backend(redis::RedisError::from((
                ErrorKind::InvalidClientConfig,
                "cannot build the Redis connection pool",
                format!("{error:#}"),
            )))
        })?;
        *self.pool.lock().expect("not poisoned") = Some((address, pool.clone()));
        Ok(pool)
    }

    /// Where Redis is, for other connections (the pool watch's).
    pub fn target(&self) -> Target {
        self.target.clone()
    }

    /// Closes connections past `idle_timeout` or `conn_max_lifetime`, and idle ones beyond
    /// `max_idle`.
    pub fn prune(&self) {
        let Some((_, pool)) = self.pool.lock().expect("not poisoned").clone() else {
            return;
        };
        let config = &self.config;
        let mut kept = 0;
        pool.retain(|_, metrics| {
            let fresh = config
                .idle_timeout
                .is_none_or(|limit| metrics.last_used() < limit)
                && config
                    .conn_max_lifetime
                    .is_none_or(|limit| metrics.age() < limit);
            kept += usize::from(fresh);
            fresh && kept <= config.max_idle
        });
    }
}

fn build(info: ConnectionInfo, config: &RedisSettings) -> Result<Pool> {
    let manager = Manager::new_with_config(info, connection::config())?;
    Pool::builder(manager)
        .max_size(config.max_active)
        .build()
        .context("cannot build the Redis connection pool")
}
