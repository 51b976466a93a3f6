//! Who is consuming, as the console shows it (`/consumers`, the holder of each reservation on a
//! topic's page, and how many are live and gone on the overview), beside a real daemon and redis-server: Workers in processes of their own,
//! listed with their pids and marked gone once killed (kill -9), and callers of the HTTP reserve
//! that name themselves. In Chromium, as the console's other browser tests.
//!
//! With `DELAYER_SCREENSHOTS=DIR` set, the browser test also saves the page as
//! `console-consumers.png` in DIR (the picture in docs/ comes from there).

use crate::console::{cells_after, chromium, chromium_with};
use crate::support;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use delayer_client::consumer::{self, LIFETIME};
use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::{Client, Heartbeat, Worker};
use delayer_wire::keys::{CONSUMERS, HOLDERS, consumer as consumer_key, job_bucket, ready_queue};
use support::http_client::{request, serving};
use support::{RedisServer, test_name, wait_for, wait_for_ready};

/// Set (to a redis socket) when this test binary runs as a worker process (see `worker_process`).
const WORKER_SOCKET: &str = "DELAYER_TEST_CONSUMERS_PAGE_SOCKET";
/// The topic that worker process handles.
const WORKER_TOPIC: &str = "DELAYER_TEST_CONSUMERS_PAGE_TOPIC";
/// Its slots: it holds as many jobs, each for ever.
const SLOTS: usize = 2;

/// Not a test of its own: the body of the worker processes the browser test starts. Its handlers
/// never end, so that it holds its jobs until it is killed.
#[tokio::test]
async fn worker_process() {
    let (Ok(socket), Ok(topic)) = (std::env::var(WORKER_SOCKET), std::env::var(WORKER_TOPIC))
    else {
        return;
    };
    let client = Client::connect(format!("redis+unix://{}", socket.as_str()).as_str())
        .await
        .unwrap();
    Worker::new(client)
        .concurrency(SLOTS)
        .ttr(Duration::from_secs(120))
        .handle(topic, |_job| async {
            std::future::pending::<()>().await;
            Ok::<(), String>(())
        })
        .run(std::future::pending())
        .await
        .unwrap();
}

/// A worker process of `topic` on `server`.
fn start_worker(server: &RedisServer, topic: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &test_name(module_path!(), "worker_process"),
            "--nocapture",
        ])
        .env(WORKER_SOCKET, server.socket())
        .env(WORKER_TOPIC, topic)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Consumer `id`'s hash as Redis holds it, its values as text.
async fn hash_of(redis: &mut MultiplexedConnection, id: &str) -> HashMap<String, String> {
    redis.hgetall(consumer_key(id)).await.unwrap()
}

/// Waits until the worker process `pid` beat holding `held` jobs; its consumer id.
async fn beating(redis: &MultiplexedConnection, pid: u32, held: usize) -> String {
    wait_for(
        Duration::from_secs(15),
        &format!("worker {pid} to beat holding {held} jobs"),
        || {
            let mut redis = redis.clone();
            async move {
                let ids: Vec<String> = redis.zrange(CONSUMERS, 0, -1).await.unwrap();
                for id in ids {
                    let fields = hash_of(&mut redis, &id).await;
                    let (beat_pid, beat_held) = (fields.get("pid"), fields.get("held"));
                    if beat_pid == Some(&pid.to_string()) && beat_held == Some(&held.to_string()) {
                        return Some(id);
                    }
                }
                None
            }
        },
    )
    .await
}

/// The cells after the first of consumer `id`'s row on the consumers' page `dom`: state, host,
/// pid, topics, concurrency, held, started, last seen.
fn consumer_row(dom: &str, id: &str) -> Vec<String> {
    cells_after(dom, &format!("<td>{id}</td>"))
}

