//! The schedule API over real HTTP, beside a real daemon and redis-server: a schedule added there
//! is written to Redis and ticks; show, list, pause, resume, run and remove change what Redis
//! holds; bad definitions are refused naming the schedule and the field, with nothing written;
//! and with `[http] token` set, nothing is done without it.

use crate::support;

use std::collections::HashMap;

use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_wire::keys::{SCHEDULE_PREFIX, SCHEDULES, SCHEDULES_BY_NEXT, job_bucket};
use serde_json::{Value, json};
use support::http_client::{Answer, post, request, serving};
use support::{RedisServer, wait_for_ready};

const API: &str = "/delay-queue/api/schedules";

fn call(http: &str, what: &str, body: &Value) -> Answer {
    post(http, &format!("{API}/{what}"), body)
}

async fn schedule_hash(redis: &mut MultiplexedConnection, name: &str) -> HashMap<String, String> {
    redis
        .hgetall(format!("{SCHEDULE_PREFIX}{name}"))
        .await
        .unwrap()
}

async fn next_in_queue(redis: &mut MultiplexedConnection, name: &str) -> Option<f64> {
    redis.zscore(SCHEDULES_BY_NEXT, name).await.unwrap()
}

#[tokio::test]
async fn a_schedule_added_over_http_ticks_and_pause_resume_run_and_remove_change_what_redis_holds()
{
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "schedules", "");
    let definition = json!({
        "name": "beat", "cron": "* * * * * *", "zone": "Asia/Tokyo", "topic": "pulse",
        "body": "{\"n\":1}", "catch_up": "latest", "catch_up_window": "2h", "overlap": "allow",
    });

    let added = call(&http, "add", &definition);
    assert_eq!(added.status, 200, "{}", added.body);
    let added = added.json();
    assert_eq!(added["message"], "created");
    let ticks = added["data"]["next_ticks"].as_array().unwrap();
    assert_eq!(ticks.len(), 5, "{added}");
    assert!(
        ticks
            .iter()
            .all(|tick| tick.as_str().unwrap().ends_with("+09:00")),
        "in the schedule's zone: {added}"
    );
    let stored = schedule_hash(&mut redis, "beat").await;
    for (field, value) in [
        ("cron", "* * * * * *"),
        ("zone", "Asia/Tokyo"),
        ("topic", "pulse"),
        ("body", "{\"n\":1}"),
        ("catch_up", "latest"),
        ("catch_up_window", "7200"),
        ("overlap", "allow"),
        ("source", "api"),
    ] {
        assert_eq!(
            stored.get(field).map(String::as_str),
            Some(value),
            "{field}"
        );
    }
    let registered: Option<String> = redis.hget(SCHEDULES, "beat").await.unwrap();
    assert_eq!(registered.as_deref(), Some("pulse"));
    let again = call(&http, "add", &definition).json();
    assert_eq!(again["message"], "unchanged", "{again}");

    // It ticks: the daemon pushes its jobs, which reach the topic's ready list.
    let ready = wait_for_ready(&redis, "pulse", 1).await;
    assert!(ready[0].to_string().starts_with("beat@"), "{ready:?}");
    let listed = call(&http, "list", &json!({})).json();
    let names: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|schedule| schedule["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["beat"], "{listed}");
    let shown = call(&http, "show", &json!({"name": "beat"})).json();
    assert!(shown["data"]["fired"].as_u64().unwrap() >= 1, "{shown}");
    assert_eq!(shown["data"]["catch_up_window_seconds"], 7200, "{shown}");

    let paused = call(&http, "pause", &json!({"name": "beat"})).json();
    assert_eq!(
        (&paused["message"], &paused["data"]["changed"]),
        (&json!("paused"), &json!(true)),
        "{paused}"
    );
    assert!(
        schedule_hash(&mut redis, "beat")
            .await
            .contains_key("paused")
    );
    assert_eq!(
        next_in_queue(&mut redis, "beat").await,
        None,
        "no daemon claims it"
    );
    let twice = call(&http, "pause", &json!({"name": "beat"})).json();
    assert_eq!(twice["data"]["changed"], false, "{twice}");
    let resumed = call(&http, "resume", &json!({"name": "beat"})).json();
    assert_eq!(resumed["message"], "resumed", "{resumed}");
    assert!(
        !schedule_hash(&mut redis, "beat")
            .await
            .contains_key("paused")
    );
    assert!(next_in_queue(&mut redis, "beat").await.is_some());

    let run = call(&http, "run", &json!({"name": "beat"})).json();
    let id = run["data"]["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("beat@") && id.ends_with("/run"), "{run}");
    let bucket: HashMap<String, String> = redis.hgetall(job_bucket(&id)).await.unwrap();
    assert_eq!(
        (bucket.get("topic"), bucket.get("body")),
        (Some(&"pulse".to_string()), Some(&"{\"n\":1}".to_string()))
    );
    assert_eq!(schedule_hash(&mut redis, "beat").await["runs"], "1");

    let removed = call(&http, "remove", &json!({"name": "beat"}));
    assert_eq!(removed.status, 200, "{}", removed.body);
    assert!(schedule_hash(&mut redis, "beat").await.is_empty());
    assert_eq!(next_in_queue(&mut redis, "beat").await, None);
    let registered: Option<String> = redis.hget(SCHEDULES, "beat").await.unwrap();
    assert_eq!(registered, None);
    let kept: bool = redis.exists(job_bucket(&id)).await.unwrap();
    assert!(kept, "the jobs it pushed stay");
    let gone = call(&http, "show", &json!({"name": "beat"}));
    assert_eq!(gone.status, 404, "{}", gone.body);
    daemon.stop();
}

#[tokio::test]
async fn bad_definitions_are_refused_naming_the_schedule_and_the_field_and_nothing_is_written() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "bad", "");
    let with = |change: Value| {
        let mut definition = json!({"name": "bad", "cron": "0 3 * * *", "topic": "t"});
        for (field, value) in change.as_object().unwrap() {
            definition[field] = value.clone();
        }
        definition
    };
    for (definition, said) in [
        (
            with(json!({"cron": "0 0 30 2 *"})),
            "schedule \"bad\": cron: ",
        ),
        (with(json!({"cron": "often"})), "schedule \"bad\": cron: "),
        (
            with(json!({"zone": "Mars/Base"})),
            "schedule \"bad\": zone: ",
        ),
        (
            with(json!({"topic": ""})),
            "schedule \"bad\": topic: is empty",
        ),
        (
            json!({"name": "bad", "cron": "* * * * *"}),
            "schedule \"bad\": topic: is missing",
        ),
        (
            json!({"cron": "* * * * *", "topic": "t"}),
            "name: is missing",
        ),
        (with(json!({"name": "a b"})), "schedule \"a b\": name: "),
        (
            with(json!({"catch_up": "sometimes"})),
            "schedule \"bad\": catch_up: ",
        ),
        (
            with(json!({"catch_up_window": "forever"})),
            "schedule \"bad\": catch_up_window: ",
        ),
        (
            with(json!({"catch_up_window": -5})),
            "schedule \"bad\": catch_up_window: ",
        ),
        (
            with(json!({"catch_up_window": 0})),
            "schedule \"bad\": catch_up_window: ",
        ),
        (
            with(json!({"overlap": "never"})),
            "schedule \"bad\": overlap: ",
        ),
        // A misspelt field would otherwise be its default, silently.
        (with(json!({"catchup": "all"})), "unknown field `catchup`"),
    ] {
        let refused = call(&http, "add", &definition);
        assert_eq!(refused.status, 400, "{definition}: {}", refused.body);
        let message = refused.json()["message"].as_str().unwrap().to_string();
        assert!(message.contains(said), "{definition}: {message}");
    }
    let malformed = request(&http, "POST", &format!("{API}/add"), &[], b"{\"name\":");
    assert_eq!(malformed.status, 400, "{}", malformed.body);
    let written: Vec<String> = redis.keys("delayer:schedule*").await.unwrap();
    assert!(written.is_empty(), "{written:?}");

    // A bad change of a schedule leaves it as it was.
    let good = call(&http, "add", &with(json!({"zone": "Europe/Paris"})));
    assert_eq!(good.status, 200, "{}", good.body);
    let refused = call(&http, "add", &with(json!({"zone": "Europe/Nowhere"})));
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(
        schedule_hash(&mut redis, "bad").await["zone"],
        "Europe/Paris"
    );

    // An unknown schedule is a 404 that names it; a request naming none, a 400.
    for what in ["show", "pause", "resume", "remove", "run"] {
        let unknown = call(&http, what, &json!({"name": "nope"}));
        assert_eq!(unknown.status, 404, "{what}: {}", unknown.body);
        assert!(
            unknown.body.contains(r#"there is no schedule \"nope\""#),
            "{what}: {}",
            unknown.body
        );
        let unnamed = call(&http, what, &json!({}));
        assert_eq!(unnamed.status, 400, "{what}: {}", unnamed.body);
    }
    let pushed: Vec<String> = redis.keys("delayer:job_bucket:*").await.unwrap();
    assert!(pushed.is_empty(), "{pushed:?}");
    daemon.stop();
}

