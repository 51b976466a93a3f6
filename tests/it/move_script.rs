//! The move script, one call at a time with a fixed `now`, against a real redis-server.

use crate::support;

use std::path::Path;

use delayer::{Config, Mover};
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::redis::{self, AsyncCommands};
use delayer_client::{JobId, Topic};
use delayer_wire::keys::{
    HOLDERS, JOB_POOL, Layout, PARKED_PREFIX, RESERVED, job_bucket, ready_queue,
};
use delayer_wire::scripts::move_due::{Batch, MoveScript, STUCK_RECHECK, Stuck, StuckBecause};
use support::RedisServer;

/// A realistic unix time: scores this large are where a double's precision runs out.
const NOW: f64 = 1_800_000_000.5;
/// How long stuck jobs stay parked, in seconds.
const RECHECK: f64 = STUCK_RECHECK.as_secs_f64();

async fn add_job(connection: &mut MultiplexedConnection, id: &str, topic: &str, due: f64) {
    redis::pipe()
        .hset_multiple(job_bucket(id), &[("topic", topic), ("body", "the body")])
        .zadd(JOB_POOL, id, due)
        .query_async::<()>(connection)
        .await
        .unwrap();
}

/// The ids in a ready list, in the order consumers RPOP them.
async fn ready(connection: &mut MultiplexedConnection, topic: &str) -> Vec<String> {
    let mut ids: Vec<String> = connection.lrange(ready_queue(topic), 0, -1).await.unwrap();
    ids.reverse();
    ids
}

async fn pool(connection: &mut MultiplexedConnection) -> Vec<String> {
    connection.zrange(JOB_POOL, 0, -1).await.unwrap()
}

/// The pool's ids with their scores, lowest first.
async fn scores(connection: &mut MultiplexedConnection) -> Vec<(String, f64)> {
    connection.zrange_withscores(JOB_POOL, 0, -1).await.unwrap()
}

/// Ticks from `now` the way the loop drains: again while batches come back full, the clock moving
/// on between calls (a call takes at least a round trip).
async fn drain(mover: &Mover, batch_size: usize, now: f64) -> Vec<Batch> {
    let mut batches = Vec::new();
    loop {
        let batch = mover
            .tick(now + batches.len() as f64 * 0.001)
            .await
            .unwrap();
        let full = batch.is_full(batch_size);
        batches.push(batch);
        if !full {
            return batches;
        }
        assert!(batches.len() < 1000, "the drain does not end");
    }
}

/// A mover whose Redis user may not run TIME: the script then goes by the `now` it is given, so
/// that these tests can pin it (`goes_by_redis_clock` shows the clock it goes by otherwise).
async fn mover(server: &RedisServer, batch_size: usize) -> Mover {
    redis::cmd("ACL")
        .arg(
            &[
                "SETUSER",
                "fixed-clock",
                "on",
                ">pw",
                "~*",
                "&*",
                "+@all",
                "-time",
            ][..],
        )
        .query_async::<()>(&mut server.connect().await)
        .await
        .unwrap();
    let text = server.config_text(&format!("batch_size = {batch_size}"));
    let text = format!("{text}username = fixed-clock\npassword = pw\n");
    let config = Config::parse(&text, Path::new("test.conf")).unwrap();
    Mover::new(&config.mover, &config.redis).unwrap()
}

/// With TIME allowed, the script goes by Redis's clock whatever `now` the caller's clock gives: a
/// daemon whose clock is an hour ahead moves nothing early, one an hour behind nothing late.
#[tokio::test]
async fn goes_by_redis_clock() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (seconds, micros): (f64, f64) = redis::cmd("TIME").query_async(&mut redis).await.unwrap();
    let redis_now = seconds + micros / 1e6;
    add_job(&mut redis, "due", "t", redis_now - 1.0).await;
    add_job(&mut redis, "later", "t", redis_now + 60.0).await;
    let keys = Layout::LEGACY.keys("");

    let ahead = MoveScript::default()
        .run(&mut redis, &keys, redis_now + 3600.0, 1000, false)
        .await
        .unwrap();
    let behind = MoveScript::default()
        .run(&mut redis, &keys, redis_now - 3600.0, 1000, false)
        .await
        .unwrap();

    assert_eq!(ready(&mut redis, "t").await, ["due"]);
    assert_eq!(pool(&mut redis).await, ["later"], "not early");
    assert!(ahead.by_redis && behind.by_redis);
    assert!(
        (ahead.now - redis_now).abs() < 5.0,
        "{} {redis_now}",
        ahead.now
    );
    assert_eq!(ahead.next_due, Some(redis_now + 60.0));
}

