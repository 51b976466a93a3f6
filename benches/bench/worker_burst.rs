//! A burst as consumers see it: 50,000 jobs due in the same instant, moved by the release daemon
//! and taken by a Worker of 10 slots whose handlers return at once (with its default prefetch,
//! with a prefetch of 100, and with the old default of one job a slot), against 10 RPOP + DEL
//! consumers on one connection (no guarantee, nothing to ack): from the due time to the last
//! handler start (or pop), Redis's CPU per job over that time (the daemon's moves included), and
//! the jobs a Worker's reserve call took (what its prefetch decides, whatever the box's load).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayer_client::worker::{DEFAULT_CONCURRENCY, DEFAULT_PREFETCH};
use delayer_client::{Client, Worker};
use delayer_wire::keys::{JOB_POOL, RESERVED, ready_queue};
use delayer_wire::time::unix_now;
use tokio::task::JoinSet;

use super::consumers::pop_one;
use super::support::{
    Daemon, DaemonSetup, RedisServer, add_jobs, command_stats, redis_cpu_seconds, script_runs,
};
use super::{fresh, stop};

const JOBS: usize = 50_000;
/// Bursts per side: each figure is their median (and the best and worst are shown too).
const BURSTS: usize = 3;
/// The larger prefetch measured beside the default: one reserve call's most jobs.
const PREFETCH: usize = 100;
/// The default before it adapted to the handlers: at most one job a slot unstarted.
const OLD_PREFETCH: usize = DEFAULT_CONCURRENCY;

/// Who takes the burst.
#[derive(Clone, Copy)]
enum Consumers {
    /// A Worker of 10, with this prefetch (`None`: its default).
    Worker(Option<usize>),
    Pops,
}

