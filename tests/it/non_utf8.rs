//! Ids and topics that are not UTF-8, as the PHP and Go clients can write them (their strings are
//! bytes): moved by the daemon and logged escaped, taken over HTTP and from the command line
//! without a byte lost, each named back by its bytes in base64, and listed escaped by /metrics
//! and the console.

use crate::support;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use delayer_client::JobId;
use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_wire::keys::{JOB_POOL, RESERVED, TOPICS, job_bucket, ready_queue};
use serde_json::{Value, json};
use support::http_client::{Answer, post, request, serving};
use support::{
    DaemonSetup, RedisServer, delayer_succeeds, legacy_client, wait_for, wait_for_ready,
};

const JOBS: &str = "/delay-queue/api/jobs";
/// An id that is not UTF-8, pushed on topic `mail`.
const ID: &[u8] = b"job-\xff\xfe";
/// A topic that is not UTF-8, with the job `job-2` on it (whose body is not UTF-8 either).
const TOPIC: &[u8] = b"t\xff";

fn base64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Pushes both jobs the legacy way, due now.
async fn push_both(redis: &mut MultiplexedConnection) {
    legacy_client::push_bytes(redis, [ID, b"mail", b"body 1"], 0)
        .await
        .unwrap();
    legacy_client::push_bytes(redis, [b"job-2", TOPIC, b"body \xfe"], 0)
        .await
        .unwrap();
}

/// A POST to the job API that must succeed; its `data`.
fn call(http: &str, path: &str, request: Value) -> Value {
    let answer: Answer = post(http, &format!("{JOBS}/{path}"), &request);
    assert_eq!(answer.status, 200, "{path} {request}: {}", answer.body);
    answer.json()["data"].clone()
}

/// Whether job `id`'s data is still in Redis.
async fn has_data(redis: &mut MultiplexedConnection, id: &[u8]) -> bool {
    redis.exists(job_bucket(id)).await.unwrap()
}

/// Waits until job `id` has left Redis: its data, and the pool, reservations and ready list of
/// `topic`.
async fn wait_until_gone(redis: &MultiplexedConnection, id: &'static [u8], topic: &'static [u8]) {
    wait_for(
        std::time::Duration::from_secs(5),
        "the job to leave Redis",
        || {
            let mut redis = redis.clone();
            async move {
                let (data, pooled, reserved, ready): (bool, Option<f64>, Option<f64>, usize) =
                    delayer_client::redis::pipe()
                        .exists(job_bucket(id))
                        .zscore(JOB_POOL, id)
                        .zscore(RESERVED, id)
                        .llen(ready_queue(topic))
                        .query_async(&mut redis)
                        .await
                        .unwrap();
                (!data && pooled.is_none() && reserved.is_none() && ready == 0).then_some(())
            }
        },
    )
    .await;
}