#[tokio::test]
async fn moves_only_due_jobs_and_reports_the_next_due_time() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    add_job(&mut redis, "early", "t", NOW - 10.0).await;
    add_job(&mut redis, "exactly-now", "t", NOW).await;
    add_job(&mut redis, "just-later", "t", NOW + 0.001).await;
    add_job(&mut redis, "much-later", "t", NOW + 60.0).await;

    let batch = mover(&server, 1000).await.tick(NOW).await.unwrap();

    assert_eq!(ready(&mut redis, "t").await, ["early", "exactly-now"]);
    assert_eq!(pool(&mut redis).await, ["just-later", "much-later"]);
    assert_eq!(batch.taken, 2);
    assert_eq!(batch.next_due, Some(NOW + 0.001));
    let bucket: Vec<String> = redis
        .hmget(job_bucket("early"), &["topic", "body"])
        .await
        .unwrap();
    assert_eq!(
        bucket,
        ["t", "the body"],
        "the bucket stays for the consumer"
    );
}

#[tokio::test]
async fn keeps_due_order_within_and_across_batches() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    // Added out of order; whole-second ties are ordered by id, as ZRANGEBYSCORE does.
    for (id, due) in [("e", 5.0), ("a", 1.0), ("c", 3.0), ("b", 1.0), ("d", 4.0)] {
        add_job(&mut redis, id, "t", NOW - 10.0 + due).await;
    }
    let mover = mover(&server, 2).await;

    let taken: Vec<usize> = [
        mover.tick(NOW).await.unwrap(),
        mover.tick(NOW).await.unwrap(),
        mover.tick(NOW).await.unwrap(),
    ]
    .iter()
    .map(|batch| batch.taken)
    .collect();

    assert_eq!(taken, [2, 2, 1], "the batch size limits each call");
    assert_eq!(ready(&mut redis, "t").await, ["a", "b", "c", "d", "e"]);
    assert!(pool(&mut redis).await.is_empty());
}

#[tokio::test]
async fn moves_several_topics_in_one_call() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    add_job(&mut redis, "o1", "order.close", NOW - 3.0).await;
    add_job(&mut redis, "m1", "member:remind", NOW - 2.0).await;
    add_job(&mut redis, "o2", "order.close", NOW - 1.0).await;

    let batch = mover(&server, 1000).await.tick(NOW).await.unwrap();

    assert_eq!(
        batch.moved,
        [
            (
                Topic::from("order.close"),
                vec![JobId::from("o1"), "o2".into()]
            ),
            ("member:remind".into(), vec!["m1".into()]),
        ]
    );
    assert_eq!(ready(&mut redis, "order.close").await, ["o1", "o2"]);
    assert_eq!(ready(&mut redis, "member:remind").await, ["m1"]);
    assert_eq!(batch.next_due, None, "nothing left");
}

#[tokio::test]
async fn drops_orphans_whose_bucket_or_topic_is_gone() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    add_job(&mut redis, "good", "t", NOW - 5.0).await;
    let _: () = redis.zadd(JOB_POOL, "no-bucket", NOW - 4.0).await.unwrap();
    add_job(&mut redis, "no-topic", "t", NOW - 3.0).await;
    let _: () = redis.hdel(job_bucket("no-topic"), "topic").await.unwrap();
    add_job(&mut redis, "empty-topic", "", NOW - 2.0).await;
    let _: () = redis.zadd(JOB_POOL, "not-a-hash", NOW - 1.0).await.unwrap();
    let _: () = redis.set(job_bucket("not-a-hash"), "oops").await.unwrap();

    let batch = mover(&server, 1000).await.tick(NOW).await.unwrap();

    assert_eq!(
        batch.orphans,
        ["no-bucket", "no-topic", "empty-topic", "not-a-hash"]
    );
    assert_eq!(ready(&mut redis, "t").await, ["good"]);
    assert!(pool(&mut redis).await.is_empty(), "orphans leave the pool");
    let empty_topic_list: i64 = redis.llen(ready_queue("")).await.unwrap();
    assert_eq!(empty_topic_list, 0);
}