#[tokio::test]
async fn with_a_token_the_schedule_api_wants_it_and_reads_json_whatever_its_content_type() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "guarded", "token = s3cret");
    let definition = json!({"name": "n", "cron": "0 3 * * *", "topic": "t"}).to_string();
    let add = format!("{API}/add");

    let refused = request(&http, "POST", &add, &[], definition.as_bytes());
    assert_eq!(refused.status, 401, "{}", refused.body);
    let wrong = [("Authorization", "Bearer guess")];
    let refused = request(&http, "POST", &add, &wrong, definition.as_bytes());
    assert_eq!(refused.status, 401, "{}", refused.body);
    let exists: bool = redis.exists(format!("{SCHEDULE_PREFIX}n")).await.unwrap();
    assert!(!exists);

    // A GET acts not; a browser's request from another site is refused, with the token or not.
    let bearer = ("Authorization", "Bearer s3cret");
    let get = request(&http, "GET", &format!("{API}/list"), &[bearer], b"");
    assert_eq!(get.status, 405, "{}", get.body);
    let cross = [bearer, ("Sec-Fetch-Site", "cross-site")];
    let refused = request(&http, "POST", &add, &cross, definition.as_bytes());
    assert_eq!(refused.status, 403, "{}", refused.body);
    let exists: bool = redis.exists(format!("{SCHEDULE_PREFIX}n")).await.unwrap();
    assert!(!exists);

    // A form's type, as `curl -d` sends it, is read as JSON all the same.
    let form = [
        bearer,
        ("Content-Type", "application/x-www-form-urlencoded"),
    ];
    let added = request(&http, "POST", &add, &form, definition.as_bytes());
    assert_eq!(added.status, 200, "{}", added.body);
    let exists: bool = redis.exists(format!("{SCHEDULE_PREFIX}n")).await.unwrap();
    assert!(exists);
    let listed = request(&http, "POST", &format!("{API}/list"), &[], b"");
    assert_eq!(listed.status, 401, "{}", listed.body);
    daemon.stop();
}
