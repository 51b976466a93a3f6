//! What `/metrics` and `delayer stats` tell of schedules: the counts each schedule's hash holds
//! (summed over every daemon by the claim script), its next tick, its pause; and nothing new where
//! there are no schedules.

use crate::support;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use delayer_client::inspector::{CatchUp, Definition, Overlap, Source, Stored};
use delayer_client::redis::{self, aio::MultiplexedConnection};
use delayer_client::{Client, Inspector, Layout};
use delayer_testkit::cluster::RedisCluster;
use serde_json::Value;
use support::http_client::{http_address, promtool_check, request, samples, serving};
use support::{
    Daemon, DaemonSetup, RedisServer, delayer_succeeds, read, wait_for, wait_until_sync,
};

use crate::cluster::cluster_config;

/// Redis's clock, unix ms: what decides every tick.
async fn redis_now(redis: &mut MultiplexedConnection) -> i64 {
    let (seconds, micros): (i64, i64) = redis::cmd("TIME").query_async(redis).await.unwrap();
    seconds * 1000 + micros / 1000
}

async fn stored(client: &Client, name: &str) -> Stored {
    let inspector = Inspector::new(client);
    inspector
        .schedule(name)
        .await
        .unwrap()
        .expect("the schedule")
}

fn series(family: &str, schedule: &str) -> String {
    format!("delayer_{family}{{schedule=\"{schedule}\"}}")
}

#[tokio::test]
async fn metrics_give_each_schedules_counts_next_tick_and_pause_as_redis_holds_them() {
    let server = RedisServer::start();
    let redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let inspector = Inspector::new(&client);
    let (daemon, _logs, http) = serving(&server, "metrics", "max_listed_schedules = 4");
    let scrape = || samples(&request(&http, "GET", "/metrics", &[], b"").body);

    // None yet: the totals, and no schedule's series.
    let mut none = HashMap::new();
    wait_until_sync(Duration::from_secs(10), "a census", || {
        none = scrape();
        none.contains_key("delayer_schedules")
    });
    assert_eq!(none["delayer_schedules"], 0.0);
    assert_eq!(none["delayer_schedules_unlisted"], 0.0);
    assert!(
        !none.keys().any(|key| key.contains("schedule=")),
        "{none:?}"
    );

    let every_second = |name: &str, topic: &str| Definition::new(name, "every 1s", topic);
    // Its jobs stay on the ready list (nobody pops "held"): each tick after the first is skipped.
    let mut skipping = every_second("b-skipping", "held");
    skipping.overlap = Overlap::Skip;
    let mut catching = every_second("c-catching", "c");
    catching.catch_up = CatchUp::Latest;
    // Its next tick stays put while the test runs.
    let mut yearly = Definition::new("d-yearly", "0 0 1 1 *", "y");
    yearly.zone = "Europe/Paris".into();
    // Last by name: beyond max_listed_schedules.
    let unlisted = Definition::new("e-unlisted", "0 0 1 1 *", "e");
    for definition in [
        every_second("a-ticking", "t"),
        skipping,
        catching,
        yearly,
        unlisted,
    ] {
        inspector
            .save_schedule(&definition, Source::Api)
            .await
            .unwrap();
    }
    inspector.pause_schedule("e-unlisted").await.unwrap();
    // Paused over two ticks, then resumed: those ticks passed unclaimed, and `latest` fires one.
    inspector.pause_schedule("c-catching").await.unwrap();
    let next = stored(&client, "c-catching").await.next.unwrap();
    wait_for(Duration::from_secs(10), "two ticks of c-catching", || {
        let mut redis = redis.clone();
        async move { (redis_now(&mut redis).await > next + 2000).then_some(()) }
    })
    .await;
    inspector.resume_schedule("c-catching").await.unwrap();

    wait_until_sync(
        Duration::from_secs(15),
        "ticks fired, skipped, caught up",
        || {
            let now = scrape();
            let value = |family, schedule| now.get(&series(family, schedule)).copied();
            value("schedule_ticks_fired_total", "a-ticking") >= Some(2.0)
                && value("schedule_ticks_skipped_total", "b-skipping") >= Some(1.0)
                && value("schedule_ticks_caught_up_total", "c-catching") >= Some(1.0)
        },
    );
    // Paused, the counts stop; and a run, outside the ticks.
    for name in ["a-ticking", "b-skipping", "c-catching"] {
        inspector.pause_schedule(name).await.unwrap();
    }
    inspector.run_schedule("a-ticking").await.unwrap();
    let mut metrics = HashMap::new();
    wait_until_sync(Duration::from_secs(10), "a census after the pauses", || {
        metrics = scrape();
        metrics.get(&series("schedule_runs_total", "a-ticking")) == Some(&1.0)
            && ["a-ticking", "b-skipping", "c-catching"]
                .iter()
                .all(|name| metrics.get(&series("schedule_paused", name)) == Some(&1.0))
    });

    let held: HashMap<String, Stored> = inspector
        .schedules()
        .await
        .unwrap()
        .readable
        .into_iter()
        .map(|stored| (stored.definition.name.clone(), stored))
        .collect();
    for name in ["a-ticking", "b-skipping", "c-catching", "d-yearly"] {
        let stored = &held[name];
        let counts = [
            ("schedule_ticks_fired_total", stored.fired),
            ("schedule_ticks_skipped_total", stored.skipped),
            ("schedule_ticks_missed_total", stored.missed),
            ("schedule_ticks_caught_up_total", stored.caught_up),
            ("schedule_runs_total", stored.runs),
        ];
        for (family, count) in counts {
            assert_eq!(
                metrics.get(&series(family, name)),
                Some(&(count as f64)),
                "{family} of {name}"
            );
        }
        let paused = stored.paused_since.is_some();
        assert_eq!(
            metrics.get(&series("schedule_paused", name)),
            Some(&f64::from(u8::from(paused)))
        );
        // A paused schedule does not tick: no next tick to alert on.
        let next = metrics.get(&series("schedule_next_tick_timestamp_seconds", name));
        if paused {
            assert_eq!(next, None, "{name}");
        } else {
            assert_eq!(
                next,
                Some(&(stored.next.unwrap() as f64 / 1000.0)),
                "{name}"
            );
        }
    }
    // The values are Redis's, and they are not all zero.
    let (ticking, skipping, catching) =
        (&held["a-ticking"], &held["b-skipping"], &held["c-catching"]);
    assert!(ticking.fired >= 2 && ticking.runs == 1, "{ticking:?}");
    assert!(skipping.fired >= 1 && skipping.skipped >= 1, "{skipping:?}");
    assert!(
        catching.caught_up == 1 && catching.missed >= 1,
        "{catching:?}"
    );
    assert_eq!(metrics["delayer_schedules"], 5.0);
    assert_eq!(metrics["delayer_schedules_paused"], 4.0);
    assert_eq!(metrics["delayer_schedules_unlisted"], 1.0);
    assert!(
        !metrics.keys().any(|key| key.contains("e-unlisted")),
        "{metrics:?}"
    );
    promtool_check(&request(&http, "GET", "/metrics", &[], b"").body);
    daemon.stop();
}

