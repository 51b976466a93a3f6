//! The jobs that are waiting, against a real redis-server: the pool a page at a time in due
//! order (ties and jobs that leave included), a topic's jobs found among every topic's within a
//! bounded read, and "run now" for a job or a topic's jobs, by Redis's clock, only for jobs that
//! wait.

use std::time::Duration;

use crate::fixture::start;
use delayer_client::inspector::{Cursor, MAX_WAITING_READ, Promoted};
use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::{Client, Error, Inspector};
use delayer_testkit::jobs::{add_jobs, move_due_jobs, redis_now};
use delayer_testkit::legacy_client::{self, Message, now_seconds};
use delayer_wire::keys::{JOB_POOL, job_bucket, ready_queue};

/// The pool in Redis's order: (id, score).
async fn pool(redis: &mut MultiplexedConnection) -> Vec<(String, f64)> {
    redis.zrange_withscores(JOB_POOL, 0, -1).await.unwrap()
}

/// Every page of `count` jobs of `topic` (or of all), from the first: the ids, in order.
pub(crate) async fn every_page(client: &Client, topic: Option<&str>, count: usize) -> Vec<String> {
    let inspector = Inspector::new(client);
    let mut ids = Vec::new();
    let mut after: Option<Cursor> = None;
    loop {
        let page = inspector
            .waiting(topic.map(str::as_bytes), after.as_ref(), count)
            .await
            .unwrap();
        assert!(page.jobs.len() <= count);
        ids.extend(page.jobs.iter().map(|job| job.id.to_string()));
        match page.next {
            Some(next) => after = Some(next),
            None => return ids,
        }
    }
}

#[tokio::test]
async fn pages_of_the_pool_come_in_due_order_with_ties_in_redis_order_even_when_a_job_leaves() {
    let (_server, mut redis, client) = start().await;
    let inspector = Inspector::new(&client);
    let empty = inspector.waiting(None, None, 10).await.unwrap();
    assert_eq!((empty.jobs.len(), empty.read, empty.next), (0, 0, None));
    let later = (now_seconds() + 3600) as f64;
    // Ties: 40 jobs of one second, as a legacy client pushes them in bulk; around them, jobs of
    // their own scores, some a fraction of a second, as ours are.
    let mut jobs: Vec<(String, &str, f64)> = (0..40)
        .map(|n| (format!("tie-{:02}", (n * 7) % 40), "a", later))
        .collect();
    jobs.extend((0..10).map(|n| (format!("early-{n}"), "b", later - 10.0 + n as f64 * 0.25)));
    jobs.extend((0..10).map(|n| (format!("late-{n}"), "a", later + 1.5 + n as f64)));
    add_jobs(&mut redis, jobs).await;
    let expected: Vec<String> = pool(&mut redis)
        .await
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(expected.len(), 60);

    assert_eq!(every_page(&client, None, 7).await, expected);
    assert_eq!(every_page(&client, None, 60).await, expected);

    // Each with its due time, topic and attempts.
    let first = inspector.waiting(None, None, 1).await.unwrap();
    let job = &first.jobs[0];
    assert_eq!(job.id.to_string(), "early-0");
    assert_eq!(
        (job.due, job.topic.as_ref().unwrap().to_string()),
        (later - 10.0, "b".into())
    );
    redis
        .hset::<_, _, _, ()>(job_bucket("early-0"), "attempts", 3)
        .await
        .unwrap();
    assert_eq!(
        inspector.waiting(None, None, 1).await.unwrap().jobs[0].attempts,
        3
    );

    // The job a page ended with leaves the pool (in the middle of the ties): the next page
    // starts right after where it was, skipping nothing and showing nothing twice.
    let page = inspector.waiting(None, None, 25).await.unwrap();
    let last = page.jobs.last().unwrap().id.to_string();
    assert!(last.starts_with("tie-"), "{last}");
    assert!(legacy_client::remove(&mut redis, &last).await.unwrap());
    let rest = inspector
        .waiting(None, page.next.as_ref(), 100)
        .await
        .unwrap();
    let rest: Vec<String> = rest.jobs.iter().map(|job| job.id.to_string()).collect();
    assert_eq!(rest, expected[25..], "after {last}");

    // A job of a score before the page's end, pushed meanwhile, is not on the next page; the
    // pages after are as before.
    add_jobs(&mut redis, [("newcomer".to_string(), "a", later - 100.0)]).await;
    let again = inspector
        .waiting(None, page.next.as_ref(), 100)
        .await
        .unwrap();
    assert_eq!(again.jobs.len(), 35);
}

#[tokio::test]
async fn a_topics_jobs_in_one_pool_are_found_within_a_bounded_read_that_says_where_to_go_on() {
    let (_server, mut redis, client) = start().await;
    let inspector = Inspector::new(&client);
    let later = (now_seconds() + 3600) as f64;
    let others = MAX_WAITING_READ + 500;
    let jobs = (0..others)
        .map(|n| (format!("other-{n:05}"), "common", later + n as f64))
        .chain((0..3).map(|n| (format!("rare-{n}"), "rare", later + 1e5 + n as f64)));
    add_jobs(&mut redis, jobs).await;

    let page = inspector.waiting(Some(b"rare"), None, 50).await.unwrap();
    assert!(page.jobs.is_empty());
    assert_eq!(page.read, MAX_WAITING_READ);
    assert!(page.cut_short);
    let next = page.next.clone().unwrap();
    assert_eq!(
        next.id.to_string(),
        format!("other-{:05}", MAX_WAITING_READ - 1)
    );

    let rest = inspector
        .waiting(Some(b"rare"), Some(&next), 50)
        .await
        .unwrap();
    let ids: Vec<String> = rest.jobs.iter().map(|job| job.id.to_string()).collect();
    assert_eq!(ids, ["rare-0", "rare-1", "rare-2"]);
    assert_eq!((rest.read, rest.next, rest.cut_short), (503, None, false));

    // A common topic's page fills within the first window.
    let common = inspector.waiting(Some(b"common"), None, 50).await.unwrap();
    assert_eq!(
        (common.jobs.len(), common.read, common.cut_short),
        (50, 50, false)
    );
    assert_eq!(common.next.unwrap().id.to_string(), "other-00049");
}

