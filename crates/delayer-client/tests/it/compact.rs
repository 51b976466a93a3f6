//! The compact layout (see `delayer_wire::compact`), against a real redis-server: our pushes
//! wait compact only while a daemon stages them, `get`, `remove`, `promote` and a push again find
//! a compact job by id, and staging writes exactly what a legacy push would have written.

use std::collections::HashMap;
use std::time::Duration;

use crate::fixture::{start, start_with};
use crate::waiting::every_page;
use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::{Client, Inspector, Removed, Settings, State};
use delayer_testkit::RedisServer;
use delayer_testkit::jobs::beat_as_stager;
use delayer_testkit::legacy_client::{self, Message};
use delayer_wire::keys::{JOB_POOL, Layout, job_bucket};
use delayer_wire::scripts::compact_stage::{Reach, STAGE_BATCH, StageScript, Staged};

const INDEX: &str = "delayer:compact:index";
const CHUNKS: &str = "delayer:compact:chunks";
const HOUR: Duration = Duration::from_secs(3600);

/// Stages every compact job, whatever its window, as `delayer compact expand` does.
async fn stage_all(redis: &mut MultiplexedConnection) -> Staged {
    let keys = Layout::LEGACY.keys("");
    let compact = keys.compact().unwrap();
    let mut total = Staged::default();
    loop {
        let staged = StageScript::default()
            .run(redis, &keys, compact, Reach::All)
            .await
            .unwrap();
        total.jobs += staged.jobs;
        total.expired += staged.expired;
        total.replaced += staged.replaced;
        if !staged.more {
            return total;
        }
    }
}

async fn bucket(redis: &mut MultiplexedConnection, id: &[u8]) -> HashMap<String, Vec<u8>> {
    redis.hgetall(job_bucket(id)).await.unwrap()
}

async fn pool(redis: &mut MultiplexedConnection) -> Vec<(Vec<u8>, f64)> {
    redis.zrange_withscores(JOB_POOL, 0, -1).await.unwrap()
}

/// A client whose pushes are all in the legacy form.
async fn legacy_pusher(server: &RedisServer) -> Client {
    let settings = Settings {
        compact_after: None,
        ..Settings::default()
    };
    Client::connect_with(server.info(), settings).await.unwrap()
}

async fn index_len(redis: &mut MultiplexedConnection) -> usize {
    redis.hlen(INDEX).await.unwrap()
}

#[tokio::test]
async fn our_pushes_wait_compact_only_while_a_daemon_stages() {
    let (_server, mut redis, client) = start().await;
    let inspector = Inspector::new(&client);
    // No daemon: the legacy form, and a note that compact pushes are wanted.
    let first = client.push("order.close", "a").delay(HOUR).await.unwrap();
    assert!(!bucket(&mut redis, first.as_bytes()).await.is_empty());
    assert_eq!(pool(&mut redis).await.len(), 1);
    let wanted: bool = redis.exists("delayer:compact:wanted").await.unwrap();
    assert!(wanted, "a daemon learns that pushes want it");
    assert_eq!(index_len(&mut redis).await, 0);

    beat_as_stager(&mut redis).await;
    let second = client.push("order.close", "b").delay(HOUR).await.unwrap();
    assert!(bucket(&mut redis, second.as_bytes()).await.is_empty());
    assert_eq!(pool(&mut redis).await.len(), 1, "not in the pool");
    assert_eq!(index_len(&mut redis).await, 1);
    let chunks: usize = redis.zcard(CHUNKS).await.unwrap();
    assert_eq!(chunks, 1);
    // A job due sooner than compact_after, and a client that does not want compact: legacy.
    let soon = client
        .push("order.close", "c")
        .delay(Duration::from_secs(30))
        .await
        .unwrap();
    let legacy_client = legacy_pusher(&_server).await;
    let plain = legacy_client
        .push("order.close", "d")
        .delay(HOUR)
        .await
        .unwrap();
    for id in [&soon, &plain] {
        assert!(!bucket(&mut redis, id.as_bytes()).await.is_empty());
    }
    assert_eq!(index_len(&mut redis).await, 1);

    let job = client.get(&second).await.unwrap();
    assert_eq!(job.state, State::Waiting);
    assert_eq!(job.topic.unwrap().as_bytes(), b"order.close");
    assert_eq!((job.body.unwrap(), job.body_size), (b"b".to_vec(), Some(1)));
    assert_eq!(job.delay, Some(HOUR));
    assert!(job.due.is_some());
    let stats = inspector.stats().await.unwrap();
    assert_eq!(stats.waiting, 4, "compact jobs are waiting too");
}

