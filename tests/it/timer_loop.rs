//! The timer loop's sleeping: capped by `timer_interval`, and never a busy loop.

use crate::support;

use support::DaemonSetup;

use std::time::Duration;

use delayer_client::redis::AsyncCommands;
use delayer_wire::keys::{JOB_POOL, job_bucket};
use support::legacy_client::{self, Message};
use support::{RedisServer, spawn_service};

fn message(id: &str) -> Message {
    Message {
        id: id.to_string(),
        topic: "t".to_string(),
        body: "b".to_string(),
    }
}

#[tokio::test]
async fn an_earlier_job_added_while_sleeping_towards_a_later_one_is_found() {
    let server = RedisServer::start();
    let mut client = server.connect().await;
    legacy_client::push(&mut client, &message("later"), 3600)
        .await
        .unwrap();
    let (service, stop) = spawn_service(server.config("timer_interval = 1000"));
    // The loop's first look sees only the far job; it then sleeps towards it, at most 1 s.
    support::wait_for(
        Duration::from_secs(5),
        "the loop to look at the pool",
        || {
            let mut client = client.clone();
            async move { (support::script_runs(&mut client).await > 0).then_some(()) }
        },
    )
    .await;

    legacy_client::push(&mut client, &message("sooner"), 0)
        .await
        .unwrap();

    let popped = legacy_client::bpop(&mut client, "t", 3).await.unwrap();
    assert_eq!(popped.map(|message| message.id), Some("sooner".to_string()));
    stop.cancel();
    service.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_job_due_at_infinity_does_not_make_the_loop_spin() {
    let server = RedisServer::start();
    let mut client = server.connect().await;
    let _: () = client
        .hset(job_bucket("never"), "topic", "t")
        .await
        .unwrap();
    let _: () = client.zadd(JOB_POOL, "never", "+inf").await.unwrap();
    let (service, stop) = spawn_service(server.config("timer_interval = 200"));

    // Absence of activity can only be watched for a while: about 5 looks are due in a second,
    // a spinning loop makes thousands.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let runs = support::script_runs(&mut client).await;
    assert!((1..=15).contains(&runs), "{runs} script runs in 1 s");
    let waiting: i64 = client.zcard(JOB_POOL).await.unwrap();
    assert_eq!(waiting, 1, "the job still waits");
    stop.cancel();
    service.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_job_pushed_while_the_loop_sleeps_moves_on_time() {
    let server = RedisServer::start();
    let mut client = server.connect().await;
    // A long interval: only being woken by the push can make the job punctual.
    let (service, stop) = spawn_service(server.config("timer_interval = 60000"));
    support::wait_for(Duration::from_secs(5), "the loop to watch the pool", || {
        let mut client = client.clone();
        async move { (support::tracking_clients(&mut client).await == 1).then_some(()) }
    })
    .await;

    let due = (legacy_client::now_seconds() + 1) as f64;
    legacy_client::push(&mut client, &message("soon"), 1)
        .await
        .unwrap();

    let popped = legacy_client::bpop(&mut client, "t", 5).await.unwrap();
    let late = delayer_wire::time::unix_now() - due;
    assert_eq!(popped.map(|message| message.id), Some("soon".to_string()));
    assert!(
        (0.0..0.5).contains(&late),
        "{late:.3} s after its due second"
    );
    stop.cancel();
    service.await.unwrap().unwrap();
}
