//! Repairs the cluster layout's registry of topics (`delayer:topics`). Pushers add a topic there
//! before its first job, and the daemon drains only the topics it names; but the registry lives on
//! one master, and a failover can lose its latest additions (replication is asynchronous), or a
//! master without persistence can restart empty at the same address. A topic lost so would wait
//! for its next push. So whenever the registry is found on another master than before (at start,
//! after a failover or a resharding), or holds fewer topics than at the last poll (nothing of
//! delayer's removes one), every master is scanned for pools, and the topics they belong to are
//! added back.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_redis::redis::{self, RedisError, RedisResult};
use delayer_wire::keys::Layout;
use tokio::time::Instant;
use tracing::{info, warn};

use super::nodes::ClusterNodes;

/// Keys a SCAN call looks at.
const SCAN_COUNT: usize = 1000;
/// How long after a failed repair (a master down or hung) the next one is tried.
const RETRY_WAIT: Duration = Duration::from_secs(30);

/// When to repair the registry: told where it was read from at every poll.
#[derive(Default)]
pub struct RegistryRepair {
    state: Arc<Mutex<State>>,
    running: Arc<AtomicBool>,
}

#[derive(Default)]
struct State {
    /// The master the registry was last read from.
    master: Option<String>,
    /// How many topics it held then.
    topics: usize,
    /// When to try again after a repair that failed, or that a move came during.
    again_at: Option<Instant>,
}

impl RegistryRepair {
    /// The registry `registry` was just read from `master`, holding `topics` topics: repairs
    /// it, in the background, when that is another master than last time, or fewer topics, or a
    /// retry is due. The next poll reads the topics added.
    pub fn read_from(
        &self,
        master: &str,
        topics: usize,
        nodes: &Arc<ClusterNodes>,
        registry: &str,
        layout: Layout,
    ) {
        {
            let mut state = self.state.lock().expect("not poisoned");
            let moved = state.master.as_deref() != Some(master);
            let shrunk = topics < state.topics;
            let again = state.again_at.is_some_and(|at| Instant::now() >= at);
            state.master = Some(master.to_string());
            state.topics = topics;
            if !moved && !shrunk && !again {
                return;
            }
            state.again_at = None;
            if self.running.swap(true, Ordering::SeqCst) {
                // One is under way, perhaps begun before this move: another once it is done.
                state.again_at = Some(Instant::now());
                return;
            }
        }
        let (state, running) = (self.state.clone(), self.running.clone());
        let (nodes, registry) = (nodes.clone(), registry.to_string());
        tokio::spawn(async move {
            let _running = Running(running);
            let (added, failure) = repair(&nodes, &registry, layout).await;
            if added > 0 {
                info!(
                    "the registry {registry} lacked {added} topics that have jobs (lost in a \
                     failover or a restart?): added back"
                );
            }
            if let Some(error) = failure {
                warn!(
                    "cannot check the registry {registry} against every master's pools (SCAN, \
                     TYPE and SADD; see the ACL in docs/redis-deployments.md): {error}"
                );
                // Unless retrying cannot help.
                if error.code() != Some("NOPERM") {
                    state.lock().expect("not poisoned").again_at =
                        Some(Instant::now() + RETRY_WAIT);
                }
            }
        });
    }
}

/// Marks the repair done however its task ends.
struct Running(Arc<AtomicBool>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// Adds to `registry` the topic of every pool on every master that answers: how many were
/// missing, and the first failure.
async fn repair(
    nodes: &Arc<ClusterNodes>,
    registry: &str,
    layout: Layout,
) -> (usize, Option<RedisError>) {
    let mut topics = BTreeSet::new();
    let mut failure = None;
    for master in nodes.masters() {
        match pools_of(nodes, &master, layout).await {
            Ok(found) => topics.extend(found),
            Err(error) => {
                nodes.failed(Some(&master), &error);
                failure.get_or_insert(error);
            }
        }
    }
    if topics.is_empty() {
        return (0, failure);
    }
    let added = async {
        let (master, mut connection) = nodes.for_key(registry).await?;
        let added = redis::cmd("SADD")
            .arg(registry)
            .arg(topics.iter().collect::<Vec<_>>())
            .query_async(&mut connection)
            .await;
        if let Err(error) = &added {
            nodes.failed(Some(&master), error);
        }
        added
    };
    match added.await {
        Ok(added) => (added, failure),
        Err(error) => (0, failure.or(Some(error))),
    }
}

/// The topics of the pools on `master`.
async fn pools_of(nodes: &ClusterNodes, master: &str, layout: Layout) -> RedisResult<Vec<String>> {
    let Some(pools) = layout.topic_pools() else {
        return Ok(Vec::new());
    };
    let pattern = format!("{}*{}", pools.prefix, pools.suffix);
    let mut connection = nodes.connection(master).await?;
    let mut topics = Vec::new();
    let mut cursor = 0_u64;
    loop {
        let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(SCAN_COUNT)
            .query_async(&mut connection)
            .await?;
        // Keys that are not UTF-8 were not written by the cluster layout's clients.
        let candidates: Vec<String> = keys
            .into_iter()
            .filter_map(|key| String::from_utf8(key).ok())
            .filter(|key| layout.topic_of_pool(key).is_some())
            .collect();
        if !candidates.is_empty() {
            // A job bucket matches too when its id ends like a pool's name.
            let mut types = redis::pipe();
            for key in &candidates {
                types.cmd("TYPE").arg(key);
            }
            let types: Vec<String> = types.query_async(&mut connection).await?;
            for (key, kind) in candidates.iter().zip(types) {
                if kind == "zset" {
                    topics.extend(layout.topic_of_pool(key).map(str::to_string));
                }
            }
        }
        if next == 0 {
            return Ok(topics);
        }
        cursor = next;
    }
}
