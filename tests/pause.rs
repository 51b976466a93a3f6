//! Pausing a topic: its due jobs wait in the pool, whichever daemon looks and across restarts,
//! until it is resumed; then each moves once, in the order it fell due.

mod support;

use std::time::{Duration, Instant};

use delayer_client::Client;
use delayer_client::keys::{
    JOB_POOL, PARKED_PREFIX, PAUSED_PREFIX, field, job_bucket, ready_queue,
};
use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use serde_json::json;
use support::http_client::{self, post, request};
use support::{DaemonSetup, RedisServer, add_jobs, delayer_succeeds, wait_for, wait_for_ready};

const JOBS: &str = "/delay-queue/api/jobs";

/// Unix seconds, as a legacy client scores a job (fractional here, to order jobs due 20 ms apart).
fn now() -> f64 {
    delayer_client::time::unix_now()
}

async fn ready(redis: &mut MultiplexedConnection, topic: &str) -> Vec<String> {
    redis.lrange(ready_queue(topic), 0, -1).await.unwrap()
}

async fn parked_marks(redis: &mut MultiplexedConnection, ids: &[String]) -> usize {
    let mut marked = 0;
    for id in ids {
        let parked: Option<String> = redis.hget(job_bucket(id), field::PARKED).await.unwrap();
        marked += usize::from(parked.is_some());
    }
    marked
}

#[tokio::test]
async fn three_daemons_move_nothing_of_a_paused_topic_and_after_its_resume_each_job_once_in_due_order()
 {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let (daemons, _logs) = support::start_daemons(&server, &["one", "two", "three"], "");
    client.pause("held").await.unwrap();
    let paused_at = Instant::now();

    // Due over the next 4 s, 20 ms apart, pushed as the legacy clients push (no `due` field).
    let start = now();
    let ids =
        |topic: &str| -> Vec<String> { (0..200).map(|i| format!("{topic}-{i:03}")).collect() };
    let (held, free) = (ids("held"), ids("free"));
    let jobs = held
        .iter()
        .map(|id| (id.clone(), "held"))
        .chain(free.iter().map(|id| (id.clone(), "free")))
        .map(|(id, topic)| {
            let index: f64 = id[id.len() - 3..].parse().unwrap();
            (id, topic, start + 0.02 * index)
        });
    add_jobs(&mut redis, jobs).await;

    wait_for_ready(&redis, "free", 200).await;
    // Paused for 5 s while every held job falls due: none of it may move, by any daemon.
    while paused_at.elapsed() < Duration::from_secs(5) {
        assert_eq!(ready(&mut redis, "held").await, Vec::<String>::new());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let waiting: usize = redis.zcard(JOB_POOL).await.unwrap();
    assert_eq!(waiting, 200, "every held job still waits in the pool");
    assert_eq!(parked_marks(&mut redis, &held).await, 200);

    // At once: a look at them without the resume would come only a minute after they were parked.
    assert_eq!(client.resume("held").await.unwrap(), 200);
    wait_for_ready(&redis, "held", 200).await;

    // LPUSHed: the first due is the last element, the first a consumer takes.
    let mut moved = ready(&mut redis, "held").await;
    moved.reverse();
    assert_eq!(moved, held, "each once, in the order they fell due");
    assert_eq!(ready(&mut redis, "free").await.len(), 200);
    let waiting: usize = redis.zcard(JOB_POOL).await.unwrap();
    assert_eq!(waiting, 0);
    assert_eq!(parked_marks(&mut redis, &held).await, 0);
    let left: bool = redis
        .exists(&[
            format!("{PAUSED_PREFIX}held"),
            format!("{PARKED_PREFIX}held"),
        ])
        .await
        .unwrap();
    assert!(!left, "the pause and its parked set are gone");
    for daemon in daemons {
        daemon.stop();
    }
}

#[tokio::test]
async fn a_pause_outlasts_a_restart_and_the_cli_stats_http_and_metrics_know_it() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, logs, http) = http_client::serving(&server, "first", "");
    let (config, _) = server.daemon_config("cli", "");

    let said = delayer_succeeds(&config, &["pause", "held"]);
    assert!(said.contains("paused topic held"), "{said}");
    let stats: serde_json::Value =
        serde_json::from_str(&delayer_succeeds(&config, &["stats", "--json"])).unwrap();
    let row = stats["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["topic"] == "held")
        .expect("a paused topic is listed before its first job");
    assert_eq!(row["paused"], true);

    add_jobs(&mut redis, [("job-1".to_string(), "held", now() - 1.0)]).await;
    logs.wait_for_line("Topic held is paused: 1 of its due jobs wait in the pool");
    let metrics = request(&http, "GET", "/metrics", &[], b"");
    wait_for(Duration::from_secs(10), "the pause in /metrics", || {
        let metrics = request(&http, "GET", "/metrics", &[], b"").body;
        async move {
            metrics
                .contains("delayer_topic_paused{topic=\"held\"} 1")
                .then_some(())
        }
    })
    .await;
    assert_eq!(metrics.status, 200);
    daemon.stop();

    // Another daemon, started afresh, leaves the next one too.
    let (daemon, logs, http) = http_client::serving(&server, "second", "");
    add_jobs(&mut redis, [("job-2".to_string(), "held", now() - 0.5)]).await;
    logs.wait_for_line("Topic held is paused: 1 of its due jobs wait in the pool");
    assert!(ready(&mut redis, "held").await.is_empty());
    let table = delayer_succeeds(&config, &["stats"]);
    assert!(
        table
            .lines()
            .any(|line| line.starts_with("held") && line.ends_with("paused")),
        "{table}"
    );

    let answer = post(&http, &format!("{JOBS}/resume"), &json!({"topic": "held"})).json();
    assert_eq!(answer["data"]["moved"], 2, "{answer}");
    let mut moved = wait_for_ready(&redis, "held", 2).await;
    moved.reverse();
    assert_eq!(moved, ["job-1", "job-2"], "in the order they fell due");
    logs.wait_for_line("Topic held moves again: it was resumed");
    let said = delayer_succeeds(&config, &["resume", "held"]);
    assert!(said.contains("topic held was not paused"), "{said}");
    daemon.stop();
}

