//! The HTTP server over real HTTP, beside a real redis-server: go-delay-queue's job API and ours,
//! bad requests, /metrics, /healthz and the console's overview (the console itself: tests/it/console.rs).

use crate::support;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine;
use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_wire::keys::{JOB_POOL, job_bucket, ready_queue};
use serde_json::json;
use support::http_client::{post, promtool_check, request, samples, serving, serving_with};
use support::legacy_client::{self, Message};
use support::{DaemonSetup, RedisServer, read, wait_for_ready};

const JOBS: &str = "/delay-queue/api/jobs";
/// The `Accept` header of a scraper that asks for OpenMetrics, as Prometheus sends it.
const OPEN_METRICS: (&str, &str) = (
    "Accept",
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
);

#[tokio::test]
async fn a_job_added_over_http_reaches_a_legacy_consumer_and_get_and_remove_answer_as_go_delay_queue()
 {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "api", "");

    let added = post(
        &http,
        &format!("{JOBS}/add"),
        &json!({"topic": "order", "delay": 0.2, "body": "{\"uid\": 1}"}),
    );
    assert_eq!(added.status, 200, "{}", added.body);
    let added = added.json();
    assert_eq!(added["code"], 0);
    let id = added["data"]["id"].as_str().unwrap().to_string();
    assert_eq!(added["data"]["job_id"], id.as_str());
    let popped = legacy_client::bpop(&mut redis, "order", 5).await.unwrap();
    assert_eq!(
        popped,
        Some(Message {
            id: id.clone(),
            topic: "order".into(),
            body: "{\"uid\": 1}".into()
        })
    );

    post(
        &http,
        &format!("{JOBS}/add"),
        &json!({"id": "later", "topic": "t", "delay": 3600, "body": "b"}),
    );
    // Too far off (milliseconds given for seconds): refused, and the job of that id untouched.
    let too_far = post(
        &http,
        &format!("{JOBS}/add"),
        &json!({"id": "later", "topic": "other", "delay": 1e16, "body": "new"}),
    );
    assert_eq!(too_far.status, 400, "{}", too_far.body);
    assert!(too_far.body.contains("too long"), "{}", too_far.body);
    let got = post(&http, &format!("{JOBS}/get"), &json!({"job_id": "later"}));
    // go-delay-queue's fields in its order, its delay a whole number as its Go clients decode it.
    assert!(
        got.body.starts_with(
            r#"{"code":0,"message":"ok","data":{"topic":"t","id":"later","exec_time":"#
        ),
        "{}",
        got.body
    );
    let got = got.json();
    let data = &got["data"];
    assert_eq!(
        (
            data["topic"].as_str(),
            data["id"].as_str(),
            data["body"].as_str()
        ),
        (Some("t"), Some("later"), Some("b"))
    );
    assert_eq!(data["delay"], 3600);
    let exec_time = data["exec_time"].as_i64().unwrap();
    let expected = support::legacy_client::now_seconds() + 3600;
    assert!(
        (exec_time - expected).abs() <= 2,
        "{exec_time} vs {expected}"
    );
    let removed = post(
        &http,
        &format!("{JOBS}/remove"),
        &json!({"job_id": "later"}),
    )
    .json();
    assert_eq!(
        (removed["code"].as_i64(), &removed["data"]),
        (Some(0), &serde_json::Value::Null)
    );
    let gone = post(&http, &format!("{JOBS}/get"), &json!({"job_id": "later"})).json();
    assert_eq!(
        (gone["code"].as_i64(), &gone["data"]),
        (Some(0), &serde_json::Value::Null),
        "go-delay-queue: data null"
    );
    let unknown = post(
        &http,
        &format!("{JOBS}/remove"),
        &json!({"job_id": "later"}),
    );
    assert_eq!(
        (unknown.status, unknown.json()["code"].as_i64()),
        (404, Some(404))
    );
    daemon.stop();
}

#[tokio::test]
async fn pop_reserve_ack_and_nack_over_http() {
    let server = RedisServer::start();
    let (daemon, _logs, http) = serving(&server, "consume", "");
    for id in ["a", "b", "c"] {
        post(
            &http,
            &format!("{JOBS}/add"),
            &json!({"id": id, "topic": "t", "body": format!("body {id}")}),
        );
    }
    let redis = server.connect().await;
    wait_for_ready(&redis, "t", 3).await;

    let popped = post(&http, &format!("{JOBS}/pop"), &json!({"topic": "t"})).json();
    assert_eq!(popped["data"]["id"], "a");
    let reserved = post(
        &http,
        &format!("{JOBS}/reserve"),
        &json!({"topics": ["none", "t"], "ttr": 30}),
    )
    .json();
    assert_eq!(
        (
            reserved["data"]["id"].as_str(),
            reserved["data"]["attempt"].as_u64()
        ),
        (Some("b"), Some(1))
    );
    let acked = post(
        &http,
        &format!("{JOBS}/ack"),
        &json!({"job_id": "b", "attempt": 1}),
    )
    .json();
    assert_eq!(acked["data"]["acked"], "done");
    let reserved = post(&http, &format!("{JOBS}/reserve"), &json!({"topic": "t"})).json();
    assert_eq!(reserved["data"]["id"], "c");
    let nacked = post(
        &http,
        &format!("{JOBS}/nack"),
        &json!({"job_id": "c", "attempt": 1, "retry_in": 60}),
    )
    .json();
    assert_eq!(nacked["data"]["outcome"], "retry");
    let stale = post(
        &http,
        &format!("{JOBS}/nack"),
        &json!({"job_id": "c", "attempt": 1}),
    );
    assert_eq!(stale.status, 409, "{}", stale.body);
    let nothing = post(
        &http,
        &format!("{JOBS}/reserve"),
        &json!({"topic": "t", "wait": 0.2}),
    )
    .json();
    assert_eq!(
        (nothing["code"].as_i64(), &nothing["data"]),
        (Some(0), &serde_json::Value::Null)
    );
    daemon.stop();
}

#[tokio::test]
async fn a_stale_receipt_over_http_leaves_alone_a_job_pushed_again_and_reserved_by_another() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "receipts", "");
    let reserve = || post(&http, &format!("{JOBS}/reserve"), &json!({"topic": "t"})).json();
    let call = |what: &str, body: serde_json::Value| post(&http, &format!("{JOBS}/{what}"), &body);
    post(
        &http,
        &format!("{JOBS}/add"),
        &json!({"id": "x", "topic": "t", "body": "first"}),
    );
    wait_for_ready(&redis, "t", 1).await;
    let first = reserve()["data"].clone();
    let token = first["token"].as_str().expect("a token").to_string();
    assert_eq!(token.len(), 32, "{first}");
    // Pushed again by a legacy client while reserved, due at once: the daemon moves it.
    let again = Message {
        id: "x".into(),
        topic: "t".into(),
        body: "second".into(),
    };
    legacy_client::push(&mut redis, &again, 0).await.unwrap();
    wait_for_ready(&redis, "t", 1).await;
    let second = reserve()["data"].clone();
    assert_eq!(
        (&second["body"], &second["attempt"]),
        (&json!("second"), &json!(2))
    );
    assert_ne!(second["token"], first["token"]);

    let old = json!({"job_id": "x", "attempt": 1, "token": token});
    let acked = call("ack", old.clone()).json();
    assert_eq!(acked["data"]["acked"], "stale", "{acked}");
    let bare = call("ack", json!({"job_id": "x", "attempt": 1})).json();
    assert_eq!(bare["data"]["acked"], "stale", "{bare}");
    for what in ["nack", "touch"] {
        let refused = call(what, old.clone());
        assert_eq!(refused.status, 409, "{what}: {}", refused.body);
    }
    let got = call("get", json!({"job_id": "x"})).json();
    assert_eq!(got["data"]["state"], "reserved", "{got}");
    let mut current = json!({"job_id": "x", "attempt": 2});
    current["token"] = second["token"].clone();
    assert_eq!(call("ack", current).json()["data"]["acked"], "done");

    // Without a token, an attempt names a reservation until the job is pushed again after one.
    let add_y = || {
        let added = call("add", json!({"id": "y", "topic": "t", "body": "b"}));
        assert_eq!(added.status, 200, "{}", added.body);
    };
    add_y();
    wait_for_ready(&redis, "t", 1).await;
    assert_eq!(reserve()["data"]["attempt"], 1);
    add_y();
    wait_for_ready(&redis, "t", 1).await;
    let again = reserve()["data"].clone();
    assert_eq!(again["attempt"], 1);
    let refused = call("ack", json!({"job_id": "y", "attempt": 1}));
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert!(refused.body.contains("token"), "{}", refused.body);
    let named = json!({"job_id": "y", "attempt": 1, "token": again["token"]});
    assert_eq!(call("ack", named).json()["data"]["acked"], "done");
    daemon.stop();
}

