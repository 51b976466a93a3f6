//! A backlog of due jobs drained through one daemon, for the sinks' benches (Kafka, webhooks):
//! its seconds, and Redis's and the daemon's CPU; beside the ready lists, where one client
//! reserves 500 at a time and acks them, doing the same Redis work.

use std::time::{Duration, Instant};

use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::{Client, Topic};

use super::support::{Daemon, DaemonSetup, RedisServer, fill_backlog, left_in_redis};
use super::{TOPICS, clock_ticks_per_second, cpu_ticks, fresh, stop};

/// One drain's figures.
pub struct Run {
    pub seconds: f64,
    /// CPU seconds.
    pub redis_cpu: f64,
    pub daemon_cpu: f64,
}

/// Drains `jobs` due jobs over [`TOPICS`] through a daemon with `sink` lines (`None`: the ready
/// lists, and a client reserving and acking), until Redis holds none.
pub async fn drain(server: &RedisServer, jobs: usize, sink: Option<&str>) -> Run {
    let mut redis = fresh(server).await;
    fill_backlog(&mut redis, jobs, &TOPICS).await;
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
        let topics: Vec<Topic> = TOPICS.iter().map(|topic| Topic::from(*topic)).collect();
        while left(&redis).await > 0 {
            let jobs = client
                .reserve_many(
                    &topics,
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
        while left(&redis).await > 0 {
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

/// The jobs of [`TOPICS`] Redis still holds: waiting, ready, reserved.
pub async fn left(redis: &MultiplexedConnection) -> usize {
    left_in_redis(&mut redis.clone(), &TOPICS).await
}
