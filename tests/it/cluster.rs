//! Redis Cluster: three masters made by `redis-cli --cluster create` from Debian's redis-server,
//! on free ports. The daemon finds each topic's pool through the registry and moves every job
//! exactly once, on every master, with two daemons at it.

use crate::support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use delayer_client::redis::cluster_async::ClusterConnection;
use delayer_client::redis::{self, AsyncCommands, IntoConnectionInfo};
use delayer_client::{Acked, Client, Inspector, Settings, State, Target};
use delayer_testkit::cluster::{self, RedisCluster};
use delayer_wire::keys::Layout;
use serde_json::json;
use support::http_client::{http_address, post, request};
use support::{DAEMON_ACL, Daemon, RedisServer, acl, delayer_fails, delayer_succeeds, read};

const JOBS_API: &str = "/delay-queue/api/jobs";
/// What docs/redis-deployments.md adds to the daemon's ACL for a cluster.
const CLUSTER_ACL: &str = "+cluster|slots +smembers +scan";

const JOBS: usize = 100_000;
const TOPICS: usize = 30;

/// A daemon configuration for `cluster` (the node list), logging to `<dir>/<name>/`.
pub(crate) fn cluster_config(
    dir: &tempfile::TempDir,
    name: &str,
    cluster: &str,
) -> (PathBuf, support::Logs) {
    let logs = support::Logs {
        access: dir.path().join(name).join("access.log"),
        error: dir.path().join(name).join("error.log"),
    };
    let config = dir.path().join(format!("{name}.conf"));
    std::fs::write(
        &config,
        format!(
            "[delayer]\naccess_log = {}\nerror_log = {}\ntimer_interval = 100\n\n[redis]\ncluster = {cluster}\n",
            logs.access.display(),
            logs.error.display()
        ),
    )
    .unwrap();
    (config, logs)
}

fn topic(index: usize) -> String {
    format!("topic-{:02}", index % TOPICS)
}

#[tokio::test]
async fn two_daemons_drain_100k_jobs_over_30_topics_on_three_masters_each_once() {
    let cluster = RedisCluster::start(3);
    let connection = cluster.connect().await;
    // Due over the next two seconds: the daemons start on a backlog that keeps growing.
    let start = delayer_wire::time::unix_now();
    let jobs = (0..JOBS).map(|index| {
        let due = start + 2.0 * index as f64 / JOBS as f64;
        (format!("job-{index:06}"), topic(index), due)
    });
    cluster::add_jobs(&connection, jobs).await;

    let dir = tempfile::tempdir().unwrap();
    let daemons: Vec<(Daemon, support::Logs)> = ["one", "two"]
        .iter()
        .map(|name| {
            let (config, logs) = cluster_config(&dir, name, &cluster.addresses());
            (Daemon::start(&config), logs)
        })
        .collect();

    let topics: Vec<String> = (0..TOPICS).map(topic).collect();
    wait_until_moved(&connection, &topics, JOBS).await;
    assert_each_delivered_once(&connection, &topics, JOBS).await;

    // Each master holds some topics' ready lists: the moves ran on all three.
    for index in 0..3 {
        let mut node = cluster.connect_node(index).await;
        let ready: Vec<String> = node.keys("delayer:{*}:ready_queue").await.unwrap();
        assert!(!ready.is_empty(), "master {index} moved nothing");
    }
    for (mut daemon, logs) in daemons {
        daemon.signal("TERM");
        assert!(daemon.wait(Duration::from_secs(10)).success());
        let errors = read(&logs.error);
        assert!(!errors.contains("[error]"), "{errors}");
        assert!(read(&logs.access).contains("Job is ready, Topic: topic-"));
    }
}

/// Asserts that `topics`' ready lists hold `count` different ids, each once.
async fn assert_each_delivered_once(
    connection: &ClusterConnection,
    topics: &[String],
    count: usize,
) {
    let mut connection = connection.clone();
    let mut counts: HashMap<String, usize> = HashMap::new();
    for topic in topics {
        let keys = Layout::CLUSTER.keys(topic);
        let ids: Vec<String> = connection.lrange(keys.ready(topic), 0, -1).await.unwrap();
        for id in ids {
            *counts.entry(id).or_default() += 1;
        }
    }
    let twice: Vec<_> = counts.iter().filter(|(_, count)| **count > 1).collect();
    assert_eq!(counts.len(), count, "every job delivered");
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
}

/// Waits until `count` jobs are on `topics`' ready lists and none is left in their pools.
async fn wait_until_moved(connection: &ClusterConnection, topics: &[String], count: usize) {
    support::wait_for(Duration::from_secs(60), "every job moved", || {
        let mut connection = connection.clone();
        async move {
            let mut ready = 0;
            for topic in topics {
                let keys = Layout::CLUSTER.keys(topic);
                let length: usize = connection.llen(keys.ready(topic)).await.unwrap();
                let waiting: usize = connection.zcard(keys.pool()).await.unwrap();
                if waiting > 0 {
                    return None;
                }
                ready += length;
            }
            (ready >= count).then_some(())
        }
    })
    .await;
}

