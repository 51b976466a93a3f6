//! Recurring schedules under the release daemon: 10,000 ticking every minute and 1,000 every
//! second, with Redis's and the daemon's CPU per tick, tick-to-move lateness and exactly once;
//! then the mover's drain and lateness without and with the 1,000 per-second schedules.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::DateTime;
use delayer_client::inspector::{Definition, Source};
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::redis::{self, AsyncCommands};
use delayer_client::{Client, Inspector};
use delayer_wire::keys::{JOB_POOL, Layout, job_bucket, ready_queue};
use delayer_wire::time::unix_now;
use tokio::task::JoinSet;

use super::support::{Daemon, DaemonSetup, Logs, RedisServer, read, redis_cpu_seconds};
use super::{clock_ticks_per_second, cpu_ticks, fresh, percentiles, stop};

/// The schedules' topics: apart from the mover figures' `TOPICS`, whose ready lists they count.
const TOPICS: [&str; 4] = ["s0", "s1", "s2", "s3"];
/// Schedules saved at once over the client's one connection.
const IN_FLIGHT: usize = 64;
/// How long the daemon's idle cost (no schedule yet) is measured, to take it out of the figures.
const IDLE_WINDOW: Duration = Duration::from_secs(5);

/// How many schedules tick how often, over how many ticks.
struct Case {
    name: &'static str,
    schedules: usize,
    period_ms: i64,
    ticks: usize,
}

const PER_MINUTE: Case = Case {
    name: "minute",
    schedules: 10_000,
    period_ms: 60_000,
    ticks: 3,
};

const PER_SECOND: Case = Case {
    name: "second",
    schedules: 1_000,
    period_ms: 1_000,
    ticks: 20,
};

pub async fn schedules(server: &RedisServer) {
    let started = std::time::Instant::now();
    let mut rows = Vec::new();
    for case in [PER_SECOND, PER_MINUTE] {
        let figures = case_run(server, &case).await;
        rows.push((case, figures));
    }
    print_cases(&rows);
    println!(
        "\n(the schedules figures took {:.0} s)",
        started.elapsed().as_secs_f64()
    );
}

/// What one case measured.
struct Figures {
    /// Seconds the saves took (the client's, 64 at a time).
    saved_in: f64,
    /// Seconds measured (around each tick, or one stretch over all of them).
    measured: f64,
    /// CPU seconds over them, and what the daemon idle costs in as long.
    redis_cpu: f64,
    redis_idle: f64,
    daemon_cpu: f64,
    daemon_idle: f64,
    /// Tick → move of the first tick's jobs and of the later ticks'.
    first: Moves,
    later: Moves,
    /// Jobs of the measured ticks in the ready lists, of how many.
    jobs: usize,
    expected: usize,
    /// Ids found twice (in the ready lists, or in a ready list and the pool).
    twice: usize,
    /// Ticks the schedules count as missed.
    missed: u64,
    /// Schedules with no job of the measured ticks.
    never_fired: usize,
}

/// The moves of some ticks' jobs, as the daemon logged them.
#[derive(Default)]
struct Moves {
    late_ms: Vec<f64>,
    /// Moved before their tick.
    early: usize,
    /// How far ahead of its tick each job was pushed (0: at or after it).
    lead_ms: Vec<f64>,
    /// Jobs no "Job is ready" line lists.
    unlogged: usize,
}

