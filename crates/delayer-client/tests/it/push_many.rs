//! `push_many` against a real redis-server: a batch writes what as many single pushes write, in
//! one script call per 1,000 jobs, and one bad job (refused here or by Redis) writes nothing; a
//! mark is written by the same call as the jobs, or not at all.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::{Client, Error, Layout, MAX_PUSH_BATCH, NewPush, Settings};
use delayer_testkit::RedisServer;
use delayer_testkit::jobs::{move_until_empty, script_runs};
use delayer_testkit::legacy_client;
use delayer_wire::keys::{JOB_POOL, TOPICS, job_bucket};
use delayer_wire::push::{Limits, Pusher};
use delayer_wire::scripts::push::Mark;

/// What delayer wrote: the pool (id, score), each bucket's fields (`due` and `delay`, which
/// depend on when it was pushed, by name only) and TTL, and the registry.
struct Written {
    pool: Vec<(String, f64)>,
    buckets: HashMap<String, (Vec<(String, String)>, i64)>,
    registry: Vec<String>,
}

async fn written(redis: &mut MultiplexedConnection) -> Written {
    let pool: Vec<(String, f64)> = redis.zrange_withscores(JOB_POOL, 0, -1).await.unwrap();
    let mut buckets = HashMap::new();
    for (id, _) in &pool {
        let mut fields: Vec<(String, String)> = redis.hgetall(job_bucket(id)).await.unwrap();
        for (name, value) in &mut fields {
            // A job pushed for a time (every third, from the second) has the delay left then.
            let timed = id
                .strip_prefix("job-")
                .and_then(|n| n.parse::<usize>().ok())
                .is_some_and(|index| index % 3 == 1);
            if name == "due"
                || (name == "delay" && (timed || (value != "1.500" && value != "0.000")))
            {
                value.clear();
            }
        }
        fields.sort();
        let ttl: i64 = redis.ttl(job_bucket(id)).await.unwrap();
        buckets.insert(id.clone(), (fields, ttl));
    }
    let mut registry: Vec<String> = redis.smembers(TOPICS).await.unwrap();
    registry.sort();
    Written {
        pool,
        buckets,
        registry,
    }
}

/// Job `index` of the test's batch: its topic, body and id, and when it falls due (a delay, a
/// time, or now), in a closure that sets them on a single push or on a [`NewPush`].
macro_rules! job {
    ($index:expr, $at:expr, $make:expr) => {{
        let index = $index;
        let job = $make(format!("topic.{}", index % 3), format!("body {index}"))
            .id(format!("job-{index:05}"));
        match index % 3 {
            0 => job.delay(Duration::from_millis(1500)),
            1 => job.at($at),
            _ => job,
        }
    }};
}

#[tokio::test]
async fn push_many_writes_what_single_pushes_write_and_legacy_clients_pop_them() {
    let (singles, batch) = (RedisServer::start(), RedisServer::start());
    let at = SystemTime::now() + Duration::from_secs(2);
    let count = MAX_PUSH_BATCH + 500;

    let client = Client::connect(singles.info()).await.unwrap();
    let started = std::time::Instant::now();
    for index in 0..count {
        job!(index, at, |topic, body| client.push(topic, body))
            .await
            .unwrap();
    }
    let client = Client::connect(batch.info()).await.unwrap();
    let mut redis = batch.connect().await;
    let runs_before = script_runs(&mut redis).await;
    let ids = client
        .push_many((0..count).map(|index| job!(index, at, NewPush::new)))
        .await
        .unwrap();
    // How far apart a job's two pushes can be: the single pushes took a while on a busy box.
    let apart = started.elapsed().as_secs_f64();
    // Redis's clock just after the batch, before the comparisons below take their while.
    let now: (u64, u64) = delayer_client::redis::cmd("TIME")
        .query_async(&mut redis)
        .await
        .unwrap();
    let redis_now = now.0 as f64 + now.1 as f64 / 1e6;
    assert_eq!(
        script_runs(&mut redis).await - runs_before,
        2,
        "one call per {MAX_PUSH_BATCH} jobs"
    );
    let expected: Vec<String> = (0..count).map(|index| format!("job-{index:05}")).collect();
    assert_eq!(ids, expected, "the ids, in order");

    let singles = written(&mut singles.connect().await).await;
    let batch = written(&mut redis).await;
    assert_eq!(batch.registry, singles.registry);
    assert_eq!(batch.pool.len(), count);
    // By id: on a busy box the two runs' "now" jobs can sort apart from their timed ones.
    let batch_scores: std::collections::HashMap<&String, f64> =
        batch.pool.iter().map(|(id, score)| (id, *score)).collect();
    for (id, single) in &singles.pool {
        let score = batch_scores[id];
        // Delays count from Redis's clock at each push: the two runs are a moment apart.
        assert!(
            (single - score).abs() <= apart,
            "{id}: {single} against {score}"
        );
        let ((single_fields, single_ttl), (fields, ttl)) =
            (&singles.buckets[id], &batch.buckets[id]);
        assert_eq!(fields, single_fields, "{id}");
        assert!(
            (single_ttl - ttl).abs() <= 2,
            "{id}: TTL {single_ttl} against {ttl}"
        );
    }
    let batch_pool = batch.pool;
    let score = |id: &str| {
        batch_pool
            .iter()
            .find(|(pooled, _)| pooled == id)
            .unwrap()
            .1
    };
    assert!(score("job-00000") > redis_now && score("job-00000") < redis_now + 1.5);
    let at_seconds = delayer_wire::time::to_unix(at);
    assert!(
        (score("job-00001") - at_seconds).abs() < 0.002,
        "the time given"
    );

    move_until_empty(&mut redis).await;
    let popped = legacy_client::pop(&mut redis, "topic.2")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (popped.id.as_str(), popped.body.as_str()),
        ("job-00002", "body 2")
    );
}