#[tokio::test]
async fn moved_logged_escaped_and_popped_over_http_whole() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, logs, http) = serving(&server, "api", "");
    push_both(&mut redis).await;

    assert_eq!(wait_for_ready(&redis, "mail", 1).await, [JobId::from(ID)]);
    assert_eq!(wait_for_ready(&redis, TOPIC, 1).await, ["job-2"]);
    logs.wait_for_line(r#"Job is ready, Topic: mail, IDs: ["job-\xff\xfe"]"#);
    logs.wait_for_line(r#"Job is ready, Topic: "t\xff", IDs: [job-2]"#);
    assert!(has_data(&mut redis, ID).await, "moved, not taken");

    let popped = call(&http, "pop", json!({"topic": "mail"}));
    assert_eq!(popped["id_base64"], base64(ID), "{popped}");
    assert_eq!(popped["id"], "job-\u{fffd}\u{fffd}", "text, as for a body");
    assert_eq!(
        (&popped["topic"], &popped["body"]),
        (&json!("mail"), &json!("body 1"))
    );
    assert!(popped.get("topic_base64").is_none() && popped.get("body_base64").is_none());
    wait_until_gone(&redis, ID, b"mail").await;

    let popped = call(&http, "pop", json!({"topic_base64": base64(TOPIC)}));
    assert_eq!(popped["id"], "job-2", "{popped}");
    assert!(popped.get("id_base64").is_none());
    assert_eq!(popped["topic_base64"], base64(TOPIC));
    assert_eq!(popped["body_base64"], base64(b"body \xfe"));
    wait_until_gone(&redis, b"job-2", TOPIC).await;
    daemon.stop();
}

#[tokio::test]
async fn the_cli_names_them_in_base64_and_pops_them_whole() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (config, _logs) = server.daemon_config("cli", "");
    push_both(&mut redis).await;
    support::move_until_empty(&mut redis).await;
    let run = |args: &[&str]| delayer_succeeds(&config, args);
    let json = |text: String| -> Value { serde_json::from_str(&text).unwrap() };

    let got = json(run(&["get", "--id-base64", &base64(ID)]));
    assert_eq!(
        (&got["state"], &got["id_base64"]),
        (&json!("ready"), &json!(base64(ID)))
    );
    let popped = json(run(&["pop", "mail"]));
    assert_eq!(popped["id_base64"], base64(ID), "{popped}");
    assert_eq!(popped["state"], "popped");
    wait_until_gone(&redis, ID, b"mail").await;
    let popped = json(run(&["pop", "--topic-base64", &base64(TOPIC)]));
    assert_eq!(popped["id"], "job-2", "{popped}");
    assert_eq!(popped["topic_base64"], base64(TOPIC));
    assert_eq!(popped["body_base64"], base64(b"body \xfe"));
    wait_until_gone(&redis, b"job-2", TOPIC).await;

    // Plain text lines print such an id as the log does.
    legacy_client::push_bytes(&mut redis, [ID, b"mail", b"later"], 3600)
        .await
        .unwrap();
    let removed = run(&["remove", "--id-base64", &base64(ID)]);
    assert_eq!(removed.trim(), r#"removed "job-\xff\xfe""#);
    wait_until_gone(&redis, ID, b"mail").await;
    let stats = json(run(&["stats", "--json"]));
    let topics = stats["topics"].as_array().unwrap();
    assert!(
        topics
            .iter()
            .any(|topic| topic["topic_base64"] == base64(TOPIC)),
        "{stats}"
    );
}

#[tokio::test]
async fn a_reservation_is_touched_nacked_and_acked_by_its_id_in_base64() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "api", "");
    push_both(&mut redis).await;
    wait_for_ready(&redis, "mail", 1).await;
    wait_for_ready(&redis, TOPIC, 1).await;
    let id = json!(base64(ID));

    let reserved = call(&http, "reserve", json!({"topic": "mail", "ttr": 30}));
    assert_eq!(
        (&reserved["id_base64"], &reserved["attempt"]),
        (&id, &json!(1)),
        "{reserved}"
    );
    call(
        &http,
        "touch",
        json!({"id_base64": id, "attempt": 1, "ttr": 30}),
    );
    let got = call(&http, "get", json!({"id_base64": id}));
    assert_eq!(
        (&got["state"], &got["id_base64"]),
        (&json!("reserved"), &id)
    );
    // The id's text names another job: refused, saying how to name it.
    let lossy = post(
        &http,
        &format!("{JOBS}/ack"),
        &json!({"job_id": reserved["id"], "attempt": 1}),
    );
    assert_eq!(lossy.status, 404, "{}", lossy.body);
    assert!(lossy.body.contains("id_base64"), "{}", lossy.body);

    for (path, request, says) in [
        (
            "ack",
            json!({"job_id": "x", "id_base64": id, "attempt": 1}),
            "not both",
        ),
        (
            "touch",
            json!({"id_base64": "!", "attempt": 1}),
            "id_base64 is not base64",
        ),
        ("get", json!({}), "job_id is missing"),
        (
            "reserve",
            json!({"topics_base64": ["?"]}),
            "topic_base64 is not base64",
        ),
        (
            "pop",
            json!({"topic_base64": ""}),
            "topic is missing or empty",
        ),
    ] {
        let refused = post(&http, &format!("{JOBS}/{path}"), &request);
        assert_eq!(refused.status, 400, "{path} {request}: {}", refused.body);
        assert!(refused.body.contains(says), "{path}: {}", refused.body);
    }
    let nacked = call(&http, "nack", json!({"id_base64": id, "attempt": 1}));
    assert_eq!(nacked["outcome"], "retry");
    wait_for_ready(&redis, "mail", 1).await;
    let again = call(&http, "reserve", json!({"topic": "mail", "ttr": 30}));
    assert_eq!(
        (&again["id_base64"], &again["attempt"]),
        (&id, &json!(2)),
        "{again}"
    );
    let acked = call(&http, "ack", json!({"id_base64": id, "attempt": 2}));
    assert_eq!(acked["acked"], "done");
    wait_until_gone(&redis, ID, b"mail").await;

    let topic = json!(base64(TOPIC));
    let reserved = call(&http, "reserve", json!({"topic_base64": topic}));
    assert_eq!(
        (&reserved["id"], &reserved["topic_base64"]),
        (&json!("job-2"), &topic)
    );
    let request = json!({"job_id": "job-2", "attempt": 1, "topic_base64": topic});
    assert_eq!(call(&http, "ack", request)["acked"], "done");
    wait_until_gone(&redis, b"job-2", TOPIC).await;

    legacy_client::push_bytes(&mut redis, [ID, b"mail", b"later"], 3600)
        .await
        .unwrap();
    call(&http, "remove", json!({"id_base64": id}));
    wait_until_gone(&redis, ID, b"mail").await;
    daemon.stop();
}

