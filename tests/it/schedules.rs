//! Recurring schedules, the way users run them: `[schedule.NAME]` sections read by several
//! daemons at once, daemons killed and restarted (some with their clocks 10 s off), all of them
//! stopped over ten ticks, and the `delayer schedule` commands.

use crate::support;

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, SystemTime};

use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_wire::keys::{SCHEDULES, ready_queue};
use delayer_wire::schedule::{parse_ms, tick_id};
use support::{
    Daemon, DaemonSetup, RedisServer, delayer_fails, delayer_succeeds, redis_ms, start_daemons,
    wait_for,
};

/// `[delayer]` lines, then a schedule section (the test config's `[redis]` follows it).
fn with_schedule(delayer: &str, schedule: &str) -> String {
    format!("{delayer}\n{schedule}")
}

const EVERY_SECOND: &str = "[schedule.tick]\ncron = * * * * * *\ntopic = ticks";

/// Pops `topic`'s ready list (over `redis`, a connection of its own) as jobs arrive, each with Redis's time when it came (unix ms), until
/// `until` (unix ms by Redis's clock) has passed.
async fn consume(mut redis: MultiplexedConnection, topic: &str, until: i64) -> Vec<(String, i64)> {
    let mut popped = Vec::new();
    loop {
        let reply: Option<(String, String)> = redis.brpop(ready_queue(topic), 0.2).await.unwrap();
        let now = redis_ms(&mut redis).await;
        if let Some((_, id)) = reply {
            popped.push((id, now));
        } else if now > until {
            return popped;
        }
    }
}

/// A schedule's tick in unix ms, from its job's id (`tick@2026-11-26T12:00:00Z`).
fn tick_of(id: &str) -> i64 {
    let time = id.split_once('@').unwrap().1;
    chrono::DateTime::parse_from_rfc3339(time)
        .unwrap()
        .timestamp_millis()
}

/// A small random number generator for the kills' timing (its seed is printed).
struct Dice(u64);

impl Dice {
    fn new() -> Dice {
        let seed = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1;
        println!("dice seed {seed}");
        Dice(seed)
    }