#[tokio::test]
async fn a_batch_with_one_bad_job_writes_nothing() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let good = || (0..5).map(|index| NewPush::new("t", "b").id(format!("good-{index}")));

    let refusals = [
        (
            NewPush::new("t", ""),
            "job 5 of the batch: the body is empty",
        ),
        (
            NewPush::new("", "b"),
            "job 5 of the batch: the topic is empty",
        ),
        (
            NewPush::new("t", "b").id("good-1"),
            "job 5 of the batch: job \"good-1\" is in the batch more than once",
        ),
        (
            NewPush::new("t", "b").at(SystemTime::now() - Duration::from_secs(60)),
            "is in the past",
        ),
    ];
    for (bad, said) in refusals {
        let error = client.push_many(good().chain([bad])).await.unwrap_err();
        assert!(
            matches!(error, Error::InBatch { index: 5, .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains(said), "{error}");
    }

    // Refused by the script: one bucket key of the wrong type, in the second half of the batch.
    let _: () = redis.set(job_bucket("good-3"), "not a hash").await.unwrap();
    let error = client.push_many(good()).await.unwrap_err();
    assert!(
        matches!(&error, Error::InBatch { index: 3, error } if matches!(**error, Error::WrongType { .. })),
        "{error:?}"
    );
    let pooled: usize = redis.zcard(JOB_POOL).await.unwrap();
    let buckets: Vec<Vec<u8>> = redis.keys("delayer:job_bucket:*").await.unwrap();
    assert_eq!(
        (pooled, buckets),
        (0, vec![job_bucket("good-3")]),
        "nothing written"
    );
    let registry: usize = redis.scard(TOPICS).await.unwrap();
    assert_eq!(registry, 0);
}

#[tokio::test]
async fn a_user_that_may_not_run_exists_pushes_batches_and_a_bucket_of_the_wrong_type_is_refused() {
    let server = RedisServer::start();
    let mut admin = server.connect().await;
    let setuser = |user: &str, rules: &str| {
        let mut command = delayer_client::redis::cmd("ACL");
        command.arg("SETUSER").arg(user);
        command.arg(rules.split_whitespace().collect::<Vec<_>>());
        command
    };
    let _: () = setuser("admin", "on >admin ~* +@all")
        .query_async(&mut admin)
        .await
        .unwrap();
    let mut admin = server.connect_as("admin", "admin").await;
    // The client connects as `default`: the batch's one EXISTS is denied, each bucket's TYPE not.
    let _: () = setuser("default", "reset on nopass ~* +@all -exists")
        .query_async(&mut admin)
        .await
        .unwrap();
    let client = Client::connect(server.info()).await.unwrap();
    let batch = |name: &'static str| {
        (0..5).map(move |index| NewPush::new("t", "b").id(format!("{name}-{index}")))
    };

    client.push_many(batch("first")).await.unwrap();
    let _: () = admin
        .set(job_bucket("second-3"), "not a hash")
        .await
        .unwrap();
    let error = client.push_many(batch("second")).await.unwrap_err();

    assert!(
        matches!(&error, Error::InBatch { index: 3, error } if matches!(**error, Error::WrongType { .. })),
        "{error:?}"
    );
    let pooled: Vec<String> = admin.zrange(JOB_POOL, 0, -1).await.unwrap();
    assert_eq!(
        pooled,
        (0..5)
            .map(|index| format!("first-{index}"))
            .collect::<Vec<_>>(),
        "the first batch written, nothing of the second"
    );
    let buckets: Vec<Vec<u8>> = admin.keys("delayer:job_bucket:second-*").await.unwrap();
    assert_eq!(buckets, [job_bucket("second-3")], "no bucket of it written");
    let denied: Vec<delayer_client::redis::Value> = delayer_client::redis::cmd("ACL")
        .arg("LOG")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(denied.is_empty(), "asked before it ran: {denied:?}");
}

