//! Consumers that lose nothing, with the daemon running: reservations that lapse are delivered
//! again (exactly once, even by several daemons), a worker killed mid-job loses nothing, a job out
//! of attempts goes to its dead list, and the CLI works on all of it.

use crate::support;

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::{Client, State, Worker};
use delayer_wire::keys::{HOLDERS, JOB_POOL, RESERVED, dead_queue, field, job_bucket, ready_queue};
use delayer_wire::time::{deadline_score, from_deadline_score, unix_now};
use support::legacy_client::{self, Message};
use support::{Daemon, DaemonSetup, RedisServer, delayer_command, read, test_name, wait_for};

/// Set (to a redis socket) when this test binary runs as a worker process (see `worker_process`).
const WORKER_SOCKET: &str = "DELAYER_TEST_WORKER_SOCKET";

/// Not a test of its own: the body of a worker process that `a_worker_killed_mid_job...` starts
/// (this same binary, run with `--exact worker_process`) and kills. Its handler counts each start
/// and each finish of a job in Redis; a job's first attempt never finishes.
#[tokio::test]
async fn worker_process() {
    let Some((client, counters)) = worker_connections(WORKER_SOCKET).await else {
        return;
    };
    Worker::new(client)
        .ttr(Duration::from_secs(1))
        .handle("order.close", move |job| {
            let counters = counters.clone();
            async move {
                let mut redis = counters;
                let _: () = redis.incr(format!("started:{}", job.id), 1).await.unwrap();
                if job.attempts == 1 {
                    std::future::pending::<()>().await;
                }
                let _: () = redis.incr(format!("finished:{}", job.id), 1).await.unwrap();
                Ok::<(), String>(())
            }
        })
        .run(std::future::pending())
        .await
        .unwrap();
}

/// In a worker process (the socket in `variable`), a client and a connection to count on; `None`
/// in the test run itself.
async fn worker_connections(variable: &str) -> Option<(Client, MultiplexedConnection)> {
    let socket = std::env::var(variable).ok()?;
    let url = format!("redis+unix://{socket}");
    let client = Client::connect(url.as_str()).await.unwrap();
    let counters = delayer_client::redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    Some((client, counters))
}

/// Runs this test binary's `test` alone as a worker process, on `server` (told in `variable`).
fn start_worker_process(server: &RedisServer, test: &str, variable: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &test_name(module_path!(), test), "--nocapture"])
        .env(variable, server.socket())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// What `topic` has left anywhere: (in the pool, reserved, ready).
async fn left(redis: &mut MultiplexedConnection, topic: &str) -> (usize, usize, usize) {
    delayer_client::redis::pipe()
        .zcard(JOB_POOL)
        .zcard(RESERVED)
        .llen(ready_queue(topic))
        .query_async(redis)
        .await
        .unwrap()
}

async fn counter(redis: &mut MultiplexedConnection, name: &str) -> u64 {
    let value: Option<u64> = redis.get(name).await.unwrap();
    value.unwrap_or(0)
}

#[tokio::test]
async fn a_worker_killed_mid_job_gets_its_job_delivered_again_after_ttr_and_acked_once() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (config, logs) = server.daemon_config("daemon", "timer_interval = 100");
    let mut daemon = Daemon::start(&config);
    let client = Client::connect(server.info()).await.unwrap();
    let id = client.push("order.close", "order 42").await.unwrap();
    let mut first = start_worker_process(&server, "worker_process", WORKER_SOCKET);
    let started = format!("started:{id}");
    wait_for(
        Duration::from_secs(10),
        "the first attempt to start",
        || {
            let (mut redis, started) = (redis.clone(), started.clone());
            async move { (counter(&mut redis, &started).await == 1).then_some(()) }
        },
    )
    .await;

    first.kill().unwrap();
    first.wait().unwrap();
    let mut second = start_worker_process(&server, "worker_process", WORKER_SOCKET);
    let finished = format!("finished:{id}");
    wait_for(Duration::from_secs(10), "the job to be acked", || {
        let client = client.clone();
        let id = id.clone();
        async move { (client.get(&id).await.unwrap().state == State::Unknown).then_some(()) }
    })
    .await;
    second.kill().unwrap();
    second.wait().unwrap();
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());

    assert_eq!(
        counter(&mut redis, &started).await,
        2,
        "delivered twice: at least once"
    );
    assert_eq!(
        counter(&mut redis, &finished).await,
        1,
        "finished and acked once"
    );
    assert_eq!(
        left(&mut redis, "order.close").await,
        (0, 0, 0),
        "nothing left to deliver it again"
    );
    assert!(
        read(&logs.access).contains(&format!(
            "Job is delivered again (its time to run passed), Topic: order.close, IDs: [{id}]"
        )),
        "{}",
        read(&logs.access)
    );
}

