//! Idle topics on a cluster of 3 masters: a registry of N topics, each with one job due in an
//! hour, beside one live topic. With 0 and 20,000 idle topics in the same run: the masters'
//! commands a second while nothing falls due, the daemon's CPU meanwhile, the live topic's lag
//! (200 jobs due over 2 s), and how long a stop takes.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use delayer_client::redis;
use delayer_testkit::cluster::{RedisCluster, add_jobs};
use delayer_wire::keys::Layout;

use crate::cluster_drain::start_daemon;
use crate::{clock_ticks_per_second, cpu_ticks};

const IDLE: [usize; 2] = [0, 20_000];
const LIVE_JOBS: usize = 200;
const LIVE: &str = "live";

pub async fn cluster_idle() {
    println!(
        "\n## Idle topics on a cluster (3 masters; the live topic: {LIVE_JOBS} jobs due over 2 s)\n"
    );
    println!(
        "| idle topics | Redis commands/s idle | daemon CPU idle | live lag p50 ms | p99 ms | max ms | stop s |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for idle in IDLE {
        run(idle).await;
    }
}

async fn run(idle: usize) {
    let cluster = RedisCluster::start(3);
    let connection = cluster.connect().await;
    let now = delayer_wire::time::unix_now();
    let jobs = (0..idle).map(|index| {
        (
            format!("idle-{index}"),
            format!("idle-{index:05}"),
            now + 3600.0,
        )
    });
    add_jobs(&connection, jobs).await;
    add_jobs(
        &connection,
        [("first".to_string(), LIVE.to_string(), now + 3600.0)],
    )
    .await;

    let (mut daemon, _dir) = start_daemon(&cluster);
    // The first look at every topic, then quiet.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (before, ticks, started) = (
        commands(&cluster).await,
        cpu_ticks(daemon.pid()),
        Instant::now(),
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    let seconds = started.elapsed().as_secs_f64();
    let rate = (commands(&cluster).await - before) as f64 / seconds;
    let cpu = (cpu_ticks(daemon.pid()) - ticks) as f64 / clock_ticks_per_second() / seconds;

    let pool = Layout::CLUSTER.keys(LIVE).pool().to_string();
    let mut node = cluster.connect_node(cluster.node_of(&pool)).await;
    let start = redis_now(&mut node).await + 1.0;
    let due: HashMap<String, f64> = (0..LIVE_JOBS)
        .map(|index| {
            (
                format!("live-{index}"),
                start + index as f64 * 2.0 / LIVE_JOBS as f64,
            )
        })
        .collect();
    add_jobs(
        &connection,
        due.iter()
            .map(|(id, at)| (id.clone(), LIVE.to_string(), *at)),
    )
    .await;
    let ready = Layout::CLUSTER.keys(LIVE).ready(LIVE);
    let mut seen: HashMap<String, f64> = HashMap::new();
    let give_up = Instant::now() + Duration::from_secs(60);
    while seen.len() < LIVE_JOBS && Instant::now() < give_up {
        let (time, ids): ((f64, f64), Vec<String>) = redis::pipe()
            .cmd("TIME")
            .lrange(&ready, 0, -1)
            .query_async(&mut node)
            .await
            .unwrap();
        for id in ids {
            seen.entry(id).or_insert(time.0 + time.1 / 1e6);
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let mut lags: Vec<f64> = due
        .iter()
        .map(|(id, at)| {
            seen.get(id)
                .map_or(f64::INFINITY, |moved| (moved - at).max(0.0))
        })
        .collect();
    lags.sort_by(f64::total_cmp);
    let quantile = |q: f64| lags[((lags.len() - 1) as f64 * q).round() as usize] * 1000.0;

    let stopping = Instant::now();
    daemon.signal("TERM");
    // Not `wait`, which gives up with a panic: a daemon that takes too long is killed and said so.
    let mut clean = false;
    while stopping.elapsed() < Duration::from_secs(60) {
        if let Some(status) = daemon.process.try_wait().unwrap() {
            clean = status.success();
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stop = stopping.elapsed().as_secs_f64();
    println!(
        "| {idle} | {rate:.0} | {:.1}% | {:.1} | {:.1} | {:.1} | {stop:.2}{} |",
        cpu * 100.0,
        quantile(0.5),
        quantile(0.99),
        quantile(1.0),
        if clean { "" } else { " (not clean)" }
    );
}

/// Commands processed by every master so far.
async fn commands(cluster: &RedisCluster) -> u64 {
    let mut total = 0;
    for index in 0..cluster.ports().len() {
        let info: String = redis::cmd("INFO")
            .arg("stats")
            .query_async(&mut cluster.connect_node(index).await)
            .await
            .unwrap();
        total += info
            .lines()
            .find_map(|line| line.strip_prefix("total_commands_processed:"))
            .and_then(|count| count.trim().parse::<u64>().ok())
            .unwrap();
    }
    total
}

async fn redis_now(node: &mut redis::aio::MultiplexedConnection) -> f64 {
    let (seconds, micros): (f64, f64) = redis::cmd("TIME").query_async(node).await.unwrap();
    seconds + micros / 1e6
}