#[tokio::test]
async fn a_worker_is_listed_with_its_pid_named_on_its_jobs_and_gone_within_its_lifetime_after_kill_9()
 {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "consumers-page", "");
    let client = Client::connect(server.info()).await.unwrap();
    for topic in ["order.close", "mail.send"] {
        for index in 0..SLOTS {
            let id = format!("{topic}-{index}");
            client.push(topic, "b").id(id.as_str()).await.unwrap();
        }
        wait_for_ready(&redis, topic, SLOTS).await;
    }
    let mut doomed = start_worker(&server, "order.close");
    let mut kept = start_worker(&server, "mail.send");
    let doomed_id = beating(&redis, doomed.id(), SLOTS).await;
    let kept_id = beating(&redis, kept.id(), SLOTS).await;
    let url = |path: &str| format!("http://{http}{path}");
    let dir = server.dir();

    // Listed live, with what its beat told.
    let page = chromium(dir, &url("/consumers"), None);
    let row = consumer_row(&page, &doomed_id);
    assert_eq!(row[0], "live", "{row:?}");
    assert_eq!(row[1], consumer::this_host(), "{row:?}");
    assert_eq!(row[2], doomed.id().to_string(), "the pid: {row:?}");
    assert!(row[3].contains(">order.close</a>"), "{row:?}");
    assert_eq!(row[4..6], ["2", "2"], "concurrency, held: {row:?}");
    assert_eq!(consumer_row(&page, &kept_id)[0], "live");

    // Each job it holds names it on the topic's page, linked to its row.
    let topic_page = chromium(dir, &url("/topic?name=order.close"), None);
    for index in 0..SLOTS {
        let cells = cells_after(&topic_page, &format!(">order.close-{index}</a></td>"));
        assert!(
            cells[2].contains(&format!(">{doomed_id}</a>")) && cells[2].contains("/consumers#"),
            "{cells:?}"
        );
    }

    // kill -9: no clean stop, so it stays listed, and is marked gone within its lifetime.
    doomed.kill().unwrap();
    doomed.wait().unwrap();
    let killed = Instant::now();
    let gone = format!("<td>{doomed_id}</td><td><b class=\"bad\">gone</b></td>");
    wait_for(
        Duration::from_secs(30),
        "the killed worker marked gone",
        || {
            let marked = request(&http, "GET", "/consumers", &[], b"")
                .body
                .contains(&gone);
            async move { marked.then_some(()) }
        },
    )
    .await;
    let after = killed.elapsed();
    // Within its lifetime (and the polling's slack) of the kill, since it beat last before it.
    assert!(after <= LIFETIME + Duration::from_secs(2), "{after:?}");
    // Its last beat was about a beat before the kill at most (3 s more for a late tick on a busy
    // host): never gone sooner than that allows.
    let soonest = LIFETIME - consumer::BEAT - Duration::from_secs(3);
    assert!(after >= soonest, "{after:?}");
    let page = chromium(dir, &url("/consumers"), None);
    assert_eq!(
        consumer_row(&page, &doomed_id)[0],
        "<b class=\"bad\">gone</b>"
    );
    assert_eq!(consumer_row(&page, &kept_id)[0], "live", "still beating");
    let score: Option<f64> = redis.zscore(CONSUMERS, &doomed_id).await.unwrap();
    assert!(score.is_some(), "kept listed until it ages out");
    // Its jobs are still held in its name until their time to run passes.
    let holders: HashMap<String, String> = redis.hgetall(HOLDERS).await.unwrap();
    assert!(
        holders["order.close-0"].starts_with(&format!("1:{doomed_id}.")),
        "{holders:?}"
    );

    if let Some(shots) = std::env::var_os("DELAYER_SCREENSHOTS") {
        // A caller of the HTTP reserve too, for the picture.
        client.push("report", "b").id("report-1").await.unwrap();
        wait_for_ready(&redis, "report", 1).await;
        let body = br#"{"topic": "report", "consumer": "billing-1", "ttr": 300}"#;
        let reserved = request(&http, "POST", "/delay-queue/api/jobs/reserve", &[], body);
        assert_eq!(reserved.status, 200, "{}", reserved.body);
        let shot = Path::new(&shots).join("console-consumers.png");
        let wide = ["--window-size=1400,420"];
        chromium_with(dir, &url("/consumers"), Some(&shot), &wide);
    }
    kept.kill().unwrap();
    kept.wait().unwrap();
    daemon.stop();
}

