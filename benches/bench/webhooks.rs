//! Delivery to a webhook by one daemon, to a receiver on the loopback that answers at once:
//! a backlog of due jobs drained (jobs/s, Redis's and the daemon's CPU per job, beside the
//! ready-list path doing the same Redis work; QStash's messages too), then 5,000 jobs falling due a second (due to
//! received, by this host's clock, which is Redis's), without and with flow control.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayer_client::{Client, NewPush, Topic};

use super::delivery::{Backlog, drain, left};
use super::support::receiver::{Receiver, Reply};
use super::support::{Daemon, DaemonSetup, RedisServer, free_port, left_in_redis, redis_ms};
use super::{TOPICS, clock_ticks_per_second, cpu_ticks, fresh, stop};

const BACKLOG: usize = 20_000;
/// Due a second, for [`SECONDS`].
const RATE: usize = 5_000;
const SECONDS: usize = 4;

pub async fn webhooks(server: &RedisServer) {
    let receiver = Receiver::start(|_, _| Reply::ok()).await;
    let hook = |extra: &str| {
        format!(
            "timer_interval = 100\n[webhook.bench]\ntopics = {}\nurl = {}/{{topic}}\n{extra}",
            TOPICS.join(","),
            receiver.url
        )
    };
    println!(
        "\n## Delivery to a webhook ({BACKLOG} due jobs, 10 topics, one daemon, a receiver on \
         the loopback)\n"
    );
    println!("| path | jobs/s | Redis CPU µs/job | daemon CPU µs/job | receiver CPU µs/job |");
    println!("|---|---:|---:|---:|---:|");
    let messages_to = format!("{}/qstash", receiver.url);
    let api = format!(
        "timer_interval = 100\n[http]\nlisten = 127.0.0.1:{}\n\
         [qstash]\ntoken = t\nallow = 127.0.0.1\ncurrent_signing_key = k\n",
        free_port()
    );
    for (name, extra, backlog) in [
        (
            "ready lists, a client reserving and acking",
            None,
            Backlog::Jobs,
        ),
        ("webhook", Some(hook("")), Backlog::Jobs),
        (
            "webhook, signed, parallelism 100",
            Some(hook(
                "parallelism = 100\n[qstash]\ncurrent_signing_key = k\n",
            )),
            Backlog::Jobs,
        ),
        (
            "QStash messages, signed",
            Some(api.clone()),
            Backlog::Messages(&messages_to),
        ),
    ] {
        let ticks = clock_ticks_per_second();
        let bench_before = cpu_ticks(std::process::id());
        let run = drain(server, BACKLOG, extra.as_deref(), backlog).await;
        let receiver_cpu = (cpu_ticks(std::process::id()) - bench_before) as f64 / ticks;
        println!(
            "| {name} | {:.0} | {:.1} | {:.1} | {:.1} |",
            BACKLOG as f64 / run.seconds,
            run.redis_cpu * 1e6 / BACKLOG as f64,
            run.daemon_cpu * 1e6 / BACKLOG as f64,
            receiver_cpu * 1e6 / BACKLOG as f64,
        );
    }

    println!(
        "\n## Webhook lateness ({RATE} jobs falling due a second for {SECONDS} s, one daemon)\n"
    );
    println!("| path | jobs | p50 ms | p99 ms | max ms |");
    println!("|---|---:|---:|---:|---:|");
    for (name, extra) in [
        ("ready lists, a client reserving (due to reserved)", None),
        ("webhook (due to received)", Some(hook(""))),
        (
            "webhook, parallelism 100, rate 10000/s",
            Some(hook("parallelism = 100\nrate = 10000/s\n")),
        ),
    ] {
        let before = receiver.received().len();
        let (due, reserved) = falling_due(server, extra.as_deref()).await;
        let taken: Vec<(String, i64)> = match extra {
            None => reserved,
            Some(_) => receiver.received()[before..]
                .iter()
                .map(|request| (request.header("delayer-id").to_string(), request.at_ms))
                .collect(),
        };
        let mut late: Vec<i64> = taken.iter().map(|(id, at)| at - due[id]).collect();
        late.sort_unstable();
        let at = |share: f64| late[((late.len() - 1) as f64 * share) as usize];
        println!(
            "| {name} | {} | {} | {} | {} |",
            late.len(),
            at(0.5),
            at(0.99),
            at(1.0)
        );
    }
}