#[tokio::test]
async fn the_daemon_runs_as_the_readme_acl_user_on_a_cluster() {
    let cluster = RedisCluster::start(3);
    for index in 0..3 {
        let mut node = cluster.connect_node(index).await;
        acl(
            &mut node,
            "delayer",
            &format!("reset on >secret {DAEMON_ACL} {CLUSTER_ACL}"),
        )
        .await;
    }
    let connection = cluster.connect().await;
    let now = delayer_wire::time::unix_now();
    cluster::add_jobs(
        &connection,
        (0..3_000).map(|index| (format!("job-{index}"), topic(index), now)),
    )
    .await;
    // One topic missing from the registry: its repair is what needs +scan +sadd.
    let registry = Layout::CLUSTER.keys("").topics().to_string();
    let _: () = connection.clone().srem(&registry, topic(0)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (config, logs) = cluster_config(&dir, "acl", &cluster.addresses());
    let text = format!("{}username = delayer\npassword = secret\n", read(&config));
    std::fs::write(&config, text).unwrap();
    let daemon = Daemon::start(&config);
    let topics: Vec<String> = (0..TOPICS).map(topic).collect();
    wait_until_moved(&connection, &topics, 3_000).await;
    daemon.stop();
    let errors = read(&logs.error);
    assert!(!errors.contains("[error]"), "{errors}");
    assert!(!errors.contains("cannot check the registry"), "{errors}");
    let access = read(&logs.access);
    assert!(access.contains("lacked 1 topics"), "{access}");
}

#[tokio::test]
async fn topics_missing_from_the_registry_are_added_back_from_their_pools() {
    let cluster = RedisCluster::start(3);
    let connection = cluster.connect().await;
    let now = delayer_wire::time::unix_now();
    // (One job's bucket, `delayer:{topic-0}:job_bucket:odd}:job_pool`, looks like a pool by name.)
    let odd = std::iter::once(("odd}:job_pool".to_string(), topic(0), now));
    cluster::add_jobs(
        &connection,
        (0..600)
            .map(|index| (format!("job-{index}"), topic(index), now))
            .chain(odd),
    )
    .await;
    // As if a failover had lost the registry's latest additions.
    let registry = Layout::CLUSTER.keys("").topics().to_string();
    let _: () = connection.clone().del(&registry).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (config, logs) = cluster_config(&dir, "repair", &cluster.addresses());
    let daemon = Daemon::start(&config);
    let topics: Vec<String> = (0..TOPICS).map(topic).collect();
    wait_until_moved(&connection, &topics, 601).await;
    daemon.stop();
    let access = read(&logs.access);
    assert!(
        access.contains(&format!("the registry {registry} lacked {TOPICS} topics")),
        "{access}"
    );
    let mut registered: Vec<String> = connection.clone().smembers(&registry).await.unwrap();
    registered.sort();
    let mut expected = topics.clone();
    expected.sort();
    assert_eq!(registered, expected, "the pools' topics, and only those");
}

#[tokio::test]
async fn a_registry_that_loses_topics_while_the_daemon_runs_is_repaired() {
    let cluster = RedisCluster::start(3);
    let connection = cluster.connect().await;
    // Never due here: only what the registry holds is looked at.
    let due = delayer_wire::time::unix_now() + 3600.0;
    cluster::add_jobs(
        &connection,
        (0..2 * TOPICS).map(|index| (format!("job-{index}"), topic(index), due)),
    )
    .await;
    let registry = Layout::CLUSTER.keys("").topics().to_string();
    let mut master = cluster.connect_node(cluster.node_of(&registry)).await;
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async::<()>(&mut master)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (config, logs) = cluster_config(&dir, "shrunk", &cluster.addresses());
    let daemon = Daemon::start(&config);
    // The repair at start (the registry found on a master for the first time) ends with an SADD
    // of the topics it found: from then on the daemon has read the registry whole.
    support::wait_for(Duration::from_secs(30), "the repair at start", || {
        let mut master = master.clone();
        async move {
            let stats = support::command_stats(&mut master).await;
            stats.contains_key("sadd").then_some(())
        }
    })
    .await;
    // As if its master had restarted empty at the same address.
    let _: () = master.del(&registry).await.unwrap();
    support::wait_for(Duration::from_secs(30), "the registry repaired", || {
        let mut master = master.clone();
        let registry = registry.clone();
        async move {
            let registered: usize = master.scard(&registry).await.unwrap();
            (registered == TOPICS).then_some(())
        }
    })
    .await;
    daemon.stop();
    let access = read(&logs.access);
    assert!(
        access.contains(&format!("the registry {registry} lacked {TOPICS} topics")),
        "{access}"
    );
}

#[tokio::test]
async fn stats_on_a_cluster_name_a_topic_key_of_the_wrong_type_and_count_the_rest() {
    let cluster = RedisCluster::start(3);
    let client = cluster_client(&cluster).await;
    let inspector = Inspector::new(&client);
    for topic in ["good", "bad.pool", "bad.reserved"] {
        client
            .push(topic, "b")
            .delay(Duration::from_secs(3600))
            .await
            .unwrap();
    }
    let connection = cluster.connect().await;
    let (pool, reserved) = (
        Layout::CLUSTER.keys("bad.pool").pool().to_string(),
        Layout::CLUSTER.keys("bad.reserved").reserved().to_string(),
    );
    let _: () = connection.clone().del(&pool).await.unwrap();
    let _: () = connection.clone().set(&pool, "x").await.unwrap();
    let _: () = connection.clone().set(&reserved, "x").await.unwrap();

    let stats = inspector.stats().await.unwrap();
    assert_eq!(stats.waiting, 2, "the two readable pools");
    let problem = |topic: &str| {
        stats
            .topics
            .iter()
            .find(|row| row.topic == topic)
            .unwrap()
            .problem
            .clone()
    };
    assert_eq!(problem("good"), None);
    assert_eq!(
        problem("bad.pool"),
        Some(format!("{pool} holds a string, not a zset"))
    );
    assert_eq!(
        problem("bad.reserved"),
        Some(format!("{reserved} holds a string, not a zset"))
    );
}

#[tokio::test]
async fn a_cluster_address_that_is_not_a_cluster_is_refused_at_start() {
    let (_server, port) = RedisServer::start_tcp(&[]);
    let dir = tempfile::tempdir().unwrap();
    let (config, _logs) = cluster_config(&dir, "plain", &format!("127.0.0.1:{port}"));
    for args in [&[][..], &["--check-config"][..]] {
        let said = delayer_fails(&config, args);
        assert!(
            said.contains(&format!(
                "the cluster of 127.0.0.1:{port} is not a Redis Cluster"
            )),
            "{args:?}: {said}"
        );
    }
}

#[tokio::test]
async fn check_config_passes_a_healthy_cluster() {
    let cluster = RedisCluster::start(3);
    let dir = tempfile::tempdir().unwrap();
    let (config, _logs) = cluster_config(&dir, "healthy", &cluster.addresses());

    let checked = delayer_succeeds(&config, &["--check-config"]);

    assert!(checked.contains("answers (redis_version 7."), "{checked}");
    assert!(checked.contains("is OK"), "{checked}");
}

#[tokio::test]
async fn the_cli_the_http_api_and_the_client_speak_the_cluster_layout() {
    let cluster = RedisCluster::start(3);
    let dir = tempfile::tempdir().unwrap();
    let (config, logs) = cluster_config(&dir, "api", &cluster.addresses());
    let text = format!("{}\n[http]\nlisten = 127.0.0.1:0\n", read(&config));
    std::fs::write(&config, text).unwrap();
    let daemon = Daemon::start(&config);
    let http = http_address(&logs);

    // The CLI: push, then pop once the daemon moved it.
    let id = delayer_succeeds(&config, &["push", "mail", "hello", "--id", "m1"]);
    assert_eq!(id.trim(), "m1");
    let popped: serde_json::Value =
        serde_json::from_str(&delayer_succeeds(&config, &["pop", "mail", "--wait", "5s"])).unwrap();
    assert_eq!(
        (&popped["id"], &popped["topic"], &popped["body"]),
        (&json!("m1"), &json!("mail"), &json!("hello"))
    );

    // The HTTP API: a job found by its id alone (through the registry's topics), then removed.
    let added = post(
        &http,
        &format!("{JOBS_API}/add"),
        &json!({"id": "o1", "topic": "order.close", "delay": 3600, "body": "x"}),
    );
    assert_eq!(added.status, 200, "{}", added.body);
    let found = post(&http, &format!("{JOBS_API}/get"), &json!({"job_id": "o1"}));
    assert_eq!(
        (
            &found.json()["data"]["topic"],
            &found.json()["data"]["state"]
        ),
        (&json!("order.close"), &json!("waiting")),
        "{}",
        found.body
    );
    // Metrics count the topics' pools across the masters.
    let metrics = request(&http, "GET", "/metrics", &[], b"");
    assert!(
        metrics.body.contains("delayer_jobs_waiting 1\n"),
        "{}",
        metrics.body
    );
    assert_eq!(request(&http, "GET", "/healthz", &[], b"").status, 200);
    // The console tells each topic's waiting jobs apart: each has a pool of its own.
    let page = request(&http, "GET", "/", &[], b"").body;
    assert!(page.contains("<dd>cluster ("), "{page}");
    assert!(!page.contains("<dt>version</dt><dd>—"), "Redis's: {page}");
    let topic = request(&http, "GET", "/topic?name=order.close", &[], b"");
    assert_eq!(topic.status, 200, "{}", topic.body);
    assert!(topic.body.contains(". Waiting: 1."), "{}", topic.body);
    assert!(
        page.contains("order.close</a></td><td class=\"n\">1</td>"),
        "{page}"
    );
    let removed = post(
        &http,
        &format!("{JOBS_API}/remove"),
        &json!({"job_id": "o1"}),
    );
    assert_eq!(removed.status, 200, "{}", removed.body);
    let gone = post(&http, &format!("{JOBS_API}/get"), &json!({"job_id": "o1"}));
    assert_eq!(
        gone.json()["data"],
        serde_json::Value::Null,
        "{}",
        gone.body
    );

    // The Rust client: at least once, over topics on different masters.
    let client = cluster_client(&cluster).await;
    client.push("b", "first").id("r1").await.unwrap();
    let job = client
        .reserve(&["a", "b"], Duration::from_secs(30), Duration::from_secs(5))
        .await
        .unwrap()
        .expect("a job reserved");
    assert_eq!(
        (job.id.to_str(), job.topic.to_str()),
        (Some("r1"), Some("b"))
    );
    assert_eq!(client.ack(&job).await.unwrap(), Acked::Done);
    assert_eq!(client.get("r1").await.unwrap().state, State::Unknown);

    // Everything is in the cluster layout: nothing under the single-Redis names but the keys
    // that are one for the whole cluster (the add above, far ahead, asked for compact pushes).
    use delayer_wire::compact::{STAGERS, TOPICS as COMPACT_TOPICS, WANTED};
    let cluster_wide = ["delayer:topics", STAGERS, WANTED, COMPACT_TOPICS];
    for index in 0..3 {
        let mut node = cluster.connect_node(index).await;
        let keys: Vec<String> = node.keys("delayer:*").await.unwrap();
        let single: Vec<&String> = keys
            .iter()
            .filter(|key| !key.starts_with("delayer:{") && !cluster_wide.contains(&key.as_str()))
            .collect();
        assert!(single.is_empty(), "{single:?}");
    }
    let stats: serde_json::Value =
        serde_json::from_str(&delayer_succeeds(&config, &["stats", "--json"])).unwrap();
    let topics: Vec<&str> = stats["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|topic| topic["topic"].as_str().unwrap())
        .collect();
    assert_eq!(topics, ["b", "mail", "order.close"], "{stats}");

    daemon.stop();
}

#[tokio::test]
async fn a_job_pushed_while_the_daemon_sleeps_moves_at_once_on_any_master() {
    let cluster = RedisCluster::start(3);
    let dir = tempfile::tempdir().unwrap();
    let (config, _logs) = cluster_config(&dir, "sleeper", &cluster.addresses());
    let text = read(&config).replace("timer_interval = 100", "timer_interval = 30000");
    std::fs::write(&config, text).unwrap();
    let daemon = Daemon::start(&config);
    // Asleep for the whole interval, watching each master for writes to its pools.
    for index in 0..3 {
        let node = cluster.connect_node(index).await;
        support::wait_for(Duration::from_secs(10), "a watch on every master", || {
            let mut node = node.clone();
            async move { (support::tracking_clients(&mut node).await == 1).then_some(()) }
        })
        .await;
    }

    let client = cluster_client(&cluster).await;
    // Topics whose slots are on different masters, so that every master's watch is tried.
    for topic in ["a", "b", "c", "d", "e", "f"] {
        let pushed = std::time::Instant::now();
        client.push(topic, "now").await.unwrap();
        let job = client.bpop(&[topic], Duration::from_secs(5)).await.unwrap();
        assert!(job.is_some(), "{topic}: not moved within 5 s");
        assert!(
            pushed.elapsed() < Duration::from_secs(1),
            "{topic}: moved after {:?}",
            pushed.elapsed()
        );
    }
    daemon.stop();
}

/// A client of `cluster`'s nodes, with the default settings.
pub(crate) async fn cluster_client(cluster: &RedisCluster) -> Client {
    try_cluster_client(cluster).await.unwrap()
}

async fn try_cluster_client(cluster: &RedisCluster) -> delayer_client::Result<Client> {
    let nodes = cluster
        .ports()
        .into_iter()
        .map(|port| format!("redis://127.0.0.1:{port}").into_connection_info())
        .collect::<Result<Vec<_>, _>>()?;
    Client::connect_to(Target::cluster(nodes)?, Settings::default()).await
}

#[tokio::test]
async fn a_blocking_pop_on_a_cluster_waits_out_its_timeout() {
    let cluster = RedisCluster::start(3);
    let client = cluster_client(&cluster).await;
    // Longer than the 5 s any other reply may take.
    let waited = std::time::Instant::now();
    let popped = client.bpop(&["nothing"], Duration::from_secs(6)).await;
    assert!(matches!(popped, Ok(None)), "{popped:?}");
    assert!(waited.elapsed() >= Duration::from_secs(6));
}

#[tokio::test]
async fn a_cluster_over_tls_moves_jobs_and_an_untrusted_one_is_refused() {
    let cluster = RedisCluster::start_tls(3);
    let dir = tempfile::tempdir().unwrap();
    let tls_config = |name: &str, ca: &str| {
        let (config, logs) = cluster_config(&dir, name, &cluster.addresses());
        let ca = cluster.certificates().file(ca);
        let text = format!(
            "{}tls = true\ntls_ca_file = {}\n",
            read(&config),
            ca.display()
        );
        std::fs::write(&config, text).unwrap();
        (config, logs)
    };
    let (config, logs) = tls_config("tls", "ca.crt");
    let daemon = Daemon::start(&config);
    for topic in ["a", "b", "c", "d", "e", "f"] {
        delayer_succeeds(&config, &["push", topic, "over TLS"]);
        let popped: serde_json::Value =
            serde_json::from_str(&delayer_succeeds(&config, &["pop", topic, "--wait", "5s"]))
                .unwrap();
        assert_eq!(popped["body"], json!("over TLS"), "{topic}");
    }
    daemon.stop();
    let errors = read(&logs.error);
    assert!(!errors.contains("[error]"), "{errors}");

    let (untrusting, _) = tls_config("other-ca", "other-ca.crt");
    for args in [&["--check-config"][..], &[][..]] {
        let said = delayer_fails(&untrusting, args);
        assert!(said.contains("does not trust"), "{args:?}: {said}");
    }
}

#[tokio::test]
async fn odd_data_in_the_cluster_layout_moves_or_is_refused_clearly() {
    let cluster = RedisCluster::start(3);
    let dir = tempfile::tempdir().unwrap();
    let (config, logs) = cluster_config(&dir, "odd", &cluster.addresses());
    let daemon = Daemon::start(&config);
    let client = cluster_client(&cluster).await;

    // A topic that would scatter its keys over the cluster: refused before anything is written.
    let said = delayer_fails(&config, &["push", "}x", "body"]);
    assert!(said.contains("starts with '}'"), "{said}");
    // One that another writer put in the registry anyway is left alone, said once.
    let mut connection = cluster.connect().await;
    let _: () = connection.sadd("delayer:topics", "}y").await.unwrap();
    // A bucket whose topic field names another topic (another slot): moved with its pool's topic.
    let keys = Layout::CLUSTER.keys("a");
    let _: () = redis::pipe()
        .hset_multiple(keys.bucket("p1"), &[("topic", "elsewhere"), ("body", "b")])
        .zadd(keys.pool(), "p1", 0)
        .query_async(&mut connection)
        .await
        .unwrap();
    client.push("a", "normal").id("a1").await.unwrap();
    support::wait_for(Duration::from_secs(5), "both jobs of a moved", || {
        let mut connection = connection.clone();
        let ready = keys.ready("a");
        async move {
            let length: usize = connection.llen(&ready).await.unwrap();
            (length == 2).then_some(())
        }
    })
    .await;
    // ... and reserved from it, as its pool's topic's.
    let mut taken = client
        .reserve_many(&["a"], Duration::from_secs(30), 2, Duration::ZERO)
        .await
        .unwrap()
        .into_iter()
        .map(|job| (job.id.to_string(), job.topic.to_string()))
        .collect::<Vec<_>>();
    taken.sort();
    assert_eq!(
        taken,
        [
            ("a1".to_string(), "a".to_string()),
            ("p1".to_string(), "a".to_string())
        ]
    );
    logs.wait_for_line("of the registry is left alone");

    // The same id in two topics: looked up by id alone, it is ambiguous, not one of them.
    let in_a_day = Duration::from_secs(86_400);
    client
        .push("b", "1")
        .id("dup")
        .delay(in_a_day)
        .await
        .unwrap();
    client
        .push("c", "2")
        .id("dup")
        .delay(in_a_day)
        .await
        .unwrap();
    for error in [
        client.get("dup").await.unwrap_err(),
        client.remove("dup").await.map(|_| ()).unwrap_err(),
    ] {
        assert!(
            error.to_string().contains("is in several topics (b, c)"),
            "{error}"
        );
    }
    daemon.stop();
    let errors = read(&logs.error);
    assert_eq!(errors.matches("[error]").count(), 1, "{errors}");
}

#[tokio::test]
async fn a_master_that_goes_down_holds_up_only_its_own_topics() {
    moves_go_on_while_a_master_fails(|cluster, index| cluster.kill_node(index)).await;
}

/// A master that hangs (SIGSTOP: its connections stay open, nothing answers). Through the redis
/// crate's cluster connection this took 8 to 10 s a job; the daemon's own connection per master
/// keeps it to the hung master's topics.
#[tokio::test]
async fn a_master_that_hangs_holds_up_only_its_own_topics() {
    moves_go_on_while_a_master_fails(|cluster, index| cluster.pause(index, true)).await;
}

/// Jobs of a topic on a healthy master move within a second while `fail` has made another
/// master fail (one that does not hold the registry), with jobs of its own falling due meanwhile.
async fn moves_go_on_while_a_master_fails(fail: impl FnOnce(&mut RedisCluster, usize)) {
    let mut cluster = RedisCluster::start(3);
    let registry = cluster.node_of("delayer:topics");
    let failing = (registry + 1) % 3;
    let pool_on = |node: usize| {
        (0..)
            .map(|index| format!("topic-{index}"))
            .find(|topic| cluster.node_of(Layout::CLUSTER.keys(topic).pool()) == node)
            .unwrap()
    };
    let (stuck, free) = (pool_on(failing), pool_on(registry));
    let dir = tempfile::tempdir().unwrap();
    let (config, _logs) = cluster_config(&dir, "failing", &cluster.addresses());
    let daemon = Daemon::start(&config);
    let client = cluster_client(&cluster).await;
    // Jobs on the master about to fail, falling due after it failed: the daemon's calls to it fail.
    for index in 0..20 {
        let delay = Duration::from_millis(200 * index);
        client.push(&stuck, "stuck").delay(delay).await.unwrap();
    }
    fail(&mut cluster, failing);

    // Popped without blocking: a new blocking connection would itself wait for the failed master.
    for _ in 0..3 {
        let pushed = std::time::Instant::now();
        client.push(&free, "free").await.unwrap();
        support::wait_for(Duration::from_secs(20), "the job moved", || {
            let (client, free) = (client.clone(), free.clone());
            async move { client.pop(&free).await.unwrap() }
        })
        .await;
        assert!(
            pushed.elapsed() < Duration::from_secs(1),
            "moved after {:?} with another master failing",
            pushed.elapsed()
        );
    }
    daemon.stop();
}

#[tokio::test]
async fn a_cluster_of_one_master_moves_jobs() {
    // A cluster of one answers CLUSTER SLOTS without its own address.
    let cluster = RedisCluster::start(1);
    let dir = tempfile::tempdir().unwrap();
    let (config, _logs) = cluster_config(&dir, "one", &cluster.addresses());
    let daemon = Daemon::start(&config);
    delayer_succeeds(&config, &["push", "solo", "alone"]);
    let popped: serde_json::Value =
        serde_json::from_str(&delayer_succeeds(&config, &["pop", "solo", "--wait", "5s"])).unwrap();
    assert_eq!(popped["body"], json!("alone"));
    daemon.stop();
}

/// The script calls of every master so far.
async fn script_calls(cluster: &RedisCluster) -> u64 {
    let mut calls = 0;
    for index in 0..cluster.ports().len() {
        let stats = support::command_stats(&mut cluster.connect_node(index).await).await;
        calls += stats.get("evalsha").map_or(0, |(calls, _)| *calls);
    }
    calls
}

/// A registry of 2,000 topics with nothing due costs no script calls once they were looked at,
/// and a push looks at its own topic only (it cost a look at every topic, every timer_interval).
#[tokio::test]
async fn idle_topics_cost_nothing_and_a_push_looks_at_its_topic_alone() {
    const IDLE: usize = 2_000;
    let cluster = RedisCluster::start(3);
    let connection = cluster.connect().await;
    let later = delayer_wire::time::unix_now() + 3600.0;
    let idle = (0..IDLE).map(|index| (format!("idle-{index}"), format!("idle-{index}"), later));
    cluster::add_jobs(&connection, idle).await;
    let dir = tempfile::tempdir().unwrap();
    let (config, logs) = cluster_config(&dir, "idle", &cluster.addresses());
    let daemon = Daemon::start(&config);
    logs.wait_for_line("Service started successfully");
    // The first look at every topic (two script calls each), and the looks it leads to.
    let last = std::sync::atomic::AtomicU64::new(0);
    support::wait_for(
        Duration::from_secs(30),
        "the first looks to end",
        || async {
            let calls = script_calls(&cluster).await;
            let before = last.swap(calls, std::sync::atomic::Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(300)).await;
            (calls >= 2 * IDLE as u64 && calls == before).then_some(())
        },
    )
    .await;
    let settled = script_calls(&cluster).await;
    // Ten timer_intervals with nothing to do.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_calls = script_calls(&cluster).await - settled;

    let client = cluster_client(&cluster).await;
    client.push("live", "now").await.unwrap();
    let popped = client
        .bpop(&["live"], Duration::from_secs(5))
        .await
        .unwrap();
    let push_calls = script_calls(&cluster).await - settled - idle_calls;

    daemon.stop();
    assert!(popped.is_some(), "the live job moved");
    assert!(
        idle_calls <= 10,
        "{idle_calls} script calls in 1 s with nothing due"
    );
    // The live topic's look, and the one its own move's write wakes (plus a few of the client's).
    assert!(push_calls <= 10, "{push_calls} script calls for one push");
}

#[tokio::test]
async fn after_a_failover_the_promoted_replica_serves_the_lost_masters_topics() {
    let mut cluster = RedisCluster::start_with_replicas(3);
    let registry = cluster.node_of("delayer:topics");
    let (topic, lost) = (0..)
        .map(|index| format!("topic-{index}"))
        .map(|topic| {
            let node = cluster.node_of(Layout::CLUSTER.keys(&topic).pool());
            (topic, node)
        })
        .find(|(_, node)| *node != registry)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (config, _logs) = cluster_config(&dir, "failover", &cluster.addresses());
    let daemon = Daemon::start(&config);
    let client = cluster_client(&cluster).await;
    client.push(&topic, "before").await.unwrap();
    client
        .bpop(&[&topic], Duration::from_secs(5))
        .await
        .unwrap();

    cluster.kill_node(lost);
    // Pushed once the replica took over (after the 5 s node timeout and an election). Through a
    // connection of its own: the client's first cluster connection may wait on the lost master.
    support::wait_for(Duration::from_secs(30), "a push after the failover", || {
        let (cluster, topic) = (&cluster, topic.clone());
        async move {
            let client = try_cluster_client(cluster).await.ok()?;
            client.push(&topic, "after").id("after").await.ok()
        }
    })
    .await;
    let moved = support::wait_for(Duration::from_secs(30), "the job moved", || {
        let (cluster, topic) = (&cluster, topic.clone());
        async move {
            let client = try_cluster_client(cluster).await.ok()?;
            client.pop(&topic).await.ok().flatten()
        }
    })
    .await;
    assert_eq!(moved.id, "after");
    daemon.stop();
}

#[tokio::test]
async fn a_topic_the_registry_lost_is_added_back_once_its_master_has_failed_over() {
    let mut cluster = RedisCluster::start_with_replicas(3);
    let registry = Layout::CLUSTER.keys("").topics().to_string();
    let registry_node = cluster.node_of(&registry);
    let dir = tempfile::tempdir().unwrap();
    let (config, logs) = cluster_config(&dir, "lost", &cluster.addresses());
    let daemon = Daemon::start(&config);
    logs.wait_for_line("Service started successfully");
    // Jobs of a topic the registry then loses, as a failover can make it: a daemon started later
    // would not know the topic (they fall due later, so none moves meanwhile).
    let client = cluster_client(&cluster).await;
    let later = SystemTime::now() + Duration::from_secs(3600);
    for index in 0..3 {
        client
            .push("lost", "b")
            .id(format!("lost-{index}"))
            .at(later)
            .await
            .unwrap();
    }
    let connection = cluster.connect().await;
    // Swapped for another in one step: the registry holds as many topics as before, so the
    // daemon sees no loss (a registry that shrinks is repaired at once) until the failover, when
    // it finds the registry on a master for the first time and compares it with the pools.
    let _: () = redis::pipe()
        .atomic()
        .srem(&registry, "lost")
        .sadd(&registry, "other")
        .query_async(&mut connection.clone())
        .await
        .unwrap();
    cluster.kill_node(registry_node);

    support::wait_for(
        Duration::from_secs(60),
        "the lost topic back in the registry",
        || {
            let cluster = &cluster;
            async move {
                let client = try_cluster_client(cluster).await.ok()?;
                let inspector = Inspector::new(&client);
                let topics = inspector.topics().await.ok()?;
                topics.contains(&"lost".into()).then_some(())
            }
        },
    )
    .await;
    daemon.stop();
    let access = read(&logs.access);
    assert!(
        access.contains(&format!("the registry {registry} lacked 1 topics")),
        "{access}"
    );
}

#[tokio::test]
async fn a_resharding_in_the_middle_of_a_drain_loses_and_repeats_nothing() {
    // (`redis-cli --cluster reshard` moves the slots key by key, with MIGRATE, while the daemon
    // moves jobs in them.)
    let cluster = RedisCluster::start(3);
    let connection = cluster.connect().await;
    // Due over the next three seconds, so that the drain is under way while slots move.
    let start = delayer_wire::time::unix_now();
    let jobs = 30_000;
    let all = (0..jobs).map(|index| {
        let due = start + 3.0 * index as f64 / jobs as f64;
        (format!("job-{index:05}"), topic(index), due)
    });
    cluster::add_jobs(&connection, all).await;
    let dir = tempfile::tempdir().unwrap();
    let (config, logs) = cluster_config(&dir, "reshard", &cluster.addresses());
    let daemon = Daemon::start(&config);
    // Half the first master's slots, with the keys of the topics there, to the second.
    let cluster = std::sync::Arc::new(cluster);
    let resharding = {
        let cluster = cluster.clone();
        std::thread::spawn(move || cluster.reshard(0, 1, 2730))
    };
    let topics: Vec<String> = (0..TOPICS).map(topic).collect();
    resharding.join().unwrap();
    wait_until_moved(&connection, &topics, jobs).await;
    assert_each_delivered_once(&connection, &topics, jobs).await;
    daemon.stop();
    // Scripts refused while their slot moved (TRYAGAIN, a key gone to the other master) failed
    // before their first write, and were tried again once the slot map was read anew.
    assert!(read(&logs.access).contains("Job is ready"));
    let errors = read(&logs.error);
    assert!(!errors.contains("[error]"), "{errors}");
}

#[tokio::test]
async fn batches_on_a_cluster_keep_the_jobs_of_sound_topics_when_another_topics_keys_are_broken() {
    let cluster = RedisCluster::start(3);
    let mut redis = cluster.connect().await;
    let client = cluster_client(&cluster).await;
    for (id, topic) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
        client.push(topic, "body").id(id).await.unwrap();
        // Moved by hand, as the daemon would.
        let keys = Layout::CLUSTER.keys(topic);
        let _: () = redis.zrem(keys.pool(), id).await.unwrap();
        let _: () = redis.lpush(keys.ready(topic), id).await.unwrap();
    }
    let broken = Layout::CLUSTER.keys("b").reserved().to_string();
    let _: () = redis.set(&broken, "oops").await.unwrap();

    // Topic a is served whatever the order; after it, b's call fails and a's jobs come back
    // rather than being held by nobody. b's error comes with the look that finds nothing.
    let first = client
        .reserve(&["b", "a"], Duration::from_secs(30), Duration::ZERO)
        .await
        .unwrap()
        .expect("a's job");
    let more = client
        .reserve_many(&["a", "b"], Duration::from_secs(30), 10, Duration::ZERO)
        .await
        .unwrap();
    let jobs: Vec<_> = std::iter::once(first).chain(more).collect();
    let ids: Vec<String> = jobs.iter().map(|job| job.id.to_string()).collect();
    assert_eq!(ids, ["a1", "a2"]);
    let error = client
        .reserve_many(&["a", "b"], Duration::from_secs(30), 10, Duration::ZERO)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, delayer_client::Error::WrongType { key, .. } if *key == broken),
        "{error}"
    );

    // One topic's broken keys fail its own acks only.
    let b1 = delayer_client::Receipt {
        id: "b1".into(),
        attempt: 1,
        token: None,
        topic: Some("b".into()),
    };
    let acked = client
        .ack_many([(&jobs[0]).into(), b1, (&jobs[1]).into()])
        .await;
    assert!(matches!(acked[0], Ok(Acked::Done)), "{acked:?}");
    assert!(
        matches!(&acked[1], Err(delayer_client::Error::WrongType { key, .. }) if *key == broken),
        "{acked:?}"
    );
    assert!(matches!(acked[2], Ok(Acked::Done)), "{acked:?}");
    for id in ["a1", "a2"] {
        assert_eq!(client.get(id).await.unwrap().state, State::Unknown, "{id}");
    }
}

