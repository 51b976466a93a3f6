//! The move script, one call at a time with a fixed `now`, against a real redis-server.

mod support;

use delayer::Mover;
use delayer::keys::{JOB_POOL, job_bucket, ready_queue};
use delayer::mover::Batch;
use delayer::redis::aio::MultiplexedConnection;
use delayer::redis::{self, AsyncCommands};
use support::RedisServer;

const NOW: f64 = 1_000_000.5;

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

fn mover(server: &RedisServer, batch_size: usize) -> Mover {
    Mover::new(&server.config(&format!("batch_size = {batch_size}"))).unwrap()
}

#[tokio::test]
async fn moves_only_due_jobs_and_reports_the_next_due_time() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    add_job(&mut redis, "early", "t", NOW - 10.0).await;
    add_job(&mut redis, "exactly-now", "t", NOW).await;
    add_job(&mut redis, "just-later", "t", NOW + 0.001).await;
    add_job(&mut redis, "much-later", "t", NOW + 60.0).await;

    let batch = mover(&server, 1000).tick(NOW).await.unwrap();

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
    let mover = mover(&server, 2);

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

    let batch = mover(&server, 1000).tick(NOW).await.unwrap();

    assert_eq!(
        batch.moved,
        [
            (
                "order.close".to_string(),
                vec!["o1".to_string(), "o2".to_string()]
            ),
            ("member:remind".to_string(), vec!["m1".to_string()]),
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

    let batch = mover(&server, 1000).tick(NOW).await.unwrap();

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
async fn leaves_jobs_in_the_pool_when_their_ready_list_is_not_a_list() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let _: () = redis
        .set(ready_queue("broken"), "not a list")
        .await
        .unwrap();
    add_job(&mut redis, "b1", "broken", NOW - 2.0).await;
    add_job(&mut redis, "ok", "fine", NOW - 1.0).await;
    add_job(&mut redis, "later", "fine", NOW + 5.0).await;

    let batch = mover(&server, 1000).tick(NOW).await.unwrap();

    assert_eq!(batch.stuck, ["b1"]);
    assert_eq!(ready(&mut redis, "fine").await, ["ok"]);
    assert_eq!(pool(&mut redis).await, ["b1", "later"], "nothing is lost");
    assert_eq!(
        batch.next_due,
        Some(NOW + 5.0),
        "a stuck job is not reported as next due"
    );
    let still: String = redis.get(ready_queue("broken")).await.unwrap();
    assert_eq!(still, "not a list");
}

#[tokio::test]
async fn more_stuck_jobs_than_a_batch_do_not_hold_up_other_topics() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let _: () = redis
        .set(ready_queue("broken"), "not a list")
        .await
        .unwrap();
    for index in 0..25 {
        add_job(
            &mut redis,
            &format!("stuck{index:02}"),
            "broken",
            NOW - 100.0,
        )
        .await;
    }
    for index in 0..3 {
        add_job(&mut redis, &format!("fine{index}"), "fine", NOW - 1.0).await;
    }

    let batch = mover(&server, 10).tick(NOW).await.unwrap();

    assert_eq!(ready(&mut redis, "fine").await, ["fine0", "fine1", "fine2"]);
    assert_eq!(batch.stuck.len(), 25);
    assert_eq!(
        batch.taken, 3,
        "not a full batch: the loop will not spin on stuck jobs"
    );
    let left: usize = redis.zcard(JOB_POOL).await.unwrap();
    assert_eq!(left, 25, "stuck jobs are kept");
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

    let batch = mover(&server, 1000).tick(NOW).await.unwrap();

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

    let batch = mover(&server, count).tick(NOW).await.unwrap();

    assert_eq!(batch.moved_count(), count);
    let ids = ready(&mut redis, "bulk").await;
    let expected: Vec<String> = (0..count).map(|index| format!("{index:06}")).collect();
    assert_eq!(ids, expected);
}

#[tokio::test]
async fn survives_a_script_cache_flush() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let mover = mover(&server, 1000);
    assert_eq!(mover.tick(NOW).await.unwrap(), Batch::default());
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut redis)
        .await
        .unwrap();
    add_job(&mut redis, "after-flush", "t", NOW - 1.0).await;

    mover.tick(NOW).await.unwrap();

    assert_eq!(ready(&mut redis, "t").await, ["after-flush"]);
}
