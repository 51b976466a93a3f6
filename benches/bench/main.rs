//! The benchmark: `cargo bench --bench bench [-- SCENARIO...]` with scenarios `batch`, `drain`,
//! `lateness`, `idle`, `burst` (the daemon's), `push`, `reserve`, `e2e`, `worker_burst` (the
//! client's; see `consumers` and `worker_burst`), `http` (adds over HTTP), `scrape` (80 scrapers
//! against 200,000 topics), `waiting` (20 clients on the waiting jobs' pages of a 1M-job pool),
//! `console` (every console page with 200,000 topics and 1M jobs waiting, and the history's size),
//! `cluster` (a drain on 1 and 3 cluster masters), `schedules` (recurring schedules, and the
//! mover beside them), `kafka` (delivery to a Kafka broker beside the ready lists), `webhooks`
//! (delivery to an HTTP receiver: throughput, and lateness at 5,000 due a second), `compact`
//! (the compact layout's memory, drain, and get/remove with many jobs waiting), `memory`
//! (bytes per waiting job in the candidate compact layouts) and `upgrade` (the previous release's
//! daemon beside this one, without and with a webhook; it builds that release once, see
//! `support::previous_release`),
//! default: all. It
//! starts its own redis-server and the release `delayer` binary (access log on, to a file), and
//! prints each figure beside a reference measured in the same run, since this machine is shared
//! and noisy: compare ratios, not absolute numbers.

mod burst;
mod cluster_drain;
mod cluster_idle;
mod compact;
mod console;
mod consumers;
mod delivery;
mod http_add;
mod kafka;
mod memory;
mod schedules;
mod schedules_beside;
mod scrape;
mod upgrade;
mod waiting;
mod webhooks;
mod worker_burst;

#[path = "../../tests/it/support/mod.rs"]
#[allow(dead_code, unused_imports)] // the bench uses a part of the tests' support
mod support;

use support::DaemonSetup;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::redis::{self, AsyncCommands, Value};
use delayer_wire::keys::{JOB_BUCKET_PREFIX, JOB_POOL, Layout, READY_QUEUE_PREFIX, ready_queue};
use delayer_wire::scripts::move_due::MoveScript;
use delayer_wire::time::unix_now;
use support::{Daemon, RedisServer, delivered, fill_backlog};