/// The daemon's resident memory, in bytes.
fn resident_bytes(pid: u32) -> u64 {
    let status = read(std::path::Path::new(&format!("/proc/{pid}/status")));
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .expect("VmRSS");
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[tokio::test]
async fn a_huge_body_a_legacy_client_wrote_is_never_read_by_the_http_side_and_loses_nothing() {
    const HUGE: usize = 256 << 20;
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "huge", "");
    let huge = Message {
        id: "huge".into(),
        topic: "t".into(),
        body: "x".repeat(HUGE),
    };
    legacy_client::push(&mut redis, &huge, 0).await.unwrap();
    drop(huge);
    wait_for_ready(&redis, "t", 1).await;

    // The console shows its size, six views at once; the job API refuses it, naming the limit.
    let views: Vec<_> = (0..6)
        .map(|_| {
            let http = http.clone();
            std::thread::spawn(move || request(&http, "GET", "/job?id=huge", &[], b""))
        })
        .collect();
    for view in views {
        let view = view.join().unwrap();
        assert_eq!(view.status, 200, "{}", view.body);
        assert!(
            view.body.contains(&format!("The body is {HUGE} bytes")),
            "{}",
            view.body
        );
    }
    for what in ["get", "pop", "reserve"] {
        let body = json!({"job_id": "huge", "topic": "t"});
        let refused = post(&http, &format!("{JOBS}/{what}"), &body);
        assert_eq!(refused.status, 413, "{what}: {}", refused.body);
        assert!(
            refused.body.contains("max_body_bytes"),
            "{what}: {}",
            refused.body
        );
    }
    let rss = resident_bytes(daemon.pid());
    eprintln!(
        "the daemon's resident memory after the views and refusals: {} MiB",
        rss >> 20
    );
    assert!(rss < 64 << 20, "the daemon holds {rss} bytes");
    assert_eq!(request(&http, "GET", "/healthz", &[], b"").status, 200);

    // Nothing lost: the reserve gave it back untried, and it moves to its list again.
    wait_for_ready(&redis, "t", 1).await;
    let size: usize = delayer_client::redis::cmd("HSTRLEN")
        .arg(job_bucket("huge"))
        .arg("body")
        .query_async(&mut redis)
        .await
        .unwrap();
    let attempts: Option<u32> = redis.hget(job_bucket("huge"), "attempts").await.unwrap();
    assert_eq!((size, attempts.unwrap_or(0)), (HUGE, 0));
    let popped = legacy_client::pop(&mut redis, "t").await.unwrap().unwrap();
    assert_eq!(popped.body.len(), HUGE);
    daemon.stop();
}

#[tokio::test]
async fn bad_requests_are_refused_naming_the_problem_and_write_nothing() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "bad", "token = s3cret");
    const TOKEN: &[(&str, &str)] = &[("Authorization", "Bearer s3cret")];
    let huge = "x".repeat((1 << 20) + 1);
    let cases = [
        Bad::new(TOKEN, b"{\"topic\": \"t\", ", 400, "not the JSON expected"),
        Bad::new(TOKEN, br#"{"body": "b"}"#, 400, "topic is missing or empty"),
        Bad::new(
            TOKEN,
            br#"{"topic": "", "body": "b"}"#,
            400,
            "topic is missing or empty",
        ),
        Bad::new(
            TOKEN,
            br#"{"topic": "t", "delay": -5, "body": "b"}"#,
            400,
            "delay -5 is negative",
        ),
        Bad::new(
            TOKEN,
            br#"{"topic": "t", "delay": 1e16, "body": "b"}"#,
            400,
            "the delay of 10000000000000000 s is too long",
        ),
        Bad::new(
            TOKEN,
            br#"{"topic": "t", "delay": 1e300, "body": "b"}"#,
            400,
            "delay 1e300 is too large",
        ),
        Bad::new(
            TOKEN,
            br#"{"topic": "t", "at": "tomorrow", "body": "b"}"#,
            400,
            "not an RFC 3339 time",
        ),
        Bad::new(
            TOKEN,
            br#"{"topic": "t", "at": "2001-01-01T00:00:00+02:00", "body": "b"}"#,
            400,
            // Quoted as given, not as the unix seconds it comes to.
            r#"at "2001-01-01T00:00:00+02:00" is in the past"#,
        ),
        Bad::new(
            TOKEN,
            br#"{"jobs": [{"topic": "t", "body": "b"}, {"topic": "t", "at": "2001-01-01T00:00:00Z", "body": "b"}]}"#,
            400,
            r#"job 1 of the batch: at "2001-01-01T00:00:00Z" is in the past"#,
        ),
        Bad::new(
            TOKEN,
            json!({"topic": "t", "body": huge}).to_string().as_bytes(),
            413,
            "over the limit of 1048576 bytes ([delayer] max_body_bytes)",
        ),
        Bad::new(
            TOKEN,
            &vec![b'x'; 6 * (1 << 20) + (64 << 10) + 1],
            413,
            "a job body of at most 1048576 bytes ([delayer] max_body_bytes)",
        ),
        Bad::new(
            &[],
            br#"{"topic": "t", "body": "b"}"#,
            401,
            "missing or wrong token",
        ),
        Bad::new(
            &[("Authorization", "Bearer wrong")],
            br#"{"topic": "t", "body": "b"}"#,
            401,
            "missing or wrong token",
        ),
    ];
    for Bad {
        headers,
        body,
        status,
        says,
    } in cases
    {
        let answer = request(&http, "POST", &format!("{JOBS}/add"), headers, &body);
        assert_eq!(answer.status, status, "{says}: {}", answer.body);
        let answer = answer.json();
        assert_eq!(answer["code"].as_u64(), Some(u64::from(status)));
        assert!(
            answer["message"].as_str().unwrap().contains(says),
            "{answer}"
        );
    }
    let keys: Vec<String> = redis.keys("delayer:*").await.unwrap();
    assert!(keys.is_empty(), "nothing written: {keys:?}");
    // The scheme is case-insensitive (RFC 7235).
    let added = request(
        &http,
        "POST",
        &format!("{JOBS}/add"),
        &[("Authorization", "bearer s3cret")],
        br#"{"topic": "t", "body": "b"}"#,
    );
    assert_eq!(added.status, 200, "{}", added.body);
    // The pages are not the job API: no token needed.
    assert_eq!(request(&http, "GET", "/healthz", &[], b"").status, 200);
    daemon.stop();
}