/// Set (to a redis socket) when this test binary runs as a batch worker (`batch_worker_process`).
const BATCH_WORKER_SOCKET: &str = "DELAYER_TEST_BATCH_WORKER_SOCKET";
/// The batch worker's slots: it holds as many jobs again reserved ahead of them (its prefetch).
const BATCH_SLOTS: usize = 4;

/// Not a test of its own: the body of the worker process that `a_worker_killed_mid_batch...`
/// starts and kills. Jobs `q-*` end at once (so the worker reserves ahead of its slots); `s-*`
/// never end on their first attempt. Each start is counted in Redis.
#[tokio::test]
async fn batch_worker_process() {
    let Some((client, counters)) = worker_connections(BATCH_WORKER_SOCKET).await else {
        return;
    };
    // A 2 s ttr: the jobs held ahead of the held-up slots are given back after 3/4 s, long after
    // the test has killed the worker.
    Worker::new(client)
        .ttr(Duration::from_secs(2))
        .concurrency(BATCH_SLOTS)
        .prefetch(BATCH_SLOTS)
        .handle("batch", move |job| {
            let mut redis = counters.clone();
            async move {
                let _: () = redis.incr(format!("started:{}", job.id), 1).await.unwrap();
                if job.id.as_bytes().starts_with(b"s-") {
                    std::future::pending::<()>().await;
                }
                Ok::<(), String>(())
            }
        })
        .run(std::future::pending())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_worker_killed_mid_batch_gets_each_of_its_jobs_delivered_again_once_after_ttr() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (config, logs) = server.daemon_config("daemon", "timer_interval = 100");
    let mut daemon = Daemon::start(&config);
    let client = Client::connect(server.info()).await.unwrap();
    let quick: Vec<String> = (0..20).map(|index| format!("q-{index:02}")).collect();
    let slow: Vec<String> = (0..20).map(|index| format!("s-{index:02}")).collect();
    for id in quick.iter().chain(&slow) {
        client.push("batch", "b").id(id.as_str()).await.unwrap();
    }
    let mut worker = start_worker_process(&server, "batch_worker_process", BATCH_WORKER_SOCKET);
    // Mid-batch: every quick job acked, a slow one in each slot, as many reserved ahead.
    let held = wait_for(
        Duration::from_secs(10),
        "the worker to hold a batch",
        || {
            let (mut redis, client, quick) = (redis.clone(), client.clone(), quick.clone());
            async move {
                for id in &quick {
                    if client.get(id).await.unwrap().state != State::Unknown {
                        return None;
                    }
                }
                let held: Vec<(String, f64)> =
                    redis.zrange_withscores(RESERVED, 0, -1).await.unwrap();
                (held.len() == 2 * BATCH_SLOTS).then_some(held)
            }
        },
    )
    .await;
    worker.kill().unwrap();
    worker.wait().unwrap();
    let killed_at = unix_now();
    let mut started = 0;
    for (id, _) in &held {
        started += counter(&mut redis, &format!("started:{id}")).await;
    }
    assert_eq!(started, BATCH_SLOTS as u64, "one running in each slot");

    // The rest of the jobs, by a worker in this process: each handled once, noting when.
    let handled = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorded = handled.clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let second = tokio::spawn(
        Worker::new(client.clone())
            .handle("batch", move |job| {
                recorded
                    .lock()
                    .unwrap()
                    .push((job.id.to_string(), job.attempts, unix_now()));
                async { Ok::<(), String>(()) }
            })
            .run(async {
                let _ = stopped.await;
            }),
    );
    wait_for(Duration::from_secs(20), "every job to be done", || {
        let mut redis = redis.clone();
        async move { (left(&mut redis, "batch").await == (0, 0, 0)).then_some(()) }
    })
    .await;
    stop.send(()).unwrap();
    second.await.unwrap().unwrap();
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());

    let handled = handled.lock().unwrap().clone();
    let mut ids: Vec<&str> = handled.iter().map(|(id, ..)| id.as_str()).collect();
    ids.sort();
    let mut expected: Vec<&str> = slow.iter().map(String::as_str).collect();
    expected.sort();
    assert_eq!(ids, expected, "each slow job once, no quick one again");
    let access = read(&logs.access);
    for (id, deadline) in &held {
        let (_, attempts, at) = handled.iter().find(|(handled, ..)| handled == id).unwrap();
        assert_eq!(*attempts, 2, "{id}: its second reservation");
        // (The deadline is by Redis's clock, the start by this host's: the same one here.)
        assert!(
            *at >= from_deadline_score(*deadline) && *at >= killed_at,
            "{id} delivered again before its time to run passed"
        );
    }
    // The daemon's word: each delivered again once, none other.
    let mut again: Vec<&str> = access
        .lines()
        .filter_map(|line| {
            line.split_once("Job is delivered again")?
                .1
                .split_once("IDs: [")?
                .1
                .split_once(']')
        })
        .flat_map(|(ids, _)| ids.split(','))
        .collect();
    again.sort();
    let mut held_ids: Vec<&str> = held.iter().map(|(id, _)| id.as_str()).collect();
    held_ids.sort();
    assert_eq!(again, held_ids, "{access}");
    for (id, attempts, _) in &handled {
        if !held.iter().any(|(held, _)| held == id) {
            assert_eq!(*attempts, 1, "{id} was never reserved before");
        }
    }
}

