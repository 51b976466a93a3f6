//! The binary against data that anyone who can write to Redis may leave there: a topic whose ready
//! list key is not a list, and ids or topics written to forge the daemon's log.

use crate::support;

use support::DaemonSetup;

use std::time::Duration;

use delayer_client::redis::{self, AsyncCommands};
use delayer_wire::keys::{JOB_POOL, ready_queue};
use support::legacy_client::{self, Message};
use support::{Daemon, RedisServer, read};

/// The issue's case at the default batch size: 8001 stuck jobs due before a healthy one used to
/// keep it in the pool for good, and logged all 8000 ids on every wake-up.
#[tokio::test]
async fn a_stuck_topic_holds_up_nothing_and_is_logged_once_with_a_count() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let _: () = redis.set(ready_queue("bad"), "x").await.unwrap();
    let now = legacy_client::now_seconds() as f64;
    let stuck = (0..8001).map(|index| (format!("bad-{index:05}"), "bad", now - 100.0));
    support::add_jobs(&mut redis, stuck).await;
    support::add_jobs(&mut redis, [("good-1".to_string(), "good", now - 50.0)]).await;
    // Looks often, so that a line repeated per look would show within the test.
    let (config, logs) = server.daemon_config("daemon", "timer_interval = 20");
    let mut daemon = Daemon::start(&config);

    let moved = support::wait_for_ready(&redis, "good", 1).await;
    assert_eq!(moved, ["good-1"]);
    // Many more looks, each of which used to log the stuck ids again.
    let runs = support::script_runs(&mut redis).await;
    support::wait_for(Duration::from_secs(10), "ten more looks", || {
        let mut redis = redis.clone();
        async move { (support::script_runs(&mut redis).await >= runs + 10).then_some(()) }
    })
    .await;
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());

    let left: usize = redis.zcard(JOB_POOL).await.unwrap();
    assert_eq!(left, 8001, "every stuck job waits in the pool");
    let error_log = read(&logs.error);
    let lines: Vec<&str> = error_log
        .lines()
        .filter(|line| line.contains("bad"))
        .collect();
    assert_eq!(lines.len(), 1, "one line for the stuck topic:\n{error_log}");
    assert!(
        lines[0].contains("Topic bad cannot move: delayer:ready_queue:bad holds a string, not a list; 8001 of its jobs wait"),
        "{}",
        lines[0]
    );
    assert!(
        error_log.len() < 1000,
        "no id lists: {} bytes",
        error_log.len()
    );
}

/// Ids and topics are chosen by whoever writes to Redis: they must not forge a line of the
/// daemon's log, nor blur the list of ids in a line.
#[tokio::test]
async fn ids_and_topics_cannot_forge_log_lines() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (config, logs) = server.daemon_config("daemon", "");
    let mut daemon = Daemon::start(&config);
    logs.wait_for_line("Service started successfully");
    let forged_id = "x\n[info] 2026/01/01 00:00:00 Service stopped successfully, PID: 1";
    let forged_topic = "t\r\n[error] 2026/01/01 00:00:00 forged";
    for (id, topic) in [
        (forged_id, "mail"),
        ("plain", forged_topic),
        ("a,b", "mail"),
        ("c", "mail"),
    ] {
        let message = Message {
            id: id.into(),
            topic: topic.into(),
            body: "b".into(),
        };
        legacy_client::push(&mut redis, &message, 0).await.unwrap();
    }
    // An orphan (no bucket) with a forged id is logged as a warning.
    let _: () = redis
        .zadd(JOB_POOL, "o\n[error] forged orphan", 1)
        .await
        .unwrap();
    support::wait_for_empty_pool(&redis, Duration::from_secs(5)).await;
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());

    let access = read(&logs.access);
    let error = read(&logs.error);
    for line in access.lines().chain(error.lines()) {
        assert!(
            line.starts_with("[info] 2") || line.starts_with("[warning] 2"),
            "a line the daemon did not write: {line:?}\n{access}{error}"
        );
    }
    // "[info] 2026/01/01 00:00:00 " is 27 bytes: the message follows.
    let stop_lines = access
        .lines()
        .filter(|line| {
            line.get(27..)
                .is_some_and(|message| message.starts_with("Service stopped"))
        })
        .count();
    assert_eq!(stop_lines, 1, "{access}");
    assert!(
        !error.lines().any(|line| line.starts_with("[error]")),
        "{error}"
    );
    assert!(
        access.contains(r#""x\n[info] 2026/01/01 00:00:00 Service stopped successfully, PID: 1""#),
        "the id is there, escaped:\n{access}"
    );
    assert!(
        access.contains(
            r#"Job is ready, Topic: "t\r\n[error] 2026/01/01 00:00:00 forged", IDs: [plain]"#
        ),
        "{access}"
    );
    // The comma inside an id no longer reads as two ids (the ids may move in one batch or several).
    let mail_ids = access
        .lines()
        .filter(|line| line.contains("Topic: mail,"))
        .map(|line| line.split_once("IDs: ").unwrap().1)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(mail_ids.contains(r#""a,b""#), "{access}");
    assert!(
        error.contains(r#"IDs: ["o\n[error] forged orphan"]"#),
        "{error}"
    );
    let ready: Vec<String> = redis::cmd("LRANGE")
        .arg(ready_queue("mail"))
        .arg(0)
        .arg(-1)
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(ready.len(), 3, "the jobs themselves move untouched");
    assert!(ready.contains(&forged_id.to_string()));
}

/// A megabyte id (anyone who writes to Redis chooses ids) moves whole, but its log line carries a
/// prefix, its length and a hash, not the megabyte, in text and in JSON lines alike.
#[tokio::test]
async fn a_huge_id_moves_whole_and_is_logged_cut() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let huge = format!("{}-end", "5d41402a".repeat(1 << 17));
    let message = Message {
        id: huge.clone(),
        topic: "big".into(),
        body: "b".into(),
    };
    legacy_client::push(&mut redis, &message, 0).await.unwrap();
    for format in ["text", "json"] {
        let (config, logs) = server.daemon_config(
            format,
            &format!("log_format = {format}\ntimer_interval = 50"),
        );
        if format == "json" {
            let _: () = redis::pipe()
                .rpop(ready_queue("big"), None)
                .ignore()
                .zadd(JOB_POOL, &huge, 0)
                .ignore()
                .query_async(&mut redis)
                .await
                .unwrap();
        }
        let mut daemon = Daemon::start(&config);
        let moved = support::wait_for_ready(&redis, "big", 1).await;
        assert_eq!(moved.len(), 1);
        assert!(moved[0] == huge, "the id moves whole");
        logs.wait_for_line("Job is ready");
        daemon.signal("TERM");
        assert!(daemon.wait(Duration::from_secs(5)).success());

        let access = read(&logs.access);
        let line = access
            .lines()
            .find(|line| line.contains("Job is ready"))
            .unwrap();
        assert!(line.len() < 1000, "{format}: a {} byte line", line.len());
        assert!(
            line.contains(&format!("+{}B#", huge.len() - 64)),
            "{format}: {line}"
        );
    }
}