#[tokio::test]
async fn unknown_paths_and_methods_are_answered_in_the_envelope_and_get_takes_remove_and_get_by_query()
 {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "edges", "");
    let refusals = [
        ("GET", "/nowhere", 404, "no such path: /nowhere"),
        ("POST", &format!("{JOBS}/nothing"), 404, "no such path"),
        (
            "GET",
            &format!("{JOBS}/add"),
            405,
            "does not take a GET: the job API takes a POST of JSON",
        ),
        (
            "DELETE",
            &format!("{JOBS}/remove"),
            405,
            "does not take a DELETE",
        ),
        ("POST", "/metrics", 405, "/metrics takes a GET, not a POST"),
    ];
    for (method, path, status, says) in refusals {
        let answer = request(&http, method, path, &[], b"{}");
        assert_eq!(answer.status, status, "{method} {path}: {}", answer.body);
        let answer = answer.json();
        assert_eq!(answer["code"].as_u64(), Some(u64::from(status)), "{answer}");
        assert!(
            answer["message"].as_str().unwrap().contains(says),
            "{answer}"
        );
        assert!(answer["data"].is_null(), "{answer}");
    }

    // As go-delay-queue's server serves them (its routers.go): GET with the id in the query.
    post(
        &http,
        &format!("{JOBS}/add"),
        &json!({"id": "a b&c", "topic": "t", "delay": 3600, "body": "b"}),
    );
    let got = request(
        &http,
        "GET",
        &format!("{JOBS}/get?job_id=a+b%26c"),
        &[],
        b"",
    );
    assert_eq!(got.status, 200, "{}", got.body);
    let got = got.json();
    assert_eq!(
        (got["data"]["id"].as_str(), got["data"]["topic"].as_str()),
        (Some("a b&c"), Some("t")),
        "{got}"
    );
    let missing = request(&http, "GET", &format!("{JOBS}/get"), &[], b"");
    assert_eq!(missing.status, 400, "{}", missing.body);
    let removed = request(
        &http,
        "GET",
        &format!("{JOBS}/remove?job_id=a%20b%26c"),
        &[],
        b"",
    );
    assert_eq!(
        (removed.status, removed.json()["code"].as_u64()),
        (200, Some(0)),
        "{}",
        removed.body
    );
    let waiting: usize = redis.zcard(JOB_POOL).await.unwrap();
    assert_eq!(waiting, 0, "the job is gone from the pool");
    let again = request(
        &http,
        "GET",
        &format!("{JOBS}/remove?job_id=a%20b%26c"),
        &[],
        b"",
    );
    assert_eq!(
        (again.status, again.json()["code"].as_u64()),
        (404, Some(404))
    );
    daemon.stop();
}

#[tokio::test]
async fn a_host_it_does_not_answer_for_and_a_browser_of_another_site_are_refused_and_other_clients_work()
 {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "sites", "hosts = delayer.internal");
    let port = http.rsplit_once(':').unwrap().1;
    let add = format!("{JOBS}/add");
    let waiting = |id: &str| json!({"id": id, "topic": "t", "delay": 3600, "body": "b"});
    assert_eq!(post(&http, &add, &waiting("w1")).status, 200);

    // DNS rebinding: a page at the attacker's name, which resolves to this server.
    let evil = [("Host", "evil.example")];
    let page = request(&http, "GET", "/topic?name=t", &evil, b"");
    assert_eq!(page.status, 421, "{}", page.body);
    assert!(page.body.contains("[http] hosts"), "{}", page.body);
    let token_page = request(&http, "GET", "/topic?name=t", &[], b"").body;
    let token = token_page
        .split("name=\"form_token\" value=\"")
        .nth(1)
        .unwrap();
    let fields = format!("form_token={}&topic=t", &token[..token.find('"').unwrap()]);
    let form = ("Content-Type", "application/x-www-form-urlencoded");
    let evil_host = ("Host", format!("evil.example:{port}"));
    let evil_form = [form, (evil_host.0, evil_host.1.as_str())];
    let pause = request(
        &http,
        "POST",
        "/actions/pause",
        &evil_form,
        fields.as_bytes(),
    );
    assert_eq!(pause.status, 421, "{}", pause.body);
    let paused: bool = redis
        .exists(format!("{}t", delayer_wire::keys::PAUSED_PREFIX))
        .await
        .unwrap();
    assert!(!paused);
    // Its IP address (what curl, Prometheus and probes use), localhost, and the names listed.
    for host in [
        format!("localhost:{port}"),
        format!("delayer.internal:{port}"),
        format!("[::1]:{port}"),
    ] {
        let health = request(&http, "GET", "/healthz", &[("Host", host.as_str())], b"");
        assert_eq!(health.status, 200, "{host}: {}", health.body);
    }

    // A browser's request from another site, by Sec-Fetch-Site or else by Origin.
    let remove = format!("{JOBS}/remove?job_id=w1");
    for headers in [
        &[
            ("Sec-Fetch-Site", "cross-site"),
            ("Sec-Fetch-Mode", "no-cors"),
        ][..],
        &[
            ("Sec-Fetch-Site", "same-site"),
            ("Sec-Fetch-Mode", "navigate"),
        ][..],
        &[("Origin", "http://127.0.0.1:1")][..],
    ] {
        let refused = request(&http, "GET", &remove, headers, b"");
        assert_eq!(refused.status, 403, "{headers:?}: {}", refused.body);
        assert!(
            refused
                .body
                .contains("a page of another site cannot act here"),
            "{}",
            refused.body
        );
    }
    let pooled: Vec<String> = redis.zrange(JOB_POOL, 0, -1).await.unwrap();
    assert_eq!(pooled, ["w1"]);

    // A body of a type a page may send anywhere without asking first, from a browser of another
    // site, is refused for where it comes from: nothing is planted.
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let body = waiting("planted").to_string();
        let headers = [
            ("Content-Type", content_type),
            ("Sec-Fetch-Site", "cross-site"),
            ("Sec-Fetch-Mode", "no-cors"),
        ];
        let refused = request(&http, "POST", &add, &headers, body.as_bytes());
        assert_eq!(refused.status, 403, "{content_type}: {}", refused.body);
    }
    let planted: bool = redis
        .exists(delayer_wire::keys::job_bucket("planted"))
        .await
        .unwrap();
    assert!(!planted);

    // Clients that are not browsers: no Origin, no Sec-Fetch-*, JSON whatever its type (see
    // go_delay_queue_clients_add_jobs_by_curl_php_and_urllib_whatever_content_type_they_send).
    let json = [("Content-Type", "application/json; charset=utf-8")];
    let added = request(
        &http,
        "POST",
        &add,
        &json,
        waiting("w2").to_string().as_bytes(),
    );
    assert_eq!(added.status, 200, "{}", added.body);
    let same_origin = format!("http://{http}");
    let mine = [
        ("Origin", same_origin.as_str()),
        ("Sec-Fetch-Site", "same-origin"),
    ];
    let removed = request(&http, "GET", &remove, &mine, b"");
    assert_eq!(removed.status, 200, "{}", removed.body);
    let removed = request(&http, "GET", &format!("{JOBS}/remove?job_id=w2"), &[], b"");
    assert_eq!(removed.status, 200, "{}", removed.body);
    // A link from another site to one of the console's pages opens it (as a page of its own).
    let link = [
        ("Sec-Fetch-Site", "cross-site"),
        ("Sec-Fetch-Mode", "navigate"),
        ("Sec-Fetch-Dest", "document"),
    ];
    assert_eq!(
        request(&http, "GET", "/topic?name=t", &link, b"").status,
        200
    );
    let image = [
        ("Sec-Fetch-Site", "cross-site"),
        ("Sec-Fetch-Mode", "no-cors"),
        ("Sec-Fetch-Dest", "image"),
    ];
    assert_eq!(
        request(&http, "GET", "/topic?name=t", &image, b"").status,
        403
    );
    daemon.stop();
}

/// A client of go-delay-queue's API posting `json` to `url` as its users write it: curl's `-d`,
/// PHP's curl with a string in `CURLOPT_POSTFIELDS`, or Python's urllib with `data`.
fn go_delay_queue_client(name: &str, url: &str, json: &str) -> Command {
    let (program, args) = match name {
        "curl" => ("curl", vec!["-sS", "-X", "POST", "-d", json, url]),
        "php" => (
            "php",
            vec![
                "-r",
                "$c = curl_init($argv[1]); curl_setopt($c, CURLOPT_POSTFIELDS, $argv[2]); \
                 curl_setopt($c, CURLOPT_RETURNTRANSFER, true); $answer = curl_exec($c); \
                 if ($answer === false) { fwrite(STDERR, curl_error($c)); exit(1); } echo $answer;",
                url,
                json,
            ],
        ),
        "urllib" => (
            "python3",
            vec![
                "-c",
                "import sys, urllib.request\n\
                 print(urllib.request.urlopen(sys.argv[1], data=sys.argv[2].encode()).read().decode())",
                url,
                json,
            ],
        ),
        _ => unreachable!("{name}"),
    };
    let mut command = Command::new(program);
    command.args(args);
    command
}

