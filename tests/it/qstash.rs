//! QStash's API, for real: QStash's own SDKs, Python's (PyPI `qstash`, `support/qstash_client.py`)
//! and TypeScript's (npm `@upstash/qstash`, `support/qstash_client.cjs`), with their base URL set
//! to a daemon, publishes, batches, gets and cancels messages; each is
//! delivered to a receiver on the loopback when due, with QStash's headers and a signature that
//! the SDK's `Receiver` accepts. Bad input is refused naming what is wrong.

use crate::support;

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use support::http_client::serving_with;
use support::receiver::{Received, Receiver, Reply, refused_signatures};
use support::{DaemonSetup, RedisServer, delayer_succeeds, run_script};

const TOKEN: &str = "qstash-token";

/// What Python's SDK returned for `command` with `arguments`, against the daemon at `address`.
fn sdk(address: &str, token: &str, command: &str, arguments: Value) -> Value {
    driven("qstash_client.py", address, token, command, arguments)
}

/// What QStash's TypeScript SDK returned for `call` (a method from its client: `publishJSON`,
/// `messages.cancel`, `queue(q).upsert`) with `arguments`, an array.
fn ts_sdk(address: &str, call: &str, arguments: Value) -> Value {
    driven("qstash_client.cjs", address, TOKEN, call, arguments)
}

/// What the SDK that `script` drives returned for `command` with `arguments`.
fn driven(script: &str, address: &str, token: &str, command: &str, arguments: Value) -> Value {
    let base = format!("http://{address}");
    let printed = run_script(
        script,
        &[&base, token, command],
        arguments.to_string().as_bytes(),
    );
    serde_json::from_str(&printed).unwrap_or_else(|_| panic!("{command}: {printed}"))
}

/// This host's clock, unix ms.
fn unix_ms() -> i64 {
    delayer_wire::time::to_unix_ms(SystemTime::now())
}