#[tokio::test]
async fn push_many_on_a_cluster_writes_each_topics_jobs_in_its_own_slot_and_registers_them() {
    let cluster = RedisCluster::start(3);
    let mut connection = cluster.connect().await;
    let client = cluster_client(&cluster).await;
    // Topics on different masters, interleaved: each topic's jobs go in a call of their own.
    let topics = ["a", "b", "c", "d", "e", "f"];
    let jobs = (0..60).map(|index| {
        delayer_client::NewPush::new(topics[index % 6], format!("body {index}"))
            .id(format!("job-{index}"))
            .delay(Duration::from_secs(3600))
    });
    let ids = client.push_many(jobs).await.unwrap();
    let expected: Vec<String> = (0..60).map(|index| format!("job-{index}")).collect();
    assert_eq!(ids, expected, "the ids, in order");
    for (offset, topic) in topics.iter().enumerate() {
        let keys = Layout::CLUSTER.keys(topic);
        let mut pooled: Vec<String> = connection.zrange(keys.pool(), 0, -1).await.unwrap();
        pooled.sort();
        let mut own: Vec<String> = (offset..60)
            .step_by(6)
            .map(|index| format!("job-{index}"))
            .collect();
        own.sort();
        assert_eq!(pooled, own, "{topic}'s pool");
        let body: String = connection
            .hget(keys.bucket(format!("job-{offset}")), "body")
            .await
            .unwrap();
        assert_eq!(body, format!("body {offset}"));
    }
    let mut registered: Vec<String> = connection
        .smembers(Layout::CLUSTER.keys("").topics())
        .await
        .unwrap();
    registered.sort();
    assert_eq!(registered, topics);
}