/// The head of the request `client` sends to `listener` (where its URL points), answered `{}`.
fn head_sent(listener: &TcpListener, mut client: Command) -> String {
    let mut child = client
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("{client:?}: {error} (scripts/test installs it)"));
    listener.set_nonblocking(true).unwrap();
    let mut stream = loop {
        match listener.accept() {
            Ok((stream, _)) => break stream,
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                if let Some(status) = child.try_wait().unwrap() {
                    let output = child.wait_with_output().unwrap();
                    let said = String::from_utf8_lossy(&output.stderr);
                    panic!("{client:?} ended ({status}) without a request: {said}");
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(error) => panic!("{error}"),
        }
    };
    stream.set_nonblocking(false).unwrap();
    let mut head = Vec::new();
    let mut byte = [0];
    while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap() == 1 {
        head.push(byte[0]);
    }
    let answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
    stream.write_all(answer.as_bytes()).unwrap();
    drop(stream);
    child.wait().unwrap();
    String::from_utf8_lossy(&head).into_owned()
}

#[tokio::test]
async fn go_delay_queue_clients_add_jobs_by_curl_php_and_urllib_whatever_content_type_they_send() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    // Jobs in the legacy form (a bucket and a pool entry, as go-delay-queue's server writes
    // them), which the test reads.
    let legacy = "compact_pushes = false";
    let (daemon, _logs, http) = serving_with(&server, "clients", legacy, "");
    let elsewhere = TcpListener::bind("127.0.0.1:0").unwrap();
    let listening = elsewhere.local_addr().unwrap();

    for name in ["curl", "php", "urllib"] {
        let id = format!("by-{name}");
        let job =
            json!({"id": id, "topic": "order", "delay": 3600, "body": format!("from {name}")});
        let job = job.to_string();
        // What it sends: a form's type, not JSON's (go-delay-queue's server reads JSON anyway).
        let url = format!("http://{listening}{JOBS}/add");
        let head = head_sent(&elsewhere, go_delay_queue_client(name, &url, &job));
        assert!(
            head.to_ascii_lowercase()
                .contains("\r\ncontent-type: application/x-www-form-urlencoded\r\n"),
            "{name}: {head}"
        );

        let url = format!("http://{http}{JOBS}/add");
        let output = go_delay_queue_client(name, &url, &job).output().unwrap();
        let answer = String::from_utf8_lossy(&output.stdout);
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{name}: {answer} {said}");
        let answer: serde_json::Value = serde_json::from_str(answer.trim()).unwrap();
        assert_eq!(
            (&answer["code"], &answer["data"]["id"]),
            (&json!(0), &json!(id)),
            "{name}: {answer}"
        );
        let data: HashMap<String, String> = redis.hgetall(job_bucket(&id)).await.unwrap();
        assert_eq!(
            (data.get("topic"), data.get("body")),
            (Some(&"order".to_string()), Some(&format!("from {name}"))),
            "{name}"
        );
        let due: Option<f64> = redis.zscore(JOB_POOL, &id).await.unwrap();
        let now = support::redis_now(&mut redis).await;
        assert!(
            due.is_some_and(|due| (due - now - 3600.0).abs() < 60.0),
            "{name}: due {due:?}, now {now}"
        );
    }
    daemon.stop();
}

/// A request that must be refused, and what the refusal must say.
struct Bad {
    headers: &'static [(&'static str, &'static str)],
    body: Vec<u8>,
    status: u16,
    says: &'static str,
}

impl Bad {
    fn new(
        headers: &'static [(&'static str, &'static str)],
        body: &[u8],
        status: u16,
        says: &'static str,
    ) -> Bad {
        Bad {
            headers,
            body: body.to_vec(),
            status,
            says,
        }
    }
}

#[tokio::test]
async fn metrics_parse_and_move_with_the_work() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "metrics", "");
    for index in 0..5 {
        let message = Message {
            id: format!("j{index}"),
            topic: "mail".into(),
            body: "b".into(),
        };
        legacy_client::push(&mut redis, &message, 0).await.unwrap();
    }
    let _: () = redis.zadd(JOB_POOL, "orphan", 1).await.unwrap();
    let _: () = redis
        .zadd(JOB_POOL, "waiting", 9_999_999_999u64)
        .await
        .unwrap();
    wait_for_ready(&redis, "mail", 5).await;
    support::wait_for(Duration::from_secs(5), "the orphan to be dropped", || {
        let mut redis = redis.clone();
        async move {
            let left: usize = redis.zcard(JOB_POOL).await.unwrap();
            (left == 1).then_some(())
        }
    })
    .await;

    let answer = request(&http, "GET", "/metrics", &[OPEN_METRICS], b"");
    assert_eq!(answer.status, 200);
    assert!(
        answer
            .header("content-type")
            .unwrap()
            .contains("openmetrics-text")
    );
    let metrics = samples(&answer.body);
    assert_eq!(metrics["delayer_jobs_moved_total{topic=\"mail\"}"], 5.0);
    assert_eq!(metrics["delayer_orphans_dropped_total"], 1.0);
    assert_eq!(metrics["delayer_move_lag_seconds_count"], 5.0);
    assert_eq!(metrics["delayer_jobs_waiting"], 1.0);
    assert_eq!(metrics["delayer_jobs_due"], 0.0);
    assert_eq!(metrics["delayer_ready_jobs{topic=\"mail\"}"], 5.0);
    // Legacy jobs: their age is estimated from the TTL, in whole seconds.
    let age = metrics["delayer_oldest_ready_age_seconds{topic=\"mail\"}"];
    assert!((0.0..60.0).contains(&age), "{age}");
    assert_eq!(metrics["delayer_redis_up"], 1.0);
    assert!(metrics["delayer_script_duration_seconds_count{script=\"move\"}"] >= 1.0);
    let looked = metrics["delayer_last_look_timestamp_seconds"];
    assert!((delayer_wire::time::unix_now() - looked).abs() < 5.0);

    // A ready list that something else overwrote is left out, not reported at its last length
    // (once the figures, a second old at most, are read again).
    let _: () = redis.set(ready_queue("mail"), "x").await.unwrap();
    let mut metrics = HashMap::new();
    support::wait_until_sync(Duration::from_secs(5), "mail's series to go", || {
        metrics = samples(&request(&http, "GET", "/metrics", &[], b"").body);
        !metrics.contains_key("delayer_ready_jobs{topic=\"mail\"}")
    });
    assert_eq!(metrics["delayer_jobs_waiting"], 1.0);
    daemon.stop();
}

