//! The console's forms clicked in Debian's headless Chromium as a person clicks them (the mouse
//! at a button's centre, a token typed into the login), beside a real daemon and redis-server:
//! each click changes Redis as its button says. And pages of another site, in the same browser,
//! posting to the daemon by form and by fetch: they change nothing, with or without a token.

use crate::console::{dead_ids, dead_jobs, field};
use crate::support;
use delayer_testkit::schedules::schedule_field;

use delayer_client::inspector::{Definition, Source};
use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::{Client, Inspector};
use delayer_wire::keys::{
    JOB_BUCKET_PREFIX, JOB_POOL, LOGGED_OUT_PREFIX, PAUSED_PREFIX, job_bucket,
};
use support::browser::Browser;
use support::http_client::{request, serving, serving_with};
use support::{RedisServer, add_jobs, redis_now, wait_for_ready};

/// Adds jobs `ids` of `topic`, due in an hour.
async fn waiting(redis: &mut MultiplexedConnection, topic: &str, ids: &[&str]) {
    let due = redis_now(redis).await + 3600.0;
    add_jobs(redis, ids.iter().map(|id| (id.to_string(), topic, due))).await;
}

/// Whether job `id` is gone: no data, not in the pool.
async fn gone(redis: &mut MultiplexedConnection, id: &str) -> bool {
    let data: bool = redis.exists(job_bucket(id)).await.unwrap();
    let due: Option<f64> = redis.zscore(JOB_POOL, id).await.unwrap();
    !data && due.is_none()
}

/// The keys matching `pattern`.
async fn keys(redis: &mut MultiplexedConnection, pattern: &str) -> Vec<String> {
    redis.keys(pattern).await.unwrap()
}

/// The CSS selector of the table row holding a form for `name` (an id, or a schedule's name).
fn row_of(name: &str) -> String {
    format!(
        "tr:has(input[type=hidden][value={}])",
        serde_json::json!(name)
    )
}

#[tokio::test]
async fn in_chromium_a_typed_login_lets_a_topic_be_paused_and_resumed_by_clicks_and_a_logout_ends_the_session()
 {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "guarded", "token = s3cret");
    waiting(&mut redis, "order", &["o1"]).await;
    let url = |path: &str| format!("http://{http}{path}");
    let mut browser = Browser::start(server.dir());

    // Without a login the topic's page has no forms.
    browser.open(&url("/topic?name=order"));
    assert!(
        !browser.has_button("main", "Pause this topic"),
        "{}",
        browser.text()
    );

    // The token typed and "Log in" clicked: back on the page it was asked from, with its forms.
    browser.open(&url("/login?next=%2Ftopic%3Fname%3Dorder"));
    browser.type_into("input[name=token]", "s3cret");
    browser.click("main", "Log in", "/topic?name=order");
    let paused = format!("{PAUSED_PREFIX}order");
    assert!(!redis.exists::<_, bool>(&paused).await.unwrap());

    browser.click("main", "Pause this topic", "/topic?name=order&done=paused");
    assert!(redis.exists::<_, bool>(&paused).await.unwrap());
    browser.click(
        "main",
        "Resume this topic",
        "/topic?name=order&done=resumed&count=0",
    );
    assert!(!redis.exists::<_, bool>(&paused).await.unwrap());

    // "Log out" ends the session in Redis (for every daemon there), and the forms are gone.
    assert!(
        keys(&mut redis, &format!("{LOGGED_OUT_PREFIX}*"))
            .await
            .is_empty()
    );
    browser.click("header", "Log out", &url("/"));
    assert_eq!(
        keys(&mut redis, &format!("{LOGGED_OUT_PREFIX}*"))
            .await
            .len(),
        1
    );
    browser.open(&url("/topic?name=order"));
    assert!(
        !browser.has_button("main", "Pause this topic"),
        "{}",
        browser.text()
    );
    daemon.stop();
}

