//! The jobs that are waiting, beside a real daemon and redis-server: the console's `/waiting` in a
//! browser (the pool in due order across pages, run now, remove, run all of a topic's once
//! confirmed), what a page reads of a large pool, the same through the HTTP API and `delayer
//! promote`, and a topic's own pool in the cluster layout.
//!
//! With `DELAYER_SCREENSHOTS=DIR` set, the browser test also saves the page as a PNG in DIR (the
//! picture in docs/ comes from there).

use crate::cluster::{cluster_client, cluster_config};
use crate::console::{chromium, field, log_in, row, submit};
use crate::support;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use delayer_client::inspector::MAX_WAITING_READ;
use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::{Client, Inspector, Settings};
use delayer_testkit::cluster::RedisCluster;
use delayer_wire::keys::{JOB_POOL, job_bucket, ready_queue};
use serde_json::json;
use support::http_client::{http_address, post, request, serving};
use support::legacy_client::now_seconds;
use support::{
    Daemon, DaemonSetup, RedisServer, add_jobs, command_stats, delayer_fails, delayer_succeeds,
    read, wait_for, wait_for_ready,
};

/// The topic whose name is markup.
const MARKUP: &str = "<img src=x onerror=alert(1)>";

/// The pool's ids in Redis's order.
async fn pool_ids(redis: &mut MultiplexedConnection) -> Vec<String> {
    redis.zrange(JOB_POOL, 0, -1).await.unwrap()
}

/// The ids a waiting jobs' page lists, in order (as the browser shows them).
fn listed(dom: &str) -> Vec<String> {
    dom.split("<tr><td><a href=\"/job?")
        .skip(1)
        .map(|row| {
            let text = &row[row.find("\">").unwrap() + 2..];
            text[..text.find("</a>").unwrap()].to_string()
        })
        .collect()
}

/// The address of the link whose text starts with `text` (ampersands as pages write them, undone).
fn link(dom: &str, text: &str) -> Option<String> {
    let end = dom.find(&format!("\">{text}"))?;
    let start = dom[..end].rfind("href=\"")? + 6;
    Some(dom[start..end].replace("&amp;", "&"))
}