/// Writes `count` jobs reserved `attempts` times, whose reservation lapsed ten seconds ago.
async fn lapsed_reservations(
    redis: &mut MultiplexedConnection,
    count: usize,
    attempts: u32,
) -> Vec<String> {
    reservations(redis, count, attempts, unix_now() - 10.0).await
}

/// Writes `count` jobs reserved `attempts` times until `deadline` (unix seconds).
async fn reservations(
    redis: &mut MultiplexedConnection,
    count: usize,
    attempts: u32,
    deadline: f64,
) -> Vec<String> {
    let ids: Vec<String> = (0..count).map(|index| format!("r-{index:05}")).collect();
    for chunk in ids.chunks(5000) {
        let mut pipe = delayer_client::redis::pipe();
        for id in chunk {
            pipe.hset_multiple(
                job_bucket(id),
                &[
                    (field::TOPIC, "t"),
                    (field::BODY, "b"),
                    (field::ATTEMPTS, &attempts.to_string()),
                ],
            )
            .ignore()
            .zadd(RESERVED, id, deadline_score(deadline))
            .ignore();
        }
        pipe.query_async::<()>(redis).await.unwrap();
    }
    ids
}

#[tokio::test]
async fn three_daemons_deliver_10k_lapsed_reservations_again_exactly_once() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemons, logs) = three_daemons(&server);
    // Lapsing half a second from now: within timer_interval every daemon has seen the deadline,
    // and all three wake for it at once rather than the first one up taking them all.
    let ids = reservations(&mut redis, 10_000, 1, unix_now() + 0.5).await;

    // Each daemon moves what it delivered again: 10k jobs on the ready list.
    each_delivered_again_once(&mut redis, daemons, &logs, &ids).await;
}

/// Three daemons on `server`, moving small batches often, each up.
fn three_daemons(server: &RedisServer) -> (Vec<Daemon>, Vec<support::Logs>) {
    let (daemons, logs) = support::start_daemons(
        server,
        &["one", "two", "three"],
        "batch_size = 100\ntimer_interval = 50",
    );
    for logs in &logs {
        logs.wait_for_line("Service started successfully");
    }
    (daemons, logs)
}