#[tokio::test]
async fn metrics_and_the_status_page_list_them_escaped() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "metrics", "");
    push_both(&mut redis).await;
    wait_for_ready(&redis, TOPIC, 1).await;
    // A topic this daemon never moved to: the census finds it in the registry alone.
    let other: &[u8] = b"u\xfe";
    let _: () = delayer_client::redis::pipe()
        .sadd(TOPICS, other)
        .lpush(ready_queue(other), &["a", "b"])
        .query_async(&mut redis)
        .await
        .unwrap();

    // Labels quote the escaped name: "t\xff" is written \"t\\xff\".
    let wanted = [
        r#"delayer_jobs_moved_total{topic="\"t\\xff\""} 1"#,
        r#"delayer_ready_jobs{topic="\"t\\xff\""} 1"#,
        r#"delayer_ready_jobs{topic="\"u\\xfe\""} 2"#,
        r#"delayer_ready_jobs{topic="mail"} 1"#,
        "delayer_topics 3",
    ];
    let mut text = String::new();
    wait_for(
        std::time::Duration::from_secs(10),
        "the metrics to list every topic",
        || {
            let answer = request(&http, "GET", "/metrics", &[], b"");
            assert_eq!(answer.status, 200, "{}", answer.body);
            text = answer.body;
            let found = wanted.iter().all(|line| text.lines().any(|l| l == *line));
            async move { found.then_some(()) }
        },
    )
    .await;
    let page = request(&http, "GET", "/", &[], b"");
    assert_eq!(page.status, 200, "{}", page.body);
    for topic in [r"&quot;t\xff&quot;", r"&quot;u\xfe&quot;"] {
        assert!(page.body.contains(topic), "{topic}: {}", page.body);
    }
    // The console links to its page by the base64 of its bytes.
    let link = "/topic?base64=dP8%3D";
    assert!(page.body.contains(link), "{}", page.body);
    let topic_page = request(&http, "GET", link, &[], b"");
    assert_eq!(topic_page.status, 200, "{}", topic_page.body);
    assert!(
        topic_page
            .body
            .contains(r"<h1>Topic &quot;t\xff&quot;</h1>"),
        "{}",
        topic_page.body
    );
    daemon.stop();
}