#[tokio::test]
async fn run_now_makes_a_waiting_job_due_by_redis_clock_and_refuses_jobs_that_do_not_wait() {
    let (_server, mut redis, client) = start().await;
    let inspector = Inspector::new(&client);
    let ours = client
        .push("mail", "ours")
        .delay(Duration::from_secs(3600))
        .await
        .unwrap();
    let legacy = Message {
        id: "legacy".into(),
        topic: "mail".into(),
        body: "theirs".into(),
    };
    legacy_client::push(&mut redis, &legacy, 3600)
        .await
        .unwrap();
    let due_field = |redis: &mut MultiplexedConnection| {
        let mut redis = redis.clone();
        let bucket = job_bucket(&ours);
        async move {
            let due: String = redis.hget(bucket, "due").await.unwrap();
            due.parse::<f64>().unwrap()
        }
    };
    assert!(due_field(&mut redis).await > redis_now(&mut redis).await + 3000.0);

    let before = redis_now(&mut redis).await;
    assert_eq!(inspector.promote(&ours).await.unwrap(), Promoted::Due);
    assert_eq!(inspector.promote("legacy").await.unwrap(), Promoted::Due);
    let after = redis_now(&mut redis).await;
    let scores: std::collections::HashMap<String, f64> =
        pool(&mut redis).await.into_iter().collect();
    // Due now by Redis's clock; a legacy push keeps whole seconds, ours a fraction (how the
    // move and ack tell a push from a retry).
    let score = scores[&ours.to_string()];
    assert!(
        (before..=after).contains(&score),
        "{before} {score} {after}"
    );
    assert_ne!(score.fract(), 0.0);
    let whole = scores["legacy"];
    assert!(
        whole.fract() == 0.0 && whole <= after && whole > before - 1.0,
        "{whole}"
    );
    let due = due_field(&mut redis).await;
    assert!(due <= score && due > score - 0.002, "{due} {score}");

    // Moved as any due job: ready.
    assert_eq!(move_due_jobs(&mut redis).await, 2);
    let ready: Vec<String> = redis.lrange(ready_queue("mail"), 0, -1).await.unwrap();
    assert_eq!(ready.len(), 2);

    // Ready, unknown, due already: told so, and nothing changes.
    let not_waiting = inspector.promote("legacy").await.unwrap_err();
    assert!(matches!(not_waiting, Error::NotWaiting(_)), "{not_waiting}");
    assert!(matches!(
        inspector.promote("nope").await,
        Err(Error::UnknownJob(_))
    ));
    let due_now = client.push("mail", "now").await.unwrap();
    redis
        .zadd::<_, _, _, ()>(JOB_POOL, due_now.as_bytes(), before - 5.0)
        .await
        .unwrap();
    assert_eq!(inspector.promote(&due_now).await.unwrap(), Promoted::WasDue);
    let kept: f64 = redis.zscore(JOB_POOL, due_now.as_bytes()).await.unwrap();
    assert_eq!(kept, before - 5.0);
    let ready_after: Vec<String> = redis.lrange(ready_queue("mail"), 0, -1).await.unwrap();
    assert_eq!(ready_after, ready);
}

#[tokio::test]
async fn run_all_of_a_topic_makes_only_its_jobs_due_up_to_the_limit_and_goes_on_from_its_cursor() {
    let (_server, mut redis, client) = start().await;
    let inspector = Inspector::new(&client);
    let later = (now_seconds() + 3600) as f64;
    let jobs = (0..60).map(|n| {
        let topic = if n % 2 == 0 { "a" } else { "b" };
        (format!("job-{n:02}"), topic, later + n as f64)
    });
    add_jobs(&mut redis, jobs).await;

    let first = inspector.promote_topic("a", 10, None).await.unwrap();
    assert_eq!(first.made_due, 10);
    let now = redis_now(&mut redis).await;
    let due: Vec<String> = redis.zrangebyscore(JOB_POOL, "-inf", now).await.unwrap();
    let expected: Vec<String> = (0..20).step_by(2).map(|n| format!("job-{n:02}")).collect();
    assert_eq!(due, expected, "the 10 earliest of topic a, and no job of b");
    let next = first.next.unwrap();
    assert_eq!(next.id.to_string(), "job-18");

    let rest = inspector
        .promote_topic("a", 100, Some(&next))
        .await
        .unwrap();
    assert_eq!((rest.made_due, rest.next), (20, None));
    let due: Vec<String> = redis
        .zrangebyscore(JOB_POOL, "-inf", now + 5.0)
        .await
        .unwrap();
    assert_eq!(due.len(), 30);
    assert!(
        due.iter()
            .all(|id| id[4..].parse::<u32>().unwrap() % 2 == 0),
        "{due:?}"
    );
    let waiting_b: usize = redis.zcount(JOB_POOL, later, "+inf").await.unwrap();
    assert_eq!(waiting_b, 30);
}
