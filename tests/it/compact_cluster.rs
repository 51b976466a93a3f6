//! The compact layout in the cluster layout: each topic's chunks and index in its slot, staged by
//! the daemons on each master, each job once, never early by Redis's clock; the beats, `wanted`
//! and the compact topics one key each for the whole cluster.

use crate::cluster::cluster_config;
use crate::support::{self, Daemon};

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayer_client::redis::cluster_async::ClusterConnection;
use delayer_client::redis::{AsyncCommands, IntoConnectionInfo};
use delayer_client::{Client, Inspector, NewPush, Removed, Settings, State, Target};
use delayer_testkit::cluster::RedisCluster;
use delayer_testkit::jobs::{beat_as_stager, redis_now};

/// Topics whose slots are on all three masters of a three-master cluster.
const TOPICS: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

fn index(topic: &str) -> String {
    format!("delayer:{{{topic}}}:compact:index")
}

/// A client whose pushes wait compact from `after` on (the default, 124 s, would make a test
/// wait two minutes; none: never).
async fn client(cluster: &RedisCluster, after: Option<Duration>) -> Client {
    let nodes = cluster
        .ports()
        .into_iter()
        .map(|port| format!("redis://127.0.0.1:{port}").into_connection_info())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let settings = Settings {
        compact_after: after,
        ..Settings::default()
    };
    Client::connect_to(Target::cluster(nodes).unwrap(), settings)
        .await
        .unwrap()
}

async fn compact_jobs(redis: &mut ClusterConnection) -> usize {
    let mut count = 0;
    for topic in TOPICS {
        count += redis.hlen::<_, usize>(index(topic)).await.unwrap();
    }
    count
}

/// Every key of every master whose name holds "compact".
async fn compact_keys(cluster: &RedisCluster) -> Vec<String> {
    let mut keys = Vec::new();
    for node in 0..3 {
        let mut node = cluster.connect_node(node).await;
        keys.extend(node.keys::<_, Vec<String>>("*compact*").await.unwrap());
    }
    keys
}

