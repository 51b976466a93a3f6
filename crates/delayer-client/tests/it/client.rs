//! The client against a real redis-server: the legacy clients' jobs and ours are the same jobs,
//! reserve/ack/nack/touch do what they promise, and bad input is refused before anything is written.

use std::time::{Duration, Instant, SystemTime};

use crate::fixture::{start, start_with};
use delayer_client::inspector::JobTimes;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::redis::{AsyncCommands, ErrorKind};
use delayer_client::{
    Acked, Client, Error, Inspector, JobId, Nacked, Receipt, Removed, Settings, State, Topic,
};
use delayer_testkit::jobs::{move_due_jobs, move_until_empty, move_until_left};
use delayer_testkit::legacy_client::{self, Message};
use delayer_testkit::proxy::ForgetfulProxy;
use delayer_testkit::{RedisServer, wait_for};
use delayer_wire::keys::{self, JOB_POOL, RESERVED, job_bucket, ready_queue};
use delayer_wire::scripts::release::ReleaseScript;
use delayer_wire::time::deadline_score;

/// Reserves the job that is ready on `topic` now (there must be one).
async fn reserve_now(client: &Client, topic: &str, ttr: Duration) -> delayer_client::Job {
    client
        .reserve(&[topic], ttr, Duration::ZERO)
        .await
        .unwrap()
        .expect("a ready job")
}

async fn pool(redis: &mut MultiplexedConnection) -> Vec<(String, f64)> {
    redis.zrange_withscores(JOB_POOL, 0, -1).await.unwrap()
}

#[tokio::test]
async fn a_job_pushed_here_is_popped_by_the_legacy_clients_intact() {
    let (_server, mut redis, client) = start().await;

    let before = delayer_wire::time::unix_now();
    let id = client
        .push("order.close", "order 42")
        .delay(Duration::from_millis(1500))
        .await
        .unwrap();

    assert_eq!(
        id.as_bytes().len(),
        32,
        "a unique id like the md5s users make"
    );
    let [(pooled, score)] = &pool(&mut redis).await[..] else {
        panic!("one job in the pool")
    };
    assert_eq!(pooled, &id);
    assert!(
        (score - (before + 1.5)).abs() < 0.1,
        "millisecond score {score}"
    );
    assert!(
        score.fract() != 0.0,
        "fractional, where legacy clients write whole seconds"
    );
    let ttl: i64 = redis.ttl(job_bucket(&id)).await.unwrap();
    assert!(
        (604_800..=604_802).contains(&ttl),
        "the legacy clients' TTL: delay + ready_max_lifetime, {ttl}"
    );
    assert_eq!(move_due_jobs(&mut redis).await, 0, "not before its time");
    wait_for(Duration::from_secs(3), "the job to fall due", || {
        let mut redis = redis.clone();
        async move { (move_due_jobs(&mut redis).await == 1).then_some(()) }
    })
    .await;
    let popped = legacy_client::pop(&mut redis, "order.close").await.unwrap();
    assert_eq!(
        popped,
        Some(Message {
            id: id.to_string(),
            topic: "order.close".into(),
            body: "order 42".into()
        })
    );
}