/// A paused topic's jobs wait on its master while other topics move; at an HTTP resume they move
/// in their own due order across the resume's calls (1,000 jobs a call), those pushed already past
/// due first. The resume took parked ids at random: 1,000 of 3,000 came ahead of a job due before.
#[tokio::test]
async fn a_paused_topic_waits_on_its_master_and_moves_in_due_order_at_an_http_resume() {
    let cluster = RedisCluster::start(3);
    let dir = tempfile::tempdir().unwrap();
    let (config, logs) = cluster_config(&dir, "daemon", &cluster.addresses());
    let text = format!("{}\n[http]\nlisten = 127.0.0.1:0\n", read(&config));
    std::fs::write(&config, text).unwrap();
    let daemon = Daemon::start(&config);
    let http = http_address(&logs);
    let client = cluster_client(&cluster).await;
    let inspector = Inspector::new(&client);
    inspector.pause("held").await.unwrap();
    let connection = cluster.connect().await;
    let keys = Layout::CLUSTER.keys("held");
    let master = cluster.connect_node(cluster.node_of(keys.pool())).await;

    // 1,200 jobs falling due over the next 1.5 s, each parked when it is found due; then 100
    // pushed due 100 s ago, parked after them.
    let start = delayer_wire::time::unix_now();
    let later: Vec<(String, String, f64)> = (0..1_200)
        .map(|index| {
            let due = start + 0.5 + 0.000_8 * index as f64;
            (format!("later-{index:04}"), "held".to_string(), due)
        })
        .collect();
    let past: Vec<(String, String, f64)> = (0..100)
        .map(|index| {
            let due = start - 100.0 + 0.01 * index as f64;
            (format!("past-{index:03}"), "held".to_string(), due)
        })
        .collect();
    cluster::add_jobs(&connection, later.clone()).await;
    client.push("free", "now").await.unwrap();
    let free = client
        .bpop(&["free"], Duration::from_secs(5))
        .await
        .unwrap();
    assert!(free.is_some(), "another topic moves meanwhile");
    support::wait_parked(&master, keys.pool(), later.len()).await;
    cluster::add_jobs(&connection, past.clone()).await;
    support::wait_parked(&master, keys.pool(), later.len() + past.len()).await;
    logs.wait_for_line("Topic held is paused: ");
    assert!(client.pop("held").await.unwrap().is_none());
    assert!(
        inspector
            .stats()
            .await
            .unwrap()
            .topics
            .iter()
            .any(|row| row.topic == "held" && row.paused)
    );

    let answer = post(
        &http,
        &format!("{JOBS_API}/resume"),
        &json!({"topic": "held"}),
    );
    assert_eq!(answer.json()["data"]["moved"], 1_300, "{}", answer.body);
    let mut moved = support::wait_for(Duration::from_secs(10), "1,300 jobs moved", || {
        let mut connection = connection.clone();
        let ready = keys.ready("held");
        async move {
            let ids: Vec<String> = connection.lrange(&ready, 0, -1).await.unwrap();
            (ids.len() >= 1_300).then_some(ids)
        }
    })
    .await;
    moved.reverse();
    let due_order: Vec<String> = past.iter().chain(&later).map(|job| job.0.clone()).collect();
    let ahead = support::ahead_of_earlier(&moved, &due_order);
    assert_eq!(ahead, 0, "jobs that came ahead of one due before them");
    assert_eq!(moved, due_order);
    let (waiting, left): (usize, usize) = redis::pipe()
        .zcard(keys.pool())
        .exists(&[keys.paused("held"), keys.parked("held")])
        .query_async(&mut connection.clone())
        .await
        .unwrap();
    assert_eq!(
        (waiting, left),
        (0, 0),
        "nothing waits, nor the pause and its parked jobs' key"
    );
    daemon.stop();
}