    fn below(&mut self, bound: u64) -> u64 {
        // xorshift64
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

/// Three daemons with the same schedule, each killed (kill -9) and restarted at random times,
/// some with their clocks 10 s ahead or behind: every tick has its job, once, never before its
/// tick by Redis's clock. `DELAYER_SCHEDULE_TEST_SECONDS` sets how many ticks (default 60).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_daemons_killed_at_random_push_one_job_per_tick() {
    let seconds: i64 = std::env::var("DELAYER_SCHEDULE_TEST_SECONDS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(60);
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let extra = with_schedule("timer_interval = 1000", EVERY_SECOND);
    let configs: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|name| server.daemon_config(name, &extra).0)
        .collect();
    let clocks = ["+10s", "-10s", "+0s"];
    let mut daemons: Vec<Daemon> = configs
        .iter()
        .zip(clocks)
        .map(|(config, clock)| Daemon::start_with_clock(config, clock))
        .collect();
    wait_for(Duration::from_secs(10), "the schedule in Redis", || {
        let mut redis = redis.clone();
        async move {
            let exists: bool = redis.exists("delayer:schedule:tick").await.unwrap();
            exists.then_some(())
        }
    })
    .await;
    let version: String = redis
        .hget("delayer:schedule:tick", "version")
        .await
        .unwrap();
    // The ticks counted: from the schedule's second tick on, for `seconds` ticks.
    let next: String = redis.hget("delayer:schedule:tick", "next").await.unwrap();
    let first = parse_ms(&next).unwrap() + 1000;
    let last = first + (seconds - 1) * 1000;
    let consumer = tokio::spawn(consume(server.connect().await, "ticks", last + 2000));
    let mut dice = Dice::new();
    let mut kills = 0;
    while redis_ms(&mut redis).await < last {
        tokio::time::sleep(Duration::from_millis(1000 + dice.below(2500))).await;
        let index = dice.below(3) as usize;
        daemons[index].process.kill().unwrap();
        daemons[index].process.wait().unwrap();
        kills += 1;
        tokio::time::sleep(Duration::from_millis(200 + dice.below(1300))).await;
        let clock = clocks[dice.below(3) as usize];
        daemons[index] = Daemon::start_with_clock(&configs[index], clock);
    }
    let popped = consumer.await.unwrap();
    drop(daemons);

    let mut seen = BTreeSet::new();
    let mut lateness = Vec::new();
    for (id, at) in &popped {
        assert!(seen.insert(id.clone()), "{id} delivered twice");
        let tick = tick_of(id);
        if (first..=last).contains(&tick) {
            assert!(*at >= tick, "{id} moved {} ms before its tick", tick - at);
            lateness.push(at - tick);
        }
    }
    let expected: BTreeSet<String> = (0..seconds)
        .map(|k| tick_id("tick", first + k * 1000).to_string())
        .collect();
    let counted: BTreeSet<String> = seen
        .into_iter()
        .filter(|id| (first..=last).contains(&tick_of(id)))
        .collect();
    assert_eq!(counted, expected, "one job a tick, none missing");
    lateness.sort_unstable();
    let percentile = |p: f64| lateness[((lateness.len() - 1) as f64 * p).round() as usize];
    println!(
        "{seconds} ticks, {kills} kills: tick to pop p50 {} ms, p99 {} ms, max {} ms",
        percentile(0.5),
        percentile(0.99),
        lateness.last().unwrap()
    );
    // The bench measures the figure on a quiet box; here other tests share the cores.
    assert!(percentile(0.99) < 250, "{lateness:?}");
    let after: String = redis
        .hget("delayer:schedule:tick", "version")
        .await
        .unwrap();
    assert_eq!(after, version, "restarts with the same file change nothing");
}

/// Every daemon stopped over ten ticks: `skip` pushes none of them, `latest` one, `all` each,
/// and a window shorter than the stop bounds `all`.
#[tokio::test]
async fn ticks_missed_while_every_daemon_was_stopped_go_by_the_catch_up_policy() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let schedules = [
        ("skip", "skip", "1h"),
        ("latest", "latest", "1h"),
        ("all", "all", "1h"),
        ("window", "all", "5s"),
    ]
    .map(|(name, policy, window)| {
        format!(
            "[schedule.{name}]\ncron = every 1s\ntopic = {name}\ncatch_up = {policy}\n\
             catch_up_window = {window}\n"
        )
    })
    .join("\n");
    let (config, _logs) = server.daemon_config("daemon", &with_schedule("", &schedules));
    let daemon = Daemon::start(&config);
    for topic in ["skip", "latest", "all", "window"] {
        support::wait_for_ready(&redis, topic, 1).await;
    }
    daemon.stop();
    // The ticks before each schedule's next were claimed before the stop.
    let mut stopped_at = HashMap::new();
    for name in ["skip", "latest", "all", "window"] {
        let next: String = redis
            .hget(format!("delayer:schedule:{name}"), "next")
            .await
            .unwrap();
        stopped_at.insert(name, parse_ms(&next).unwrap());
    }
    let stop = redis_ms(&mut redis).await;
    wait_for(Duration::from_secs(20), "ten ticks to pass", || {
        let mut redis = redis.clone();
        async move { (redis_ms(&mut redis).await > stop + 12_000).then_some(()) }
    })
    .await;
    let restart = redis_ms(&mut redis).await;
    let daemon = Daemon::start(&config);
    // Until each has claimed a tick after the restart.
    wait_for(Duration::from_secs(10), "ticks claimed again", || {
        let mut redis = redis.clone();
        async move {
            for name in ["skip", "latest", "all", "window"] {
                let next: String = redis
                    .hget(format!("delayer:schedule:{name}"), "next")
                    .await
                    .unwrap();
                if parse_ms(&next).unwrap() < restart + 2000 {
                    return None;
                }
            }
            Some(())
        }
    })
    .await;
    daemon.stop();
    // The jobs of the ticks that passed while no daemon ran: from each schedule's next at the
    // stop to the restart.
    let mut missed_jobs = HashMap::new();
    for name in ["skip", "latest", "all", "window"] {
        let ids: Vec<String> = redis.lrange(ready_queue(name), 0, -1).await.unwrap();
        let pool: Vec<String> = redis.zrange("delayer:job_pool", 0, -1).await.unwrap();
        let ticks: BTreeSet<i64> = ids
            .iter()
            .chain(&pool)
            .filter(|id| id.starts_with(&format!("{name}@")))
            .map(|id| tick_of(id))
            // Within a second of the restart, a tick is late, not missed.
            .filter(|tick| (stopped_at[name]..restart - 1000).contains(tick))
            .collect();
        missed_jobs.insert(name, ticks);
    }
    let passed = |name: &str| (restart - 1000 - stopped_at[name]) / 1000;
    assert!(passed("all") >= 9);
    assert_eq!(missed_jobs["skip"].len(), 0, "{missed_jobs:?}");
    assert_eq!(missed_jobs["latest"].len(), 1, "{missed_jobs:?}");
    assert!(
        *missed_jobs["latest"].first().unwrap() >= restart - 2000,
        "the latest"
    );
    let all = &missed_jobs["all"];
    assert!(all.len() as i64 >= passed("all"), "{all:?}");
    let window = &missed_jobs["window"];
    assert!((3..=5).contains(&window.len()), "{window:?}");
    assert!(
        window.iter().all(|tick| *tick >= restart - 5000),
        "{window:?}"
    );
    let missed: String = redis.hget("delayer:schedule:skip", "missed").await.unwrap();
    assert!(missed.parse::<i64>().unwrap() >= 10, "counted: {missed}");
}