#[tokio::test]
async fn parks_jobs_whose_ready_list_is_not_a_list() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let _: () = redis
        .set(ready_queue("broken"), "not a list")
        .await
        .unwrap();
    add_job(&mut redis, "b1", "broken", NOW - 2.0).await;
    add_job(&mut redis, "ok", "fine", NOW - 1.0).await;
    add_job(&mut redis, "later", "fine", NOW + 5.0).await;

    let batch = mover(&server, 1000).await.tick(NOW).await.unwrap();

    assert_eq!(
        batch.stuck,
        [Stuck {
            topic: "broken".into(),
            why: StuckBecause::WrongType("string".into()),
            parked: 1
        }]
    );
    assert_eq!(ready(&mut redis, "fine").await, ["ok"]);
    assert_eq!(
        scores(&mut redis).await,
        [("later".into(), NOW + 5.0), ("b1".into(), NOW + RECHECK)],
        "nothing is lost: the stuck job waits in the pool, out of the due range"
    );
    assert_eq!(batch.next_due, Some(NOW + 5.0));
    let still: String = redis.get(ready_queue("broken")).await.unwrap();
    assert_eq!(still, "not a list");
}

/// The issue's case: at batch size 1, eight stuck jobs due first used to hold up every later job.
#[tokio::test]
async fn stuck_jobs_never_hold_up_later_jobs_of_other_topics() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let _: () = redis.set(ready_queue("bad"), "x").await.unwrap();
    for index in 0..8 {
        add_job(
            &mut redis,
            &format!("bad{index}"),
            "bad",
            NOW - 100.0 + f64::from(index),
        )
        .await;
    }
    add_job(&mut redis, "good", "good", NOW - 50.0).await;
    const BATCH: usize = 1;
    let mover = mover(&server, BATCH).await;

    let batches = drain(&mover, BATCH, NOW).await;

    assert_eq!(ready(&mut redis, "good").await, ["good"]);
    assert!(
        batches.iter().all(|batch| batch.taken <= 1),
        "one call, one job"
    );
    let parked: usize = batches
        .iter()
        .flat_map(|batch| &batch.stuck)
        .map(|s| s.parked)
        .sum();
    assert_eq!(parked, 8);
    let waiting = scores(&mut redis).await;
    assert_eq!(waiting.len(), 8, "every stuck job is still in the pool");
    assert!(waiting.iter().all(|(_, score)| *score >= NOW + RECHECK));
}

#[tokio::test]
async fn parked_jobs_move_in_their_due_order_once_the_key_is_fixed() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let _: () = redis.set(ready_queue("bad"), "x").await.unwrap();
    // Ids in the opposite order of their due times, so that order by id would be visible.
    for index in 0..25 {
        add_job(
            &mut redis,
            &format!("job{:02}", 24 - index),
            "bad",
            NOW - 100.0 + f64::from(index),
        )
        .await;
    }
    const BATCH: usize = 10;
    let mover = mover(&server, BATCH).await;
    drain(&mover, BATCH, NOW).await;
    let _: () = redis.del(ready_queue("bad")).await.unwrap();

    let early = drain(&mover, BATCH, NOW + RECHECK - 1.0).await;
    assert_eq!(
        early.iter().map(|batch| batch.moved_count()).sum::<usize>(),
        0,
        "not before their time"
    );
    drain(&mover, BATCH, NOW + RECHECK + 1.0).await;

    let expected: Vec<String> = (0..25)
        .map(|index| format!("job{:02}", 24 - index))
        .collect();
    assert_eq!(ready(&mut redis, "bad").await, expected);
    assert!(pool(&mut redis).await.is_empty());
}