#[tokio::test]
async fn the_waiting_page_in_a_browser_lists_the_pool_in_due_order_and_runs_a_job_due_in_an_hour_within_a_second()
 {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "waiting", "");
    // Every job in the pool (compact ones have a test of their own, in compact.rs): the daemon
    // stages within a moment of the first push, and later ones would wait compact.
    let legacy = Settings {
        compact_after: None,
        ..Settings::default()
    };
    let client = Client::connect_with(server.info(), legacy).await.unwrap();
    // Ties, as a legacy client pushes in bulk (whole seconds), and ours, a fraction apart.
    let later = (now_seconds() + 3600) as f64;
    let order: Vec<(String, &str, f64)> = (0..60)
        .map(|n| (format!("order-{:02}", (n * 7) % 60), "order.close", later))
        .chain([("x".to_string(), MARKUP, later + 30.0)])
        .collect();
    add_jobs(&mut redis, order).await;
    let mut mail = Vec::new();
    for n in 0..60 {
        let delay = Duration::from_millis(3_600_000 + n * 500);
        let id = client.push("mail", "m").delay(delay).await.unwrap();
        mail.push(id.to_string());
    }
    let url = |path: &str| format!("http://{http}{path}");
    let dir = server.dir();

    // Page after page by its "later" link: the pool in Redis's order, each job once.
    let mut seen = Vec::new();
    let mut next = Some("/waiting".to_string());
    let mut pages = 0;
    while let Some(path) = next {
        let dom = chromium(dir, &url(&path), None);
        assert!(!dom.contains("<img"), "{dom}");
        let ids = listed(&dom);
        assert!(ids.len() <= 50, "{path}: {ids:?}");
        seen.extend(ids);
        next = link(&dom, "later »");
        pages += 1;
    }
    assert_eq!(seen, pool_ids(&mut redis).await);
    assert_eq!((seen.len(), pages), (121, 3));

    // The overview's count of waiting jobs and a topic's page lead here.
    let overview = chromium(dir, &url("/"), None);
    assert!(
        overview.contains("<dt>waiting</dt><dd><a href=\"/waiting\">121</a></dd>"),
        "{overview}"
    );
    let topic = chromium(dir, &url("/topic?name=mail"), None);
    assert!(
        topic.contains("<a href=\"/waiting?topic=mail\">Its waiting jobs</a>"),
        "{topic}"
    );

    // Each row: its due time, topic and attempts; the topic named with markup is text.
    let first = chromium(dir, &url("/waiting"), None);
    let first_row = row(&first, "order-00");
    assert!(
        first_row[0].starts_with('2') && first_row[0].ends_with(".000Z"),
        "{first_row:?}"
    );
    assert!(first_row[1].contains(">order.close</a>"), "{first_row:?}");
    assert_eq!(first_row[2], "0");
    let markup_row = row(
        &chromium(
            dir,
            &url("/waiting?topic=%3Cimg+src%3Dx+onerror%3Dalert%281%29%3E"),
            None,
        ),
        "x",
    );
    assert!(
        markup_row[1].contains("&lt;img src=x onerror=alert(1)&gt;"),
        "{markup_row:?}"
    );
    // Run now, as the page's form sends it: a job due in an hour is on its ready list within a
    // second, and the page says so.
    let token = field(&first, "form_token").to_string();
    let soon = &mail[0];
    let fields = format!("form_token={token}&id={soon}&page=waiting&topic=mail");
    let sent = Instant::now();
    let promoted = submit(&http, "/actions/promote", &fields, &[]);
    assert_eq!(promoted.status, 303, "{}", promoted.body);
    let back = promoted.header("location").unwrap().to_string();
    assert_eq!(back, "/waiting?topic=mail&done=promoted");
    let ready = wait_for(Duration::from_secs(10), "the job on its ready list", || {
        let mut redis = redis.clone();
        async move {
            let ready: Vec<String> = redis.lrange(ready_queue("mail"), 0, -1).await.unwrap();
            (!ready.is_empty()).then_some(ready)
        }
    })
    .await;
    let took = sent.elapsed();
    assert_eq!(&ready, std::slice::from_ref(soon));
    assert!(took < Duration::from_secs(1), "run now took {took:?}");
    let said = chromium(dir, &url(&back), None);
    assert!(said.contains("The job is due now"), "{said}");
    assert!(!listed(&said).contains(soon), "{said}");
    if let Some(shots) = std::env::var_os("DELAYER_SCREENSHOTS") {
        let shot = Path::new(&shots).join("console-waiting.png");
        chromium(dir, &url(&back), Some(&shot));
    }

    // A job that no longer waits is not run: the page says why, and nothing changes.
    let again = submit(&http, "/actions/promote", &fields, &[]);
    assert_eq!(again.status, 409, "{}", again.body);
    assert!(again.body.contains("is not waiting"), "{}", again.body);

    // Remove, from the page: back to it, the job gone.
    let gone = &mail[1];
    let fields = format!("form_token={token}&id={gone}&page=waiting");
    let removed = submit(&http, "/actions/remove", &fields, &[]);
    assert_eq!(removed.header("location"), Some("/waiting?done=removed"));
    assert!(!redis.exists::<_, bool>(job_bucket(gone)).await.unwrap());

    // Run all of a topic's: the page asks first, with a second form; unconfirmed, nothing runs.
    let topic_page = chromium(dir, &url("/waiting?topic=order.close"), None);
    assert!(
        topic_page.contains("Run all waiting jobs of this topic now…"),
        "{topic_page}"
    );
    assert!(
        !topic_page.contains("/actions/promote-topic"),
        "{topic_page}"
    );
    let asked = chromium(dir, &url("/waiting?topic=order.close&confirm=all"), None);
    assert!(
        asked.contains("action=\"/actions/promote-topic\""),
        "{asked}"
    );
    assert!(
        asked.contains("name=\"confirmed\" value=\"yes\""),
        "{asked}"
    );
    let unconfirmed = format!("form_token={token}&topic=order.close");
    let refused = submit(&http, "/actions/promote-topic", &unconfirmed, &[]);
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(redis.zcard::<_, usize>(JOB_POOL).await.unwrap(), 119);
    let confirmed = format!("{unconfirmed}&confirmed=yes");
    let all = submit(&http, "/actions/promote-topic", &confirmed, &[]);
    let back = all.header("location").unwrap().to_string();
    assert_eq!(
        back,
        "/waiting?topic=order.close&done=promoted-all&count=60"
    );
    wait_for_ready(&redis, "order.close", 60).await;
    let left = pool_ids(&mut redis).await;
    assert_eq!(left.len(), 59, "mail's 58 and x: {left:?}");
    assert!(
        left.iter().all(|id| id == "x" || mail.contains(id)),
        "{left:?}"
    );
    let said = chromium(dir, &url(&back), None);
    assert!(
        said.contains("60 waiting jobs of the topic are due now. None is left waiting."),
        "{said}"
    );
    daemon.stop();
}