/// Once `ids` (topic "t") are all on the ready list: stops the daemons, and asserts that each id
/// is there once, that no reservation is left, and that at least two daemons did the work.
async fn each_delivered_again_once(
    redis: &mut MultiplexedConnection,
    mut daemons: Vec<Daemon>,
    logs: &[support::Logs],
    ids: &[String],
) {
    support::wait_for_ready(redis, "t", ids.len()).await;
    for daemon in &mut daemons {
        daemon.signal("TERM");
        assert!(daemon.wait(Duration::from_secs(5)).success());
    }
    let counts = support::delivered(redis, &["t"]).await;
    assert!(counts.values().all(|count| *count == 1), "no duplicates");
    assert_eq!(counts.len(), ids.len(), "every one");
    let left: (usize, usize, usize) = delayer_client::redis::pipe()
        .zcard(JOB_POOL)
        .zcard(RESERVED)
        .hlen(HOLDERS)
        .query_async(redis)
        .await
        .unwrap();
    assert_eq!(left, (0, 0, 0), "nothing in the pool, reserved or held");
    let working = logs
        .iter()
        .filter(|logs| read(&logs.access).contains("Job is delivered again"))
        .count();
    assert!(
        working >= 2,
        "only {working} daemon delivered jobs again: the test proves little"
    );
}

/// Reservations of the kind the client makes now (each reserve call's jobs in one ZADD and one
/// HSET of the holders hash, nothing written to their buckets): three daemons deliver them again
/// exactly once each, each attempt counted in its bucket, no holder left.
#[tokio::test]
async fn three_daemons_deliver_10k_lapsed_reservations_of_the_holders_kind_again_exactly_once() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let ids: Vec<String> = (0..10_000).map(|index| format!("h-{index:05}")).collect();
    let due = unix_now() - 1.0;
    support::add_jobs(&mut redis, ids.iter().map(|id| (id.clone(), "t", due))).await;
    support::move_until_empty(&mut redis).await;
    let (daemons, logs) = three_daemons(&server);
    // Every daemon is up before they lapse (a few seconds from now), and all three wake for them.
    let client = Client::connect(server.info()).await.unwrap();
    let mut reserved = 0;
    while reserved < ids.len() {
        let jobs = client
            .reserve_many(&["t"], Duration::from_secs(3), 100, Duration::ZERO)
            .await
            .unwrap();
        assert!(!jobs.is_empty(), "{reserved} reserved, then none");
        assert!(jobs.iter().all(|job| job.attempts == 1));
        reserved += jobs.len();
    }
    let holders: usize = redis.hlen(HOLDERS).await.unwrap();
    assert_eq!(holders, ids.len(), "reservations of the new kind");

    each_delivered_again_once(&mut redis, daemons, &logs, &ids).await;
    let mut attempts = delayer_client::redis::pipe();
    for id in &ids {
        attempts.hget(job_bucket(id), field::ATTEMPTS);
    }
    let attempts: Vec<Option<u32>> = attempts.query_async(&mut redis).await.unwrap();
    assert!(
        attempts.iter().all(|attempts| *attempts == Some(1)),
        "each attempt counted once"
    );
}

#[tokio::test]
async fn a_job_whose_last_attempt_lapses_goes_to_its_dead_list() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let ids = lapsed_reservations(&mut redis, 2, 3).await;
    // The second topic's dead list key is broken: its job is delivered again rather than lost.
    let _: () = redis
        .hset(job_bucket(&ids[1]), field::TOPIC, "broken")
        .await
        .unwrap();
    let _: () = redis.set(dead_queue("broken"), "x").await.unwrap();
    let (config, logs) = server.daemon_config("daemon", "max_attempts = 3");
    let mut daemon = Daemon::start(&config);

    logs.wait_for_line("Job is dead after 3 attempts, Topic: t, IDs: [r-00000]");
    logs.wait_for_line("delivered again instead, Topic: broken, IDs: [r-00001]");
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());

    let dead: Vec<String> = redis.lrange(dead_queue("t"), 0, -1).await.unwrap();
    assert_eq!(dead, ["r-00000"]);
    let client = Client::connect(server.info()).await.unwrap();
    assert_eq!(client.get("r-00000").await.unwrap().state, State::Dead);
    let ready: Vec<String> = redis.lrange(ready_queue("broken"), 0, -1).await.unwrap();
    assert_eq!(ready, ["r-00001"], "never lost");
}