#[tokio::test]
async fn every_series_is_there_from_the_start_and_a_first_burst_of_dead_jobs_counts_from_0() {
    let server = RedisServer::start();
    let redis = server.connect().await;
    let (daemon, _logs, http) = serving_with(&server, "dead", "max_attempts = 1", "");
    for id in ["a", "b", "c"] {
        post(
            &http,
            &format!("{JOBS}/add"),
            &json!({"id": id, "topic": "work", "body": "b"}),
        );
    }
    wait_for_ready(&redis, "work", 3).await;
    let scrape = || samples(&request(&http, "GET", "/metrics", &[], b"").body);
    let before = scrape();
    for series in [
        "delayer_jobs_dead_total{topic=\"work\"}",
        "delayer_jobs_delivered_again_total{topic=\"work\"}",
        "delayer_dead_jobs{topic=\"work\"}",
        "delayer_reserved_jobs",
    ] {
        assert_eq!(before.get(series), Some(&0.0), "{series}: {before:?}");
    }
    for _ in 0..3 {
        let reserved = post(
            &http,
            &format!("{JOBS}/reserve"),
            &json!({"topic": "work", "ttr": 1}),
        );
        assert_eq!(reserved.status, 200, "{}", reserved.body);
    }
    let mut after = HashMap::new();
    support::wait_until_sync(Duration::from_secs(10), "three dead jobs counted", || {
        after = scrape();
        after.get("delayer_jobs_dead_total{topic=\"work\"}") == Some(&3.0)
            && after.get("delayer_dead_jobs{topic=\"work\"}") == Some(&3.0)
    });
    assert_eq!(after["delayer_reserved_jobs"], 0.0);
    let dead: usize = redis
        .clone()
        .llen(delayer_wire::keys::dead_queue("work"))
        .await
        .unwrap();
    assert_eq!(dead, 3, "the dead list holds them");
    daemon.stop();
}

#[tokio::test]
async fn metrics_leave_out_what_redis_holds_while_it_is_stopped_and_healthz_names_redis() {
    let mut server = RedisServer::start();
    let (daemon, _logs, http) = serving(&server, "holdings", "");
    post(
        &http,
        &format!("{JOBS}/add"),
        &json!({"topic": "t", "delay": 3600, "body": "b"}),
    );
    let scrape = |accept: &[(&str, &str)]| request(&http, "GET", "/metrics", accept, b"").body;
    support::wait_until_sync(Duration::from_secs(5), "the job counted", || {
        samples(&scrape(&[])).get("delayer_jobs_waiting") == Some(&1.0)
    });

    server.stop(true);
    let mut text = String::new();
    support::wait_until_sync(Duration::from_secs(15), "the holdings left out", || {
        text = scrape(&[]);
        let metrics = samples(&text);
        metrics.get("delayer_redis_up") == Some(&0.0)
            && !metrics.contains_key("delayer_jobs_waiting")
    });
    for text in [text, scrape(&[OPEN_METRICS])] {
        let metrics = samples(&text);
        for held in [
            "delayer_jobs_waiting",
            "delayer_jobs_due",
            "delayer_reserved_jobs",
            "delayer_ready_jobs{topic=\"t\"}",
        ] {
            assert!(
                !metrics.contains_key(held),
                "{held} while Redis is stopped: {text}"
            );
        }
    }
    let health = request(&http, "GET", "/healthz", &[], b"");
    assert_eq!(health.status, 503);
    assert!(health.body.contains("Redis at"), "{}", health.body);
    server.restart();
    support::wait_until_sync(Duration::from_secs(10), "the holdings back", || {
        samples(&scrape(&[])).get("delayer_jobs_waiting") == Some(&1.0)
    });
    daemon.stop();
}