/// What a request made Redis do: the calls of each command, less those before.
fn calls_since(
    before: &HashMap<String, (u64, u64)>,
    after: &HashMap<String, (u64, u64)>,
) -> HashMap<String, u64> {
    after
        .iter()
        .map(|(command, (calls, _))| {
            let earlier = before.get(command).map_or(0, |(calls, _)| *calls);
            (command.clone(), calls - earlier)
        })
        .filter(|(_, calls)| *calls > 0)
        .collect()
}

#[tokio::test]
async fn with_200000_waiting_jobs_a_page_reads_a_bounded_number_of_them_and_says_where_to_go_on() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "large-pool", "");
    // 200,000 jobs an hour away, a second apart; ten of a rare topic among the first thousand.
    let later = (now_seconds() + 3600) as f64;
    let jobs = (0..200_000).map(|n| {
        let topic = if (600..610).contains(&n) {
            "rare"
        } else {
            "bulk"
        };
        (format!("job-{n:06}"), topic, later + n as f64)
    });
    add_jobs(&mut redis, jobs).await;

    // A page near the pool's end, then a topic's page: each reads at most its bound, never a
    // scan. (One pipelined HMGET a pool entry read: the count of entries read.)
    let near_end = format!("/waiting?after={}&after_id=job-199940", later + 199_940.0);
    for (path, most_read, shown) in [
        (near_end.as_str(), 51, 50),
        ("/waiting?topic=rare", MAX_WAITING_READ as u64, 10),
    ] {
        let before = command_stats(&mut redis).await;
        let page = request(&http, "GET", path, &[], b"");
        let after = command_stats(&mut redis).await;
        assert_eq!(page.status, 200, "{}", page.body);
        assert_eq!(listed(&page.body).len(), shown, "{path}");
        let calls = calls_since(&before, &after);
        assert_eq!(calls.get("hmget"), Some(&most_read), "{path}: {calls:?}");
        let zrange = calls.get("zrange").copied().unwrap_or(0);
        let all: u64 = calls.values().sum();
        // The daemon's own polls (the mover's, the schedules') go on meanwhile, more of them on a
        // loaded box: a bound, not an exact count.
        assert!(zrange <= 20 && all < most_read + 200, "{path}: {calls:?}");
        for scan in ["zscan", "scan", "keys"] {
            assert!(!calls.contains_key(scan), "{path}: {calls:?}");
        }
    }

    // The topic's page was cut short: it says so, and where to go on, which reads the next part.
    let page = request(&http, "GET", "/waiting?topic=rare", &[], b"").body;
    assert!(page.contains(&format!("This page read the next {MAX_WAITING_READ} waiting jobs of every topic and found 10 of this topic")), "{page}");
    let go_on = link(&page, "Go on after ").unwrap();
    assert!(go_on.contains("after_id=job-001999"), "{go_on}");
    let next = request(&http, "GET", &go_on, &[], b"");
    assert_eq!(next.status, 200);
    assert!(next.body.contains("after_id=job-003999"), "{}", next.body);
    daemon.stop();
}