/// A step back of the daemon's wall clock while it runs (NTP, a VM resumed from a snapshot,
/// `date -s`) holds up nothing: quiet topics' jobs, and a reservation that lapses, move on time by
/// Redis's clock. (Redis's time was kept as an offset from the wall clock: after a step of -1 h no
/// topic looked due for an hour, and after one of -30 s jobs moved up to 30 s late.)
#[tokio::test]
async fn a_step_back_of_the_daemons_wall_clock_holds_up_no_quiet_topic() {
    let cluster = RedisCluster::start(3);
    let dir = tempfile::tempdir().unwrap();
    let (config, logs) = cluster_config(&dir, "stepped", &cluster.addresses());
    let clock = support::SteppedClock::new(dir.path());
    let daemon = Daemon::start_with_stepped_clock(&config, &clock);
    logs.wait_for_line("Service started successfully");
    let client = cluster_client(&cluster).await;
    let mut connection = cluster.connect().await;
    for (round, step) in ["-30s", "-1h"].into_iter().enumerate() {
        // A reservation lapsing 4 s from now, and jobs falling due 3 to 5.5 s from now, each in a
        // topic of its own that nothing else writes to: the step reaches the daemon (within a
        // second) after it has looked at them, and before they are due.
        let lapsing = format!("lapsing-{round}");
        client.push(&lapsing, "b").await.unwrap();
        let job = client
            .reserve(&[&lapsing], Duration::from_secs(4), Duration::from_secs(5))
            .await
            .unwrap()
            .expect("the job to reserve moved");
        let keys = Layout::CLUSTER.keys(&lapsing);
        let deadline: f64 = connection.zscore(keys.reserved(), &job.id).await.unwrap();
        let mut due = vec![(lapsing, deadline / 1000.0)];
        for index in 0..6 {
            let topic = format!("quiet-{round}-{index}");
            let delay = Duration::from_millis(3_000 + 500 * index);
            let id = client.push(&topic, "b").delay(delay).await.unwrap();
            let score: f64 = connection
                .zscore(Layout::CLUSTER.keys(&topic).pool(), &id)
                .await
                .unwrap();
            due.push((topic, score));
        }
        clock.step_to(step);

        let moved = arrivals(&cluster, &due, 35.0).await;
        for ((topic, due), moved) in due.iter().zip(moved) {
            let moved = moved.unwrap_or_else(|| panic!("{step}: {topic} not moved within 35 s"));
            assert!(
                moved >= *due,
                "{step}: {topic} moved {:.3} s early",
                due - moved
            );
            assert!(
                moved < due + 1.0,
                "{step}: {topic} moved {:.3} s late",
                moved - due
            );
        }
        // Each once; the lapsed reservation ended.
        for (topic, _) in &due {
            let keys = Layout::CLUSTER.keys(topic);
            let (ready, waiting, reserved): (usize, usize, usize) = redis::pipe()
                .llen(keys.ready(topic))
                .zcard(keys.pool())
                .zcard(keys.reserved())
                .query_async(&mut connection)
                .await
                .unwrap();
            assert_eq!((ready, waiting, reserved), (1, 0, 0), "{step}: {topic}");
        }
    }
    daemon.stop();
}

