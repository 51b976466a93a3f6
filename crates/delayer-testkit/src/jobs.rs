//! Filling Redis with jobs and reading back what happened to them.

use std::collections::HashMap;
use std::time::Duration;

use delayer_client::JobId;
use delayer_wire::keys::{JOB_POOL, Layout, job_bucket, ready_queue};
use delayer_wire::name::Text;
use redis::AsyncCommands;
use redis::aio::{ConnectionLike, MultiplexedConnection};

use crate::{legacy_client, wait_for};

/// Adds `count` jobs, already due, spread round-robin over `topics`; returns their ids.
pub async fn fill_backlog(
    redis: &mut MultiplexedConnection,
    count: usize,
    topics: &[&str],
) -> Vec<String> {
    let due = (legacy_client::now_seconds() - 10) as f64;
    let ids: Vec<String> = (0..count).map(|index| format!("job-{index:07}")).collect();
    let jobs = ids
        .iter()
        .enumerate()
        .map(|(index, id)| (id.clone(), topics[index % topics.len()], due));
    add_jobs(redis, jobs).await;
    ids
}

/// Adds (id, topic, due score) jobs with a one-byte body, pipelined in chunks.
pub async fn add_jobs<'a>(
    redis: &mut MultiplexedConnection,
    jobs: impl IntoIterator<Item = (String, &'a str, f64)>,
) {
    let mut jobs = jobs.into_iter().peekable();
    while jobs.peek().is_some() {
        let mut pipe = redis::pipe();
        for (id, topic, due) in jobs.by_ref().take(10_000) {
            pipe.hset_multiple(job_bucket(&id), &[("topic", topic), ("body", "b")])
                .ignore()
                .zadd(JOB_POOL, &id, due)
                .ignore();
        }
        pipe.query_async::<()>(redis).await.unwrap();
    }
}

/// How many times each id sits in the ready lists of `topics`.
pub async fn delivered(
    redis: &mut MultiplexedConnection,
    topics: &[&str],
) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for topic in topics {
        let ids: Vec<String> = redis.lrange(ready_queue(topic), 0, -1).await.unwrap();
        for id in ids {
            *counts.entry(id).or_default() += 1;
        }
    }
    counts
}

/// Per command, from `INFO commandstats`: (calls, failed calls).
pub async fn command_stats(redis: &mut MultiplexedConnection) -> HashMap<String, (u64, u64)> {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(redis)
        .await
        .unwrap();
    stats
        .lines()
        .filter_map(|line| {
            let (command, fields) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let field = |name: &str| -> Option<u64> {
                fields
                    .split(',')
                    .find_map(|part| part.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
            };
            Some((
                command.to_string(),
                (field("calls")?, field("failed_calls").unwrap_or(0)),
            ))
        })
        .collect()
}

/// Redis's CPU time so far (user + system, all its threads), from INFO: microsecond precision,
/// where /proc counts clock ticks.
pub async fn redis_cpu_seconds(redis: &mut MultiplexedConnection) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(redis)
        .await
        .unwrap();
    info.lines()
        .filter_map(|line| {
            let (name, value) = line.trim().split_once(':')?;
            matches!(name, "used_cpu_user" | "used_cpu_sys").then(|| value.parse::<f64>().unwrap())
        })
        .sum()
}

/// How many move scripts Redis has run to the end (a first EVALSHA refused with NOSCRIPT is not one).
pub async fn script_runs(redis: &mut MultiplexedConnection) -> u64 {
    let stats = command_stats(redis).await;
    stats
        .get("evalsha")
        .map_or(0, |(calls, failed)| calls - failed)
}

/// How many connections have client tracking on (`t` among their `CLIENT LIST` flags).
pub async fn tracking_clients(redis: &mut MultiplexedConnection) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(redis)
        .await
        .unwrap();
    list.lines()
        .filter(|line| {
            line.split(' ')
                .find_map(|field| field.strip_prefix("flags="))
                .is_some_and(|flags| flags.contains('t'))
        })
        .count()
}

/// Polls until the job pool is empty (every job moved or dropped).
pub async fn wait_for_empty_pool(redis: &MultiplexedConnection, timeout: Duration) {
    wait_for(timeout, "the job pool to empty", || {
        let mut redis = redis.clone();
        async move {
            let left: usize = redis.zcard(JOB_POOL).await.unwrap();
            (left == 0).then_some(())
        }
    })
    .await;
}

