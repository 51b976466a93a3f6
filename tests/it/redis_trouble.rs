//! The binary when Redis misbehaves: restarts, outages, a reply that never comes, out of memory,
//! a read-only replica. Jobs move exactly once, and the log says what happened in plain words.

use crate::support;

use support::DaemonSetup;

use std::time::{Duration, Instant};

use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::redis::{self, AsyncCommands};
use delayer_wire::keys::{JOB_POOL, job_bucket, ready_queue};
use support::legacy_client::{self, Message};
use support::{
    Daemon, RedisServer, delivered, fill_backlog, read, wait_for_ready, wait_until_sync,
};

async fn pool_size(redis: &mut MultiplexedConnection) -> usize {
    redis.zcard(JOB_POOL).await.unwrap()
}

/// Sends a command given as its words (empty ones left out).
async fn command(redis: &mut MultiplexedConnection, words: &[&str]) {
    let words: Vec<&str> = words
        .iter()
        .copied()
        .filter(|word| !word.is_empty())
        .collect();
    redis::cmd(words[0])
        .arg(&words[1..])
        .query_async::<()>(redis)
        .await
        .unwrap();
}

#[tokio::test]
async fn survives_a_redis_restart_and_moves_what_fell_due_meanwhile() {
    let mut server = RedisServer::start();
    let (config, logs) = server.daemon_config("daemon", "timer_interval = 1000");
    let mut daemon = Daemon::start(&config);
    logs.wait_for_line("Service started successfully");
    let mut redis = server.connect().await;
    let due = support::legacy_client::now_seconds() + 2;
    let _: () = redis
        .hset(job_bucket("during-outage"), "topic", "t")
        .await
        .unwrap();
    let _: () = redis.zadd(JOB_POOL, "during-outage", due).await.unwrap();

    server.stop(true);
    logs.wait_for_line("cannot reach Redis at");
    wait_until_sync(Duration::from_secs(5), "the job to fall due", || {
        support::legacy_client::now_seconds() > due
    });
    server.restart();
    let restarted = Instant::now();
    let mut redis = server.connect().await;

    let moved = wait_for_ready(&redis, "t", 1).await;
    let after = restarted.elapsed();

    assert_eq!(moved, ["during-outage"]);
    assert_eq!(pool_size(&mut redis).await, 0);
    logs.wait_for_line("answers again");
    let outage_lines = read(&logs.error).matches("cannot reach Redis at").count();
    assert_eq!(
        outage_lines,
        1,
        "the outage is logged once:\n{}",
        read(&logs.error)
    );
    assert!(
        read(&logs.error).contains(&server.socket().display().to_string()),
        "names the address"
    );
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(2)).success());
    eprintln!("moved {after:?} after Redis came back");
}

#[tokio::test]
async fn starts_while_redis_is_down_and_works_once_it_is_up() {
    let mut server = RedisServer::start();
    server.stop(false);
    let (config, logs) = server.daemon_config("daemon", "");
    let mut daemon = Daemon::start(&config);
    logs.wait_for_line("Service started successfully");
    logs.wait_for_line("cannot reach Redis at");

    server.restart();
    let mut redis = server.connect().await;
    let _: () = redis.hset(job_bucket("j"), "topic", "t").await.unwrap();
    let _: () = redis.zadd(JOB_POOL, "j", 1).await.unwrap();

    support::wait_for_empty_pool(&redis, Duration::from_secs(5)).await;
    let ready: Vec<String> = redis.lrange(ready_queue("t"), 0, -1).await.unwrap();
    assert_eq!(ready, ["j"]);
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(2)).success());
}

/// A Redis blocked past the reply timeout runs the move it was sent once it wakes, but its reply
/// never reaches the daemon: the jobs move exactly once, and the log says a move went unlisted.
#[tokio::test]
async fn a_move_whose_reply_never_came_is_logged_with_how_many_jobs_it_may_have_moved() {
    let server = RedisServer::start_with(&["--enable-debug-command", "local"]);
    let mut redis = server.connect().await;
    let topics = ["t"];
    let ids = fill_backlog(&mut redis, 300_000, &topics).await;
    // Small batches: the drain lasts long enough to be caught in the middle.
    let (config, logs) = server.daemon_config("daemon", "batch_size = 100");
    let mut daemon = Daemon::start(&config);
    logs.wait_for_line("Job is ready");

    // Longer than the daemon's 5 s reply timeout; ZCARD first, in the same round trip.
    let (waiting, ()): (usize, ()) = redis::pipe()
        .zcard(JOB_POOL)
        .cmd("DEBUG")
        .arg("SLEEP")
        .arg(7)
        .query_async(&mut redis)
        .await
        .unwrap();
    assert!(
        waiting > 0,
        "the drain ended before Redis blocked: the test proves nothing"
    );
    support::wait_for_empty_pool(&redis, Duration::from_secs(60)).await;
    logs.wait_for_line("answers again");
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());

    let counts = delivered(&mut redis, &topics).await;
    assert_eq!(counts.len(), ids.len(), "every job moved");
    assert!(counts.values().all(|count| *count == 1), "no duplicates");
    let error = read(&logs.error);
    let address = server.socket().display().to_string();
    let lost = error
        .matches(&format!(
            "The reply to a move never came (Redis at {address} did not answer within 5 s): it \
             may have moved up to 100 jobs that no \"Job is ready\" line lists; retrying until it answers"
        ))
        .count();
    assert!(lost >= 1, "{error}");
    assert!(
        !error.contains("cannot reach"),
        "Redis was there all along:\n{error}"
    );
    // Every moved job is either listed or within what the lost replies may have moved.
    let access = read(&logs.access);
    let listed: usize = access
        .lines()
        .filter_map(|line| line.split_once("IDs: [")?.1.strip_suffix(']'))
        .map(|ids| ids.split(',').count())
        .sum();
    let unlisted = ids.len() - listed;
    assert!(
        unlisted > 0 && unlisted <= lost * 100,
        "{unlisted} jobs moved unlisted, {lost} lost replies"
    );
}