async fn case_run(server: &RedisServer, case: &Case) -> Figures {
    let mut redis = fresh(server).await;
    let (config, logs) =
        server.daemon_config(&format!("schedules-{}", case.name), "log_format = json");
    let mut daemon = Daemon::start(&config);
    logs.wait_for_line("Service started successfully");
    let clock = RedisClock::read(&mut redis).await;

    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = Reading::take(&mut redis, &daemon).await;
    tokio::time::sleep(IDLE_WINDOW).await;
    let idle = Reading::take(&mut redis, &daemon).await.since(&before);
    let idle_seconds = IDLE_WINDOW.as_secs_f64();

    let client = Client::connect(server.info()).await.unwrap();
    let (first_tick, saved_in) = save_for_ticks(&client, case, &clock).await;
    let ticks: Vec<i64> = (0..case.ticks as i64)
        .map(|index| first_tick + index * case.period_ms)
        .collect();

    // Around each tick when they are far apart: the claims begin half a second ahead. Else one
    // stretch exactly `ticks` periods long, from just after the first tick's claims: in a steady
    // state it holds as many claims as moves.
    let windows: Vec<(f64, f64)> = if case.period_ms > 10_000 {
        ticks
            .iter()
            .map(|tick| (*tick as f64 / 1000.0 - 2.0, *tick as f64 / 1000.0 + 5.0))
            .collect()
    } else {
        let last = *ticks.last().unwrap() as f64 / 1000.0;
        vec![(first_tick as f64 / 1000.0 - 0.25, last + 0.75)]
    };
    let mut used = Reading::default();
    let mut measured = 0.0;
    for (from, to) in &windows {
        clock.sleep_until(*from).await;
        let start = Reading::take(&mut redis, &daemon).await;
        clock.sleep_until(*to).await;
        used = used.plus(&Reading::take(&mut redis, &daemon).await.since(&start));
        measured += to - from;
    }
    // Before the next tick's claims (per minute) or with them in the pool (per second).
    stop(&mut daemon);

    let (jobs, twice) = exactly_once(&mut redis, case, &ticks).await;
    let (first, later) = moves(&mut redis, &logs, &ticks, &jobs).await;
    let missed = counters(&mut redis, case, "missed").await;
    let fired: HashSet<&str> = jobs.iter().filter_map(|id| Some(tick_of(id)?.0)).collect();
    Figures {
        saved_in,
        measured,
        redis_cpu: used.redis,
        redis_idle: idle.redis / idle_seconds * measured,
        daemon_cpu: used.daemon,
        daemon_idle: idle.daemon / idle_seconds * measured,
        first,
        later,
        jobs: jobs.len(),
        expected: case.schedules * case.ticks,
        twice,
        missed,
        never_fired: case.schedules - fired.len(),
    }
}

/// Saves the case's schedules; returns the first tick they all have (unix ms) and the seconds
/// the saves took.
async fn save_for_ticks(client: &Client, case: &Case, clock: &RedisClock) -> (i64, f64) {
    // Every minute at a second chosen so that the first tick comes soon after the saves (a
    // `* * * * *` would wait up to a minute for its first): the same load, on time.
    let (cron, first_minute) = if case.period_ms == 1_000 {
        ("* * * * * *".to_string(), None)
    } else {
        let first = clock.now().ceil() as i64 + 15;
        (format!("{} * * * * *", first % 60), Some(first))
    };
    let saving = clock.now();
    save_named(client, case.name, case.schedules, &cron).await;
    let saved = clock.now();
    let first_tick = match first_minute {
        // Every schedule's first tick is at most this one (saved then or earlier).
        None => (saved.ceil() + 1.0) as i64 * 1000,
        Some(first) => {
            assert!(
                saved < (first - 5) as f64,
                "saving {} schedules took more than 10 s",
                case.schedules
            );
            first * 1000
        }
    };
    (first_tick, saved - saving)
}

/// Saves `count` schedules of `cron` named `prefix-00000`..., over [`TOPICS`].
pub(super) async fn save_named(client: &Client, prefix: &str, count: usize, cron: &str) {
    let inspector = Inspector::new(client);
    let mut tasks = JoinSet::new();
    for task in 0..IN_FLIGHT {
        let (inspector, prefix, cron) = (inspector.clone(), prefix.to_string(), cron.to_string());
        tasks.spawn(async move {
            for index in (task..count).step_by(IN_FLIGHT) {
                let topic = TOPICS[index % TOPICS.len()];
                let definition = Definition::new(&name(&prefix, index), &cron, topic);
                inspector
                    .save_schedule(&definition, Source::Api)
                    .await
                    .unwrap();
            }
        });
    }
    tasks.join_all().await;
}

fn name(prefix: &str, index: usize) -> String {
    format!("{prefix}-{index:05}")
}