/// Moves the jobs due now onto their ready lists, as the daemon would (for tests without one).
pub async fn move_due_jobs(redis: &mut MultiplexedConnection) -> usize {
    let script = delayer_wire::scripts::move_due::MoveScript::default();
    let mut moved = 0;
    loop {
        let batch = script
            .run(
                redis,
                &Layout::LEGACY.keys(""),
                delayer_wire::time::unix_now(),
                1000,
                false,
            )
            .await
            .unwrap();
        moved += batch.moved_count();
        if !batch.is_full(1000) {
            return moved;
        }
    }
}

/// Moves jobs as they fall due until the pool is empty (scores are rounded up to the millisecond,
/// so a job pushed "now" may be due a moment later).
pub async fn move_until_empty(redis: &mut MultiplexedConnection) {
    move_until_left(redis, 0).await;
}

/// Moves jobs as they fall due until the pool holds `left` (those due later).
pub async fn move_until_left(redis: &mut MultiplexedConnection, left: usize) {
    let what = format!("all but {left} jobs to be moved");
    wait_for(Duration::from_secs(5), &what, || {
        let mut redis = redis.clone();
        async move {
            move_due_jobs(&mut redis).await;
            let waiting: usize = redis.zcard(JOB_POOL).await.unwrap();
            (waiting == left).then_some(())
        }
    })
    .await;
}

/// Waits until `topic`'s ready list holds at least `count` ids, and returns them (newest first).
pub async fn wait_for_ready(
    redis: &MultiplexedConnection,
    topic: impl AsRef<[u8]>,
    count: usize,
) -> Vec<JobId> {
    let topic = topic.as_ref();
    let what = format!("{count} jobs on the ready list of {}", Text(topic));
    wait_for(Duration::from_secs(10), &what, || {
        let mut redis = redis.clone();
        let key = ready_queue(topic);
        async move {
            let ids: Vec<JobId> = redis.lrange(key, 0, -1).await.unwrap();
            (ids.len() >= count).then_some(ids)
        }
    })
    .await
}

/// Redis's clock now, unix seconds (fractional): what the scripts go by.
pub async fn redis_now(redis: &mut impl ConnectionLike) -> f64 {
    let (seconds, micros): (f64, f64) = redis::cmd("TIME").query_async(redis).await.unwrap();
    seconds + micros / 1e6
}

/// Redis's clock now, unix ms (as schedules count time).
pub async fn redis_ms(redis: &mut impl ConnectionLike) -> i64 {
    (redis_now(redis).await * 1000.0) as i64
}

/// Waits until Redis's clock is past `at` (unix seconds): jobs due then are due by the scripts'
/// clock.
pub async fn wait_for_redis_time(redis: &MultiplexedConnection, at: f64) {
    let what = format!("Redis's clock to pass {at:.3}");
    wait_for(Duration::from_secs(30), &what, || {
        let mut redis = redis.clone();
        async move { (redis_now(&mut redis).await > at).then_some(()) }
    })
    .await;
}

/// Waits until a daemon beats as a stager of compact jobs (one does once a push asked for the
/// layout, or compact jobs wait).
pub async fn wait_for_stager(redis: &MultiplexedConnection) {
    wait_for(
        Duration::from_secs(10),
        "a daemon to stage compact jobs",
        || {
            let mut redis = redis.clone();
            async move {
                let beats: usize = redis.zcard(delayer_wire::compact::STAGERS).await.unwrap();
                (beats > 0).then_some(())
            }
        },
    )
    .await;
}

/// Waits until a daemon stages, then until a pusher that found none has read again: it keeps a
/// "no" for [`NONE_STAGES_READ_AGAIN`], and the push after must see the stager. No state of the
/// pusher shows it from outside, so this waits that span out.
///
/// [`NONE_STAGES_READ_AGAIN`]: delayer_wire::push::NONE_STAGES_READ_AGAIN
pub async fn wait_until_pushers_see_a_stager(redis: &MultiplexedConnection) {
    wait_for_stager(redis).await;
    tokio::time::sleep(delayer_wire::push::NONE_STAGES_READ_AGAIN).await;
}

/// Tells pushers that a daemon stages compact jobs, as a daemon's beat does (by Redis's clock):
/// so that jobs are pushed compact before any daemon runs.
pub async fn beat_as_stager(redis: &mut impl ConnectionLike) {
    let now_ms = (redis_now(redis).await * 1000.0) as i64;
    redis::cmd("ZADD")
        .arg(delayer_wire::compact::STAGERS)
        .arg(now_ms)
        .arg("test")
        .query_async::<()>(redis)
        .await
        .unwrap();
}