/// Three daemons started at once with the same file: one schedule in Redis, written once, one
/// job per tick; `delayer get` shows a tick's job due at its tick.
#[tokio::test]
async fn three_daemons_started_together_write_the_file_s_schedule_once() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemons, logs) =
        start_daemons(&server, &["a", "b", "c"], &with_schedule("", EVERY_SECOND));
    let ids = support::wait_for_ready(&redis, "ticks", 3).await;
    let registry: HashMap<String, String> = redis.hgetall(SCHEDULES).await.unwrap();
    assert_eq!(
        registry,
        HashMap::from([("tick".to_string(), "ticks".to_string())])
    );
    let logs: String = logs
        .iter()
        .map(|logs| support::read(&logs.access))
        .collect();
    assert_eq!(
        logs.matches("schedule \"tick\" created from the configuration file")
            .count(),
        1,
        "{logs}"
    );
    assert!(
        !logs.contains("changed as the configuration file says"),
        "{logs}"
    );
    let mut ticks: Vec<i64> = ids.iter().map(|id| tick_of(&id.to_string())).collect();
    ticks.sort_unstable();
    ticks.dedup();
    assert_eq!(ticks.len(), ids.len(), "no tick twice: {ids:?}");
    let (config, _) = server.daemon_config("cli", "");
    let id = ids[0].to_string();
    let shown = delayer_succeeds(&config, &["get", &id]);
    let job: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(
        job["body"], id,
        "a schedule without a body: the id, never empty"
    );
    let due = chrono::DateTime::parse_from_rfc3339(job["due"].as_str().unwrap()).unwrap();
    assert_eq!(due.timestamp_millis(), tick_of(&id), "{shown}");
    for daemon in daemons {
        daemon.stop();
    }
}