#[tokio::test]
async fn a_count_of_attempts_that_is_no_whole_number_is_none_for_every_script() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    // Reserve counts "inf" as none: the lapse must not count it as used up.
    let ids = lapsed_reservations(&mut redis, 2, 1).await;
    for (id, attempts) in ids.iter().zip(["inf", "nan"]) {
        let _: () = redis
            .hset(job_bucket(id), field::ATTEMPTS, attempts)
            .await
            .unwrap();
    }
    let client = Client::connect(server.info()).await.unwrap();
    for id in &ids {
        assert_eq!(
            client.get(id).await.unwrap().attempts,
            0,
            "get counts it as the scripts do"
        );
    }
    let (config, _logs) = server.daemon_config("daemon", "max_attempts = 3");
    let mut daemon = Daemon::start(&config);

    let mut ready = support::wait_for_ready(&redis, "t", 2).await;
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());
    ready.sort();
    assert_eq!(ready, ids, "delivered again, not dead");
    let dead: usize = redis.llen(dead_queue("t")).await.unwrap();
    assert_eq!(dead, 0);
    let reserved = client
        .reserve(&["t"], Duration::from_secs(30), Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reserved.attempts, 1, "counted afresh");
}

#[tokio::test]
async fn jobs_of_the_rust_client_and_of_the_legacy_clients_pass_through_the_daemon_both_ways() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (config, _logs) = server.daemon_config("daemon", "");
    let mut daemon = Daemon::start(&config);
    let client = Client::connect(server.info()).await.unwrap();

    let ours = client
        .push("mail", "from rust")
        .delay(Duration::from_millis(200))
        .await
        .unwrap();
    let popped = legacy_client::bpop(&mut redis, "mail", 5).await.unwrap();
    assert_eq!(
        popped,
        Some(Message {
            id: ours.to_string(),
            topic: "mail".into(),
            body: "from rust".into()
        })
    );
    let theirs = Message {
        id: "from-php".into(),
        topic: "mail".into(),
        body: "from php".into(),
    };
    legacy_client::push(&mut redis, &theirs, 1).await.unwrap();
    let reserved = client
        .reserve(&["mail"], Duration::from_secs(30), Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the legacy job, reserved");
    assert_eq!(
        (reserved.id.to_str(), reserved.body_text().unwrap()),
        (Some("from-php"), "from php")
    );
    assert_eq!(
        client.ack(&reserved).await.unwrap(),
        delayer_client::Acked::Done
    );
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());
}