#[tokio::test]
async fn one_call_touches_at_most_a_batch_however_many_jobs_are_stuck() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let _: () = redis
        .hset(ready_queue("bad"), "not", "a list")
        .await
        .unwrap();
    let jobs = (0..1000).map(|index| (format!("stuck{index:04}"), "bad", NOW - 10.0));
    support::add_jobs(&mut redis, jobs).await;
    add_job(&mut redis, "good", "good", NOW - 1.0).await;
    const BATCH: usize = 100;
    let mover = mover(&server, BATCH).await;

    let first = mover.tick(NOW).await.unwrap();

    assert_eq!(first.taken, 100);
    assert_eq!(first.stuck[0].parked, 100);
    assert_eq!(first.stuck[0].why, StuckBecause::WrongType("hash".into()));
    let rest = drain(&mover, BATCH, NOW).await;
    assert_eq!(
        rest.len(),
        10,
        "ten more calls: 900 parked, then the good job"
    );
    assert_eq!(ready(&mut redis, "good").await, ["good"]);
    let left: usize = redis.zcard(JOB_POOL).await.unwrap();
    assert_eq!(left, 1000, "stuck jobs are kept");
}

#[tokio::test]
async fn moves_odd_topics_and_huge_bodies_intact() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let topics = [
        "with space",
        "ünïcødé 话题",
        "a:b:c",
        "*",
        "tab\there",
        "[brackets]",
    ];
    for (index, topic) in topics.iter().enumerate() {
        add_job(&mut redis, &format!("id{index}"), topic, NOW - 1.0).await;
    }
    let huge = "x".repeat(20 << 20);
    let _: () = redis.hset(job_bucket("id0"), "body", &huge).await.unwrap();

    let batch = mover(&server, 1000).await.tick(NOW).await.unwrap();

    assert_eq!(batch.moved_count(), topics.len());
    for (index, topic) in topics.iter().enumerate() {
        assert_eq!(
            ready(&mut redis, topic).await,
            [format!("id{index}")],
            "topic {topic:?}"
        );
    }
    let body: String = redis.hget(job_bucket("id0"), "body").await.unwrap();
    assert_eq!(body.len(), huge.len());
}

#[tokio::test]
async fn a_batch_larger_than_luas_unpack_limit_moves_whole() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    // Above the 8000 arguments Lua's unpack() takes, at the largest batch size allowed.
    let count = 10_000;
    let jobs = (0..count).map(|index| (format!("{index:06}"), "bulk", NOW - 1.0));
    support::add_jobs(&mut redis, jobs).await;

    let batch = mover(&server, count).await.tick(NOW).await.unwrap();

    assert_eq!(batch.moved_count(), count);
    let ids = ready(&mut redis, "bulk").await;
    let expected: Vec<String> = (0..count).map(|index| format!("{index:06}")).collect();
    assert_eq!(ids, expected);
}

#[tokio::test]
async fn a_whole_batch_of_jobs_pushed_again_while_reserved_ends_their_reservations() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    // Each a job a legacy client pushed again (whole seconds) after its reservation ended, or
    // (the first half) while a consumer holds it: more of each than one read of them takes.
    let count = 10_000;
    let id = |index: usize| format!("{index:06}");
    let due = |index: usize| {
        if index.is_multiple_of(2) {
            NOW - 1.5
        } else {
            NOW - 1.0
        }
    };
    support::add_jobs(
        &mut redis,
        (0..count).map(|index| (id(index), "bulk", due(index))),
    )
    .await;
    let mut pipe = redis::pipe();
    for index in 0..count {
        // As release.lua ends a reservation: the count with the holder.
        pipe.hset_multiple(
            job_bucket(id(index)),
            &[("attempts", "2"), ("ended", "2:old")],
        )
        .ignore();
        if index < count / 2 {
            pipe.hset(HOLDERS, id(index), "3:holder").ignore();
            pipe.zadd(RESERVED, id(index), NOW * 1000.0).ignore();
        }
    }
    pipe.query_async::<()>(&mut redis).await.unwrap();

    let batch = mover(&server, count).await.tick(NOW).await.unwrap();

    assert_eq!(batch.moved_count(), count);
    let (holders, reserved): (usize, usize) = redis::pipe()
        .hlen(HOLDERS)
        .zcard(RESERVED)
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!((holders, reserved), (0, 0), "every reservation ended");
    for index in [0, 1, count / 2, count / 2 + 1, count - 1] {
        let (attempts, ended): (Option<String>, Option<String>) = redis
            .hmget(job_bucket(id(index)), &["attempts", "ended"])
            .await
            .unwrap();
        let held = index < count / 2;
        let retried = !held && !index.is_multiple_of(2);
        assert_eq!(
            (attempts.as_deref(), ended.is_some()),
            (Some(if held { "3" } else { "2" }), retried),
            "job {index}: the held one's count stays; only a retry keeps its ended reservation"
        );
    }
}

