//! Pausing a topic: its due jobs wait in the pool, whichever daemon looks and across restarts,
//! until it is resumed; then each moves once, in its own due order.

use crate::support;

use std::time::{Duration, Instant};

use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::redis::{self, AsyncCommands};
use delayer_client::{Client, Inspector};
use delayer_wire::keys::{
    JOB_POOL, PARKED_PREFIX, PARKED_SET_PREFIX, PAUSED_PREFIX, field, job_bucket, ready_queue,
};
use serde_json::json;
use support::http_client::{self, post, request};
use support::{DaemonSetup, RedisServer, add_jobs, delayer_succeeds, wait_for, wait_for_ready};

const JOBS: &str = "/delay-queue/api/jobs";

/// Unix seconds, as a legacy client scores a job (fractional here, to order jobs due 20 ms apart).
fn now() -> f64 {
    delayer_wire::time::unix_now()
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
    let inspector = Inspector::new(&client);
    let (daemons, _logs) = support::start_daemons(&server, &["one", "two", "three"], "");
    inspector.pause("held").await.unwrap();
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
    assert_eq!(inspector.resume("held").await.unwrap(), 200);
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
    let inspector = Inspector::new(&client);
    inspector.pause("t").await.unwrap();
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
    assert_eq!(inspector.resume("t").await.unwrap(), 0);
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
    let inspector = Inspector::new(&client);
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
    inspector.pause("t").await.unwrap();

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

    assert_eq!(inspector.resume("t").await.unwrap(), 1);
    let delivered = wait_for(Duration::from_secs(10), "the job delivered", || {
        let mut redis = redis.clone();
        async move { Some(ready(&mut redis, "t").await).filter(|ids| !ids.is_empty()) }
    })
    .await;
    assert_eq!(delivered, [job.id.to_string()], "delivered once");
    daemon.stop();
}

/// Jobs pushed already past due while their topic is paused move first at the resume, and all
/// parked jobs move in their own due order across the resume's calls (1,000 jobs a call). The
/// resume took parked ids at random, and made each due again at the time the move had found it
/// due: 100 jobs pushed past due came out after some 2,000 due later.
#[tokio::test]
async fn a_resume_moves_the_parked_jobs_in_their_own_due_order_across_its_calls() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let inspector = Inspector::new(&client);
    let (config, _logs) = server.daemon_config("daemon", "timer_interval = 100");
    let daemon = support::Daemon::start(&config);
    inspector.pause("held").await.unwrap();

    // 2,400 jobs falling due over the next 2 s, each parked when it is found due; then 100 pushed
    // due 100 s ago (a legacy client's, or a job requeued), parked after them.
    let start = now();
    let later: Vec<(String, f64)> = (0..2_400)
        .map(|index| {
            (
                format!("later-{index:04}"),
                start + 0.5 + 0.000_7 * index as f64,
            )
        })
        .collect();
    let past: Vec<(String, f64)> = (0..100)
        .map(|index| {
            (
                format!("past-{index:03}"),
                start - 100.0 + 0.01 * index as f64,
            )
        })
        .collect();
    let held = |jobs: &[(String, f64)]| {
        jobs.iter()
            .map(|(id, due)| (id.clone(), "held", *due))
            .collect::<Vec<_>>()
    };
    add_jobs(&mut redis, held(&later)).await;
    support::wait_parked(&redis, JOB_POOL, later.len()).await;
    add_jobs(&mut redis, held(&past)).await;
    support::wait_parked(&redis, JOB_POOL, later.len() + past.len()).await;

    assert_eq!(inspector.resume("held").await.unwrap(), 2_500);
    let mut moved: Vec<String> = wait_for_ready(&redis, "held", 2_500)
        .await
        .iter()
        .map(ToString::to_string)
        .collect();
    moved.reverse();
    let due_order: Vec<String> = past
        .iter()
        .chain(&later)
        .map(|(id, _)| id.clone())
        .collect();
    let ahead = support::ahead_of_earlier(&moved, &due_order);
    assert_eq!(ahead, 0, "jobs that came ahead of one due before them");
    assert_eq!(moved, due_order);
    let waiting: usize = redis.zcard(JOB_POOL).await.unwrap();
    assert_eq!(waiting, 0);
    assert_eq!(parked_marks(&mut redis, &due_order).await, 0);
    let left: usize = redis
        .exists(&[
            format!("{PAUSED_PREFIX}held"),
            format!("{PARKED_PREFIX}held"),
        ])
        .await
        .unwrap();
    assert_eq!(left, 0, "the pause and its parked jobs' key are gone");
    daemon.stop();
}

