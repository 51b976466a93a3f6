//! Claiming schedules' ticks in rounds, as every daemon does ([`Claimer`]): each tick pushed once
//! however many claim it at once, the catch-up policy deciding what passed unclaimed, the overlap
//! policy skipping a tick while the last job is held, a paused schedule claimed by none, and one
//! that does not read told once while the others tick.

use std::collections::BTreeSet;
use std::time::Duration;

use delayer::{Claimer, Round};
use delayer_client::inspector::{Definition, Source};
use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::{Client, Inspector, Settings};
use delayer_testkit::RedisServer;
use delayer_testkit::jobs::redis_ms;
use delayer_testkit::schedules::{every_second, save_one_good_one_unreadable, schedule_field};
use delayer_wire::keys::{JOB_POOL, Layout, SCHEDULES_BY_NEXT, job_bucket};
use delayer_wire::schedule::{CatchUp, Overlap, parse_ms, seconds_text, tick_id};
use delayer_wire::scripts::schedule_claim::Claimed;
use delayer_wire::shared_connection::SharedConnection;

/// A new redis-server, a connection to look at it, a client that saves schedules in it, and
/// claimers of their ticks ([`Claimers::claimer`]).
async fn start() -> (RedisServer, MultiplexedConnection, Client, Claimers) {
    let server = RedisServer::start();
    let redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let claimers = Claimers(SharedConnection::lazy(server.info().into()));
    (server, redis, client, claimers)
}

/// Makes claimers on one connection, as a daemon's.
struct Claimers(std::sync::Arc<SharedConnection>);

impl Claimers {
    /// A claimer that knows nothing yet, as a daemon just started.
    fn claimer(&self) -> Claimer {
        let lifetime = Settings::default().ready_max_lifetime;
        Claimer::new(self.0.clone(), Layout::LEGACY, lifetime)
    }
}

/// Four claimers race over 50 schedules for 3 s: every tick of each has its job, once, and the
/// counters say as many.
#[tokio::test]
async fn claimers_racing_push_each_tick_once() {
    let (_server, mut redis, client, claimers) = start().await;
    let inspector = Inspector::new(&client);
    for index in 0..50 {
        inspector
            .save_schedule(&every_second(&format!("s{index}")), Source::Api)
            .await
            .unwrap();
    }
    let start = redis_ms(&mut redis).await;
    // Each round, the four start together: their reads go out before any claim, so that every
    // tick is planned by all four and claimed by one (a race each time, not by chance).
    let mut racing: Vec<Claimer> = (0..4).map(|_| claimers.claimer()).collect();
    let mut lost = 0;
    let until = tokio::time::Instant::now() + Duration::from_secs(3);
    while tokio::time::Instant::now() < until {
        let rounds =
            futures_util::future::join_all(racing.iter_mut().map(|claimer| claimer.round())).await;
        for round in rounds {
            lost += round
                .unwrap()
                .claims
                .iter()
                .filter(|c| c.2 == Claimed::Lost)
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
        let fired: usize = schedule_field(&mut redis, &name, "fired")
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
        let next = parse_ms(&schedule_field(&mut redis, &name, "next").await.unwrap()).unwrap();
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
    let (_server, mut redis, client, claimers) = start().await;
    let inspector = Inspector::new(&client);
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
        inspector
            .save_schedule(&definition, Source::Api)
            .await
            .unwrap();
        stopped_since(&mut redis, name, since).await;
    }
    let round = claimers.claimer().round().await.unwrap();
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
            schedule_field(&mut redis, name, field_name)
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
        let next = parse_ms(&schedule_field(&mut redis, name, "next").await.unwrap()).unwrap();
        assert!(
            next >= claimed_at - 1000 && next < claimed_at,
            "{name}: on from the first tick still on time"
        );
    }
}

