//! The waiting jobs' pages against a large pool: 1,000,000 jobs waiting (1,000 topics, one
//! pool). How long each page takes (the first, one deep in the pool, a topic's) asked alone; then,
//! with jobs falling due throughout, 20 clients loading them for the second half: how long they
//! take then, and whether jobs move later while the pages load than before ([`pages_under_load`],
//! which the `console` scenario runs on every page).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use delayer_client::redis::aio::MultiplexedConnection;
use delayer_wire::time::unix_now;

use super::scrape::{LIVE, consume, daemon_lag_bound, get};
use super::support::http_client::serving;
use super::support::{RedisServer, add_jobs, command_stats, redis_cpu_seconds};
use super::{fresh, percentiles, stop};

pub(crate) const WAITING: usize = 1_000_000;
const TOPICS: usize = 1_000;
pub(crate) const CLIENTS: usize = 20;
/// Each page asked alone this many times.
const ALONE: usize = 20;
/// Seconds without the page loads, then as many with them.
pub(crate) const SECONDS: u64 = 10;
/// Jobs falling due a second, on the live topics, with millisecond due times.
pub(crate) const RATE: usize = 200;

/// A page the bench loads: what to call it, and its path.
pub(crate) type Page = (&'static str, String);

pub async fn waiting(server: &RedisServer) {
    println!(
        "\n## Waiting jobs' pages ({WAITING} jobs waiting over {TOPICS} topics in one pool, {RATE} jobs/s falling due; {CLIENTS} clients loading /waiting pages for the last {SECONDS} of {} s)\n",
        2 * SECONDS
    );
    let mut redis = fresh(server).await;
    let pages = fill_pool(&mut redis).await;
    pages_under_load(server, &mut redis, "waiting", &pages).await;
}

/// Fills the pool with [`WAITING`] jobs over [`TOPICS`] topics, due in an hour a millisecond
/// apart; returns the waiting pages to load: the first, one deep in the pool, a topic's.
pub(crate) async fn fill_pool(redis: &mut MultiplexedConnection) -> Vec<Page> {
    let later = unix_now() + 3600.0;
    let names: Vec<String> = (0..TOPICS).map(|n| format!("bulk-{n:04}")).collect();
    let score = |n: usize| ((later + n as f64 / 1000.0) * 1000.0).round() / 1000.0;
    add_jobs(
        redis,
        (0..WAITING).map(|n| (format!("w-{n:07}"), names[n % TOPICS].as_str(), score(n))),
    )
    .await;
    let deep = format!(
        "/waiting?after={}&after_id=w-{:07}",
        score(WAITING * 9 / 10),
        WAITING * 9 / 10
    );
    vec![
        ("waiting: first", "/waiting".to_string()),
        ("waiting: deep (after 900,000)", deep),
        (
            "waiting: a topic's (2,000 read)",
            "/waiting?topic=bulk-0007".to_string(),
        ),
    ]
}

/// Serves the console from a daemon (`name`'s) on what `redis` holds, and loads `pages`: each
/// alone [`ALONE`] times, then, with [`RATE`] jobs a second falling due for `2 * SECONDS`,
/// [`CLIENTS`] clients loading them in turn for the second half. Prints each page's times,
/// alone and loaded, and the move lag with and without the loads.
pub(crate) async fn pages_under_load(
    server: &RedisServer,
    redis: &mut MultiplexedConnection,
    name: &str,
    pages: &[Page],
) {
    let (mut daemon, _logs, address) = serving(server, name, "");
    let ask = |path: &str| {
        let sent = Instant::now();
        let (status, _) = get(&address, path, Duration::from_secs(60)).unwrap();
        assert_eq!(status, 200, "{path}");
        sent.elapsed().as_secs_f64() * 1000.0
    };
    // The first ask of each apart: the first overview waits for the first census (a second for
    // 200,000 topics), the first of the others for a connection and the scripts' loading.
    let first: Vec<f64> = pages.iter().map(|(_, path)| ask(path)).collect();
    let alone: Vec<Vec<f64>> = pages
        .iter()
        .map(|(_, path)| (0..ALONE).map(|_| ask(path)).collect())
        .collect();
    let start = unix_now() + 2.0;
    let jobs = RATE * 2 * SECONDS as usize;
    let due: Vec<f64> = (0..jobs)
        .map(|index| start + ((index * 1000 / RATE) as f64) / 1000.0)
        .collect();
    add_jobs(
        redis,
        due.iter()
            .enumerate()
            .map(|(index, due)| (index.to_string(), LIVE[index % LIVE.len()], *due)),
    )
    .await;
    let arrivals = consume(server, jobs);
    let loads_from = start + SECONDS as f64;
    while unix_now() < loads_from {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let before = (command_stats(redis).await, redis_cpu_seconds(redis).await);
    let started = Instant::now();
    let running = Arc::new(AtomicBool::new(true));
    let loads = Arc::new(Mutex::new(Vec::new()));
    let clients: Vec<JoinHandle<()>> = (0..CLIENTS)
        .map(|client| {
            let (address, running, loads) = (address.clone(), running.clone(), loads.clone());
            let pages = pages.to_vec();
            std::thread::spawn(move || {
                let mut turn = client;
                while running.load(Ordering::Relaxed) {
                    let (kind, path) = &pages[turn % pages.len()];
                    turn += 1;
                    let sent = Instant::now();
                    let status = get(&address, path, Duration::from_secs(60)).map(|(s, _)| s);
                    let took = sent.elapsed().as_secs_f64() * 1000.0;
                    loads.lock().unwrap().push((*kind, status, took));
                }
            })
        })
        .collect();
    while started.elapsed() < Duration::from_secs(SECONDS) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    running.store(false, Ordering::Relaxed);
    let after = (command_stats(redis).await, redis_cpu_seconds(redis).await);
    let elapsed = started.elapsed().as_secs_f64();
    for client in clients {
        client.join().unwrap();
    }
    let lags = arrivals.join().unwrap();
    let (daemon_p50, daemon_p99) = (
        daemon_lag_bound(&address, 0.5).unwrap_or(f64::NAN),
        daemon_lag_bound(&address, 0.99).unwrap_or(f64::NAN),
    );
    stop(&mut daemon);

    println!("| figure | value |");
    println!("|---|---:|");
    for (half, loaded) in [("without page loads", false), ("while pages load", true)] {
        let late: Vec<f64> = lags
            .iter()
            .zip(&due)
            .filter(|(_, due)| (**due >= loads_from) == loaded)
            .filter_map(|(arrived, due)| Some((arrived.as_ref()? - due) * 1000.0))
            .collect();
        let (p50, p99, max) = percentiles(late);
        println!("| move lag {half}, p50 / p99 / max ms | {p50:.1} / {p99:.1} / {max:.1} |");
    }
    println!(
        "| the daemon's own move lag, p50 / p99 within (its histogram's buckets) | {daemon_p50} / {daemon_p99} ms |"
    );
    let loads = loads.lock().unwrap();
    for (((kind, _), alone), first) in pages.iter().zip(alone).zip(first) {
        let (p50, p99, max) = percentiles(alone);
        println!(
            "| {kind}, asked alone: first ms; then p50 / p99 / max | {first:.1}; {p50:.1} / {p99:.1} / {max:.1} |"
        );
        let mine: Vec<_> = loads.iter().filter(|(k, ..)| k == kind).collect();
        let ok: Vec<f64> = mine
            .iter()
            .filter(|(_, status, _)| *status == Some(200))
            .map(|(.., took)| *took)
            .collect();
        println!(
            "| {kind}: pages answered 200 / asked | {} / {} |",
            ok.len(),
            mine.len()
        );
        if !ok.is_empty() {
            let (p50, p99, max) = percentiles(ok);
            println!("| {kind}: page ms p50 / p99 / max | {p50:.1} / {p99:.1} / {max:.1} |");
        }
    }
    let commands: u64 = after.0.values().map(|(calls, _)| calls).sum::<u64>()
        - before.0.values().map(|(calls, _)| calls).sum::<u64>();
    println!(
        "| Redis commands/s while pages load | {:.0} |",
        commands as f64 / elapsed
    );
    println!(
        "| Redis CPU while pages load | {:.0}% |",
        (after.1 - before.1) / elapsed * 100.0
    );
}