#[tokio::test]
async fn the_schedule_commands() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (config, _) = server.daemon_config("cli", "");
    let refused = delayer_fails(
        &config,
        &[
            "schedule",
            "add",
            "s",
            "--cron",
            "0 0 30 2 *",
            "--topic",
            "t",
        ],
    );
    assert!(
        refused.contains("schedule \"s\": cron:") && refused.contains("never fires"),
        "{refused}"
    );
    let refused = delayer_fails(
        &config,
        &[
            "schedule",
            "add",
            "s",
            "--cron",
            "@daily",
            "--topic",
            "t",
            "--zone",
            "Moon/Base",
        ],
    );
    assert!(refused.contains("zone"), "{refused}");
    let refused = delayer_fails(
        &config,
        &[
            "schedule",
            "add",
            "s",
            "--cron",
            "@daily",
            "--topic",
            "t",
            "--overlap",
            "never",
        ],
    );
    assert!(refused.contains("--overlap"), "{refused}");
    let keys: Vec<String> = redis.keys("*").await.unwrap();
    assert!(keys.is_empty(), "bad input writes nothing: {keys:?}");

    let added = delayer_succeeds(
        &config,
        &[
            "schedule",
            "add",
            "invoices",
            "--cron",
            "0 9 1 * *",
            "--zone",
            "Europe/Paris",
            "--topic",
            "invoices.run",
            "--body",
            "{\"month\":\"last\"}",
            "--catch-up",
            "latest",
        ],
    );
    assert!(
        added.contains("created") && added.contains("T09:00:00+0"),
        "{added}"
    );
    let again = delayer_succeeds(
        &config,
        &[
            "schedule",
            "add",
            "invoices",
            "--cron",
            "0 9 1 * *",
            "--zone",
            "Europe/Paris",
            "--topic",
            "invoices.run",
            "--body",
            "{\"month\":\"last\"}",
            "--catch-up",
            "latest",
        ],
    );
    assert!(again.contains("unchanged"), "{again}");
    let list = delayer_succeeds(&config, &["schedule", "list"]);
    assert!(
        list.contains("invoices") && list.contains("active"),
        "{list}"
    );
    let shown: serde_json::Value = serde_json::from_str(&delayer_succeeds(
        &config,
        &["schedule", "show", "invoices"],
    ))
    .unwrap();
    assert_eq!(shown["catch_up"], "latest");
    assert_eq!(shown["next_ticks"].as_array().unwrap().len(), 5);
    assert!(
        shown["next_ticks"][0]
            .as_str()
            .unwrap()
            .contains("-01T09:00:00+0"),
        "{shown}"
    );
    delayer_succeeds(&config, &["schedule", "pause", "invoices"]);
    let list = delayer_succeeds(&config, &["schedule", "list"]);
    assert!(list.contains("paused"), "{list}");
    let run = delayer_succeeds(&config, &["schedule", "run", "invoices"]);
    let id = run.trim();
    assert!(id.starts_with("invoices@") && id.ends_with("/run"), "{run}");
    let body: String = redis
        .hget(format!("delayer:job_bucket:{id}"), "body")
        .await
        .unwrap();
    assert_eq!(body, "{\"month\":\"last\"}");
    delayer_succeeds(&config, &["schedule", "resume", "invoices"]);
    delayer_succeeds(&config, &["schedule", "remove", "invoices"]);
    let gone = delayer_fails(&config, &["schedule", "show", "invoices"]);
    assert!(gone.contains("no schedule \"invoices\""), "{gone}");
    delayer_fails(&config, &["schedule", "remove", "invoices"]);
    delayer_fails(&config, &["schedule", "run", "invoices"]);
}

/// A schedule a file wrote leaves Redis when the file no longer has it; one added at run time
/// stays; a bad section stops the start and `--check-config` names it.
#[tokio::test]
async fn the_file_s_schedules_are_reconciled_at_start() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (config, logs) = server.daemon_config(
        "daemon",
        &with_schedule(
            "",
            "[schedule.old]\ncron = @hourly\ntopic = t\n[schedule.kept]\ncron = @daily\ntopic = t",
        ),
    );
    let daemon = Daemon::start(&config);
    logs.wait_for_line("schedule \"kept\" created from the configuration file");
    delayer_succeeds(
        &config,
        &[
            "schedule", "add", "runtime", "--cron", "@daily", "--topic", "t",
        ],
    );
    daemon.stop();
    let (config, logs) = server.daemon_config(
        "daemon",
        &with_schedule("", "[schedule.kept]\ncron = @daily\ntopic = t"),
    );
    let daemon = Daemon::start(&config);
    logs.wait_for_line("schedule \"old\" removed: the configuration file no longer has it");
    daemon.stop();
    let mut names: Vec<String> = redis.hkeys(SCHEDULES).await.unwrap();
    names.sort();
    assert_eq!(names, ["kept", "runtime"]);

    let (bad, _) = server.daemon_config(
        "bad",
        &with_schedule("", "[schedule.bad]\ncron = 0 0 30 2 *\ntopic = t"),
    );
    let checked = delayer_fails(&bad, &["--check-config"]);
    assert!(
        checked.contains("[schedule.bad] cron = \"0 0 30 2 *\"") && checked.contains("never fires"),
        "{checked}"
    );
    let mut refused = Daemon::start(&bad);
    assert!(!refused.wait(Duration::from_secs(10)).success());
}

