//! The Kafka link, for real: a tansu broker (see `delayer_testkit::KafkaBroker`), daemons as
//! processes, and what they wrote read back with kafka-python, a client we did not write
//! (`support/kafka_client.py`). Due jobs reach Kafka once by key and never early, a missing Kafka
//! topic sends its jobs to the dead list with the reason, a broker or daemon killed mid-delivery
//! loses nothing, and delay requests read from Kafka are pushed once each.

use crate::support;

use std::collections::{HashMap, HashSet};
use std::process::Command;
use std::time::Duration;

use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::{Client, Inspector, NewPush, State};
use delayer_testkit::KafkaBroker;
use delayer_wire::keys::{JOB_POOL, RESERVED, ready_queue};
use serde_json::Value;
use support::http_client::{request, samples, serving, serving_with};
use support::{
    Daemon, DaemonSetup, RedisServer, delayer_fails, delayer_succeeds, left_in_redis, read,
    redis_ms, run_script, wait_for, wait_until_sync,
};

/// One message as kafka-python read it.
#[derive(Debug, Clone)]
struct Record {
    topic: String,
    key: Option<String>,
    value: String,
    /// CreateTime, unix ms (librdkafka's clock, this host's: Redis's here).
    timestamp: i64,
    headers: HashMap<String, String>,
}

/// Every message of `topics` (from the beginning), read until `count` came or `seconds` passed.
fn read_kafka(broker: &KafkaBroker, topics: &[&str], count: usize, seconds: u32) -> Vec<Record> {
    let (count, seconds) = (count.to_string(), seconds.to_string());
    let args = [
        "read",
        &broker.address(),
        &topics.join(","),
        &count,
        &seconds,
    ];
    run_script("kafka_client.py", &args, b"")
        .lines()
        .map(|line| {
            let json: Value = serde_json::from_str(line).unwrap();
            Record {
                topic: json["topic"].as_str().unwrap().to_string(),
                key: json["key"].as_str().map(str::to_string),
                value: json["value"].as_str().unwrap_or_default().to_string(),
                timestamp: json["timestamp"].as_i64().unwrap(),
                headers: serde_json::from_value(json["headers"].clone()).unwrap(),
            }
        })
        .collect()
}

/// Produces `messages` (JSON objects: key, value, headers) to `topic` with kafka-python.
fn produce_kafka(broker: &KafkaBroker, topic: &str, messages: &[Value]) {
    let lines: String = messages
        .iter()
        .map(|message| format!("{message}\n"))
        .collect();
    run_script(
        "kafka_client.py",
        &["produce", &broker.address(), topic],
        lines.as_bytes(),
    );
}

/// `[delayer]` lines, then a `[kafka]` section for `broker` with `kafka` lines.
fn with_kafka(broker: &KafkaBroker, kafka: &str) -> String {
    format!("[kafka]\nbrokers = {}\n{kafka}", broker.address())
}

/// Pushes `count` jobs over `topics`, due over `spread_ms`; each job's id with its due time by
/// Redis's clock at the latest (Redis's TIME before the push, plus the delay).
async fn push_jobs(
    client: &Client,
    redis: &mut MultiplexedConnection,
    topics: &[&str],
    count: usize,
    spread_ms: u64,
) -> HashMap<String, i64> {
    let mut due = HashMap::new();
    for chunk in (0..count).collect::<Vec<_>>().chunks(200) {
        let now = redis_ms(redis).await;
        let jobs: Vec<NewPush> = chunk
            .iter()
            .map(|&n| {
                let delay = spread_ms * n as u64 / count as u64;
                let id = format!("job-{n}");
                due.insert(id.clone(), now + delay as i64);
                NewPush::new(topics[n % topics.len()], format!("body of {n}"))
                    .id(id)
                    .delay(Duration::from_millis(delay))
            })
            .collect();
        client.push_many(jobs).await.unwrap();
    }
    due
}

/// Each key's count among `records`.
fn by_key(records: &[Record]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for record in records {
        *counts
            .entry(record.key.clone().unwrap_or_default())
            .or_default() += 1;
    }
    counts
}