#[tokio::test]
async fn survives_a_script_cache_flush() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let mover = mover(&server, 1000).await;
    assert_eq!(mover.tick(NOW).await.unwrap().taken, 0);
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut redis)
        .await
        .unwrap();
    add_job(&mut redis, "after-flush", "t", NOW - 1.0).await;

    mover.tick(NOW).await.unwrap();

    assert_eq!(ready(&mut redis, "t").await, ["after-flush"]);
}

/// Creates an ACL user `mover` (password `pw`) with `rules` on top of all commands but TIME (the
/// script then goes by the `now` it is given).
async fn acl_user(redis: &mut MultiplexedConnection, rules: &[&str]) {
    redis::cmd("ACL")
        .arg(&["SETUSER", "mover", "on", ">pw", "+@all", "-time"][..])
        .arg(rules)
        .query_async::<()>(redis)
        .await
        .unwrap();
}

/// A user that may not read buckets must not take every due job for an orphan and drop it.
#[tokio::test]
async fn a_bucket_read_refused_by_acl_fails_the_call_and_drops_nothing() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    add_job(&mut redis, "j1", "t", NOW - 1.0).await;
    acl_user(
        &mut redis,
        &[
            "~delayer:job_pool",
            "~delayer:ready_queue:*",
            "~delayer:topics",
        ],
    )
    .await;
    let mut mover = server.connect_as("mover", "pw").await;

    let refused = MoveScript::default()
        .run(&mut mover, &Layout::LEGACY.keys(""), NOW, 1000, false)
        .await;

    let error = refused.expect_err("the user may not read buckets");
    // Redis 7.0: "can't access at least one of the keys"; Valkey 8: "ACL failure in script".
    let said = error.to_string();
    assert!(
        said.contains("can't access") || said.contains("ACL failure in script"),
        "{error}"
    );
    assert_eq!(pool(&mut redis).await, ["j1"], "nothing dropped");
    assert!(ready(&mut redis, "t").await.is_empty());
}

/// A user that may not write one topic's ready list: that topic is parked (once, never pushed
/// half-way and retried), and the others move.
#[tokio::test]
async fn a_ready_list_the_user_may_not_write_is_stuck_not_duplicated() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    add_job(&mut redis, "j1", "a", NOW - 2.0).await;
    add_job(&mut redis, "j2", "b", NOW - 1.0).await;
    acl_user(
        &mut redis,
        &[
            "~delayer:job_pool",
            "~delayer:job_bucket:*",
            "~delayer:topics",
            "~delayer:ready_queue:a",
            "%R~delayer:ready_queue:b",
        ],
    )
    .await;
    let mut mover = server.connect_as("mover", "pw").await;
    let script = MoveScript::default();

    let first = script
        .run(&mut mover, &Layout::LEGACY.keys(""), NOW, 1000, false)
        .await
        .unwrap();
    for _ in 0..2 {
        script
            .run(&mut mover, &Layout::LEGACY.keys(""), NOW, 1000, false)
            .await
            .unwrap();
    }

    assert_eq!(ready(&mut redis, "a").await, ["j1"], "moved once");
    assert!(ready(&mut redis, "b").await.is_empty());
    assert_eq!(
        first.stuck,
        [Stuck {
            topic: "b".into(),
            why: StuckBecause::NoPermission,
            parked: 1
        }]
    );
    assert_eq!(pool(&mut redis).await, ["j2"], "parked, not lost");
}

