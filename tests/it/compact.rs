//! The compact layout with real daemons (see `delayer_wire::compact`): jobs our pushes wrote
//! compact are staged and moved by the daemons, each once, never early by Redis's clock, popped
//! by a legacy client as any job; compact jobs that fell due while no daemon ran are moved too; a
//! daemon beside legacy clients only writes no key of the layout.

use crate::support;

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::{Client, NewPush, Settings};
use support::legacy_client::{self, Message};
use support::{
    RedisServer, beat_as_stager, redis_now, start_daemons, wait_for_redis_time, wait_for_stager,
    wait_until_pushers_see_a_stager,
};

const INDEX: &str = "delayer:compact:index";

/// A client whose pushes wait compact from `after` on (the default, 124 s, would make a test
/// wait two minutes).
async fn client(server: &RedisServer, after: Duration) -> Client {
    let settings = Settings {
        compact_after: Some(after),
        ..Settings::default()
    };
    Client::connect_with(server.info(), settings).await.unwrap()
}

fn unix(time: SystemTime) -> f64 {
    time.duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

/// Pops `count` jobs of `topics` as the PHP client does, each with Redis's time when popped.
async fn pop_all(
    redis: &mut MultiplexedConnection,
    topics: &[&str],
    count: usize,
) -> HashMap<String, (Message, f64)> {
    let mut popped: HashMap<String, (Message, f64)> = HashMap::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while popped.len() < count {
        assert!(
            std::time::Instant::now() < deadline,
            "{} of {count} popped",
            popped.len()
        );
        let mut any = false;
        for topic in topics {
            while let Some(message) = legacy_client::pop(redis, topic).await.unwrap() {
                let at = redis_now(redis).await;
                let id = message.id.clone();
                assert!(
                    popped.insert(id.clone(), (message, at)).is_none(),
                    "{id} twice"
                );
                any = true;
            }
        }
        if !any {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    popped
}

#[tokio::test]
async fn compact_jobs_move_on_time_once_and_legacy_clients_pop_them() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    beat_as_stager(&mut redis).await;
    let client = client(&server, Duration::from_secs(2)).await;
    let topics = ["a", "b", "c"];
    let start = SystemTime::now();
    let jobs: Vec<NewPush> = (0..300)
        .map(|n| {
            let due = start + Duration::from_millis(2_500 + n * 10);
            NewPush::new(topics[n as usize % 3], format!("body {n}"))
                .id(format!("job-{n}"))
                .at(due)
        })
        .collect();
    client.push_many(jobs).await.unwrap();
    let compact: usize = redis.hlen(INDEX).await.unwrap();
    assert_eq!(compact, 300, "every job waits compact");

    let (daemons, _logs) = start_daemons(&server, &["one", "two"], "");
    let popped = pop_all(&mut redis, &topics, 300).await;
    for n in 0..300u64 {
        let (message, at) = &popped[&format!("job-{n}")];
        let due = unix(start + Duration::from_millis(2_500 + n * 10));
        assert_eq!(message.body, format!("body {n}"));
        assert!(*at >= due - 0.001, "job-{n} popped {:.3} s early", due - at);
    }
    let left: usize = redis.hlen(INDEX).await.unwrap();
    let chunks: usize = redis.zcard("delayer:compact:chunks").await.unwrap();
    assert_eq!((left, chunks), (0, 0));
    let stagers: usize = redis.zcard("delayer:compact:stagers").await.unwrap();
    assert!(stagers >= 2, "the daemons tell pushers they stage");
    for daemon in daemons {
        daemon.stop();
    }
}

#[tokio::test]
async fn compact_jobs_that_fell_due_while_no_daemon_ran_are_moved_when_one_starts() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    beat_as_stager(&mut redis).await;
    let client = client(&server, Duration::from_millis(500)).await;
    // 1.5 s to spare: pushed later than that on a busy machine, a job would not wait compact.
    let due = SystemTime::now() + Duration::from_millis(2_000);
    let jobs: Vec<NewPush> = (0..2_000)
        .map(|n| NewPush::new("t", format!("{n}")).id(format!("{n}")).at(due))
        .collect();
    client.push_many(jobs).await.unwrap();
    let compact: usize = redis.hlen(INDEX).await.unwrap();
    assert_eq!(compact, 2_000);
    // Every job falls due before a daemon runs.
    wait_for_redis_time(&redis, unix(due)).await;
    let (daemons, _logs) = start_daemons(&server, &["one"], "");
    let popped = pop_all(&mut redis, &["t"], 2_000).await;
    assert_eq!(popped.len(), 2_000);
    for daemon in daemons {
        daemon.stop();
    }
}

#[tokio::test]
async fn a_daemon_beside_legacy_clients_only_writes_no_key_of_the_layout() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemons, logs) = start_daemons(&server, &["one"], "");
    let message = Message {
        id: "php".into(),
        topic: "t".into(),
        body: "b".into(),
    };
    legacy_client::push(&mut redis, &message, 1).await.unwrap();
    let popped = pop_all(&mut redis, &["t"], 1).await;
    assert!(popped.contains_key("php"));
    // Two looks of the stager (one a second) went by.
    std::thread::sleep(Duration::from_millis(2_100));
    let keys: Vec<String> = redis.keys("delayer:compact:*").await.unwrap();
    assert!(keys.is_empty(), "{keys:?}");
    assert!(!support::read(&logs[0].error).contains("compact"));
    for daemon in daemons {
        daemon.stop();
    }
}

