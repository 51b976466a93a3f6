//! Hosts whose clocks are off: a daemon 10 s fast beside one 10 s slow (Debian's libfaketime),
//! and a Worker 10 s slow. Redis's clock decides, so no job moves early, and a job whose consumer
//! acks or touches in time is delivered once.

use crate::support;

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::redis::{self, AsyncCommands};
use delayer_client::{Client, Worker};
use delayer_wire::keys::{JOB_POOL, RESERVED, job_bucket, ready_queue};
use serde_json::json;
use support::http_client::{http_address, post, request};
use support::legacy_client::{self, Message};
use support::{Daemon, DaemonSetup, RedisServer, read, shift_clock, test_name, wait_for};

const JOBS: &str = "/delay-queue/api/jobs";
/// How far the hosts' clocks are off.
const FAST: &str = "+10s";
const SLOW: &str = "-10s";

/// Now by Redis's clock, in unix seconds.
async fn redis_now(redis: &mut MultiplexedConnection) -> f64 {
    let (seconds, micros): (f64, f64) = redis::cmd("TIME").query_async(redis).await.unwrap();
    seconds + micros / 1e6
}

/// A daemon whose host clock is `offset` off; with `http`, it serves the job API too (on a port of
/// its own), and its address comes back.
fn daemon(server: &RedisServer, name: &str, offset: &str, http: bool) -> (Daemon, Option<String>) {
    let (config, logs) = server.daemon_config(name, "timer_interval = 100");
    if http {
        let text = format!("{}\n[http]\nlisten = 127.0.0.1:0\n", read(&config));
        std::fs::write(&config, text).unwrap();
    }
    let daemon = Daemon::start_with_clock(&config, offset);
    logs.wait_for_line("Service started successfully");
    (daemon, http.then(|| http_address(&logs)))
}

/// Polls topic `t`'s ready list until `count` ids are on it; returns when each was first seen, by
/// Redis's clock (a move is seen at most a poll after it happened).
async fn arrivals(redis: &mut MultiplexedConnection, count: usize) -> HashMap<String, f64> {
    let mut seen = HashMap::new();
    let give_up = std::time::Instant::now() + Duration::from_secs(15);
    while seen.len() < count {
        assert!(std::time::Instant::now() < give_up, "moved only {seen:?}");
        let (time, ids): ((f64, f64), Vec<String>) = redis::pipe()
            .cmd("TIME")
            .lrange(ready_queue("t"), 0, -1)
            .query_async(redis)
            .await
            .unwrap();
        for id in ids {
            seen.entry(id).or_insert(time.0 + time.1 / 1e6);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    seen
}

#[tokio::test]
async fn daemons_10_s_fast_and_slow_move_nothing_early_and_keep_reservations() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (_fast, _) = daemon(&server, "fast", FAST, false);
    let (_slow, http) = daemon(&server, "slow", SLOW, true);
    let http = http.unwrap();

    // Jobs due in 2 s: by the slow host's API (its delay counts from Redis's now), and by a
    // legacy client that stamps Redis's time (its own host's clock is right).
    let mut due = HashMap::new();
    for index in 0..5 {
        let id = format!("api-{index}");
        let earliest = redis_now(&mut redis).await + 2.0;
        let body = json!({"id": id, "topic": "t", "delay": 2, "body": "b"});
        let added = post(&http, &format!("{JOBS}/add"), &body);
        assert_eq!(added.status, 200, "{}", added.body);
        due.insert(id, earliest);
    }
    for index in 0..5 {
        let message = Message {
            id: format!("legacy-{index}"),
            topic: "t".into(),
            body: "b".into(),
        };
        let at = redis_now(&mut redis).await + 2.0;
        let _: () = redis::pipe()
            .atomic()
            .hset_multiple(job_bucket(&message.id), &[("topic", "t"), ("body", "b")])
            .zadd(JOB_POOL, &message.id, at)
            .query_async(&mut redis)
            .await
            .unwrap();
        due.insert(message.id, at);
    }

    let seen = arrivals(&mut redis, due.len()).await;

    for (id, at) in &due {
        let moved = seen[id];
        assert!(moved >= *at, "{id} moved {:.3} s early", at - moved);
        assert!(moved < at + 1.0, "{id} moved {:.3} s late", moved - at);
    }

    // A reservation by the slow host, for 5 s: the fast daemon must not end it at once.
    let reserved = post(
        &http,
        &format!("{JOBS}/reserve"),
        &json!({"topic": "t", "ttr": 5}),
    )
    .json();
    let (id, attempt) = (
        reserved["data"]["id"].clone(),
        reserved["data"]["attempt"].clone(),
    );
    assert_eq!(attempt, 1, "{reserved}");
    // A job due in 2 s: once it moved, both daemons have looked at the reservations since.
    legacy_client::push(
        &mut redis,
        &Message {
            id: "marker".into(),
            topic: "marker".into(),
            body: "b".into(),
        },
        2,
    )
    .await
    .unwrap();
    support::wait_for_ready(&redis, "marker", 1).await;
    let deadline: Option<f64> = redis.zscore(RESERVED, id.as_str().unwrap()).await.unwrap();
    assert!(deadline.is_some(), "the reservation of {id} lapsed early");
    let acked = post(
        &http,
        &format!("{JOBS}/ack"),
        &json!({"job_id": id, "attempt": attempt}),
    );
    assert_eq!(acked.status, 200, "{}", acked.body);
    assert_eq!(acked.json()["data"]["acked"], "done");
}

/// The Worker's side: `worker_on_a_slow_host` below, run in a process of its own whose clock is
/// 10 s slow, beside a daemon 10 s fast. Each job takes 2.5 times its time to run, kept alive
/// by the Worker's touches: it must run once.
#[tokio::test]
async fn a_worker_10_s_slow_beside_a_daemon_10_s_fast_runs_each_job_once() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (_fast, _) = daemon(&server, "fast", FAST, false);
    let client = Client::connect(server.info()).await.unwrap();
    for index in 0..4 {
        client
            .push("t", "b")
            .id(format!("job-{index}"))
            .send()
            .await
            .unwrap();
    }

    let mut worker = Command::new(std::env::current_exe().unwrap());
    worker
        .args([
            "--exact",
            &test_name(module_path!(), "worker_on_a_slow_host"),
            "--ignored",
            "--nocapture",
        ])
        .env("DELAYER_TEST_REDIS", server.socket());
    shift_clock(&mut worker, SLOW);
    let status = worker.status().unwrap();
    assert!(status.success());

    let mut started: Vec<String> = redis.lrange("started", 0, -1).await.unwrap();
    started.sort();
    assert_eq!(started, ["job-0", "job-1", "job-2", "job-3"], "each once");
    let left: usize = redis.zcard(RESERVED).await.unwrap();
    assert_eq!(left, 0);
}