#[tokio::test]
async fn overlap_skip_skips_a_tick_while_the_last_job_is_held() {
    let (_server, mut redis, client, claimers) = start().await;
    let inspector = Inspector::new(&client);
    let definition = Definition {
        overlap: Overlap::Skip,
        ..every_second("slow")
    };
    inspector
        .save_schedule(&definition, Source::Api)
        .await
        .unwrap();
    let mut claimer = claimers.claimer();
    // The first tick: claimed at its time, pushed due then.
    let mut first = None;
    rounds_until(&mut claimer, "the first tick", |round| {
        first = round.claims.first().map(|claim| claim.1);
        first.is_some()
    })
    .await;
    let id = tick_id("slow", first.unwrap());
    let exists: bool = redis.exists(job_bucket(id.as_bytes())).await.unwrap();
    assert!(exists);
    // While it waits (never taken here), the next two ticks are skipped.
    let mut skipped = 0;
    rounds_until(&mut claimer, "two ticks skipped", |round| {
        skipped += round
            .claims
            .iter()
            .filter(|claim| claim.2 == Claimed::Skipped)
            .count();
        skipped == 2
    })
    .await;
    assert_eq!(
        schedule_field(&mut redis, "slow", "skipped")
            .await
            .as_deref(),
        Some("2")
    );
    let pool: Vec<String> = redis.zrange(JOB_POOL, 0, -1).await.unwrap();
    assert_eq!(pool, [id.to_string()], "no job for the skipped ticks");
    // Gone (taken and done): the next tick fires again.
    let _: () = redis.del(job_bucket(id.as_bytes())).await.unwrap();
    rounds_until(&mut claimer, "a tick after the job is done", |round| {
        round
            .claims
            .iter()
            .any(|claim| matches!(claim.2, Claimed::Pushed(1)))
    })
    .await;
    assert_eq!(
        schedule_field(&mut redis, "slow", "fired").await.as_deref(),
        Some("2")
    );
}

/// Runs rounds, 20 ms apart, until `done` says so of one (at most 5 s).
async fn rounds_until(claimer: &mut Claimer, what: &str, mut done: impl FnMut(&Round) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let round = claimer.round().await.unwrap();
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

/// A paused schedule is claimed by none; resumed, it ticks again.
#[tokio::test]
async fn a_paused_schedule_is_claimed_by_none() {
    let (_server, mut redis, client, claimers) = start().await;
    let inspector = Inspector::new(&client);
    inspector
        .save_schedule(&every_second("s"), Source::Api)
        .await
        .unwrap();
    inspector.pause_schedule("s").await.unwrap();
    let round = claimers.claimer().round().await.unwrap();
    assert!(round.claims.is_empty());
    let pool: Vec<String> = redis.zrange(JOB_POOL, 0, -1).await.unwrap();
    assert!(pool.is_empty(), "{pool:?}");
    inspector.resume_schedule("s").await.unwrap();
    let mut claimer = claimers.claimer();
    rounds_until(&mut claimer, "a tick after the resume", |round| {
        round
            .claims
            .iter()
            .any(|claim| matches!(claim.2, Claimed::Pushed(1)))
    })
    .await;
}

/// A schedule hash that does not read (a `catch_up` word from a newer version) is told once,
/// and a round claims the others' ticks.
#[tokio::test]
async fn an_unreadable_schedule_is_told_once_and_the_others_tick() {
    let (_server, mut redis, client, claimers) = start().await;
    let inspector = Inspector::new(&client);
    save_one_good_one_unreadable(&inspector, &mut redis, "good", "newer").await;
    let mut claimer = claimers.claimer();
    let mut refused = Vec::new();
    rounds_until(&mut claimer, "a tick of good pushed", |round| {
        refused.extend(round.refused.clone());
        round
            .claims
            .iter()
            .any(|(name, _, fired)| name == "good" && matches!(fired, Claimed::Pushed(_)))
    })
    .await;
    assert_eq!(refused.len(), 1, "told once: {refused:?}");
    assert!(refused[0].contains("catch_up"), "{refused:?}");
    assert_eq!(
        schedule_field(&mut redis, "newer", "catch_up")
            .await
            .as_deref(),
        Some("bogus")
    );
    assert_eq!(
        schedule_field(&mut redis, "newer", "fired").await,
        None,
        "not claimed"
    );
}
