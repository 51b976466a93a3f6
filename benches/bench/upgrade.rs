//! A rolling upgrade: the previous release's daemon (built from `DELAYER_PREVIOUS`, default
//! `main`; see `support::previous_release`) and the current one on one Redis, while 50,000 legacy
//! jobs and 50,000 compact ones (pushed by this build's client, staged by this build's daemon)
//! fall due over 2 s. Every job must be moved once: each id in the ready lists exactly once, none
//! left in the pool or waiting compact, every bucket still there for a `pop`.

use std::time::Duration;

use delayer_client::redis::AsyncCommands;
use delayer_client::{Client, NewPush, Settings};
use delayer_wire::keys::job_bucket;
use delayer_wire::time::{from_unix, unix_now};

use super::support::previous_release::previous_release;
use super::support::receiver::{Receiver, Reply};
use super::support::{
    Daemon, DaemonSetup, Logs, RedisServer, add_jobs, delivered, left_in_redis, read, wait_for,
    wait_for_empty_pool,
};
use super::{TOPICS, stop};

const JOBS: usize = 50_000;

pub async fn upgrade() {
    let previous = previous_release();
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (old_config, old_logs) = server.daemon_config("previous", "");
    let (new_config, new_logs) = server.daemon_config("current", "");
    let mut daemons = [
        Daemon::start_binary(&previous.binary, &old_config),
        Daemon::start(&new_config),
    ];
    for logs in [&old_logs, &new_logs] {
        logs.wait_for_line("Service started successfully");
    }

    // The compact jobs are pushed while this build's daemon beats (it stages them; the previous
    // release never looks at the compact keys), due over the same 2 s.
    let settings = Settings {
        compact_after: Some(Duration::from_millis(500)),
        ..Settings::default()
    };
    let client = Client::connect_with(server.info(), settings).await.unwrap();
    wait_for(
        Duration::from_secs(10),
        "this build's daemon to beat",
        || {
            let mut redis = redis.clone();
            async move {
                let _: () = redis.set("delayer:compact:wanted", 1).await.unwrap();
                let beats: usize = redis.zcard("delayer:compact:stagers").await.unwrap();
                (beats > 0).then_some(())
            }
        },
    )
    .await;
    // Due over 2 s from 15 s ahead (100,000 pushes take a while on a busy box; a compact job
    // pushed less than 0.5 s before it falls due would be a legacy one), so that both daemons
    // are at work while they fall due.
    let start = unix_now() + 15.0;
    let ids: Vec<String> = (0..JOBS).map(|index| format!("up-{index:06}")).collect();
    let jobs = ids.iter().enumerate().map(|(index, id)| {
        (
            id.clone(),
            TOPICS[index % TOPICS.len()],
            start + (index % 2_000) as f64 / 1_000.0,
        )
    });
    add_jobs(&mut redis, jobs).await;
    let compact_ids: Vec<String> = (0..JOBS).map(|index| format!("cp-{index:06}")).collect();
    let at = |index: usize| from_unix(start + (index % 2_000) as f64 / 1_000.0).unwrap();
    for (slice, ids) in compact_ids.chunks(10_000).enumerate() {
        let jobs = ids.iter().enumerate().map(|(index, id)| {
            let index = slice * 10_000 + index;
            NewPush::new(TOPICS[index % TOPICS.len()], "compact")
                .id(id.as_str())
                .at(at(index))
        });
        client.push_many(jobs).await.unwrap();
    }
    // They waited compact: a chunk holds at most 1,000.
    let chunks: usize = redis.get("delayer:compact:next").await.unwrap();
    assert!(chunks >= JOBS / 1_000, "{chunks} chunks");
    let ids: Vec<String> = ids.into_iter().chain(compact_ids).collect();
    wait_for(Duration::from_secs(60), "every compact job staged", || {
        let mut redis = redis.clone();
        async move {
            let left: usize = redis.hlen("delayer:compact:index").await.unwrap();
            (left == 0).then_some(())
        }
    })
    .await;
    wait_for_empty_pool(&redis, Duration::from_secs(60)).await;
    for daemon in &mut daemons {
        stop(daemon);
    }

    let counts = delivered(&mut redis, &TOPICS).await;
    let twice = counts.values().filter(|count| **count > 1).count();
    let missing = ids.iter().filter(|id| !counts.contains_key(*id)).count();
    let mut without_bucket = 0;
    for id in counts.keys() {
        let exists: bool = redis.exists(job_bucket(id)).await.unwrap();
        without_bucket += usize::from(!exists);
    }
    println!(
        "\n## Rolling upgrade ({JOBS} legacy and {JOBS} compact jobs due over 2 s, {} topics; the previous release, {}, beside this build on one Redis)\n",
        TOPICS.len(),
        &previous.commit[..12]
    );
    println!(
        "| moved by the previous | by this build | in a ready list once | twice or more | missing | without their bucket | previous release built in |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---|");
    println!(
        "| {} | {} | {} | {twice} | {missing} | {without_bucket} | {} |",
        moved(&old_logs),
        moved(&new_logs),
        counts.len() - twice,
        previous
            .built_in
            .map_or("(built before)".to_string(), |took| {
                format!("{:.0} s", took.as_secs_f64())
            })
    );
    assert_eq!(
        (twice, missing, without_bucket),
        (0, 0, 0),
        "every job moved once, none dropped"
    );
}

