//! push → due → pop with the PHP and Go clients' own command sequences, against the running service.

use crate::support;

use support::DaemonSetup;

use std::time::Duration;

use delayer_client::redis::AsyncCommands;
use delayer_wire::keys::{JOB_POOL, JOP_POOL, Layout, job_bucket, ready_queue};
use delayer_wire::time::unix_now;
use support::legacy_client::{self, Message};
use support::{RedisServer, delayer_succeeds, spawn_service};

fn message(id: &str, topic: &str, body: &str) -> Message {
    Message {
        id: id.to_string(),
        topic: topic.to_string(),
        body: body.to_string(),
    }
}

#[tokio::test]
async fn pushed_jobs_arrive_once_intact_and_never_early() {
    let server = RedisServer::start();
    let mut client = server.connect().await;
    let body = format!(
        "{{\"order\": 42, \"note\": \"ünïcødé\", \"pad\": \"{}\"}}",
        "x".repeat(100_000)
    );
    let jobs = [
        message("5d41402abc4b2a76b9719d911017c592", "order.close", &body),
        message("7d793037a0760186574b0282f2f435e7", "order.close", "second"),
        message("e4da3b7fbbce2345d7772b0674a318d5", "member.remind", "third"),
    ];
    let due = (legacy_client::now_seconds() + 1) as f64;
    for job in &jobs {
        legacy_client::push(&mut client, job, 1).await.unwrap();
    }
    // Started after the push (a first look at an empty pool would sleep the whole interval), with
    // a long interval: arriving well before it proves the loop wakes at the due time.
    let (service, stop) = spawn_service(server.config("timer_interval = 10000"));

    for job in &jobs {
        let popped = legacy_client::bpop(&mut client, &job.topic, 5)
            .await
            .unwrap();
        let arrived = unix_now();
        assert_eq!(popped.as_ref(), Some(job), "delivered intact");
        assert!(arrived >= due, "early by {:.3}s", due - arrived);
        assert!(arrived < due + 5.0, "late by {:.3}s", arrived - due);
    }

    for topic in ["order.close", "member.remind"] {
        assert_eq!(
            legacy_client::pop(&mut client, topic).await.unwrap(),
            None,
            "delivered once"
        );
    }
    let pool: i64 = client.zcard(JOB_POOL).await.unwrap();
    let bucket_left: bool = client.exists(job_bucket(&jobs[0].id)).await.unwrap();
    assert_eq!(
        (pool, bucket_left),
        (0, false),
        "the pop deleted the bucket"
    );
    stop.cancel();
    service.await.unwrap().unwrap();
}

#[tokio::test]
async fn non_blocking_pop_finds_the_job_once_due() {
    let server = RedisServer::start();
    let (service, stop) = spawn_service(server.config("timer_interval = 200"));
    let mut client = server.connect().await;
    let job = message("a1", "t", "body");
    legacy_client::push(&mut client, &job, 0).await.unwrap();

    let popped = support::wait_for(Duration::from_secs(5), "pop to return the job", || {
        let mut client = client.clone();
        async move { legacy_client::pop(&mut client, "t").await.unwrap() }
    })
    .await;

    assert_eq!(popped, job);
    stop.cancel();
    service.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_job_removed_before_it_is_due_is_never_delivered() {
    let server = RedisServer::start();
    let (service, stop) = spawn_service(server.config(""));
    let mut client = server.connect().await;
    let removed = message("removed", "t", "undo me");
    let kept = message("kept", "t", "keep me");
    // Whole-second scores: a delay of 1 may fall due within milliseconds, before the remove.
    legacy_client::push(&mut client, &removed, 2).await.unwrap();
    legacy_client::push(&mut client, &kept, 3).await.unwrap();

    assert!(
        legacy_client::remove(&mut client, &removed.id)
            .await
            .unwrap()
    );
    // Jobs move in due order, so had `removed` been delivered it would come out first.
    let first = legacy_client::bpop(&mut client, "t", 5).await.unwrap();

    assert_eq!(first, Some(kept));
    let left: i64 = client.llen(ready_queue("t")).await.unwrap();
    let pool: i64 = client.zcard(JOB_POOL).await.unwrap();
    assert_eq!((left, pool), (0, 0));
    assert!(
        !legacy_client::remove(&mut client, &removed.id)
            .await
            .unwrap(),
        "already gone"
    );
    stop.cancel();
    service.await.unwrap().unwrap();
}

#[tokio::test]
async fn php_client_with_password_and_database() {
    let server = RedisServer::start_with(&["--requirepass", "s3cret;#x"]);
    let config = format!(
        "{}password = s3cret;#x   ; a comment\ndatabase = 3\n",
        server.config_text("")
    );
    let config = delayer::Config::parse(&config, std::path::Path::new("test.conf")).unwrap();
    let (service, stop) = spawn_service(config);
    let mut php = legacy_client::php_connect(&server.socket(), "s3cret;#x", 3).await;
    let job = message("php-1", "mail", "hello");

    legacy_client::push(&mut php, &job, 0).await.unwrap();

    assert_eq!(
        legacy_client::bpop(&mut php, "mail", 5).await.unwrap(),
        Some(job)
    );
    let mut database_zero = legacy_client::php_connect(&server.socket(), "s3cret;#x", 0).await;
    let keys: Vec<String> = database_zero.keys("*").await.unwrap();
    assert!(keys.is_empty(), "database 0 untouched: {keys:?}");
    stop.cancel();
    service.await.unwrap().unwrap();
}

/// `key_layout = jop`: the earliest Delayer generation's names (PHP client 1.0.1), used by the
/// daemon and the CLI alike, and no other key touched.
#[tokio::test]
async fn the_jop_layout_serves_the_earliest_clients() {
    let server = RedisServer::start();
    let mut php = server.connect().await;
    let config = server.write_file(
        "jop.conf",
        &format!(
            "[redis]\nhost = {}\nkey_layout = jop\n",
            server.socket().display()
        ),
    );
    let from_php = message("j1", "order.close", "from 1.0.1");
    legacy_client::push_in(Layout::JOP, &mut php, &from_php, 0)
        .await
        .unwrap();
    delayer_succeeds(
        &config,
        &["push", "order.close", "from the CLI", "--id", "j2"],
    );
    let pooled: i64 = php.zcard(JOP_POOL).await.unwrap();
    assert_eq!(pooled, 2, "the CLI pushed under the jop names");

    let (service, stop) = spawn_service(delayer::config::Config::load(&config).unwrap());
    let mut popped = Vec::new();
    while popped.len() < 2 {
        popped.push(
            support::wait_for(Duration::from_secs(5), "a job moved", || {
                let mut php = php.clone();
                async move {
                    legacy_client::pop_in(Layout::JOP, &mut php, "order.close")
                        .await
                        .unwrap()
                }
            })
            .await,
        );
    }
    popped.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(
        popped,
        [from_php, message("j2", "order.close", "from the CLI")]
    );
    stop.cancel();
    service.await.unwrap().unwrap();
    let keys: Vec<String> = php.keys("*").await.unwrap();
    assert_eq!(keys, ["delayer:topics"], "nothing but the registry is left");
}
