//! The mover's own figures (a drain, and lateness) without and with 1,000 schedules ticking every
//! second, fired by the same daemon, run one after the other.

use delayer_client::Client;
use delayer_client::redis::aio::MultiplexedConnection;

use super::schedules::save_named;
use super::support::{DaemonSetup, RedisServer};
use super::{RUNS, daemon_drain_in, fresh, lateness_run_in};

/// Per-second schedules running beside the mover's figures.
const BESIDE: usize = 1_000;
/// The backlog of the drain beside them: long enough to overlap a round of claims.
const DRAIN_JOBS: usize = 200_000;

/// The mover's drain and lateness, without and with [`BESIDE`] per-second schedules fired by the
/// same daemon, run one after the other.
pub async fn mover_beside(server: &RedisServer) {
    let batch_size = server.config("").mover.batch_size;
    let (mut drain, mut drain_cpu) = ([f64::MAX; 2], [0.0; 2]);
    for _ in 0..RUNS {
        for (index, with) in [false, true].into_iter().enumerate() {
            let redis = prepared(server, with).await;
            let run = daemon_drain_in(server, redis, DRAIN_JOBS, batch_size).await;
            if run.drained.seconds < drain[index] {
                drain[index] = run.drained.seconds;
                drain_cpu[index] = run.cpu_seconds;
            }
        }
    }
    println!(
        "\n### The mover without and with {BESIDE} schedules ticking every second (same daemon)\n"
    );
    println!("| figure | without | with | with / without |");
    println!("|---|---:|---:|---:|");
    let rate = drain.map(|seconds| DRAIN_JOBS as f64 / seconds);
    println!(
        "| drain {DRAIN_JOBS} jobs, jobs/s (best of {RUNS}) | {:.0} | {:.0} | {:.2} |",
        rate[0],
        rate[1],
        rate[1] / rate[0]
    );
    println!(
        "| its daemon CPU s | {:.2} | {:.2} | {} |",
        drain_cpu[0],
        drain_cpu[1],
        ratio(drain_cpu[1], drain_cpu[0])
    );
    for (rate, whole_seconds) in [(1_000, true), (20_000, false)] {
        let run = async |with_schedules: bool| {
            let name = format!("beside-lateness-{rate}-{whole_seconds}-{with_schedules}");
            let redis = prepared(server, with_schedules).await;
            lateness_run_in(server, redis, &name, rate, whole_seconds, 5).await
        };
        let without = run(false).await;
        let with = run(true).await;
        let scores = if whole_seconds {
            "whole-second"
        } else {
            "millisecond"
        };
        for (what, without, with) in [
            ("p50", without.p50, with.p50),
            ("p99", without.p99, with.p99),
            ("max", without.max, with.max),
            ("max move lag", without.max_move_lag, with.max_move_lag),
        ] {
            println!(
                "| lateness {rate}/s, {scores} scores, {what} ms | {without:.2} | {with:.2} | {} |",
                ratio(with, without)
            );
        }
    }
}

/// `with / without` to two places, or a dash when `without` is nothing (a lag of 0.00 ms).
fn ratio(with: f64, without: f64) -> String {
    if without > 0.0 {
        format!("{:.2}", with / without)
    } else {
        "–".to_string()
    }
}

/// An empty database, with [`BESIDE`] per-second schedules when `with_schedules`.
async fn prepared(server: &RedisServer, with_schedules: bool) -> MultiplexedConnection {
    let redis = fresh(server).await;
    if with_schedules {
        let client = Client::connect(server.info()).await.unwrap();
        save_named(&client, "beside", BESIDE, "* * * * * *").await;
    }
    redis
}
