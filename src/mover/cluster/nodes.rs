//! The daemon's own connections to a cluster's masters, one each, and which master holds which
//! key. The redis crate's cluster connection holds every command up while one master hangs (a
//! stopped process keeps its connections open): moves of every topic took 8 to 10 s each. With a
//! connection per master, a hung master holds up only the topics whose slots it serves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use deadpool_redis::redis::aio::MultiplexedConnection;
use deadpool_redis::redis::{self, ErrorKind, RedisError, RedisResult, Value};

use crate::redis::{FailureKind, RedisSettings, node_info};
use delayer_wire::connection::{self, host_port};

/// The slots of a cluster.
const SLOTS: u16 = 16384;
/// The least time between two readings of the slot map: many topics failing at once (their
/// master gone) read it once.
const REFRESH_GAP: Duration = Duration::from_millis(100);

/// Where a cluster's slots are, and a connection to each master.
pub struct ClusterNodes {
    redis: RedisSettings,
    state: Mutex<State>,
    /// One reading of the slot map at a time, and when the last one began.
    refreshing: tokio::sync::Mutex<Option<Instant>>,
}

#[derive(Default)]
struct State {
    /// Slot ranges (first, last) and the master serving them ("host:port").
    slots: Vec<(u16, u16, String)>,
    connections: HashMap<String, MultiplexedConnection>,
}

impl ClusterNodes {
    pub fn new(redis: &RedisSettings) -> ClusterNodes {
        ClusterNodes {
            redis: redis.clone(),
            state: Mutex::default(),
            refreshing: tokio::sync::Mutex::new(None),
        }
    }

    /// Asks the masters it knows, then the configured nodes, in turn for the slot map (`CLUSTER
    /// SLOTS`), and keeps the first one read; at most once per [`REFRESH_GAP`].
    pub async fn refresh(&self) -> RedisResult<()> {
        let mut last = self.refreshing.lock().await;
        if last.is_some_and(|last| last.elapsed() < REFRESH_GAP) {
            return Ok(());
        }
        *last = Some(Instant::now());
        let mut candidates = self.masters();
        for (host, port) in self.redis.cluster.iter().flatten() {
            let address = host_port(host, *port);
            if !candidates.contains(&address) {
                candidates.push(address);
            }
        }
        let mut failure: Option<RedisError> = None;
        for address in candidates {
            match self.slot_map(&address).await {
                Ok(slots) if !slots.is_empty() => {
                    let mut state = self.state.lock().expect("not poisoned");
                    state
                        .connections
                        .retain(|address, _| slots.iter().any(|(_, _, master)| master == address));
                    state.slots = slots;
                    return Ok(());
                }
                Ok(_) => {
                    failure.get_or_insert(RedisError::from((
                        ErrorKind::ClusterConnectionNotFound,
                        "the cluster has no slots assigned yet",
                    )));
                }
                Err(error) => {
                    // A refusal (wrong password, no cluster, TLS) says more than a node that
                    // cannot be reached.
                    if failure
                        .as_ref()
                        .is_none_or(|failure| !FailureKind::of(failure).is_config_error())
                        && (failure.is_none() || FailureKind::of(&error).is_config_error())
                    {
                        failure = Some(error);
                    }
                }
            }
        }
        Err(failure.unwrap_or_else(|| {
            RedisError::from((ErrorKind::InvalidClientConfig, "no cluster nodes given"))
        }))
    }

    async fn slot_map(&self, address: &str) -> RedisResult<Vec<(u16, u16, String)>> {
        let mut connection = self.connect(address).await?;
        let asked_host = address
            .rsplit_once(':')
            .map_or(address, |(host, _)| host.trim_matches(['[', ']']));
        let ranges: Vec<Value> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(&mut connection)
            .await?;
        let mut slots = Vec::new();
        for range in ranges {
            let Value::Array(range) = range else { continue };
            let (Some(Value::Int(first)), Some(Value::Int(last)), Some(Value::Array(node))) =
                (range.first(), range.get(1), range.get(2))
            else {
                continue;
            };
            let (Some(Value::BulkString(host)), Some(Value::Int(port))) =
                (node.first(), node.get(1))
            else {
                continue;
            };
            let host = String::from_utf8_lossy(host);
            // "?": a master whose address is not known yet, served once it is. "": the host of
            // the node asked (a cluster of one knows no address of its own).
            let host = match &*host {
                "?" => continue,
                "" => asked_host.to_string(),
                host => host.to_string(),
            };
            let (Ok(first), Ok(last), Ok(port)) = (
                u16::try_from(*first),
                u16::try_from(*last),
                u16::try_from(*port),
            ) else {
                continue;
            };
            slots.push((first, last, host_port(&host, port)));
        }
        Ok(slots)
    }