#[tokio::test]
async fn staging_writes_what_a_legacy_push_would_have() {
    let (_server, mut redis, client) = start().await;
    let at = std::time::SystemTime::now() + HOUR;
    // The same job twice: pushed legacy, and pushed compact then staged.
    let plain = legacy_pusher(&_server).await;
    plain.push("t", "body").at(at).id("plain").await.unwrap();
    beat_as_stager(&mut redis).await;
    client.push("t", "body").at(at).id("compact").await.unwrap();
    client
        .push("t", "by delay")
        .delay(HOUR)
        .id("delayed")
        .await
        .unwrap();
    assert_eq!(index_len(&mut redis).await, 2);

    let staged = stage_all(&mut redis).await;
    assert_eq!((staged.jobs, staged.expired, staged.replaced), (2, 0, 0));
    // The delay of a push for a time is counted at each push: a moment apart here.
    let without_delay = |mut fields: HashMap<String, Vec<u8>>| {
        fields.remove("delay").expect("a delay");
        fields
    };
    assert_eq!(
        without_delay(bucket(&mut redis, b"compact").await),
        without_delay(bucket(&mut redis, b"plain").await)
    );
    let delayed = bucket(&mut redis, b"delayed").await;
    assert_eq!(delayed["delay"], b"3600.000");
    let scores: HashMap<Vec<u8>, f64> = pool(&mut redis).await.into_iter().collect();
    assert_eq!(scores[&b"compact"[..]], scores[&b"plain"[..]]);
    let ttl = |id: &'static str| {
        let mut redis = redis.clone();
        async move {
            let ttl: i64 = redis.ttl(job_bucket(id)).await.unwrap();
            ttl
        }
    };
    let (compact_ttl, plain_ttl) = (ttl("compact").await, ttl("plain").await);
    assert!(
        (compact_ttl - plain_ttl).abs() <= 1 && compact_ttl > 0,
        "{compact_ttl} {plain_ttl}"
    );
    // Nothing of the layout is left.
    for key in [
        INDEX,
        CHUNKS,
        "delayer:compact:open",
        "delayer:compact:chunk:1",
    ] {
        let exists: bool = redis.exists(key).await.unwrap();
        assert!(!exists, "{key}");
    }
}

#[tokio::test]
async fn a_compact_job_is_found_removed_and_replaced_by_id() {
    let (_server, mut redis, client) = start().await;
    beat_as_stager(&mut redis).await;
    let id = client.push("t", "first").delay(HOUR).await.unwrap();
    assert_eq!(client.remove(&id).await.unwrap(), Removed::Waiting);
    assert_eq!(client.get(&id).await.unwrap().state, State::Unknown);
    assert_eq!(client.remove(&id).await.unwrap(), Removed::Unknown);
    assert_eq!(index_len(&mut redis).await, 0);
    let entry: Vec<u8> = redis.lindex("delayer:compact:chunk:1", 0).await.unwrap();
    assert!(entry.is_empty(), "its body is freed at once");

    // Pushed again (compact, then compact again): one job, the last one.
    client
        .push("t", "second")
        .delay(HOUR)
        .id("x")
        .await
        .unwrap();
    client
        .push("u", "third")
        .delay(HOUR * 2)
        .id("x")
        .await
        .unwrap();
    assert_eq!(index_len(&mut redis).await, 1);
    let job = client.get("x").await.unwrap();
    assert_eq!(
        (job.body.unwrap(), job.topic.unwrap().as_bytes().to_vec()),
        (b"third".to_vec(), b"u".to_vec())
    );
    // Pushed again in the legacy form: the compact copy is gone.
    let plain = legacy_pusher(&_server).await;
    plain.push("t", "fourth").delay(HOUR).id("x").await.unwrap();
    assert_eq!(index_len(&mut redis).await, 0);
    assert_eq!(client.get("x").await.unwrap().body.unwrap(), b"fourth");
    assert_eq!(stage_all(&mut redis).await, Staged::default());
    assert_eq!(pool(&mut redis).await.len(), 1);

    // A legacy client's push of the id after ours: the newer job stays.
    client.push("t", "ours").delay(HOUR).id("y").await.unwrap();
    let message = Message {
        id: "y".into(),
        topic: "t".into(),
        body: "php".into(),
    };
    legacy_client::push(&mut redis, &message, 3600)
        .await
        .unwrap();
    let staged = stage_all(&mut redis).await;
    assert_eq!((staged.jobs, staged.expired, staged.replaced), (0, 0, 1));
    assert_eq!(bucket(&mut redis, b"y").await["body"], b"php");
}

