//! The compact layout as built (see `delayer_wire::compact`), beside the legacy one in the same
//! run: bytes per waiting job pushed by the client's `push_many` at 16 B, 100 B and 1 KiB bodies;
//! the daemon moving 100,000 jobs due at one instant, pushed while it runs and while it was down,
//! compact against legacy; and with many jobs waiting compact (`DELAYER_BENCH_COMPACT_JOBS`,
//! default 1,000,000; a tenth of them due at one instant): memory, the push rate, `get` and
//! `remove` of random ids, the tenth's drain and the daemon's peak RSS. And a newcomer's first
//! pushes: `delayer push --stdin` of 100,000 jobs a second after a daemon started on an empty
//! Redis, in bytes per job.

use std::time::{Duration, Instant, SystemTime};

use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::{Client, NewPush, Settings};

use crate::memory::used_memory;
use crate::support::{Daemon, DaemonSetup, RedisServer, beat_as_stager, wait_for};
use crate::{RUNS, TOPICS, fresh, percentiles, stop};

const JOBS: usize = 100_000;
const BODIES: [usize; 3] = [16, 100, 1024];
/// Jobs handed to `push_many` at once (it sends 1,000 a script call).
const PUSH_SLICE: usize = 10_000;

/// A client pushing compact (`Some`: from that delay on) or legacy (`None`).
async fn client(server: &RedisServer, compact_after: Option<Duration>) -> Client {
    let settings = Settings {
        compact_after,
        ..Settings::default()
    };
    Client::connect_with(server.info(), settings).await.unwrap()
}

/// Pushes `count` jobs with 16 B ids and `body` B bodies over `topics`, due from `first` on,
/// `spacing` apart; the seconds it took.
async fn push(
    client: &Client,
    count: usize,
    body: usize,
    topics: &[&str],
    first: SystemTime,
    spacing: Duration,
) -> f64 {
    let started = Instant::now();
    let body = vec![b'x'; body];
    for slice in (0..count).collect::<Vec<_>>().chunks(PUSH_SLICE) {
        let jobs: Vec<NewPush> = slice
            .iter()
            .map(|&n| {
                NewPush::new(topics[n % topics.len()], body.clone())
                    .id(format!("{n:016}"))
                    .at(first + spacing * n as u32)
            })
            .collect();
        client.push_many(jobs).await.unwrap();
    }
    started.elapsed().as_secs_f64()
}