#[tokio::test(flavor = "multi_thread")]
async fn qstash_s_python_sdk_publishes_batches_gets_and_cancels_and_each_delivery_is_signed() {
    let receiver = Receiver::start(|_, _| Reply::ok()).await;
    let server = RedisServer::start();
    let qstash = format!(
        "\n[qstash]\ntoken = {TOKEN}\ncurrent_signing_key = sig_current\n\
         next_signing_key = sig_next\nallow = 127.0.0.1\n"
    );
    let (_daemon, _logs, address) = serving_with(&server, "a", "", &qstash);
    let call = |command: &str, arguments: Value| sdk(&address, TOKEN, command, arguments);

    let keys = call("keys", json!({}));
    assert_eq!(keys, json!({"current": "sig_current", "next": "sig_next"}));

    let hook = format!("{}/hook?order=42", receiver.url);
    let published_at = unix_ms();
    let published = call(
        "publish_json",
        json!({
            "url": hook,
            "body": {"order": 42},
            "headers": {"X-Order": "42"},
            "delay": "2s",
            "retries": 2,
            "label": "orders",
        }),
    );
    let id = published["message_id"].as_str().unwrap().to_string();
    assert!(id.starts_with("msg_"), "{published}");
    let message = call("get", json!({ "id": id }));
    assert_eq!(message["url"], hook.as_str(), "{message}");
    assert_eq!(message["method"], "POST");
    assert_eq!(message["max_retries"], 2);
    assert_eq!(message["body"], "{\"order\": 42}");
    assert_eq!(message["label"], "orders");
    assert_eq!(message["headers"]["X-Order"], json!(["42"]));
    let not_before = message["not_before"].as_i64().unwrap();
    assert!(not_before >= published_at + 2_000, "{message}");

    let at = (unix_ms() / 1000 + 3) as u64;
    let later = call(
        "publish_json",
        json!({"url": format!("{}/later", receiver.url), "body": "at", "not_before": at}),
    );
    let later_id = later["message_id"].as_str().unwrap().to_string();
    assert_eq!(
        call("get", json!({ "id": later_id }))["not_before"],
        at * 1000
    );
    let batch = call(
        "batch_json",
        json!([
            {"url": format!("{}/batch/1", receiver.url), "body": {"n": 1}},
            {"url": format!("{}/batch/2", receiver.url), "body": {"n": 2}},
        ]),
    );
    let batched: Vec<&str> = batch
        .as_array()
        .unwrap()
        .iter()
        .map(|reply| reply["message_id"].as_str().unwrap())
        .collect();
    assert_eq!(batched.len(), 2, "{batch}");

    let received = receiver.wait_for(4, Duration::from_secs(30)).await;
    let by_id = |id: &str| -> Received {
        received
            .iter()
            .find(|request| request.header("upstash-message-id") == id)
            .unwrap_or_else(|| panic!("{id} not delivered: {received:?}"))
            .clone()
    };
    let first = by_id(&id);
    assert_eq!(first.path, "/hook?order=42");
    assert_eq!(first.body, b"{\"order\": 42}");
    assert_eq!(first.header("x-order"), "42");
    assert_eq!(first.header("content-type"), "application/json");
    assert_eq!(first.header("user-agent"), "Upstash-QStash");
    assert_eq!(first.header("upstash-retried"), "0");
    assert!(first.at_ms >= not_before, "delivered at {} ms", first.at_ms);
    assert!(by_id(&later_id).at_ms >= at as i64 * 1000);
    assert_eq!(by_id(batched[1]).body, b"{\"n\": 2}");
    let url_of = |request: &Received| format!("{}{}", receiver.url, request.path);
    let refused = refused_signatures(&received, "sig_current", "sig_next", url_of);
    assert!(refused.is_empty(), "QStash's Receiver refused: {refused:?}");
    // Delivered, it stays readable a while.
    assert_eq!(call("get", json!({ "id": id }))["url"], hook.as_str());

    // Cancelled before their time: never delivered.
    let pending: Vec<String> = (0..5)
        .map(|n| {
            let reply = call(
                "publish_json",
                json!({"url": format!("{}/never/{n}", receiver.url), "body": n, "delay": "1h"}),
            );
            reply["message_id"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(call("cancel", json!({ "id": pending[0] })), Value::Null);
    let gone = call("get", json!({ "id": pending[0] }));
    assert!(
        gone["error"]
            .as_str()
            .unwrap()
            .contains("message not found"),
        "{gone}"
    );
    assert_eq!(
        call("cancel_many", json!({ "ids": [pending[1], pending[2]] })),
        2
    );
    assert_eq!(
        call("cancel_many", json!({ "ids": [] })),
        0,
        "none named, none cancelled"
    );
    assert_eq!(call("cancel_all", json!({})), 2);
    assert_eq!(call("cancel_all", json!({})), 0);

    // A deduplication id within 10 minutes answers the first message.
    let once = json!({"url": format!("{}/once", receiver.url), "body": 1, "deduplication_id": "d-1", "delay": "1h"});
    let first_id = call("publish_json", once.clone())["message_id"].clone();
    let again = call("publish_json", once);
    assert_eq!(
        (&again["message_id"], &again["deduplicated"]),
        (&first_id, &json!(true))
    );

    // Messages are jobs: the shell sees them.
    let config = server.daemon_config("shell", "").0;
    let shown = delayer_succeeds(&config, &["get", first_id.as_str().unwrap()]);
    assert!(shown.contains("\"topic\":\"qstash\""), "{shown}");

    let ids: HashSet<&str> = received
        .iter()
        .map(|request| request.header("upstash-message-id"))
        .collect();
    assert_eq!(ids.len(), received.len(), "each once");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_out_of_retries_is_in_the_dlq_with_its_reply_and_goes_again_on_retry() {
    // Each path answers 404 until the test lets it through.
    let healed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let open = healed.clone();
    let receiver = Receiver::start(move |_, _| {
        if open.load(std::sync::atomic::Ordering::SeqCst) {
            Reply::ok()
        } else {
            Reply::Status(404, Vec::new(), "404 Not Found".into())
        }
    })
    .await;
    let server = RedisServer::start();
    let qstash = format!("\n[qstash]\ntoken = {TOKEN}\nallow = 127.0.0.1\n");
    let (_daemon, _logs, address) = serving_with(&server, "a", "", &qstash);
    let call = |command: &str, arguments: Value| sdk(&address, TOKEN, command, arguments);
    let ids: Vec<String> = (0..3)
        .map(|n| {
            let reply = call(
                "publish_json",
                json!({
                    "url": format!("{}/missing/{n}", receiver.url),
                    "body": n,
                    "retries": 1,
                    "retry_delay": "7000 * retried",
                }),
            );
            reply["message_id"].as_str().unwrap().to_string()
        })
        .collect();
    let listed = support::wait_for(Duration::from_secs(30), "3 messages in the DLQ", || async {
        let listed = call("dlq_list", json!({}));
        (listed["messages"].as_array().unwrap().len() == 3).then_some(listed)
    })
    .await;
    let dead = &listed["messages"][0];
    assert_eq!(
        dead["message_id"],
        ids[2].as_str(),
        "newest first: {listed}"
    );
    assert_eq!(dead["dlq_id"], ids[2].as_str());
    assert_eq!(dead["response_status"], 404);
    assert_eq!(dead["response_body"], "404 Not Found");
    assert_eq!(dead["retry_delay_expression"], "7000 * retried");
    assert_eq!(dead["max_retries"], 1);
    assert_eq!(receiver.received().len(), 6, "each tried twice");
    assert_eq!(call("dlq_get", json!({ "id": ids[0] }))["body"], "0");

    assert_eq!(call("dlq_delete", json!({ "id": ids[0] })), Value::Null);
    let again = call("dlq_delete", json!({ "id": ids[0] }));
    assert!(again["error"].as_str().unwrap().contains("404"), "{again}");
    assert_eq!(call("dlq_delete_many", json!({ "ids": [ids[1]] })), 1);

    // Retried (TypeScript's SDK does this), it goes again and is delivered.
    healed.store(true, std::sync::atomic::Ordering::SeqCst);
    let retried = support::http_client::request(
        &address,
        "POST",
        &format!("/v2/dlq/retry/{}", ids[2]),
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        b"",
    );
    assert_eq!(retried.status, 201, "{}", retried.body);
    receiver.wait_for(7, Duration::from_secs(30)).await;
    let last = receiver.received().pop().unwrap();
    assert_eq!(last.header("upstash-message-id"), ids[2]);
    let listed = call("dlq_list", json!({}));
    assert_eq!(listed["messages"], json!([]), "{listed}");
}

#[tokio::test(flavor = "multi_thread")]
async fn flow_control_keys_hold_parallelism_and_rate_over_two_daemons() {
    let receiver = Receiver::start(|request, _| {
        if request.path.starts_with("/parallel") {
            Reply::After(Duration::from_millis(200))
        } else {
            Reply::ok()
        }
    })
    .await;
    let server = RedisServer::start();
    let qstash = format!("\n[qstash]\ntoken = {TOKEN}\nallow = 127.0.0.1\n");
    let (_a, _, address) = serving_with(&server, "a", "", &qstash);
    let (_b, _, _) = serving_with(&server, "b", "", &qstash);
    let call = |command: &str, arguments: Value| sdk(&address, TOKEN, command, arguments);
    let batch: Vec<Value> = (0..12)
        .map(|n| {
            json!({
                "url": format!("{}/parallel", receiver.url),
                "body": n,
                "flow_control": {"key": "payments", "parallelism": 2},
            })
        })
        .chain((0..10).map(|n| {
            json!({
                "url": format!("{}/rated", receiver.url),
                "body": n,
                "flow_control": {"key": "mails", "rate": 5, "period": "1s"},
            })
        }))
        .collect();
    let published = call("batch_json", json!(batch));
    let first = published[0]["message_id"].as_str().unwrap();
    let shown = call("get", json!({ "id": first }));
    assert_eq!(
        shown["flow_control"],
        json!({"key": "payments", "parallelism": 2, "rate": null, "period": 1}),
        "{shown}"
    );
    receiver.wait_for(22, Duration::from_secs(60)).await;
    let most = receiver.most_in_flight("/parallel");
    assert!(
        (1..=2).contains(&most),
        "{most} in flight at once over parallelism 2"
    );
    let starts = receiver.arrivals("/rated");
    // 10 starts, 200 ms apart (5 a second): 9 gaps, less a few ms of the way.
    let span = starts[9] - starts[0];
    assert!(span >= 1_800 - 50, "10 messages at 5/s took {span} ms");
    let bad = call(
        "publish_json",
        json!({"url": format!("{}/x", receiver.url), "body": 1, "flow_control": {"key": "k", "parallelism": 0}}),
    );
    let why = bad["error"].as_str().unwrap_or_default();
    assert!(
        why.contains("Upstash-Flow-Control-Value") && why.contains("above 0"),
        "{bad}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn schedules_made_with_qstash_s_sdk_tick_once_each_and_pause_list_and_delete() {
    let receiver = Receiver::start(|_, _| Reply::ok()).await;
    let server = RedisServer::start();
    let qstash = format!(
        "\n[qstash]\ntoken = {TOKEN}\nallow = 127.0.0.1\ncurrent_signing_key = sig_a\n\
         next_signing_key = sig_b\n"
    );
    let (_a, _, address) = serving_with(&server, "a", "", &qstash);
    let (_b, _, _) = serving_with(&server, "b", "", &qstash);
    let call = |command: &str, arguments: Value| sdk(&address, TOKEN, command, arguments);
    let every = call(
        "schedule_create_json",
        json!({
            "destination": format!("{}/tick", receiver.url),
            "cron": "every 1s",
            "body": {"report": "sales"},
            "schedule_id": "sales-report",
            "retries": 1,
        }),
    );
    assert_eq!(every, "sales-report");
    let paris = call(
        "schedule_create_json",
        json!({
            "destination": format!("{}/morning", receiver.url),
            "cron": "CRON_TZ=Europe/Paris 0 9 * * *",
            "body": "good morning",
        }),
    );
    let paris = paris.as_str().unwrap().to_string();
    assert!(paris.starts_with("scd_"), "{paris}");
    let shown = call("schedule_get", json!({ "id": paris }));
    assert_eq!(shown["cron"], "CRON_TZ=Europe/Paris 0 9 * * *", "{shown}");
    assert_eq!(shown["destination"], format!("{}/morning", receiver.url));
    assert_eq!(shown["paused"], false);
    assert!(shown["next_schedule_time"].as_i64().unwrap() > unix_ms());

    let ticks = receiver.wait_for(3, Duration::from_secs(30)).await;
    let ids: HashSet<&str> = ticks
        .iter()
        .map(|r| r.header("upstash-message-id"))
        .collect();
    assert_eq!(
        ids.len(),
        ticks.len(),
        "each tick once, over two daemons: {ticks:?}"
    );
    for tick in &ticks {
        assert_eq!(tick.path, "/tick");
        assert_eq!(tick.header("upstash-schedule-id"), "sales-report");
        assert_eq!(tick.body, b"{\"report\": \"sales\"}");
    }
    let url_of = |request: &Received| format!("{}{}", receiver.url, request.path);
    assert!(refused_signatures(&ticks, "sig_a", "sig_b", url_of).is_empty());
    let message = call(
        "get",
        json!({ "id": ticks[0].header("upstash-message-id") }),
    );
    assert_eq!(message["schedule_id"], "sales-report", "{message}");

    assert_eq!(
        call("schedule_pause", json!({ "id": "sales-report" })),
        Value::Null
    );
    assert_eq!(
        call("schedule_get", json!({ "id": "sales-report" }))["paused"],
        true
    );
    let listed = call("schedule_list", json!({}));
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|schedule| schedule["schedule_id"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["sales-report", paris.as_str()], "by id");
    assert_eq!(
        call("schedule_delete", json!({ "id": "sales-report" })),
        Value::Null
    );
    let listed = call("schedule_list", json!({}));
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    let gone = call("schedule_get", json!({ "id": "sales-report" }));
    assert!(gone["error"].as_str().unwrap().contains("404"), "{gone}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_queue_delivers_in_order_within_its_parallelism_over_two_daemons_and_pauses() {
    let receiver = Receiver::start(|_, _| Reply::After(Duration::from_millis(50))).await;
    let server = RedisServer::start();
    let qstash = format!("\n[qstash]\ntoken = {TOKEN}\nallow = 127.0.0.1\n");
    let (_a, _, address) = serving_with(&server, "a", "", &qstash);
    let (_b, _, _) = serving_with(&server, "b", "", &qstash);
    let call = |command: &str, arguments: Value| sdk(&address, TOKEN, command, arguments);
    assert_eq!(
        call("queue_upsert", json!({"queue": "orders", "parallelism": 1})),
        Value::Null
    );
    let enqueue = |n: usize| {
        call(
            "enqueue_json",
            json!({"queue": "orders", "url": format!("{}/orders", receiver.url), "body": n}),
        )
    };
    let first = enqueue(0);
    for n in 1..12 {
        enqueue(n);
    }
    let id = first["message_id"].as_str().unwrap();
    let received = receiver.wait_for(12, Duration::from_secs(60)).await;
    let order: Vec<String> = received
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    let expected: Vec<String> = (0..12).map(|n| n.to_string()).collect();
    assert_eq!(order, expected, "in the order enqueued");
    assert_eq!(receiver.most_in_flight("/orders"), 1, "one at a time");
    assert_eq!(call("get", json!({ "id": id }))["queue"], "orders");
    let queue = support::wait_for(
        Duration::from_secs(10),
        "the queue's lag to be 0",
        || async {
            let queue = call("queue_get", json!({"queue": "orders"}));
            (queue["lag"] == 0).then_some(queue)
        },
    )
    .await;
    assert_eq!(
        (&queue["parallelism"], &queue["paused"]),
        (&json!(1), &json!(false))
    );

    // Paused, it keeps what comes; resumed, it sends it.
    assert_eq!(call("queue_pause", json!({"queue": "orders"})), Value::Null);
    enqueue(12);
    enqueue(13);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(receiver.received().len(), 12, "nothing goes while paused");
    assert_eq!(call("queue_get", json!({"queue": "orders"}))["lag"], 2);
    assert_eq!(
        call("queue_resume", json!({"queue": "orders"})),
        Value::Null
    );
    let received = receiver.wait_for(14, Duration::from_secs(30)).await;
    assert_eq!(received[12].body, b"12");
    assert_eq!(received[13].body, b"13");

    // A new queue is made with parallelism 1; the list shows both; a delete takes one away.
    call(
        "enqueue_json",
        json!({"queue": "mails", "url": format!("{}/mails", receiver.url), "body": "m"}),
    );
    let names: Vec<Value> = call("queue_list", json!({}))
        .as_array()
        .unwrap()
        .iter()
        .map(|queue| queue["name"].clone())
        .collect();
    assert_eq!(names, [json!("mails"), json!("orders")]);
    assert_eq!(call("queue_delete", json!({"queue": "mails"})), Value::Null);
    let left = call("queue_list", json!({}));
    assert_eq!(left.as_array().unwrap().len(), 1, "{left}");
    receiver.wait_for(15, Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn callbacks_tell_of_each_try_and_failure_callbacks_of_the_tries_running_out() {
    let receiver = Receiver::start(|request, _| match request.path.as_str() {
        "/bad" => Reply::Status(500, Vec::new(), "broken".into()),
        _ => Reply::Status(200, vec![("x-answer", "yes".into())], "fine".into()),
    })
    .await;
    let server = RedisServer::start();
    let qstash = format!("\n[qstash]\ntoken = {TOKEN}\nallow = 127.0.0.1\n");
    let (_daemon, _, address) = serving_with(&server, "a", "", &qstash);
    let call = |command: &str, arguments: Value| sdk(&address, TOKEN, command, arguments);
    let url = &receiver.url;
    let good = call(
        "publish_json",
        json!({
            "url": format!("{url}/ok"),
            "body": {"n": 1},
            "callback": format!("{url}/cb"),
            "failure_callback": format!("{url}/fcb"),
            "callback_headers": {"X-Token": "t1"},
        }),
    )["message_id"]
        .as_str()
        .unwrap()
        .to_string();
    let shown = call("get", json!({ "id": good }));
    assert_eq!(shown["callback"], format!("{url}/cb"), "{shown}");
    let bad = call(
        "publish_json",
        json!({
            "url": format!("{url}/bad"),
            "body": {"n": 2},
            "retries": 1,
            "retry_delay": "0",
            "callback": format!("{url}/cb"),
            "failure_callback": format!("{url}/fcb"),
        }),
    )["message_id"]
        .as_str()
        .unwrap()
        .to_string();
    // /ok and its callback; /bad twice, a callback of its first try, and its failure callback.
    let received = receiver.wait_for(6, Duration::from_secs(30)).await;
    let at = |path: &str| -> Vec<Value> {
        received
            .iter()
            .filter(|request| request.path == path)
            .map(|request| serde_json::from_slice(&request.body).unwrap())
            .collect()
    };
    let callbacks = at("/cb");
    assert_eq!(callbacks.len(), 2, "{callbacks:?}");
    let of_good = callbacks
        .iter()
        .find(|told| told["sourceMessageId"] == good.as_str())
        .unwrap();
    assert_eq!(of_good["status"], 200);
    assert_eq!(of_good["body"], "ZmluZQ==", "base64 of fine");
    assert_eq!(of_good["header"]["x-answer"], json!(["yes"]));
    assert_eq!(
        of_good["sourceBody"], "eyJuIjogMX0=",
        "base64 of the message's body"
    );
    assert_eq!(of_good["url"], format!("{url}/ok"));
    let told = received
        .iter()
        .find(|request| {
            request.path == "/cb" && request.body == serde_json::to_vec(of_good).unwrap()
        })
        .or_else(|| received.iter().find(|request| request.path == "/cb"))
        .unwrap();
    assert_eq!(told.header("content-type"), "application/json");
    let of_bad = callbacks
        .iter()
        .find(|told| told["sourceMessageId"] == bad.as_str())
        .unwrap();
    assert_eq!(
        (&of_bad["status"], &of_bad["retried"]),
        (&json!(500), &json!(0))
    );
    let failures = at("/fcb");
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0]["sourceMessageId"], bad.as_str());
    assert_eq!(failures[0]["dlqId"], bad.as_str());
    assert_eq!(failures[0]["status"], 500);
    assert_eq!(failures[0]["body"], "YnJva2Vu", "base64 of broken");
    assert_eq!(failures[0]["retried"], 1);
    let forwarded = received
        .iter()
        .filter(|request| request.path == "/cb")
        .any(|request| request.header("x-token") == "t1");
    assert!(forwarded, "the callback's header is sent with it");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_to_qstash_s_api_is_refused_naming_what_is_wrong() {
    let server = RedisServer::start();
    let qstash = format!("\n[qstash]\ntoken = {TOKEN}\n");
    let (_daemon, _logs, address) = serving_with(&server, "a", "", &qstash);
    let error = |token: &str, command: &str, arguments: Value| -> String {
        let reply = sdk(&address, token, command, arguments);
        reply["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{command} was not refused: {reply}"))
            .to_string()
    };
    let wrong = error("wrong", "keys", json!({}));
    assert!(
        wrong.contains("status: 401") && wrong.contains("[qstash] token"),
        "{wrong}"
    );
    let inner = error(
        TOKEN,
        "publish_json",
        json!({"url": "http://169.254.169.254/latest/meta-data", "body": 1}),
    );
    assert!(
        inner.contains("status: 400")
            && inner.contains("link-local")
            && inner.contains("[qstash] allow"),
        "{inner}"
    );
    let local = error(
        TOKEN,
        "publish_json",
        json!({"url": "http://127.0.0.1:1/", "body": 1}),
    );
    assert!(local.contains("a loopback address"), "{local}");
    let delay = error(
        TOKEN,
        "publish_json",
        json!({"url": "http://192.0.2.1/", "body": 1, "delay": "soon"}),
    );
    assert!(
        delay.contains("status: 400") && delay.contains("Upstash-Delay"),
        "{delay}"
    );
    let retry = error(
        TOKEN,
        "publish_json",
        json!({"url": "http://192.0.2.1/", "body": 1, "retry_delay": "pow(2)"}),
    );
    assert!(
        retry.contains("Upstash-Retry-Delay") && retry.contains("pow takes 2 arguments"),
        "{retry}"
    );
    let big = error(
        TOKEN,
        "publish",
        json!({"url": "http://192.0.2.1/", "body": "x".repeat(2 << 20)}),
    );
    assert!(
        big.contains("status: 413") && big.contains("max_body_bytes"),
        "{big}"
    );
    let queue = error(
        TOKEN,
        "enqueue_json",
        json!({"queue": "a/b", "url": "http://192.0.2.1/", "body": 1}),
    );
    assert!(queue.contains("status: 400"), "{queue}");
    let groups = error(TOKEN, "publish_json", json!({"url_group": "g", "body": 1}));
    assert!(groups.contains("URL groups are not served"), "{groups}");
    let cron = error(
        TOKEN,
        "schedule_create_json",
        json!({"destination": "http://192.0.2.1/", "cron": "61 * * * *", "body": 1}),
    );
    assert!(
        cron.contains("status: 400") && cron.contains("Upstash-Cron"),
        "{cron}"
    );
    let group = error(
        TOKEN,
        "publish_json",
        json!({"url_group": "mygroup", "body": 1}),
    );
    assert!(group.contains("URL groups are not served"), "{group}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_that_points_inside_by_delivery_time_is_not_called() {
    let receiver = Receiver::start(|_, _| Reply::ok()).await;
    let server = RedisServer::start();
    let qstash = format!("\n[qstash]\ntoken = {TOKEN}\n");
    let (_daemon, _logs, address) = serving_with(&server, "a", "", &qstash);
    let port = receiver.url.rsplit(':').next().unwrap();
    let rebound = format!("http://localhost:{port}/rebound");
    let published = sdk(
        &address,
        TOKEN,
        "publish_json",
        json!({"url": rebound, "body": 1}),
    );
    assert!(
        published["error"].as_str().unwrap().contains("loopback"),
        "{published}"
    );
    // As if published while the name pointed elsewhere (DNS rebinding): the message as the
    // API writes it, straight into Redis.
    let client = delayer_client::Client::connect(server.info())
        .await
        .unwrap();
    let now = unix_ms();
    let message = json!({
        "url": rebound, "method": "POST", "body": "MQ==", "retries": 0,
        "createdAt": now, "notBefore": now,
    });
    client
        .push("qstash", message.to_string())
        .id("msg_rebound")
        .await
        .unwrap();
    let died = support::wait_for(Duration::from_secs(30), "the message dead", || {
        let client = client.clone();
        async move {
            let info = client.get("msg_rebound").await.unwrap();
            (info.state == delayer_client::State::Dead).then_some(info.died_why)
        }
    })
    .await
    .unwrap_or_default();
    assert!(
        died.contains("localhost now resolves to") && died.contains("loopback"),
        "{died}"
    );
    assert!(receiver.received().is_empty(), "{:?}", receiver.received());
}

/// Go's SDK (github.com/upstash/qstash-go) cannot be fetched here: this machine reaches no Go
/// module proxy. What its source sends where the other SDKs differ is sent as it sends it.
#[tokio::test(flavor = "multi_thread")]
async fn requests_as_qstash_s_go_sdk_sends_them_are_served() {
    let receiver = Receiver::start(|_, _| Reply::ok()).await;
    let server = RedisServer::start();
    let qstash = format!("\n[qstash]\ntoken = {TOKEN}\nallow = 127.0.0.1\n");
    let (_daemon, _logs, address) = serving_with(&server, "a", "", &qstash);
    let bearer = format!("Bearer {TOKEN}");
    let send = |method: &str, path: &str, headers: &[(&str, &str)], body: &str| {
        let mut all = vec![("Authorization", bearer.as_str())];
        all.extend_from_slice(headers);
        support::http_client::request(&address, method, path, &all, body.as_bytes())
    };
    let url = |path: &str| format!("{}{path}", receiver.url);

    // A batch item's `"queue": ""` means none.
    let batch = json!([{"destination": url("/go/1"), "headers": {}, "body": "1", "queue": ""}]);
    let batched = send("POST", "/v2/batch", &[], &batch.to_string());
    assert_eq!(batched.status, 200, "{}", batched.body);
    receiver.wait_for(1, Duration::from_secs(30)).await;

    // Schedules are made and read under `/v2/Schedules/`.
    let made = send(
        "POST",
        &format!("/v2/Schedules/{}", url("/go/tick")),
        &[
            ("Upstash-Cron", "0 9 * * *"),
            ("Upstash-Schedule-Id", "go-tick"),
        ],
        "tick",
    );
    assert_eq!(
        made.json(),
        json!({"scheduleId": "go-tick"}),
        "{}",
        made.body
    );
    let shown = send("GET", "/v2/Schedules/go-tick", &[], "");
    assert_eq!(shown.json()["cron"], "0 9 * * *", "{}", shown.body);

    // A nil list of ids names none: nothing is cancelled or deleted.
    let waiting = send(
        "POST",
        &format!("/v2/publish/{}", url("/go/later")),
        &[("Upstash-Delay", "1h")],
        "later",
    );
    let waiting = waiting.json()["messageId"].as_str().unwrap().to_string();
    let cancelled = send("DELETE", "/v2/messages", &[], r#"{"messageIds":null}"#);
    assert_eq!(
        cancelled.json(),
        json!({"cancelled": 0}),
        "{}",
        cancelled.body
    );
    assert_eq!(
        send("GET", &format!("/v2/messages/{waiting}"), &[], "").status,
        200
    );
    let deleted = send("DELETE", "/v2/dlq", &[], r#"{"dlqIds":null}"#);
    assert_eq!(deleted.json(), json!({"deleted": 0}), "{}", deleted.body);

    // A queue upserted without a parallelism (Go sends 0) gets QStash's default, 1.
    let upserted = send(
        "POST",
        "/v2/queues",
        &[],
        r#"{"queueName":"go","parallelism":0}"#,
    );
    assert_eq!(upserted.status, 200, "{}", upserted.body);
    assert_eq!(
        send("GET", "/v2/queues/go", &[], "").json()["parallelism"],
        1
    );

    // Rotating at `/v2/rotate` says where keys are rotated.
    let rotated = send("POST", "/v2/rotate", &[], "");
    assert_eq!(rotated.status, 400);
    assert!(rotated.body.contains("delayer.conf"), "{}", rotated.body);
}

#[tokio::test(flavor = "multi_thread")]
async fn qstash_s_api_works_on_a_cluster_of_three_masters_with_two_daemons() {
    let receiver = Receiver::start(|_, _| Reply::ok()).await;
    let cluster = delayer_testkit::cluster::RedisCluster::start(3);
    let dir = tempfile::tempdir().unwrap();
    let sections = format!(
        "\n[http]\nlisten = 127.0.0.1:0\n[qstash]\ntoken = {TOKEN}\nallow = 127.0.0.1\n\
         current_signing_key = sig_a\nnext_signing_key = sig_b\n"
    );
    let mut addresses = Vec::new();
    let mut daemons = Vec::new();
    for name in ["one", "two"] {
        let (config, logs) = crate::cluster::cluster_config(&dir, name, &cluster.addresses());
        let text = std::fs::read_to_string(&config).unwrap();
        std::fs::write(&config, text + &sections).unwrap();
        daemons.push(support::Daemon::start(&config));
        addresses.push(support::http_client::http_address(&logs));
    }
    let url = &receiver.url;
    let on = |daemon: usize, command: &str, arguments: Value| {
        sdk(&addresses[daemon], TOKEN, command, arguments)
    };
    let published = on(
        0,
        "publish_json",
        json!({"url": format!("{url}/one"), "body": 1, "delay": "1s"}),
    );
    let batch = on(
        1,
        "batch_json",
        json!([{"url": format!("{url}/two"), "body": 2}, {"url": format!("{url}/three"), "body": 3}]),
    );
    on(
        0,
        "schedule_create_json",
        json!({"destination": format!("{url}/tick"), "cron": "every 1s", "body": "t", "schedule_id": "ticks"}),
    );
    on(
        1,
        "queue_upsert",
        json!({"queue": "line", "parallelism": 1}),
    );
    for n in 0..4 {
        on(
            n % 2,
            "enqueue_json",
            json!({"queue": "line", "url": format!("{url}/line"), "body": n}),
        );
    }
    support::wait_for(Duration::from_secs(60), "every kind of message", || async {
        let received = receiver.received();
        let count = |path: &str| received.iter().filter(|r| r.path == path).count();
        let all = count("/one") == 1
            && count("/two") == 1
            && count("/three") == 1
            && count("/tick") >= 2
            && count("/line") == 4;
        all.then_some(())
    })
    .await;
    let received = receiver.received();
    let line: Vec<&[u8]> = received
        .iter()
        .filter(|r| r.path == "/line")
        .map(|r| r.body.as_slice())
        .collect();
    assert_eq!(line, [b"0", b"1", b"2", b"3"], "the queue's order");
    let first = published["message_id"].as_str().unwrap();
    let one = received.iter().find(|r| r.path == "/one").unwrap();
    assert_eq!(one.header("upstash-message-id"), first);
    assert_eq!(batch.as_array().unwrap().len(), 2);
    let url_of = |request: &Received| format!("{}{}", receiver.url, request.path);
    assert!(refused_signatures(&received, "sig_a", "sig_b", url_of).is_empty());
    let ids: HashSet<&str> = received
        .iter()
        .map(|request| request.header("upstash-message-id"))
        .collect();
    assert_eq!(ids.len(), received.len(), "each once");
    drop(daemons);
}

#[tokio::test(flavor = "multi_thread")]
async fn qstash_s_typescript_sdk_publishes_cancels_by_filter_queues_schedules_and_works_the_dlq() {
    // Paths under /fail answer 500 until the test lets them through.
    let healed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let open = healed.clone();
    let receiver = Receiver::start(move |request, _| {
        if request.path.starts_with("/fail") && !open.load(std::sync::atomic::Ordering::SeqCst) {
            Reply::Status(500, Vec::new(), "try later".into())
        } else {
            Reply::ok()
        }
    })
    .await;
    let server = RedisServer::start();
    let qstash = format!(
        "\n[qstash]\ntoken = {TOKEN}\ncurrent_signing_key = sig_current\n\
         next_signing_key = sig_next\nallow = 127.0.0.1\n"
    );
    let (_daemon, _logs, address) = serving_with(&server, "a", "", &qstash);
    let call = |call: &str, arguments: Value| ts_sdk(&address, call, arguments);
    let url = |path: &str| format!("{}{path}", receiver.url);
    let id_of = |reply: &Value| -> String {
        reply["messageId"]
            .as_str()
            .unwrap_or_else(|| panic!("{reply}"))
            .to_string()
    };

    // Published, batched, delivered when due and signed as QStash signs.
    let published_at = unix_ms();
    let order = id_of(&call(
        "publishJSON",
        json!([{
            "url": url("/hook"),
            "body": {"order": 42},
            "headers": {"X-Order": "42"},
            "delay": 1,
            "retries": 2,
            "label": "orders",
            "flowControl": {"key": "orders", "parallelism": 2},
        }]),
    ));
    let message = call("messages.get", json!([order]));
    assert_eq!(message["url"], url("/hook"), "{message}");
    assert_eq!(message["maxRetries"], 2);
    assert_eq!(message["label"], "orders");
    assert_eq!(message["flowControlKey"], "orders");
    assert_eq!(message["parallelism"], 2);
    assert!(message["notBefore"].as_i64().unwrap() >= published_at + 1_000);
    let batch = call(
        "batchJSON",
        json!([[
            {"url": url("/batch/1"), "body": {"n": 1}},
            {"url": url("/batch/2"), "body": {"n": 2}},
        ]]),
    );
    assert_eq!(batch.as_array().map(Vec::len), Some(2), "{batch}");
    let received = receiver.wait_for(3, Duration::from_secs(30)).await;
    for request in &received {
        let verified = call(
            "verify",
            json!([
                {"currentSigningKey": "sig_current", "nextSigningKey": "sig_next"},
                {
                    "signature": request.header("upstash-signature"),
                    "body": String::from_utf8_lossy(&request.body),
                    "url": url(&request.path),
                },
            ]),
        );
        assert_eq!(verified, true, "{request:?}");
    }
    let hook = received
        .iter()
        .find(|request| request.path == "/hook")
        .unwrap();
    assert_eq!(hook.header("upstash-message-id"), order);
    assert_eq!(hook.body, br#"{"order":42}"#);
    assert_eq!(hook.header("x-order"), "42");
    assert!(hook.at_ms >= message["notBefore"].as_i64().unwrap());

    // Cancelled by id, by ids, by a filter (only what it matches), then all.
    let later = |label: &str| {
        id_of(&call(
            "publishJSON",
            json!([{"url": url("/never"), "body": label, "delay": 3600, "label": label}]),
        ))
    };
    let pending: Vec<String> = ["x", "x", "b", "b", "c"].map(later).into();
    assert_eq!(
        call("messages.cancel", json!([pending[0]])),
        json!({"cancelled": 1})
    );
    assert_eq!(
        call("messages.cancel", json!([[pending[1]]])),
        json!({"cancelled": 1})
    );
    assert_eq!(
        call("messages.cancel", json!([{"filter": {"label": "b"}}])),
        json!({"cancelled": 2})
    );
    assert_eq!(call("messages.get", json!([pending[4]]))["label"], "c");
    assert_eq!(
        call("messages.cancel", json!([{"all": true}])),
        json!({"cancelled": 1})
    );
    let gone = call("messages.get", json!([pending[4]]));
    assert!(gone["error"].as_str().is_some(), "{gone}");

    // A queue of parallelism 1 delivers in order.
    assert_eq!(
        call("queue(mail).upsert", json!([{"parallelism": 1}])),
        Value::Null
    );
    let queue = call("queue(mail).get", json!([]));
    assert_eq!(
        (&queue["name"], &queue["parallelism"]),
        (&json!("mail"), &json!(1))
    );
    for n in 0..3 {
        id_of(&call(
            "queue(mail).enqueueJSON",
            json!([{"url": url(&format!("/mail/{n}")), "body": n}]),
        ));
    }
    let received = receiver.wait_for(6, Duration::from_secs(30)).await;
    let mailed: Vec<&str> = received
        .iter()
        .map(|request| request.path.as_str())
        .filter(|path| path.starts_with("/mail"))
        .collect();
    assert_eq!(mailed, ["/mail/0", "/mail/1", "/mail/2"]);
    let queues = call("queue().list", json!([]));
    assert_eq!(queues[0]["name"], "mail", "{queues}");
    call("queue(mail).delete", json!([]));
    assert_eq!(call("queue().list", json!([])), json!([]));

    // A schedule ticks, pauses, resumes and goes.
    let created = call(
        "schedules.create",
        json!([{"destination": url("/tick"), "cron": "every 1s", "body": "tick", "scheduleId": "ts-tick"}]),
    );
    assert_eq!(created, json!({"scheduleId": "ts-tick"}));
    receiver.wait_for(7, Duration::from_secs(30)).await;
    call("schedules.pause", json!([{"schedule": "ts-tick"}]));
    assert_eq!(call("schedules.get", json!(["ts-tick"]))["isPaused"], true);
    call("schedules.resume", json!([{"schedule": "ts-tick"}]));
    let listed = call("schedules.list", json!([]));
    assert_eq!(listed[0]["isPaused"], false, "{listed}");
    call("schedules.delete", json!(["ts-tick"]));
    assert_eq!(call("schedules.list", json!([])), json!([]));

    // Out of tries: the DLQ, listed by filter, retried by filter, deleted all.
    let failing: Vec<String> = ["bad", "bad", "other"]
        .iter()
        .enumerate()
        .map(|(n, label)| {
            id_of(&call(
                "publishJSON",
                json!([{"url": url(&format!("/fail/{n}")), "body": n, "retries": 0, "label": label}]),
            ))
        })
        .collect();
    support::wait_for(Duration::from_secs(30), "3 messages in the DLQ", || async {
        let listed = call("dlq.listMessages", json!([]));
        (listed["messages"].as_array().map(Vec::len) == Some(3)).then_some(())
    })
    .await;
    let bad = call("dlq.listMessages", json!([{"filter": {"label": "bad"}}]));
    let bad: Vec<&str> = bad["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["dlqId"].as_str().unwrap())
        .collect();
    assert_eq!(
        bad,
        [failing[1].as_str(), failing[0].as_str()],
        "newest first"
    );
    let by_status = call(
        "dlq.listMessages",
        json!([{"filter": {"responseStatus": 500}}]),
    );
    assert_eq!(by_status["messages"].as_array().unwrap().len(), 3);
    let by_id = call("dlq.listMessages", json!([{"dlqIds": [failing[2]]}]));
    assert_eq!(by_id["messages"][0]["responseBody"], "try later", "{by_id}");
    healed.store(true, std::sync::atomic::Ordering::SeqCst);
    let retried = call("dlq.retry", json!([{"filter": {"label": "bad"}}]));
    assert_eq!(
        retried["responses"].as_array().unwrap().len(),
        2,
        "{retried}"
    );
    let received = support::wait_for(Duration::from_secs(30), "the retried delivered", || {
        let received = receiver.received();
        let done = received
            .iter()
            .filter(|request| {
                request.path.starts_with("/fail") && request.header("upstash-retried") == "0"
            })
            .count();
        async move { (done >= 5).then_some(received) }
    })
    .await;
    let again: HashSet<&str> = received
        .iter()
        .filter(|request| request.path.starts_with("/fail"))
        .map(|request| request.header("upstash-message-id"))
        .collect();
    assert_eq!(again.len(), 3);
    assert_eq!(
        call("dlq.delete", json!([{"all": true}])),
        json!({"deleted": 1})
    );
    assert_eq!(call("dlq.listMessages", json!([]))["messages"], json!([]));

    // What is not served says so, and a filter delayer cannot apply is refused, not ignored.
    let flow = call("flowControl.get", json!(["orders"]));
    assert!(
        flow["error"].as_str().unwrap().contains("not served"),
        "{flow}"
    );
    let groups = call("urlGroups.list", json!([]));
    assert!(
        groups["error"].as_str().unwrap().contains("URL groups"),
        "{groups}"
    );
    let refused = call(
        "messages.cancel",
        json!([{"filter": {"callerIp": "10.0.0.1"}}]),
    );
    assert!(
        refused["error"].as_str().unwrap().contains("callerIp"),
        "{refused}"
    );
}