#[tokio::test]
async fn promote_runs_a_compact_job_now() {
    let (_server, mut redis, client) = start().await;
    let inspector = Inspector::new(&client);
    beat_as_stager(&mut redis).await;
    let id = client.push("t", "b").delay(HOUR).await.unwrap();
    assert_eq!(index_len(&mut redis).await, 1);
    inspector.promote(&id).await.unwrap();
    assert_eq!(index_len(&mut redis).await, 0);
    let (seconds, _): (f64, f64) = delayer_client::redis::cmd("TIME")
        .query_async(&mut redis)
        .await
        .unwrap();
    let scores = pool(&mut redis).await;
    assert_eq!(scores.len(), 1);
    assert!(scores[0].1 <= seconds + 1.0, "due now: {scores:?}");
    assert_eq!(bucket(&mut redis, id.as_bytes()).await["body"], b"b");
}

#[tokio::test]
async fn any_bytes_and_many_jobs_a_window() {
    let (_server, mut redis, client) = start_with(Settings::default()).await;
    beat_as_stager(&mut redis).await;
    let at = std::time::SystemTime::now() + HOUR;
    let odd_id: &[u8] = b"\xff\x00id";
    let odd_body: &[u8] = b"\x00\xfe body";
    client
        .push(&b"t\xff"[..], odd_body)
        .at(at)
        .id(odd_id)
        .await
        .unwrap();
    let job = client.get(odd_id).await.unwrap();
    assert_eq!(job.body.as_deref(), Some(odd_body));
    assert_eq!(job.topic.unwrap().as_bytes(), b"t\xff");
    // 2,500 jobs due in one window: three chunks of at most 1,000.
    let jobs: Vec<_> = (0..2_500)
        .map(|n| delayer_client::NewPush::new("t", format!("body {n}")).at(at))
        .collect();
    client.push_many(jobs).await.unwrap();
    assert_eq!(index_len(&mut redis).await, 2_501);
    let chunks: usize = redis.zcard(CHUNKS).await.unwrap();
    assert_eq!(chunks, 3);
    let staged = stage_all(&mut redis).await;
    assert_eq!(
        (staged.jobs, staged.expired, staged.replaced),
        (2_501, 0, 0)
    );
    assert_eq!(pool(&mut redis).await.len(), 2_501);
    assert_eq!(bucket(&mut redis, odd_id).await["body"], odd_body);
}