/// When each topic of `due` (topic, due time) first had a job on its ready list, by its master's
/// clock (polled: seen at most a poll after it happened); `None` for a topic that had none
/// `patience` seconds after its due time.
async fn arrivals(
    cluster: &RedisCluster,
    due: &[(String, f64)],
    patience: f64,
) -> Vec<Option<f64>> {
    let mut nodes = Vec::new();
    for (topic, _) in due {
        let keys = Layout::CLUSTER.keys(topic);
        let node = cluster.connect_node(cluster.node_of(keys.pool())).await;
        nodes.push((node, keys.ready(topic)));
    }
    let mut seen = vec![None; due.len()];
    loop {
        let mut waiting = false;
        for ((node, ready), ((_, due), seen)) in nodes.iter_mut().zip(due.iter().zip(&mut seen)) {
            if seen.is_some() {
                continue;
            }
            let ((seconds, micros), length): ((f64, f64), usize) = redis::pipe()
                .cmd("TIME")
                .llen(&*ready)
                .query_async(node)
                .await
                .unwrap();
            let now = seconds + micros / 1e6;
            if length > 0 {
                *seen = Some(now);
            } else if now < due + patience {
                waiting = true;
            }
        }
        if !waiting {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// In the cluster layout a topic holding `}` could share keys with another topic: topic `x}:job_bucket:Q`'s job `I` and
/// topic `x`'s job `Q}:job_bucket:I` have one bucket, `delayer:{x}:job_bucket:Q}:job_bucket:I`,
/// and the second push overwrote the first. Such a topic is refused new jobs and pauses (by the
/// client, `delayer push` and HTTP `add`); the jobs it already holds still move and are taken.
#[tokio::test]
async fn a_topic_holding_a_closing_brace_takes_no_new_job_and_its_old_ones_still_move() {
    let cluster = RedisCluster::start(3);
    let dir = tempfile::tempdir().unwrap();
    let (config, logs) = cluster_config(&dir, "brace", &cluster.addresses());
    let text = format!("{}\n[http]\nlisten = 127.0.0.1:0\n", read(&config));
    std::fs::write(&config, text).unwrap();
    let daemon = Daemon::start(&config);
    let http = http_address(&logs);
    let client = cluster_client(&cluster).await;
    let inspector = Inspector::new(&client);
    let mut connection = cluster.connect().await;
    let in_a_day = Duration::from_secs(86_400);
    client
        .push("x", "first")
        .id("Q}:job_bucket:I")
        .delay(in_a_day)
        .await
        .unwrap();

    let topic = "x}:job_bucket:Q";
    let why = "holds '}', so its keys could be another topic's in the cluster layout";
    let refused = client.push(topic, "second").id("I").delay(in_a_day).await;
    assert!(
        matches!(&refused, Err(delayer_client::Error::TopicRefused(..))),
        "{refused:?}"
    );
    let said = refused.unwrap_err().to_string();
    assert!(said.contains(topic) && said.contains(why), "{said}");
    let said = delayer_fails(&config, &["push", topic, "second", "--id", "I"]);
    assert!(said.contains(topic) && said.contains(why), "{said}");
    let added = post(
        &http,
        &format!("{JOBS_API}/add"),
        &json!({"id": "I", "topic": topic, "delay": 86_400, "body": "second"}),
    );
    assert_eq!(added.status, 400, "{}", added.body);
    assert!(added.body.contains(why), "{}", added.body);
    let paused = inspector.pause(topic).await;
    assert!(
        matches!(&paused, Err(delayer_client::Error::TopicRefused(..))),
        "{paused:?}"
    );

    // The first job is whole, and nothing of the refused topic was written.
    let x = Layout::CLUSTER.keys("x");
    let bucket: HashMap<String, String> = connection
        .hgetall(x.bucket("Q}:job_bucket:I"))
        .await
        .unwrap();
    assert_eq!(
        (bucket.get("topic"), bucket.get("body")),
        (Some(&"x".to_string()), Some(&"first".to_string()))
    );
    let registered: bool = connection.sismember("delayer:topics", topic).await.unwrap();
    assert!(!registered);
    let info = client.get("Q}:job_bucket:I").await.unwrap();
    assert_eq!(
        info.topic.as_ref().map(ToString::to_string),
        Some("x".into())
    );

    // A topic holding `}` that already has jobs (pushed before it was refused): they move, and
    // consumers pop and reserve them.
    let old = "old}topic";
    let now = delayer_wire::time::unix_now();
    let jobs = ["o1", "o2"].map(|id| (id.to_string(), old.to_string(), now));
    cluster::add_jobs(&connection, jobs).await;
    let popped = client.bpop(&[old], Duration::from_secs(5)).await.unwrap();
    assert_eq!(popped.map(|job| job.id.to_string()), Some("o1".into()));
    let job = client
        .reserve(&[old], Duration::from_secs(30), Duration::from_secs(5))
        .await
        .unwrap()
        .expect("o2 moved");
    assert_eq!(job.id, "o2");
    assert_eq!(client.ack(&job).await.unwrap(), Acked::Done);
    let olds = Layout::CLUSTER.keys(old);
    let (waiting, ready, reserved): (usize, usize, usize) = redis::pipe()
        .zcard(olds.pool())
        .llen(olds.ready(old))
        .zcard(olds.reserved())
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!((waiting, ready, reserved), (0, 0, 0));
    daemon.stop();
    let errors = read(&logs.error);
    assert!(!errors.contains("[error]"), "{errors}");
}

/// Schedules on a cluster: one from the file and one added at run time, on topics in other
/// slots, each tick pushed once with two daemons claiming.
#[tokio::test]
async fn schedules_tick_once_on_a_cluster() {
    let cluster = RedisCluster::start(3);
    let dir = tempfile::tempdir().unwrap();
    let mut daemons = Vec::new();
    for name in ["a", "b"] {
        let (config, _logs) = cluster_config(&dir, name, &cluster.addresses());
        let text = read(&config) + "\n[schedule.from-file]\ncron = every 1s\ntopic = a\n";
        std::fs::write(&config, text).unwrap();
        daemons.push(Daemon::start(&config));
    }
    let client = cluster_client(&cluster).await;
    let inspector = Inspector::new(&client);
    let runtime = delayer_client::inspector::Definition::new("runtime", "* * * * * *", "d");
    inspector
        .save_schedule(&runtime, delayer_client::inspector::Source::Api)
        .await
        .unwrap();
    let mut connection = cluster.connect().await;
    let known: bool = connection.sismember("delayer:topics", "d").await.unwrap();
    assert!(known, "its topic is known before its first tick");
    for topic in ["a", "d"] {
        let mut ticks = Vec::new();
        while ticks.len() < 3 {
            let job = client.bpop(&[topic], Duration::from_secs(5)).await.unwrap();
            let job = job.unwrap_or_else(|| panic!("{topic}: no tick within 5 s"));
            ticks.push(job.id.to_string());
        }
        let mut distinct = ticks.clone();
        distinct.dedup();
        assert_eq!(distinct, ticks, "{topic}: a tick twice");
    }
    let mut names: Vec<String> = inspector
        .schedules()
        .await
        .unwrap()
        .readable
        .into_iter()
        .map(|stored| stored.definition.name)
        .collect();
    names.sort();
    assert_eq!(names, ["from-file", "runtime"]);
    assert_eq!(
        inspector.remove_schedule("runtime").await.unwrap(),
        delayer_client::inspector::Changed::Done
    );
    for daemon in daemons {
        daemon.stop();
    }
}