pub async fn worker_burst(server: &RedisServer) {
    println!(
        "\n## A burst taken by consumers ({JOBS} jobs due in the same instant, one topic, release daemon; from the due time to the last handler start, over {BURSTS} bursts)\n"
    );
    println!(
        "| consumers | median ms | best ms | worst ms | jobs/s (median) | Redis CPU µs/job (median) | jobs a reserve call (median) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let sides = [
        (
            format!("Worker of {DEFAULT_CONCURRENCY}"),
            Consumers::Worker(None),
        ),
        (
            format!("Worker of {DEFAULT_CONCURRENCY}, prefetch {PREFETCH}"),
            Consumers::Worker(Some(PREFETCH)),
        ),
        (
            format!("Worker of {DEFAULT_CONCURRENCY}, prefetch {OLD_PREFETCH} (the old default)"),
            Consumers::Worker(Some(OLD_PREFETCH)),
        ),
        (
            format!("{DEFAULT_CONCURRENCY} RPOP + DEL consumers"),
            Consumers::Pops,
        ),
    ];
    let mut runs = vec![Vec::new(); sides.len()];
    for _ in 0..BURSTS {
        for ((_, consumers), runs) in sides.iter().zip(&mut runs) {
            runs.push(one_burst(server, *consumers).await);
        }
    }
    for runs in &mut runs {
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    for ((name, _), runs) in sides.iter().zip(&runs) {
        let (median, cpu, _) = runs[runs.len() / 2];
        let mut calls: Vec<u64> = runs.iter().map(|run| run.2).collect();
        calls.sort_unstable();
        let per_call = match calls[calls.len() / 2] {
            0 => "-".to_string(),
            calls => format!("{:.0}", JOBS as f64 / calls as f64),
        };
        println!(
            "| {name} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} | {per_call} |",
            median * 1000.0,
            runs[0].0 * 1000.0,
            runs[runs.len() - 1].0 * 1000.0,
            JOBS as f64 / median,
            cpu * 1e6 / JOBS as f64
        );
    }
    // The sides in the order above: the default, prefetch 100, the old default.
    let best = |side: usize| runs[side][0].0;
    println!(
        "\nbest of {BURSTS}, due time to last handler start: default (prefetch {DEFAULT_PREFETCH}, adapting) {:.2} s, prefetch {PREFETCH} {:.2} s, old default {:.2} s; default / prefetch {PREFETCH} {:.2}, old default / default {:.2}",
        best(0),
        best(1),
        best(2),
        best(0) / best(1),
        best(2) / best(0)
    );
}

/// Seconds from the due time to the last job's start, Redis's CPU seconds meanwhile, and the
/// reserve calls that took jobs (none for pops).
async fn one_burst(server: &RedisServer, consumers: Consumers) -> (f64, f64, u64) {
    let mut redis = fresh(server).await;
    let (config, _) = server.daemon_config("worker-burst", "");
    let mut daemon = Daemon::start(&config);
    // Up once it has looked at the pool.
    while script_runs(&mut redis).await == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let due = unix_now().floor() + 3.0;
    add_jobs(
        &mut redis,
        (0..JOBS).map(|index| (format!("burst-{index:05}"), "t", due)),
    )
    .await;
    assert!(unix_now() < due - 0.2, "loading took too long");
    // A reserve call that took jobs trims the ready list once; nothing else here does.
    let trims =
        |stats: HashMap<String, (u64, u64)>| stats.get("ltrim").map_or(0, |&(calls, _)| calls);
    let trims_before = trims(command_stats(&mut redis).await);

    let taken = Arc::new(AtomicUsize::new(0));
    let last = Arc::new(Mutex::new(None));
    let all_taken = Arc::new(tokio::sync::Notify::new());
    // Read just before the due time: the moves count too, on both sides.
    let cpu = tokio::spawn({
        let mut redis = redis.clone();
        async move {
            tokio::time::sleep(Duration::from_secs_f64(due - unix_now() - 0.05)).await;
            redis_cpu_seconds(&mut redis).await
        }
    });
    let took = |taken: &AtomicUsize, last: &Mutex<Option<f64>>, all: &tokio::sync::Notify| {
        if taken.fetch_add(1, Ordering::Relaxed) + 1 == JOBS {
            *last.lock().unwrap() = Some(unix_now());
            all.notify_one();
        }
    };
    if let Consumers::Worker(prefetch) = consumers {
        let client = Client::connect(server.info()).await.unwrap();
        let (taken, last, all) = (taken.clone(), last.clone(), all_taken.clone());
        let finished = all_taken.clone();
        let mut worker = Worker::new(client).concurrency(DEFAULT_CONCURRENCY);
        if let Some(prefetch) = prefetch {
            worker = worker.prefetch(prefetch);
        }
        worker
            .handle("t", move |_job| {
                took(&taken, &last, &all);
                async { Ok::<(), String>(()) }
            })
            .run(async move { finished.notified().await })
            .await
            .unwrap();
    } else {
        let connection = server.connect().await;
        let mut consumers = JoinSet::new();
        for _ in 0..DEFAULT_CONCURRENCY {
            let (mut redis, taken, last, all) = (
                connection.clone(),
                taken.clone(),
                last.clone(),
                all_taken.clone(),
            );
            consumers.spawn(async move {
                while taken.load(Ordering::Relaxed) < JOBS {
                    if pop_one(&mut redis).await {
                        took(&taken, &last, &all);
                    } else {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
            });
        }
        consumers.join_all().await;
    }
    let ended = last.lock().unwrap().expect("every job taken");
    let cpu = redis_cpu_seconds(&mut redis).await - cpu.await.unwrap();
    let reserve_calls = trims(command_stats(&mut redis).await) - trims_before;
    stop(&mut daemon);
    assert_eq!(taken.load(Ordering::Relaxed), JOBS, "each job taken once");
    let (pool, reserved, ready): (usize, usize, usize) = delayer_client::redis::pipe()
        .zcard(JOB_POOL)
        .zcard(RESERVED)
        .llen(ready_queue("t"))
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(
        (pool, reserved, ready),
        (0, 0, 0),
        "every job taken and acked"
    );
    (ended - due, cpu, reserve_calls)
}