#[tokio::test(flavor = "multi_thread")]
async fn due_jobs_reach_kafka_once_each_by_key_and_never_early_from_three_daemons() {
    let broker = KafkaBroker::start();
    let topics = [
        "orders",
        "mails",
        "invoices",
        "alerts",
        "refunds",
        "reviews",
        "reminders",
        "exports",
        "imports",
        "reports",
    ];
    for topic in topics {
        broker.create_topic(topic, 3);
    }
    // DELAYER_KAFKA_TEST_JOBS=10000 gives the issue's figure; CI's runs are smaller.
    let jobs: usize = std::env::var("DELAYER_KAFKA_TEST_JOBS")
        .ok()
        .and_then(|jobs| jobs.parse().ok())
        .unwrap_or(2_000);
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let config = with_kafka(&broker, "topics = *\nmessage = body\n");
    let daemons: Vec<Daemon> = ["a", "b", "c"]
        .iter()
        .map(|name| Daemon::start(&server.daemon_config(name, &config).0))
        .collect();
    let due = push_jobs(&client, &mut redis, &topics, jobs, 5_000).await;

    let records = read_kafka(&broker, &topics, jobs, 60);
    let counts = by_key(&records);
    let missing: Vec<&String> = due.keys().filter(|id| !counts.contains_key(*id)).collect();
    assert!(
        missing.is_empty(),
        "{} jobs never reached Kafka: {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    for record in &records {
        let key = record.key.as_ref().unwrap();
        let n: usize = key.strip_prefix("job-").unwrap().parse().unwrap();
        assert_eq!(record.value, format!("body of {n}"));
        assert_eq!(record.topic, topics[n % topics.len()]);
        assert_eq!(record.headers["delayer-topic"], record.topic);
        assert_eq!(record.headers["delayer-attempt"], "1");
        let due_ms: i64 = record.headers["delayer-due-ms"].parse().unwrap();
        assert!(
            due_ms >= due[key],
            "{key}: the due header {due_ms} is before its due time {}",
            due[key]
        );
        assert!(
            record.timestamp >= due[key],
            "{key} was produced at {} ms, before its due time {} ms by Redis's clock",
            record.timestamp,
            due[key]
        );
    }
    // How late each went out: its producer's timestamp after its due time (an upper bound: the
    // due time recorded is Redis's TIME before the push, plus the delay).
    let mut late: Vec<i64> = records
        .iter()
        .map(|record| record.timestamp - due[record.key.as_ref().unwrap()])
        .collect();
    late.sort_unstable();
    let at = |share: f64| late[((late.len() - 1) as f64 * share) as usize];
    eprintln!(
        "{jobs} jobs, due to produced: p50 {} ms, p99 {} ms, max {} ms",
        at(0.5),
        at(0.99),
        at(1.0)
    );
    wait_for(
        Duration::from_secs(10),
        "every delivered job acked in Redis",
        || {
            let mut redis = redis.clone();
            async move { (left_in_redis(&mut redis, &topics).await == 0).then_some(()) }
        },
    )
    .await;
    drop(daemons);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_id_form_carries_the_id_and_keeps_the_data_for_get() {
    let broker = KafkaBroker::start();
    broker.create_topic("delayed.orders", 1);
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let kafka = "message = id\ntopics = ord*\ntopic_prefix = delayed.\nkeep_delivered = 600\n";
    let (_daemon, _, http) = serving_with(&server, "a", &with_kafka(&broker, kafka), "");
    push_jobs(&client, &mut redis, &["orders"], 50, 500).await;
    // A topic the patterns leave out stays on its ready list.
    client
        .push("other", "not for Kafka")
        .id("other-1")
        .await
        .unwrap();

    let records = read_kafka(&broker, &["delayed.orders"], 50, 30);
    assert_eq!(records.len(), 50);
    for record in &records {
        assert_eq!(
            Some(&record.value),
            record.key.as_ref(),
            "the value is the job id"
        );
    }
    let info = wait_for(
        Duration::from_secs(10),
        "the job acked as delivered",
        || {
            let client = client.clone();
            async move {
                let info = client.get("job-7").await.unwrap();
                (info.state == State::Delivered).then_some(info)
            }
        },
    )
    .await;
    assert_eq!(
        info.body.as_deref(),
        Some(&b"body of 7"[..]),
        "get reads the data after delivery"
    );
    let ttl: i64 = redis
        .ttl(delayer_wire::keys::job_bucket("job-7"))
        .await
        .unwrap();
    let metrics = samples(&request(&http, "GET", "/metrics", &[], b"").body);
    assert_eq!(metrics["delayer_kafka_delivered_jobs_total"], 50.0);
    assert_eq!(metrics["delayer_kafka_up"], 1.0);
    assert_eq!(metrics["delayer_kafka_in_flight_jobs"], 0.0);
    assert_eq!(metrics["delayer_kafka_due_to_acked_seconds_count"], 50.0);
    let overview = request(&http, "GET", "/", &[], b"").body;
    assert!(overview.contains("Kafka at <code>"), "{overview}");
    assert!((590..=600).contains(&ttl), "kept keep_delivered: {ttl}");
    let other: Vec<String> = redis.lrange(ready_queue("other"), 0, -1).await.unwrap();
    assert_eq!(other, ["other-1"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_whose_kafka_topic_does_not_exist_is_dead_with_the_reason_and_others_flow() {
    let broker = KafkaBroker::start();
    broker.create_topic("present", 1);
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let (config, logs) = server.daemon_config("a", &with_kafka(&broker, "topics = *\n"));
    let _daemon = Daemon::start(&config);
    for n in 0..20 {
        client
            .push("absent", "lost?")
            .id(format!("absent-{n}"))
            .await
            .unwrap();
        client
            .push("present", "fine")
            .id(format!("present-{n}"))
            .await
            .unwrap();
    }
    let records = read_kafka(&broker, &["present"], 20, 30);
    assert_eq!(by_key(&records).len(), 20, "the other topic keeps flowing");
    let dead = wait_for(
        Duration::from_secs(30),
        "the absent topic's jobs on its dead list",
        || {
            let client = client.clone();
            let inspector = Inspector::new(&client);
            async move {
                let dead = inspector.dead("absent", 100).await.unwrap();
                (dead.len() == 20).then_some(dead)
            }
        },
    )
    .await;
    let info = client.get(&dead[0]).await.unwrap();
    assert_eq!(info.state, State::Dead);
    let why = info.died_why.unwrap_or_default();
    assert!(why.contains("UnknownTopic"), "{why}");
    let listed = delayer_succeeds(&config, &["dead", "absent"]);
    assert!(
        listed.contains("\"died_why\":\"Kafka refused it"),
        "{listed}"
    );
    assert_eq!(left_in_redis(&mut redis, &["absent", "present"]).await, 0);
    // A text line carries its fields, as JSON lines do.
    let logged = read(&logs.error);
    let line = logged
        .lines()
        .find(|line| line.contains("kafka: job sent to the dead list: Kafka refused it"))
        .unwrap_or_else(|| panic!("no line of a job sent to the dead list:\n{logged}"));
    assert!(
        line.contains(" id=absent-") && line.ends_with(" topic=absent"),
        "{line}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broker_killed_and_restarted_mid_delivery_loses_nothing() {
    let mut broker = KafkaBroker::start();
    broker.create_topic("t", 2);
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let (config, _) = server.daemon_config("a", &with_kafka(&broker, "topics = *\n"));
    let _daemon = Daemon::start(&config);
    let due = push_jobs(&client, &mut redis, &["t"], 600, 4_000).await;
    // Killed once some are delivered, and down for 3 s while the others fall due: librdkafka
    // holds and retries what it was given, the daemon reserves no more meanwhile.
    let early = read_kafka(&broker, &["t"], 50, 20);
    assert!(!early.is_empty());
    broker.kill();
    tokio::time::sleep(Duration::from_secs(3)).await;
    broker.restart();

    let records = read_kafka(&broker, &["t"], 600, 60);
    let counts = by_key(&records);
    let missing: Vec<&String> = due.keys().filter(|id| !counts.contains_key(*id)).collect();
    assert!(missing.is_empty(), "lost: {missing:?}");
    let again = records.len() - counts.len();
    println!("{again} of 600 jobs delivered more than once around the broker's restart");
    wait_for(Duration::from_secs(10), "Redis left empty", || {
        let mut redis = redis.clone();
        async move { (left_in_redis(&mut redis, &["t"]).await == 0).then_some(()) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_killed_mid_delivery_leaves_its_job_to_be_delivered_again_after_its_ttr() {
    let mut broker = KafkaBroker::start();
    broker.create_topic("t", 1);
    let server = RedisServer::start();
    let redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let (config, logs) = server.daemon_config("a", &with_kafka(&broker, "topics = *\nttr = 2\n"));
    // The broker down: the delivery fails (after librdkafka's 15 s), the job is given back and
    // tried again one at a time; the daemon is killed while it holds the job, reserved.
    broker.kill();
    let mut daemon = Daemon::start(&config);
    client.push("t", "once").id("held").await.unwrap();
    let logged = || read(&logs.error) + &read(&logs.access);
    wait_until_sync(Duration::from_secs(30), "the outage logged", || {
        logged().contains("kafka does not take messages")
    });
    assert!(logged().contains("due jobs wait in Redis"), "{}", logged());
    wait_for(Duration::from_secs(10), "the job reserved again", || {
        let mut redis = redis.clone();
        async move { (redis.zcard::<_, usize>(RESERVED).await.unwrap() == 1).then_some(()) }
    })
    .await;
    daemon.signal("KILL");
    daemon.wait(Duration::from_secs(5));
    broker.restart();
    let _again = Daemon::start(&config);
    let records = read_kafka(&broker, &["t"], 1, 30);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0].key.as_deref(), Some("held"));
    assert_eq!(
        records[0].headers["delayer-attempt"], "2",
        "delivered again after its ttr, the killed attempt counted (the one given back not)"
    );
    wait_for(Duration::from_secs(10), "acked", || {
        let mut redis = redis.clone();
        async move { (left_in_redis(&mut redis, &["t"]).await == 0).then_some(()) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn delay_requests_read_from_kafka_are_pushed_once_each_through_kills_and_a_reread() {
    let broker = KafkaBroker::start();
    broker.create_topic("requests", 2);
    broker.create_topic("out", 2);
    // DELAYER_KAFKA_TEST_REQUESTS=10000 gives the issue's proof; CI's runs are smaller.
    let count: i64 = std::env::var("DELAYER_KAFKA_TEST_REQUESTS")
        .ok()
        .and_then(|count| count.parse().ok())
        .unwrap_or(2_000);
    let half = (count / 2) as usize;
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let start = redis_ms(&mut redis).await;
    // Half to Kafka (topic out), half to a ready list (topic plain); half keyed, half not.
    let requests: Vec<Value> = (0..count)
        .map(|n| {
            let topic = if n % 2 == 0 { "out" } else { "plain" };
            let mut headers = serde_json::json!({"delayer-topic": topic});
            if n % 3 == 0 {
                headers["delayer-due-ms"] = (start + 2_000 + n % 1_500).to_string().into();
            } else {
                headers["delayer-delay-ms"] = (n % 1_500).to_string().into();
            }
            let key = (n % 4 < 2).then(|| format!("req-{n}"));
            serde_json::json!({"key": key, "value": format!("request {n}"), "headers": headers})
        })
        .collect();
    produce_kafka(&broker, "requests", &requests);
    // ttr 2: a job the daemon was delivering to Kafka when killed goes out again soon.
    let kafka = "topics = out\nrequests_topic = requests\nttr = 2\n";
    let (config, logs) = server.daemon_config("a", &with_kafka(&broker, kafka));
    // Killed (kill -9) twice while it reads: the same daemon started again takes its partitions
    // back (static membership), reads again what it had not committed, and skips what it had
    // pushed (the offsets its pushes recorded in Redis).
    let pushed = |redis: MultiplexedConnection| async move {
        let offsets: HashMap<String, i64> = redis
            .clone()
            .hgetall("delayer:kafka_offsets:delayer")
            .await
            .unwrap();
        offsets.values().sum::<i64>()
    };
    for _ in 0..2 {
        let before = pushed(redis.clone()).await;
        let mut daemon = Daemon::start(&config);
        // tansu's group coordinator takes 6 s or more to let a static member join.
        wait_for(Duration::from_secs(60), "more requests pushed", || {
            let redis = redis.clone();
            async move { (pushed(redis).await > before).then_some(()) }
        })
        .await;
        daemon.signal("KILL");
        daemon.wait(Duration::from_secs(5));
    }
    let killed_at = pushed(redis.clone()).await;
    assert!(
        killed_at < count - 2,
        "the kills came after every request was pushed ({killed_at})"
    );
    let daemon = Daemon::start(&config);

    let records = read_kafka(&broker, &["out"], half, 60);
    eprintln!(
        "{count} requests, {killed_at} pushed when killed twice; {} of {half} to Kafka delivered \
         as a later attempt after a kill",
        records
            .iter()
            .filter(|record| record.headers["delayer-attempt"] != "1")
            .count()
    );
    // Popped as they come, until all came and a moment passed for any copy.
    let mut plain: Vec<String> = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while plain.len() < half && std::time::Instant::now() < deadline {
        let popped: Option<(String, String)> =
            redis.brpop(ready_queue("plain"), 0.2).await.unwrap();
        plain.extend(popped.map(|(_, id)| id));
    }
    // A job the killed daemon had reserved but not acked goes out again (a later attempt, the
    // same key: at least once); a request pushed twice would go out afresh, as an attempt again.
    let mut attempts: HashMap<&str, Vec<&str>> = HashMap::new();
    for record in &records {
        let key = record.key.as_deref().unwrap();
        attempts
            .entry(key)
            .or_default()
            .push(&record.headers["delayer-attempt"]);
    }
    let twice: Vec<_> = attempts
        .iter()
        .filter(|(_, seen)| seen.iter().collect::<HashSet<_>>().len() < seen.len())
        .collect();
    assert!(
        attempts.len() == half && twice.is_empty(),
        "each request to Kafka once: {} of {half} keys, one attempt twice: {:?}; the daemon's \
         log:\n{}{}",
        attempts.len(),
        &twice[..twice.len().min(5)],
        read(&logs.access),
        read(&logs.error)
    );
    let bodies: HashSet<&str> = records.iter().map(|record| record.value.as_str()).collect();
    assert_eq!(bodies.len(), half);
    for record in &records {
        let n: i64 = record
            .value
            .strip_prefix("request ")
            .unwrap()
            .parse()
            .unwrap();
        let key = record.key.as_deref().unwrap();
        if n % 4 < 2 {
            assert_eq!(key, format!("req-{n}"), "the message key is the job id");
        }
        if n % 3 == 0 {
            assert!(
                record.timestamp >= start + 2_000 + n % 1_500,
                "request {n} delivered early"
            );
        }
    }
    let unique: HashSet<&String> = plain.iter().collect();
    assert_eq!(
        (plain.len(), unique.len()),
        (half, half),
        "each request to a ready list once"
    );

    // Every request read again (the group's offsets rewound, as after a crash between a push and
    // its commit): the offsets kept in Redis skip them all.
    stop(daemon, &logs);
    kafka_client(&broker, &["rewind", "delayer", "requests"]);
    let daemon = Daemon::start(&config);
    logs.wait_for_line("kafka: reading delay requests");
    support::wait_until_sync(Duration::from_secs(60), "the requests read again", || {
        kafka_client(&broker, &["committed", "delayer", "requests"]).trim() == count.to_string()
    });
    stop(daemon, &logs);
    assert_eq!(
        // Read until as many came as before, then a second more for any copy.
        read_kafka(&broker, &["out"], records.len(), 30).len(),
        records.len(),
        "none pushed again"
    );
    let late: usize = redis.llen(ready_queue("plain")).await.unwrap();
    let waiting: usize = redis.zcard(JOB_POOL).await.unwrap();
    assert_eq!((late, waiting), (0, 0), "none pushed again");
}

#[tokio::test(flavor = "multi_thread")]
async fn delay_requests_in_a_json_envelope_are_pushed_and_bad_ones_skipped_logged_and_counted() {
    let broker = KafkaBroker::start();
    broker.create_topic("requests", 1);
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let due = redis_ms(&mut redis).await + 1_000;
    let envelope = |key: Option<&str>, value: Value| serde_json::json!({"key": key, "value": value.to_string(), "headers": {}});
    let requests = [
        envelope(
            Some("key-1"),
            serde_json::json!({"topic": "plain", "delay_ms": 0, "id": "env-1", "body": "hello"}),
        ),
        envelope(
            Some("env-2"),
            serde_json::json!({"topic": "plain", "due_ms": due, "body": {"order": 42}}),
        ),
        serde_json::json!({"key": null, "value": "not json", "headers": {}}),
        envelope(
            None,
            serde_json::json!({"topic": "plain", "delay_ms": 1, "due_ms": due, "body": "b"}),
        ),
        envelope(
            None,
            serde_json::json!({"topic": "plain", "delay": 1, "body": "b"}),
        ),
        envelope(
            None,
            serde_json::json!({"topic": "pla\nin", "delay_ms": 1, "body": "b"}),
        ),
        serde_json::json!({"key": null, "value": "b", "headers": {"delayer-topic": "plain"}}),
        serde_json::json!({"key": "hdr-1", "value": "by headers",
            "headers": {"delayer-topic": "plain", "delayer-delay-ms": "0"}}),
    ];
    produce_kafka(&broker, "requests", &requests);
    let kafka = "topics = none\nrequests_topic = requests\n";
    let (_daemon, logs, http) = serving_with(&server, "a", &with_kafka(&broker, kafka), "");

    let mut ready: Vec<String> = Vec::new();
    while ready.len() < 3 {
        let popped: Option<(String, String)> =
            redis.brpop(ready_queue("plain"), 30.0).await.unwrap();
        ready.push(popped.expect("three good requests on the ready list").1);
    }
    ready.sort();
    assert_eq!(
        ready,
        ["env-1", "env-2", "hdr-1"],
        "the envelope's id, else the key"
    );
    let bodies = [
        ("env-1", "hello"),
        ("env-2", r#"{"order":42}"#),
        ("hdr-1", "by headers"),
    ];
    for (id, body) in bodies {
        let info = client.get(id).await.unwrap();
        assert_eq!(info.body.as_deref(), Some(body.as_bytes()), "{id}");
    }
    let metrics = samples(&request(&http, "GET", "/metrics", &[], b"").body);
    assert_eq!(metrics["delayer_kafka_requests_total"], 3.0);
    assert_eq!(metrics["delayer_kafka_bad_requests_total"], 5.0);
    let logged = read(&logs.error) + &read(&logs.access);
    for why in [
        "no JSON envelope",
        "both delay_ms and due_ms",
        "unknown field `delay`",
        "control character",
        "no delayer-delay-ms or delayer-due-ms",
    ] {
        assert!(logged.contains(why), "{why} not logged:\n{logged}");
    }
    let (waiting, left): (usize, usize) = (
        redis.zcard(JOB_POOL).await.unwrap(),
        redis.llen(ready_queue("plain")).await.unwrap(),
    );
    assert_eq!((waiting, left), (0, 0), "nothing else pushed");
}

/// Stops `daemon` (SIGTERM): it must exit cleanly within 10 s; its log is shown if not.
fn stop(mut daemon: Daemon, logs: &support::Logs) {
    daemon.signal("TERM");
    let status = daemon.wait(Duration::from_secs(10));
    assert!(
        status.success(),
        "the daemon did not stop cleanly ({status:?}); its log:\n{}{}",
        read(&logs.access),
        read(&logs.error)
    );
}

/// Runs kafka_client.py with `args` after the broker's address; its output.
fn kafka_client(broker: &KafkaBroker, args: &[&str]) -> String {
    let output = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/it/support/kafka_client.py"
        ))
        .arg(args[0])
        .arg(broker.address())
        .args(&args[1..])
        .output()
        .expect("python3");
    assert!(
        output.status.success(),
        "kafka_client.py {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn check_config_says_whether_the_brokers_answer_and_names_each_mistake_once() {
    let broker = KafkaBroker::start();
    broker.create_topic("requests", 1);
    let server = RedisServer::start();
    let (config, _) = server.daemon_config(
        "a",
        &with_kafka(&broker, "topics = *\nrequests_topic = requests\n"),
    );
    let out = delayer_succeeds(&config, &["--check-config"]);
    assert!(
        out.contains(&format!("the Kafka brokers {} answer", broker.address())),
        "{out}"
    );
    // Each mistake: one error, naming the key and the value, with librdkafka's own reason.
    let errors = |kafka: &str| {
        let (config, _) = server.daemon_config("b", &format!("[kafka]\n{kafka}"));
        let output = support::delayer_command()
            .arg("-c")
            .arg(&config)
            .arg("--check-config")
            .output()
            .unwrap();
        assert!(!output.status.success());
        String::from_utf8_lossy(&output.stderr)
            .lines()
            .filter(|line| line.starts_with("error: "))
            .map(str::to_string)
            .collect::<Vec<String>>()
    };
    let nobody = format!("127.0.0.1:{}", support::free_port());
    let refused = errors(&format!("brokers = {nobody}\ntopics = *\n"));
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].contains(&format!("[kafka] brokers = {nobody}: no broker answers: "))
            && refused[0].contains("Connection refused")
            && !refused[0].contains("BrokerTransportFailure"),
        "{refused:?}"
    );
    let unknown = errors("brokers = nohost.invalid:9092\ntopics = *\n");
    assert!(
        unknown.len() == 1 && unknown[0].contains("Failed to resolve 'nohost.invalid:9092'"),
        "{unknown:?}"
    );
    let port = errors("brokers = 127.0.0.1:99999\ntopics = *\n");
    assert!(
        port.len() == 1 && port[0].contains("[kafka] brokers = \"127.0.0.1:99999\""),
        "{port:?}"
    );
    let ca = errors(&format!(
        "brokers = {}\ntopics = *\nsecurity_protocol = ssl\nssl_ca_file = /nonexistent/ca.pem\n",
        broker.address()
    ));
    assert!(
        ca.len() == 1
            && ca[0].contains("[kafka] ssl_ca_file = /nonexistent/ca.pem: cannot be read"),
        "{ca:?}"
    );
    let missing = errors(&format!(
        "brokers = {}\nrequests_topic = absent\n",
        broker.address()
    ));
    assert!(
        missing.len() == 1
            && missing[0].contains("[kafka] requests_topic = absent: the brokers")
            && missing[0].contains("have no such topic"),
        "{missing:?}"
    );
    let (config, _) = server.daemon_config("c", "[kafka]\ntopics = x\n");
    let error = delayer_fails(&config, &["--check-config"]);
    assert!(error.contains("[kafka] brokers"), "{error}");
}

/// librdkafka's threads are named `rdk:...`.
fn kafka_threads(daemon: &Daemon) -> usize {
    std::fs::read_dir(format!("/proc/{}/task", daemon.pid()))
        .unwrap()
        .filter(|task| {
            let comm = task.as_ref().unwrap().path().join("comm");
            std::fs::read_to_string(comm)
                .unwrap_or_default()
                .starts_with("rdk:")
        })
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_kafka_section_there_is_no_kafka_client_nor_thread() {
    let broker = KafkaBroker::start();
    let server = RedisServer::start();
    let (without, _, http) = serving(&server, "plain", "");
    let metrics = request(&http, "GET", "/metrics", &[], b"").body;
    assert!(!metrics.contains("kafka"), "{metrics}");
    let (linked, logs) = server.daemon_config("linked", &with_kafka(&broker, "topics = *\n"));
    let with = Daemon::start(&linked);
    logs.wait_for_line("Service started successfully");
    wait_for(
        Duration::from_secs(10),
        "librdkafka's threads in the linked daemon",
        || {
            let found = kafka_threads(&with);
            async move { (found > 0).then_some(()) }
        },
    )
    .await;
    assert_eq!(kafka_threads(&without), 0);
}

/// Waits until `topic`'s ready list holds job `id` (a delay request pushed, or a job that stays).
async fn wait_on_ready_list(redis: &MultiplexedConnection, topic: &str, id: &str) {
    wait_for(
        Duration::from_secs(60),
        &format!("{id} on the ready list of {topic}"),
        || {
            let mut redis = redis.clone();
            let key = ready_queue(topic);
            async move {
                let ids: Vec<String> = redis.lrange(key, 0, -1).await.unwrap();
                ids.iter().any(|held| held == id).then_some(())
            }
        },
    )
    .await;
}

/// A request by headers: `key`, to `topic`, due in `delay_ms`.
fn delay_request(key: &str, topic: &str, delay_ms: u64, body: &str) -> Value {
    serde_json::json!({
        "key": key,
        "value": body,
        "headers": {"delayer-topic": topic, "delayer-delay-ms": delay_ms.to_string()},
    })
}

/// `[kafka]` for Kafka in only, `topics` left out or empty: no topic's due jobs go to Kafka. A
/// legacy client's job stays on its ready list (before, every topic went to Kafka, and a topic
/// Kafka lacks was dead-listed).
#[tokio::test(flavor = "multi_thread")]
async fn a_kafka_section_without_topics_delivers_no_topic_to_kafka() {
    let broker = KafkaBroker::start();
    broker.create_topic("requests", 1);
    let server = RedisServer::start();
    let redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let inspector = Inspector::new(&client);
    for (name, topics) in [("missing", ""), ("empty", "topics =   ; Kafka in only\n")] {
        // A group each: the first daemon, a static member, keeps its partition after its stop.
        let kafka = format!("{topics}requests_topic = requests\ngroup = {name}\n");
        let (config, logs) = server.daemon_config(name, &with_kafka(&broker, &kafka));
        let daemon = Daemon::start(&config);
        let id = format!("php-{name}");
        client
            .push("orders.php", "{}")
            .id(id.as_str())
            .await
            .unwrap();
        // Once a request read from Kafka is on its ready list, the link has long run: a job of
        // orders.php would have been reserved within 0.1 s.
        let marker = format!("marker-{name}");
        produce_kafka(
            &broker,
            "requests",
            &[delay_request(&marker, "plain", 0, "m")],
        );
        wait_on_ready_list(&redis, "plain", &marker).await;
        let mut redis = redis.clone();
        let ready: Vec<String> = redis
            .lrange(ready_queue("orders.php"), 0, -1)
            .await
            .unwrap();
        assert!(ready.contains(&id), "{ready:?}");
        let dead = inspector.dead("orders.php", 10).await.unwrap();
        assert!(dead.is_empty(), "{dead:?}");
        let reserved: usize = redis.zcard(RESERVED).await.unwrap();
        assert_eq!(reserved, 0);
        stop(daemon, &logs);
    }
}

/// With `topics = *`, a request whose topic would be delivered to the requests topic itself is
/// skipped with why, logged with its partition, offset and key, and counted; a job pushed to
/// that topic stays on its ready list. Before, such a request came back again and again.
#[tokio::test(flavor = "multi_thread")]
async fn a_request_for_the_requests_topic_is_refused_and_never_loops() {
    let broker = KafkaBroker::start();
    broker.create_topic("req", 1);
    broker.create_topic("out", 1);
    let server = RedisServer::start();
    let redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    client.push("req", "direct").id("direct").await.unwrap();
    produce_kafka(
        &broker,
        "req",
        &[
            delay_request("looping", "req", 0, "again?"),
            delay_request("marker", "out", 0, "m"),
        ],
    );
    let kafka = "topics = *\nrequests_topic = req\n";
    let (daemon, logs, http) = serving_with(&server, "a", &with_kafka(&broker, kafka), "");

    let out = read_kafka(&broker, &["out"], 1, 60);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].key.as_deref(), Some("marker"));
    // The marker came after the looping request: had that one been pushed, it would be in req
    // by now (pushed with no delay, as the marker was).
    wait_for(Duration::from_secs(10), "the marker acked in Redis", || {
        let mut redis = redis.clone();
        async move { (left_in_redis(&mut redis, &["out"]).await == 0).then_some(()) }
    })
    .await;
    let metrics = samples(&request(&http, "GET", "/metrics", &[], b"").body);
    assert_eq!(metrics["delayer_kafka_bad_requests_total"], 1.0);
    assert_eq!(metrics["delayer_kafka_requests_total"], 1.0);
    stop(daemon, &logs);
    let requests = read_kafka(&broker, &["req"], 2, 10);
    assert_eq!(requests.len(), 2, "nothing produced to req: {requests:?}");
    assert_eq!(client.get("looping").await.unwrap().state, State::Unknown);
    let mut redis = redis.clone();
    let ready: Vec<String> = redis.lrange(ready_queue("req"), 0, -1).await.unwrap();
    assert_eq!(ready, ["direct"], "a job of req stays on its ready list");
    let logged = read(&logs.error);
    let line = logged
        .lines()
        .find(|line| line.contains("kafka: delay request skipped: "))
        .unwrap_or_else(|| panic!("no skipped request logged:\n{logged}"));
    assert!(
        line.contains("the requests topic itself")
            && line.ends_with(" partition=0 offset=0 key=\"looping\""),
        "{line}"
    );
    assert!(
        logged.contains("covers the topic \"req\""),
        "warned at start:\n{logged}"
    );
}

/// Two requests of one key read together (produced before the daemon starts): the later one is
/// pushed, the earlier superseded (counted apart, not bad), and both offsets committed.
#[tokio::test(flavor = "multi_thread")]
async fn of_one_keys_requests_read_together_the_later_one_wins() {
    let broker = KafkaBroker::start();
    broker.create_topic("requests", 1);
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    produce_kafka(
        &broker,
        "requests",
        &[
            delay_request("order-42", "orders", 600_000, "in 10 min"),
            delay_request("order-42", "orders", 1_200_000, "in 20 min"),
            delay_request("order-7", "orders", 600_000, "other"),
        ],
    );
    let start = redis_ms(&mut redis).await;
    let kafka = "requests_topic = requests\n";
    let (daemon, logs, http) = serving_with(&server, "a", &with_kafka(&broker, kafka), "");
    wait_until_sync(Duration::from_secs(60), "the requests committed", || {
        kafka_client(&broker, &["committed", "delayer", "requests"]).trim() == "3"
    });
    let metrics = samples(&request(&http, "GET", "/metrics", &[], b"").body);
    stop(daemon, &logs);
    let info = client.get("order-42").await.unwrap();
    assert_eq!(info.body.as_deref(), Some(&b"in 20 min"[..]));
    let due: f64 = redis.zscore(JOB_POOL, "order-42").await.unwrap();
    let due_ms = (due * 1000.0) as i64;
    assert!(
        (start + 1_190_000..start + 1_260_000).contains(&due_ms),
        "due in 20 min: {} s after the start",
        (due_ms - start) / 1000
    );
    assert!(client.get("order-7").await.is_ok());
    assert_eq!(metrics["delayer_kafka_requests_total"], 2.0);
    assert_eq!(metrics["delayer_kafka_superseded_requests_total"], 1.0);
    assert_eq!(metrics["delayer_kafka_bad_requests_total"], 0.0);
}

/// Requests that wait while their offset stands still (Redis refuses the pushes: the offsets'
/// key holds a string) show in `/metrics` as the partition's lag, are warned of once they have
/// stood still 30 s, and make `/healthz` 503; once Redis takes them, they move again.
#[tokio::test(flavor = "multi_thread")]
async fn requests_that_stop_moving_are_counted_warned_of_and_fail_healthz() {
    let broker = KafkaBroker::start();
    broker.create_topic("requests", 1);
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let _: () = redis
        .set("delayer:kafka_offsets:delayer", "not a hash")
        .await
        .unwrap();
    let requests: Vec<Value> = (0..3)
        .map(|n| delay_request(&format!("r{n}"), "plain", 0, "b"))
        .collect();
    produce_kafka(&broker, "requests", &requests);
    let kafka = "requests_topic = requests\n";
    let (daemon, logs, http) = serving_with(&server, "a", &with_kafka(&broker, kafka), "");
    let lag = "delayer_kafka_requests_lag{partition=\"0\"}";
    wait_until_sync(Duration::from_secs(60), "the lag in /metrics", || {
        let metrics = samples(&request(&http, "GET", "/metrics", &[], b"").body);
        metrics.get(lag) == Some(&3.0)
    });
    wait_until_sync(Duration::from_secs(60), "the stall told", || {
        read(&logs.error)
            .contains("kafka: delay requests do not move: 3 wait in partition 0 of requests")
    });
    let health = request(&http, "GET", "/healthz", &[], b"");
    assert_eq!(health.status, 503, "{}", health.body);
    assert!(
        health
            .body
            .contains("Kafka delay requests do not move: 3 wait in partition 0 of requests"),
        "{}",
        health.body
    );
    let metrics = samples(&request(&http, "GET", "/metrics", &[], b"").body);
    assert!(metrics["delayer_kafka_requests_stalled_seconds"] >= 30.0);

    let _: () = redis.del("delayer:kafka_offsets:delayer").await.unwrap();
    for n in 0..3 {
        wait_on_ready_list(&redis, "plain", &format!("r{n}")).await;
    }
    wait_until_sync(Duration::from_secs(30), "the requests moving again", || {
        read(&logs.access).contains("kafka: delay requests move again")
            && request(&http, "GET", "/healthz", &[], b"").status == 200
    });
    let metrics = samples(&request(&http, "GET", "/metrics", &[], b"").body);
    assert_eq!(metrics[lag], 0.0);
    assert_eq!(metrics["delayer_kafka_requests_stalled_seconds"], 0.0);
    stop(daemon, &logs);
}