/// Runs `delayer -c config <args>`; returns (success, stdout, stderr).
fn cli(config: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let output = delayer_command()
        .arg("-c")
        .arg(config)
        .args(args)
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_cli_pushes_gets_pops_removes_counts_and_requeues() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (config, _logs) = server.daemon_config("daemon", "timer_interval = 100");

    let (ok, id, _) = cli(
        &config,
        &[
            "push",
            "order.close",
            "{\"order\":42}",
            "--delay",
            "1h",
            "--id",
            "o42",
        ],
    );
    assert!(ok);
    assert_eq!(id.trim(), "o42");
    let (ok, got, _) = cli(&config, &["get", "o42"]);
    assert!(ok);
    let got: serde_json::Value = serde_json::from_str(&got).unwrap();
    assert_eq!(got["state"], "waiting");
    assert_eq!(got["body"], "{\"order\":42}");
    assert!(got["due"].as_str().unwrap().ends_with('Z'), "{got}");
    let (ok, removed, _) = cli(&config, &["remove", "o42"]);
    assert!(ok && removed.trim() == "removed o42", "{removed}");
    let (ok, _, error) = cli(&config, &["remove", "o42"]);
    assert!(!ok);
    assert!(error.starts_with("ERROR: no job \"o42\""), "{error}");

    let mut daemon = Daemon::start(&config);
    let (ok, id, _) = cli(&config, &["push", "mail", "hello"]);
    assert!(ok);
    let (ok, popped, _) = cli(&config, &["pop", "mail", "--wait", "5s"]);
    assert!(ok);
    let popped: serde_json::Value = serde_json::from_str(&popped).unwrap();
    assert_eq!(
        (popped["id"].as_str(), popped["body"].as_str()),
        (Some(id.trim()), Some("hello"))
    );
    let (ok, nothing, _) = cli(&config, &["pop", "mail"]);
    assert!(ok);
    assert_eq!(nothing.trim(), "null");

    // A dead job, counted, listed and requeued.
    lapsed_reservations(&mut redis, 1, 25).await;
    wait_for(Duration::from_secs(10), "the job to die", || {
        let mut redis = redis.clone();
        async move { (redis.llen::<_, usize>(dead_queue("t")).await.unwrap() == 1).then_some(()) }
    })
    .await;
    let (ok, stats, _) = cli(&config, &["stats", "--json"]);
    assert!(ok);
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    let t = stats["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|topic| topic["topic"] == "t")
        .unwrap();
    assert_eq!(
        (t["dead"].as_u64(), t["ready"].as_u64()),
        (Some(1), Some(0)),
        "{stats}"
    );
    let (ok, table, _) = cli(&config, &["stats"]);
    assert!(
        ok && table.starts_with("jobs waiting: 0 (0 due now)"),
        "{table}"
    );
    let (ok, dead, _) = cli(&config, &["dead", "t"]);
    assert!(ok && dead.contains("\"state\":\"dead\""), "{dead}");
    let (ok, requeued, _) = cli(&config, &["dead", "t", "--requeue"]);
    assert!(
        ok && requeued.contains("requeued 1 dead job of topic t"),
        "{requeued}"
    );
    support::wait_for_ready(&redis, "t", 1).await;

    // Bad input: named, exit status 1 (clap's own usage errors exit 2).
    let (ok, _, error) = cli(&config, &["push", "t", "b", "--at", "2020-01-01T00:00:00Z"]);
    assert!(
        !ok && error.contains("--at 2020-01-01T00:00:00.000Z is in the past"),
        "{error}"
    );
    let (ok, _, error) = cli(&config, &["push", "", "b"]);
    assert!(!ok && error.contains("the topic is empty"), "{error}");
    let (ok, _, error) = cli(&config, &["push", "t", "b", "--delay", "5x"]);
    assert!(!ok && error.contains("unknown unit"), "{error}");
    let (ok, _, error) = cli(&config, &["-d", "stats"]);
    assert!(!ok && error.contains("go with serving"), "{error}");
    let (ok, _, error) = cli(&config, &["stats", "-d"]);
    assert!(!ok && error.contains("unexpected argument '-d'"), "{error}");
    let (ok, checked, error) = cli(&config, &["serve", "--check-config"]);
    assert!(ok && checked.contains("is OK"), "{checked}{error}");
    let (_, help, _) = cli(&config, &["push", "--help"]);
    assert!(help.contains("delayer push order.close"), "{help}");
    assert!(!help.contains("--check-config"), "{help}");
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());
}

#[tokio::test]
async fn the_cli_says_what_it_did_not_find_and_that_more_are_left() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let config = server.write_file("cli.conf", &server.config_text(""));
    for id in ["d1", "d2", "d3"] {
        let _: () = redis
            .hset_multiple(
                job_bucket(id),
                &[
                    (field::TOPIC, "t"),
                    (field::BODY, "b"),
                    (field::DIED_AT, "1"),
                ],
            )
            .await
            .unwrap();
        let _: () = redis.lpush(dead_queue("t"), id).await.unwrap();
    }

    let (ok, out, error) = cli(&config, &["get", "nope"]);
    assert!(
        !ok && out.is_empty(),
        "an unknown job is an error, as for remove: {out}"
    );
    assert!(error.starts_with("ERROR: no job \"nope\""), "{error}");

    let (ok, dead, said) = cli(&config, &["dead", "t", "--limit", "2"]);
    assert!(ok, "{said}");
    let listed: Vec<&str> = dead.lines().collect();
    assert_eq!(listed.len(), 2, "{dead}");
    assert!(listed[0].contains("\"id\":\"d1\""), "oldest first: {dead}");
    assert!(said.contains("there are more"), "{said}");
    let (ok, _, said) = cli(&config, &["dead", "t", "--limit", "3"]);
    assert!(ok && said.is_empty(), "none left out: {said}");

    let (ok, requeued, _) = cli(&config, &["dead", "t", "--requeue"]);
    assert!(
        ok && requeued.contains("requeued 3 dead jobs of topic t"),
        "{requeued}"
    );
    let pooled: usize = redis.zcard(JOB_POOL).await.unwrap();
    assert_eq!(pooled, 3, "requeued into the pool");

    let (_, help, _) = cli(&config, &["remove", "--help"]);
    assert!(help.contains("wherever it is"), "{help}");
    assert!(!help.contains("not fallen due yet"), "{help}");
}