const TOPICS: [&str; 10] = ["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"];
const BATCH_SIZES: [usize; 6] = [100, 250, 500, 1000, 2000, 5000];
const CONSUMERS: usize = 8;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo test --all-targets` runs this too, without `--bench`: there is nothing to measure then.
    if !args.iter().any(|arg| arg == "--bench") {
        println!("bench: run it with `cargo bench --bench bench`");
        return;
    }
    let chosen: Vec<&str> = args
        .iter()
        .filter(|arg| !arg.starts_with('-'))
        .map(String::as_str)
        .collect();
    let runs = |name: &str| chosen.is_empty() || chosen.contains(&name);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let server = RedisServer::start();
        println!(
            "redis-server {}, delayer {}",
            delayer::redis_version(&server.config("")).await.unwrap(),
            env!("CARGO_PKG_VERSION")
        );
        if runs("batch") {
            batch_sizes(&server).await;
        }
        if runs("drain") {
            drains(&server).await;
        }
        if runs("lateness") {
            lateness(&server).await;
        }
        if runs("idle") {
            idle(&server).await;
        }
        if runs("burst") {
            burst::burst(&server).await;
        }
        if runs("push") {
            consumers::push(&server).await;
        }
        if runs("reserve") {
            consumers::reserve_and_ack(&server).await;
        }
        if runs("e2e") {
            consumers::end_to_end(&server).await;
        }
        if runs("worker_burst") {
            worker_burst::worker_burst(&server).await;
        }
        if runs("http") {
            http_add::http_add(&server).await;
        }
        if runs("scrape") {
            scrape::scrape(&server).await;
        }
        if runs("waiting") {
            waiting::waiting(&server).await;
        }
        if runs("console") {
            console::console(&server).await;
        }
        if runs("cluster") {
            cluster_drain::cluster_drain().await;
        }
        if runs("cluster_idle") {
            cluster_idle::cluster_idle().await;
        }
        if runs("schedules") {
            schedules::schedules(&server).await;
            schedules_beside::mover_beside(&server).await;
        }
        if runs("kafka") {
            kafka::kafka(&server).await;
        }
        if runs("webhooks") {
            webhooks::webhooks(&server).await;
            webhooks::flow_control(&server).await;
        }
        if runs("compact") {
            compact::compact(&server).await;
        }
        if runs("memory") {
            memory::memory().await;
        }
        if runs("upgrade") {
            upgrade::upgrade().await;
            upgrade::upgrade_webhooks().await;
        }
    });
}

/// Drain 100k jobs with each batch size, bare script and daemon, to choose the default.
async fn batch_sizes(server: &RedisServer) {
    println!("\n## Drain by batch size (100k jobs due, 10 topics; best of {RUNS})\n");
    println!("| batch size | bare script jobs/s | daemon jobs/s | daemon / bare |");
    println!("|---:|---:|---:|---:|");
    for batch_size in BATCH_SIZES {
        let bare = best_bare(server, 100_000, batch_size).await;
        let daemon = best_daemon(server, 100_000, batch_size).await;
        println!(
            "| {batch_size} | {:.0} | {:.0} | {:.2} |",
            100_000.0 / bare,
            100_000.0 / daemon.drained.seconds,
            bare / daemon.drained.seconds
        );
    }
}

/// Drain 100k and 1M jobs with the default batch size: the daemon, our script looped, and the
/// minimal move script looped, runs interleaved so that a slow spell of the box hits all three;
/// peak RSS of the daemon during each. Redis's CPU per job is the steadier figure on a busy box:
/// a stall of the machine lengthens a drain, not the work Redis does for it.
async fn drains(server: &RedisServer) {
    println!("\n## Drain (jobs already due, 10 topics, default batch size; best of {RUNS})\n");
    println!(
        "| jobs | minimal script jobs/s | our script jobs/s | daemon jobs/s | daemon / minimal | daemon / our script | our script / minimal | Redis CPU µs/job: minimal, ours, daemon | daemon CPU s | daemon peak RSS |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let batch_size = server.config("").mover.batch_size;
    for count in [100_000, 1_000_000] {
        let (mut minimal, mut ours, mut daemon) = (Drained::NONE, Drained::NONE, None);
        for _ in 0..RUNS {
            minimal = minimal.best(looped_drain(server, count, batch_size, Looped::Minimal).await);
            ours = ours.best(looped_drain(server, count, batch_size, Looped::Ours).await);
            let run = daemon_drain(server, count, batch_size).await;
            daemon = Some(match daemon {
                Some(best) => run.best(best),
                None => run,
            });
        }
        let daemon = daemon.expect("RUNS > 0");
        let per_job = |drained: &Drained| drained.redis_cpu * 1e6 / count as f64;
        println!(
            "| {count} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2}, {:.2}, {:.2} | {:.2} | {:.1} MB |",
            count as f64 / minimal.seconds,
            count as f64 / ours.seconds,
            count as f64 / daemon.drained.seconds,
            minimal.seconds / daemon.drained.seconds,
            ours.seconds / daemon.drained.seconds,
            minimal.seconds / ours.seconds,
            per_job(&minimal),
            per_job(&ours),
            per_job(&daemon.drained),
            daemon.cpu_seconds,
            daemon.peak_rss_kb as f64 / 1024.0
        );
    }
}

/// Short drains are at the mercy of a shared machine: each figure is the best of this many runs.
pub(crate) const RUNS: usize = 3;

async fn best_bare(server: &RedisServer, count: usize, batch_size: usize) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..RUNS {
        best = best.min(
            looped_drain(server, count, batch_size, Looped::Ours)
                .await
                .seconds,
        );
    }
    best
}

async fn best_daemon(server: &RedisServer, count: usize, batch_size: usize) -> DaemonDrain {
    let mut best = daemon_drain(server, count, batch_size).await;
    for _ in 1..RUNS {
        best = best.best(daemon_drain(server, count, batch_size).await);
    }
    best
}

/// A script called in a tight loop on one connection, nothing else: the references for a drain.
#[derive(Clone, Copy)]
enum Looped {
    /// The daemon's move script: the most the daemon can do with it on that Redis.
    Ours,
    /// The least a move can be (`minimal_move.lua`: ZRANGEBYSCORE, HGET topic, LPUSH, ZREM, no
    /// checks): what our script's checks and bookkeeping cost shows against it.
    Minimal,
}

/// The minimal move script (see [`Looped::Minimal`]).
const MINIMAL_MOVE: &str = include_str!("minimal_move.lua");

/// Drains a backlog of `count` jobs with `looped` called back to back.
async fn looped_drain(
    server: &RedisServer,
    count: usize,
    batch_size: usize,
    looped: Looped,
) -> Drained {
    let mut redis = fresh(server).await;
    let ids = fill_backlog(&mut redis, count, &TOPICS).await;
    let ours = MoveScript::default();
    let minimal = redis::Script::new(MINIMAL_MOVE);
    let keys = Layout::LEGACY.keys("");
    let now = unix_now();
    let mut connection = redis.clone();
    let tight_loop = async move {
        loop {
            let call = match looped {
                Looped::Ours => ours.call(&keys, now, batch_size, false),
                Looped::Minimal => {
                    let mut call = minimal.key(JOB_POOL);
                    call.arg(format!("{now:.6}"))
                        .arg(batch_size)
                        .arg(JOB_BUCKET_PREFIX)
                        .arg(READY_QUEUE_PREFIX);
                    call
                }
            };
            // The raw reply: reading it into a Batch is the daemon's cost, not Redis's.
            let reply: Value = call.invoke_async(&mut connection).await.unwrap();
            let Value::Array(items) = reply else {
                panic!("odd reply")
            };
            if items[0] != Value::Int(batch_size as i64) {
                break;
            }
        }
    };
    let (drained, ()) = tokio::join!(time_drain(&mut redis, count), tight_loop);
    check_exactly_once(&mut redis, &ids).await;
    drained
}

/// How long a drain took, from its first move to a pool without the backlog, and the CPU Redis
/// spent meanwhile (its watcher's calls too, the same for every drain).
#[derive(Clone, Copy)]
struct Drained {
    seconds: f64,
    redis_cpu: f64,
}

impl Drained {
    /// Worse than any drain: what a best of several starts from.
    const NONE: Drained = Drained {
        seconds: f64::MAX,
        redis_cpu: f64::MAX,
    };

    /// The shorter time and the lesser CPU of two runs.
    fn best(self, other: Drained) -> Drained {
        Drained {
            seconds: self.seconds.min(other.seconds),
            redis_cpu: self.redis_cpu.min(other.redis_cpu),
        }
    }
}

/// Watches the pool (every millisecond, the same for the reference and the daemon) until the
/// backlog is gone.
async fn time_drain(redis: &mut MultiplexedConnection, count: usize) -> Drained {
    // The backlog is due 10 s before it was filled: jobs that schedules push meanwhile (due at
    // their ticks, from now on) are not counted.
    let backlog_until = unix_now() - 5.0;
    let cpu_before = redis_cpu(redis).await;
    let mut first_move = None;
    loop {
        let left: usize = redis.zcount(JOB_POOL, "-inf", backlog_until).await.unwrap();
        if left < count && first_move.is_none() {
            first_move = Some(Instant::now());
        }
        if left == 0 {
            return Drained {
                seconds: first_move.unwrap().elapsed().as_secs_f64(),
                redis_cpu: redis_cpu(redis).await - cpu_before,
            };
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The CPU seconds Redis's main thread has used (the whole process's before Redis 6.2).
async fn redis_cpu(redis: &mut MultiplexedConnection) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(redis)
        .await
        .unwrap();
    let field = |name: &str| {
        info.lines().find_map(|line| {
            line.strip_prefix(name)?
                .strip_prefix(':')?
                .trim()
                .parse()
                .ok()
        })
    };
    match (
        field("used_cpu_sys_main_thread"),
        field("used_cpu_user_main_thread"),
    ) {
        (Some(sys), Some(user)) => sys + user,
        _ => field("used_cpu_sys").unwrap_or(0.0) + field("used_cpu_user").unwrap_or(0.0),
    }
}

struct DaemonDrain {
    drained: Drained,
    cpu_seconds: f64,
    peak_rss_kb: u64,
}

impl DaemonDrain {
    /// The faster of two runs (with its CPU), the lesser Redis CPU and the higher peak RSS.
    fn best(self, other: DaemonDrain) -> DaemonDrain {
        let drained = self.drained.best(other.drained);
        let peak_rss_kb = self.peak_rss_kb.max(other.peak_rss_kb);
        let faster = if other.drained.seconds < self.drained.seconds {
            other
        } else {
            self
        };
        DaemonDrain {
            drained,
            peak_rss_kb,
            ..faster
        }
    }
}

/// The daemon draining a backlog: from its first move to the backlog's last.
async fn daemon_drain(server: &RedisServer, count: usize, batch_size: usize) -> DaemonDrain {
    daemon_drain_in(server, fresh(server).await, count, batch_size).await
}

/// [`daemon_drain`] in a database the caller prepared (with schedules, say).
async fn daemon_drain_in(
    server: &RedisServer,
    mut redis: MultiplexedConnection,
    count: usize,
    batch_size: usize,
) -> DaemonDrain {
    let ids = fill_backlog(&mut redis, count, &TOPICS).await;
    let (config, _) = server.daemon_config(
        &format!("drain-{count}-{batch_size}"),
        &format!("batch_size = {batch_size}"),
    );
    let mut daemon = Daemon::start(&config);
    let drained = time_drain(&mut redis, count).await;
    let peak_rss_kb = proc_status_kb(daemon.pid(), "VmHWM");
    let cpu_seconds = cpu_ticks(daemon.pid()) as f64 / clock_ticks_per_second();
    stop(&mut daemon);
    check_exactly_once(&mut redis, &ids).await;
    DaemonDrain {
        drained,
        cpu_seconds,
        peak_rss_kb,
    }
}

async fn check_exactly_once(redis: &mut MultiplexedConnection, ids: &[String]) {
    let counts = delivered(redis, &TOPICS).await;
    assert!(counts.values().all(|count| *count == 1), "duplicates");
    assert_eq!(counts.len(), ids.len(), "every id is in a ready list once");
}

/// Jobs falling due at a steady rate, popped by consumers on BRPOP: arrival − due.
async fn lateness(server: &RedisServer) {
    println!(
        "\n## Lateness (jobs falling due at a steady rate for 5 s, {CONSUMERS} consumers on BRPOP)\n"
    );
    println!("| rate | scores | jobs | p50 ms | p99 ms | max ms | early | max move lag ms |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    for rate in [1_000, 20_000] {
        for whole_seconds in [true, false] {
            let stats = lateness_run(server, rate, whole_seconds, 5).await;
            println!(
                "| {rate}/s | {} | {} | {:.2} | {:.2} | {:.2} | {} | {:.2} |",
                if whole_seconds {
                    "whole seconds"
                } else {
                    "milliseconds"
                },
                stats.jobs,
                stats.p50,
                stats.p99,
                stats.max,
                stats.early,
                stats.max_move_lag
            );
        }
    }
}

struct Lateness {
    jobs: usize,
    p50: f64,
    p99: f64,
    max: f64,
    early: usize,
    /// The daemon's part, apart from how fast consumers pop: the most the oldest due job still in
    /// the pool was overdue, sampled every millisecond.
    max_move_lag: f64,
}

async fn lateness_run(
    server: &RedisServer,
    rate: usize,
    whole_seconds: bool,
    seconds: usize,
) -> Lateness {
    let name = format!("lateness-{rate}-{whole_seconds}");
    lateness_run_in(
        server,
        fresh(server).await,
        &name,
        rate,
        whole_seconds,
        seconds,
    )
    .await
}

/// [`lateness_run`] in a database the caller prepared (with schedules, say), by a daemon whose
/// configuration and logs are `name`'s (each run's own: it waits for the start in the log).
async fn lateness_run_in(
    server: &RedisServer,
    mut redis: MultiplexedConnection,
    name: &str,
    rate: usize,
    whole_seconds: bool,
    seconds: usize,
) -> Lateness {
    let (config, logs) = server.daemon_config(name, "");
    let mut daemon = Daemon::start(&config);
    logs.wait_for_line("Service started successfully");

    let jobs = rate * seconds;
    let start = unix_now().floor() + 2.0;
    let due: Vec<f64> = (0..jobs)
        .map(|index| {
            if whole_seconds {
                start + (index / rate) as f64
            } else {
                start + ((index * 1000 / rate) as f64) / 1000.0
            }
        })
        .collect();
    let loaded = due
        .iter()
        .enumerate()
        .map(|(index, score)| (index.to_string(), TOPICS[index % TOPICS.len()], *score));
    support::add_jobs(&mut redis, loaded).await;
    assert!(
        unix_now() < start,
        "loading took too long: the first jobs fell due before it ended"
    );

    let arrivals = Arc::new(Mutex::new(Vec::with_capacity(jobs)));
    let received = Arc::new(AtomicUsize::new(0));
    let keys: Vec<Vec<u8>> = TOPICS.iter().map(ready_queue).collect();
    let mut consumers = Vec::new();
    for _ in 0..CONSUMERS {
        let (mut connection, arrivals, received, keys) = (
            server.connect().await,
            arrivals.clone(),
            received.clone(),
            keys.clone(),
        );
        consumers.push(tokio::spawn(async move {
            while received.load(Ordering::Relaxed) < jobs {
                let popped: Option<(String, String)> = redis::cmd("BRPOP")
                    .arg(&keys)
                    .arg(1)
                    .query_async(&mut connection)
                    .await
                    .unwrap();
                if let Some((_, id)) = popped {
                    let arrived = unix_now();
                    arrivals
                        .lock()
                        .unwrap()
                        .push((id.parse::<usize>().unwrap(), arrived));
                    received.fetch_add(1, Ordering::Relaxed);
                } else if unix_now() > start + seconds as f64 + 10.0 {
                    break;
                }
            }
        }));
    }
    let mut watcher = server.connect().await;
    let watched = received.clone();
    let move_lag = tokio::spawn(async move {
        let mut max_lag: f64 = 0.0;
        while watched.load(Ordering::Relaxed) < jobs {
            let oldest: Vec<(String, f64)> =
                watcher.zrange_withscores(JOB_POOL, 0, 0).await.unwrap();
            if let Some((_, due)) = oldest.first() {
                max_lag = max_lag.max(unix_now() - due);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        max_lag * 1000.0
    });
    for consumer in consumers {
        consumer.await.unwrap();
    }
    let max_move_lag = move_lag.await.unwrap();
    stop(&mut daemon);

    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), jobs, "every job arrived");
    let late_ms: Vec<f64> = arrivals
        .iter()
        .map(|(id, arrived)| (arrived - due[*id]) * 1000.0)
        .collect();
    let early = late_ms.iter().filter(|late| **late < 0.0).count();
    let (p50, p99, max) = percentiles(late_ms);
    Lateness {
        jobs,
        p50,
        p99,
        max,
        early,
        max_move_lag,
    }
}

/// The median, 99th percentile and maximum of some figures (not empty).
pub(crate) fn percentiles(mut figures: Vec<f64>) -> (f64, f64, f64) {
    figures.sort_by(f64::total_cmp);
    let count = figures.len();
    (
        figures[count / 2],
        figures[count * 99 / 100],
        figures[count - 1],
    )
}

/// What the daemon costs while nothing is due: Redis commands per second and its CPU.
async fn idle(server: &RedisServer) {
    println!("\n## Idle cost (timer_interval = 1000 ms, nothing due, 10 s window)\n");
    println!(
        "| jobs waiting | script calls/s | Redis commands/s (all, incl. inside the script) | daemon CPU % |"
    );
    println!("|---:|---:|---:|---:|");
    for waiting in [0, 1_000_000] {
        let mut redis = fresh(server).await;
        let far = unix_now() + 86_400.0;
        support::add_jobs(
            &mut redis,
            (0..waiting).map(|index| (format!("far-{index}"), "t0", far)),
        )
        .await;
        let (config, logs) =
            server.daemon_config(&format!("idle-{waiting}"), "timer_interval = 1000");
        let mut daemon = Daemon::start(&config);
        logs.wait_for_line("Service started successfully");
        tokio::time::sleep(Duration::from_secs(2)).await;

        let before = (calls(&mut redis).await, cpu_ticks(daemon.pid()));
        let started = Instant::now();
        tokio::time::sleep(Duration::from_secs(10)).await;
        let after = (calls(&mut redis).await, cpu_ticks(daemon.pid()));
        let elapsed = started.elapsed().as_secs_f64();
        stop(&mut daemon);

        let script_calls =
            after.0.get("evalsha").unwrap_or(&0) - before.0.get("evalsha").unwrap_or(&0);
        // The first INFO is counted in the second reading: it is ours, not the daemon's.
        let all_calls = after.0.values().sum::<u64>() - before.0.values().sum::<u64>() - 1;
        let cpu = (after.1 - before.1) as f64 / clock_ticks_per_second() / elapsed * 100.0;
        println!(
            "| {waiting} | {:.1} | {:.1} | {cpu:.2} |",
            script_calls as f64 / elapsed,
            all_calls as f64 / elapsed
        );
    }
}

/// Calls so far per command.
async fn calls(redis: &mut MultiplexedConnection) -> HashMap<String, u64> {
    let stats = support::command_stats(redis).await;
    stats
        .into_iter()
        .map(|(command, (calls, _))| (command, calls))
        .collect()
}

/// An empty database and a connection to it.
async fn fresh(server: &RedisServer) -> MultiplexedConnection {
    let mut redis = server.connect().await;
    redis::cmd("FLUSHALL")
        .query_async::<()>(&mut redis)
        .await
        .unwrap();
    redis
}

pub(crate) fn stop(daemon: &mut Daemon) {
    daemon.signal("TERM");
    assert!(
        daemon.wait(Duration::from_secs(5)).success(),
        "the daemon stops cleanly"
    );
}

/// A `kB` field of /proc/<pid>/status, e.g. VmHWM (peak RSS).
pub(crate) fn proc_status_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().trim_end_matches(" kB").parse().ok())
        .unwrap()
}

/// User + system CPU time of a process, in clock ticks.
pub(crate) fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

pub(crate) fn clock_ticks_per_second() -> f64 {
    let output = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .unwrap()
}