/// A schedule hash that does not read (a `catch_up` word from a newer version): `/metrics` keeps
/// the others' series and counts it, the API's list and the console's page show the others and
/// say why of it.
#[tokio::test]
async fn an_unreadable_schedule_is_counted_and_flagged_and_the_others_keep_their_series() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let inspector = Inspector::new(&client);
    for name in ["good", "newer"] {
        inspector
            .save_schedule(&Definition::new(name, "0 0 1 1 *", "t"), Source::Api)
            .await
            .unwrap();
    }
    let _: () = redis::cmd("HSET")
        .arg("delayer:schedule:newer")
        .arg("catch_up")
        .arg("bogus")
        .query_async(&mut redis)
        .await
        .unwrap();
    let (_daemon, _logs, http) = serving(&server, "metrics", "");

    let mut metrics = HashMap::new();
    wait_until_sync(Duration::from_secs(10), "a census of the schedules", || {
        metrics = samples(&request(&http, "GET", "/metrics", &[], b"").body);
        metrics.contains_key("delayer_schedules")
    });
    assert_eq!(metrics["delayer_schedules"], 2.0);
    assert_eq!(metrics["delayer_schedules_unusable"], 1.0);
    assert_eq!(metrics["delayer_schedules_unlisted"], 0.0);
    assert_eq!(metrics[&series("schedule_ticks_fired_total", "good")], 0.0);
    assert!(
        !metrics.keys().any(|key| key.contains("\"newer\"")),
        "{metrics:?}"
    );

    let listed = support::http_client::post(
        &http,
        "/delay-queue/api/schedules/list",
        &serde_json::json!({}),
    );
    assert_eq!(listed.status, 200, "{}", listed.body);
    let listed = listed.json();
    assert_eq!(listed["data"][0]["name"], "good");
    assert_eq!(
        listed["data"][1],
        serde_json::json!({
            "name": "newer",
            "unreadable": "catch_up: \"bogus\" is not one of skip, latest, all"
        })
    );
    let page = request(&http, "GET", "/schedules", &[], b"");
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("<td>good</td>"), "{}", page.body);
    assert!(
        page.body
            .contains("unreadable: catch_up: &quot;bogus&quot; is not one of skip, latest, all"),
        "{}",
        page.body
    );
}

