//! A backlog of due jobs drained through one daemon, for the sinks' benches (Kafka, webhooks,
//! QStash's messages): its seconds, and Redis's and the daemon's CPU; beside the ready lists,
//! where one client reserves 500 at a time and acks them, doing the same Redis work.

use std::time::{Duration, Instant};

use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::{Client, Topic};

use delayer_wire::keys::{JOB_POOL, job_bucket};

use super::support::{Daemon, DaemonSetup, RedisServer, fill_backlog, left_in_redis};
use super::{TOPICS, clock_ticks_per_second, cpu_ticks, fresh, stop};

/// One drain's figures.
pub struct Run {
    pub seconds: f64,
    /// CPU seconds.
    pub redis_cpu: f64,
    pub daemon_cpu: f64,
}

/// What a drain's backlog is.
pub enum Backlog<'a> {
    /// One-byte jobs over [`TOPICS`].
    Jobs,
    /// QStash messages to this URL, as the publish API writes them (topic `qstash`).
    Messages(&'a str),
}

/// Drains `jobs` due jobs of `backlog` through a daemon with `sink` lines (`None`: the ready
/// lists, and a client reserving and acking), until Redis holds none.
pub async fn drain(
    server: &RedisServer,
    jobs: usize,
    sink: Option<&str>,
    backlog: Backlog<'_>,
) -> Run {
    let mut redis = fresh(server).await;
    let topics: &[&str] = match backlog {
        Backlog::Jobs => {
            fill_backlog(&mut redis, jobs, &TOPICS).await;
            &TOPICS
        }
        Backlog::Messages(url) => {
            fill_messages(&mut redis, jobs, url).await;
            &["qstash"]
        }
    };
    let ticks = clock_ticks_per_second();
    let redis_before = cpu_ticks(server.pid());
    let (config, _) = server.daemon_config("bench-drain", sink.unwrap_or("timer_interval = 100"));
    let started = Instant::now();
    let mut daemon = Daemon::start(&config);
    let consuming = async {
        if sink.is_some() {
            return;
        }
        let client = Client::connect(server.info()).await.unwrap();
        let reserved_from: Vec<Topic> = topics.iter().map(|topic| Topic::from(*topic)).collect();
        while left(&redis, topics).await > 0 {
            let jobs = client
                .reserve_many(
                    &reserved_from,
                    Duration::from_secs(30),
                    500,
                    Duration::from_millis(100),
                )
                .await
                .unwrap();
            client.ack_many(&jobs).await;
        }
    };
    let waiting = async {
        while left(&redis, topics).await > 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    tokio::join!(consuming, waiting);
    let run = Run {
        seconds: started.elapsed().as_secs_f64(),
        redis_cpu: (cpu_ticks(server.pid()) - redis_before) as f64 / ticks,
        daemon_cpu: cpu_ticks(daemon.pid()) as f64 / ticks,
    };
    stop(&mut daemon);
    run
}

/// The jobs of `topics` Redis still holds: waiting, ready, reserved.
pub async fn left(redis: &MultiplexedConnection, topics: &[&str]) -> usize {
    left_in_redis(&mut redis.clone(), topics).await
}

/// Writes `count` QStash messages to `url`, due 10 s ago, as the publish API writes them: a job of
/// topic `qstash` whose body is the message.
async fn fill_messages(redis: &mut MultiplexedConnection, count: usize, url: &str) {
    let now_ms = delayer_wire::time::to_unix_ms(std::time::SystemTime::now());
    let message = serde_json::json!({
        "url": url, "method": "POST", "body": "eA==", "retries": 3,
        "createdAt": now_ms, "notBefore": now_ms,
    })
    .to_string();
    let due = (now_ms / 1000 - 10) as f64;
    for start in (0..count).step_by(10_000) {
        let mut pipe = delayer_client::redis::pipe();
        for n in start..count.min(start + 10_000) {
            let id = format!("msg_{n:07}");
            pipe.hset_multiple(job_bucket(&id), &[("topic", "qstash"), ("body", &message)])
                .ignore()
                .zadd(JOB_POOL, &id, due)
                .ignore();
        }
        let _: () = pipe.query_async(redis).await.unwrap();
    }
}