/// `overlap = skip`: while the last tick's job is reserved, the next ticks are skipped and
/// counted; once it is acked, the next tick pushes again.
#[tokio::test]
async fn a_reserved_job_makes_overlap_skip_skip_the_next_ticks() {
    let server = RedisServer::start();
    let redis = server.connect().await;
    let (config, _logs) = server.daemon_config(
        "daemon",
        &with_schedule(
            "",
            "[schedule.slow]\ncron = every 1s\ntopic = slow\noverlap = skip",
        ),
    );
    let daemon = Daemon::start(&config);
    let client = delayer_client::Client::connect(server.info())
        .await
        .unwrap();
    let job = client
        .reserve(&["slow"], Duration::from_secs(60), Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the first tick's job");
    let count = |field: &'static str, at_least: i64| {
        let redis = redis.clone();
        async move {
            wait_for(Duration::from_secs(10), field, || {
                let mut redis = redis.clone();
                async move {
                    let value: Option<i64> =
                        redis.hget("delayer:schedule:slow", field).await.unwrap();
                    (value.unwrap_or(0) >= at_least).then_some(())
                }
            })
            .await
        }
    };
    count("skipped", 2).await;
    let mut redis = redis.clone();
    let (waiting, ready): (i64, i64) = (
        redis.zcard("delayer:job_pool").await.unwrap(),
        redis.llen(ready_queue("slow")).await.unwrap(),
    );
    assert_eq!((waiting, ready), (0, 0), "no job for a skipped tick");
    let fired: i64 = redis.hget("delayer:schedule:slow", "fired").await.unwrap();
    assert_eq!(fired, 1);
    client.ack(&job).await.unwrap();
    count("fired", 2).await;
    daemon.stop();
}

/// Writes what Redis holds of schedule `name` (its hash, and its entry in the registry and, with
/// `next`, in the queue by next tick) as a hand edit or a newer version would.
async fn write_schedule_by_hand(
    redis: &mut MultiplexedConnection,
    name: &str,
    fields: &[(&str, &str)],
    next: Option<f64>,
) {
    let _: () = redis
        .hset_multiple(format!("delayer:schedule:{name}"), fields)
        .await
        .unwrap();
    let topic = fields
        .iter()
        .find(|(field, _)| *field == "topic")
        .unwrap()
        .1;
    let _: () = redis.hset(SCHEDULES, name, topic).await.unwrap();
    if let Some(next) = next {
        let _: () = redis
            .zadd("delayer:schedules_by_next", name, next)
            .await
            .unwrap();
    }
}