/// The flow-control figures, measured at the receiver: `rate = 100/s` over 4 daemons
/// with 1,000 jobs due at once (how long they take, and the most started in any second), and
/// `parallelism = 10` with a receiver taking 50 ms a request (the most in flight).
pub async fn flow_control(server: &RedisServer) {
    let receiver = Receiver::start(|request, _| {
        if request.path == "/parallel" {
            Reply::After(Duration::from_millis(50))
        } else {
            Reply::ok()
        }
    })
    .await;
    let sections = format!(
        "timer_interval = 100\n\
         [webhook.rated]\ntopics = rated\nurl = {0}/rated\nrate = 100/s\n\
         [webhook.parallel]\ntopics = parallel\nurl = {0}/parallel\nparallelism = 10\n",
        receiver.url
    );
    let redis = fresh(server).await;
    let mut daemons: Vec<Daemon> = (0..4)
        .map(|n| {
            Daemon::start(
                &server
                    .daemon_config(&format!("bench-flow-{n}"), &sections)
                    .0,
            )
        })
        .collect();
    let client = Client::connect(server.info()).await.unwrap();
    let jobs = |topic: &'static str, count: usize| {
        (0..count).map(move |n| NewPush::new(topic, "x").id(format!("{topic}-{n}")))
    };
    client
        .push_many(
            jobs("rated", 1_000)
                .chain(jobs("parallel", 500))
                .collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    receiver.wait_for(1_500, Duration::from_secs(120)).await;
    while left_in_redis(&mut redis.clone(), &["rated", "parallel"]).await > 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for daemon in &mut daemons {
        stop(daemon);
    }
    let starts = receiver.arrivals("/rated");
    let span = starts[starts.len() - 1] - starts[0];
    let most_in_a_second = (0..starts.len())
        .map(|i| {
            starts[i..]
                .iter()
                .take_while(|at| **at < starts[i] + 1_000)
                .count()
        })
        .max()
        .unwrap_or(0);
    println!("\n## Flow control over 4 daemons, at the receiver\n");
    println!("| webhook | jobs | first to last start | most started in any 1 s | most in flight |");
    println!("|---|---:|---:|---:|---:|");
    println!(
        "| rate = 100/s | 1000 | {:.2} s | {most_in_a_second} | |",
        span as f64 / 1e3
    );
    println!(
        "| parallelism = 10, 50 ms a request | 500 | | | {} |",
        receiver.most_in_flight("/parallel")
    );
}

/// Pushes [`RATE`] jobs a second for [`SECONDS`], falling due from 2 s on, to a daemon with
/// `hook` (`None`: a client reserves and acks them), and waits until Redis holds none: each job's
/// due time, unix ms, and without a hook when each was reserved.
async fn falling_due(
    server: &RedisServer,
    hook: Option<&str>,
) -> (HashMap<String, i64>, Vec<(String, i64)>) {
    let mut redis = fresh(server).await;
    let (config, _) =
        server.daemon_config("bench-webhook-late", hook.unwrap_or("timer_interval = 100"));
    let mut daemon = Daemon::start(&config);
    let client = Client::connect(server.info()).await.unwrap();
    let mut due = HashMap::new();
    let count = RATE * SECONDS;
    let now = redis_ms(&mut redis).await;
    for chunk in (0..count).collect::<Vec<_>>().chunks(1_000) {
        let jobs: Vec<NewPush> = chunk
            .iter()
            .map(|&n| {
                // Due at a fixed schedule from `now`, by the clock Redis and this host share.
                let at = now + 2_000 + (n * 1_000 / RATE) as i64;
                let id = format!("late-{n}");
                due.insert(id.clone(), at);
                NewPush::new(TOPICS[n % TOPICS.len()], "x")
                    .id(id)
                    .at(UNIX_EPOCH + Duration::from_millis(at as u64))
            })
            .collect();
        client.push_many(jobs).await.unwrap();
    }
    let mut reserved = Vec::new();
    let topics: Vec<Topic> = TOPICS.iter().map(|topic| Topic::from(*topic)).collect();
    while left(&redis, &TOPICS).await > 0 {
        if hook.is_some() {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        let jobs = client
            .reserve_many(
                &topics,
                Duration::from_secs(30),
                500,
                Duration::from_millis(100),
            )
            .await
            .unwrap();
        let at = unix_ms();
        reserved.extend(jobs.iter().map(|job| (job.id.to_string(), at)));
        client.ack_many(&jobs).await;
    }
    stop(&mut daemon);
    (due, reserved)
}

/// This host's clock, unix ms.
fn unix_ms() -> i64 {
    delayer_wire::time::to_unix_ms(SystemTime::now())
}