#[tokio::test]
async fn a_chunk_staged_in_part_keeps_the_rest_findable_and_open() {
    let (_server, mut redis, client) = start().await;
    beat_as_stager(&mut redis).await;
    let at = std::time::SystemTime::now() + HOUR;
    let count = STAGE_BATCH + 200;
    let jobs: Vec<_> = (0..count)
        .map(|n| {
            delayer_client::NewPush::new("t", format!("body {n}"))
                .id(format!("j-{n:04}"))
                .at(at)
        })
        .collect();
    client.push_many(jobs).await.unwrap();
    let keys = Layout::LEGACY.keys("");
    let staged = StageScript::default()
        .run(&mut redis, &keys, keys.compact().unwrap(), Reach::All)
        .await
        .unwrap();
    assert_eq!((staged.jobs, staged.more), (STAGE_BATCH as u64, true));
    // The chunk's last entries went first: the first 200 wait compact where the index says.
    let left: usize = redis.llen("delayer:compact:chunk:1").await.unwrap();
    assert_eq!(left, 200);
    assert_eq!(bucket(&mut redis, b"j-0200").await["body"], b"body 200");
    let job = client.get("j-0100").await.unwrap();
    assert_eq!(job.body.as_deref(), Some(&b"body 100"[..]));
    assert_eq!(client.remove("j-0150").await.unwrap(), Removed::Waiting);
    // A push to the same window goes to the same chunk, after what is left of it.
    client.push("t", "late").at(at).id("late").await.unwrap();
    assert_eq!(client.get("late").await.unwrap().body.unwrap(), b"late");

    let staged = stage_all(&mut redis).await;
    assert_eq!((staged.jobs, staged.expired, staged.replaced), (200, 0, 0));
    assert_eq!(pool(&mut redis).await.len(), count);
    assert_eq!(index_len(&mut redis).await, 0);
    let chunks: usize = redis.zcard(CHUNKS).await.unwrap();
    let chunk: bool = redis.exists("delayer:compact:chunk:1").await.unwrap();
    assert_eq!((chunks, chunk), (0, false));
    assert_eq!(bucket(&mut redis, b"j-0100").await["body"], b"body 100");
    assert_eq!(bucket(&mut redis, b"late").await["body"], b"late");
    assert!(bucket(&mut redis, b"j-0150").await.is_empty(), "removed");
}

#[tokio::test]
async fn pages_of_waiting_jobs_hold_compact_ones_in_due_order() {
    let (server, mut redis, client) = start().await;
    let inspector = Inspector::new(&client);
    beat_as_stager(&mut redis).await;
    let plain = legacy_pusher(&server).await;
    // 300 jobs due over ten windows, every third one legacy; pairs share a due time.
    let base = std::time::SystemTime::now() + HOUR;
    let mut expected = Vec::new();
    for n in 0..300u64 {
        let at = base + Duration::from_secs(n / 2 * 4);
        let (id, topic) = (
            format!("{:03}-{}", n / 2, n % 2),
            ["a", "b"][n as usize % 2],
        );
        let pusher = if n % 3 == 0 { &plain } else { &client };
        pusher
            .push(topic, "b")
            .at(at)
            .id(id.as_str())
            .await
            .unwrap();
        expected.push((id, topic));
    }
    assert_eq!(index_len(&mut redis).await, 200);
    let ids = |topic: Option<&str>| -> Vec<String> {
        expected
            .iter()
            .filter(|(_, of)| topic.is_none_or(|topic| topic == *of))
            .map(|(id, _)| id.clone())
            .collect()
    };
    for count in [1, 7, 50, 1000] {
        assert_eq!(
            every_page(&client, None, count).await,
            ids(None),
            "pages of {count}"
        );
        assert_eq!(every_page(&client, Some("b"), count).await, ids(Some("b")));
    }
    let first = inspector.waiting(None, None, 3).await.unwrap();
    assert_eq!(first.jobs[1].topic.as_ref().unwrap().as_bytes(), b"b");

    // Run all of topic a's now: its compact jobs too.
    let done = inspector.promote_topic("a", 10_000, None).await.unwrap();
    assert_eq!(done.made_due, 150);
    let left: Vec<(String, String)> = redis
        .hgetall(INDEX)
        .await
        .map(|index: HashMap<String, String>| index.into_iter().collect())
        .unwrap();
    assert_eq!(left.len(), 100, "topic b's compact jobs still wait compact");
}

#[tokio::test]
async fn a_compact_key_of_another_type_makes_pushes_legacy_and_staging_name_it() {
    let (_server, mut redis, client) = start().await;
    let inspector = Inspector::new(&client);
    beat_as_stager(&mut redis).await;
    let _: () = redis.set(INDEX, "not a hash").await.unwrap();
    let id = client.push("t", "b").delay(HOUR).await.unwrap();
    assert!(
        !bucket(&mut redis, id.as_bytes()).await.is_empty(),
        "legacy"
    );
    assert_eq!(client.get(&id).await.unwrap().state, State::Waiting);
    assert_eq!(client.remove(&id).await.unwrap(), Removed::Waiting);
    let keys = Layout::LEGACY.keys("");
    let error = StageScript::default()
        .run(&mut redis, &keys, keys.compact().unwrap(), Reach::All)
        .await
        .unwrap_err();
    assert!(error.to_string().contains(INDEX), "{error}");
    let _: () = redis.set(CHUNKS, "not a sorted set").await.unwrap();
    client.push("t", "b").delay(HOUR).id("x").await.unwrap();
    let page = inspector.waiting(None, None, 10).await.unwrap();
    assert_eq!(page.jobs.len(), 1, "the waiting pages still read the pool");
}