/// Watches the ready lists of [`TOPICS`] until they hold `count` jobs: the seconds from the
/// first to the last.
async fn ready_in(redis: &mut MultiplexedConnection, count: usize) -> f64 {
    let mut first = None;
    loop {
        let mut ready = 0;
        for topic in TOPICS {
            let length: usize = redis
                .llen(delayer_wire::keys::ready_queue(topic))
                .await
                .unwrap();
            ready += length;
        }
        if ready > 0 && first.is_none() {
            first = Some(Instant::now());
        }
        if ready == count {
            return first.unwrap().elapsed().as_secs_f64();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

pub async fn compact(server: &RedisServer) {
    memory(server).await;
    cold_start(server).await;
    drain(server).await;
    many(server).await;
}

async fn memory(server: &RedisServer) {
    println!(
        "\n## Compact layout: bytes per waiting job ({JOBS} jobs pushed with push_many, 16 B \
         ids, topic \"order.close\", due from 1 h ahead over 1 h; used_memory after − before)\n"
    );
    println!("| body | legacy | compact | compact / legacy |");
    println!("|---:|---:|---:|---:|");
    for body in BODIES {
        let mut bytes = [0.0; 2];
        for (form, after) in [None, Some(Duration::from_secs(124))]
            .into_iter()
            .enumerate()
        {
            let mut redis = fresh(server).await;
            beat_as_stager(&mut redis).await;
            let client = client(server, after).await;
            let before = used_memory(&mut redis).await;
            let first = SystemTime::now() + Duration::from_secs(3_600);
            let spacing = Duration::from_secs(3_600) / JOBS as u32;
            push(&client, JOBS, body, &["order.close"], first, spacing).await;
            let after = used_memory(&mut redis).await;
            bytes[form] = (after - before) as f64 / JOBS as f64;
            if form == 1 {
                let compact: usize = redis.hlen("delayer:compact:index").await.unwrap();
                assert_eq!(compact, JOBS, "every job compact");
            }
        }
        println!(
            "| {body} B | {:.0} B | {:.0} B | {:.2} |",
            bytes[0],
            bytes[1],
            bytes[1] / bytes[0]
        );
    }
}

/// A newcomer's first pushes: a daemon started a second before on an empty Redis (no beat, no
/// `wanted`), then `delayer push order.close --stdin --delay 1h` of `JOBS` 100 B bodies.
async fn cold_start(server: &RedisServer) {
    use std::io::Write;
    println!(
        "\n## Compact layout: a newcomer's first pushes (a daemon started 1 s before on an empty \
         Redis; `delayer push --stdin --delay 1h`, {JOBS} jobs, 100 B bodies)\n"
    );
    println!("| run | bytes per job | jobs compact | push seconds |");
    println!("|---:|---:|---:|---:|");
    for run in 1..=RUNS {
        let mut redis = fresh(server).await;
        let (config, _) = server.daemon_config("cold-start", "");
        let mut daemon = Daemon::start(&config);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let before = used_memory(&mut redis).await;
        let started = Instant::now();
        let mut push = crate::support::delayer_command()
            .args(["-c", config.to_str().unwrap()])
            .args(["push", "order.close", "--stdin", "--delay", "1h"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = push.stdin.take().unwrap();
        let line = format!("{}\n", "b".repeat(100));
        stdin.write_all(line.repeat(JOBS).as_bytes()).unwrap();
        drop(stdin);
        assert!(push.wait().unwrap().success());
        let seconds = started.elapsed().as_secs_f64();
        let after = used_memory(&mut redis).await;
        let compact: usize = redis.hlen("delayer:compact:index").await.unwrap();
        println!(
            "| {run} | {:.0} B | {:.1}% | {seconds:.2} |",
            (after - before) as f64 / JOBS as f64,
            compact as f64 * 100.0 / JOBS as f64
        );
        stop(&mut daemon);
    }
}

/// How long the daemon takes from its first job on a ready list to the last, for `JOBS` jobs
/// (100 B bodies, 10 topics) due at one instant: pushed while it runs (compact jobs are then
/// staged before they fall due), or while no daemon ran (a backlog when it starts).
async fn drained(server: &RedisServer, compact_after: Option<Duration>, backlog: bool) -> f64 {
    let mut redis = fresh(server).await;
    beat_as_stager(&mut redis).await;
    let client = client(server, compact_after).await;
    let (config, _) = server.daemon_config("compact-drain", "");
    let mut daemon = (!backlog).then(|| Daemon::start(&config));
    let due = SystemTime::now() + Duration::from_secs(6);
    push(&client, JOBS, 100, &TOPICS, due, Duration::ZERO).await;
    wait_for(Duration::from_secs(60), "the jobs to fall due", || async {
        (SystemTime::now() > due + Duration::from_millis(10)).then_some(())
    })
    .await;
    let mut daemon = daemon.take().unwrap_or_else(|| Daemon::start(&config));
    let seconds = ready_in(&mut redis, JOBS).await;
    stop(&mut daemon);
    seconds
}

async fn drain(server: &RedisServer) {
    println!(
        "\n## Compact layout: the daemon moving {JOBS} jobs due at one instant (10 topics; first \
         to last on the ready lists; best of {RUNS})\n"
    );
    println!("| case | legacy jobs/s | compact jobs/s | compact / legacy |");
    println!("|---|---:|---:|---:|");
    for (case, backlog) in [
        (
            "pushed while the daemon runs (compact jobs staged ahead)",
            false,
        ),
        ("fell due while no daemon ran (a backlog)", true),
    ] {
        let (mut legacy, mut compact) = (f64::MAX, f64::MAX);
        for _ in 0..RUNS {
            legacy = legacy.min(drained(server, None, backlog).await);
            let after = Some(Duration::from_millis(1));
            compact = compact.min(drained(server, after, backlog).await);
        }
        println!(
            "| {case} | {:.0} | {:.0} | {:.2} |",
            JOBS as f64 / legacy,
            JOBS as f64 / compact,
            legacy / compact
        );
    }
}

async fn many(server: &RedisServer) {
    let count: usize = std::env::var("DELAYER_BENCH_COMPACT_JOBS")
        .ok()
        .and_then(|count| count.parse().ok())
        .unwrap_or(1_000_000);
    let burst = count / 10;
    println!(
        "\n## Compact layout: {count} jobs waiting (100 B bodies, 10 topics, pushed with push_many \
         while a daemon runs): {} due from 1 h ahead over a day, then {burst} due at one instant \
         (staged ahead, then moved)\n",
        count - burst
    );
    let mut redis = fresh(server).await;
    let (config, _) = server.daemon_config("compact-many", "");
    let mut daemon = Daemon::start(&config);
    beat_as_stager(&mut redis).await;
    let far = client(server, Some(Duration::from_secs(124))).await;
    let before = used_memory(&mut redis).await;
    let first = SystemTime::now() + Duration::from_secs(3_600);
    let spacing = Duration::from_secs(86_400) / (count - burst) as u32;
    let seconds = push(&far, count - burst, 100, &TOPICS, first, spacing).await;
    let after = used_memory(&mut redis).await;
    // The burst: its own ids (after the others'), due 45 s after its push starts.
    let soon = client(server, Some(Duration::from_millis(1))).await;
    let due = SystemTime::now() + Duration::from_secs(45);
    let body = vec![b'x'; 100];
    for slice in (count - burst..count)
        .collect::<Vec<_>>()
        .chunks(PUSH_SLICE)
    {
        let jobs: Vec<NewPush> = slice
            .iter()
            .map(|&n| {
                NewPush::new(TOPICS[n % TOPICS.len()], body.clone())
                    .id(format!("{n:016}"))
                    .at(due)
            })
            .collect();
        soon.push_many(jobs).await.unwrap();
    }
    let mut times = [Vec::new(), Vec::new()];
    for n in 0..1_000u64 {
        // Spread over the far jobs without a random generator: a multiplicative hash.
        let id = format!(
            "{:016}",
            n.wrapping_mul(2_654_435_761) % (count - burst) as u64
        );
        let started = Instant::now();
        let job = far.get(&id).await.unwrap();
        times[0].push(started.elapsed().as_secs_f64() * 1e3);
        assert!(job.body.is_some() || job.state == delayer_client::State::Unknown);
        let started = Instant::now();
        far.remove(&id).await.unwrap();
        times[1].push(started.elapsed().as_secs_f64() * 1e3);
    }
    let [gets, removes] = times.map(percentiles);
    let drained = ready_in(&mut redis, burst).await;
    let rss_mb = crate::proc_status_kb(daemon.pid(), "VmHWM") as f64 / 1024.0;
    stop(&mut daemon);
    println!(
        "| jobs | used_memory | B/job | push jobs/s | get p50 / p99 ms | remove p50 / p99 ms | {burst} due at once: jobs/s | daemon peak RSS |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {} | {:.1} MB | {:.0} | {:.0} | {:.3} / {:.3} | {:.3} / {:.3} | {:.0} | {rss_mb:.1} MB |",
        count - burst,
        (after - before) as f64 / 1e6,
        (after - before) as f64 / (count - burst) as f64,
        (count - burst) as f64 / seconds,
        gets.0,
        gets.1,
        removes.0,
        removes.1,
        burst as f64 / drained,
    );
}
