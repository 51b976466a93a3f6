//! Wakes the cluster mover when any master's job pools are written, so that a job pushed to fall
//! due before the next look is moved in time (as `wakeup` does for one Redis). A cluster's writes
//! happen on its masters, so each is watched on a connection of its own; which masters there are
//! is asked again every [`TOPOLOGY_CHECK`] and whenever a watch is lost.

use std::time::Duration;

use deadpool_redis::redis::{self, Value};
use delayer_client::Target;
use delayer_client::connection::{self, Connection};
use delayer_client::keys::{CLUSTER_POOL_SUFFIX, CLUSTER_PREFIX};
use delayer_client::watch::{Ensured, KeyWatch};
use futures_util::future::select_all;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::info;

use crate::config::RedisConfig;
use crate::pool;

/// How often the masters are listed again: a master added by resharding is watched from then.
const TOPOLOGY_CHECK: Duration = Duration::from_secs(30);

/// Watches the pools on every master.
pub struct ClusterWatch {
    redis: RedisConfig,
    /// Each master's address, its watch, and the receiver the loop waits on.
    masters: Vec<(String, KeyWatch, watch::Receiver<u64>)>,
    listed_at: Option<Instant>,
    /// Said once: this cluster cannot report writes.
    said_unsupported: bool,
}

impl ClusterWatch {
    pub fn new(redis: &RedisConfig) -> ClusterWatch {
        ClusterWatch {
            redis: redis.clone(),
            masters: Vec::new(),
            listed_at: None,
            said_unsupported: false,
        }
    }

    /// Watches every master, listing them again when due; quick when already watching. Failures
    /// are left to the loop's outage handling: the next look tries again.
    pub async fn ensure(&mut self, connection: &mut Connection) {
        if self
            .listed_at
            .is_none_or(|listed| listed.elapsed() >= TOPOLOGY_CHECK)
            && let Ok(masters) = masters(connection).await
        {
            self.listed_at = Some(Instant::now());
            self.masters
                .retain(|(address, _, _)| masters.contains(address));
            for address in masters {
                let watched = self.masters.iter().any(|(known, _, _)| *known == address);
                if !watched && let Some(watch) = self.watch(&address) {
                    let written = watch.subscribe();
                    self.masters.push((address, watch, written));
                }
            }
        }
        for (address, watch, _) in &self.masters {
            match watch.ensure().await {
                Ensured::Unsupported(Some(refusal)) if !self.said_unsupported => {
                    self.said_unsupported = true;
                    info!(
                        "Jobs pushed to fall due sooner than the loop's next look wait up to \
                         timer_interval: Redis at {address} cannot report writes to job pools \
                         ({refusal}; CLIENT TRACKING needs Redis 6)"
                    );
                }
                // Lost with its master: list the masters again at the next look.
                Ensured::Failed(_) => self.listed_at = None,
                _ => {}
            }
        }
    }

    fn watch(&self, address: &str) -> Option<KeyWatch> {
        let (host, port) = address.rsplit_once(':')?;
        let node = pool::connection_info(&RedisConfig {
            host: host.trim_matches(['[', ']']).to_string(),
            port: port.parse().ok()?,
            cluster: None,
            ..self.redis.clone()
        })
        .ok()?;
        let watch = KeyWatch::new(Target::from(node), connection::config(), CLUSTER_PREFIX);
        Some(watch.only_ending_with(CLUSTER_POOL_SUFFIX))
    }

    /// Forgets the writes so far: the look about to start sees them.
    pub fn seen(&mut self) {
        for (_, _, written) in &mut self.masters {
            written.mark_unchanged();
        }
    }

    /// Completes when a pool was written on any master since the last [`seen`](Self::seen).
    pub async fn written(&mut self) {
        if self.masters.is_empty() {
            return std::future::pending().await;
        }
        let changes = self
            .masters
            .iter_mut()
            .map(|(_, _, written)| Box::pin(written.changed()));
        if select_all(changes).await.0.is_err() {
            // Cannot happen (each watch owns its sender); never wake for it.
            std::future::pending::<()>().await;
        }
    }
}

/// The masters' addresses (`host:port`), from `CLUSTER SLOTS`: the first node of each range.
async fn masters(connection: &mut Connection) -> redis::RedisResult<Vec<String>> {
    let ranges: Vec<Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(connection)
        .await?;
    let mut masters = Vec::new();
    for range in ranges {
        let Value::Array(range) = range else { continue };
        let Some(Value::Array(node)) = range.get(2) else {
            continue;
        };
        let (Some(Value::BulkString(host)), Some(Value::Int(port))) = (node.first(), node.get(1))
        else {
            continue;
        };
        let address = delayer_client::connection::host_port(
            &String::from_utf8_lossy(host),
            u16::try_from(*port).unwrap_or(0),
        );
        if !masters.contains(&address) {
            masters.push(address);
        }
    }
    Ok(masters)
}