#[tokio::test]
async fn stats_name_a_list_of_the_wrong_type_and_count_the_other_topics() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (config, _logs) = server.daemon_config("daemon", "timer_interval = 100");
    for topic in ["good", "bad.ready", "bad.dead"] {
        let (ok, _, error) = cli(&config, &["push", topic, "body"]);
        assert!(ok, "{error}");
    }
    let _: () = redis.lpush(ready_queue("good"), "some-id").await.unwrap();
    let _: () = redis.set(ready_queue("bad.ready"), "x").await.unwrap();
    let _: () = redis
        .lpush(dead_queue("bad.ready"), &["d1", "d2"])
        .await
        .unwrap();
    let _: () = redis.hset(dead_queue("bad.dead"), "f", "v").await.unwrap();
    let _: () = redis
        .lpush(ready_queue("bad.dead"), "other-id")
        .await
        .unwrap();

    let (ok, stats, error) = cli(&config, &["stats", "--json"]);
    assert!(ok, "{error}");
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(stats["waiting"], 3, "{stats}");
    let row = |name: &str| {
        stats["topics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|topic| topic["topic"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(
        (row("good")["ready"].as_u64(), &row("good")["problem"]),
        (Some(1), &serde_json::Value::Null)
    );
    assert_eq!(
        row("bad.ready")["problem"],
        "delayer:ready_queue:bad.ready holds a string, not a list"
    );
    assert_eq!(row("bad.ready")["dead"], 2, "the other list still counted");
    assert_eq!(
        row("bad.dead")["problem"],
        "delayer:dead_queue:bad.dead holds a hash, not a list"
    );
    assert_eq!(row("bad.dead")["ready"], 1, "the other list still counted");
    let (ok, table, _) = cli(&config, &["stats"]);
    assert!(
        ok && table.contains("  ! delayer:ready_queue:bad.ready holds a string, not a list\n"),
        "{table}"
    );
}

