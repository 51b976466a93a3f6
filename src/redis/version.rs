//! Which Redis answers: for `--check-config`, connected to once as the daemon would.

use anyhow::{Result, anyhow, bail};
use deadpool_redis::PoolError;
use deadpool_redis::redis::{self, Value};

use super::connect::target;
use super::failure::Failure;
use super::failure_kind::FailureKind;
use super::{RedisPool, RedisSettings};

/// Connects once and returns the server's `redis_version`.
pub async fn server_version(config: &RedisSettings) -> Result<String> {
    if config.cluster.is_some() {
        let mut connection = target(config)?
            .connect()
            .await
            .map_err(|error| anyhow!(Failure::of(&error, config)))?;
        // Through a cluster connection INFO goes to every node, and comes back one reply a node.
        let info: Value = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut connection)
            .await
            .map_err(|error| anyhow!(Failure::of(&error, config)))?;
        let mut versions = Vec::new();
        versions_in(&info, &mut versions)?;
        versions.sort();
        versions.dedup();
        return Ok(if versions.is_empty() {
            "unknown".into()
        } else {
            versions.join(", ")
        });
    }
    let pool = RedisPool::new(config, target(config)?)?;
    let mut connection = match pool.get().await {
        Ok(connection) => connection,
        Err(PoolError::Backend(error)) if FailureKind::of(&error) == FailureKind::Password => {
            bail!(Failure::refusal(&error, config).await)
        }
        // With what connecting says (a TLS port spoken to in plain text, and the reverse).
        Err(error) => bail!(Failure::connecting(&error, config)),
    };
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut connection)
        .await
        .map_err(|error| anyhow!(Failure::of(&error, config)))?;
    Ok(redis_version(&info))
}

/// The `redis_version` of each node's reply in `info`, whatever shape the replies of several
/// nodes take; an error a node answered fails the check, naming the node.
fn versions_in(info: &Value, versions: &mut Vec<String>) -> Result<()> {
    match info {
        Value::BulkString(bytes) => versions.push(redis_version(&String::from_utf8_lossy(bytes))),
        Value::SimpleString(text) | Value::VerbatimString { text, .. } => {
            versions.push(redis_version(text));
        }
        Value::Array(values) | Value::Set(values) => {
            for value in values {
                versions_in(value, versions)?;
            }
        }
        Value::Map(pairs) => {
            for (node, value) in pairs {
                if let Value::ServerError(error) = value {
                    let node = match node {
                        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                        other => format!("{other:?}"),
                    };
                    bail!("the cluster's node {node} answered INFO with an error: {error}");
                }
                versions_in(value, versions)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// `redis_version` from the reply of `INFO server`.
fn redis_version(info: &str) -> String {
    info.lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .unwrap_or("unknown")
        .to_string()
}