#[tokio::test]
async fn stats_lists_the_schedules_only_when_there_are_any() {
    let server = RedisServer::start();
    let client = Client::connect(server.info()).await.unwrap();
    let (cli, _) = server.daemon_config("cli", "");

    // A drop-in install prints what it always did.
    let table = delayer_succeeds(&cli, &["stats"]);
    assert!(
        table.starts_with("jobs waiting: 0 (0 due now), next due: none\ntopic "),
        "{table}"
    );
    assert_eq!(table.lines().count(), 2, "{table}");
    let json: Value = serde_json::from_str(&delayer_succeeds(&cli, &["stats", "--json"])).unwrap();
    let mut keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    keys.sort();
    assert_eq!(keys, ["due_now", "next_due", "topics", "waiting"]);

    delayer_succeeds(
        &cli,
        &[
            "schedule",
            "add",
            "nightly",
            "--cron",
            "0 3 * * *",
            "--zone",
            "Europe/Paris",
            "--topic",
            "report",
        ],
    );
    // Nobody pops "reminders": after the first tick, each is skipped.
    delayer_succeeds(
        &cli,
        &[
            "schedule",
            "add",
            "sweep",
            "--cron",
            "every 1s",
            "--topic",
            "reminders",
            "--overlap",
            "skip",
        ],
    );
    let (config, _logs) = server.daemon_config("daemon", "");
    let daemon = Daemon::start(&config);
    wait_for(
        Duration::from_secs(15),
        "two ticks of sweep skipped",
        || {
            let client = client.clone();
            async move { (stored(&client, "sweep").await.skipped >= 2).then_some(()) }
        },
    )
    .await;
    delayer_succeeds(&cli, &["schedule", "pause", "sweep"]);
    daemon.stop();
    let sweep = stored(&client, "sweep").await;
    assert!(sweep.fired >= 1, "{sweep:?}");

    let table = delayer_succeeds(&cli, &["stats"]);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .skip_while(|line| !line.starts_with("schedule "))
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 3, "{table}");
    assert_eq!(
        rows[0],
        ["schedule", "next", "tick", "fired", "skipped", "missed"]
    );
    // The next tick in the schedule's zone: 03:00 in Paris, in winter or in summer.
    let nightly = &rows[1];
    assert_eq!(
        (nightly[0], &nightly[2..]),
        ("nightly", &["0", "0", "0"][..])
    );
    assert!(
        nightly[1].ends_with("T03:00:00+01:00") || nightly[1].ends_with("T03:00:00+02:00"),
        "{table}"
    );
    let counts = [sweep.fired, sweep.skipped, sweep.missed].map(|n| n.to_string());
    assert_eq!(
        rows[2],
        [
            "sweep",
            "paused",
            counts[0].as_str(),
            &counts[1],
            &counts[2]
        ]
    );

    let json: Value = serde_json::from_str(&delayer_succeeds(&cli, &["stats", "--json"])).unwrap();
    let schedules = json["schedules"].as_array().expect("the schedules");
    let names: Vec<&str> = schedules
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["nightly", "sweep"]);
    assert_eq!(schedules[0]["next_ticks"][0], nightly[1]);
    assert_eq!(schedules[0]["paused"], false);
    let swept = &schedules[1];
    assert_eq!(swept["paused"], true);
    assert_eq!(
        (&swept["fired"], &swept["skipped"], &swept["missed"]),
        (
            &sweep.fired.into(),
            &sweep.skipped.into(),
            &sweep.missed.into()
        )
    );
}

#[tokio::test]
async fn on_a_cluster_each_schedule_is_read_from_its_topics_slot() {
    let cluster = RedisCluster::start(3);
    let dir = tempfile::tempdir().unwrap();
    let (config, logs) = cluster_config(&dir, "schedules", &cluster.addresses());
    let text = format!("{}\n[http]\nlisten = 127.0.0.1:0\n", read(&config));
    std::fs::write(&config, text).unwrap();
    let daemon = Daemon::start(&config);
    let http = http_address(&logs);
    // Nothing yet, not even a topic.
    let table = delayer_succeeds(&config, &["stats"]);
    assert!(!table.contains("schedule"), "{table}");

    let schedules = [("s-a", "a"), ("s-b", "b"), ("s-c", "c"), ("s-d", "d")];
    let masters: HashSet<usize> = schedules
        .iter()
        .map(|(name, topic)| cluster.node_of(&Layout::CLUSTER.keys(topic).schedule(name)))
        .collect();
    assert!(masters.len() > 1, "the schedules on one master only");
    for (name, topic) in schedules {
        delayer_succeeds(
            &config,
            &[
                "schedule", "add", name, "--cron", "every 1s", "--topic", topic,
            ],
        );
    }
    wait_until_sync(Duration::from_secs(15), "every schedule fired", || {
        let metrics = samples(&request(&http, "GET", "/metrics", &[], b"").body);
        metrics.get("delayer_schedules") == Some(&4.0)
            && schedules.iter().all(|(name, _)| {
                metrics.get(&series("schedule_ticks_fired_total", name)) >= Some(&1.0)
            })
    });
    let table = delayer_succeeds(&config, &["stats"]);
    let listed: Vec<&str> = table
        .lines()
        .skip_while(|line| !line.starts_with("schedule "))
        .skip(1)
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert_eq!(listed, ["s-a", "s-b", "s-c", "s-d"], "{table}");
    // The schedules' topics are in the registry, as a push puts its topic there: the daemon
    // drains the topics it names, and stats and the census list them.
    let topics: Vec<&str> = table
        .lines()
        .skip_while(|line| !line.starts_with("topic "))
        .skip(1)
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert_eq!(topics, ["a", "b", "c", "d"], "{table}");
    daemon.stop();
}