#[tokio::test]
async fn the_cli_pushes_a_body_from_a_file_or_stdin_within_the_configured_limit() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (config, _logs) = server.daemon_config("daemon", "max_body_bytes = 10");
    let bytes = b"\xff\xfe\x00ok".to_vec();
    let file = server.write_file("body.bin", "");
    std::fs::write(&file, &bytes).unwrap();
    let file = file.to_str().unwrap();

    let (ok, _, error) = cli(&config, &["push", "t", "--body-file", file, "--id", "f"]);
    assert!(ok, "{error}");
    let mut push = delayer_command()
        .args(["-c", config.to_str().unwrap()])
        .args(["push", "t", "--body-file", "-", "--id", "s"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    push.stdin.take().unwrap().write_all(&bytes).unwrap();
    assert!(push.wait().unwrap().success());
    for id in ["f", "s"] {
        let stored: Vec<u8> = redis.hget(job_bucket(id), field::BODY).await.unwrap();
        assert_eq!(stored, bytes, "job {id}");
        let (ok, got, _) = cli(&config, &["get", id]);
        let got: serde_json::Value = serde_json::from_str(&got).unwrap();
        let encoded = got["body_base64"].as_str().unwrap();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .unwrap();
        assert!(ok && decoded == bytes, "{got}");
    }

    // Over `[delayer] max_body_bytes`, given either way: named, and nothing written.
    let (ok, _, error) = cli(&config, &["push", "t", "eleven byte"]);
    assert!(
        !ok && error.contains("over the limit of 10 bytes ([delayer] max_body_bytes)"),
        "{error}"
    );
    std::fs::write(file, b"eleven byte").unwrap();
    let (ok, _, error) = cli(&config, &["push", "t", "--body-file", file]);
    assert!(
        !ok && error.contains("is over the limit of 10 bytes ([delayer] max_body_bytes)"),
        "{error}"
    );
    let waiting: usize = redis.zcard(JOB_POOL).await.unwrap();
    assert_eq!(waiting, 2, "only the two bodies within the limit");
    let (ok, _, error) = cli(&config, &["push", "t"]);
    assert!(!ok && error.contains("<BODY>"), "{error}");
}

#[tokio::test]
async fn cli_errors_say_each_cause_once_and_nothing_of_the_scripts_insides() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (config, _logs) = server.daemon_config("daemon", "");
    let _: () = redis.set(job_bucket("bad"), "x").await.unwrap();
    let (ok, _, error) = cli(&config, &["push", "t", "b", "--id", "bad"]);
    assert!(!ok, "{error}");
    assert_eq!(
        error.trim_end(),
        "ERROR: delayer:job_bucket:bad holds the wrong type of value for delayer \
         (delayer:job_bucket:bad holds a string, not a hash)"
    );

    // An id that would recolour the terminal prints escaped; one that looks like Redis's note
    // of a place in a script keeps its words.
    for id in ["e\u{1b}[31mRED", "a script: b"] {
        let _: () = redis.set(job_bucket(id), "x").await.unwrap();
        let (ok, _, error) = cli(&config, &["push", "t", "b", "--id", id]);
        let key = String::from_utf8(job_bucket(id))
            .unwrap()
            .replace('\u{1b}', "\\u{1b}");
        assert!(!ok);
        assert!(
            error.contains(&format!("({key} holds a string, not a hash)")),
            "{error}"
        );
    }

    let port = support::free_port();
    let text = format!("[redis]\nhost = 127.0.0.1\nport = {port}\n");
    let unreachable = server.write_file("unreachable.conf", &text);
    let (ok, _, error) = cli(&unreachable, &["push", "t", "b"]);
    assert!(!ok);
    assert_eq!(
        error.trim_end(),
        format!(
            "ERROR: cannot use Redis at 127.0.0.1:{port}: Redis: Connection refused (os error 111)"
        )
    );
}

#[tokio::test]
async fn the_cli_pushes_a_job_per_line_of_standard_input_or_none_when_one_is_bad() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (config, _logs) = server.daemon_config("stdin", "");
    let push = |input: &str| {
        let mut child = delayer_command()
            .arg("-c")
            .arg(&config)
            .args(["push", "mail", "--stdin", "--delay", "1h"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        (
            output.status.success(),
            String::from_utf8(output.stdout).unwrap(),
            String::from_utf8(output.stderr).unwrap(),
        )
    };

    let (ok, _, error) = push("one\n\nthree\n");
    assert!(!ok);
    assert!(error.contains("line 2 of standard input"), "{error}");
    assert!(error.contains("the body is empty"), "{error}");
    let pooled: usize = redis.zcard(JOB_POOL).await.unwrap();
    assert_eq!(pooled, 0, "nothing written");

    let bodies: Vec<String> = (0..1500).map(|index| format!("reminder {index}")).collect();
    let (ok, ids, error) = push(&(bodies.join("\r\n") + "\r\n"));
    assert!(ok, "{error}");
    let ids: Vec<&str> = ids.lines().collect();
    assert_eq!(ids.len(), 1500);
    for (id, body) in [(ids[0], &bodies[0]), (ids[1499], &bodies[1499])] {
        let stored: Option<String> = redis.hget(job_bucket(id), "body").await.unwrap();
        assert_eq!(stored.as_ref(), Some(body), "the line without its end");
    }
    let pooled: usize = redis.zcard(JOB_POOL).await.unwrap();
    assert_eq!(pooled, 1500);
}