#[tokio::test]
async fn the_http_api_and_delayer_promote_run_waiting_jobs_now_and_refuse_others() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "promote", "");
    let (config, _) = server.daemon_config("cli", "");
    let client = Client::connect(server.info()).await.unwrap();
    let hour = Duration::from_secs(3600);
    let mut ids = Vec::new();
    for topic in ["a", "a", "a", "b"] {
        ids.push(
            client
                .push(topic, "x")
                .delay(hour)
                .await
                .unwrap()
                .to_string(),
        );
    }

    // Listed a page at a time, each page saying where the next starts.
    let page = post(&http, "/delay-queue/api/jobs/waiting", &json!({"count": 3}));
    let data = &page.json()["data"];
    assert_eq!(data["jobs"].as_array().unwrap().len(), 3, "{}", page.body);
    assert_eq!(data["jobs"][0]["id"], ids[0]);
    assert_eq!(data["jobs"][0]["topic"], "a");
    assert_eq!(data["jobs"][0]["attempts"], 0);
    let rest = post(
        &http,
        "/delay-queue/api/jobs/waiting",
        &json!({"after": data["next"]}),
    );
    let rest = &rest.json()["data"];
    assert_eq!(rest["jobs"][0]["id"], ids[3], "{rest}");
    assert_eq!(
        (rest["next"].clone(), rest["cut_short"].clone()),
        (json!(null), json!(false))
    );

    // And by `delayer waiting`: a JSON object a line.
    let lines = delayer_succeeds(&config, &["waiting", "--topic", "a", "--limit", "2"]);
    let lines: Vec<serde_json::Value> = lines
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        (&lines[0]["id"], &lines[1]["id"]),
        (&json!(ids[0]), &json!(ids[1]))
    );
    assert_eq!(lines[1]["topic"], "a");

    // One by id over HTTP; again, it is not waiting (409); unknown, 404.
    let path = "/delay-queue/api/jobs/promote";
    let done = post(&http, path, &json!({"job_id": ids[0]}));
    assert_eq!(
        (done.status, done.json()["message"].clone()),
        (200, json!("promoted")),
        "{}",
        done.body
    );
    wait_for_ready(&redis, "a", 1).await;
    assert_eq!(post(&http, path, &json!({"job_id": ids[0]})).status, 409);
    assert_eq!(post(&http, path, &json!({"job_id": "nope"})).status, 404);

    // `delayer promote ID`; exit 1 with why for a job that does not wait.
    let said = delayer_succeeds(&config, &["promote", &ids[1]]);
    assert!(said.contains("is due now"), "{said}");
    wait_for_ready(&redis, "a", 2).await;
    let refused = delayer_fails(&config, &["promote", &ids[1]]);
    assert!(
        refused.contains("no waiting job") && refused.contains("ready, reserved or dead"),
        "{refused}"
    );
    let unknown = delayer_fails(&config, &["promote", "nope"]);
    assert!(
        unknown.contains("no waiting job \"nope\": no such job"),
        "{unknown}"
    );

    // A topic's, over HTTP and the CLI: only that topic's jobs. A misspelt field runs nothing.
    let misspelt = post(&http, path, &json!({"topic": "b", "limt": 1}));
    assert_eq!(misspelt.status, 400, "{}", misspelt.body);
    assert_eq!(redis.zcard::<_, usize>(JOB_POOL).await.unwrap(), 2);
    let topic = post(&http, path, &json!({"topic": "b"}));
    assert_eq!(topic.json()["data"]["promoted"], 1, "{}", topic.body);
    wait_for_ready(&redis, "b", 1).await;
    let said = delayer_succeeds(&config, &["promote", "--topic", "a"]);
    assert!(
        said.contains("1 waiting job of topic a is due now"),
        "{said}"
    );
    wait_for_ready(&redis, "a", 3).await;
    assert_eq!(redis.zcard::<_, usize>(JOB_POOL).await.unwrap(), 0);
    let listed = delayer_succeeds(&config, &["waiting"]);
    assert_eq!(listed, "");
    daemon.stop();
}

/// How many jobs are on `topic`'s ready list, as the client reads it in any layout.
async fn ready_count(client: &Client, topic: &str) -> u64 {
    let inspector = Inspector::new(client);
    let lengths = inspector.lengths(&[topic.into()]).await.unwrap();
    lengths.ready.first().map_or(0, |(_, ready)| *ready)
}

