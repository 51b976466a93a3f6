//! Schedules at the client: saved once however often, and each tick pushed once however many
//! claim it at once, with the catch-up policy deciding what passed unclaimed.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::schedule::{parse_ms, seconds_text, tick_id};
use delayer_client::{
    CatchUp, Changed, Client, Definition, Error, Fired, Firing, Overlap, Round, Saved, Source,
};
use delayer_wire::keys::{JOB_POOL, SCHEDULES, SCHEDULES_BY_NEXT, job_bucket};

use crate::fixture;

fn every_second(name: &str) -> Definition {
    Definition::new(name, "every 1s", "ticks")
}

async fn field(redis: &mut MultiplexedConnection, name: &str, field: &str) -> Option<String> {
    redis
        .hget(format!("delayer:schedule:{name}"), field)
        .await
        .unwrap()
}

async fn redis_ms(redis: &mut MultiplexedConnection) -> i64 {
    let (seconds, micros): (i64, i64) = delayer_client::redis::cmd("TIME")
        .query_async(redis)
        .await
        .unwrap();
    seconds * 1000 + micros / 1000
}

#[tokio::test]
async fn saving_the_same_schedule_again_changes_nothing() {
    let (_server, mut redis, client) = fixture::start().await;
    let definition = every_second("s");
    assert_eq!(
        client
            .save_schedule(&definition, Source::File)
            .await
            .unwrap(),
        Saved::Created
    );
    let next = field(&mut redis, "s", "next").await;
    let version = field(&mut redis, "s", "version").await;
    for _ in 0..3 {
        assert_eq!(
            client
                .save_schedule(&definition, Source::File)
                .await
                .unwrap(),
            Saved::Same
        );
    }
    assert_eq!(field(&mut redis, "s", "version").await, version);
    assert_eq!(
        field(&mut redis, "s", "next").await,
        next,
        "its next tick is kept"
    );
    assert_eq!(
        client.create_schedule(&definition).await.unwrap(),
        Saved::Exists
    );
    let mut changed = definition.clone();
    changed.body = b"new".to_vec();
    assert_eq!(
        client.save_schedule(&changed, Source::Api).await.unwrap(),
        Saved::Changed
    );
    assert_ne!(field(&mut redis, "s", "version").await, version);
    assert_eq!(
        field(&mut redis, "s", "next").await,
        next,
        "a new body keeps the next tick"
    );
    let registry: HashMap<String, String> = redis.hgetall(SCHEDULES).await.unwrap();
    assert_eq!(
        registry,
        HashMap::from([("s".to_string(), "ticks".to_string())])
    );
}

