//! Consumers' heartbeats against real redis-servers (and a cluster): what a running Worker
//! writes, that its reservations name it, that a consumer whose beats stop is listed gone and
//! aged out, that a clean stop removes it, and that a beat Redis refuses stops no job.

use std::collections::HashMap;
use std::time::Duration;

use crate::fixture::start;
use delayer_client::consumer::{self, KEPT, LIFETIME};
use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::redis::cluster_async::ClusterConnection;
use delayer_client::redis::{IntoConnectionInfo, RedisResult};
use delayer_client::{Acked, Client, Heartbeat, Inspector, Settings, State, Target, Topic, Worker};
use delayer_testkit::cluster::RedisCluster;
use delayer_testkit::jobs::move_until_empty;
use delayer_testkit::wait_for;
use delayer_wire::keys::{CONSUMERS, HOLDERS, consumer as consumer_key};
use tokio::sync::{Semaphore, oneshot};

/// The consumers' set, id → last beat (ms), as Redis holds it.
async fn beats(redis: &mut MultiplexedConnection) -> Vec<(String, f64)> {
    redis.zrange_withscores(CONSUMERS, 0, -1).await.unwrap()
}

/// Consumer `id`'s hash as Redis holds it, its values as text.
async fn hash_of(redis: &mut MultiplexedConnection, id: &str) -> HashMap<String, String> {
    redis.hgetall(consumer_key(id)).await.unwrap()
}

/// Now by Redis's clock, in unix milliseconds.
async fn redis_ms(redis: &mut MultiplexedConnection) -> f64 {
    let (seconds, micros): (u64, u64) = delayer_client::redis::cmd("TIME")
        .query_async(redis)
        .await
        .unwrap();
    (seconds * 1000 + micros / 1000) as f64
}

fn heartbeat(id: &str, lifetime: Duration) -> Heartbeat {
    Heartbeat {
        id: id.into(),
        host: "box".into(),
        pid: Some(7),
        topics: vec!["t".into()],
        concurrency: Some(1),
        held: Some(0),
        lifetime,
    }
}

#[tokio::test]
async fn a_running_worker_beats_who_it_is_and_what_it_holds_and_its_clean_stop_removes_it() {
    let (_server, mut redis, client) = start().await;
    let inspector = Inspector::new(&client);
    for index in 0..2 {
        client
            .push("order.close", format!("o{index}"))
            .await
            .unwrap();
    }
    move_until_empty(&mut redis).await;
    // Handlers that hold their jobs until the test lets them go.
    let release = std::sync::Arc::new(Semaphore::new(0));
    let (stop, stopped) = oneshot::channel::<()>();
    let held = release.clone();
    let worker = tokio::spawn(
        Worker::new(client.clone())
            .concurrency(3)
            .handle("order.close", move |_job| {
                let held = held.clone();
                async move {
                    held.acquire().await.unwrap().forget();
                    Ok::<(), String>(())
                }
            })
            .handle("mail.send", |_job| async { Ok::<(), String>(()) })
            .run(async {
                let _ = stopped.await;
            }),
    );

    // Its beat, with the jobs it holds: a beat every 5 s, so within two of them.
    let (id, fields) = wait_for(Duration::from_secs(12), "a beat holding 2 jobs", || {
        let mut redis = redis.clone();
        async move {
            let [(id, _)] = &beats(&mut redis).await[..] else {
                return None;
            };
            let fields = hash_of(&mut redis, id).await;
            (fields.get("held").map(String::as_str) == Some("2")).then(|| (id.clone(), fields))
        }
    })
    .await;
    let pid = std::process::id();
    assert!(
        id.starts_with(&format!("{}:{pid}:", consumer::this_host())),
        "host:pid:salt, {id}"
    );
    assert_eq!(fields["host"], consumer::this_host());
    assert_eq!(fields["pid"], pid.to_string());
    assert_eq!(fields["concurrency"], "3");
    assert_eq!(fields["lifetime"], LIFETIME.as_millis().to_string());
    assert_eq!(fields["topics"], "2");
    let mut topics = vec![fields["topic:1"].as_str(), fields["topic:2"].as_str()];
    topics.sort();
    assert_eq!(topics, ["mail.send", "order.close"]);
    let now = redis_ms(&mut redis).await;
    let started: f64 = fields["started"].parse().unwrap();
    assert!(now - started < 15_000.0, "started {started}, now {now}");
    let ttl: i64 = redis.pttl(consumer_key(&id)).await.unwrap();
    assert!(ttl > 0 && ttl <= KEPT.as_millis() as i64, "{ttl}");

    // Each reservation it holds names it, and the console's reads find it.
    let holders: HashMap<String, String> = redis.hgetall(HOLDERS).await.unwrap();
    assert_eq!(holders.len(), 2, "{holders:?}");
    for holder in holders.values() {
        assert!(holder.starts_with(&format!("1:{id}.")), "{holder}");
    }
    let ids: Vec<_> = holders.keys().map(|id| id.as_str().into()).collect();
    for times in inspector.job_times("order.close", &ids).await.unwrap() {
        assert_eq!(times.holder.as_deref(), Some(id.as_str()));
    }
    let listed = inspector.consumers(10).await.unwrap();
    assert_eq!(listed.total, 1);
    let found = &listed.listed[0];
    assert_eq!((found.beat.id.as_str(), found.gone), (id.as_str(), false));
    assert_eq!((found.beat.pid, found.beat.held), (Some(pid), Some(2)));

    // A clean stop: its jobs are done, and it is gone from the list at once.
    release.add_permits(2);
    wait_for(Duration::from_secs(5), "both jobs acked", || {
        let mut redis = redis.clone();
        async move { (redis.hlen::<_, usize>(HOLDERS).await.unwrap() == 0).then_some(()) }
    })
    .await;
    stop.send(()).unwrap();
    worker.await.unwrap().unwrap();
    assert_eq!(beats(&mut redis).await, []);
    assert!(!redis.exists::<_, bool>(consumer_key(&id)).await.unwrap());
}