#[tokio::test]
async fn a_legacy_push_of_a_compact_id_is_delivered_once() {
    let (_server, mut redis, client) = start().await;
    beat_as_stager(&mut redis).await;
    client.push("t", "ours").delay(HOUR).id("x").await.unwrap();
    assert_eq!(index_len(&mut redis).await, 1);
    // A legacy client pushes the id again, due now, and pops it before the compact copy's window
    // is staged: the pop deletes the bucket, which is all staging could tell the newer job by.
    let message = Message {
        id: "x".into(),
        topic: "t".into(),
        body: "php".into(),
    };
    legacy_client::push(&mut redis, &message, 0).await.unwrap();
    delayer_testkit::jobs::move_until_empty(&mut redis).await;
    let popped = legacy_client::pop(&mut redis, "t").await.unwrap().unwrap();
    assert_eq!(popped.body, "php");
    assert_eq!(index_len(&mut redis).await, 0, "the move dropped the copy");

    let staged = stage_all(&mut redis).await;
    assert_eq!(
        (staged.jobs, staged.replaced),
        (0, 0),
        "nothing left to stage"
    );
    assert!(pool(&mut redis).await.is_empty());
    assert!(bucket(&mut redis, b"x").await.is_empty());
    assert_eq!(
        client.get("x").await.unwrap().state,
        State::Unknown,
        "delivered once"
    );
}

#[tokio::test]
async fn a_job_whose_data_outlives_2106_waits_in_the_legacy_form() {
    // A chunk's entry holds the expiry in 32 bits: unix seconds up to 2106.
    let century = Duration::from_secs(100 * 365 * 86_400);
    let settings = Settings {
        ready_max_lifetime: century,
        ..Settings::default()
    };
    let (_server, mut redis, client) = start_with(settings).await;
    beat_as_stager(&mut redis).await;
    client
        .push("t", "long")
        .delay(HOUR)
        .id("long")
        .await
        .unwrap();
    let years = |n: u64| Duration::from_secs(n * 365 * 86_400);
    // Due in 68 years (the longest delay), kept 12 more: past 2106.
    let short = Settings {
        ready_max_lifetime: years(12),
        ..Settings::default()
    };
    let other = Client::connect_with(_server.info(), short).await.unwrap();
    other
        .push("t", "far")
        .delay(delayer_client::MAX_DELAY)
        .id("far")
        .await
        .unwrap();
    other
        .push("t", "near")
        .delay(HOUR)
        .id("near")
        .await
        .unwrap();
    assert_eq!(
        index_len(&mut redis).await,
        1,
        "only the job of 11 years waits compact"
    );
    for id in [&b"long"[..], b"far"] {
        let ttl: i64 = redis.ttl(job_bucket(id)).await.unwrap();
        assert!(ttl > 2 * 1_000_000_000, "{ttl}");
    }
    let staged = stage_all(&mut redis).await;
    assert_eq!((staged.jobs, staged.expired), (1, 0));
    assert_eq!(pool(&mut redis).await.len(), 3);
}