#[tokio::test]
async fn going_back_writes_every_compact_job_in_the_legacy_form() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    beat_as_stager(&mut redis).await;
    let client = client(&server, delayer_client::DEFAULT_COMPACT_AFTER).await;
    let far = SystemTime::now() + Duration::from_secs(7_200);
    let jobs: Vec<NewPush> = (0..100)
        .map(|n| NewPush::new("t", format!("{n}")).id(format!("{n}")).at(far))
        .collect();
    client.push_many(jobs).await.unwrap();
    let compact: usize = redis.hlen(INDEX).await.unwrap();
    assert_eq!(compact, 100);
    // Step 1: compact pushes off; `delayer push` then writes the legacy form.
    let config = server.write_file("off.conf", &server.config_text("compact_pushes = false"));
    let id = support::delayer_succeeds(&config, &["push", "t", "b", "--delay", "3600"]);
    let bucket: bool = redis
        .exists(delayer_wire::keys::job_bucket(id.trim()))
        .await
        .unwrap();
    assert!(bucket, "pushed in the legacy form");
    // Step 2: every compact job in the legacy form.
    let said = support::delayer_succeeds(&config, &["compact", "expand"]);
    assert!(said.starts_with("100 compact jobs written"), "{said}");
    let (compact, pooled): (usize, usize) = (
        redis.hlen(INDEX).await.unwrap(),
        redis.zcard(delayer_wire::keys::JOB_POOL).await.unwrap(),
    );
    assert_eq!((compact, pooled), (0, 101));
    let job = client.get("7").await.unwrap();
    assert_eq!(job.body.as_deref(), Some(&b"7"[..]));
    assert_eq!(job.state, delayer_client::State::Waiting);
}

#[tokio::test]
async fn http_adds_wait_compact_and_get_and_remove_find_them() {
    use serde_json::json;
    use support::http_client::{post, serving};
    const JOBS: &str = "/delay-queue/api/jobs";
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "api", "");
    let add = |id: &str| {
        let added = post(
            &http,
            &format!("{JOBS}/add"),
            &json!({"id": id, "topic": "t", "delay": 3600, "body": "b"}),
        );
        assert_eq!(added.status, 200, "{}", added.body);
    };
    // The first add asks for the layout; the daemon then stages and tells pushers so.
    add("first");
    wait_until_pushers_see_a_stager(&redis).await;
    add("second");
    let compact: Vec<String> = redis.hkeys(INDEX).await.unwrap();
    assert_eq!(
        compact,
        ["second"],
        "the first add was legacy, the second compact"
    );
    let got = post(&http, &format!("{JOBS}/get"), &json!({"job_id": "second"})).json();
    assert_eq!(got["data"]["body"], "b", "{got}");
    assert_eq!(got["data"]["topic"], "t");
    let removed = post(
        &http,
        &format!("{JOBS}/remove"),
        &json!({"job_id": "second"}),
    );
    assert_eq!(removed.status, 200, "{}", removed.body);
    let compact: usize = redis.hlen(INDEX).await.unwrap();
    assert_eq!(compact, 0);
    let got = post(&http, &format!("{JOBS}/get"), &json!({"job_id": "second"})).json();
    assert!(got["data"].is_null() || got["code"] != 0, "{got}");
    daemon.stop();
}

