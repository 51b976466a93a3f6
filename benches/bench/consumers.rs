//! The client's figures, each beside a reference in the same run: pushes against the same script
//! sent raw, reserve + ack against the legacy RPOP + DEL, and jobs from push to a worker's
//! handler through the daemon.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::worker::DEFAULT_CONCURRENCY;
use delayer_client::{Client, NewPush, Worker};
use delayer_wire::keys::{Layout, job_bucket, ready_queue};
use delayer_wire::scripts::push::{Form, NewJob, PushScript};
use delayer_wire::time::unix_now;
use tokio::task::JoinSet;

use super::support::legacy_client::{self, Message};
use super::support::{
    Daemon, DaemonSetup, RedisServer, add_jobs, move_until_empty, redis_cpu_seconds,
};
use super::{RUNS, fresh, percentiles, stop};

pub(super) const PUSHES: usize = 50_000;
const RESERVES: usize = 20_000;
/// Jobs a consumer reserves (and acks) in one call, in the batched way.
const BATCH: usize = 64;
/// Concurrent tasks sharing one connection: the multiplexed connection pipelines their commands.
pub(super) const IN_FLIGHT: usize = 64;

/// Pushes: the client against the same script call sent raw, the legacy clients' MULTI, and
/// `push_many` in batches of [`PUSH_BATCH`].
pub async fn push(server: &RedisServer) {
    println!(
        "\n## Push ({PUSHES} jobs, {IN_FLIGHT} in flight on one connection; best of {RUNS})\n"
    );
    println!(
        "| client jobs/s | same script raw jobs/s | client / raw | legacy MULTI jobs/s | push_many {PUSH_BATCH} a call jobs/s | client / legacy | push_many / legacy |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let mut best = [f64::MAX; 4];
    let mut least_cpu = [f64::MAX; 4];
    for _ in 0..RUNS {
        for (index, pusher) in [
            Pusher::Client,
            Pusher::RawScript,
            Pusher::LegacyMulti,
            Pusher::Many,
        ]
        .into_iter()
        .enumerate()
        {
            let run = push_run(server, pusher).await;
            best[index] = best[index].min(run.seconds);
            least_cpu[index] = least_cpu[index].min(run.redis_cpu_seconds);
        }
    }
    let [client, raw, legacy, many] = best.map(|seconds| PUSHES as f64 / seconds);
    println!(
        "| {client:.0} | {raw:.0} | {:.2} | {legacy:.0} | {many:.0} | {:.2} | {:.2} |",
        client / raw,
        client / legacy,
        many / legacy
    );
    let [client, raw, legacy, many] = least_cpu.map(|seconds| seconds * 1e6 / PUSHES as f64);
    println!("\n### Redis CPU per job while pushing (µs, user + system, least of {RUNS})\n");
    println!("| client | same script raw | legacy MULTI | push_many {PUSH_BATCH} a call |");
    println!("|---:|---:|---:|---:|");
    println!("| {client:.1} | {raw:.1} | {legacy:.1} | {many:.1} |");
}

/// Jobs a `push_many` call of the bench pushes.
const PUSH_BATCH: usize = 1_000;

#[derive(Clone, Copy)]
pub(super) enum Pusher {
    Client,
    RawScript,
    LegacyMulti,
    /// `push_many`, [`PUSH_BATCH`] jobs a call.
    Many,
}

/// How long pushing [`PUSHES`] jobs took (delay 1 h, so the pool only grows), and Redis's CPU
/// time in it.
pub(super) async fn push_run(server: &RedisServer, pusher: Pusher) -> Run {
    let mut redis = fresh(server).await;
    let client = Client::connect(server.info()).await.unwrap();
    let script = Arc::new(PushScript::default());
    let cpu_before = redis_cpu_seconds(&mut redis).await;
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for task in 0..IN_FLIGHT {
        let (client, mut redis, script) = (client.clone(), redis.clone(), script.clone());
        tasks.spawn(async move {
            if let Pusher::Many = pusher {
                for batch in (task..PUSHES / PUSH_BATCH).step_by(IN_FLIGHT) {
                    let jobs = (batch * PUSH_BATCH..(batch + 1) * PUSH_BATCH).map(|index| {
                        NewPush::new("t", "body")
                            .delay(Duration::from_secs(3600))
                            .id(format!("{index:08}"))
                    });
                    client.push_many(jobs).await.unwrap();
                }
                return;
            }
            for index in (task..PUSHES).step_by(IN_FLIGHT) {
                let id = format!("{index:08}");
                match pusher {
                    Pusher::Client => {
                        client
                            .push("t", "body")
                            .delay(Duration::from_secs(3600))
                            .id(id)
                            .await
                            .unwrap();
                    }
                    Pusher::RawScript => {
                        let job = NewJob {
                            id: id.as_bytes(),
                            topic: b"t",
                            body: b"body",
                            due: None,
                            ttl_seconds: 3600 + 604_800,
                            delay: 3600.0,
                        };
                        script
                            .run(
                                &mut redis,
                                &Layout::LEGACY.keys(""),
                                Form::Legacy,
                                &[job],
                                None,
                            )
                            .await
                            .unwrap();
                    }
                    Pusher::Many => unreachable!("pushed above"),
                    Pusher::LegacyMulti => {
                        let message = Message {
                            id,
                            topic: "t".into(),
                            body: "body".into(),
                        };
                        legacy_client::push(&mut redis, &message, 3600)
                            .await
                            .unwrap();
                    }
                }
            }
        });
    }
    tasks.join_all().await;
    let seconds = started.elapsed().as_secs_f64();
    let redis_cpu_seconds = redis_cpu_seconds(&mut redis).await - cpu_before;
    let pushed: usize = redis.zcard(delayer_wire::keys::JOB_POOL).await.unwrap();
    assert_eq!(pushed, PUSHES, "every push landed");
    Run {
        seconds,
        redis_cpu_seconds,
    }
}

/// Consuming ready jobs: reserve + ack (at least once) against RPOP + DEL and the legacy pop
/// (RPOP + HGETALL + DEL), by one consumer (each job a few round trips: what a consumer sees) and
/// by many on one connection (Redis busy: what each job costs Redis).
pub async fn reserve_and_ack(server: &RedisServer) {
    println!("\n## Consume (ready jobs, taken until none is left; best of {RUNS})\n");
    println!(
        "| consumers | jobs | reserve, then ack jobs/s | ack overlapping the next reserve jobs/s | {BATCH} a call jobs/s | worker jobs/s | RPOP + DEL jobs/s | legacy pop jobs/s | reserve + ack / RPOP + DEL | overlapped / RPOP + DEL | {BATCH} a call / RPOP + DEL | worker / RPOP + DEL |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    // Redis's own CPU time per job, the least of the runs: what bounds the many-consumer rows.
    let mut cpu_rows = Vec::new();
    for (consumers, jobs) in [
        (1, 5_000),
        (DEFAULT_CONCURRENCY, 10_000),
        (IN_FLIGHT, RESERVES),
    ] {
        let mut best = [f64::MAX; 6];
        let mut least_cpu = [f64::MAX; 6];
        let ways = [
            Consume::Reserve,
            Consume::ReserveOverlapped,
            Consume::Batched,
            Consume::Worker,
            Consume::RpopDel,
            Consume::LegacyPop,
        ];
        for _ in 0..RUNS {
            for ((best, least_cpu), consume) in best.iter_mut().zip(&mut least_cpu).zip(ways) {
                let run = consume_run(server, consume, consumers, jobs).await;
                *best = best.min(run.seconds);
                *least_cpu = least_cpu.min(run.redis_cpu_seconds);
            }
        }
        let [reserve, overlapped, batched, worker, pop, legacy] =
            best.map(|seconds| jobs as f64 / seconds);
        println!(
            "| {consumers} | {jobs} | {reserve:.0} | {overlapped:.0} | {batched:.0} | {worker:.0} | {pop:.0} | {legacy:.0} | {:.2} | {:.2} | {:.2} | {:.2} |",
            reserve / pop,
            overlapped / pop,
            batched / pop,
            worker / pop
        );
        let micros = least_cpu.map(|seconds| seconds * 1e6 / jobs as f64);
        cpu_rows.push(format!(
            "| {consumers} | {} | {:.2} |",
            micros.map(|micros| format!("{micros:.1}")).join(" | "),
            micros[4] / micros[2]
        ));
    }
    println!("\n### Redis CPU per job while consuming (µs, user + system, least of {RUNS})\n");
    // The last column is the most a Redis-bound batched consumer can reach against RPOP + DEL.
    println!(
        "| consumers | reserve, then ack | overlapped | {BATCH} a call | worker | RPOP + DEL | legacy pop | RPOP + DEL / {BATCH} a call |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in cpu_rows {
        println!("{row}");
    }
}

#[derive(Clone, Copy)]
enum Consume {
    /// Reserve a job, ack it, reserve the next.
    Reserve,
    /// Ack a job and reserve the next at once: one round trip a job.
    ReserveOverlapped,
    /// Reserve [`BATCH`] jobs in one call, then ack them in one.
    Batched,
    /// A [`Worker`] of as many handlers as consumers, each handler returning at once.
    Worker,
    RpopDel,
    LegacyPop,
}

/// One run: how long it took, and Redis's CPU time in it.
pub(super) struct Run {
    pub(super) seconds: f64,
    redis_cpu_seconds: f64,
}

/// Takes every one of `jobs` ready jobs by `consumers`.
async fn consume_run(server: &RedisServer, consume: Consume, consumers: usize, jobs: usize) -> Run {
    let mut redis = fresh(server).await;
    let due = unix_now() - 1.0;
    add_jobs(
        &mut redis,
        (0..jobs).map(|index| (format!("{index:08}"), "t", due)),
    )
    .await;
    move_until_empty(&mut redis).await;
    let client = Client::connect(server.info()).await.unwrap();
    let taken = Arc::new(AtomicUsize::new(0));
    let cpu_before = redis_cpu_seconds(&mut redis).await;
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    if let Consume::Worker = consume {
        let (all_taken, done) = (Arc::new(tokio::sync::Notify::new()), taken.clone());
        let finished = all_taken.clone();
        let worker = Worker::new(client)
            .concurrency(consumers)
            .handle("t", move |_job| {
                if taken.fetch_add(1, Ordering::Relaxed) + 1 == jobs {
                    all_taken.notify_one();
                }
                async { Ok::<(), String>(()) }
            })
            .run(async move { finished.notified().await });
        worker.await.unwrap();
        let seconds = started.elapsed().as_secs_f64();
        let redis_cpu_seconds = redis_cpu_seconds(&mut redis).await - cpu_before;
        assert_eq!(done.load(Ordering::Relaxed), jobs, "every job taken once");
        let left: usize = redis.zcard(delayer_wire::keys::RESERVED).await.unwrap();
        assert_eq!(left, 0, "every job acked");
        return Run {
            seconds,
            redis_cpu_seconds,
        };
    }
    for _ in 0..consumers {
        let (client, mut redis, taken) = (client.clone(), redis.clone(), taken.clone());
        if let Consume::ReserveOverlapped = consume {
            tasks.spawn(async move { overlapped(&client, &taken).await });
            continue;
        }
        tasks.spawn(async move {
            loop {
                let more = match consume {
                    Consume::Reserve => reserve_one(&client).await,
                    Consume::Batched => {
                        let more = reserve_batch(&client).await;
                        taken.fetch_add(more.saturating_sub(1), Ordering::Relaxed);
                        more > 0
                    }
                    Consume::ReserveOverlapped | Consume::Worker => unreachable!("its own loop"),
                    Consume::RpopDel => pop_one(&mut redis).await,
                    Consume::LegacyPop => {
                        legacy_client::pop(&mut redis, "t").await.unwrap().is_some()
                    }
                };
                if !more {
                    return;
                }
                taken.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    tasks.join_all().await;
    let seconds = started.elapsed().as_secs_f64();
    let redis_cpu_seconds = redis_cpu_seconds(&mut redis).await - cpu_before;
    assert_eq!(taken.load(Ordering::Relaxed), jobs, "every job taken once");
    Run {
        seconds,
        redis_cpu_seconds,
    }
}

/// Takes jobs, acking each one in the same round trip as the next reserve.
async fn overlapped(client: &Client, taken: &AtomicUsize) {
    let reserve = || client.reserve(&["t"], Duration::from_secs(60), Duration::ZERO);
    let mut held = reserve().await.unwrap();
    while let Some(job) = held {
        taken.fetch_add(1, Ordering::Relaxed);
        let (acked, next) = tokio::join!(client.ack(&job), reserve());
        assert_eq!(acked.unwrap(), delayer_client::Acked::Done);
        held = next.unwrap();
    }
}

/// Reserves up to [`BATCH`] jobs and acks them; how many it took.
async fn reserve_batch(client: &Client) -> usize {
    let jobs = client
        .reserve_many(&["t"], Duration::from_secs(60), BATCH, Duration::ZERO)
        .await
        .unwrap();
    let acked = client.ack_many(&jobs).await;
    assert!(
        acked
            .iter()
            .all(|acked| matches!(acked, Ok(delayer_client::Acked::Done)))
    );
    jobs.len()
}

async fn reserve_one(client: &Client) -> bool {
    let job = client
        .reserve(&["t"], Duration::from_secs(60), Duration::ZERO)
        .await
        .unwrap();
    match job {
        Some(job) => client.ack(&job).await.unwrap() == delayer_client::Acked::Done,
        None => false,
    }
}

/// RPOP + DEL of one job of topic `t`: whether there was one.
pub(super) async fn pop_one(redis: &mut MultiplexedConnection) -> bool {
    let id: Option<String> = redis.rpop(ready_queue("t"), None).await.unwrap();
    match id {
        Some(id) => {
            let _: () = redis.del(job_bucket(&id)).await.unwrap();
            true
        }
        None => false,
    }
}

/// Jobs pushed with a delay at a steady rate, moved by the daemon, handled by a worker: handler
/// start minus due time.
pub async fn end_to_end(server: &RedisServer) {
    const RATE: usize = 5_000;
    const SECONDS: usize = 5;
    const DELAY: Duration = Duration::from_millis(100);
    println!(
        "\n## End to end ({RATE} jobs/s for {SECONDS} s, delay {} ms, release daemon, worker of {IN_FLIGHT})\n",
        DELAY.as_millis()
    );
    println!("| jobs | due → handler p50 ms | p99 ms | max ms | early |");
    println!("|---:|---:|---:|---:|---:|");
    fresh(server).await;
    let (config, logs) = server.daemon_config("e2e", "");
    let mut daemon = Daemon::start(&config);
    logs.wait_for_line("Service started successfully");
    let client = Client::connect(server.info()).await.unwrap();
    let jobs = RATE * SECONDS;
    let late_ms = Arc::new(Mutex::new(Vec::with_capacity(jobs)));
    let recorded = late_ms.clone();
    let (stop_worker, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = Worker::new(client.clone())
        .concurrency(IN_FLIGHT)
        .handle("e2e", move |job| {
            let started = unix_now();
            let due = delayer_wire::time::to_unix(job.due.expect("our pushes record it"));
            recorded.lock().unwrap().push((started - due) * 1000.0);
            async { Ok::<(), String>(()) }
        })
        .run(async {
            let _ = stopped.await;
        });
    let working = tokio::spawn(worker);

    // Pushed in 1 ms ticks: RATE / 1000 jobs each.
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    let mut pushes = JoinSet::new();
    for index in 0..jobs / (RATE / 1000) {
        tick.tick().await;
        for job in 0..RATE / 1000 {
            let client = client.clone();
            pushes.spawn(async move {
                client
                    .push("e2e", format!("job {index}.{job}"))
                    .delay(DELAY)
                    .await
                    .unwrap();
            });
        }
    }
    pushes.join_all().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while late_ms.lock().unwrap().len() < jobs {
        assert!(Instant::now() < deadline, "every job reaches the handler");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop_worker.send(()).unwrap();
    working.await.unwrap().unwrap();
    stop(&mut daemon);

    let late_ms = std::mem::take(&mut *late_ms.lock().unwrap());
    let early = late_ms.iter().filter(|late| **late < 0.0).count();
    let (p50, p99, max) = percentiles(late_ms);
    println!("| {jobs} | {p50:.2} | {p99:.2} | {max:.2} | {early} |");
}