#[tokio::test]
async fn a_consumer_whose_beats_stop_is_listed_gone_then_ages_out() {
    let (_server, mut redis, client) = start().await;
    let inspector = Inspector::new(&client);
    // Seen longer ago than a consumer stays listed: pruned by the next beat of any consumer.
    let long_ago = redis_ms(&mut redis).await - KEPT.as_millis() as f64 - 1_000.0;
    let _: () = redis.zadd(CONSUMERS, "old", long_ago).await.unwrap();
    let listed = inspector.consumers(10).await.unwrap();
    assert_eq!((listed.total, listed.listed.len()), (0, 0), "not listed");

    client
        .beat(&heartbeat("short", Duration::from_millis(300)))
        .await
        .unwrap();
    client
        .beat(&heartbeat("long", Duration::from_secs(60)))
        .await
        .unwrap();
    let ids: Vec<String> = beats(&mut redis)
        .await
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}: the old entry is pruned");
    assert!(!ids.contains(&"old".to_string()));
    let gone = |id: &'static str| {
        let inspector = inspector.clone();
        async move {
            let listed = inspector.consumers(10).await.unwrap();
            let found = listed.listed.iter().find(|c| c.beat.id == id).unwrap();
            found.gone
        }
    };
    assert!(!gone("short").await, "alive within its lifetime");
    wait_for(
        Duration::from_secs(5),
        "the short-lived beat to be gone",
        || {
            let gone = gone("short");
            async move { gone.await.then_some(()) }
        },
    )
    .await;
    assert!(!gone("long").await);
    // Still there, with what it told, while it is listed gone.
    let fields = hash_of(&mut redis, "short").await;
    assert_eq!(fields["pid"], "7");
    // A second beat keeps its start.
    let started = fields["started"].clone();
    client
        .beat(&heartbeat("short", Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(hash_of(&mut redis, "short").await["started"], started);
    assert!(!gone("short").await, "beating again");
}

#[tokio::test]
async fn a_reserve_as_a_consumer_names_it_and_acks_as_any_other() {
    let (_server, mut redis, client) = start().await;
    let inspector = Inspector::new(&client);
    for _ in 0..2 {
        client.push("t", "b").await.unwrap();
    }
    move_until_empty(&mut redis).await;
    let ttr = Duration::from_secs(30);
    let named = client.as_consumer("http:billing");
    assert_eq!(named.consumer(), Some("http:billing"));
    let mine = named.reserve(&["t"], ttr, Duration::ZERO).await.unwrap();
    let other = client.reserve(&["t"], ttr, Duration::ZERO).await.unwrap();
    let (mine, other) = (mine.unwrap(), other.unwrap());
    assert!(mine.token.as_deref().unwrap().starts_with("http:billing."));
    let ids = [mine.id.clone(), other.id.clone()];
    let times = inspector.job_times("t", &ids).await.unwrap();
    assert_eq!(times[0].holder.as_deref(), Some("http:billing"));
    assert_eq!(times[1].holder, None, "a token without a consumer");
    // The holder's entry as Redis holds it.
    let holder: String = redis.hget(HOLDERS, mine.id.as_bytes()).await.unwrap();
    assert!(holder.starts_with("1:http:billing."), "{holder}");
    assert_eq!(client.ack(&mine).await.unwrap(), Acked::Done);
    assert_eq!(client.ack(&other).await.unwrap(), Acked::Done);
    assert_eq!(client.get(&mine.id).await.unwrap().state, State::Unknown);
}

#[tokio::test]
async fn a_worker_whose_beats_redis_refuses_still_does_its_jobs() {
    let (_server, mut redis, client) = start().await;
    // No beat can write over a string: each fails (a WRONGTYPE).
    let _: () = redis.set(CONSUMERS, "not a sorted set").await.unwrap();
    let ids: Vec<String> = push_jobs(&client, 3).await;
    move_until_empty(&mut redis).await;
    let (stop, stopped) = oneshot::channel::<()>();
    let worker = tokio::spawn(
        Worker::new(client.clone())
            .handle("t", |_job| async { Ok::<(), String>(()) })
            .run(async {
                let _ = stopped.await;
            }),
    );
    wait_for(Duration::from_secs(10), "every job acked", || {
        let (client, ids) = (client.clone(), ids.clone());
        async move {
            for id in &ids {
                if client.get(id).await.unwrap().state != State::Unknown {
                    return None;
                }
            }
            Some(())
        }
    })
    .await;
    stop.send(()).unwrap();
    worker.await.unwrap().unwrap();
    let kept: String = redis.get(CONSUMERS).await.unwrap();
    assert_eq!(kept, "not a sorted set");
    let error = client.beat(&heartbeat("x", LIFETIME)).await.unwrap_err();
    assert!(error.to_string().contains(CONSUMERS), "{error}");
}

/// Pushes `count` jobs on topic `t`, due now; their ids.
async fn push_jobs(client: &Client, count: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..count {
        ids.push(client.push("t", "b").await.unwrap().to_string());
    }
    ids
}

#[tokio::test]
async fn on_a_cluster_a_beat_writes_both_keys_in_one_slot_and_lists_back() {
    let cluster = RedisCluster::start(3);
    let nodes = cluster
        .ports()
        .into_iter()
        .map(|port| format!("redis://127.0.0.1:{port}").into_connection_info())
        .collect::<RedisResult<Vec<_>>>()
        .unwrap();
    let target = Target::cluster(nodes).unwrap();
    let client = Client::connect_to(target, Settings::default())
        .await
        .unwrap();
    let inspector = Inspector::new(&client);
    let beat = Heartbeat {
        topics: vec![Topic::from("order.close"), Topic::from("mail")],
        ..heartbeat("web-1:42:abc", LIFETIME)
    };
    client.beat(&beat).await.unwrap();
    let node = cluster.node_of(CONSUMERS);
    assert_eq!(node, cluster.node_of(&consumer_key("web-1:42:abc")));
    let mut redis: ClusterConnection = cluster.connect().await;
    let pid: String = redis
        .hget(consumer_key("web-1:42:abc"), "pid")
        .await
        .unwrap();
    assert_eq!(pid, "7");
    let listed = inspector.consumers(10).await.unwrap();
    assert_eq!(listed.total, 1);
    assert_eq!(listed.listed[0].beat, beat);
    client.forget_consumer("web-1:42:abc").await.unwrap();
    assert_eq!(inspector.consumers(10).await.unwrap().total, 0);
    let left: usize = redis.zcard(CONSUMERS).await.unwrap();
    assert_eq!(left, 0);
}