#[tokio::test]
async fn promtool_finds_a_real_scrape_clean_and_openmetrics_is_served_when_asked_for() {
    let server = RedisServer::start();
    let (daemon, _logs, http) = serving_with(&server, "promtool", "max_attempts = 1", "");
    post(
        &http,
        &format!("{JOBS}/add"),
        &json!({"topic": "t", "body": "b"}),
    );
    post(
        &http,
        &format!("{JOBS}/add"),
        &json!({"topic": "later", "delay": 60, "body": "b"}),
    );
    let redis = server.connect().await;
    wait_for_ready(&redis, "t", 1).await;
    // Prometheus's text format unless OpenMetrics is asked for: promtool (2.42, Debian's) reads
    // only the former, in which a counter's family is named as its samples are.
    let plain = request(
        &http,
        "GET",
        "/metrics",
        &[("Accept", "text/plain;version=0.0.4")],
        b"",
    );
    assert_eq!(
        plain.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    assert!(!plain.body.contains("# EOF"), "{}", plain.body);
    promtool_check(&plain.body);
    assert!(
        plain.body.contains("# HELP delayer_jobs_dead_total ")
            && plain
                .body
                .contains("# TYPE delayer_jobs_dead_total counter"),
        "{}",
        plain.body
    );

    let open = request(&http, "GET", "/metrics", &[OPEN_METRICS], b"");
    assert_eq!(
        open.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    // The same families, each with its help text, named as OpenMetrics names them.
    let families = |text: &str, kind: &str| -> Vec<String> {
        text.lines()
            .filter_map(|line| line.strip_prefix(kind))
            .map(|rest| {
                rest.split(' ')
                    .next()
                    .unwrap()
                    .trim_end_matches("_total")
                    .to_string()
            })
            .collect()
    };
    assert_eq!(
        families(&open.body, "# HELP "),
        families(&plain.body, "# HELP ")
    );
    assert_eq!(
        families(&open.body, "# TYPE "),
        families(&open.body, "# HELP ")
    );
    assert!(
        open.body.contains("# TYPE delayer_jobs_dead counter"),
        "{}",
        open.body
    );
    assert!(open.body.ends_with("# EOF\n"), "{}", open.body);
    daemon.stop();
}

#[tokio::test]
async fn healthz_says_503_while_redis_is_stopped_and_200_after() {
    let mut server = RedisServer::start();
    let (daemon, _logs, http) = serving(&server, "health", "");
    support::wait_until_sync(Duration::from_secs(5), "a healthy daemon", || {
        request(&http, "GET", "/healthz", &[], b"").status == 200
    });

    server.stop(true);
    let mut down = None;
    support::wait_until_sync(Duration::from_secs(5), "/healthz to turn 503", || {
        let answer = request(&http, "GET", "/healthz", &[], b"");
        let unhealthy = answer.status == 503;
        down = Some(answer.body);
        unhealthy
    });
    let down = down.unwrap();
    assert!(down.contains("did not answer the last look"), "{down}");
    let redis = format!("Redis at {}", server.socket().display());
    assert!(down.contains(&redis), "{down}");
    server.restart();
    support::wait_until_sync(Duration::from_secs(5), "/healthz to turn 200 again", || {
        request(&http, "GET", "/healthz", &[], b"").status == 200
    });
    daemon.stop();
}

#[tokio::test]
async fn the_console_overview_renders_the_topics_escaped() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "page", "");
    for (id, topic) in [("1", "order.close"), ("2", "<b>bold</b>")] {
        let message = Message {
            id: id.into(),
            topic: topic.into(),
            body: "b".into(),
        };
        legacy_client::push(&mut redis, &message, 0).await.unwrap();
    }
    wait_for_ready(&redis, "order.close", 1).await;
    wait_for_ready(&redis, "<b>bold</b>", 1).await;

    let page = request(&http, "GET", "/", &[], b"");

    assert_eq!(page.status, 200);
    assert!(
        page.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    assert!(
        page.body
            .contains("order.close</a></td><td class=\"n\">—</td><td class=\"n\">1</td>"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("&lt;b&gt;bold&lt;/b&gt;"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("<b>bold</b>"));
    assert!(page.body.contains("http-equiv=\"refresh\""));
    daemon.stop();
}

#[tokio::test]
async fn a_stop_ends_waits_and_cuts_off_a_connection_that_stalls() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (mut daemon, logs, http) = serving(&server, "stop", "");
    let popping = {
        let http = http.clone();
        std::thread::spawn(move || {
            post(
                &http,
                &format!("{JOBS}/pop"),
                &json!({"topic": "t", "wait": 30}),
            )
        })
    };
    // A client that never finishes its headers.
    let mut stalled = TcpStream::connect(&http).unwrap();
    stalled
        .write_all(b"POST /delay-queue/api/jobs/add HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    // Answered only after the daemon has taken the stalled connection from its backlog.
    request(&http, "GET", "/healthz", &[], b"");
    wait_for_blocked_pop(&mut redis).await;

    daemon.signal("TERM");

    // The 30 s wait ends with the stop, answered; the stalled connection holds the stop up for the
    // grace period only.
    let answer = popping.join().unwrap();
    assert_eq!(
        (answer.status, &answer.json()["data"]),
        (200, &serde_json::Value::Null),
        "{}",
        answer.body
    );
    assert!(daemon.wait(Duration::from_secs(10)).success());
    assert!(
        read(&logs.error)
            .contains("HTTP requests still in flight 5 s after the stop began are cut off"),
        "{}",
        read(&logs.error)
    );
    drop(stalled);
}

#[tokio::test]
async fn a_second_signal_stops_at_once() {
    let server = RedisServer::start();
    let (mut daemon, logs, http) = serving(&server, "again", "");
    // Half a request; then a whole one on a second connection: once that is answered, the daemon
    // has taken the first from its (first in, first out) backlog, so it holds up the stop.
    let mut stalled = TcpStream::connect(&http).unwrap();
    stalled.write_all(b"GET / HTTP/1.1\r\n").unwrap();
    request(&http, "GET", "/healthz", &[], b"");

    daemon.signal("TERM");
    logs.wait_for_line("Stopping (SIGTERM received)");
    daemon.signal("INT");

    assert!(daemon.wait(Duration::from_secs(10)).success());
    assert!(read(&logs.access).contains("Stopping at once (SIGINT received again)"));
    assert!(
        read(&logs.error).contains("HTTP requests still in flight are cut off"),
        "{}",
        read(&logs.error)
    );
    drop(stalled);
}

/// The connection limit and the open-file limit a daemon's start line names.
fn connection_limit(logs: &support::Logs) -> (usize, u64) {
    logs.wait_for_line("connections at once (open-file limit ");
    let line = read(&logs.access);
    let at_most = line.split("at most ").nth(1).expect("the limit in the log");
    let (most, rest) = at_most.split_once(' ').unwrap();
    let limit = rest.split("open-file limit ").nth(1).unwrap();
    let limit = limit.split(')').next().unwrap();
    (most.parse().unwrap(), limit.parse().unwrap())
}

#[tokio::test]
async fn with_three_thousand_idle_connections_open_healthz_answers_within_a_second() {
    const IDLE: usize = 3_000;
    // This process holds one end of each connection, the daemon (which inherits the limit and
    // raises it to the hard one) the other.
    let limit = rlimit::increase_nofile_limit(1 << 20).unwrap();
    assert!(
        limit > 2 * IDLE as u64,
        "the open-file limit {limit} is too low for this test"
    );
    let server = RedisServer::start();
    let (daemon, _logs, http) = serving(&server, "idle", "");
    let before = daemon.open_files();

    let idle: Vec<TcpStream> = (0..IDLE)
        .map(|n| {
            TcpStream::connect_timeout(&http.parse().unwrap(), Duration::from_secs(2))
                .unwrap_or_else(|error| panic!("connection {n} of {IDLE}: {error}"))
        })
        .collect();
    support::wait_until_sync(
        Duration::from_secs(5),
        "the daemon to hold them all",
        || daemon.open_files() >= before + IDLE,
    );

    let asked = std::time::Instant::now();
    let health = request(&http, "GET", "/healthz", &[], b"");
    let took = asked.elapsed();
    assert_eq!(health.status, 200, "{}", health.body);
    assert!(took < Duration::from_secs(1), "/healthz took {took:?}");
    drop(idle);
    daemon.stop();
}

#[tokio::test]
async fn connections_beyond_the_limit_are_answered_503_at_once_and_served_again_once_one_closes() {
    let server = RedisServer::start();
    // Soft and hard: the daemon cannot raise it, and sizes its limit from it.
    let (daemon, logs, http) = support::http_client::serving_with_ulimit(&server, "full", "-n 400");
    let (most, limit) = connection_limit(&logs);
    assert_eq!((most, limit), (72, 400));
    let mut idle: Vec<TcpStream> = (0..most)
        .map(|_| TcpStream::connect(&http).unwrap())
        .collect();
    // More than the refusals that wait for the rest of a request at once (64), kept open so
    // that they wait: each is answered all the same.
    let beyond: Vec<TcpStream> = (0..70)
        .map(|n| {
            let mut beyond = TcpStream::connect(&http).unwrap();
            beyond
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let mut answer = String::new();
            let _ = std::io::Read::read_to_string(&mut beyond, &mut answer);
            assert!(answer.starts_with("HTTP/1.1 503"), "{n}: {answer:?}");
            beyond
        })
        .collect();

    // Accepted after the idle ones (the backlog is first in, first out): every place is taken.
    let refused = request(&http, "GET", "/healthz", &[], b"");
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert!(
        refused.json()["message"]
            .as_str()
            .unwrap()
            .contains("at its limit of 72 connections at once"),
        "{}",
        refused.body
    );

    drop((beyond, idle.pop()));
    support::wait_until_sync(Duration::from_secs(5), "a place to free up", || {
        request(&http, "GET", "/healthz", &[], b"").status == 200
    });
    drop(idle);
    daemon.stop();
}

#[tokio::test]
async fn the_open_file_limit_is_raised_to_the_hard_one_at_start() {
    let (_, hard) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
    let server = RedisServer::start();
    let (daemon, logs, _http) =
        support::http_client::serving_with_ulimit(&server, "raised", "-Sn 300");
    let (_, limit) = connection_limit(&logs);
    assert_eq!(limit, hard.min(1 << 20));
    daemon.stop();
}

#[tokio::test]
async fn a_connection_that_sends_nothing_and_one_idle_after_a_request_are_closed_within_10_s() {
    // hyper's header_read_timeout starts when the server waits for a request: at once on a new
    // connection, and again after each answer on a kept-alive one.
    let server = RedisServer::start();
    let (daemon, _logs, http) = serving(&server, "timeouts", "");
    let silent = TcpStream::connect(&http).unwrap();
    let mut kept = TcpStream::connect(&http).unwrap();
    write!(kept, "GET /healthz HTTP/1.1\r\nHost: {http}\r\n\r\n").unwrap();
    let mut answer = [0; 512];
    let read = std::io::Read::read(&mut kept, &mut answer).unwrap();
    // Answered (200, or 503 before the daemon's first look), and kept alive.
    assert!(answer[..read].starts_with(b"HTTP/1.1 "), "answered");

    for (name, mut stream) in [("silent", silent), ("kept alive", kept)] {
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut rest = Vec::new();
        let closed = std::io::Read::read_to_end(&mut stream, &mut rest);
        assert!(
            closed.is_ok() && rest.is_empty(),
            "{name}: {closed:?} {rest:?}"
        );
    }
    daemon.stop();
}

#[tokio::test]
async fn a_time_to_run_under_a_second_or_over_max_ttr_is_refused() {
    let server = RedisServer::start();
    let (daemon, _logs, http) = serving_with(&server, "ttr", "max_ttr = 600", "");
    post(
        &http,
        &format!("{JOBS}/add"),
        &json!({"id": "j", "topic": "t", "body": "b"}),
    );
    let redis = server.connect().await;
    wait_for_ready(&redis, "t", 1).await;
    for ttr in [601.0, 1e12] {
        for what in ["reserve", "touch"] {
            let body = json!({"topic": "t", "job_id": "j", "attempt": 1, "ttr": ttr});
            let refused = post(&http, &format!("{JOBS}/{what}"), &body);
            assert_eq!(refused.status, 400, "{what} ttr {ttr}: {}", refused.body);
            assert!(
                refused.body.contains("[delayer] max_ttr"),
                "{}",
                refused.body
            );
        }
    }
    let ready: usize = server.connect().await.llen(ready_queue("t")).await.unwrap();
    assert_eq!(ready, 1, "nothing reserved");
    let reserved = post(
        &http,
        &format!("{JOBS}/reserve"),
        &json!({"topic": "t", "ttr": 600}),
    );
    assert_eq!(reserved.json()["data"]["id"], "j", "{}", reserved.body);
    for ttr in [0.0, 1e-9, 0.5] {
        let reserved = post(
            &http,
            &format!("{JOBS}/reserve"),
            &json!({"topic": "t", "ttr": ttr}),
        );
        assert_eq!(reserved.status, 400, "ttr {ttr}: {}", reserved.body);
        assert!(
            reserved.json()["message"]
                .as_str()
                .unwrap()
                .contains("under the least time to run, 1 s"),
            "{}",
            reserved.body
        );
    }
    daemon.stop();
}

#[tokio::test]
async fn a_waiting_pop_whose_caller_went_away_puts_its_job_back() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, logs, http) = serving(&server, "gone", "");
    let mut caller = TcpStream::connect(&http).unwrap();
    let body = json!({"topic": "gone", "wait": 10}).to_string();
    write!(
        caller,
        "POST {JOBS}/pop HTTP/1.1\r\nHost: {http}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    wait_for_blocked_pop(&mut redis).await;

    drop(caller);
    // The server learns that the caller went away only when it reads the connection again: no
    // event outside it tells when, so the job falls due a moment later.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let message = Message {
        id: "g1".into(),
        topic: "gone".into(),
        body: "kept".into(),
    };
    legacy_client::push(&mut redis, &message, 0).await.unwrap();

    // A BRPOP takes a job from the list at once: the list holds it only once it is put back.
    let ready = wait_for_ready(&redis, "gone", 1).await;
    assert_eq!(ready, ["g1"], "next in line again");
    let ttl: i64 = redis
        .ttl(delayer_wire::keys::job_bucket("g1"))
        .await
        .unwrap();
    assert!(
        ttl > 604_000,
        "its data as the legacy client wrote it: ttl {ttl}"
    );
    logs.wait_for_line("The caller of a pop went away: job g1 is back on its ready list");
    let popped = legacy_client::pop(&mut redis, "gone")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((popped.id.as_str(), popped.body.as_str()), ("g1", "kept"));
    daemon.stop();
}

/// Waits until a client of `redis` blocks (the daemon's BRPOP for a waiting pop).
async fn wait_for_blocked_pop(redis: &mut MultiplexedConnection) {
    support::wait_for(Duration::from_secs(5), "a blocked BRPOP", || {
        let mut redis = redis.clone();
        async move {
            let info: String = delayer_client::redis::cmd("INFO")
                .arg("clients")
                .query_async(&mut redis)
                .await
                .unwrap();
            info.lines()
                .filter_map(|line| line.strip_prefix("blocked_clients:"))
                .any(|count| count.trim() != "0")
                .then_some(())
        }
    })
    .await;
}

#[tokio::test]
async fn healthz_stays_200_while_a_long_backlog_drains() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    support::fill_backlog(&mut redis, 200_000, &["a", "b"]).await;
    // timer_interval = 100: a drain longer than 0.2 s outlasts the health limit unless each
    // script call counts as a look.
    let (daemon, _logs, http) = serving(&server, "drain", "");
    support::wait_until_sync(Duration::from_secs(5), "a first look", || {
        request(&http, "GET", "/healthz", &[], b"").status == 200
    });
    let mut answers = Vec::new();
    loop {
        let left: usize = redis.zcard(JOB_POOL).await.unwrap();
        if left == 0 {
            break;
        }
        let answer = request(&http, "GET", "/healthz", &[], b"");
        answers.push((answer.status, answer.body));
    }
    assert!(answers.len() >= 3, "the drain outlasted a few checks");
    let unhealthy: Vec<_> = answers
        .iter()
        .filter(|(status, _)| *status != 200)
        .collect();
    assert!(unhealthy.is_empty(), "{unhealthy:?}");
    daemon.stop();
}