/// The marks a move acts on, one job of each kind beside unmarked ones, for [`marks_parity`].
async fn add_marked_jobs(redis: &mut MultiplexedConnection) {
    for (id, topic, due) in [("plain", "t", NOW - 9.5), ("plain-p", "p", NOW - 8.5)] {
        add_job(redis, id, topic, due).await;
    }
    // A dead job a legacy client pushed again (whole seconds), a retry of an ended reservation (a
    // fraction), the same pushed again by a legacy client, and a job parked while its topic was
    // paused whose pause was deleted by hand.
    let died = [("attempts", "3"), ("died_at", "1")];
    let ended = [("attempts", "1"), ("ended", "1:x")];
    add_job(redis, "reborn", "t", NOW - 7.5).await;
    let _: () = redis
        .hset_multiple(job_bucket("reborn"), &died)
        .await
        .unwrap();
    add_job(redis, "retry", "t", NOW - 6.9).await;
    let _: () = redis
        .hset_multiple(job_bucket("retry"), &ended)
        .await
        .unwrap();
    add_job(redis, "pushed", "t", NOW - 5.5).await;
    let _: () = redis
        .hset_multiple(job_bucket("pushed"), &ended)
        .await
        .unwrap();
    add_job(redis, "unpaused", "p", NOW - 4.9).await;
    let _: () = redis
        .hset(job_bucket("unpaused"), "parked", "1800000000.1")
        .await
        .unwrap();
    let _: () = redis::pipe()
        .zadd(format!("{PARKED_PREFIX}p"), "unpaused", NOW - 70.0)
        .set(job_bucket("string"), "not a hash")
        .zadd(JOB_POOL, "string", NOW - 3.5)
        .zadd(JOB_POOL, "gone", NOW - 2.5)
        .query_async(redis)
        .await
        .unwrap();
}

/// What a move left: the ready lists, the pool, every bucket's fields and the parked jobs' key.
async fn after_move(redis: &mut MultiplexedConnection) -> String {
    let mut state = format!(
        "t {:?}\np {:?}\npool {:?}\nparked {:?}\n",
        ready(redis, "t").await,
        ready(redis, "p").await,
        pool(redis).await,
        redis
            .zrange::<_, Vec<String>>(format!("{PARKED_PREFIX}p"), 0, -1)
            .await
            .unwrap(),
    );
    for id in ["plain", "plain-p", "reborn", "retry", "pushed", "unpaused"] {
        let mut fields: Vec<(String, String)> = redis.hgetall(job_bucket(id)).await.unwrap();
        fields.sort();
        state += &format!("{id} {fields:?}\n");
    }
    state
}

/// One batch read at once (SORT, for a user that may read every key) and each job read in full
/// (any other user) act on the same marks: the dead job pushed again starts afresh, the legacy
/// push forgets its ended reservation and the retry keeps it, the unpaused job loses its parked
/// marks, orphans go.
#[tokio::test]
async fn a_batch_read_at_once_finds_the_same_marks_as_each_job_read_in_full() {
    let mut states = Vec::new();
    for rules in [&["~*"][..], &["~*", "-sort"][..]] {
        let server = RedisServer::start();
        let mut redis = server.connect().await;
        add_marked_jobs(&mut redis).await;
        acl_user(&mut redis, rules).await;
        let mut mover = server.connect_as("mover", "pw").await;

        let batch = MoveScript::default()
            .run(&mut mover, &Layout::LEGACY.keys(""), NOW, 1000, false)
            .await
            .unwrap();

        assert_eq!(batch.orphans, ["string", "gone"]);
        states.push(after_move(&mut redis).await);
    }
    let expected = r#"t ["plain", "reborn", "retry", "pushed"]
p ["plain-p", "unpaused"]
pool []
parked []
plain [("body", "the body"), ("topic", "t")]
plain-p [("body", "the body"), ("topic", "p")]
reborn [("body", "the body"), ("recounted", "1"), ("topic", "t")]
retry [("attempts", "1"), ("body", "the body"), ("ended", "1:x"), ("topic", "t")]
pushed [("attempts", "1"), ("body", "the body"), ("topic", "t")]
unpaused [("body", "the body"), ("topic", "p")]
"#;
    assert_eq!(states[0], expected, "read at once");
    assert_eq!(states[1], expected, "each job read in full");
}
