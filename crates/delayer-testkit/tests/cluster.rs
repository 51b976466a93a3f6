//! `RedisCluster::start` makes the cluster users would: every master says `cluster_state:ok`,
//! and the 16384 slots are split among exactly the three masters started, on their TCP ports.

use std::collections::BTreeSet;
use std::time::Instant;

use delayer_testkit::cluster::RedisCluster;
use redis::Value;

#[tokio::test]
async fn three_masters_share_every_slot() {
    let started = Instant::now();
    let cluster = RedisCluster::start(3);
    eprintln!("a 3-master cluster is up in {:?}", started.elapsed());
    let ports: BTreeSet<u16> = cluster.ports().into_iter().collect();
    assert_eq!(ports.len(), 3);
    let listed: Vec<String> = cluster
        .ports()
        .iter()
        .map(|port| format!("127.0.0.1:{port}"))
        .collect();
    assert_eq!(cluster.addresses(), listed.join(","));

    for index in 0..3 {
        let mut node = cluster.connect_node(index).await;
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query_async(&mut node)
            .await
            .unwrap();
        assert!(info.contains("cluster_state:ok"), "node {index}: {info}");
        assert_eq!(cluster.dbsize(index), 0);
    }

    let mut node = cluster.connect_node(0).await;
    // CLUSTER SLOTS: [start, end, [ip, port, id, ...], replicas...] per range.
    let ranges: Vec<Vec<Value>> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(&mut node)
        .await
        .unwrap();
    let mut slots = 0;
    let mut masters = BTreeSet::new();
    for range in &ranges {
        let start: i64 = redis::from_redis_value_ref(&range[0]).unwrap();
        let end: i64 = redis::from_redis_value_ref(&range[1]).unwrap();
        slots += end - start + 1;
        let master: Vec<Value> = redis::from_redis_value_ref(&range[2]).unwrap();
        masters.insert(redis::from_redis_value_ref::<u16>(&master[1]).unwrap());
        assert_eq!(range.len(), 3, "no replicas: {range:?}");
    }
    assert_eq!(slots, 16384);
    assert_eq!(masters, ports);

    // CLUSTER SHARDS: per shard ["slots", [...], "nodes", [[field, value, ...], ...]].
    let shards: Vec<Vec<Value>> = redis::cmd("CLUSTER")
        .arg("SHARDS")
        .query_async(&mut node)
        .await
        .unwrap();
    assert_eq!(shards.len(), 3);
    let mut masters = BTreeSet::new();
    for shard in &shards {
        let nodes: Vec<Vec<Value>> = redis::from_redis_value_ref(field(shard, "nodes")).unwrap();
        assert_eq!(nodes.len(), 1, "one master, no replica: {shard:?}");
        let role: String = redis::from_redis_value_ref(field(&nodes[0], "role")).unwrap();
        assert_eq!(role, "master");
        masters.insert(redis::from_redis_value_ref::<u16>(field(&nodes[0], "port")).unwrap());
    }
    assert_eq!(masters, ports);
}

/// The value after `name` in a reply of alternating names and values.
fn field<'a>(pairs: &'a [Value], name: &str) -> &'a Value {
    pairs
        .chunks(2)
        .find(|pair| redis::from_redis_value_ref::<String>(&pair[0]).is_ok_and(|key| key == name))
        .map(|pair| &pair[1])
        .unwrap_or_else(|| panic!("no {name} in {pairs:?}"))
}