fn unix(time: SystemTime) -> f64 {
    time.duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

fn daemons(cluster: &RedisCluster, dir: &tempfile::TempDir, names: &[&str]) -> Vec<Daemon> {
    names
        .iter()
        .map(|name| Daemon::start(&cluster_config(dir, name, &cluster.addresses()).0))
        .collect()
}

#[tokio::test]
async fn compact_jobs_on_every_master_move_on_time_once() {
    let cluster = RedisCluster::start(3);
    let masters: std::collections::HashSet<usize> = TOPICS
        .iter()
        .map(|topic| cluster.node_of(&index(topic)))
        .collect();
    assert_eq!(masters.len(), 3, "the topics are on every master");
    let mut redis = cluster.connect().await;
    beat_as_stager(&mut redis).await;
    let client = client(&cluster, Some(Duration::from_secs(2))).await;
    let inspector = Inspector::new(&client);
    let start = SystemTime::now();
    let due = |n: u64| start + Duration::from_millis(3_000 + n * 10);
    let jobs: Vec<NewPush> = (0..300)
        .map(|n| {
            NewPush::new(TOPICS[n as usize % TOPICS.len()], format!("body {n}"))
                .id(format!("job-{n}"))
                .at(due(n))
        })
        .collect();
    client.push_many(jobs).await.unwrap();
    assert_eq!(
        compact_jobs(&mut redis).await,
        300,
        "every job waits compact"
    );
    let mut listed: Vec<String> = redis.smembers("delayer:compact:topics").await.unwrap();
    listed.sort();
    assert_eq!(listed, TOPICS);
    let stats = inspector.stats().await.unwrap();
    assert_eq!(stats.waiting, 300, "compact jobs count as waiting");

    let dir = tempfile::tempdir().unwrap();
    let daemons = daemons(&cluster, &dir, &["one", "two"]);
    let mut popped: HashMap<String, f64> = HashMap::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while popped.len() < 300 {
        assert!(
            std::time::Instant::now() < deadline,
            "{} of 300 popped",
            popped.len()
        );
        let mut any = false;
        for topic in TOPICS {
            while let Some(job) = client.pop(topic).await.unwrap() {
                let at = redis_now(&mut redis).await;
                let id = String::from_utf8(job.id.as_bytes().to_vec()).unwrap();
                let n: u64 = id.strip_prefix("job-").unwrap().parse().unwrap();
                assert_eq!(job.body, format!("body {n}").as_bytes());
                let early = unix(due(n)) - at;
                assert!(early <= 0.001, "{id} popped {early:.3} s early");
                assert!(popped.insert(id.clone(), at).is_none(), "{id} twice");
                any = true;
            }
        }
        if !any {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    assert_eq!(compact_jobs(&mut redis).await, 0);
    for topic in TOPICS {
        let chunks: usize = redis
            .zcard(format!("delayer:{{{topic}}}:compact:chunks"))
            .await
            .unwrap();
        assert_eq!(chunks, 0, "{topic}: chunks left");
    }
    let stagers: usize = redis.zcard("delayer:compact:stagers").await.unwrap();
    assert!(stagers >= 3, "the daemons tell pushers they stage");
    for daemon in daemons {
        daemon.stop();
    }
}

#[tokio::test]
async fn get_remove_and_promote_without_a_topic_find_a_compact_job() {
    let cluster = RedisCluster::start(3);
    let mut redis = cluster.connect().await;
    beat_as_stager(&mut redis).await;
    let client = client(&cluster, Some(Duration::from_secs(2))).await;
    let inspector = Inspector::new(&client);
    let far = SystemTime::now() + Duration::from_secs(3_600);
    let jobs = ["x", "y", "z"]
        .into_iter()
        .zip(["a", "c", "e"])
        .map(|(id, topic)| NewPush::new(topic, format!("body {id}")).id(id).at(far));
    client.push_many(jobs).await.unwrap();
    assert_eq!(compact_jobs(&mut redis).await, 3);

    let got = client.get("y").await.unwrap();
    assert_eq!(got.state, State::Waiting);
    assert_eq!(got.topic.as_ref().map(|t| t.as_bytes()), Some(&b"c"[..]));
    assert_eq!(got.body.as_deref(), Some(&b"body y"[..]));

    assert_eq!(client.remove("x").await.unwrap(), Removed::Waiting);
    let left: bool = redis.hexists(index("a"), "x").await.unwrap();
    assert!(!left, "removed from its topic's index");
    assert_eq!(client.get("x").await.unwrap().state, State::Unknown);

    inspector.promote("z").await.unwrap();
    let (compact, pooled): (bool, Option<f64>) = (
        redis.hexists(index("e"), "z").await.unwrap(),
        redis.zscore("delayer:{e}:job_pool", "z").await.unwrap(),
    );
    assert!(!compact, "staged to be promoted");
    let now = redis_now(&mut redis).await;
    assert!(pooled.is_some_and(|due| due <= now), "due now: {pooled:?}");
    assert_eq!(compact_jobs(&mut redis).await, 1, "y waits compact still");
    let details = inspector.details(&["c".into()], 10).await.unwrap();
    assert_eq!(
        details[0].waiting,
        Some(1),
        "the console counts it on its topic"
    );
    let page = inspector.waiting(Some(b"c"), None, 10).await.unwrap();
    let ids: Vec<&[u8]> = page.jobs.iter().map(|job| job.id.as_bytes()).collect();
    assert_eq!(ids, [b"y"], "its topic's waiting page holds it");

    // Going back: every compact job of every topic in the legacy form.
    let expanded = inspector.expand_compact().await.unwrap();
    assert_eq!(expanded.jobs, 1);
    assert_eq!(compact_jobs(&mut redis).await, 0);
    let pooled: Option<f64> = redis.zscore("delayer:{c}:job_pool", "y").await.unwrap();
    assert!(pooled.is_some(), "y in its topic's pool");
}

#[tokio::test]
async fn with_no_daemon_staging_pushes_are_legacy_and_ask_for_one() {
    let cluster = RedisCluster::start(3);
    let mut redis = cluster.connect().await;
    let client = client(&cluster, Some(Duration::from_secs(2))).await;
    client
        .push("a", "b")
        .id("far")
        .delay(Duration::from_secs(3_600))
        .await
        .unwrap();
    let bucket: bool = redis.exists("delayer:{a}:job_bucket:far").await.unwrap();
    assert!(bucket, "pushed in the legacy form");
    assert_eq!(compact_jobs(&mut redis).await, 0);
    let wanted: i64 = redis.ttl("delayer:compact:wanted").await.unwrap();
    assert!(wanted > 86_000, "wanted for a day: TTL {wanted}");
    let topics: bool = redis.exists("delayer:compact:topics").await.unwrap();
    assert!(!topics, "no topic had compact pushes");
}

#[tokio::test]
async fn a_drop_in_cluster_daemon_beside_legacy_pushes_writes_no_compact_key() {
    let cluster = RedisCluster::start(3);
    let dir = tempfile::tempdir().unwrap();
    let (config, logs) = cluster_config(&dir, "one", &cluster.addresses());
    let daemon = Daemon::start(&config);
    // Legacy pushes: jobs due soon from our client, far ones from a client with compact pushes
    // off (as the PHP and Go clients write them).
    let ours = client(&cluster, Some(Duration::from_secs(2))).await;
    let legacy = client(&cluster, None).await;
    for topic in TOPICS {
        ours.push(topic, "soon")
            .delay(Duration::from_millis(500))
            .await
            .unwrap();
        legacy
            .push(topic, "far")
            .delay(Duration::from_secs(3_600))
            .await
            .unwrap();
    }
    for topic in TOPICS {
        let job = ours.bpop(&[topic], Duration::from_secs(10)).await.unwrap();
        assert!(job.is_some(), "{topic}: not moved");
    }
    // Two looks of the stager (one a second) went by.
    std::thread::sleep(Duration::from_millis(2_100));
    let keys = compact_keys(&cluster).await;
    assert!(keys.is_empty(), "{keys:?}");
    assert!(!support::read(&logs.error).contains("compact"));
    daemon.stop();
}