/// The due time a paused job is recorded with, for the resume's order: its own, kept when a
/// recheck parks it again, and replaced when a legacy client pushed it again meanwhile.
#[tokio::test]
async fn a_parked_job_keeps_its_first_due_time_at_a_recheck_and_takes_a_new_one_from_a_push() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let inspector = Inspector::new(&client);
    let (config, _logs) = server.daemon_config("daemon", "timer_interval = 100");
    let daemon = support::Daemon::start(&config);
    inspector.pause("held").await.unwrap();
    let parked_jobs = format!("{PARKED_PREFIX}held");
    let first = now() - 100.0;
    add_jobs(&mut redis, [("job-1".to_string(), "held", first)]).await;
    support::wait_parked(&redis, JOB_POOL, 1).await;
    let recorded: f64 = redis.zscore(&parked_jobs, "job-1").await.unwrap();
    assert_eq!(recorded, first);

    // A minute on, as at its recheck: still where it was parked, and due again.
    let recheck = now() - 0.5;
    let _: () = redis::pipe()
        .zadd(JOB_POOL, "job-1", recheck)
        .hset(job_bucket("job-1"), field::PARKED, recheck)
        .query_async(&mut redis)
        .await
        .unwrap();
    support::wait_parked(&redis, JOB_POOL, 1).await;
    let recorded: f64 = redis.zscore(&parked_jobs, "job-1").await.unwrap();
    assert_eq!(recorded, first, "parked again, with its first due time");

    // Pushed again by a legacy client, due now: its new due time is its own.
    let pushed = now() - 1.0;
    let _: () = redis.zadd(JOB_POOL, "job-1", pushed).await.unwrap();
    support::wait_parked(&redis, JOB_POOL, 1).await;
    let recorded: f64 = redis.zscore(&parked_jobs, "job-1").await.unwrap();
    assert_eq!(
        recorded, pushed,
        "parked with the due time it was pushed with"
    );

    assert_eq!(inspector.resume("held").await.unwrap(), 1);
    wait_for_ready(&redis, "held", 1).await;
    daemon.stop();
}

/// A job that a daemon of the previous build parked (in the set `delayer:parked:<topic>`, without
/// its due time) is not lost at a resume: it moves once, at the score it was parked at (a recheck
/// after it was found due), and its marks go.
#[tokio::test]
async fn a_job_an_earlier_build_parked_moves_once_at_its_recheck_after_the_resume() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let inspector = Inspector::new(&client);
    let (config, _logs) = server.daemon_config("daemon", "timer_interval = 100");
    let daemon = support::Daemon::start(&config);
    inspector.pause("held").await.unwrap();
    // As the previous build parked it 58 s ago: its recheck comes in 2 s.
    let recheck = now() + 2.0;
    let _: () = redis::pipe()
        .hset_multiple(
            job_bucket("old"),
            &[
                ("topic", "held"),
                ("body", "b"),
                (field::PARKED, &recheck.to_string()),
            ],
        )
        .zadd(JOB_POOL, "old", recheck)
        .sadd(format!("{PARKED_SET_PREFIX}held"), "old")
        .query_async(&mut redis)
        .await
        .unwrap();

    assert_eq!(
        inspector.resume("held").await.unwrap(),
        0,
        "its due time is not known"
    );
    assert!(
        ready(&mut redis, "held").await.is_empty(),
        "not before its recheck"
    );
    wait_for_ready(&redis, "held", 1).await;
    assert!(now() >= recheck);
    let (waiting, mark, sets): (usize, Option<String>, usize) = redis::pipe()
        .zcard(JOB_POOL)
        .hget(job_bucket("old"), field::PARKED)
        .exists(&[
            format!("{PARKED_SET_PREFIX}held"),
            format!("{PARKED_PREFIX}held"),
        ])
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!((waiting, mark, sets), (0, None, 0));
    assert_eq!(ready(&mut redis, "held").await, ["old"], "once");
    daemon.stop();
}