/// Out of memory and read-only are not outages: Redis answers, but refuses to write. The log
/// says which, and what the daemon waits for; nothing moves, nothing is lost, and the job moves
/// once Redis accepts writes again.
#[tokio::test]
async fn out_of_memory_and_a_read_only_replica_are_named_and_waited_out() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (config, logs) = server.daemon_config("daemon", "timer_interval = 50");
    let mut daemon = Daemon::start(&config);
    logs.wait_for_line("Service started successfully");
    let address = server.socket().display().to_string();

    let cases: [(&str, &[&str], &[&str], &str); 2] = [
        (
            "oom",
            &["CONFIG", "SET", "maxmemory", "1"],
            &["CONFIG", "SET", "maxmemory", "0"],
            "is out of memory: ",
        ),
        (
            "ro",
            &["REPLICAOF", "127.0.0.1", "1"],
            &["REPLICAOF", "NO", "ONE"],
            "is a read-only replica: ",
        ),
    ];
    for (topic, refuse_writes, accept_writes, said) in cases {
        let message = Message {
            id: format!("{topic}-job"),
            topic: topic.into(),
            body: "b".into(),
        };
        legacy_client::push(&mut redis, &message, 1).await.unwrap();
        command(&mut redis, refuse_writes).await;

        logs.wait_for_line(&format!("Redis at {address} {said}"));
        let ready: usize = redis.llen(ready_queue(topic)).await.unwrap();
        assert_eq!(ready, 0, "{topic}: nothing moves");
        assert_eq!(pool_size(&mut redis).await, 1, "{topic}: nothing is lost");
        command(&mut redis, accept_writes).await;
        assert_eq!(
            wait_for_ready(&redis, topic, 1).await,
            [format!("{topic}-job")]
        );
        logs.wait_for_line(&format!("Redis at {address} accepts writes again"));
    }
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());

    let error = read(&logs.error);
    assert!(
        !error.contains("retrying until it answers"),
        "Redis answered:\n{error}"
    );
    assert!(
        error.contains("no job can move until Redis has memory to spare"),
        "{error}"
    );
    assert!(
        error.contains("no job can move until it is promoted or [redis] names the master"),
        "{error}"
    );
    // After each refusal, the recovery is told before what moved.
    let access = read(&logs.access);
    for topic in ["oom", "ro"] {
        let moved_at = access.find(&format!("Topic: {topic},")).unwrap();
        let recovered_at = access[..moved_at].rfind("accepts writes again");
        assert!(recovered_at.is_some(), "{access}");
    }
}

/// A Redis user allowed the legacy keys alone (as many deployments of the original have): jobs
/// move as before; only the re-delivery of lapsed reservations, which needs a key of ours, is
/// refused, and that is said once.
#[tokio::test]
async fn a_user_allowed_only_the_legacy_keys_still_gets_its_jobs_moved() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    command(
        &mut redis,
        &[
            "ACL",
            "SETUSER",
            "default",
            "resetkeys",
            "~delayer:job_pool",
            "~delayer:job_bucket:*",
            "~delayer:ready_queue:*",
        ],
    )
    .await;
    let (config, logs) = server.daemon_config("daemon", "timer_interval = 50");
    let mut daemon = Daemon::start(&config);
    for index in 0..3 {
        let message = Message {
            id: format!("legacy-{index}"),
            topic: "t".into(),
            body: "b".into(),
        };
        legacy_client::push(&mut redis, &message, 0).await.unwrap();
    }

    let ready = wait_for_ready(&redis, "t", 3).await;
    logs.wait_for_line("Jobs whose reservation lapsed cannot be delivered again");
    // Many more looks: the refusal is not said again.
    let mut stats = server.connect().await;
    let runs = support::script_runs(&mut stats).await;
    support::wait_for(Duration::from_secs(10), "ten more looks", || {
        let mut redis = stats.clone();
        async move { (support::script_runs(&mut redis).await >= runs + 10).then_some(()) }
    })
    .await;
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());

    assert_eq!(ready.len(), 3);
    let error = read(&logs.error);
    assert_eq!(
        error.matches("cannot be delivered again").count(),
        1,
        "{error}"
    );
    assert!(!error.contains("retrying"), "moves never stopped:\n{error}");
}