/// The same with webhooks: the previous release, which knows none, moves a webhook topic's due
/// jobs to its ready list; this build delivers what it moved itself and what it finds there.
/// Every job must reach the receiver once, and none may stay on a ready list.
pub async fn upgrade_webhooks() {
    const HOOKED: usize = 10_000;
    let previous = previous_release();
    let receiver = Receiver::start(|_, _| Reply::ok()).await;
    let server = RedisServer::start();
    let redis = server.connect().await;
    let hook = format!(
        "[webhook.upgrade]\ntopics = {}\nurl = {}/{{topic}}\n",
        TOPICS.join(","),
        receiver.url
    );
    let (old_config, old_logs) = server.daemon_config("previous", "");
    let (new_config, new_logs) = server.daemon_config("current", &hook);
    let mut daemons = [
        Daemon::start_binary(&previous.binary, &old_config),
        Daemon::start(&new_config),
    ];
    for logs in [&old_logs, &new_logs] {
        logs.wait_for_line("Service started successfully");
    }
    let client = Client::connect(server.info()).await.unwrap();
    let start = unix_now() + 5.0;
    let jobs = (0..HOOKED).map(|index| {
        NewPush::new(TOPICS[index % TOPICS.len()], "hooked")
            .id(format!("wh-{index:06}"))
            .at(from_unix(start + (index % 2_000) as f64 / 1_000.0).unwrap())
    });
    client.push_many(jobs.collect::<Vec<_>>()).await.unwrap();
    receiver.wait_for(HOOKED, Duration::from_secs(120)).await;
    wait_for(
        Duration::from_secs(60),
        "Redis to hold none of them",
        || {
            let mut redis = redis.clone();
            async move { (left_in_redis(&mut redis, &TOPICS).await == 0).then_some(()) }
        },
    )
    .await;
    for daemon in &mut daemons {
        stop(daemon);
    }
    let mut counts = std::collections::HashMap::new();
    for request in receiver.received() {
        *counts
            .entry(request.header("delayer-id").to_string())
            .or_insert(0usize) += 1;
    }
    let twice = counts.values().filter(|count| **count > 1).count();
    let missing = HOOKED - counts.len();
    println!(
        "\n## Rolling upgrade with a webhook ({HOOKED} jobs due over 2 s, {} topics, all of them the webhook's; the previous release, {}, beside this build)\n",
        TOPICS.len(),
        &previous.commit[..12]
    );
    println!(
        "| moved to ready lists by the previous | by this build | delivered once | twice or more | missing | left in Redis |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {} | {} | {} | {twice} | {missing} | 0 |",
        moved(&old_logs),
        moved(&new_logs),
        counts.len() - twice,
    );
    assert_eq!((twice, missing), (0, 0), "every job delivered once");
}

/// How many ids a daemon's "Job is ready" lines list.
fn moved(logs: &Logs) -> usize {
    read(&logs.access)
        .lines()
        .filter_map(|line| {
            let (ids, _) = line
                .split_once("Job is ready")?
                .1
                .split_once("IDs: [")?
                .1
                .split_once(']')?;
            Some(ids.split(',').count())
        })
        .sum()
}