#[tokio::test]
async fn a_due_time_beyond_the_calendar_is_answered() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "far", "");
    // What a legacy writer may leave: a score no calendar date holds.
    let _: () = redis
        .hset_multiple(
            delayer_wire::keys::job_bucket("far"),
            &[("topic", "t"), ("body", "b"), ("due", "1e15")],
        )
        .await
        .unwrap();
    let _: () = redis.zadd(JOB_POOL, "far", 1e15).await.unwrap();

    let got = post(&http, &format!("{JOBS}/get"), &json!({"job_id": "far"}));

    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.json()["data"]["due"], "unix 1000000000000000");
    let page = request(&http, "GET", "/", &[], b"");
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains("<dt>next due</dt><dd>unix 1000000000000000</dd>"),
        "{}",
        page.body
    );
    daemon.stop();
}

#[tokio::test]
async fn the_configured_body_limit_holds_and_a_body_that_is_not_text_comes_back_whole() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (config, logs) = server.daemon_config("limit", "timer_interval = 100\nmax_body_bytes = 10");
    std::fs::write(
        &config,
        format!("{}\n[http]\nlisten = 127.0.0.1:0\n", read(&config)),
    )
    .unwrap();
    let mut daemon = support::Daemon::start(&config);
    let http = support::http_client::http_address(&logs);

    let refused = post(
        &http,
        &format!("{JOBS}/add"),
        &json!({"topic": "t", "body": "eleven byte"}),
    );
    assert_eq!(refused.status, 413, "{}", refused.body);
    assert!(
        refused.body.contains("over the limit of 10 bytes"),
        "{}",
        refused.body
    );
    let waiting: usize = redis.zcard(JOB_POOL).await.unwrap();
    assert_eq!(waiting, 0, "nothing written");

    // Bytes that are not UTF-8, as a PHP client's serialize() may write them.
    let bytes = b"\xff\xfe\x00ok".to_vec();
    let client = delayer_client::Client::connect(server.info())
        .await
        .unwrap();
    client.push("t", bytes.clone()).id("raw").await.unwrap();
    let got = post(&http, &format!("{JOBS}/get"), &json!({"job_id": "raw"})).json();
    let decode = |encoded: &serde_json::Value| {
        base64::engine::general_purpose::STANDARD
            .decode(encoded.as_str().unwrap())
            .unwrap()
    };
    assert_eq!(decode(&got["data"]["body_base64"]), bytes, "{got}");
    wait_for_ready(&redis, "t", 1).await;
    let popped = post(&http, &format!("{JOBS}/pop"), &json!({"topic": "t"})).json();
    assert_eq!(decode(&popped["data"]["body_base64"]), bytes, "{popped}");
    assert_eq!(popped["data"]["body"], "\u{fffd}\u{fffd}\u{0}ok");
    // A text body has no base64 beside it.
    client.push("t", "text").id("text").await.unwrap();
    let got = post(&http, &format!("{JOBS}/get"), &json!({"job_id": "text"})).json();
    assert!(got["data"].get("body_base64").is_none(), "{got}");
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());
}

#[tokio::test]
async fn a_backlog_shows_in_the_metrics_of_a_daemon_that_restarted() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "first", "");
    for id in ["a", "b"] {
        let message = Message {
            id: id.into(),
            topic: "backlog".into(),
            body: "b".into(),
        };
        legacy_client::push(&mut redis, &message, 0).await.unwrap();
    }
    wait_for_ready(&redis, "backlog", 2).await;
    let metrics = samples(&request(&http, "GET", "/metrics", &[], b"").body);
    assert_eq!(metrics["delayer_ready_jobs{topic=\"backlog\"}"], 2.0);
    daemon.stop();

    // A new daemon has moved nothing yet: the registry names the topic.
    let (daemon, _logs, http) = serving(&server, "second", "");
    let metrics = samples(&request(&http, "GET", "/metrics", &[], b"").body);
    assert_eq!(metrics["delayer_ready_jobs{topic=\"backlog\"}"], 2.0);
    let page = request(&http, "GET", "/", &[], b"").body;
    assert!(page.contains("backlog"), "{page}");
    daemon.stop();
}