    /// The masters, as the slot map last read names them.
    pub fn masters(&self) -> Vec<String> {
        let state = self.state.lock().expect("not poisoned");
        let mut masters: Vec<String> = state
            .slots
            .iter()
            .map(|(_, _, master)| master.clone())
            .collect();
        masters.sort();
        masters.dedup();
        masters
    }

    /// The master serving `key`'s slot, and a connection to it.
    pub async fn for_key(&self, key: &str) -> RedisResult<(String, MultiplexedConnection)> {
        let slot = slot(key.as_bytes());
        let master = self
            .state
            .lock()
            .expect("not poisoned")
            .slots
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&slot))
            .map(|(_, _, master)| master.clone())
            .ok_or_else(|| {
                RedisError::from((
                    ErrorKind::ClusterConnectionNotFound,
                    "no master serves the slot of",
                    key.to_string(),
                ))
            })?;
        let connection = self.connection(&master).await?;
        Ok((master, connection))
    }

    /// A connection to `master` (kept for the next command).
    pub async fn connection(&self, master: &str) -> RedisResult<MultiplexedConnection> {
        let kept = self
            .state
            .lock()
            .expect("not poisoned")
            .connections
            .get(master)
            .cloned();
        if let Some(connection) = kept {
            return Ok(connection);
        }
        let connection = self.connect(master).await?;
        self.state
            .lock()
            .expect("not poisoned")
            .connections
            .insert(master.to_string(), connection.clone());
        Ok(connection)
    }

    /// After a command failed this way (to `master`, or before it found one): a broken
    /// connection is dropped (the next command connects again), and when the slot may be
    /// served elsewhere now (MOVED, ASK, a master gone or hung, no master known for it) the
    /// slot map is read again, in the background: a stop must not wait for it.
    pub fn failed(self: &Arc<Self>, master: Option<&str>, error: &RedisError) {
        let broken = error.is_io_error()
            || error.is_connection_dropped()
            || error.is_timeout()
            || error.is_connection_refusal();
        if let (Some(master), true) = (master, broken) {
            self.state
                .lock()
                .expect("not poisoned")
                .connections
                .remove(master);
        }
        let elsewhere = broken
            || error.kind() == ErrorKind::ClusterConnectionNotFound
            || matches!(
                error.code(),
                Some("MOVED" | "ASK" | "TRYAGAIN" | "CLUSTERDOWN")
            );
        if elsewhere {
            let nodes = self.clone();
            tokio::spawn(async move { nodes.refresh().await });
        }
    }

    async fn connect(&self, address: &str) -> RedisResult<MultiplexedConnection> {
        let node = node_info(&self.redis, address).map_err(|error| {
            RedisError::from((
                ErrorKind::InvalidClientConfig,
                "bad node address",
                error.to_string(),
            ))
        })?;
        redis::Client::open(node)?
            .get_multiplexed_async_connection_with_config(&connection::config())
            .await
    }
}

/// The hash slot of `key`: CRC16 (XMODEM) of its hash tag (the part between the first `{` and
/// the next `}`, when not empty) or of the whole key, modulo 16384, as Redis Cluster computes it.
pub fn slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|byte| *byte == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|byte| *byte == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) % SLOTS
}

fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for byte in bytes {
        crc ^= u16::from(*byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::slot;

    #[test]
    fn slots_are_those_redis_gives() {
        // `CLUSTER KEYSLOT` of each, from redis-server 7.0.
        for (key, expected) in [
            ("123456789", 12739),
            ("foo", 12182),
            ("{user1000}.following", 3443),
            ("{user1000}.followers", 3443),
            ("foo{}{bar}", 8363),
            ("foo{{bar}}zap", 4015),
            ("foo{bar}{zap}", 5061),
        ] {
            assert_eq!(slot(key.as_bytes()), expected, "{key}");
        }
    }
}