#[tokio::test]
async fn in_chromium_every_button_on_waiting_and_dead_jobs_and_on_schedules_acts_by_a_click() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "clicks", "");
    waiting(&mut redis, "later", &["run-me", "remove-me"]).await;
    waiting(&mut redis, "bulk", &["b1", "b2", "b3"]).await;
    waiting(&mut redis, "single", &["run-this", "remove-this"]).await;
    dead_jobs(&server, &redis, "mail", &["d1", "d2", "d3", "d4"]).await;
    let client = Client::connect(server.info()).await.unwrap();
    let inspector = Inspector::new(&client);
    let nightly = Definition::new("nightly", "0 3 * * *", "report");
    inspector
        .save_schedule(&nightly, Source::Api)
        .await
        .unwrap();
    let url = |path: &str| format!("http://{http}{path}");
    let mut browser = Browser::start(server.dir());

    // /waiting: run one job now, remove another.
    browser.open(&url("/waiting"));
    browser.click(&row_of("run-me"), "Run now", "/waiting?done=promoted");
    assert_eq!(wait_for_ready(&redis, "later", 1).await, ["run-me"]);
    browser.click(&row_of("remove-me"), "Remove", "/waiting?done=removed");
    assert!(gone(&mut redis, "remove-me").await);

    // A topic's waiting jobs, all run now once confirmed.
    browser.open(&url("/waiting?topic=bulk"));
    let ask = "Run all waiting jobs of this topic now…";
    browser.click("main", ask, "/waiting?topic=bulk&confirm=all");
    let pooled: Vec<String> = redis.zrange(JOB_POOL, 0, -1).await.unwrap();
    assert_eq!(pooled.len(), 5, "asked only, and nothing run: {pooled:?}");
    let done = "/waiting?topic=bulk&done=promoted-all&count=3";
    browser.click("main", "Yes, run them now", done);
    assert_eq!(wait_for_ready(&redis, "bulk", 3).await.len(), 3);

    // A job's page: run it now, or remove it.
    browser.open(&url("/job?id=run-this"));
    browser.click("main", "Run this job now", "/job?id=run-this&done=promoted");
    assert_eq!(wait_for_ready(&redis, "single", 1).await, ["run-this"]);
    browser.open(&url("/job?id=remove-this"));
    browser.click(
        "main",
        "Remove this job",
        "/job?id=remove-this&done=removed",
    );
    assert!(gone(&mut redis, "remove-this").await);

    // Dead jobs: requeue one, delete one (from the job's page), requeue the rest.
    browser.open(&url("/topic?name=mail"));
    browser.click(&row_of("d1"), "Requeue", "/topic?name=mail&done=requeued");
    assert_eq!(dead_ids(&mut redis, "mail").await, ["d4", "d3", "d2"]);
    assert_eq!(wait_for_ready(&redis, "mail", 1).await, ["d1"]);
    browser.open(&url("/job?id=d2"));
    browser.click("main", "Delete", "/topic?name=mail&done=deleted");
    assert_eq!(dead_ids(&mut redis, "mail").await, ["d4", "d3"]);
    assert!(gone(&mut redis, "d2").await);
    let all = "Requeue all dead jobs (2)";
    browser.click("main", all, "/topic?name=mail&done=requeued-all&count=2");
    assert!(dead_ids(&mut redis, "mail").await.is_empty());
    assert_eq!(wait_for_ready(&redis, "mail", 3).await.len(), 3);

    // Schedules: pause, resume, run now.
    browser.open(&url("/schedules"));
    let row = row_of("nightly");
    browser.click(&row, "Pause", "/schedules?done=schedule-paused");
    assert!(
        schedule_field(&mut redis, "nightly", "paused")
            .await
            .is_some()
    );
    browser.click(&row, "Resume", "/schedules?done=schedule-resumed");
    assert_eq!(schedule_field(&mut redis, "nightly", "paused").await, None);
    browser.click(&row, "Run now", "/schedules?done=schedule-run");
    let runs = schedule_field(&mut redis, "nightly", "runs").await;
    assert_eq!(runs.as_deref(), Some("1"));
    assert_eq!(wait_for_ready(&redis, "report", 1).await.len(), 1);

    // The pages keep their ids to this server, and a browser that sends no Sec-Fetch-Site then
    // names this server as its forms' Origin (with no referrer, it names none: "null").
    let page = request(&http, "GET", "/schedules", &[], b"");
    assert_eq!(page.header("referrer-policy"), Some("same-origin"));
    daemon.stop();
}