/// Runs in the process `a_worker_10_s_slow_...` starts (and does nothing on its own): a Worker
/// with a 2 s time to run whose handler takes 5 s, noting each start in the list `started`, until
/// it has run 4 jobs.
#[tokio::test]
#[ignore = "run by a_worker_10_s_slow_beside_a_daemon_10_s_fast_runs_each_job_once"]
async fn worker_on_a_slow_host() {
    let Ok(socket) = std::env::var("DELAYER_TEST_REDIS") else {
        return;
    };
    let info = format!("redis+unix://{socket}");
    let client = Client::connect(info.as_str()).await.unwrap();
    let redis = redis::Client::open(info.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let handler_redis = redis.clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = Worker::new(client)
        .ttr(Duration::from_secs(2))
        .concurrency(4)
        .handle("t", move |job| {
            let mut redis = handler_redis.clone();
            async move {
                let _: () = redis.rpush("started", &job.id).await.unwrap();
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok::<(), String>(())
            }
        });
    let running = tokio::spawn(worker.run(async move {
        let _ = stopped.await;
    }));
    wait_for(Duration::from_secs(20), "4 jobs to be done", || {
        let mut redis = redis.clone();
        async move {
            let started: usize = redis.llen("started").await.unwrap();
            let reserved: usize = redis.zcard(RESERVED).await.unwrap();
            let ready: usize = redis.llen(ready_queue("t")).await.unwrap();
            let waiting: usize = redis.zcard(JOB_POOL).await.unwrap();
            (started >= 4 && reserved + ready + waiting == 0).then_some(())
        }
    })
    .await;
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_step_of_the_host_clock_does_not_make_a_healthy_daemon_look_stalled() {
    let server = RedisServer::start();
    let clock = support::SteppedClock::new(server.dir());
    let (config, logs) = server.daemon_config("stepped", "timer_interval = 30000");
    let text = format!("{}\n[http]\nlisten = 127.0.0.1:0\n", read(&config));
    std::fs::write(&config, text).unwrap();
    let _daemon = Daemon::start_with_stepped_clock(&config, &clock);
    logs.wait_for_line("Service started successfully");
    let http = http_address(&logs);
    let health = || request(&http, "GET", "/healthz", &[], b"");
    wait_for(Duration::from_secs(10), "a first look", || async {
        (health().status == 200).then_some(())
    })
    .await;

    // An hour ahead, as after a VM resumed from a snapshot: the last look was a moment ago all
    // the same (the next is up to 30 s away). The step reaches the daemon within a second.
    clock.step_to("+1h");
    let until = std::time::Instant::now() + Duration::from_secs(3);
    while std::time::Instant::now() < until {
        let answer = health();
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
}