#[tokio::test]
async fn a_bad_schedule_is_refused_naming_its_field_and_nothing_is_written() {
    let (_server, mut redis, client) = fixture::start().await;
    let cases = [
        (
            Definition::new("s", "0 0 30 2 *", "t"),
            "cron",
            "never fires",
        ),
        (
            Definition::new("s", "61 * * * *", "t"),
            "cron",
            "not a cron expression",
        ),
        (Definition::new("s", "* * * * *", ""), "topic", "empty"),
        (
            Definition::new("a b", "* * * * *", "t"),
            "name",
            "character",
        ),
        (
            Definition {
                zone: "Mars/Olympus".into(),
                ..Definition::new("s", "* * * * *", "t")
            },
            "zone",
            "IANA",
        ),
        (
            Definition::new(&"n".repeat(201), "* * * * *", "t"),
            "name",
            "longer than 200 bytes",
        ),
        (
            Definition::new("s", &format!("{} * * * *", "0,".repeat(600) + "0"), "t"),
            "cron",
            "longer than 1000 bytes",
        ),
    ];
    for (definition, field, why) in cases {
        match client.save_schedule(&definition, Source::Api).await {
            Err(Error::InvalidSchedule(invalid)) => {
                assert_eq!(invalid.field, field);
                assert!(invalid.why.contains(why), "{invalid}");
                assert!(
                    invalid
                        .to_string()
                        .contains(&format!("{:?}", definition.name))
                        || definition.name.len() > 64,
                    "{invalid}"
                );
                assert!(invalid.to_string().len() < 300, "{invalid}");
            }
            other => panic!("{definition:?}: {other:?}"),
        }
    }
    let keys: Vec<String> = redis.keys("*").await.unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

/// Four claimers race over 50 schedules for 3 s: every tick of each has its job, once, and the
/// counters say as many.
#[tokio::test]
async fn claimers_racing_push_each_tick_once() {
    let (_server, mut redis, client) = fixture::start().await;
    for index in 0..50 {
        client
            .save_schedule(&every_second(&format!("s{index}")), Source::Api)
            .await
            .unwrap();
    }
    let start = redis_ms(&mut redis).await;
    // Each round, the four start together: their reads go out before any claim, so that every
    // tick is planned by all four and claimed by one (a race each time, not by chance).
    let mut firings: Vec<Firing> = (0..4).map(|_| Firing::default()).collect();
    let mut lost = 0;
    let until = tokio::time::Instant::now() + Duration::from_secs(3);
    while tokio::time::Instant::now() < until {
        let rounds = futures_util::future::join_all(
            firings
                .iter_mut()
                .map(|firing| client.fire_schedules(firing)),
        )
        .await;
        for round in rounds {
            lost += round
                .unwrap()
                .claims
                .iter()
                .filter(|c| c.2 == Fired::Lost)
                .count();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(lost > 0, "the claimers did race");
    let pool: Vec<(String, f64)> = redis.zrange_withscores(JOB_POOL, 0, -1).await.unwrap();
    for index in 0..50 {
        let name = format!("s{index}");
        let ticks: BTreeSet<i64> = pool
            .iter()
            .filter(|(id, _)| id.starts_with(&format!("{name}@")))
            .map(|(_, due)| (due * 1000.0).round() as i64)
            .collect();
        let fired: usize = field(&mut redis, &name, "fired")
            .await
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(fired, ticks.len(), "{name}: one job a tick");
        let (first, last) = (*ticks.first().unwrap(), *ticks.last().unwrap());
        assert!(
            first > start,
            "the first tick is after the schedule was written"
        );
        assert_eq!(
            ticks.len() as i64,
            (last - first) / 1000 + 1,
            "{name}: no tick left out"
        );
        for tick in &ticks {
            let id = tick_id(&name, *tick);
            let due: String = redis.hget(job_bucket(id.as_bytes()), "due").await.unwrap();
            assert_eq!(parse_ms(&due), Some(*tick), "due at its tick");
        }
        let next = parse_ms(&field(&mut redis, &name, "next").await.unwrap()).unwrap();
        assert_eq!(next, last + 1000, "its next tick follows the last pushed");
    }
}

/// Makes schedule `name` look as if no daemon ran since its tick `next` (unix ms).
async fn stopped_since(redis: &mut MultiplexedConnection, name: &str, next: i64) {
    let key = format!("delayer:schedule:{name}");
    let _: () = redis.hset(&key, "next", seconds_text(next)).await.unwrap();
    let _: () = redis
        .zadd(SCHEDULES_BY_NEXT, name, seconds_text(next))
        .await
        .unwrap();
}

#[tokio::test]
async fn missed_ticks_go_by_the_catch_up_policy() {
    let (_server, mut redis, client) = fixture::start().await;
    let policies = [
        ("skip", CatchUp::Skip, 3600),
        ("latest", CatchUp::Latest, 3600),
        ("all", CatchUp::All, 3600),
        ("window", CatchUp::All, 5),
    ];
    let now = redis_ms(&mut redis).await;
    // Ten whole seconds ago, and the ticks since.
    let since = (now / 1000 - 10) * 1000;
    for (name, catch_up, window) in policies {
        let definition = Definition {
            catch_up,
            catch_up_window: Duration::from_secs(window),
            ..every_second(name)
        };
        client
            .save_schedule(&definition, Source::Api)
            .await
            .unwrap();
        stopped_since(&mut redis, name, since).await;
    }
    let round = client.fire_schedules(&mut Firing::default()).await.unwrap();
    let claimed_at = round.now;
    // The ticks missed: since, since + 1 s, ... up to a second before the claim (later ones are
    // late, not missed).
    let passed: Vec<i64> = (0..)
        .map(|s| since + s * 1000)
        .take_while(|t| *t < claimed_at - 1000)
        .collect();
    let mut pool: Vec<String> = redis.zrange(JOB_POOL, 0, -1).await.unwrap();
    pool.sort();
    let jobs = |name: &str| -> Vec<i64> {
        passed
            .iter()
            .copied()
            .filter(|tick| pool.contains(&tick_id(name, *tick).to_string()))
            .collect()
    };
    assert_eq!(jobs("skip"), Vec::<i64>::new());
    assert_eq!(jobs("latest"), [*passed.last().unwrap()]);
    assert_eq!(jobs("all"), passed);
    let window = jobs("window");
    assert!(
        window.iter().all(|tick| *tick >= claimed_at - 5000),
        "{window:?}"
    );
    assert!((4..=5).contains(&window.len()), "{window:?}");
    let count = |name: &'static str, field_name: &'static str| {
        let mut redis = redis.clone();
        async move {
            field(&mut redis, name, field_name)
                .await
                .unwrap_or_default()
        }
    };
    assert_eq!(count("skip", "missed").await, passed.len().to_string());
    assert_eq!(
        count("latest", "missed").await,
        (passed.len() - 1).to_string()
    );
    assert_eq!(count("latest", "caught_up").await, "1");
    assert_eq!(count("all", "caught_up").await, passed.len().to_string());
    for (name, ..) in policies {
        let next = parse_ms(&field(&mut redis, name, "next").await.unwrap()).unwrap();
        assert!(
            next >= claimed_at - 1000 && next < claimed_at,
            "{name}: on from the first tick still on time"
        );
    }
}

#[tokio::test]
async fn overlap_skip_skips_a_tick_while_the_last_job_is_held() {
    let (_server, mut redis, client) = fixture::start().await;
    let definition = Definition {
        overlap: Overlap::Skip,
        ..every_second("slow")
    };
    client
        .save_schedule(&definition, Source::Api)
        .await
        .unwrap();
    let mut firing = Firing::default();
    // The first tick: claimed at its time, pushed due then.
    let mut first = None;
    rounds_until(&client, &mut firing, "the first tick", |round| {
        first = round.claims.first().map(|claim| claim.1);
        first.is_some()
    })
    .await;
    let id = tick_id("slow", first.unwrap());
    let exists: bool = redis.exists(job_bucket(id.as_bytes())).await.unwrap();
    assert!(exists);
    // While it waits (never taken here), the next two ticks are skipped.
    let mut skipped = 0;
    rounds_until(&client, &mut firing, "two ticks skipped", |round| {
        skipped += round
            .claims
            .iter()
            .filter(|claim| claim.2 == Fired::Skipped)
            .count();
        skipped == 2
    })
    .await;
    assert_eq!(
        field(&mut redis, "slow", "skipped").await.as_deref(),
        Some("2")
    );
    let pool: Vec<String> = redis.zrange(JOB_POOL, 0, -1).await.unwrap();
    assert_eq!(pool, [id.to_string()], "no job for the skipped ticks");
    // Gone (taken and done): the next tick fires again.
    let _: () = redis.del(job_bucket(id.as_bytes())).await.unwrap();
    rounds_until(
        &client,
        &mut firing,
        "a tick after the job is done",
        |round| {
            round
                .claims
                .iter()
                .any(|claim| matches!(claim.2, Fired::Pushed(1)))
        },
    )
    .await;
    assert_eq!(
        field(&mut redis, "slow", "fired").await.as_deref(),
        Some("2")
    );
}

/// Runs rounds, 20 ms apart, until `done` says so of one (at most 5 s).
async fn rounds_until(
    client: &Client,
    firing: &mut Firing,
    what: &str,
    mut done: impl FnMut(&Round) -> bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let round = client.fire_schedules(firing).await.unwrap();
        if done(&round) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn pause_resume_run_and_remove() {
    let (_server, mut redis, client) = fixture::start().await;
    client
        .save_schedule(&every_second("s"), Source::Api)
        .await
        .unwrap();
    assert_eq!(client.pause_schedule("s").await.unwrap(), Changed::Done);
    assert_eq!(client.pause_schedule("s").await.unwrap(), Changed::Already);
    let queued: Vec<String> = redis.zrange(SCHEDULES_BY_NEXT, 0, -1).await.unwrap();
    assert!(queued.is_empty(), "a paused schedule is claimed by none");
    let round = client.fire_schedules(&mut Firing::default()).await.unwrap();
    assert!(round.claims.is_empty());
    let run = client.run_schedule("s").await.unwrap();
    assert!(run.to_string().starts_with("s@") && run.to_string().ends_with("/run"));
    let pool: Vec<String> = redis.zrange(JOB_POOL, 0, -1).await.unwrap();
    assert_eq!(
        pool,
        [run.to_string()],
        "a run pushes one job, paused or not"
    );
    assert_eq!(client.resume_schedule("s").await.unwrap(), Changed::Done);
    assert_eq!(client.resume_schedule("s").await.unwrap(), Changed::Already);
    let queued: Vec<String> = redis.zrange(SCHEDULES_BY_NEXT, 0, -1).await.unwrap();
    assert_eq!(queued, ["s"]);
    assert_eq!(client.remove_schedule("s").await.unwrap(), Changed::Done);
    assert_eq!(client.remove_schedule("s").await.unwrap(), Changed::Gone);
    assert!(matches!(
        client.run_schedule("s").await,
        Err(Error::UnknownSchedule(_))
    ));
    let left: Vec<String> = redis.keys("delayer:schedule*").await.unwrap();
    assert!(left.is_empty(), "{left:?}");
    let pool: Vec<String> = redis.zrange(JOB_POOL, 0, -1).await.unwrap();
    assert_eq!(pool, [run.to_string()], "its jobs stay");
}

/// A schedule hash that does not read (a `catch_up` word from a newer version) is listed apart
/// with why, never an error that hides the others, and a round claims the others' ticks.
#[tokio::test]
async fn an_unreadable_schedule_is_listed_apart_and_the_others_tick() {
    let (_server, mut redis, client) = fixture::start().await;
    client
        .save_schedule(&every_second("good"), Source::Api)
        .await
        .unwrap();
    client
        .save_schedule(&every_second("newer"), Source::Api)
        .await
        .unwrap();
    let _: () = redis
        .hset("delayer:schedule:newer", "catch_up", "bogus")
        .await
        .unwrap();
    let list = client.schedules().await.unwrap();
    let names: Vec<&str> = list
        .readable
        .iter()
        .map(|stored| stored.definition.name.as_str())
        .collect();
    assert_eq!(names, ["good"]);
    assert_eq!(list.unreadable.len(), 1);
    let invalid = &list.unreadable[0];
    assert_eq!(
        (invalid.schedule.as_str(), invalid.field),
        ("newer", "catch_up")
    );
    assert!(invalid.why.contains("\"bogus\""), "{invalid}");
    assert!(matches!(
        client.schedule("newer").await,
        Err(Error::InvalidSchedule(_))
    ));

    let mut firing = Firing::default();
    let mut refused = Vec::new();
    rounds_until(&client, &mut firing, "a tick of good pushed", |round| {
        refused.extend(round.refused.clone());
        round
            .claims
            .iter()
            .any(|(name, _, fired)| name == "good" && matches!(fired, Fired::Pushed(_)))
    })
    .await;
    assert_eq!(refused.len(), 1, "told once: {refused:?}");
    assert!(refused[0].contains("catch_up"), "{refused:?}");
    assert_eq!(
        field(&mut redis, "newer", "catch_up").await.as_deref(),
        Some("bogus")
    );
    assert_eq!(
        field(&mut redis, "newer", "fired").await,
        None,
        "not claimed"
    );
}
