//! Repairs the cluster layout's registry of topics (`delayer:topics`). Pushers add a topic there
//! before its first job, and the daemon drains only the topics it names; but the registry lives on
//! one master, and a failover can lose its latest additions (replication is asynchronous). A
//! topic lost so would wait for its next push. So whenever the registry is found on another
//! master than before (at start, after a failover or a resharding), every master is scanned for
//! pools, and the topics they belong to are added back.

use deadpool_redis::redis::{self, RedisResult};
use delayer_client::keys::{CLUSTER_POOL_SUFFIX, CLUSTER_PREFIX, Layout};

use crate::cluster_nodes::ClusterNodes;

/// Keys a SCAN call looks at.
const SCAN_COUNT: usize = 1000;

/// Adds to `registry` the topic of every pool on every master: how many were missing.
pub async fn repair(nodes: &ClusterNodes, registry: &str) -> RedisResult<usize> {
    let pattern = format!("{CLUSTER_PREFIX}*{CLUSTER_POOL_SUFFIX}");
    let mut topics = Vec::new();
    for master in nodes.masters() {
        let mut connection = nodes.connection(&master).await?;
        let mut cursor = 0_u64;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(SCAN_COUNT)
                .query_async(&mut connection)
                .await?;
            topics.extend(keys.iter().filter_map(|key| topic_of(key)));
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    if topics.is_empty() {
        return Ok(0);
    }
    topics.sort();
    topics.dedup();
    let (_, mut connection) = nodes.for_key(registry).await?;
    redis::cmd("SADD")
        .arg(registry)
        .arg(&topics)
        .query_async(&mut connection)
        .await
}

/// The topic whose pool `key` is; `None` for a key the cluster layout would not have written.
fn topic_of(key: &str) -> Option<String> {
    let topic = key
        .strip_prefix(CLUSTER_PREFIX)?
        .strip_suffix(CLUSTER_POOL_SUFFIX)?;
    (!topic.is_empty() && Layout::Cluster.refusal(topic).is_none()).then(|| topic.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_key_names_its_topic() {
        assert_eq!(
            topic_of("delayer:{order.close}:job_pool").as_deref(),
            Some("order.close")
        );
        assert_eq!(topic_of("delayer:{a}b}:job_pool").as_deref(), Some("a}b"));
        assert_eq!(
            topic_of("delayer:{}x}:job_pool"),
            None,
            "refused: empty hash tag"
        );
        assert_eq!(topic_of("delayer:{t}:ready_queue"), None);
        assert_eq!(topic_of("delayer:{}:job_pool"), None, "no topic");
    }
}