/// The ids of the measured ticks' jobs in the ready lists, and how many ids are there twice
/// (or also in the pool).
async fn exactly_once(
    redis: &mut MultiplexedConnection,
    case: &Case,
    ticks: &[i64],
) -> (Vec<String>, usize) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for topic in TOPICS {
        let ids: Vec<String> = redis.lrange(ready_queue(topic), 0, -1).await.unwrap();
        for id in ids {
            *seen.entry(id).or_default() += 1;
        }
    }
    let waiting: Vec<String> = redis.zrange(JOB_POOL, 0, -1).await.unwrap();
    for id in waiting {
        *seen.entry(id).or_default() += 1;
    }
    let twice = seen.values().filter(|count| **count > 1).count();
    let prefix = format!("{}-", case.name);
    let jobs = seen
        .into_keys()
        .filter(|id| {
            tick_of(id)
                .is_some_and(|(name, tick)| name.starts_with(&prefix) && ticks.contains(&tick))
        })
        .collect::<Vec<_>>();
    // Only ready ones count: one still in the pool has not moved.
    let mut ready = Vec::with_capacity(jobs.len());
    for chunk in jobs.chunks(10_000) {
        let mut pipe = redis::pipe();
        for id in chunk {
            pipe.zscore(JOB_POOL, id);
        }
        let scores: Vec<Option<f64>> = pipe.query_async(redis).await.unwrap();
        ready.extend(
            chunk
                .iter()
                .zip(scores)
                .filter(|(_, score)| score.is_none())
                .map(|(id, _)| id.clone()),
        );
    }
    (ready, twice)
}

/// The moves of `jobs` (ids of ready tick jobs) by the daemon's log, the first tick's apart.
///
/// A move's time is that of its "Job is ready" line (JSON lines carry the time to the
/// millisecond, cut, not rounded): the daemon writes it when the script that moved the job has
/// returned, so it is the move as the daemon saw it end, whatever the bench polls. The tick is in
/// the job's id. This host is Redis's, so the two clocks are one.
async fn moves(
    redis: &mut MultiplexedConnection,
    logs: &Logs,
    ticks: &[i64],
    jobs: &[String],
) -> (Moves, Moves) {
    let mut logged: HashMap<String, i64> = HashMap::new();
    for line in read(&logs.access).lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let is_move = event["message"]
            .as_str()
            .is_some_and(|message| message.starts_with("Job is ready"));
        let (Some(time), Some(ids)) = (event["time"].as_str(), event["ids"].as_array()) else {
            continue;
        };
        if !is_move {
            continue;
        }
        let at = DateTime::parse_from_rfc3339(time)
            .unwrap()
            .timestamp_millis();
        for id in ids.iter().filter_map(|id| id.as_str()) {
            logged.insert(id.to_string(), at);
        }
    }
    let leads = leads(redis, jobs).await;
    let (mut first, mut later) = (Moves::default(), Moves::default());
    for (id, lead) in jobs.iter().zip(leads) {
        let (_, tick) = tick_of(id).unwrap();
        let moves = if tick == ticks[0] {
            &mut first
        } else {
            &mut later
        };
        moves.lead_ms.push(lead);
        match logged.get(id) {
            Some(at) => {
                moves.late_ms.push((at - tick) as f64);
                moves.early += usize::from(*at < tick);
            }
            None => moves.unlogged += 1,
        }
    }
    (first, later)
}

/// How far ahead of its tick each job was pushed, ms: the `delay` the claim script wrote in its
/// bucket (its due time less Redis's time then, 0 when it was pushed late).
async fn leads(redis: &mut MultiplexedConnection, jobs: &[String]) -> Vec<f64> {
    let mut leads = Vec::with_capacity(jobs.len());
    for chunk in jobs.chunks(10_000) {
        let mut pipe = redis::pipe();
        for id in chunk {
            pipe.hget(job_bucket(id), "delay");
        }
        let delays: Vec<String> = pipe.query_async(redis).await.unwrap();
        leads.extend(
            delays
                .iter()
                .map(|delay| delay.parse::<f64>().unwrap() * 1000.0),
        );
    }
    leads
}

/// The sum of a counter of every schedule of `case`.
async fn counters(redis: &mut MultiplexedConnection, case: &Case, field: &str) -> u64 {
    let keys = Layout::LEGACY.keys("");
    let mut pipe = redis::pipe();
    for index in 0..case.schedules {
        pipe.hget(keys.schedule(&name(case.name, index)), field);
    }
    let counts: Vec<Option<u64>> = pipe.query_async(redis).await.unwrap();
    counts.into_iter().flatten().sum()
}

/// The schedule and the tick (unix ms) of a tick's job id, `name@2026-11-18T11:06:40Z`.
fn tick_of(id: &str) -> Option<(&str, i64)> {
    let (name, time) = id.split_once('@')?;
    let tick = DateTime::parse_from_rfc3339(time).ok()?.timestamp_millis();
    Some((name, tick))
}

