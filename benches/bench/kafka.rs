//! Delivery to Kafka by one daemon (a backlog of due jobs over 10 topics, to a tansu broker) beside
//! the ready-list path doing the same Redis work (the daemon moves, one client reserves 500 at a
//! time and acks them): jobs/s, and Redis's and the daemon's CPU per job.

use std::time::{Duration, Instant};

use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::{Client, Topic};
use delayer_testkit::KafkaBroker;
use delayer_wire::keys::{JOB_POOL, RESERVED, ready_queue};

use super::support::{Daemon, DaemonSetup, RedisServer, fill_backlog};
use super::{TOPICS, clock_ticks_per_second, cpu_ticks, fresh, stop};

const JOBS: usize = 20_000;

/// One drain's figures.
struct Run {
    seconds: f64,
    redis_cpu: f64,
    daemon_cpu: f64,
}

pub async fn kafka(server: &RedisServer) {
    let broker = KafkaBroker::start();
    for topic in TOPICS {
        broker.create_topic(topic, 1);
    }
    println!("\n## Delivery to Kafka ({JOBS} due jobs, 10 topics, one daemon, tansu broker)\n");
    println!("| path | jobs/s | Redis CPU µs/job | daemon CPU µs/job |");
    println!("|---|---:|---:|---:|");
    let kafka = format!(
        "[kafka]\nbrokers = {}\ntopics = {}\n",
        broker.address(),
        TOPICS.join(",")
    );
    for (name, extra) in [
        ("ready lists, a client reserving and acking", ""),
        ("Kafka", kafka.as_str()),
    ] {
        let run = drain(server, extra.is_empty(), extra).await;
        println!(
            "| {name} | {:.0} | {:.1} | {:.1} |",
            JOBS as f64 / run.seconds,
            run.redis_cpu * 1e6 / JOBS as f64,
            run.daemon_cpu * 1e6 / JOBS as f64,
        );
    }
}

/// Drains [`JOBS`] due jobs through a daemon with `extra` lines (and, for the ready lists, a
/// client reserving and acking them), until Redis holds none.
async fn drain(server: &RedisServer, with_client: bool, extra: &str) -> Run {
    let mut redis = fresh(server).await;
    fill_backlog(&mut redis, JOBS, &TOPICS).await;
    let ticks = clock_ticks_per_second();
    let redis_before = cpu_ticks(server.pid());
    let name = if with_client { "ready" } else { "kafka" };
    let (config, _) = server.daemon_config(&format!("bench-kafka-{name}"), extra);
    let started = Instant::now();
    let mut daemon = Daemon::start(&config);
    let consuming = async {
        if !with_client {
            return;
        }
        let client = Client::connect(server.info()).await.unwrap();
        let topics: Vec<Topic> = TOPICS.iter().map(|topic| Topic::from(*topic)).collect();
        while left(&mut redis.clone()).await > 0 {
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
        while left(&mut redis.clone()).await > 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    tokio::join!(consuming, waiting);
    let seconds = started.elapsed().as_secs_f64();
    let run = Run {
        seconds,
        redis_cpu: (cpu_ticks(server.pid()) - redis_before) as f64 / ticks,
        daemon_cpu: cpu_ticks(daemon.pid()) as f64 / ticks,
    };
    stop(&mut daemon);
    run
}

/// The jobs Redis still holds: waiting, ready, reserved.
async fn left(redis: &mut MultiplexedConnection) -> usize {
    let mut left: usize = redis.zcard(JOB_POOL).await.unwrap();
    left += redis.zcard::<_, usize>(RESERVED).await.unwrap();
    for topic in TOPICS {
        left += redis.llen::<_, usize>(ready_queue(topic)).await.unwrap();
    }
    left
}