#[tokio::test]
async fn a_body_at_the_limit_is_taken_however_its_json_escapes_it() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "escapes", "");
    // 1 MiB of "é" (two bytes each), each written as \u00e9 the way PHP's json_encode and
    // Python's json.dumps write it by default: a 3 MiB request.
    let body = "\\u00e9".repeat(1 << 19);
    let request = format!(r#"{{"id": "big", "topic": "t", "body": "{body}"}}"#);
    let answer = support::http_client::request(
        &http,
        "POST",
        &format!("{JOBS}/add"),
        &[],
        request.as_bytes(),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    let stored: Vec<u8> = redis.hget("delayer:job_bucket:big", "body").await.unwrap();
    assert_eq!(stored, "é".repeat(1 << 19).into_bytes());
    daemon.stop();
}

#[tokio::test]
async fn metrics_and_the_console_overview_stay_small_and_are_read_once_for_all_scrapers_however_many_topics()
 {
    const TOPICS: usize = 20_000;
    const LISTED: usize = 20;
    const SCRAPERS: usize = 16;
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    // Topics anyone who pushes can add; the first 100 with 1 to 100 ready jobs, and one with 500.
    let names: Vec<String> = (0..TOPICS).map(|index| format!("t-{index:05}")).collect();
    let mut pipe = delayer_client::redis::pipe();
    pipe.sadd(delayer_wire::keys::TOPICS, &names).ignore();
    pipe.sadd(delayer_wire::keys::TOPICS, "big").ignore();
    for (index, topic) in names.iter().take(100).enumerate() {
        let ids: Vec<String> = (0..=index).map(|id| id.to_string()).collect();
        pipe.lpush(ready_queue(topic), ids).ignore();
    }
    let ids: Vec<String> = (0..500).map(|id| id.to_string()).collect();
    pipe.lpush(ready_queue("big"), ids).ignore();
    pipe.query_async::<()>(&mut redis).await.unwrap();
    let (daemon, _logs, http) = serving(&server, "many", &format!("max_listed_topics = {LISTED}"));
    // 30 topics moved to: more than have counters of their own.
    for index in 0..30 {
        let message = Message {
            id: format!("m{index}"),
            topic: format!("m-{index:02}"),
            body: "b".into(),
        };
        legacy_client::push(&mut redis, &message, 0).await.unwrap();
    }
    support::wait_for_empty_pool(&redis, Duration::from_secs(5)).await;
    let all_topics = TOPICS + 1 + 30;

    let llen_calls = |stats: &HashMap<String, (u64, u64)>| stats.get("llen").map_or(0, |s| s.0);
    let before = llen_calls(&support::command_stats(&mut redis).await);
    let start = std::sync::Arc::new(std::sync::Barrier::new(SCRAPERS));
    let scrapers: Vec<_> = (0..SCRAPERS)
        .map(|index| {
            let (http, start) = (http.clone(), start.clone());
            std::thread::spawn(move || {
                let path = if index % 2 == 0 { "/metrics" } else { "/" };
                start.wait();
                (path, request(&http, "GET", path, &[], b""))
            })
        })
        .collect();
    for scraper in scrapers {
        let (path, answer) = scraper.join().unwrap();
        assert_eq!(answer.status, 200, "{path}");
        // However many topics: the overview's charts of the last hour (some 65 KB) are the same
        // size whatever the topics, and the topics listed are capped.
        assert!(
            answer.body.len() < 100_000,
            "{path}: {} bytes",
            answer.body.len()
        );
    }
    // One census: an LLEN of each topic's ready list and of its dead list.
    let read = llen_calls(&support::command_stats(&mut redis).await) - before;
    assert!(
        read <= 2 * all_topics as u64 + 10,
        "{SCRAPERS} scrapes read {read} lists: one census reads {}",
        2 * all_topics
    );

    let mut metrics = HashMap::new();
    support::wait_until_sync(Duration::from_secs(10), "a whole census", || {
        metrics = samples(&request(&http, "GET", "/metrics", &[], b"").body);
        metrics.get("delayer_topics") == Some(&(all_topics as f64))
    });
    let series = |family: &str| -> HashMap<String, f64> {
        metrics
            .iter()
            .filter_map(|(name, value)| {
                let topic = name.strip_prefix(family)?.strip_prefix("{topic=\"")?;
                Some((topic.strip_suffix("\"}")?.to_string(), *value))
            })
            .collect()
    };
    let mut listed: Vec<(String, f64)> = series("delayer_ready_jobs").into_iter().collect();
    listed.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut expected = vec![("big".to_string(), 500.0)];
    expected.extend(
        (81..100)
            .rev()
            .map(|index| (format!("t-{index:05}"), index as f64 + 1.0)),
    );
    assert_eq!(listed, expected);
    let all_ready = 500 + (1..=100).sum::<usize>() + 30;
    let listed_ready: f64 = listed.iter().map(|(_, ready)| ready).sum();
    assert_eq!(
        metrics["delayer_ready_jobs_unlisted"],
        all_ready as f64 - listed_ready
    );
    assert_eq!(
        metrics["delayer_topics_unlisted"],
        (all_topics - LISTED) as f64
    );
    let moved = series("delayer_jobs_moved_total");
    assert_eq!(moved.len(), LISTED + 1, "{moved:?}");
    assert_eq!(moved[""], 10.0, "the topics beyond the first {LISTED}");
    assert_eq!(moved.values().sum::<f64>(), 30.0);

    let page = request(&http, "GET", "/", &[], b"").body;
    assert_eq!(page.matches("<tr><td>").count(), LISTED, "{page}");
    let more = format!(
        "And {} more topics with {} ready jobs in all",
        all_topics - LISTED,
        all_ready as f64 - listed_ready
    );
    assert!(page.contains(&more), "{page}");
    daemon.stop();
}

#[tokio::test]
async fn a_batch_add_answers_the_ids_in_order_and_one_bad_job_adds_none() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "batch", "");
    let add = |body: serde_json::Value| post(&http, &format!("{JOBS}/add"), &body);

    for (batch, said) in [
        (
            json!({"jobs": [{"topic": "t", "body": "b"}, {"topic": "t", "delay": -1, "body": "b"}]}),
            "job 1 of the batch: delay -1 is negative",
        ),
        (
            json!({"jobs": [{"topic": "t", "body": "b"}, {"topic": "t", "body": ""}]}),
            "job 1 of the batch: the body is empty",
        ),
        (
            json!({"jobs": [{"id": "a", "topic": "t", "body": "b"}, {"id": "a", "topic": "u", "body": "c"}]}),
            "job 1 of the batch: job \"a\" is in the batch more than once",
        ),
        (json!({"jobs": []}), "jobs is empty"),
        (
            json!({"topic": "t", "body": "b", "jobs": [{"topic": "t", "body": "b"}]}),
            "not both",
        ),
    ] {
        let refused = add(batch);
        assert_eq!(refused.status, 400, "{}", refused.body);
        assert!(
            refused.json()["message"].as_str().unwrap().contains(said),
            "{}",
            refused.body
        );
        let pooled: usize = redis.zcard(JOB_POOL).await.unwrap();
        assert_eq!(pooled, 0, "nothing written");
    }

    let added = add(json!({"jobs": [
        {"id": "first", "topic": "order", "body": "1"},
        {"topic": "order", "delay": 3600, "body": "2"},
        {"id": "third", "topic": "mail", "at": "2050-01-01T00:00:00Z", "body": "3"},
    ]}));
    assert_eq!(added.status, 200, "{}", added.body);
    let ids = added.json()["data"]["ids"].clone();
    let ids: Vec<String> = serde_json::from_value(ids).unwrap();
    assert_eq!((ids.len(), &ids[0][..], &ids[2][..]), (3, "first", "third"));
    let third: Option<f64> = redis.zscore(JOB_POOL, "third").await.unwrap();
    assert_eq!(third, Some(2_524_608_000.0));
    let second: Option<f64> = redis.zscore(JOB_POOL, &ids[1]).await.unwrap();
    assert!(
        second.is_some(),
        "the job without an id is pooled under the id answered"
    );
    let popped = legacy_client::bpop(&mut redis, "order", 5).await.unwrap();
    assert_eq!(
        popped.map(|job| (job.id, job.body)),
        Some(("first".into(), "1".into()))
    );
    daemon.stop();
}
