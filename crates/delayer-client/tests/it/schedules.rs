//! Schedules at the client: saved once however often, refused naming the field at fault, paused,
//! resumed, run and removed, and listed whether they read or not. (The daemon claims their ticks:
//! the daemon's `schedules_claims` tests.)

use std::collections::HashMap;

use delayer_client::inspector::{Changed, Definition, Saved, Source};
use delayer_client::redis::AsyncCommands;
use delayer_client::{Error, Inspector};
use delayer_testkit::schedules::{every_second, save_one_good_one_unreadable, schedule_field};
use delayer_wire::keys::{JOB_POOL, SCHEDULES, SCHEDULES_BY_NEXT};

use crate::fixture;

#[tokio::test]
async fn saving_the_same_schedule_again_changes_nothing() {
    let (_server, mut redis, client) = fixture::start().await;
    let inspector = Inspector::new(&client);
    let definition = every_second("s");
    assert_eq!(
        inspector
            .save_schedule(&definition, Source::File)
            .await
            .unwrap(),
        Saved::Created
    );
    let next = schedule_field(&mut redis, "s", "next").await;
    let version = schedule_field(&mut redis, "s", "version").await;
    for _ in 0..3 {
        assert_eq!(
            inspector
                .save_schedule(&definition, Source::File)
                .await
                .unwrap(),
            Saved::Same
        );
    }
    assert_eq!(schedule_field(&mut redis, "s", "version").await, version);
    assert_eq!(
        schedule_field(&mut redis, "s", "next").await,
        next,
        "its next tick is kept"
    );
    assert_eq!(
        inspector.create_schedule(&definition).await.unwrap(),
        Saved::Exists
    );
    let mut changed = definition.clone();
    changed.body = b"new".to_vec();
    assert_eq!(
        inspector
            .save_schedule(&changed, Source::Api)
            .await
            .unwrap(),
        Saved::Changed
    );
    assert_ne!(schedule_field(&mut redis, "s", "version").await, version);
    assert_eq!(
        schedule_field(&mut redis, "s", "next").await,
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
    let inspector = Inspector::new(&client);
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
        match inspector.save_schedule(&definition, Source::Api).await {
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

#[tokio::test]
async fn pause_resume_run_and_remove() {
    let (_server, mut redis, client) = fixture::start().await;
    let inspector = Inspector::new(&client);
    inspector
        .save_schedule(&every_second("s"), Source::Api)
        .await
        .unwrap();
    assert_eq!(inspector.pause_schedule("s").await.unwrap(), Changed::Done);
    assert_eq!(
        inspector.pause_schedule("s").await.unwrap(),
        Changed::Already
    );
    let queued: Vec<String> = redis.zrange(SCHEDULES_BY_NEXT, 0, -1).await.unwrap();
    assert!(queued.is_empty(), "a paused schedule is claimed by none");
    let run = inspector.run_schedule("s").await.unwrap();
    assert!(run.to_string().starts_with("s@") && run.to_string().ends_with("/run"));
    let pool: Vec<String> = redis.zrange(JOB_POOL, 0, -1).await.unwrap();
    assert_eq!(
        pool,
        [run.to_string()],
        "a run pushes one job, paused or not"
    );
    assert_eq!(inspector.resume_schedule("s").await.unwrap(), Changed::Done);
    assert_eq!(
        inspector.resume_schedule("s").await.unwrap(),
        Changed::Already
    );
    let queued: Vec<String> = redis.zrange(SCHEDULES_BY_NEXT, 0, -1).await.unwrap();
    assert_eq!(queued, ["s"]);
    assert_eq!(inspector.remove_schedule("s").await.unwrap(), Changed::Done);
    assert_eq!(inspector.remove_schedule("s").await.unwrap(), Changed::Gone);
    assert!(matches!(
        inspector.run_schedule("s").await,
        Err(Error::UnknownSchedule(_))
    ));
    let left: Vec<String> = redis.keys("delayer:schedule*").await.unwrap();
    assert!(left.is_empty(), "{left:?}");
    let pool: Vec<String> = redis.zrange(JOB_POOL, 0, -1).await.unwrap();
    assert_eq!(pool, [run.to_string()], "its jobs stay");
}

/// A schedule hash that does not read (a `catch_up` word from a newer version) is listed apart
/// with why, never an error that hides the others.
#[tokio::test]
async fn an_unreadable_schedule_is_listed_apart() {
    let (_server, mut redis, client) = fixture::start().await;
    let inspector = Inspector::new(&client);
    save_one_good_one_unreadable(&inspector, &mut redis, "good", "newer").await;
    let list = inspector.schedules().await.unwrap();
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
        inspector.schedule("newer").await,
        Err(Error::InvalidSchedule(_))
    ));
}
