//! Scrapes against a huge registry: 200,000 topics in `delayer:topics` (some with ready jobs), 80
//! scrapers of `/metrics` and `/` for 20 s, and jobs falling due throughout. Whether `/healthz`
//! stays 200, how late jobs move, the daemon's memory, each scrape's size and time, Redis's load.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::redis::{self, AsyncCommands};
use delayer_wire::keys::{TOPICS as REGISTRY, ready_queue};
use delayer_wire::time::unix_now;

use super::support::http_client::serving;
use super::support::{RedisServer, add_jobs, command_stats, redis_cpu_seconds};
use super::{fresh, percentiles, proc_status_kb, stop};

/// Idle topics in the registry.
pub(crate) const IDLE_TOPICS: usize = 200_000;
/// Of those, how many have ready jobs (1 to 50 each).
const BACKLOGGED: usize = 2_000;
const SCRAPERS: usize = 80;
const SECONDS: u64 = 20;
/// Jobs falling due a second, on [`LIVE`] topics, with millisecond due times.
const RATE: usize = 200;
pub(crate) const LIVE: [&str; 4] = ["live0", "live1", "live2", "live3"];
/// How often `/healthz` is asked.
const HEALTH_EVERY: Duration = Duration::from_millis(50);

pub async fn scrape(server: &RedisServer) {
    println!(
        "\n## Scrapes ({IDLE_TOPICS} topics in the registry, {SCRAPERS} scrapers of /metrics and / for {SECONDS} s, {RATE} jobs/s falling due)\n"
    );
    let mut redis = fresh(server).await;
    register_topics(&mut redis).await;

    let (mut daemon, _logs, address) = serving(server, "scrape", "");
    // Jobs due from 2 s from now until the scrapes end, 5 ms apart.
    let start = unix_now() + 2.0;
    let jobs = RATE * SECONDS as usize;
    let due: Vec<f64> = (0..jobs)
        .map(|index| start + ((index * 1000 / RATE) as f64) / 1000.0)
        .collect();
    add_jobs(
        &mut redis,
        due.iter()
            .enumerate()
            .map(|(index, due)| (index.to_string(), LIVE[index % LIVE.len()], *due)),
    )
    .await;
    let arrivals = consume(server, jobs);
    while unix_now() < start {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let before = (
        command_stats(&mut redis).await,
        redis_cpu_seconds(&mut redis).await,
    );
    let started = Instant::now();
    let running = Arc::new(AtomicBool::new(true));
    let scrapes = Arc::new(Mutex::new(Vec::new()));
    let unhealthy = Arc::new(AtomicUsize::new(0));
    let mut threads: Vec<JoinHandle<()>> = (0..SCRAPERS)
        .map(|scraper| {
            let (address, running, scrapes) = (address.clone(), running.clone(), scrapes.clone());
            std::thread::spawn(move || {
                let path = if scraper % 2 == 0 { "/metrics" } else { "/" };
                while running.load(Ordering::Relaxed) {
                    let sent = Instant::now();
                    let answer = get(&address, path, Duration::from_secs(60))
                        .map(|(status, body)| (status, body.len()));
                    let took = sent.elapsed().as_secs_f64() * 1000.0;
                    scrapes.lock().unwrap().push((path, answer, took));
                }
            })
        })
        .collect();
    let health = {
        let (address, running, unhealthy) = (address.clone(), running.clone(), unhealthy.clone());
        std::thread::spawn(move || {
            while running.load(Ordering::Relaxed) {
                let answer = get(&address, "/healthz", Duration::from_secs(5));
                if !matches!(answer, Some((200, _))) {
                    unhealthy.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(HEALTH_EVERY);
            }
        })
    };
    let pid = daemon.pid();
    let mut checks = 0;
    while started.elapsed() < Duration::from_secs(SECONDS) {
        tokio::time::sleep(HEALTH_EVERY).await;
        checks += 1;
    }
    running.store(false, Ordering::Relaxed);
    let after = (
        command_stats(&mut redis).await,
        redis_cpu_seconds(&mut redis).await,
    );
    let elapsed = started.elapsed().as_secs_f64();
    threads.push(health);
    for thread in threads {
        thread.join().unwrap();
    }
    let (peak_rss_kb, rss_after_kb) = (proc_status_kb(pid, "VmHWM"), proc_status_kb(pid, "VmRSS"));
    let lags = arrivals.join().unwrap();
    let (daemon_p50, daemon_p99) = (
        daemon_lag_bound(&address, 0.5).unwrap_or(f64::NAN),
        daemon_lag_bound(&address, 0.99).unwrap_or(f64::NAN),
    );
    stop(&mut daemon);

    let commands: u64 = after.0.values().map(|(calls, _)| calls).sum::<u64>()
        - before.0.values().map(|(calls, _)| calls).sum::<u64>();
    let scrapes = scrapes.lock().unwrap();
    println!("| figure | value |");
    println!("|---|---:|");
    println!(
        "| /healthz not 200 (of about {checks}) | {} |",
        unhealthy.load(Ordering::Relaxed)
    );
    let late: Vec<f64> = lags
        .iter()
        .zip(&due)
        .filter_map(|(arrived, due)| Some((arrived.as_ref()? - due) * 1000.0))
        .collect();
    let (p50, p99, max) = percentiles(late.clone());
    println!(
        "| move lag p50 / p99 / max ms ({} of {jobs} jobs arrived) | {p50:.1} / {p99:.1} / {max:.1} |",
        late.len()
    );
    println!(
        "| the daemon's own move lag, p50 / p99 within (its histogram's buckets) | {daemon_p50} / {daemon_p99} ms |"
    );
    println!(
        "| daemon peak RSS (VmHWM) | {:.1} MB |",
        peak_rss_kb as f64 / 1024.0
    );
    println!(
        "| daemon RSS after the scrapes | {:.1} MB |",
        rss_after_kb as f64 / 1024.0
    );
    for path in ["/metrics", "/"] {
        let mine: Vec<_> = scrapes.iter().filter(|(p, ..)| *p == path).collect();
        let ok: Vec<_> = mine
            .iter()
            .filter_map(|(_, answer, took)| match answer {
                Some((200, bytes)) => Some((*bytes, *took)),
                _ => None,
            })
            .collect();
        let bytes = ok.iter().map(|(bytes, _)| *bytes).max().unwrap_or(0);
        println!(
            "| {path}: scrapes answered 200 / asked | {} / {} |",
            ok.len(),
            mine.len()
        );
        println!("| {path}: bytes a scrape (most) | {bytes} |");
        if !ok.is_empty() {
            let (p50, p99, max) = percentiles(ok.iter().map(|(_, took)| *took).collect());
            println!("| {path}: scrape ms p50 / p99 / max | {p50:.1} / {p99:.1} / {max:.1} |");
        }
    }
    println!("| Redis commands/s | {:.0} |", commands as f64 / elapsed);
    println!(
        "| Redis CPU | {:.0}% |",
        (after.1 - before.1) / elapsed * 100.0
    );
}

/// Registers [`IDLE_TOPICS`] topics (`idle-000000`, ...), the first [`BACKLOGGED`] with 1 to 50
/// ready jobs each.
pub(crate) async fn register_topics(redis: &mut MultiplexedConnection) {
    let names: Vec<String> = (0..IDLE_TOPICS)
        .map(|index| format!("idle-{index:06}"))
        .collect();
    for slice in names.chunks(10_000) {
        let _: () = redis.sadd(REGISTRY, slice).await.unwrap();
    }
    let mut pipe = redis::pipe();
    for (index, topic) in names.iter().take(BACKLOGGED).enumerate() {
        let ids: Vec<String> = (0..index % 50 + 1).map(|n| format!("r{n}")).collect();
        pipe.lpush(ready_queue(topic), ids).ignore();
    }
    pipe.query_async::<()>(redis).await.unwrap();
}

/// Consumers on BRPOP over the live topics' ready lists, on a thread of their own: when each
/// job (by index) arrived, in unix seconds, `None` for one that never came.
pub(crate) fn consume(server: &RedisServer, jobs: usize) -> JoinHandle<Vec<Option<f64>>> {
    let info = server.info();
    std::thread::spawn(move || {
        let client = redis::Client::open(info).unwrap();
        let mut connection = client.get_connection().unwrap();
        let keys: Vec<Vec<u8>> = LIVE.iter().map(ready_queue).collect();
        let mut arrivals = vec![None; jobs];
        let mut received = 0;
        let mut idle = 0;
        while received < jobs && idle < 10 {
            let popped: Option<(String, String)> = redis::cmd("BRPOP")
                .arg(&keys)
                .arg(1)
                .query(&mut connection)
                .unwrap();
            match popped {
                Some((_, id)) => {
                    arrivals[id.parse::<usize>().unwrap()] = Some(unix_now());
                    received += 1;
                    idle = 0;
                }
                None => idle += 1,
            }
        }
        arrivals
    })
}

/// GETs `path` on a connection of its own: the status and the body, `None` when no whole answer
/// came within `timeout`.
pub(crate) fn get(address: &str, path: &str, timeout: Duration) -> Option<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).ok()?;
    let head = reply.windows(4).position(|window| window == b"\r\n\r\n")?;
    let status = std::str::from_utf8(&reply[..head])
        .ok()?
        .split(' ')
        .nth(1)?
        .parse()
        .ok()?;
    Some((status, reply.split_off(head + 4)))
}

/// The least bucket bound (ms) of the daemon's `delayer_move_lag_seconds` under which a `share`
/// of its moves fell, from its `/metrics`: how late it moved jobs by Redis's clock, apart from
/// how soon the bench's consumers, on the same 2 cores as 80 scrapers, popped them.
pub(crate) fn daemon_lag_bound(address: &str, share: f64) -> Option<f64> {
    let (_, body) = get(address, "/metrics", Duration::from_secs(10))?;
    let body = String::from_utf8(body).ok()?;
    let buckets: Vec<(f64, f64)> = body
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("delayer_move_lag_seconds_bucket{le=\"")?;
            let (bound, count) = rest.split_once("\"} ")?;
            Some((bound.parse().ok()?, count.parse().ok()?))
        })
        .collect();
    let total = buckets.last()?.1;
    buckets
        .iter()
        .find(|(_, count)| *count >= share * total)
        .map(|(bound, _)| bound * 1000.0)
}