#[tokio::test]
async fn a_compact_backlog_leaves_in_due_order() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    beat_as_stager(&mut redis).await;
    let client = client(&server, Duration::from_millis(500)).await;
    // 3,000 jobs due within 2 s, pushed out of due order: each chunk of one window holds due
    // times from all over it, and staging takes a few hundred entries a call.
    const JOBS: u64 = 3_000;
    let start = SystemTime::now() + Duration::from_millis(2_500);
    let due_ms = |n: u64| (n * 7_919) % JOBS * 2_000 / JOBS;
    let jobs: Vec<NewPush> = (0..JOBS)
        .map(|n| {
            NewPush::new("t", due_ms(n).to_string())
                .id(format!("j{n}"))
                .at(start + Duration::from_millis(due_ms(n)))
        })
        .collect();
    client.push_many(jobs).await.unwrap();
    let compact: usize = redis.hlen(INDEX).await.unwrap();
    assert_eq!(compact, JOBS as usize);
    wait_for_redis_time(&redis, unix(start) + 2.0).await;

    let (daemons, _logs) = start_daemons(&server, &["one"], "");
    let mut popped: Vec<u64> = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while popped.len() < JOBS as usize {
        assert!(
            std::time::Instant::now() < deadline,
            "{} popped",
            popped.len()
        );
        match legacy_client::pop(&mut redis, "t").await.unwrap() {
            Some(message) => popped.push(message.body.parse().unwrap()),
            None => tokio::time::sleep(Duration::from_millis(2)).await,
        }
    }
    let out_of_order: Vec<&[u64]> = popped.windows(2).filter(|pair| pair[1] < pair[0]).collect();
    assert!(
        out_of_order.is_empty(),
        "{} jobs popped before one due sooner (due ms, in popped order: {:?}, ...)",
        out_of_order.len(),
        &out_of_order[..out_of_order.len().min(5)]
    );
    for daemon in daemons {
        daemon.stop();
    }
}

#[tokio::test]
async fn the_daemon_logs_and_counts_compact_jobs_it_drops() {
    use support::http_client::{request, samples, serving};
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    beat_as_stager(&mut redis).await;
    let settings = Settings {
        compact_after: Some(Duration::from_millis(500)),
        ready_max_lifetime: Duration::from_secs(1),
        ..Settings::default()
    };
    let client = Client::connect_with(server.info(), settings).await.unwrap();
    client
        .push("t", "b")
        .delay(Duration::from_secs(1))
        .await
        .unwrap();
    // Due in 1 s, its data kept 1 s more: expired by the time a daemon first runs.
    let pushed = redis_now(&mut redis).await;
    wait_for_redis_time(&redis, pushed + 3.0).await;
    let (daemon, logs, http) = serving(&server, "one", "");
    logs.wait_for_line("compact jobs dropped: their data expired");
    let metrics = request(&http, "GET", "/metrics", &[], b"").body;
    let figures = samples(&metrics);
    assert_eq!(
        figures["delayer_compact_jobs_dropped_total{reason=\"expired\"}"], 1.0,
        "{metrics}"
    );
    assert_eq!(
        figures["delayer_compact_jobs_dropped_total{reason=\"replaced\"}"],
        0.0
    );
    daemon.stop();
}

#[tokio::test]
async fn a_daemon_stages_within_a_moment_of_the_first_push_that_wants_it() {
    // Two daemons on two Redis servers: a push that finds no daemon staging leaves `wanted`, and
    // each daemon beats soon after, not at its next second.
    let servers = [RedisServer::start(), RedisServer::start()];
    let mut started = Vec::new();
    for server in &servers {
        let (daemons, logs) = start_daemons(server, &["one"], "");
        logs[0].wait_for_line("Service started successfully");
        started.push(daemons);
    }
    for server in &servers {
        let mut redis = server.connect().await;
        let client = client(server, Duration::from_secs(60)).await;
        client
            .push("t", "b")
            .delay(Duration::from_secs(3_600))
            .await
            .unwrap();
        let wanted_at = std::time::Instant::now();
        wait_for_stager(&redis).await;
        let waited = wanted_at.elapsed();
        assert!(
            waited < Duration::from_millis(400),
            "the daemon staged {waited:?} after the first push that wanted it"
        );
        wait_until_pushers_see_a_stager(&redis).await;
        let second = client
            .push("t", "b")
            .delay(Duration::from_secs(3_600))
            .await
            .unwrap();
        let compact: bool = redis.hexists(INDEX, second.as_bytes()).await.unwrap();
        assert!(compact, "the next push waits compact");
    }
    for daemons in started {
        for daemon in daemons {
            daemon.stop();
        }
    }
}