/// Requests a page of another site sends the daemon at `http` on load, as an attacker's page
/// would: forms (text/plain, whose `name=value` makes the job API's JSON; urlencoded, with the
/// console's form token `form_token`, as if it had leaked) into frames named after `tag`, fetches
/// (no-cors, and with `[http] token` `token` where a page can try to send it), and an image. Its
/// markup, and the script that sends them; each answer calls `answered()`: [`ANSWERS`] for each.
fn attack(http: &str, form_token: &str, token: &str, tag: &str) -> (String, String) {
    let jobs = format!("http://{http}/delay-queue/api/jobs");
    let job =
        |how: &str| format!(r#"{{"id":"{tag}-{how}","topic":"planted","delay":3600,"body":"b"}}"#);
    // text/plain sends `name=value`: the name holds all but the end of the body's value.
    let text_form = job("form");
    let (name, value) = text_form.split_at(text_form.len() - 3);
    let markup = format!(
        r#"<form method="post" action="{jobs}/add" enctype="text/plain" target="{tag}-1">
<input type="hidden" name='{name}' value='{value}'></form>
<form method="post" action="{jobs}/add" target="{tag}-2">
<input type="hidden" name="json" value='{urlencoded}'></form>
<form method="post" action="http://{http}/actions/pause" target="{tag}-3">
<input type="hidden" name="form_token" value="{form_token}">
<input type="hidden" name="topic" value="waiting"></form>
<iframe name="{tag}-1"></iframe><iframe name="{tag}-2"></iframe><iframe name="{tag}-3"></iframe>
<img src="{jobs}/remove?job_id=kept">
"#,
        urlencoded = job("urlencoded"),
    );
    let typed =
        format!(r#"{{"Content-Type": "application/json", "Authorization": "Bearer {token}"}}"#);
    let script = format!(
        r#"
add("{jobs}/add", '{fetched}', "fetch", {{mode: "no-cors"}});
add("{jobs}/add", '{fetched}', "typed", {{mode: "no-cors", headers: {typed}}});
add("{jobs}/add", '{fetched}', "cors", {{headers: {typed}}});
"#,
        fetched = job("HOW"),
    );
    (markup, script)
}

/// The answers each [`attack`] waits for: three forms, three fetches, an image.
const ANSWERS: usize = 7;

/// A page of another site making the requests of `attacks`; it sets `window.posted` once every
/// one has been answered (a form's frame loads the daemon's answer, a fetch settles, the image
/// loads or fails).
fn attack_page(attacks: &[(String, String)]) -> String {
    let markup: String = attacks.iter().map(|(markup, _)| markup.as_str()).collect();
    let script: String = attacks.iter().map(|(_, script)| script.as_str()).collect();
    format!(
        r#"<!doctype html><html><body>
{markup}
<script>
let count = 0;
const answered = () => {{ count += 1; window.posted = count === {total}; }};
const add = (url, body, how, init) =>
  fetch(url, {{method: "POST", body: body.replace("HOW", how), ...init}}).then(answered, answered);
for (const frame of document.querySelectorAll("iframe")) {{
  // The frame's first document (about:blank) is this page's: the daemon's answer is not.
  frame.onload = () => {{ try {{ frame.contentWindow.location.href; }} catch {{ answered(); }} }};
}}
for (const form of document.forms) form.submit();
for (const image of document.images) {{
  image.complete ? answered() : (image.onload = image.onerror = answered);
}}
{script}
</script></body></html>"#,
        total = ANSWERS * attacks.len(),
    )
}

/// Serves `page` (HTML) at every path of a free port of this host, each connection on a thread
/// of its own (Chromium opens connections it sends nothing on, ahead of need), for as long as
/// the process lives; its port.
fn serve_page(page: String) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
        page.len()
    );
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let answer = answer.clone();
            std::thread::spawn(move || {
                let mut head = [0; 4096];
                let _ = std::io::Read::read(&mut stream, &mut head);
                let _ = std::io::Write::write_all(&mut stream, answer.as_bytes());
            });
        }
    });
    port
}

#[tokio::test]
async fn in_chromium_a_page_of_another_site_plants_removes_and_pauses_nothing_with_or_without_a_token()
 {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    // A job added is then in the legacy form (a bucket and a pool entry), which the test reads.
    let legacy = "compact_pushes = false";
    let (open, _logs, open_http) = serving_with(&server, "open", legacy, "");
    let guarded_http = "token = s3cret";
    let (guarded, _logs, guarded_http) = serving_with(&server, "guarded", legacy, guarded_http);
    waiting(&mut redis, "waiting", &["kept"]).await;
    // The console's form token, as if it had leaked: the page must be refused for where it comes
    // from alone.
    let page = request(&open_http, "GET", "/topic?name=waiting", &[], b"").body;
    let form_token = field(&page, "form_token");
    let port = serve_page(attack_page(&[
        attack(&open_http, form_token, "", "open"),
        attack(&guarded_http, "", "s3cret", "guarded"),
    ]));
    let mut browser = Browser::start(server.dir());

    // Another site (localhost is not 127.0.0.1's site), and another port of the same host (the
    // same site, but another origin).
    for origin in [
        format!("http://localhost:{port}/"),
        format!("http://127.0.0.1:{port}/"),
    ] {
        browser.open(&origin);
        browser.wait_until("every request answered", "window.posted === true");
        let data = keys(&mut redis, &format!("{JOB_BUCKET_PREFIX}*")).await;
        let pooled: Vec<String> = redis.zrange(JOB_POOL, 0, -1).await.unwrap();
        let paused = keys(&mut redis, &format!("{PAUSED_PREFIX}*")).await;
        let kept = (
            vec![format!("{JOB_BUCKET_PREFIX}kept")],
            vec!["kept".to_string()],
            vec![],
        );
        assert_eq!((data, pooled, paused), kept, "from {origin}");
    }
    open.stop();
    guarded.stop();
}