#[tokio::test]
async fn a_job_pushed_by_a_legacy_client_is_popped_reserved_and_got_here() {
    let (_server, mut redis, client) = start().await;
    for id in ["legacy-1", "legacy-2", "legacy-3"] {
        let message = Message {
            id: id.into(),
            topic: "mail".into(),
            body: format!("body of {id}"),
        };
        legacy_client::push(&mut redis, &message, 0).await.unwrap();
    }
    let info = client.get("legacy-1").await.unwrap();
    assert_eq!(info.state, State::Waiting);
    move_until_empty(&mut redis).await;
    assert_eq!(client.get("legacy-1").await.unwrap().state, State::Ready);

    let popped = client.pop("mail").await.unwrap().unwrap();
    assert_eq!(
        (popped.id.to_str().unwrap(), popped.body_text().unwrap()),
        ("legacy-1", "body of legacy-1")
    );
    let bpopped = client
        .bpop(&["none", "mail"], Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(bpopped.id, "legacy-2");
    let reserved = reserve_now(&client, "mail", Duration::from_secs(30)).await;
    assert_eq!(
        (reserved.id.to_str().unwrap(), reserved.attempts),
        ("legacy-3", 1)
    );
    assert_eq!(reserved.due, None, "legacy clients do not record it");

    let got = client.get("legacy-3").await.unwrap();
    assert_eq!(got.state, State::Reserved);
    assert_eq!(got.topic.as_ref().and_then(Topic::to_str), Some("mail"));
    assert_eq!(got.body.as_deref(), Some(&b"body of legacy-3"[..]));
    assert_eq!(got.attempts, 1);
    assert!(got.deadline.unwrap() > SystemTime::now() + Duration::from_secs(29));
    assert_eq!(client.ack(&reserved).await.unwrap(), Acked::Done);
    assert_eq!(client.get("legacy-3").await.unwrap().state, State::Unknown);
    assert_eq!(client.pop("mail").await.unwrap(), None);
}

#[tokio::test]
async fn remove_and_get_follow_a_job_through_its_life() {
    let (_server, mut redis, client) = start().await;
    let at = SystemTime::now() + Duration::from_secs(3600);
    let id = client.push("t", "b").at(at).id("job-1").await.unwrap();
    assert_eq!(id, "job-1");

    let waiting = client.get("job-1").await.unwrap();
    assert_eq!(waiting.state, State::Waiting);
    let due = waiting.due.unwrap();
    let off = due
        .duration_since(at)
        .unwrap_or_else(|error| error.duration());
    assert!(off < Duration::from_millis(2), "{off:?}");
    assert!(
        legacy_client::remove(&mut redis, "job-1").await.unwrap(),
        "legacy remove works on ours"
    );
    assert_eq!(client.get("job-1").await.unwrap().state, State::Unknown);

    let message = Message {
        id: "legacy".into(),
        topic: "t".into(),
        body: "b".into(),
    };
    legacy_client::push(&mut redis, &message, 60).await.unwrap();
    assert_eq!(client.remove("legacy").await.unwrap(), Removed::Waiting);
    assert_eq!(client.remove("legacy").await.unwrap(), Removed::Unknown);
    assert!(pool(&mut redis).await.is_empty());
}

#[tokio::test]
async fn nack_retries_until_max_attempts_then_the_job_is_dead_and_can_be_requeued() {
    let settings = Settings {
        max_attempts: 3,
        ..Settings::default()
    };
    let (_server, mut redis, client) = start_with(settings).await;
    let inspector = Inspector::new(&client);
    let id = client.push("flaky", "b").await.unwrap();
    let ttr = Duration::from_secs(30);

    for attempt in 1..=3 {
        move_until_empty(&mut redis).await;
        let job = reserve_now(&client, "flaky", ttr).await;
        assert_eq!(job.attempts, attempt);
        let nacked = client.nack(&job, Duration::ZERO).await.unwrap();
        let expected = if attempt < 3 {
            Nacked::Retry
        } else {
            Nacked::Dead
        };
        assert_eq!(nacked, expected, "attempt {attempt}");
    }

    let dead = client.get(&id).await.unwrap();
    assert_eq!((dead.state, dead.attempts), (State::Dead, 3));
    assert_eq!(
        inspector.dead("flaky", 10).await.unwrap(),
        std::slice::from_ref(&id)
    );
    let receipt = Receipt {
        id: id.clone(),
        attempt: 3,
        token: None,
        topic: None,
    };
    assert!(matches!(
        client.nack(receipt, Duration::ZERO).await,
        Err(Error::NotReserved(_))
    ));
    assert_eq!(inspector.requeue_dead("flaky").await.unwrap(), 1);
    let again = client.get(&id).await.unwrap();
    assert_eq!((again.state, again.attempts), (State::Waiting, 0));
    assert!(inspector.dead("flaky", 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn nack_with_a_delay_puts_the_job_back_in_the_pool_for_then() {
    let (_server, mut redis, client) = start().await;
    client.push("t", "b").await.unwrap();
    move_until_empty(&mut redis).await;
    let job = reserve_now(&client, "t", Duration::from_secs(30)).await;

    let before = delayer_wire::time::unix_now();
    assert_eq!(
        client.nack(&job, Duration::from_secs(90)).await.unwrap(),
        Nacked::Retry
    );

    let [(_, score)] = &pool(&mut redis).await[..] else {
        panic!("back in the pool")
    };
    assert!((score - (before + 90.0)).abs() < 1.0, "{score}");
    let reservations: usize = redis.zcard(RESERVED).await.unwrap();
    assert_eq!(reservations, 0);
}

#[tokio::test]
async fn a_nack_far_off_keeps_the_jobs_data_until_then_and_one_too_far_is_refused() {
    const DAY: u64 = 86_400;
    let (server, mut redis, client) = start().await;
    let id = client.push("t", "b").await.unwrap();
    move_until_empty(&mut redis).await;
    let job = reserve_now(&client, "t", Duration::from_secs(30)).await;

    let too_far = Duration::from_secs(1 << 31);
    let refused = client.nack(&job, too_far).await.unwrap_err();
    assert!(matches!(refused, Error::TooFar(_)), "{refused}");
    assert_eq!(client.get(&id).await.unwrap().state, State::Reserved);

    // The data was pushed to live 7 days past its due time; the retry is in 14.
    let before: i64 = redis.ttl(job_bucket(&id)).await.unwrap();
    assert!(before < 7 * DAY as i64 + 10, "{before}");
    let retry_in = Duration::from_secs(14 * DAY);
    assert_eq!(client.nack(&job, retry_in).await.unwrap(), Nacked::Retry);
    let after: i64 = redis.ttl(job_bucket(&id)).await.unwrap();
    assert!(
        after >= (21 * DAY - 10) as i64,
        "{after}: outlives the retry by 7 days"
    );

    // A lifetime past what Redis takes as a TTL is bounded, not an error after the writes.
    let endless = Settings {
        ready_max_lifetime: Duration::MAX,
        ..Settings::default()
    };
    let endless = Client::connect_with(server.info(), endless).await.unwrap();
    let _: () = redis.zadd(JOB_POOL, &id, 0).await.unwrap();
    move_until_empty(&mut redis).await;
    let job = reserve_now(&endless, "t", Duration::from_secs(30)).await;
    assert_eq!(endless.nack(&job, retry_in).await.unwrap(), Nacked::Retry);
    assert_eq!(endless.get(&id).await.unwrap().state, State::Waiting);
}

#[tokio::test]
async fn touch_extends_a_reservation_and_ack_after_it_lapsed_says_so() {
    let (_server, mut redis, client) = start().await;
    let id = client.push("t", "b").await.unwrap();
    move_until_empty(&mut redis).await;
    let job = reserve_now(&client, "t", Duration::from_secs(1)).await;

    client.touch(&job, Duration::from_secs(600)).await.unwrap();
    let deadline: i64 = redis.zscore(RESERVED, &id).await.unwrap();
    let now = delayer_wire::time::unix_now();
    assert!(deadline > deadline_score(now + 590.0), "whole milliseconds");

    // As if its time had run out and the daemon had delivered it again.
    let _: () = redis.zrem(RESERVED, &id).await.unwrap();
    let _: () = redis.zadd(JOB_POOL, &id, 1).await.unwrap();
    assert!(matches!(
        client.touch(&job, Duration::from_secs(1)).await,
        Err(Error::NotReserved(_))
    ));
    assert_eq!(
        client.ack(&job).await.unwrap(),
        Acked::Late,
        "lapsed, but nobody else had it: finished all the same"
    );
    assert!(pool(&mut redis).await.is_empty(), "never delivered again");
    assert!(matches!(client.ack(&job).await, Err(Error::UnknownJob(_))));
}

#[tokio::test]
async fn a_time_to_run_is_at_least_a_second_for_reserve_and_touch_as_for_the_worker() {
    let (_server, mut redis, client) = start().await;
    let id = client.push("t", "b").await.unwrap();
    move_until_empty(&mut redis).await;

    let job = reserve_now(&client, "t", Duration::from_nanos(1)).await;
    let deadline: i64 = redis.zscore(RESERVED, &id).await.unwrap();
    let now = delayer_wire::time::unix_now();
    assert!(
        deadline >= deadline_score(now + 0.9),
        "a second, not a nanosecond"
    );
    client.touch(&job, Duration::ZERO).await.unwrap();
    let deadline: i64 = redis.zscore(RESERVED, &id).await.unwrap();
    assert!(
        deadline >= deadline_score(now + 0.9),
        "touched for a second"
    );
    assert_eq!(delayer_client::MIN_TTR, Duration::from_secs(1));

    // And at most Settings::max_ttr (a day unless set): nothing is reserved or extended beyond.
    let forever = Duration::from_secs(1_000_000_000_000);
    let refused = client.touch(&job, forever).await.unwrap_err();
    assert!(matches!(refused, Error::TtrTooLong { .. }), "{refused}");
    let deadline_after: i64 = redis.zscore(RESERVED, &id).await.unwrap();
    assert_eq!(deadline_after, deadline);
    client.ack(&job).await.unwrap();
    client.push("t", "b").await.unwrap();
    move_until_empty(&mut redis).await;
    let refused = client.reserve(&["t"], forever, Duration::ZERO).await;
    assert!(
        matches!(refused, Err(Error::TtrTooLong { .. })),
        "{refused:?}"
    );
    let ready: usize = redis.llen(ready_queue("t")).await.unwrap();
    assert_eq!(ready, 1, "nothing reserved");
    let day = delayer_client::DEFAULT_MAX_TTR;
    assert_eq!(day, Duration::from_secs(86_400));
    reserve_now(&client, "t", day).await;
}

#[tokio::test]
async fn a_waiting_reserve_wakes_as_soon_as_a_job_is_ready() {
    let (_server, mut redis, client) = start().await;
    let consumer = client.clone();
    let waiting = tokio::spawn(async move {
        let job = consumer
            .reserve(&["t"], Duration::from_secs(30), Duration::from_secs(10))
            .await
            .unwrap();
        (job, Instant::now())
    });
    // Let it look once and start waiting.
    wait_for(Duration::from_secs(5), "the reserve to be waiting", || {
        let mut redis = redis.clone();
        async move {
            let calls = delayer_testkit::jobs::command_stats(&mut redis).await;
            calls
                .get("evalsha")
                .is_some_and(|(calls, _)| *calls >= 1)
                .then_some(())
        }
    })
    .await;

    client.push("t", "b").id("wake").await.unwrap();
    move_until_empty(&mut redis).await;
    let ready_at = Instant::now();
    let (job, woke_at) = waiting.await.unwrap();

    assert_eq!(job.unwrap().id, "wake");
    let after = woke_at - ready_at;
    eprintln!("reserved {after:?} after the job was ready");
    assert!(
        after < Duration::from_millis(500),
        "woken, not polled: {after:?}"
    );
}

#[tokio::test]
async fn a_reserve_that_finds_a_job_at_once_does_not_watch_the_ready_lists() {
    let (_server, mut redis, client) = start().await;
    client.push("t", "b").await.unwrap();
    move_until_empty(&mut redis).await;

    let job = reserve_now(&client, "t", Duration::from_secs(30)).await;
    let none = client
        .reserve(&["t"], Duration::from_secs(30), Duration::ZERO)
        .await
        .unwrap();

    assert!(none.is_none());
    client.ack(&job).await.unwrap();
    // A watch would get a message from Redis for every job taken off a ready list, for nothing.
    assert_eq!(delayer_testkit::jobs::tracking_clients(&mut redis).await, 0);
    let waited = client
        .reserve(&["t"], Duration::from_secs(30), Duration::from_millis(50))
        .await
        .unwrap();
    assert!(waited.is_none());
    assert_eq!(
        delayer_testkit::jobs::tracking_clients(&mut redis).await,
        1,
        "a reserve that waits watches"
    );

    // A consumer that keeps finding jobs stops the watch a few seconds after its last wait.
    wait_for(Duration::from_secs(15), "the watch stopped", || {
        let (client, mut redis) = (client.clone(), redis.clone());
        async move {
            client.push("t", "b").await.unwrap();
            move_until_empty(&mut redis).await;
            let job = client
                .reserve(&["t"], Duration::from_secs(30), Duration::from_secs(1))
                .await
                .unwrap()
                .expect("a ready job");
            client.ack(&job).await.unwrap();
            let tracking = delayer_testkit::jobs::tracking_clients(&mut redis).await;
            (tracking == 0).then_some(())
        }
    })
    .await;
}

#[tokio::test]
async fn reserve_drops_ids_whose_data_expired_and_gives_up_after_its_timeout() {
    let (_server, mut redis, client) = start().await;
    let ids: Vec<String> = (0..250).map(|index| format!("gone-{index}")).collect();
    let _: () = redis.lpush(ready_queue("t"), &ids).await.unwrap();
    client.push("t", "b").id("real").await.unwrap();
    move_until_empty(&mut redis).await;

    let job = client
        .reserve(&["t"], Duration::from_secs(30), Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(job.unwrap().id, "real", "past 250 ids without data");

    let started = Instant::now();
    let none = client
        .reserve(&["t"], Duration::from_secs(30), Duration::from_millis(300))
        .await;
    assert_eq!(none.unwrap(), None);
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn bad_input_is_refused_naming_the_problem_and_writes_nothing() {
    let settings = Settings {
        max_body_bytes: 1000,
        ..Settings::default()
    };
    let (_server, mut redis, client) = start_with(settings).await;

    let refusals = [
        (client.push("", "b").await, "the topic is empty"),
        (client.push("t", "").await, "the body is empty"),
        (
            client.push("t", vec![b'x'; 1001]).await,
            "the body is 1001 bytes, over the limit of 1000 bytes",
        ),
        (client.push("t", "b").id("").await, "the id is empty"),
        (
            client
                .push("t", "b")
                .at(SystemTime::now() - Duration::from_secs(60))
                .await,
            "is in the past",
        ),
        (
            client
                .push("t", "b")
                .delay(delayer_client::MAX_DELAY + Duration::from_secs(1))
                .await,
            "the delay of 2147483648 s is too long",
        ),
    ];
    for (result, message) in refusals {
        let error = result.expect_err(message);
        assert!(error.to_string().contains(message), "{error} / {message}");
    }
    assert!(
        client.push("t", vec![b'x'; 1000]).await.is_ok(),
        "the limit itself is fine"
    );
    let _: () = redis.del(JOB_POOL).await.unwrap();

    let nobody = || Receipt {
        id: "no-such-job".into(),
        attempt: 1,
        token: None,
        topic: None,
    };
    assert!(matches!(
        client.ack(nobody()).await,
        Err(Error::UnknownJob(_))
    ));
    assert!(matches!(
        client.touch(nobody(), Duration::from_secs(1)).await,
        Err(Error::NotReserved(_))
    ));
    assert!(matches!(
        client.nack(nobody(), Duration::ZERO).await,
        Err(Error::NotReserved(_))
    ));
    assert!(matches!(client.pop("").await, Err(Error::EmptyTopic)));

    // Keys of the wrong type: named, and nothing half-written.
    let _: () = redis.set(job_bucket("clash"), "a string").await.unwrap();
    let error = client.push("t", "b").id("clash").await.unwrap_err();
    assert!(
        error.to_string().contains("delayer:job_bucket:clash"),
        "{error}"
    );
    assert!(
        pool(&mut redis).await.is_empty(),
        "not added to the pool without its data"
    );
    // A time to live Redis would refuse (EXPIRE comes after the bucket's write) fails the push
    // script before that write.
    let script = delayer_wire::scripts::push::PushScript::default();
    let job = delayer_wire::scripts::push::NewJob {
        id: b"forever",
        topic: b"t",
        body: b"b",
        due: Some(1e16),
        ttl_seconds: u64::MAX,
        delay: 1e16,
    };
    let error = script
        .run(
            &mut redis,
            &keys::Layout::LEGACY.keys(""),
            delayer_wire::scripts::push::Form::Legacy,
            &[job],
            None,
        )
        .await
        .unwrap_err();
    assert!(error.to_string().contains("time to live"), "{error}");
    let bucket: bool = redis.exists(job_bucket("forever")).await.unwrap();
    assert!(!bucket && pool(&mut redis).await.is_empty());
    let _: () = redis.set(ready_queue("broken"), "x").await.unwrap();
    let error = client.pop("broken").await.unwrap_err();
    assert!(
        matches!(&error, Error::WrongType { key, .. } if key.as_bytes() == keys::ready_queue("broken")),
        "{error}"
    );
}

#[tokio::test]
async fn connecting_to_a_wrong_password_or_no_redis_fails_at_once() {
    let server = RedisServer::start_with(&["--requirepass", "secret"]);
    let info = server.info();
    let wrong = info
        .clone()
        .set_redis_settings(info.redis_settings().clone().set_password("wrong"));
    let error = Client::connect(wrong).await.err().expect("refused");
    assert!(
        matches!(&error, Error::Redis(error) if error.kind() == ErrorKind::AuthenticationFailed),
        "{error}"
    );

    let started = Instant::now();
    let nowhere = Client::connect("redis://127.0.0.1:1/").await;
    assert!(nowhere.is_err());
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_reservations_key_of_the_wrong_type_fails_a_reserve_before_anything_changed() {
    let (_server, mut redis, client) = start().await;
    let id = client.push("t", "b").await.unwrap();
    move_until_empty(&mut redis).await;
    let _: () = redis.set(RESERVED, "oops").await.unwrap();

    let error = client
        .reserve(&["t"], Duration::from_secs(30), Duration::ZERO)
        .await
        .unwrap_err();

    assert!(
        matches!(&error, Error::WrongType { key, .. } if key == RESERVED),
        "{error}"
    );
    let ready: Vec<String> = redis.lrange(ready_queue("t"), 0, -1).await.unwrap();
    assert_eq!(ready, std::slice::from_ref(&id), "still ready");
    let attempts: Option<u32> = redis.hget(job_bucket(&id), "attempts").await.unwrap();
    assert_eq!(attempts, None, "no attempt counted");
    let error = client.get(&id).await.unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("delayer:reserved holds the wrong type"),
        "{error}"
    );
}

#[tokio::test]
async fn the_client_reconnects_after_redis_restarts() {
    let mut server = RedisServer::start();
    let client = Client::connect(server.info()).await.unwrap();
    client.push("t", "before").await.unwrap();

    server.stop(true);
    assert!(
        client.push("t", "while down").await.is_err(),
        "Redis is down"
    );
    server.restart();

    // The command that found the connection broken failed; the next ones reconnect.
    let pushed = wait_for(Duration::from_secs(5), "a push to succeed", || {
        let client = client.clone();
        async move { client.push("t", "after").await.ok() }
    })
    .await;
    assert_eq!(client.get(&pushed).await.unwrap().state, State::Waiting);
}

/// The daemon's part: ends the reservations whose deadline passed, as if `after` had passed
/// (every deadline is brought that much closer first: the script goes by Redis's clock).
async fn release_lapsed(redis: &mut MultiplexedConnection, after: Duration) {
    let keys = keys::Layout::LEGACY.keys("");
    let deadlines: Vec<(String, f64)> = redis
        .zrange_withscores(keys.reserved(), 0, -1)
        .await
        .unwrap();
    for (id, deadline) in deadlines {
        let earlier = deadline - after.as_millis() as f64;
        let _: () = redis.zadd(keys.reserved(), id, earlier).await.unwrap();
    }
    ReleaseScript::default()
        .lapsed(redis, &keys, 25, 1000)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_consumer_whose_time_ran_out_cannot_touch_nack_or_ack_the_next_ones_reservation() {
    let (_server, mut redis, client) = start().await;
    let id = client.push("t", "b").await.unwrap();
    move_until_empty(&mut redis).await;
    let late = reserve_now(&client, "t", Duration::from_secs(1)).await;
    release_lapsed(&mut redis, Duration::from_secs(2)).await;
    move_until_empty(&mut redis).await;
    let current = reserve_now(&client, "t", Duration::from_secs(30)).await;
    assert_eq!((late.attempts, current.attempts), (1, 2));

    assert!(matches!(
        client.nack(&late, Duration::ZERO).await,
        Err(Error::NotReserved(_))
    ));
    assert!(matches!(
        client.touch(&late, Duration::from_secs(600)).await,
        Err(Error::NotReserved(_))
    ));
    assert_eq!(client.ack(&late).await.unwrap(), Acked::Stale);
    let info = client.get(&id).await.unwrap();
    assert_eq!(
        (info.state, info.attempts),
        (State::Reserved, 2),
        "untouched"
    );
    client
        .touch(&current, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(client.ack(&current).await.unwrap(), Acked::Done);
    assert_eq!(client.get(&id).await.unwrap().state, State::Unknown);
}

#[tokio::test]
async fn a_job_pushed_again_survives_the_old_reservations_ack_and_is_not_taken_early() {
    let (_server, mut redis, client) = start().await;
    client.push("t", "v1").id("x").await.unwrap();
    move_until_empty(&mut redis).await;
    let old = reserve_now(&client, "t", Duration::from_secs(30)).await;

    // Pushed again while reserved: the old reservation's ack changes nothing.
    client
        .push("t", "v2")
        .id("x")
        .delay(Duration::from_secs(3600))
        .await
        .unwrap();
    // (push.lua names the holders key after the reservations key itself, as `Keys::holders` does.)
    let holder: Option<String> = redis.hget(keys::HOLDERS, "x").await.unwrap();
    assert_eq!(holder, None, "the old reservation's holder forgotten");
    assert_eq!(client.ack(&old).await.unwrap(), Acked::Stale);
    let info = client.get("x").await.unwrap();
    assert_eq!(info.state, State::Waiting);
    assert_eq!(info.body.as_deref(), Some(&b"v2"[..]));

    // Pushed again while ready: the ready entry is stale, the new job waits for its time.
    client.push("t", "w1").id("y").await.unwrap();
    wait_for(Duration::from_secs(5), "y to be ready", || {
        let mut redis = redis.clone();
        async move {
            move_due_jobs(&mut redis).await;
            let ready: usize = redis.llen(ready_queue("t")).await.unwrap();
            (ready == 1).then_some(())
        }
    })
    .await;
    client
        .push("t", "w2")
        .id("y")
        .delay(Duration::from_secs(3600))
        .await
        .unwrap();
    let taken = client
        .reserve(&["t"], Duration::from_secs(30), Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(taken, None, "not early");
    assert_eq!(client.get("y").await.unwrap().state, State::Waiting);
    let ready: usize = redis.llen(ready_queue("t")).await.unwrap();
    assert_eq!(ready, 0, "the stale entry is dropped");
}

/// Asserts that `stale` names no current reservation: its ack, nack and touch change nothing.
async fn assert_stale(client: &Client, stale: &delayer_client::Job) {
    assert!(matches!(
        client.touch(stale, Duration::from_secs(600)).await,
        Err(Error::NotReserved(_))
    ));
    assert!(matches!(
        client.nack(stale, Duration::ZERO).await,
        Err(Error::NotReserved(_))
    ));
    assert_eq!(client.ack(stale).await.unwrap(), Acked::Stale);
}

#[tokio::test]
async fn an_old_receipt_cannot_finish_or_give_back_a_job_pushed_again_and_reserved_by_another() {
    let (_server, mut redis, client) = start().await;
    client.push("t", "first").id("x").await.unwrap();
    move_until_empty(&mut redis).await;
    let first = reserve_now(&client, "t", Duration::from_secs(30)).await;
    // Pushed again (its attempts count from 1 again) and reserved by a second consumer.
    client.push("t", "second").id("x").await.unwrap();
    move_until_empty(&mut redis).await;
    let second = reserve_now(&client, "t", Duration::from_secs(30)).await;
    assert_eq!(
        (first.attempts, second.attempts, &second.body[..]),
        (1, 1, &b"second"[..])
    );

    assert_stale(&client, &first).await;

    let info = client.get("x").await.unwrap();
    assert_eq!((info.state, info.attempts), (State::Reserved, 1));
    let ready: usize = redis.llen(ready_queue("t")).await.unwrap();
    assert_eq!(ready, 0, "not handed to a third consumer");
    // The second consumer dies: its job is delivered again once its time runs out.
    release_lapsed(&mut redis, Duration::from_secs(60)).await;
    move_until_empty(&mut redis).await;
    let third = reserve_now(&client, "t", Duration::from_secs(30)).await;
    assert_eq!((&third.body[..], third.attempts), (&b"second"[..], 2));
    assert_eq!(client.ack(&third).await.unwrap(), Acked::Done);
}

#[tokio::test]
async fn a_job_a_legacy_client_pushes_again_while_reserved_is_delivered_and_the_old_receipt_is_stale()
 {
    let (_server, mut redis, client) = start().await;
    let again = |id: &str| Message {
        id: id.into(),
        topic: "t".into(),
        body: format!("{id} again"),
    };
    for id in ["x", "y"] {
        client.push("t", "first").id(id).await.unwrap();
    }
    move_until_empty(&mut redis).await;
    let firsts = client
        .reserve_many(&["t"], Duration::from_secs(30), 2, Duration::ZERO)
        .await
        .unwrap();
    // Both pushed again by a legacy client (which knows nothing of reservations), due at once.
    for id in ["x", "y"] {
        legacy_client::push(&mut redis, &again(id), 0)
            .await
            .unwrap();
    }
    move_until_empty(&mut redis).await;

    // x: the old holder acks first; y: a second consumer takes it first.
    assert_eq!(client.ack(&firsts[0]).await.unwrap(), Acked::Stale);
    let x = reserve_now(&client, "t", Duration::from_secs(30)).await;
    let y = reserve_now(&client, "t", Duration::from_secs(30)).await;
    assert_eq!(
        [(x.id.to_str(), &x.body[..]), (y.id.to_str(), &y.body[..])],
        [(Some("x"), &b"x again"[..]), (Some("y"), &b"y again"[..])]
    );
    assert_eq!(y.attempts, 2, "a legacy push keeps the count");
    assert_stale(&client, &firsts[1]).await;
    assert_eq!(client.get("y").await.unwrap().state, State::Reserved);
    for job in [&x, &y] {
        assert_eq!(client.ack(job).await.unwrap(), Acked::Done);
    }
    let left: usize = redis
        .exists(&[job_bucket("x"), job_bucket("y")])
        .await
        .unwrap();
    assert_eq!(left, 0);
}

#[tokio::test]
async fn an_old_receipt_cannot_finish_a_dead_job_requeued_and_reserved_by_another() {
    let settings = Settings {
        max_attempts: 1,
        ..Settings::default()
    };
    let (_server, mut redis, client) = start_with(settings).await;
    let inspector = Inspector::new(&client);
    client.push("t", "b").id("x").await.unwrap();
    move_until_empty(&mut redis).await;
    let first = reserve_now(&client, "t", Duration::from_secs(30)).await;
    assert_eq!(
        client.nack(&first, Duration::ZERO).await.unwrap(),
        Nacked::Dead
    );
    assert_eq!(inspector.requeue_dead("t").await.unwrap(), 1);
    move_until_empty(&mut redis).await;
    let second = reserve_now(&client, "t", Duration::from_secs(30)).await;
    assert_eq!((first.attempts, second.attempts), (1, 1));

    assert_stale(&client, &first).await;

    assert_eq!(client.get("x").await.unwrap().state, State::Reserved);
    assert_eq!(client.ack(&second).await.unwrap(), Acked::Done);
}

#[tokio::test]
async fn a_receipt_without_a_token_names_a_reservation_only_while_attempts_never_restarted() {
    let (_server, mut redis, client) = start().await;
    let bare = |job: &delayer_client::Job| Receipt {
        token: None,
        ..Receipt::from(job)
    };
    client.push("t", "b").id("x").await.unwrap();
    move_until_empty(&mut redis).await;
    let job = reserve_now(&client, "t", Duration::from_secs(30)).await;
    client
        .touch(bare(&job), Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(client.ack(bare(&job)).await.unwrap(), Acked::Done);

    // Pushed again after a reservation: attempt 1 names two reservations now.
    client.push("t", "first").id("y").await.unwrap();
    move_until_empty(&mut redis).await;
    let first = reserve_now(&client, "t", Duration::from_secs(30)).await;
    client.push("t", "second").id("y").await.unwrap();
    move_until_empty(&mut redis).await;
    let second = reserve_now(&client, "t", Duration::from_secs(30)).await;
    for receipt in [bare(&first), bare(&second)] {
        let needed = |result: Result<(), Error>| matches!(result, Err(Error::TokenNeeded(_)));
        assert!(needed(client.ack(receipt.clone()).await.map(drop)));
        let touched = client.touch(receipt.clone(), Duration::from_secs(60)).await;
        assert!(needed(touched));
        assert!(needed(client.nack(receipt, Duration::ZERO).await.map(drop)));
    }
    let error = client.ack(bare(&second)).await.unwrap_err().to_string();
    assert!(error.contains("token"), "{error}");
    assert_eq!(client.get("y").await.unwrap().state, State::Reserved);
    assert_eq!(client.ack(&second).await.unwrap(), Acked::Done);
}

#[tokio::test]
async fn a_late_ack_finishes_a_job_nobody_took_since_but_never_a_legacy_clients_push() {
    let (_server, mut redis, client) = start().await;
    for id in ["waiting", "ready", "pushed", "moved"] {
        client.push("t", "b").id(id).await.unwrap();
    }
    move_until_empty(&mut redis).await;
    let jobs = client
        .reserve_many(&["t"], Duration::from_secs(1), 4, Duration::ZERO)
        .await
        .unwrap();
    release_lapsed(&mut redis, Duration::from_secs(2)).await;
    let id = |job: &delayer_client::Job| job.id.to_str().unwrap().to_string();
    let job = |name: &str| jobs.iter().find(|job| id(job) == name).expect(name);
    let [waiting, ready, pushed, moved] = ["waiting", "ready", "pushed", "moved"].map(job);

    // Waiting for its retry: finished all the same.
    assert_eq!(client.ack(waiting).await.unwrap(), Acked::Late);
    // Pushed again by a legacy client since, whether the push waits or was moved: it stands.
    for (job, delay) in [(pushed, 3600), (moved, 0)] {
        let message = Message {
            id: id(job),
            topic: "t".into(),
            body: "again".into(),
        };
        legacy_client::push(&mut redis, &message, delay)
            .await
            .unwrap();
    }
    move_until_left(&mut redis, 1).await;
    // Delivered again (its retry moved): finished all the same.
    assert_eq!(client.ack(ready).await.unwrap(), Acked::Late);
    for job in [pushed, moved] {
        assert_eq!(client.ack(job).await.unwrap(), Acked::Stale, "{job:?}");
    }
    let states = [
        client.get("waiting").await.unwrap().state,
        client.get("ready").await.unwrap().state,
        client.get("pushed").await.unwrap().state,
        client.get("moved").await.unwrap().state,
    ];
    assert_eq!(
        states,
        [State::Unknown, State::Unknown, State::Waiting, State::Ready]
    );
}

#[tokio::test]
async fn a_client_with_a_body_limit_reads_no_longer_body_and_leaves_its_job_where_it_was() {
    let settings = Settings {
        max_body_read: Some(10),
        ..Settings::default()
    };
    let (_server, mut redis, client) = start_with(settings).await;
    let inspector = Inspector::new(&client);
    for (id, body) in [("long", "longer than ten"), ("short", "short")] {
        client.push("t", body).id(id).await.unwrap();
    }
    move_until_empty(&mut redis).await;

    let info = client.get("long").await.unwrap();
    assert_eq!((info.body, info.body_size), (None, Some(15)));
    let info = inspector.get_up_to("short", 0).await.unwrap();
    assert_eq!((info.body, info.body_size), (None, Some(5)));
    // The reserve takes both, gives the long one back untried, and answers the short one.
    let jobs = client
        .reserve_many(&["t"], Duration::from_secs(30), 10, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(&jobs[0].body[..], b"short");
    let info = client.get("long").await.unwrap();
    assert_eq!((info.state, info.attempts), (State::Waiting, 0));
    move_until_empty(&mut redis).await;
    let refused = client
        .reserve(&["t"], Duration::from_secs(30), Duration::ZERO)
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            Error::BodyTooLargeToRead {
                size: 15,
                limit: 10,
                ..
            }
        ),
        "{refused}"
    );
    // A pop puts it back at the end of the line.
    move_until_empty(&mut redis).await;
    client.push("t", "next").id("next").await.unwrap();
    move_until_empty(&mut redis).await;
    let refused = client.pop("t").await.unwrap_err();
    assert!(
        matches!(refused, Error::BodyTooLargeToRead { .. }),
        "{refused}"
    );
    assert_eq!(client.pop("t").await.unwrap().unwrap().id, "next");
    let popped = legacy_client::pop(&mut redis, "t").await.unwrap().unwrap();
    assert_eq!(popped.body, "longer than ten");
}

#[tokio::test]
async fn a_job_pushed_again_to_another_topic_reaches_only_that_topics_consumers() {
    let (_server, mut redis, client) = start().await;
    client.push("c1", "one").id("x").await.unwrap();
    move_until_empty(&mut redis).await;
    client.push("c2", "two").id("x").await.unwrap();
    move_until_empty(&mut redis).await;
    let (c1, c2): (usize, usize) = (
        redis.llen(ready_queue("c1")).await.unwrap(),
        redis.llen(ready_queue("c2")).await.unwrap(),
    );
    assert_eq!((c1, c2), (1, 1), "an entry on each list");

    let taken = client
        .reserve(&["c1"], Duration::from_secs(30), Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(taken, None, "c1's entry is stale: x is c2's now");
    let taken = reserve_now(&client, "c2", Duration::from_secs(30)).await;
    assert_eq!(
        (taken.topic.to_str().unwrap(), taken.body.as_slice()),
        ("c2", &b"two"[..])
    );
    assert_eq!(client.ack(&taken).await.unwrap(), Acked::Done);
    let c1: usize = redis.llen(ready_queue("c1")).await.unwrap();
    assert_eq!(c1, 0, "the stale entry is dropped");
}

/// A client whose jobs die at their first failure, and job `d` of topic `t` dead by it.
async fn dead_job_d(server: &RedisServer, redis: &mut MultiplexedConnection) -> Client {
    let settings = Settings {
        max_attempts: 1,
        ..Settings::default()
    };
    let client = Client::connect_with(server.info(), settings).await.unwrap();
    client.push("t", "b").id("d").await.unwrap();
    move_until_empty(redis).await;
    let job = reserve_now(&client, "t", Duration::from_secs(30)).await;
    assert_eq!(
        client.nack(&job, Duration::ZERO).await.unwrap(),
        Nacked::Dead
    );
    client
}

/// A legacy client's push keeps the bucket's other fields: the move makes the job start afresh.
#[tokio::test]
async fn a_dead_job_pushed_again_by_a_legacy_client_starts_afresh_and_is_not_requeued_twice() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = dead_job_d(&server, &mut redis).await;
    let inspector = Inspector::new(&client);
    let message = Message {
        id: "d".into(),
        topic: "t".into(),
        body: "again".into(),
    };
    legacy_client::push(&mut redis, &message, 0).await.unwrap();
    move_until_empty(&mut redis).await;

    assert_eq!(inspector.requeue_dead("t").await.unwrap(), 0);
    move_until_empty(&mut redis).await;

    let ready: Vec<String> = redis.lrange(ready_queue("t"), 0, -1).await.unwrap();
    assert_eq!(ready, ["d"], "on the ready list once");
    let job = reserve_now(&client, "t", Duration::from_secs(30)).await;
    assert_eq!((job.attempts, job.body_text().unwrap()), (1, "again"));
    assert_eq!(client.ack(&job).await.unwrap(), Acked::Done);
}

#[tokio::test]
async fn a_job_pushed_again_after_it_died_is_not_requeued_early() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = dead_job_d(&server, &mut redis).await;
    let inspector = Inspector::new(&client);
    client
        .push("t", "again")
        .id("d")
        .delay(Duration::from_secs(3600))
        .await
        .unwrap();

    assert_eq!(inspector.requeue_dead("t").await.unwrap(), 0);

    let info = client.get("d").await.unwrap();
    assert_eq!(info.state, State::Waiting);
    let due = info.due.unwrap().duration_since(SystemTime::now()).unwrap();
    assert!(
        due > Duration::from_secs(3500),
        "still due in an hour: {due:?}"
    );
}

#[tokio::test]
async fn ack_fails_before_changing_anything_when_the_pool_key_is_broken() {
    let (_server, mut redis, client) = start().await;
    let inspector = Inspector::new(&client);
    let id = client.push("t", "b").await.unwrap();
    move_until_empty(&mut redis).await;
    let job = reserve_now(&client, "t", Duration::from_secs(30)).await;
    let _: () = redis.set(JOB_POOL, "oops").await.unwrap();

    assert!(client.ack(&job).await.is_err());

    let _: () = redis.del(JOB_POOL).await.unwrap();
    let info = client.get(&id).await.unwrap();
    assert_eq!(info.state, State::Reserved, "the reservation stands");
    assert!(
        inspector.dead("t", 0).await.unwrap().is_empty(),
        "limit 0 lists none"
    );
}

#[tokio::test]
async fn reserve_many_takes_the_oldest_jobs_topic_by_topic_and_ack_many_finishes_each() {
    let (_server, mut redis, client) = start().await;
    for id in ["a0", "a1", "a2", "a3"] {
        client.push("a", "body").id(id).await.unwrap();
    }
    for id in ["b0", "b1", "b2"] {
        client.push("b", "body").id(id).await.unwrap();
    }
    move_until_empty(&mut redis).await;
    // Between them, an id whose data expired (dropped) and one moved twice (taken once).
    let _: () = redis.lpush(ready_queue("a"), "gone").await.unwrap();
    let _: () = redis.lpush(ready_queue("a"), "a1").await.unwrap();
    let _: () = redis.lpush(ready_queue("a"), "a4").await.unwrap();
    client.push("a", "body").id("a4").await.unwrap();
    move_until_empty(&mut redis).await;

    let jobs = client
        .reserve_many(&["a", "b"], Duration::from_secs(30), 6, Duration::ZERO)
        .await
        .unwrap();

    let taken: Vec<(&str, &str, u32)> = jobs
        .iter()
        .map(|job| {
            (
                job.id.to_str().unwrap(),
                job.topic.to_str().unwrap(),
                job.attempts,
            )
        })
        .collect();
    assert_eq!(
        taken,
        [
            ("a0", "a", 1),
            ("a1", "a", 1),
            ("a2", "a", 1),
            ("a3", "a", 1),
            ("a4", "a", 1),
            ("b0", "b", 1)
        ]
    );
    let reserved: usize = redis.zcard(RESERVED).await.unwrap();
    assert_eq!(reserved, 6);
    let left_a: Vec<String> = redis.lrange(ready_queue("a"), 0, -1).await.unwrap();
    let left_b: Vec<String> = redis.lrange(ready_queue("b"), 0, -1).await.unwrap();
    assert_eq!(
        (left_a, left_b),
        (vec![], vec!["b2".to_string(), "b1".into()])
    );

    let stale = Receipt {
        attempt: 7,
        ..Receipt::from(&jobs[2])
    };
    let unknown = Receipt {
        id: "never".into(),
        attempt: 1,
        token: None,
        topic: None,
    };
    let empty = Receipt {
        id: JobId::default(),
        attempt: 1,
        token: None,
        topic: None,
    };
    let acked = client
        .ack_many([
            Receipt::from(&jobs[0]),
            Receipt::from(&jobs[0]),
            stale,
            unknown,
            empty,
            Receipt::from(&jobs[5]),
        ])
        .await;
    let acked: Vec<String> = acked
        .into_iter()
        .map(|acked| match acked {
            Ok(acked) => format!("{acked:?}"),
            Err(error) => error.to_string(),
        })
        .collect();
    assert_eq!(
        acked,
        [
            "Done",
            "no job \"a0\"",
            "Stale",
            "no job \"never\"",
            "the id is empty",
            "Done"
        ]
    );
    for (id, state) in [
        ("a0", State::Unknown),
        ("a2", State::Reserved),
        ("b0", State::Unknown),
        ("b1", State::Ready),
    ] {
        assert_eq!(client.get(id).await.unwrap().state, state, "{id}");
    }
    let reserved: Vec<String> = redis.zrange(RESERVED, 0, -1).await.unwrap();
    assert_eq!(reserved, ["a1", "a2", "a3", "a4"]);
}

#[tokio::test]
async fn a_ready_list_of_the_wrong_type_is_passed_over_and_fails_only_a_look_that_found_nothing() {
    let (_server, mut redis, client) = start().await;
    let id = client.push("a", "body").await.unwrap();
    move_until_empty(&mut redis).await;
    let bad = ready_queue("b");
    let _: () = redis.set(&bad, "oops").await.unwrap();

    let jobs = client
        .reserve_many(&["b", "a"], Duration::from_secs(30), 10, Duration::ZERO)
        .await
        .unwrap();
    let ids: Vec<&str> = jobs.iter().map(|job| job.id.to_str().unwrap()).collect();
    assert_eq!(
        ids,
        [id.to_str().unwrap()],
        "topic a served past the broken b"
    );

    for most in [1, 10] {
        let error = client
            .reserve_many(&["a", "b"], Duration::from_secs(30), most, Duration::ZERO)
            .await
            .unwrap_err();
        assert!(
            matches!(&error, Error::WrongType { key, .. } if key.as_bytes() == bad),
            "{error}"
        );
    }
    let value: String = redis.get(&bad).await.unwrap();
    assert_eq!(value, "oops", "left alone");
}

#[tokio::test]
async fn an_attempt_count_that_is_not_a_whole_number_starts_again_and_fails_nothing() {
    let (_server, mut redis, client) = start().await;
    for id in ["sound", "odd", "huge"] {
        client.push("t", "body").id(id).await.unwrap();
    }
    move_until_empty(&mut redis).await;
    let _: () = redis
        .hset(job_bucket("sound"), "attempts", 2)
        .await
        .unwrap();
    let _: () = redis
        .hset(job_bucket("odd"), "attempts", "many")
        .await
        .unwrap();
    let _: () = redis
        .hset(job_bucket("huge"), "attempts", "9223372036854775807")
        .await
        .unwrap();

    let jobs = client
        .reserve_many(&["t"], Duration::from_secs(30), 10, Duration::ZERO)
        .await
        .unwrap();

    let mut attempts: Vec<(&str, u32)> = jobs
        .iter()
        .map(|job| (job.id.to_str().unwrap(), job.attempts))
        .collect();
    attempts.sort();
    assert_eq!(attempts, [("huge", 1), ("odd", 1), ("sound", 3)]);
    for job in &jobs {
        assert_eq!(client.ack(job).await.unwrap(), Acked::Done, "{}", job.id);
    }
}

#[tokio::test]
async fn a_reserve_whose_reply_was_lost_finds_the_jobs_it_reserved() {
    let (server, port) = RedisServer::start_tcp(&[]);
    let mut redis = server.connect().await;
    let proxy = ForgetfulProxy::start(port).await;
    let client = Client::connect(proxy.url()).await.unwrap();
    for id in ["j1", "j2", "j3"] {
        client.push("t", "body").id(id).await.unwrap();
    }
    move_until_empty(&mut redis).await;
    // Redis knows the script (a first call sends only its hash): an empty look loads it.
    let none = client.reserve(&["t2"], Duration::from_secs(60), Duration::ZERO);
    assert!(none.await.unwrap().is_none());
    // The reserve reaches Redis and runs; its reply never comes back (the client times out).
    proxy.lose_replies_of_open_connections();

    let jobs = client
        .reserve_many(&["t"], Duration::from_secs(60), 10, Duration::ZERO)
        .await
        .unwrap();

    let ids: Vec<(&str, u32)> = jobs
        .iter()
        .map(|job| (job.id.to_str().unwrap(), job.attempts))
        .collect();
    assert_eq!(ids, [("j1", 1), ("j2", 1), ("j3", 1)]);
    let acked = client.ack_many(&jobs).await;
    assert!(
        acked.iter().all(|acked| matches!(acked, Ok(Acked::Done))),
        "{acked:?}"
    );
    let reserved: usize = redis.zcard(RESERVED).await.unwrap();
    assert_eq!(reserved, 0, "none held by nobody");

    // With less than half its time to run left, a job found could be lost to another consumer
    // before its first touch: it is left to lapse and be delivered again.
    client.push("short", "body").id("s1").await.unwrap();
    move_until_empty(&mut redis).await;
    proxy.lose_replies_of_open_connections();
    let lost = client
        .reserve_many(&["short"], Duration::from_secs(2), 10, Duration::ZERO)
        .await;
    assert!(
        matches!(&lost, Err(Error::Redis(error)) if error.is_timeout()),
        "{lost:?}"
    );
    let held: Vec<String> = redis.zrange(RESERVED, 0, -1).await.unwrap();
    assert_eq!(held, ["s1"], "reserved, to be delivered again");
}

#[tokio::test]
async fn a_reservation_named_twice_in_ack_many_leaves_a_job_pushed_again_alone() {
    let (_server, mut redis, client) = start().await;
    client.push("t", "first").id("j").await.unwrap();
    move_until_empty(&mut redis).await;
    let job = reserve_now(&client, "t", Duration::from_secs(30)).await;
    let again = Message {
        id: "j".into(),
        topic: "t".into(),
        body: "second".into(),
    };
    legacy_client::push(&mut redis, &again, 60).await.unwrap();

    let acked = client.ack_many([&job, &job]).await;

    assert!(matches!(acked[0], Ok(Acked::Done)), "{acked:?}");
    assert!(matches!(acked[1], Err(Error::UnknownJob(_))), "{acked:?}");
    let info = client.get("j").await.unwrap();
    assert_eq!(
        (info.state, info.body.as_deref()),
        (State::Waiting, Some(&b"second"[..])),
        "the new push stands"
    );
}

#[tokio::test]
async fn one_dead_job_is_requeued_by_id_once_and_an_id_not_dead_is_a_clear_error() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = dead_job_d(&server, &mut redis).await;
    let inspector = Inspector::new(&client);
    let not_dead = inspector.requeue_dead_job("t", "nope").await.unwrap_err();
    assert!(matches!(not_dead, Error::NotDead { .. }), "{not_dead}");
    assert!(
        not_dead.to_string().contains("not on the dead list"),
        "{not_dead}"
    );

    assert!(inspector.requeue_dead_job("t", "d").await.unwrap());

    let dead: Vec<String> = redis.lrange(keys::dead_queue("t"), 0, -1).await.unwrap();
    assert!(dead.is_empty(), "{dead:?}");
    let info = client.get("d").await.unwrap();
    assert_eq!((info.state, info.attempts), (State::Waiting, 0));
    // A second requeue finds it on no dead list: the job is in the pool once.
    let again = inspector.requeue_dead_job("t", "d").await.unwrap_err();
    assert!(matches!(again, Error::NotDead { .. }), "{again}");
    let pooled: Vec<String> = redis.zrange(JOB_POOL, 0, -1).await.unwrap();
    assert_eq!(pooled, ["d"]);
}

#[tokio::test]
async fn a_dead_job_is_deleted_by_id_and_a_stale_entry_only_leaves_the_list() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = dead_job_d(&server, &mut redis).await;
    let inspector = Inspector::new(&client);

    assert!(inspector.delete_dead_job("t", "d").await.unwrap());

    let exists: bool = redis.exists(job_bucket("d")).await.unwrap();
    let dead: usize = redis.llen(keys::dead_queue("t")).await.unwrap();
    assert_eq!((exists, dead), (false, 0));

    // Dead again, then pushed again with the same id: its dead-list entry is stale.
    let client = dead_job_d(&server, &mut redis).await;
    client
        .push("t", "again")
        .id("d")
        .delay(Duration::from_secs(3600))
        .await
        .unwrap();
    assert!(!inspector.delete_dead_job("t", "d").await.unwrap());
    let info = client.get("d").await.unwrap();
    assert_eq!(info.state, State::Waiting, "the live job is kept");
    let dead: usize = redis.llen(keys::dead_queue("t")).await.unwrap();
    assert_eq!(dead, 0);
}

#[tokio::test]
async fn windows_of_the_lists_read_what_they_show_oldest_first() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let inspector = Inspector::new(&client);
    // LPUSHed as the daemon moves them: "0" is next in line.
    let ids: Vec<String> = (0..10).map(|n| n.to_string()).collect();
    let _: () = redis.lpush(ready_queue("t"), &ids).await.unwrap();

    let _: () = redis
        .hset_multiple(job_bucket("3"), &[("due", "1000.5"), ("attempts", "2")])
        .await
        .unwrap();
    let _: () = redis.set(job_bucket("4"), "not a hash").await.unwrap();
    let window = inspector.ready_page("t", 3, 4).await.unwrap();
    let window: Vec<String> = window.iter().map(|id| id.to_string()).collect();
    assert_eq!(window, ["3", "4", "5", "6"]);
    let ids: Vec<JobId> = window.iter().map(|id| JobId::from(id.as_str())).collect();
    let marks = inspector.job_times("t", &ids).await.unwrap();
    assert_eq!(marks[0].attempts, 2);
    assert_eq!(marks[0].due.map(delayer_wire::time::to_unix), Some(1000.5));
    assert_eq!(
        marks[1],
        JobTimes::default(),
        "a bucket of the wrong type has none"
    );
    assert_eq!(inspector.ready_page("t", 8, 4).await.unwrap().len(), 2);
    assert!(inspector.ready_page("t", 10, 4).await.unwrap().is_empty());
    assert!(inspector.dead_page("t", 0, 4).await.unwrap().is_empty());
}

/// Reservations made by the versions before the holders hash: the bucket counts the current
/// attempt and names the call (`reserved_by`), and the holders hash has no entry. After an
/// upgrade they are acked, touched, nacked and delivered again as they were.
#[tokio::test]
async fn reservations_written_the_old_way_are_still_acked_touched_nacked_and_released() {
    let (_server, mut redis, client) = start().await;
    let deadline = deadline_score(delayer_wire::time::unix_now() + 30.0);
    for id in ["acked", "nacked", "lapsing"] {
        let fields = [
            ("topic", "t"),
            ("body", "b"),
            ("attempts", "2"),
            ("reserved_by", "0123456789abcdef0123456789abcdef"),
        ];
        let _: () = redis.hset_multiple(job_bucket(id), &fields).await.unwrap();
        let _: () = redis.zadd(RESERVED, id, deadline).await.unwrap();
    }
    let receipt = |id: &str, attempt| Receipt {
        id: id.into(),
        attempt,
        token: None,
        topic: None,
    };

    let info = client.get("acked").await.unwrap();
    assert_eq!((info.state, info.attempts), (State::Reserved, 2));
    assert_eq!(
        client.ack(receipt("acked", 1)).await.unwrap(),
        Acked::Stale,
        "another attempt's receipt"
    );
    assert!(matches!(
        client
            .touch(receipt("acked", 1), Duration::from_secs(60))
            .await,
        Err(Error::NotReserved(_))
    ));
    client
        .touch(receipt("acked", 2), Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(client.ack(receipt("acked", 2)).await.unwrap(), Acked::Done);
    assert_eq!(client.get("acked").await.unwrap().state, State::Unknown);

    assert_eq!(
        client
            .nack(receipt("nacked", 2), Duration::ZERO)
            .await
            .unwrap(),
        Nacked::Retry
    );
    move_until_empty(&mut redis).await;
    let job = reserve_now(&client, "t", Duration::from_secs(30)).await;
    assert_eq!(
        (job.id.to_str().unwrap(), job.attempts),
        ("nacked", 3),
        "its count stands"
    );

    // Both lapse: the old one keeps its count, the new one's is written back to its bucket.
    release_lapsed(&mut redis, Duration::from_secs(60)).await;
    let (lapsing, nacked, holders, reserved): (u32, u32, usize, usize) =
        delayer_client::redis::pipe()
            .hget(job_bucket("lapsing"), "attempts")
            .hget(job_bucket("nacked"), "attempts")
            .hlen(keys::HOLDERS)
            .zcard(RESERVED)
            .query_async(&mut redis)
            .await
            .unwrap();
    assert_eq!((lapsing, nacked, holders, reserved), (2, 3, 0, 0));
    move_until_empty(&mut redis).await;
    let mut ready: Vec<String> = redis.lrange(ready_queue("t"), 0, -1).await.unwrap();
    ready.sort();
    assert_eq!(ready, ["lapsing", "nacked"], "delivered again");
}

/// A reservation's writes are the reserve call's, one command each for all its jobs: nothing is
/// written to a bucket while its job is reserved; the holders hash has the attempt.
#[tokio::test]
async fn a_reserve_writes_no_bucket_and_an_ack_forgets_the_holder() {
    let (_server, mut redis, client) = start().await;
    let inspector = Inspector::new(&client);
    for index in 0..3 {
        client.push("t", "b").id(format!("j{index}")).await.unwrap();
    }
    move_until_empty(&mut redis).await;

    let jobs = client
        .reserve_many(&["t"], Duration::from_secs(30), 3, Duration::ZERO)
        .await
        .unwrap();

    assert_eq!(jobs.len(), 3);
    for job in &jobs {
        let fields: Vec<String> = redis.hkeys(job_bucket(job.id.as_bytes())).await.unwrap();
        assert!(
            !fields
                .iter()
                .any(|field| field == "attempts" || field == "reserved_by"),
            "{fields:?}"
        );
        let holder: String = redis.hget(keys::HOLDERS, job.id.as_bytes()).await.unwrap();
        assert!(holder.starts_with("1:"), "{holder}");
        assert_eq!(client.get(job.id.as_bytes()).await.unwrap().attempts, 1);
        let marks = inspector.job_times(&job.topic, std::slice::from_ref(&job.id));
        assert_eq!(
            marks.await.unwrap()[0].attempts,
            1,
            "a console's reserved window"
        );
    }
    let acked = client.ack_many(&jobs).await;
    assert!(acked.iter().all(|acked| matches!(acked, Ok(Acked::Done))));
    let (holders, reserved): (usize, usize) = delayer_client::redis::pipe()
        .hlen(keys::HOLDERS)
        .zcard(RESERVED)
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!((holders, reserved), (0, 0));
}

#[tokio::test]
async fn a_topics_reserved_window_and_count_come_from_the_one_set_of_reservations() {
    let (_server, mut redis, client) = start().await;
    let inspector = Inspector::new(&client);
    for (id, topic) in [("a1", "a"), ("b1", "b"), ("a2", "a"), ("a3", "a")] {
        client.push(topic, "body").id(id).await.unwrap();
    }
    move_until_empty(&mut redis).await;
    // Deadlines in this order: a3 (10 s), b1 (20 s), a2 (30 s), a1 (40 s).
    for (topic, ttr) in [("a", 40), ("b", 20), ("a", 30), ("a", 10)] {
        reserve_now(&client, topic, Duration::from_secs(ttr)).await;
    }
    let soon = SystemTime::now();

    let window = inspector.reserved_page("a", 1, 5, 1_000).await.unwrap();
    let ids: Vec<String> = window.iter().map(|(id, _)| id.to_string()).collect();
    assert_eq!(
        ids,
        ["a2", "a1"],
        "a's, soonest deadline first, after the first"
    );
    let deadline = window[0].1.expect("a deadline");
    let ahead = deadline.duration_since(soon).unwrap();
    assert!(
        ahead > Duration::from_secs(28) && ahead <= Duration::from_secs(31),
        "{ahead:?}"
    );
    // Only the first two reservations looked through: a3 (skipped) and b1.
    assert!(
        inspector
            .reserved_page("a", 1, 5, 2)
            .await
            .unwrap()
            .is_empty()
    );

    let details = inspector
        .details(&[Topic::from("a"), Topic::from("b")], 1_000)
        .await
        .unwrap();
    let reserved: Vec<u64> = details.iter().map(|details| details.reserved).collect();
    assert_eq!(reserved, [3, 1]);
}

#[tokio::test]
async fn a_buried_job_is_dead_at_once_with_its_reason_until_requeued() {
    let (_server, mut redis, client) = start().await;
    let inspector = Inspector::new(&client);
    client.push("t", "refused").id("b1").await.unwrap();
    move_due_jobs(&mut redis).await;
    let job = reserve_now(&client, "t", Duration::from_secs(30)).await;
    assert_eq!(
        client
            .bury(&job, "Kafka refused it: no such topic")
            .await
            .unwrap(),
        Nacked::Dead,
        "dead on its first attempt"
    );
    assert_eq!(inspector.dead("t", 10).await.unwrap(), [JobId::from("b1")]);
    let info = client.get("b1").await.unwrap();
    assert_eq!(info.state, State::Dead);
    assert_eq!(
        info.died_why.as_deref(),
        Some("Kafka refused it: no such topic")
    );
    // Requeued, the reason goes with the death; a stale receipt buries nothing.
    assert!(inspector.requeue_dead_job("t", "b1").await.unwrap());
    assert_eq!(client.get("b1").await.unwrap().died_why, None);
    let why: Option<String> = redis.hget(job_bucket("b1"), "died_why").await.unwrap();
    assert_eq!(why, None);
    assert!(matches!(
        client.bury(&job, "again").await,
        Err(Error::NotReserved(_))
    ));
}

#[tokio::test]
async fn an_ack_that_keeps_the_data_leaves_the_job_readable_as_delivered() {
    let (_server, mut redis, client) = start().await;
    for id in ["kept", "deleted"] {
        client
            .push("t", format!("body of {id}"))
            .id(id)
            .await
            .unwrap();
    }
    move_due_jobs(&mut redis).await;
    let first = reserve_now(&client, "t", Duration::from_secs(30)).await;
    let second = reserve_now(&client, "t", Duration::from_secs(30)).await;
    let (kept, deleted) = if first.id == "kept" {
        (first, second)
    } else {
        (second, first)
    };
    let acked = client
        .ack_keeping([&kept], Some(Duration::from_secs(60)))
        .await;
    assert_eq!(acked[0].as_ref().unwrap(), &Acked::Done);
    client.ack(&deleted).await.unwrap();
    let info = client.get("kept").await.unwrap();
    assert_eq!(info.state, State::Delivered);
    assert_eq!(info.body.as_deref(), Some(&b"body of kept"[..]));
    let ttl: i64 = redis.ttl(job_bucket("kept")).await.unwrap();
    assert!((55..=60).contains(&ttl), "{ttl}");
    assert_eq!(client.get("deleted").await.unwrap().state, State::Unknown);
    let reserved: usize = redis.zcard(RESERVED).await.unwrap();
    assert_eq!(reserved, 0);
}
