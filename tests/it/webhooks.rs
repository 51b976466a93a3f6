//! Webhooks, for real: daemons as processes deliver due jobs to a receiver on a loopback port
//! (`support/receiver.rs`), which records each request; QStash's own Python SDK checks their
//! signatures. Each job arrives once and never early, from legacy and Rust pushes alike; failures
//! are retried, then dead-listed with a reason that names them; flow control holds over every
//! daemon; a hanging webhook holds up no other; a daemon killed mid-request loses nothing.

use crate::support;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::{Client, Inspector, State};
use delayer_wire::keys::{JOB_POOL, RESERVED, ready_queue};
use support::http_client::{request, samples, serving_with};
use support::legacy_client::{self, Message};
use support::receiver::{Received, Receiver, Reply, refused_signatures};
use support::{
    Daemon, DaemonSetup, RedisServer, delayer_succeeds, left_in_redis, redis_ms, wait_for,
};

/// Waits until Redis holds nothing of `topics` any more.
async fn wait_until_delivered(redis: &MultiplexedConnection, topics: &[&str]) {
    wait_for(
        Duration::from_secs(30),
        "Redis to hold none of the jobs",
        || {
            let mut redis = redis.clone();
            async move { (left_in_redis(&mut redis, topics).await == 0).then_some(()) }
        },
    )
    .await;
}

/// The dead jobs of `topic` once there are `count`, each with why it died.
async fn dead_reasons(client: &Client, topic: &str, count: usize) -> Vec<String> {
    let ids = wait_for(
        Duration::from_secs(30),
        &format!("{count} dead jobs of {topic}"),
        || {
            let inspector = Inspector::new(client);
            async move {
                let dead = inspector.dead(topic, 100).await.unwrap();
                (dead.len() >= count).then_some(dead)
            }
        },
    )
    .await;
    let mut reasons = Vec::new();
    for id in ids {
        let info = client.get(&id).await.unwrap();
        assert_eq!(info.state, State::Dead);
        reasons.push(info.died_why.unwrap_or_default());
    }
    reasons
}