#[tokio::test]
async fn a_reserve_over_http_that_names_its_consumer_registers_it_and_names_it_as_the_holder() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "http-consumer", "");
    let client = Client::connect(server.info()).await.unwrap();
    for id in ["a", "b", "c"] {
        client.push("t", "b").id(id).await.unwrap();
    }
    wait_for_ready(&redis, "t", 3).await;
    let reserve = |body: &str| {
        request(
            &http,
            "POST",
            "/delay-queue/api/jobs/reserve",
            &[],
            body.as_bytes(),
        )
    };

    // A name that is not one: refused, and nothing reserved.
    let refused = reserve(r#"{"topic": "t", "consumer": "a:b"}"#);
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(
        refused.json()["message"]
            .as_str()
            .unwrap()
            .contains("consumer")
    );
    assert_eq!(redis.llen::<_, usize>(ready_queue("t")).await.unwrap(), 3);

    let named = reserve(r#"{"topic": "t", "consumer": "billing-1", "wait": 2}"#).json();
    let token = named["data"]["token"].as_str().unwrap().to_string();
    assert!(token.starts_with("http:billing-1."), "{named}");
    let held = named["data"]["id"].as_str().unwrap().to_string();
    let holder: String = redis.hget(HOLDERS, &held).await.unwrap();
    assert_eq!(holder, format!("1:{token}"));
    let unnamed = reserve(r#"{"topic": "t"}"#).json();
    let other = unnamed["data"]["id"].as_str().unwrap().to_string();
    assert!(!unnamed["data"]["token"].as_str().unwrap().contains('.'));

    // Its beat, in a task of its own: the address it called from, alive for its wait and more.
    let fields = wait_for(Duration::from_secs(5), "the HTTP consumer's beat", || {
        let mut redis = redis.clone();
        async move {
            let fields = hash_of(&mut redis, "http:billing-1").await;
            (!fields.is_empty()).then_some(fields)
        }
    })
    .await;
    assert_eq!(fields["host"], "127.0.0.1");
    assert_eq!(fields["topics"], "1");
    assert_eq!(fields["topic:1"], "t");
    assert_eq!(
        fields["lifetime"],
        (LIFETIME.as_millis() + 2000).to_string()
    );
    assert!(!fields.contains_key("pid") && !fields.contains_key("held"));
    let ids: Vec<String> = redis.zrange(CONSUMERS, 0, -1).await.unwrap();
    assert_eq!(ids, ["http:billing-1"], "the unnamed caller is not listed");

    let page = request(&http, "GET", "/consumers", &[], b"").body;
    let row = consumer_row(&page, "http:billing-1");
    assert_eq!(row[..3], ["live", "127.0.0.1", "—"], "{row:?}");
    let topic_page = request(&http, "GET", "/topic?name=t", &[], b"").body;
    let named_cells = cells_after(&topic_page, &format!(">{held}</a></td>"));
    assert!(
        named_cells[2].contains(">http:billing-1</a>"),
        "{named_cells:?}"
    );
    let unnamed_cells = cells_after(&topic_page, &format!(">{other}</a></td>"));
    assert_eq!(unnamed_cells[2], "—", "a reservation without a consumer");

    // The ack takes the new token as any other.
    let ack = format!(r#"{{"job_id": "{held}", "attempt": 1, "token": "{token}"}}"#);
    let acked = request(
        &http,
        "POST",
        "/delay-queue/api/jobs/ack",
        &[],
        ack.as_bytes(),
    )
    .json();
    assert_eq!(acked["data"]["acked"], "done", "{acked}");
    assert!(!redis.exists::<_, bool>(job_bucket(&held)).await.unwrap());
    assert!(!redis.hexists::<_, _, bool>(HOLDERS, &held).await.unwrap());
    daemon.stop();
}

#[tokio::test]
async fn whatever_a_consumers_beat_holds_the_page_shows_it_escaped() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "hostile-consumer", "");
    let (seconds, _): (u64, u64) = delayer_client::redis::cmd("TIME")
        .query_async(&mut redis)
        .await
        .unwrap();
    let id = "<img src=x onerror=alert(1)>";
    let _: () = redis
        .zadd(CONSUMERS, id, (seconds * 1000) as f64)
        .await
        .unwrap();
    let fields = [
        ("host", "<script>alert(2)</script>"),
        ("pid", "x"),
        ("topics", "1"),
        ("topic:1", "<b>t</b>"),
    ];
    let _: () = redis
        .hset_multiple(consumer_key(id), &fields)
        .await
        .unwrap();
    let page = chromium(server.dir(), &format!("http://{http}/consumers"), None);
    assert!(
        !page.contains("<img") && !page.contains("<script>alert"),
        "{page}"
    );
    let row = consumer_row(&page, "&lt;img src=x onerror=alert(1)&gt;");
    assert_eq!(row[1], "&lt;script&gt;alert(2)&lt;/script&gt;", "{row:?}");
    assert_eq!(row[2], "—", "a pid that is not one");
    assert!(row[3].contains(">&lt;b&gt;t&lt;/b&gt;</a>"), "{row:?}");
    daemon.stop();
}

#[tokio::test]
async fn the_overview_counts_live_and_gone_consumers_and_links_to_them() {
    let server = RedisServer::start();
    let (daemon, _logs, http) = serving(&server, "overview-consumers", "");
    let client = Client::connect(server.info()).await.unwrap();
    let beat = |id: &str, lifetime: Duration| Heartbeat {
        id: id.to_string(),
        host: "h".to_string(),
        pid: None,
        topics: Vec::new(),
        concurrency: None,
        held: None,
        lifetime,
    };
    let hour = Duration::from_secs(3600);
    client.beat(&beat("live-1", hour)).await.unwrap();
    client.beat(&beat("live-2", hour)).await.unwrap();
    // Gone a millisecond after its only beat.
    client
        .beat(&beat("stopped", Duration::from_millis(1)))
        .await
        .unwrap();

    let start = "<p id=\"consumers\">";
    let line = wait_for(Duration::from_secs(5), "the overview to count them", || {
        let page = request(&http, "GET", "/", &[], b"").body;
        let line = page
            .split(start)
            .nth(1)
            .map(|rest| rest[..rest.find("</p>").unwrap()].to_string());
        async move { line.filter(|line| line.contains("2 live")) }
    })
    .await;
    assert_eq!(
        line,
        "<a href=\"/consumers\">Consumers</a>: 2 live, <b class=\"bad\">1 gone</b>."
    );
    daemon.stop();
}
