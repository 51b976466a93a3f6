//! The deadpool-redis pool built from `[redis]`, and Redis failures told in words a user understands.

use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use deadpool_redis::redis::{
    self, AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, ErrorKind, IntoConnectionInfo,
    ProtocolVersion, RedisConnectionInfo, RedisResult,
};
use deadpool_redis::{Manager, Pool, PoolError};

use crate::config::RedisConfig;

/// How long connecting may take before it counts as a failure.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a reply may take: bounds how long a stop waits for a hung Redis. Far above the
/// longest script call (a full batch of the largest size takes tens of ms), so that a slow Redis
/// (forking for a save, say) is not mistaken for a lost one.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// A pool of connections to the configured Redis (nothing is connected until first use).
pub fn build(config: &RedisConfig) -> Result<Pool> {
    let info = connection_info(config, ProtocolVersion::RESP2)?;
    let manager = Manager::new_with_config(info, connection_config())?;
    Pool::builder(manager)
        .max_size(config.max_active)
        .build()
        .context("cannot build the Redis connection pool")
}

/// Where and how to connect, as `[redis]` says.
pub fn connection_info(
    config: &RedisConfig,
    protocol: ProtocolVersion,
) -> RedisResult<ConnectionInfo> {
    let addr = if config.is_unix_socket() {
        ConnectionAddr::Unix(config.host.clone().into())
    } else {
        ConnectionAddr::Tcp(config.host.clone(), config.port)
    };
    let mut settings = RedisConnectionInfo::default()
        .set_db(config.database)
        .set_protocol(protocol);
    if let Some(password) = &config.password {
        settings = settings.set_password(password);
    }
    Ok(addr.into_connection_info()?.set_redis_settings(settings))
}

/// The timeouts every connection of ours uses.
pub fn connection_config() -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
}

/// Connects once and returns the server's `redis_version`.
pub async fn server_version(config: &RedisConfig) -> Result<String> {
    let pool = build(config)?;
    let mut connection = pool
        .get()
        .await
        .map_err(|error| anyhow!(describe(&error, config)))?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut connection)
        .await
        .map_err(|error| anyhow!(describe_redis(&error, config)))?;
    Ok(info
        .lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .unwrap_or("unknown")
        .to_string())
}

/// Closes connections past `idle_timeout` or `conn_max_lifetime`, and idle ones beyond `max_idle`.
pub fn prune(pool: &Pool, config: &RedisConfig) {
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

/// A failure to talk to Redis: its kind (an outage is logged once per kind) and what to tell the user.
#[derive(Debug)]
pub struct Trouble {
    pub kind: Failure,
    pub message: String,
}

impl std::fmt::Display for Trouble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    Password,
    Database,
    Unreachable,
    Other,
}

/// Why getting a connection failed, in the words of someone running the daemon.
pub fn describe(error: &PoolError, config: &RedisConfig) -> Trouble {
    match error {
        PoolError::Backend(error) => describe_redis(error, config),
        other => Trouble {
            kind: Failure::Other,
            message: format!("Redis at {}: {other}", config.address()),
        },
    }
}

/// Like [`describe`], for an error from a command.
pub fn describe_redis(error: &redis::RedisError, config: &RedisConfig) -> Trouble {
    let address = config.address();
    let kind = failure_kind(error);
    let message = match kind {
        Failure::Password => format!(
            "Redis at {address} refused the password ([redis] password is {}): {error}",
            if config.password.is_some() {
                "set"
            } else {
                "empty"
            }
        ),
        Failure::Database => format!(
            "Redis at {address} has no database {} ([redis] database): {error}",
            config.database
        ),
        Failure::Unreachable => format!("cannot reach Redis at {address}: {error}"),
        Failure::Other => format!("Redis at {address} failed: {error}"),
    };
    Trouble { kind, message }
}

/// True for failures that may pass: Redis unreachable, or refusing the configured password or
/// database (which can be fixed on the Redis side while we wait).
pub fn is_retryable(error: &redis::RedisError) -> bool {
    failure_kind(error) != Failure::Other
}

/// True for failures that retrying cannot fix: the configured password or database is wrong.
pub fn is_config_error(error: &redis::RedisError) -> bool {
    matches!(failure_kind(error), Failure::Password | Failure::Database)
}

fn failure_kind(error: &redis::RedisError) -> Failure {
    let text = error.to_string();
    if error.kind() == ErrorKind::AuthenticationFailed
        || [
            "NOAUTH",
            "WRONGPASS",
            "invalid password",
            "without any password",
        ]
        .iter()
        .any(|marker| text.contains(marker))
    {
        Failure::Password
    } else if text.contains("DB index") {
        Failure::Database
    } else if error.is_io_error() || error.is_timeout() || error.is_connection_dropped() {
        Failure::Unreachable
    } else {
        Failure::Other
    }
}