#[tokio::test]
async fn a_job_pushed_again_while_its_topic_is_paused_keeps_its_new_due_time() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    client.pause("t").await.unwrap();
    let (config, _logs) = server.daemon_config("daemon", "timer_interval = 100");
    let daemon = support::Daemon::start(&config);
    add_jobs(&mut redis, [("job-1".to_string(), "t", now() - 1.0)]).await;
    wait_for(Duration::from_secs(10), "job-1 parked", || {
        let mut redis = redis.clone();
        async move {
            let parked: Option<String> = redis
                .hget(job_bucket("job-1"), field::PARKED)
                .await
                .unwrap();
            parked.map(|_| ())
        }
    })
    .await;

    // Pushed again by a legacy client, due in an hour: the resume must not make it due now.
    let later = now() + 3600.0;
    let _: () = redis.zadd(JOB_POOL, "job-1", later).await.unwrap();
    assert_eq!(client.resume("t").await.unwrap(), 0);
    let score: f64 = redis.zscore(JOB_POOL, "job-1").await.unwrap();
    assert_eq!(score, later);
    assert_eq!(parked_marks(&mut redis, &["job-1".to_string()]).await, 0);
    assert!(ready(&mut redis, "t").await.is_empty());
    daemon.stop();
}

#[tokio::test]
async fn a_reservation_that_lapses_while_its_topic_is_paused_waits_parked_until_the_resume() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let (config, _logs) = server.daemon_config("daemon", "timer_interval = 100");
    let daemon = support::Daemon::start(&config);
    let id = client.push("t", "body").await.unwrap().to_string();
    let job = wait_for(Duration::from_secs(10), "the job reserved", || {
        let client = client.clone();
        async move {
            client
                .reserve(&["t"], Duration::from_secs(1), Duration::ZERO)
                .await
                .unwrap()
        }
    })
    .await;
    client.pause("t").await.unwrap();

    // Its time to run passes: back to the pool, where the pause holds it.
    wait_for(Duration::from_secs(10), "the lapsed job parked", || {
        let mut redis = redis.clone();
        let id = id.clone();
        async move {
            let parked: Option<String> = redis.hget(job_bucket(&id), field::PARKED).await.unwrap();
            parked.map(|_| ())
        }
    })
    .await;
    assert!(ready(&mut redis, "t").await.is_empty(), "not delivered");
    let info = client.get(&id).await.unwrap();
    assert_eq!(info.attempts, 1, "the lapsed attempt counted");

    assert_eq!(client.resume("t").await.unwrap(), 1);
    let delivered = wait_for(Duration::from_secs(10), "the job delivered", || {
        let mut redis = redis.clone();
        async move { Some(ready(&mut redis, "t").await).filter(|ids| !ids.is_empty()) }
    })
    .await;
    assert_eq!(delivered, [job.id.to_string()], "delivered once");
    daemon.stop();
}