#[tokio::test]
async fn staging_counts_the_jobs_whose_data_expired() {
    let settings = Settings {
        compact_after: Some(Duration::from_millis(500)),
        ready_max_lifetime: Duration::from_secs(1),
        ..Settings::default()
    };
    let (_server, mut redis, client) = start_with(settings).await;
    beat_as_stager(&mut redis).await;
    client
        .push("t", "b")
        .delay(Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(index_len(&mut redis).await, 1);
    // Due in 1 s, its data kept 1 s after: gone once no daemon staged it for 2 s and more.
    let pushed = delayer_testkit::jobs::redis_now(&mut redis).await;
    delayer_testkit::jobs::wait_for_redis_time(&redis, pushed + 3.0).await;
    let staged = stage_all(&mut redis).await;
    assert_eq!((staged.jobs, staged.expired, staged.replaced), (0, 1, 0));
    assert!(pool(&mut redis).await.is_empty());
}

#[tokio::test]
async fn chunk_keys_of_another_type_are_passed_by_and_named() {
    let (_server, mut redis, client) = start().await;
    let inspector = Inspector::new(&client);
    beat_as_stager(&mut redis).await;
    // Another client took the first chunk number's key before any compact push.
    let _: () = redis.set("delayer:compact:chunk:1", "x").await.unwrap();
    let at = std::time::SystemTime::now() + HOUR;
    client.push("t", "a").at(at).id("a").await.unwrap();
    assert_eq!(index_len(&mut redis).await, 1, "compact, in another chunk");
    let chunks: Vec<String> = redis.zrange(CHUNKS, 0, -1).await.unwrap();
    assert_eq!(chunks, ["2"]);
    // And one of ours is written over: the push after goes to a new chunk.
    let _: () = redis.set("delayer:compact:chunk:2", "y").await.unwrap();
    client.push("t", "b").at(at).id("b").await.unwrap();
    let chunks: Vec<String> = redis.zrange(CHUNKS, 0, -1).await.unwrap();
    assert_eq!(chunks, ["2", "3"]);
    assert_eq!(client.get("a").await.unwrap().state, State::Unknown);
    assert_eq!(client.get("b").await.unwrap().state, State::Waiting);
    let page = inspector.waiting(None, None, 10).await.unwrap();
    assert_eq!(page.jobs.len(), 1, "the waiting pages pass it by");

    let staged = stage_all_foreign(&mut redis).await;
    assert_eq!(
        staged,
        vec![("delayer:compact:chunk:2".to_string(), "string".to_string())]
    );
    assert_eq!(pool(&mut redis).await.len(), 1, "b is staged");
    let chunks: usize = redis.zcard(CHUNKS).await.unwrap();
    assert_eq!(chunks, 0);
    for (key, value) in [
        ("delayer:compact:chunk:1", "x"),
        ("delayer:compact:chunk:2", "y"),
    ] {
        let kept: String = redis.get(key).await.unwrap();
        assert_eq!(kept, value, "{key} is left as it was");
    }
}

/// Stages every compact job; the chunk keys of another type it named.
async fn stage_all_foreign(redis: &mut MultiplexedConnection) -> Vec<(String, String)> {
    let keys = Layout::LEGACY.keys("");
    let mut foreign = Vec::new();
    loop {
        let staged = StageScript::default()
            .run(redis, &keys, keys.compact().unwrap(), Reach::All)
            .await
            .unwrap();
        foreign.extend(staged.foreign);
        if !staged.more {
            return foreign;
        }
    }
}

#[tokio::test]
async fn layout_keys_of_another_type_make_pushes_legacy_not_fail() {
    let (_server, mut redis, client) = start().await;
    beat_as_stager(&mut redis).await;
    for (key, value) in [
        ("delayer:compact:open", "not a hash"),
        ("delayer:compact:next", "not a number"),
    ] {
        let _: () = redis.set(key, value).await.unwrap();
        let id = client.push("t", "b").delay(HOUR).await.unwrap();
        assert!(
            !bucket(&mut redis, id.as_bytes()).await.is_empty(),
            "{key}: legacy"
        );
        let _: () = redis.del(key).await.unwrap();
    }
    let _: () = redis.del("delayer:compact:stagers").await.unwrap();
    let _: () = redis.set("delayer:compact:stagers", "x").await.unwrap();
    let id = client.push("t", "b").delay(HOUR).await.unwrap();
    assert!(
        !bucket(&mut redis, id.as_bytes()).await.is_empty(),
        "stagers: legacy"
    );
    assert_eq!(index_len(&mut redis).await, 0);
    let chunks: usize = redis.zcard(CHUNKS).await.unwrap();
    assert_eq!(chunks, 0, "no chunk opened half-way");
}