#[tokio::test(flavor = "multi_thread")]
async fn due_jobs_of_legacy_and_rust_pushes_arrive_once_signed_and_never_early_from_three_daemons()
{
    let receiver = Receiver::start(|_, _| Reply::ok()).await;
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let sections = |current: &str| {
        format!(
            "timer_interval = 100\n\
             [webhook.billing]\n\
             topics = billing.*, invoice.close\n\
             url = {}/hooks/{{topic}}/{{id}}?from=delayer\n\
             [qstash]\n\
             current_signing_key = {current}\n\
             next_signing_key = sig_next\n",
            receiver.url
        )
    };
    let daemons: Vec<Daemon> = ["a", "b", "c"]
        .iter()
        .map(|name| Daemon::start(&server.daemon_config(name, &sections("sig_current")).0))
        .collect();

    // Due times by Redis's clock (this host's): a legacy job's is its whole second.
    let mut due: HashMap<String, i64> = HashMap::new();
    let mut php = server.connect().await;
    for n in 0..100 {
        let now = legacy_client::now_seconds();
        let delay = 1 + n % 2;
        let message = Message {
            id: format!("php-{n}"),
            topic: "invoice.close".into(),
            body: format!("{{\"invoice\":{n}}}"),
        };
        legacy_client::push(&mut php, &message, delay)
            .await
            .unwrap();
        due.insert(message.id, (now + delay) * 1000);
    }
    for n in 0..300 {
        let now = redis_ms(&mut redis).await;
        let delay = Duration::from_millis(500 + 5 * n);
        let topic = if n % 2 == 0 {
            "billing.eu"
        } else {
            "billing.us"
        };
        let id = format!("rust-{n}");
        client
            .push(topic, format!("charge {n}"))
            .id(&id)
            .delay(delay)
            .await
            .unwrap();
        due.insert(id, now + delay.as_millis() as i64);
    }
    // A topic no webhook takes stays on its ready list, for its consumers.
    for n in 0..5 {
        let message = Message {
            id: format!("order-{n}"),
            topic: "orders".into(),
            body: "close".into(),
        };
        legacy_client::push(&mut php, &message, 0).await.unwrap();
    }

    let received = receiver.wait_for(400, Duration::from_secs(60)).await;
    wait_until_delivered(&redis, &["invoice.close", "billing.eu", "billing.us"]).await;
    let received = {
        // Anything delivered twice would have come by now: each job is acked.
        let all = receiver.received();
        assert_eq!(
            all.len(),
            received.len().max(400),
            "more requests than jobs"
        );
        all
    };
    let ids: HashSet<&str> = received.iter().map(|r| r.header("delayer-id")).collect();
    assert_eq!(ids.len(), 400, "each job once");
    for request in &received {
        let id = request.header("delayer-id");
        let topic = request.header("delayer-topic");
        assert_eq!(request.method, "POST");
        assert_eq!(request.path, format!("/hooks/{topic}/{id}?from=delayer"));
        assert!(
            request.at_ms >= due[id],
            "{id} came at {} ms, before its due time {} ms",
            request.at_ms,
            due[id]
        );
        let body = String::from_utf8(request.body.clone()).unwrap();
        if let Some(n) = id.strip_prefix("php-") {
            assert_eq!(topic, "invoice.close");
            assert_eq!(body, format!("{{\"invoice\":{n}}}"));
            // A legacy push records no due time.
            assert_eq!(request.header("delayer-due-ms"), "");
        } else {
            let n: u64 = id.strip_prefix("rust-").unwrap().parse().unwrap();
            assert_eq!(body, format!("charge {n}"));
            let due_header: i64 = request.header("delayer-due-ms").parse().unwrap();
            assert!(due_header >= due[id], "{id}: due header {due_header}");
        }
        assert_eq!(request.header("delayer-attempt"), "1");
        assert_eq!(request.header("upstash-message-id"), id);
        assert_eq!(request.header("upstash-retried"), "0");
        assert!(request.header("user-agent").starts_with("delayer/"));
    }
    let late: Vec<i64> = received
        .iter()
        .map(|r| r.at_ms - due[r.header("delayer-id")])
        .collect();
    eprintln!(
        "400 requests, due to received: max {} ms",
        late.iter().max().unwrap()
    );
    let url_of = |request: &Received| format!("{}{}", receiver.url, request.path);
    let refused = refused_signatures(&received, "sig_current", "sig_next", url_of);
    assert!(refused.is_empty(), "QStash's Receiver refused: {refused:?}");
    // The check can fail: other keys refuse every one.
    let refused = refused_signatures(&received[..3], "other", "another", url_of);
    assert_eq!(refused.len(), 3, "{refused:?}");
    let orders: usize = redis.llen(ready_queue("orders")).await.unwrap();
    assert_eq!(orders, 5, "the other topic's jobs wait on its ready list");
    drop(daemons);

    // Keys rotated: the next key signs now, and receivers that know both accept it.
    let (config, _) = server.daemon_config("rotated", &sections("sig_next"));
    let _daemon = Daemon::start(&config);
    client
        .push("billing.eu", "after")
        .id("rotated-1")
        .await
        .unwrap();
    let received = receiver.wait_for(401, Duration::from_secs(30)).await;
    let last = &received[400..];
    assert!(refused_signatures(last, "sig_current", "sig_next", url_of).is_empty());
    assert_eq!(
        refused_signatures(last, "sig_current", "other", url_of).len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_request_is_retried_then_dead_listed_with_the_status_and_the_reply() {
    let receiver = Receiver::start(|request, before| match request.path.as_str() {
        "/down" => Reply::Status(503, Vec::new(), "down for\n maintenance".into()),
        _ if before == 0 => Reply::Status(500, Vec::new(), "oops".into()),
        _ => Reply::ok(),
    })
    .await;
    let server = RedisServer::start();
    let redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let sections = format!(
        "[webhook.flaky]\n\
         topics = flaky, down\n\
         url = {}/{{topic}}\n\
         retries = 2\n\
         retry_delay = 100 * (retried + 1)\n",
        receiver.url
    );
    let (daemon, _logs, address) = serving_with(&server, "a", &sections, "");
    client.push("down", "x").id("d-1").await.unwrap();
    client.push("flaky", "y").id("f-1").await.unwrap();

    let reasons = dead_reasons(&client, "down", 1).await;
    assert_eq!(
        reasons[0],
        format!(
            "HTTP 503 Service Unavailable: down for maintenance (POST {}/down)",
            receiver.url
        )
    );
    wait_until_delivered(&redis, &["flaky", "down"]).await;
    let received = receiver.received();
    let tries = |path: &str| -> Vec<&str> {
        received
            .iter()
            .filter(|r| r.path == path)
            .map(|r| r.header("delayer-attempt"))
            .collect()
    };
    assert_eq!(
        tries("/down"),
        ["1", "2", "3"],
        "the first try and 2 retries"
    );
    assert_eq!(tries("/flaky"), ["1", "2"], "delivered on its retry");
    let down: Vec<i64> = received
        .iter()
        .filter(|r| r.path == "/down")
        .map(|r| r.at_ms)
        .collect();
    assert!(
        down[1] - down[0] >= 100,
        "the first retry waits 100 ms: {down:?}"
    );
    assert!(down[2] - down[1] >= 200, "the second 200 ms: {down:?}");
    assert_eq!(
        client.get("f-1").await.unwrap().state,
        State::Unknown,
        "acked"
    );

    let listed = delayer_succeeds(&daemon_config(&server), &["dead", "down"]);
    assert!(listed.contains("HTTP 503 Service Unavailable"), "{listed}");
    let metrics = request(&address, "GET", "/metrics", &[], b"");
    let text = metrics.body;
    support::http_client::promtool_check(&text);
    let samples = samples(&text);
    let sample = |name: &str| samples.get(name).copied().unwrap_or(-1.0);
    assert_eq!(
        sample("delayer_webhook_failed_attempts_total{webhook=\"flaky\",status=\"503\"}"),
        3.0,
        "{text}"
    );
    assert_eq!(
        sample("delayer_webhook_failed_attempts_total{webhook=\"flaky\",status=\"500\"}"),
        1.0
    );
    assert_eq!(
        sample("delayer_webhook_delivered_jobs_total{webhook=\"flaky\"}"),
        1.0
    );
    assert_eq!(
        sample("delayer_webhook_dead_jobs_total{webhook=\"flaky\"}"),
        1.0
    );
    assert_eq!(
        sample("delayer_webhook_retried_jobs_total{webhook=\"flaky\"}"),
        3.0
    );
    assert_eq!(
        sample("delayer_webhook_in_flight_jobs{webhook=\"flaky\"}"),
        0.0
    );
    drop(daemon);
}

/// The configuration `delayer dead` reads: any daemon's, for Redis.
fn daemon_config(server: &RedisServer) -> std::path::PathBuf {
    server.daemon_config("shell", "").0
}

#[tokio::test(flavor = "multi_thread")]
async fn each_fault_of_a_receiver_gets_a_clear_reason_in_the_dead_list() {
    let receiver = Receiver::start(|request, before| match request.path.as_str() {
        "/slow" => Reply::Hang,
        "/moved" => Reply::Status(302, vec![("location", "/elsewhere".into())], String::new()),
        "/endless" => Reply::Endless(500),
        "/final" => Reply::Status(
            489,
            vec![("upstash-nonretryable-error", "true".into())],
            "bad order".into(),
        ),
        "/later" if before == 0 => {
            Reply::Status(429, vec![("retry-after", "1".into())], "slow down".into())
        }
        _ => Reply::ok(),
    })
    .await;
    let closed = support::free_port();
    let receiver_port = receiver.url.rsplit(':').next().unwrap().to_string();
    let server = RedisServer::start();
    let redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let hook = |name: &str, url: String, extra: &str| {
        format!("[webhook.{name}]\ntopics = {name}\nurl = {url}\nretries = 0\n{extra}")
    };
    let url = &receiver.url;
    let sections = [
        hook("refused", format!("http://127.0.0.1:{closed}/"), ""),
        hook("slow", format!("{url}/slow"), "timeout = 300ms\n"),
        hook("moved", format!("{url}/moved"), ""),
        hook("nowhere", "http://no-such-host.invalid/".into(), ""),
        hook("tls", format!("https://127.0.0.1:{receiver_port}/"), ""),
        hook("endless", format!("{url}/endless"), ""),
        hook(
            "final",
            format!("{url}/final"),
            "retries = 5\nretry_delay = 0\n",
        ),
        hook(
            "later",
            format!("{url}/later"),
            "retries = 1\nretry_delay = 86400000\n",
        ),
    ]
    .concat();
    let (config, _) = server.daemon_config("a", &format!("timer_interval = 100\n{sections}"));
    let _daemon = Daemon::start(&config);
    let topics = [
        "refused", "slow", "moved", "nowhere", "tls", "endless", "final", "later",
    ];
    for topic in topics {
        client
            .push(topic, "x")
            .id(format!("{topic}-1"))
            .await
            .unwrap();
    }
    let why = |topic: &'static str| {
        let client = client.clone();
        async move { dead_reasons(&client, topic, 1).await.remove(0) }
    };
    assert_eq!(
        why("refused").await,
        format!("connection refused (POST http://127.0.0.1:{closed}/)")
    );
    assert_eq!(
        why("slow").await,
        format!("no reply within 0.3 s (POST {url}/slow)")
    );
    assert_eq!(
        why("moved").await,
        format!(
            "HTTP 302 redirect to /elsewhere, not followed ([webhook.moved] follow_redirects = \
             no) (POST {url}/moved)"
        )
    );
    let nowhere = why("nowhere").await;
    assert!(nowhere.starts_with("DNS lookup failed: "), "{nowhere}");
    let tls = why("tls").await;
    assert!(tls.starts_with("TLS failed: "), "{tls}");
    let endless = why("endless").await;
    assert!(
        endless.starts_with("HTTP 500 Internal Server Error: xxxx") && endless.contains("x..."),
        "{endless}"
    );
    // 64 KiB read, and whatever the sockets' buffers took: far from the gigabyte on offer.
    assert!(
        receiver.streamed() < 64 << 20,
        "{} bytes sent",
        receiver.streamed()
    );
    assert_eq!(
        why("final").await,
        format!(
            "HTTP 489: bad order, with Upstash-NonRetryable-Error: not tried again (POST \
             {url}/final)"
        )
    );
    wait_until_delivered(&redis, &["later"]).await;
    let received = receiver.received();
    let later: Vec<i64> = received
        .iter()
        .filter(|r| r.path == "/later")
        .map(|r| r.at_ms)
        .collect();
    assert_eq!(later.len(), 2, "delivered on its retry");
    let waited = later[1] - later[0];
    assert!(
        (1_000..20_000).contains(&waited),
        "Retry-After: 1 overrides the retry delay of a day: {waited} ms"
    );
    let finals = received.iter().filter(|r| r.path == "/final").count();
    assert_eq!(
        finals, 1,
        "489 with Upstash-NonRetryable-Error is not retried"
    );
    receiver.release();
}

#[tokio::test(flavor = "multi_thread")]
async fn parallelism_and_rate_hold_over_every_daemon() {
    let receiver = Receiver::start(|request, _| {
        if request.path == "/parallel" {
            Reply::After(Duration::from_millis(50))
        } else {
            Reply::ok()
        }
    })
    .await;
    let server = RedisServer::start();
    let redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let sections = format!(
        "timer_interval = 100\n\
         [webhook.parallel]\n\
         topics = parallel\n\
         url = {0}/parallel\n\
         parallelism = 3\n\
         [webhook.rated]\n\
         topics = rated\n\
         url = {0}/rated\n\
         rate = 20/s\n",
        receiver.url
    );
    let daemons: Vec<Daemon> = ["a", "b", "c", "d"]
        .iter()
        .map(|name| Daemon::start(&server.daemon_config(name, &sections).0))
        .collect();
    let jobs = |topic: &'static str| {
        (0..40).map(move |n| delayer_client::NewPush::new(topic, "x").id(format!("{topic}-{n}")))
    };
    client
        .push_many(jobs("parallel").chain(jobs("rated")))
        .await
        .unwrap();
    receiver.wait_for(80, Duration::from_secs(60)).await;
    wait_until_delivered(&redis, &["parallel", "rated"]).await;
    assert_eq!(receiver.received().len(), 80, "each once");
    let most = receiver.most_in_flight("/parallel");
    assert!(
        most <= 3,
        "{most} requests in flight at once, over parallelism = 3"
    );
    assert!(
        most >= 2,
        "parallel all the same: at most {most} in flight at once"
    );
    let starts = receiver.arrivals("/rated");
    let span = starts[39] - starts[0];
    // Starts are spaced 50 ms apart by Redis's clock; each reaches the receiver a little after
    // its start, by a few ms more or less (a daemon's wake-up, the connection): the figures as the
    // receiver saw them are allowed one spacing of that.
    assert!(span >= 1_950 - 50, "40 requests at 20/s took {span} ms");
    let closest = (0..20).map(|i| starts[i + 20] - starts[i]).min().unwrap();
    eprintln!("rate 20/s: 40 starts over {span} ms; 21 starts over {closest} ms at the closest");
    assert!(
        closest >= 1_000 - 50,
        "21 requests started within {closest} ms"
    );
    drop(daemons);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_webhook_that_hangs_holds_up_no_other() {
    let receiver = Receiver::start(|request, _| {
        if request.path == "/hangs" {
            Reply::Hang
        } else {
            Reply::ok()
        }
    })
    .await;
    let server = RedisServer::start();
    let redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let sections = format!(
        "timer_interval = 100\n\
         [webhook.hangs]\ntopics = hangs\nurl = {0}/hangs\ntimeout = 1h\n\
         [webhook.quick]\ntopics = quick\nurl = {0}/quick\n",
        receiver.url
    );
    let (config, _) = server.daemon_config("a", &sections);
    let _daemon = Daemon::start(&config);
    let push = |topic: &'static str| {
        (0..50).map(move |n| delayer_client::NewPush::new(topic, "x").id(format!("{topic}-{n}")))
    };
    client.push_many(push("hangs")).await.unwrap();
    receiver.wait_for(50, Duration::from_secs(30)).await;
    client.push_many(push("quick")).await.unwrap();
    // Every quick one comes while the 50 others still hang: released only after.
    let received = receiver.wait_for(100, Duration::from_secs(30)).await;
    assert_eq!(received.iter().filter(|r| r.path == "/quick").count(), 50);
    receiver.release();
    wait_until_delivered(&redis, &["hangs", "quick"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_killed_mid_request_leaves_its_job_to_be_delivered_again() {
    let receiver = Receiver::start(|_, before| {
        if before == 0 {
            Reply::Hang
        } else {
            Reply::ok()
        }
    })
    .await;
    let server = RedisServer::start();
    let redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let sections = format!(
        "timer_interval = 100\n\
         [webhook.orders]\ntopics = orders\nurl = {}/order\ntimeout = 1s\n\
         [qstash]\ncurrent_signing_key = key\n",
        receiver.url
    );
    let (config_a, _) = server.daemon_config("a", &sections);
    let mut killed = Daemon::start(&config_a);
    client
        .push("orders", "close 42")
        .id("order-42")
        .await
        .unwrap();
    receiver.wait_for(1, Duration::from_secs(30)).await;
    killed.signal("KILL");
    killed.wait(Duration::from_secs(10));
    let (config_b, _) = server.daemon_config("b", &sections);
    let _daemon = Daemon::start(&config_b);
    let received = receiver.wait_for(2, Duration::from_secs(60)).await;
    wait_until_delivered(&redis, &["orders"]).await;
    assert_eq!(received.len(), 2);
    for (request, attempt) in received.iter().zip(["1", "2"]) {
        assert_eq!(request.header("upstash-message-id"), "order-42");
        assert_eq!(request.header("delayer-attempt"), attempt);
        assert_eq!(request.body, b"close 42");
    }
    assert_eq!(received[1].header("upstash-retried"), "1");
    receiver.release();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_receiver_down_for_a_while_then_back_gets_every_job() {
    let port = support::free_port();
    let server = RedisServer::start();
    let redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let sections = format!(
        "timer_interval = 100\n\
         [webhook.back]\ntopics = back\nurl = http://127.0.0.1:{port}/back\n\
         retries = 20\nretry_delay = 200\n"
    );
    let (config, _) = server.daemon_config("a", &sections);
    let _daemon = Daemon::start(&config);
    client
        .push_many((0..100).map(|n| delayer_client::NewPush::new("back", "x").id(format!("b-{n}"))))
        .await
        .unwrap();
    // Each job fails a few tries (connection refused) before the receiver comes.
    wait_for(Duration::from_secs(30), "the jobs' third tries", || {
        let client = client.clone();
        async move {
            let info = client.get("b-99").await.unwrap();
            (info.attempts >= 3).then_some(())
        }
    })
    .await;
    let receiver = Receiver::start_on(port, |_, _| Reply::ok()).await;
    let received = receiver.wait_for(100, Duration::from_secs(30)).await;
    wait_until_delivered(&redis, &["back"]).await;
    let ids: HashSet<&str> = received.iter().map(|r| r.header("delayer-id")).collect();
    assert_eq!(
        (ids.len(), receiver.received().len()),
        (100, 100),
        "each once"
    );
    assert!(received.iter().all(|r| r.header("delayer-attempt") != "1"));
    let dead = Inspector::new(&client).dead("back", 10).await.unwrap();
    assert!(dead.is_empty(), "{dead:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stop_settles_the_requests_in_flight_and_gives_back_the_jobs_waiting_their_turn() {
    let receiver = Receiver::start(|_, _| Reply::After(Duration::from_millis(500))).await;
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let sections = format!(
        "timer_interval = 100\n\
         [webhook.slowly]\ntopics = slowly\nurl = {}/slowly\nrate = 2/s\n",
        receiver.url
    );
    let (config, _) = server.daemon_config("a", &sections);
    let daemon = Daemon::start(&config);
    client
        .push_many(
            (0..20).map(|n| delayer_client::NewPush::new("slowly", "x").id(format!("s-{n}"))),
        )
        .await
        .unwrap();
    receiver.wait_for(1, Duration::from_secs(30)).await;
    daemon.stop();
    let sent = receiver.received().len();
    assert!(sent < 20, "{sent} sent: the rate holds the others back");
    // Each one sent was answered and acked; the others wait, untried (given back: due now, in
    // the pool), for the next daemon.
    let ready: usize = redis.llen(ready_queue("slowly")).await.unwrap();
    let waiting: usize = redis.zcard(JOB_POOL).await.unwrap();
    let reserved: usize = redis.zcard(RESERVED).await.unwrap();
    assert_eq!((ready + waiting, reserved), (20 - sent, 0));
    let mut acked = 0;
    for n in 0..20 {
        let info = client.get(format!("s-{n}")).await.unwrap();
        match info.state {
            State::Unknown => acked += 1,
            State::Ready | State::Waiting => assert!(info.attempts <= 1, "s-{n} untried"),
            other => panic!("s-{n} is {other:?}"),
        }
    }
    assert_eq!(acked, sent, "each one sent was acked");
}

#[tokio::test(flavor = "multi_thread")]
async fn webhooks_deliver_on_a_cluster_of_three_masters_with_two_daemons() {
    let receiver = Receiver::start(|_, _| Reply::ok()).await;
    let cluster = delayer_testkit::cluster::RedisCluster::start(3);
    let client = crate::cluster::cluster_client(&cluster).await;
    let dir = tempfile::tempdir().unwrap();
    let hooks = format!(
        "\n[webhook.all]\ntopics = t-*\nurl = {}/{{topic}}/{{id}}\nparallelism = 5\nrate = 1000/s\n\
         [qstash]\ncurrent_signing_key = key_a\nnext_signing_key = key_b\n",
        receiver.url
    );
    let _daemons: Vec<Daemon> = ["one", "two"]
        .iter()
        .map(|name| {
            let (config, _) = crate::cluster::cluster_config(&dir, name, &cluster.addresses());
            let text = std::fs::read_to_string(&config).unwrap();
            std::fs::write(&config, text + &hooks).unwrap();
            Daemon::start(&config)
        })
        .collect();
    let jobs = (0..300).map(|n| {
        delayer_client::NewPush::new(format!("t-{}", n % 10), format!("body {n}"))
            .id(format!("c-{n}"))
            .delay(Duration::from_millis(n * 3))
    });
    client.push_many(jobs).await.unwrap();
    let received = receiver.wait_for(300, Duration::from_secs(60)).await;
    wait_for(Duration::from_secs(30), "every job acked", || {
        let client = client.clone();
        async move {
            for n in 0..300 {
                if client.get(format!("c-{n}")).await.unwrap().state != State::Unknown {
                    return None;
                }
            }
            Some(())
        }
    })
    .await;
    let received_now = receiver.received();
    let ids: HashSet<&str> = received_now
        .iter()
        .map(|r| r.header("delayer-id"))
        .collect();
    assert_eq!((ids.len(), received_now.len()), (300, 300), "each once");
    for request in &received {
        let id = request.header("delayer-id");
        let n: u64 = id.strip_prefix("c-").unwrap().parse().unwrap();
        assert_eq!(request.path, format!("/t-{}/{id}", n % 10));
        assert_eq!(request.body, format!("body {n}").into_bytes());
    }
    let url_of = |request: &Received| format!("{}{}", receiver.url, request.path);
    assert!(refused_signatures(&received, "key_a", "key_b", url_of).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn beside_a_daemon_that_knows_no_webhooks_none_is_stranded_and_they_go_in_due_order() {
    let receiver = Receiver::start(|_, _| Reply::ok()).await;
    let server = RedisServer::start();
    let redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    // A daemon without the section moves the topic's due jobs to its ready list, as a release
    // older than webhooks does.
    let (old, _) = server.daemon_config("old", "timer_interval = 50");
    let _old = Daemon::start(&old);
    let jobs = (0..200u64).map(|n| {
        delayer_client::NewPush::new("upgraded", format!("{n}"))
            .id(format!("u-{n:03}"))
            .delay(Duration::from_millis(n * 5))
    });
    client.push_many(jobs).await.unwrap();
    let mut php = server.connect().await;
    for n in 0..20 {
        let message = Message {
            id: format!("p-{n:03}"),
            topic: "upgraded".into(),
            body: "php".into(),
        };
        legacy_client::push(&mut php, &message, 0).await.unwrap();
    }
    // Some wait on the ready list before a new daemon comes.
    wait_for(Duration::from_secs(30), "jobs on the ready list", || {
        let mut redis = redis.clone();
        async move {
            let ready: usize = redis.llen(ready_queue("upgraded")).await.unwrap();
            (ready >= 50).then_some(())
        }
    })
    .await;
    let sections = format!(
        "timer_interval = 50\n[webhook.upgraded]\ntopics = upgraded\nurl = {}/up\nparallelism = 1\n",
        receiver.url
    );
    let (new, _) = server.daemon_config("new", &sections);
    let _new = Daemon::start(&new);
    let received = receiver.wait_for(220, Duration::from_secs(60)).await;
    wait_until_delivered(&redis, &["upgraded"]).await;
    assert_eq!(receiver.received().len(), 220, "each once");
    // One at a time, each in its ready list's order: the due order.
    let rust: Vec<&str> = received
        .iter()
        .map(|r| r.header("delayer-id"))
        .filter(|id| id.starts_with("u-"))
        .collect();
    let mut sorted = rust.clone();
    sorted.sort_unstable();
    assert_eq!(rust, sorted, "in due order");
}