#[tokio::test]
async fn a_batch_refused_for_want_of_memory_half_way_names_the_jobs_it_wrote() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let used: String = delayer_client::redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut redis)
        .await
        .unwrap();
    let used: u64 = used
        .lines()
        .find_map(|line| line.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Room for a few thousand of these jobs, not for all of them.
    let _: () = delayer_client::redis::cmd("CONFIG")
        .arg(&["SET", "maxmemory", &(used + (4 << 20)).to_string()])
        .query_async(&mut redis)
        .await
        .unwrap();
    let body = vec![b'x'; 1000];
    let jobs = (0..20_000).map(|_| NewPush::new("t", body.clone()));

    let error = client.push_many(jobs).await.unwrap_err();

    let Error::PartlyPushed { pushed, error } = &error else {
        panic!("{error}")
    };
    assert!(error.to_string().contains("OOM"), "{error}");
    let waiting: usize = redis.zcard(JOB_POOL).await.unwrap();
    assert!(
        (MAX_PUSH_BATCH..20_000).contains(&waiting),
        "{waiting} written"
    );
    assert_eq!(pushed.len(), waiting);
    let indexes: Vec<usize> = pushed.iter().map(|(index, _)| *index).collect();
    assert_eq!(
        indexes,
        (0..waiting).collect::<Vec<_>>(),
        "the batch's first ones"
    );
    for (_, id) in pushed {
        let score: Option<f64> = redis.zscore(JOB_POOL, id).await.unwrap();
        assert!(score.is_some(), "{id} written");
    }
}

/// A push with a mark, as the daemon's Kafka link makes it (the offsets of the requests it
/// pushed) through the pusher the client's pushes use too.
#[tokio::test]
async fn a_mark_is_written_by_the_call_that_pushes_the_jobs_or_not_at_all() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let pusher = Pusher::new(Layout::LEGACY, Limits::from(&Settings::default()));
    let mut pushing = server.connect().await;
    let jobs = |from: usize| (from..from + 3).map(|n| NewPush::new("t", "b").id(format!("j{n}")));
    let mark = |offset: &str| Mark {
        key: "delayer:kafka_offsets:g".into(),
        fields: vec![("requests:0".into(), offset.into())],
    };
    let offsets = |redis: MultiplexedConnection| async move {
        let offsets: HashMap<String, String> = redis
            .clone()
            .hgetall("delayer:kafka_offsets:g")
            .await
            .unwrap();
        offsets
    };

    let runs = script_runs(&mut redis).await;
    pusher
        .push(&mut pushing, jobs(0), Some(&mark("2")))
        .await
        .unwrap();
    assert_eq!(script_runs(&mut redis).await - runs, 1, "one script call");
    assert_eq!(offsets(redis.clone()).await["requests:0"], "2");
    let pooled: usize = redis.zcard(JOB_POOL).await.unwrap();
    assert_eq!(pooled, 3);

    // A batch Redis refuses (a bucket of the wrong type) writes neither its jobs nor its mark.
    let _: () = redis.set(job_bucket("j4"), "not a hash").await.unwrap();
    pusher
        .push(&mut pushing, jobs(3), Some(&mark("5")))
        .await
        .unwrap_err();
    assert_eq!(offsets(redis.clone()).await["requests:0"], "2");
    let pooled: usize = redis.zcard(JOB_POOL).await.unwrap();
    assert_eq!(pooled, 3);

    // No jobs: the mark alone.
    pusher
        .push(&mut pushing, Vec::<NewPush>::new(), Some(&mark("9")))
        .await
        .unwrap();
    assert_eq!(offsets(redis.clone()).await["requests:0"], "9");
}