/// A schedule hash that does not read (a `catch_up` word from a newer version), due now, and one
/// whose zone is unknown: a daemon that starts with a file schedule still writes it and claims
/// its ticks, warns once of the bad one; `stats` and `schedule list` show the others and say
/// why of each bad one; the bad hash is left as it was.
#[tokio::test]
async fn an_unreadable_schedule_is_skipped_and_flagged_and_the_others_tick() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let now = redis_ms(&mut redis).await as f64 / 1000.0;
    let bad = [
        ("cron", "0 0 1 1 *"),
        ("zone", "UTC"),
        ("topic", "bt"),
        ("catch_up", "bogus"),
        ("catch_up_window", "3600"),
        ("overlap", "allow"),
        ("source", "api"),
        ("version", "1"),
        ("next", "1795840000.000"),
    ];
    write_schedule_by_hand(&mut redis, "bad", &bad, Some(now)).await;
    let mut zoned = bad;
    zoned[1] = ("zone", "Mars/Olympus");
    zoned[3] = ("catch_up", "skip");
    write_schedule_by_hand(&mut redis, "zoned", &zoned, None).await;
    let (config, logs) = server.daemon_config("daemon", &with_schedule("", EVERY_SECOND));
    let daemon = Daemon::start(&config);

    let ids = support::wait_for_ready(&redis, "ticks", 2).await;
    assert!(ids.iter().all(|id| id.to_string().starts_with("tick@")));
    daemon.stop();
    let fired: i64 = redis.hget("delayer:schedule:tick", "fired").await.unwrap();
    assert!(fired >= 2, "{fired}");
    let logged = support::read(&logs.error);
    assert_eq!(
        logged
            .matches("schedule \"bad\": catch_up: \"bogus\" is not one of skip, latest, all")
            .count(),
        1,
        "warned once:\n{logged}"
    );
    let held: HashMap<String, String> = redis.hgetall("delayer:schedule:bad").await.unwrap();
    assert_eq!(held["catch_up"], "bogus", "left as it was");
    assert_eq!(held["next"], "1795840000.000");

    let stats = delayer_succeeds(&config, &["stats"]);
    let row = |name: &str| {
        stats
            .lines()
            .find(|line| line.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no row of {name}:\n{stats}"))
            .to_string()
    };
    assert!(
        row("bad").contains("unreadable: catch_up: \"bogus\" is not one of skip, latest, all"),
        "{stats}"
    );
    assert!(
        row("zoned").contains("unusable: zone: \"Mars/Olympus\" is not a time zone"),
        "{stats}"
    );
    assert!(!stats.contains("1795840000000"), "no raw unix ms:\n{stats}");
    assert!(row("tick").contains("T"), "{stats}");
    let list = delayer_succeeds(&config, &["schedule", "list"]);
    let names: Vec<&str> = list
        .lines()
        .skip(1)
        .map(|line| line.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(names, ["bad", "tick", "zoned"], "{list}");
    assert!(list.contains("unreadable: catch_up:"), "{list}");
    assert!(list.contains("unusable: zone:"), "{list}");
    let json: serde_json::Value =
        serde_json::from_str(&delayer_succeeds(&config, &["schedule", "list", "--json"])).unwrap();
    assert_eq!(
        json[0],
        serde_json::json!({
            "name": "bad",
            "unreadable": "catch_up: \"bogus\" is not one of skip, latest, all"
        })
    );
    assert_eq!(json[1]["name"], "tick");
    assert_eq!(json[1]["unusable"], serde_json::Value::Null);
    assert!(
        json[2]["unusable"]
            .as_str()
            .unwrap()
            .starts_with("zone: \"Mars/Olympus\""),
        "{json}"
    );
    let stats: serde_json::Value =
        serde_json::from_str(&delayer_succeeds(&config, &["stats", "--json"])).unwrap();
    assert_eq!(stats["schedules"], json);
    // The one that does not read is said so by `show`, and can be removed.
    let shown = delayer_fails(&config, &["schedule", "show", "bad"]);
    assert!(shown.contains("catch_up"), "{shown}");
    delayer_succeeds(&config, &["schedule", "remove", "bad"]);
    let exists: bool = redis.exists("delayer:schedule:bad").await.unwrap();
    assert!(!exists);
}

/// A name or an expression too long is refused by every path that writes a schedule, quoting only
/// its start, and nothing is written.
#[tokio::test]
async fn a_long_name_or_expression_is_refused_quoting_only_its_start() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (config, _) = server.daemon_config("cli", "");
    let long_name = "n".repeat(10_000);
    let refused = delayer_fails(
        &config,
        &[
            "schedule", "add", &long_name, "--cron", "@daily", "--topic", "t",
        ],
    );
    assert!(
        refused.len() < 500 && refused.contains("(10000 bytes)"),
        "{refused}"
    );
    // A minute listed 50,000 times: croner reads it.
    let long_cron = format!("{} * * * *", "0,".repeat(50_000) + "0");
    let refused = delayer_fails(
        &config,
        &["schedule", "add", "s", "--cron", &long_cron, "--topic", "t"],
    );
    assert!(
        refused.len() < 500 && refused.contains("longer than 1000 bytes"),
        "{refused}"
    );
    let keys: Vec<String> = redis.keys("*").await.unwrap();
    assert!(keys.is_empty(), "nothing written: {keys:?}");
    let (file, _) = server.daemon_config(
        "file",
        &with_schedule("", &format!("[schedule.s]\ncron = {long_cron}\ntopic = t")),
    );
    let checked = delayer_fails(&file, &["--check-config"]);
    assert!(
        checked.contains("[schedule.s] cron = \"0,0,")
            && checked.contains("longer than 1000 bytes"),
        "{}",
        &checked[..checked.len().min(2000)]
    );
    assert!(checked.len() < 10_000, "{}", checked.len());
}