#[tokio::test]
async fn in_the_cluster_layout_a_topics_own_pool_is_listed_and_run_exactly() {
    let cluster = RedisCluster::start(3);
    let dir = tempfile::tempdir().unwrap();
    let (config, logs) = cluster_config(&dir, "waiting", &cluster.addresses());
    let text = format!("{}\n[http]\nlisten = 127.0.0.1:0\n", read(&config));
    std::fs::write(&config, text).unwrap();
    let daemon = Daemon::start(&config);
    let http = http_address(&logs);
    let client = cluster_client(&cluster).await;
    let inspector = Inspector::new(&client);
    let hour = Duration::from_secs(3600);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for n in 0..60 {
        let (topic, ids) = if n % 2 == 0 {
            ("a", &mut a)
        } else {
            ("b", &mut b)
        };
        ids.push(
            client
                .push(topic, "x")
                .delay(hour)
                .await
                .unwrap()
                .to_string(),
        );
    }

    // No pool of every topic to list: the page asks for one, the API wants one.
    let page = request(&http, "GET", "/waiting", &[], b"");
    assert!(page.body.contains("name a topic"), "{}", page.body);
    assert_eq!(
        post(&http, "/delay-queue/api/jobs/waiting", &json!({})).status,
        400
    );
    // A topic's page reads its own pool: its jobs alone, in due order, none cut short.
    let page = request(&http, "GET", "/waiting?topic=a", &[], b"").body;
    assert_eq!(listed(&page), a, "{page}");
    assert!(!page.contains("This page read"), "{page}");

    // Run one now, then all of b's.
    let said = delayer_succeeds(&config, &["promote", &a[0]]);
    assert!(said.contains("is due now"), "{said}");
    let all = post(
        &http,
        "/delay-queue/api/jobs/promote",
        &json!({"topic": "b"}),
    );
    let data = &all.json()["data"];
    assert_eq!(
        (data["promoted"].clone(), data["next"].clone()),
        (json!(30), json!(null))
    );
    wait_for(
        Duration::from_secs(10),
        "a's one job and b's 30 ready",
        || {
            let client = client.clone();
            async move {
                let ready = (
                    ready_count(&client, "a").await,
                    ready_count(&client, "b").await,
                );
                (ready == (1, 30)).then_some(())
            }
        },
    )
    .await;
    let left = inspector.waiting(Some(b"a"), None, 100).await.unwrap();
    assert_eq!(left.jobs.len(), 29);
    daemon.stop();
}

#[tokio::test]
async fn with_a_token_run_now_and_run_all_want_a_login_and_a_form_of_this_console_from_this_site() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "guarded-waiting", "token = s3cret");
    let client = Client::connect(server.info()).await.unwrap();
    let id = client
        .push("mail", "m")
        .delay(Duration::from_secs(3600))
        .await
        .unwrap()
        .to_string();
    let score = |redis: &mut MultiplexedConnection| {
        let mut redis = redis.clone();
        let id = id.clone();
        async move { redis.zscore::<_, _, f64>(JOB_POOL, id).await.unwrap() }
    };
    let waiting = score(&mut redis).await;

    // Without a login: the ids, no forms; every action refused.
    let page = request(&http, "GET", "/waiting", &[], b"");
    assert_eq!(listed(&page.body), std::slice::from_ref(&id));
    assert!(
        !page.body.contains("<form method=\"post\""),
        "{}",
        page.body
    );
    let run = format!("id={id}&form_token=00ff");
    let all = "topic=mail&confirmed=yes&form_token=00ff";
    assert_eq!(submit(&http, "/actions/promote", &run, &[]).status, 401);
    assert_eq!(
        submit(&http, "/actions/promote-topic", all, &[]).status,
        401
    );
    let get = request(&http, "GET", &format!("/actions/promote?id={id}"), &[], b"");
    assert_eq!(get.status, 405);

    // Logged in: a form without this session's token, or sent from another site, does nothing.
    let session = log_in(&http, "s3cret");
    let with_session = [("Cookie", session.as_str())];
    let page = request(&http, "GET", "/waiting", &with_session, b"").body;
    let token = field(&page, "form_token").to_string();
    assert_eq!(
        submit(&http, "/actions/promote", &run, &with_session).status,
        403
    );
    let fields = format!("id={id}&page=waiting&form_token={token}");
    let cross = [
        ("Cookie", session.as_str()),
        ("Sec-Fetch-Site", "cross-site"),
    ];
    assert_eq!(
        submit(&http, "/actions/promote", &fields, &cross).status,
        403
    );
    assert_eq!(score(&mut redis).await, waiting);

    let done = submit(&http, "/actions/promote", &fields, &with_session);
    assert_eq!(
        done.header("location"),
        Some("/waiting?done=promoted"),
        "{}",
        done.body
    );
    wait_for_ready(&redis, "mail", 1).await;
    daemon.stop();
}
