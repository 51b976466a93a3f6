//! Cluster drain: a backlog spread over 30 topics, moved by the daemon on a Redis Cluster of one
//! master and of three, in the same run. Each topic's pool is in one slot, so the topics are the
//! unit the masters share the work in.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use delayer_client::redis::AsyncCommands;
use delayer_client::redis::cluster_async::ClusterConnection;
use delayer_testkit::cluster::{RedisCluster, add_jobs};
use delayer_wire::keys::Layout;

use crate::support::Daemon;
use crate::{RUNS, stop};

const JOBS: usize = 300_000;
const TOPICS: usize = 30;

pub async fn cluster_drain() {
    println!(
        "\n## Cluster drain ({JOBS} jobs due, {TOPICS} topics, release daemon; best of {RUNS})\n"
    );
    println!("| masters | daemon s | jobs/s | / 1 master |");
    println!("|---:|---:|---:|---:|");
    let mut one = None;
    for masters in [1, 3] {
        let mut best = f64::MAX;
        for _ in 0..RUNS {
            best = best.min(drain(masters).await);
        }
        let one = *one.get_or_insert(best);
        println!(
            "| {masters} | {best:.3} | {:.0} | {:.2} |",
            JOBS as f64 / best,
            one / best
        );
    }
}

/// Seconds from the daemon's first move to empty pools.
async fn drain(masters: usize) -> f64 {
    let cluster = RedisCluster::start(masters);
    let connection = cluster.connect().await;
    let now = delayer_wire::time::unix_now();
    let jobs = (0..JOBS).map(|index| (format!("job-{index:06}"), topic(index), now - 1.0));
    add_jobs(&connection, jobs).await;

    let (mut daemon, _dir) = start_daemon(&cluster);
    let mut first_move = None;
    let seconds = loop {
        let left = waiting(&connection).await;
        if left < JOBS && first_move.is_none() {
            first_move = Some(Instant::now());
        }
        if left == 0 {
            break first_move.unwrap().elapsed().as_secs_f64();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    stop(&mut daemon);
    let mut ready = 0;
    for index in 0..TOPICS {
        let topic = topic(index);
        let length: usize = connection
            .clone()
            .llen(Layout::CLUSTER.keys(&topic).ready(&topic))
            .await
            .unwrap();
        ready += length;
    }
    assert_eq!(ready, JOBS, "every job moved once");
    seconds
}

/// The release daemon on `cluster`, logging into the directory that comes back (kept while it
/// runs).
pub(crate) fn start_daemon(cluster: &RedisCluster) -> (Daemon, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config: PathBuf = dir.path().join("cluster.conf");
    std::fs::write(
        &config,
        format!(
            "[delayer]\naccess_log = {}\nerror_log = {}\n\n[redis]\ncluster = {}\n",
            dir.path().join("access.log").display(),
            dir.path().join("error.log").display(),
            cluster.addresses()
        ),
    )
    .unwrap();
    (Daemon::start(&config), dir)
}

/// Jobs left in all pools, asked of every pool at once: each answer waits for the script call
/// its master is running, so asking one after another would take 30 of those.
async fn waiting(connection: &ClusterConnection) -> usize {
    let counts = (0..TOPICS).map(|index| {
        let mut connection = connection.clone();
        async move {
            let keys = Layout::CLUSTER.keys(&topic(index));
            connection.zcard::<_, usize>(keys.pool()).await.unwrap()
        }
    });
    futures_util::future::join_all(counts)
        .await
        .into_iter()
        .sum()
}

fn topic(index: usize) -> String {
    format!("topic-{:02}", index % TOPICS)
}