fn print_cases(rows: &[(Case, Figures)]) {
    println!("\n## Schedules (release daemon; CPU less the daemon's idle cost over as long)\n");
    println!(
        "| schedules | saved in s | ticks each | measured s | Redis CPU s (idle) | Redis CPU per tick µs | daemon CPU s (idle) | daemon CPU per tick µs |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (case, figures) in rows {
        let fired = (case.schedules * case.ticks) as f64;
        println!(
            "| {} every {} | {:.2} | {} | {:.1} | {:.3} ({:.3}) | {:.1} | {:.2} ({:.2}) | {:.1} |",
            case.schedules,
            case.name,
            figures.saved_in,
            case.ticks,
            figures.measured,
            figures.redis_cpu,
            figures.redis_idle,
            (figures.redis_cpu - figures.redis_idle) * 1e6 / fired,
            figures.daemon_cpu,
            figures.daemon_idle,
            (figures.daemon_cpu - figures.daemon_idle) * 1e6 / fired,
        );
    }
    println!(
        "\n### Tick to move (the daemon's \"Job is ready\" line, ms) and pushes ahead of the tick\n"
    );
    println!(
        "| schedules | ticks | jobs | p50 ms | p99 ms | max ms | early | unlogged | pushed ahead: most ms | least ms | at or after the tick |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (case, figures) in rows {
        for (which, moves) in [("first", &figures.first), ("later", &figures.later)] {
            if moves.lead_ms.is_empty() {
                continue;
            }
            let (p50, p99, max) = if moves.late_ms.is_empty() {
                (f64::NAN, f64::NAN, f64::NAN)
            } else {
                percentiles(moves.late_ms.clone())
            };
            let least = moves.lead_ms.iter().copied().fold(f64::MAX, f64::min);
            let most = moves.lead_ms.iter().copied().fold(f64::MIN, f64::max);
            let late = moves.lead_ms.iter().filter(|lead| **lead <= 0.0).count();
            println!(
                "| {} every {} | {which} | {} | {p50:.0} | {p99:.0} | {max:.0} | {} | {} | {most:.0} | {least:.0} | {late} |",
                case.schedules,
                case.name,
                moves.lead_ms.len(),
                moves.early,
                moves.unlogged
            );
        }
    }
    println!("\n### Exactly once\n");
    println!(
        "| schedules | jobs moved of the ticks measured | ticks × schedules | ids twice | ticks counted missed | schedules that never fired |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (case, figures) in rows {
        println!(
            "| {} every {} | {} | {} | {} | {} | {} |",
            case.schedules,
            case.name,
            figures.jobs,
            figures.expected,
            figures.twice,
            figures.missed,
            figures.never_fired
        );
    }
}

/// CPU time used so far: Redis's (from INFO) and the daemon's (from /proc), seconds.
#[derive(Default)]
struct Reading {
    redis: f64,
    daemon: f64,
}

impl Reading {
    async fn take(redis: &mut MultiplexedConnection, daemon: &Daemon) -> Reading {
        Reading {
            redis: redis_cpu_seconds(redis).await,
            daemon: cpu_ticks(daemon.pid()) as f64 / clock_ticks_per_second(),
        }
    }

    fn since(&self, earlier: &Reading) -> Reading {
        Reading {
            redis: self.redis - earlier.redis,
            daemon: self.daemon - earlier.daemon,
        }
    }

    fn plus(&self, other: &Reading) -> Reading {
        Reading {
            redis: self.redis + other.redis,
            daemon: self.daemon + other.daemon,
        }
    }
}

/// Redis's clock, read once: ticks are on it, and the bench sleeps by it rather than polling
/// Redis while it measures Redis's CPU.
struct RedisClock {
    ahead: f64,
}

impl RedisClock {
    async fn read(redis: &mut MultiplexedConnection) -> RedisClock {
        let (seconds, micros): (f64, f64) = redis::cmd("TIME").query_async(redis).await.unwrap();
        RedisClock {
            ahead: seconds + micros / 1e6 - unix_now(),
        }
    }

    fn now(&self) -> f64 {
        unix_now() + self.ahead
    }

    async fn sleep_until(&self, at: f64) {
        tokio::time::sleep(Duration::from_secs_f64((at - self.now()).max(0.0))).await;
    }
}
