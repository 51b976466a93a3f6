//! The console at `/` in a real browser (Debian's headless `chromium`, which `scripts/test`
//! installs) and over plain HTTP, beside a real daemon and redis-server: the pages show what Redis
//! holds, escaped; an action from a page's form changes Redis; and with `[http] token` set,
//! nothing acts or shows a body without it.
//!
//! With `DELAYER_SCREENSHOTS=DIR` set, the browser test also saves the pages as PNGs in DIR (the
//! pictures in docs/ come from there).

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use delayer_client::inspector::{CatchUp, Definition, Source};
use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::{Client, Inspector, Nacked, Settings};
use delayer_testkit::schedules::schedule_field;
use delayer_wire::keys::{JOB_POOL, PAUSED_PREFIX, dead_queue, field, job_bucket, ready_queue};
use delayer_wire::schedule::{parse_ms, tick_id};
use support::browser::CHROMIUM_FLAGS;
use support::http_client::{Answer, request, serving};
use support::legacy_client::{self, Message};
use support::redis_ms;
use support::{RedisServer, wait_for, wait_for_ready};

/// The topic whose name is markup.
const MARKUP: &str = "<img src=x onerror=alert(1)>";

/// Makes `ids` dead jobs of `topic`, as a consumer whose every attempt fails makes them.
pub(crate) async fn dead_jobs(
    server: &RedisServer,
    redis: &MultiplexedConnection,
    topic: &str,
    ids: &[&str],
) {
    let settings = Settings {
        max_attempts: 1,
        ..Settings::default()
    };
    let client = Client::connect_with(server.info(), settings).await.unwrap();
    for id in ids {
        client
            .push(topic, format!("body of {id}"))
            .id(*id)
            .await
            .unwrap();
    }
    wait_for_ready(redis, topic, ids.len()).await;
    for _ in ids {
        let ttr = Duration::from_secs(30);
        let job = client
            .reserve(&[topic], ttr, Duration::ZERO)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            client.nack(&job, Duration::ZERO).await.unwrap(),
            Nacked::Dead
        );
    }
}

/// What Chromium makes of `url` (`--dump-dom`), or with `screenshot` a PNG of it there.
pub(crate) fn chromium(dir: &Path, url: &str, screenshot: Option<&Path>) -> String {
    chromium_with(dir, url, screenshot, &[])
}

/// As [`chromium`], with more of its flags (after ours, so that they win: `--window-size`).
pub(crate) fn chromium_with(
    dir: &Path,
    url: &str,
    screenshot: Option<&Path>,
    flags: &[&str],
) -> String {
    let mut command = Command::new("chromium");
    command
        .args(CHROMIUM_FLAGS)
        .arg(format!(
            "--user-data-dir={}",
            dir.join("chromium").display()
        ))
        .args(flags);
    match screenshot {
        Some(path) => command.arg(format!("--screenshot={}", path.display())),
        None => command.arg("--dump-dom"),
    };
    let mut child = command
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run chromium (scripts/test installs Debian's chromium)");
    // Read as it comes: a page larger than the pipe's buffer would otherwise hold Chromium up.
    let mut stdout = child.stdout.take().unwrap();
    let reading = std::thread::spawn(move || {
        let mut dom = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut dom).unwrap();
        dom
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().ok();
            panic!("chromium took over 60 s on {url}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    reading.join().unwrap()
}

/// The texts of the cells after the first of the table row whose first cell names `name` (a topic
/// or an id, as the page shows it).
pub(crate) fn row(dom: &str, name: &str) -> Vec<String> {
    cells_after(dom, &format!(">{name}</a></td>"))
}

/// The texts of the cells after the first of the schedules' page row of schedule `name`.
fn schedule_row(dom: &str, name: &str) -> Vec<String> {
    cells_after(dom, &format!("<tr><td>{name}</td>"))
}

/// The contents of the cells after `first` (the end of a row's first cell) up to the row's end.
pub(crate) fn cells_after(dom: &str, first: &str) -> Vec<String> {
    let start = dom
        .find(first)
        .unwrap_or_else(|| panic!("no row for {first}: {dom}"))
        + first.len();
    let end = start + dom[start..].find("</tr>").unwrap();
    dom[start..end]
        .split("<td")
        .skip(1)
        .map(|cell| {
            let text = &cell[cell.find('>').unwrap() + 1..];
            text[..text.find("</td>").unwrap()].to_string()
        })
        .collect()
}

/// The value of the first hidden field `name` in `page`.
pub(crate) fn field<'a>(page: &'a str, name: &str) -> &'a str {
    let at = page
        .find(&format!("name=\"{name}\" value=\""))
        .unwrap_or_else(|| panic!("no field {name}: {page}"));
    let value = &page[at + name.len() + 15..];
    &value[..value.find('"').unwrap()]
}

/// A POST of an HTML form (`fields` already encoded).
pub(crate) fn submit(http: &str, path: &str, fields: &str, headers: &[(&str, &str)]) -> Answer {
    let mut headers = headers.to_vec();
    headers.push(("Content-Type", "application/x-www-form-urlencoded"));
    request(http, "POST", path, &headers, fields.as_bytes())
}

pub(crate) async fn dead_ids(redis: &mut MultiplexedConnection, topic: &str) -> Vec<String> {
    redis.lrange(dead_queue(topic), 0, -1).await.unwrap()
}

#[tokio::test]
async fn the_pages_in_a_browser_show_the_topics_escaped_and_their_forms_requeue_pause_and_resume() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "console", "");
    for (id, topic) in [("o1", "order.close"), ("o2", "order.close"), ("x", MARKUP)] {
        let message = Message {
            id: id.into(),
            topic: topic.into(),
            body: format!("{{\"order\": \"{id}\"}}"),
        };
        legacy_client::push(&mut redis, &message, 0).await.unwrap();
    }
    wait_for_ready(&redis, MARKUP, 1).await;
    dead_jobs(&server, &redis, "mail.send", &["m1", "m2"]).await;
    wait_for_ready(&redis, "order.close", 2).await;
    let url = |path: &str| format!("http://{http}{path}");
    let dir = server.dir();

    // The overview: topic, waiting (—: one pool), ready, reserved, dead, then age and rates.
    let overview = chromium(dir, &url("/"), None);
    assert_eq!(
        row(&overview, "order.close")[..4],
        ["—", "2", "0", "0"],
        "{overview}"
    );
    assert_eq!(
        row(&overview, "mail.send")[..4],
        ["—", "0", "0", "2"],
        "{overview}"
    );
    assert!(
        overview.contains("anyone who can reach this port can"),
        "{overview}"
    );
    // Its script refreshes the figures in place: the policy lets it run and fetch.
    let budget = "--virtual-time-budget=8000";
    let refreshed = chromium_with(dir, &url("/"), None, &[budget]);
    assert!(
        refreshed.contains("<main data-refreshed=\"\">"),
        "{refreshed}"
    );
    // The topic named with markup is text: escaped in the DOM, and no img element anywhere.
    let escaped = "&lt;img src=x onerror=alert(1)&gt;";
    assert_eq!(row(&overview, escaped)[1], "1", "{overview}");
    let markup_topic = url("/topic?name=%3Cimg+src%3Dx+onerror%3Dalert%281%29%3E");
    let markup_page = chromium(dir, &markup_topic, None);
    for page in [&overview, &markup_page] {
        assert!(!page.contains("<img"), "{page}");
    }
    assert!(
        markup_page.contains(&format!("<h1>Topic {escaped}</h1>")),
        "{markup_page}"
    );

    // The topic's page has a requeue form for each dead job: sent as the browser sends it.
    let topic_page = chromium(dir, &url("/topic?name=mail.send"), None);
    let form = topic_page
        .find("action=\"/actions/requeue\"><input type=\"hidden\" name=\"form_token\"")
        .expect("a requeue form");
    assert!(
        topic_page[form..].contains("name=\"id\" value=\"m1\""),
        "{topic_page}"
    );
    // Each dead job with when it died (RFC 3339, UTC) and its attempts.
    let dead_row = row(&topic_page, "m1");
    assert!(
        dead_row[0].ends_with('Z') && dead_row[1] == "1",
        "{dead_row:?}"
    );
    let token = field(&topic_page, "form_token");
    let fields = format!("form_token={token}&topic=mail.send&id=m1");
    let requeued = submit(&http, "/actions/requeue", &fields, &[]);
    assert_eq!(requeued.status, 303, "{}", requeued.body);
    let back = requeued.header("location").unwrap();
    assert_eq!(back, "/topic?name=mail.send&done=requeued");
    assert_eq!(dead_ids(&mut redis, "mail.send").await, ["m2"]);
    let attempts: Option<String> = redis.hget(job_bucket("m1"), "attempts").await.unwrap();
    assert_eq!(attempts, None, "counted afresh");
    let said = chromium(dir, &url(back), None);
    assert!(
        said.contains("The job is back in the pool, due now."),
        "{said}"
    );
    // Moved again by the daemon: ready once more.
    wait_for_ready(&redis, "mail.send", 1).await;

    // Pause from the topic's page: a job that falls due meanwhile is parked in the pool; the
    // overview says so; resume moves it.
    let order_page = chromium(dir, &url("/topic?name=order.close"), None);
    assert!(
        order_page.contains("action=\"/actions/pause\""),
        "{order_page}"
    );
    let fields = format!("form_token={token}&topic=order.close");
    let paused = submit(&http, "/actions/pause", &fields, &[]);
    assert_eq!(paused.status, 303, "{}", paused.body);
    let pause_key = format!("{PAUSED_PREFIX}order.close");
    assert!(redis.exists::<_, bool>(&pause_key).await.unwrap());
    let message = Message {
        id: "o3".into(),
        topic: "order.close".into(),
        body: "b".into(),
    };
    legacy_client::push(&mut redis, &message, 0).await.unwrap();
    wait_for(Duration::from_secs(10), "o3 parked", || {
        let mut redis = redis.clone();
        async move {
            let parked: Option<String> = redis.hget(job_bucket("o3"), field::PARKED).await.unwrap();
            parked.map(|_| ())
        }
    })
    .await;
    let overview = chromium(dir, &url("/"), None);
    assert_eq!(
        row(&overview, "order.close")[7],
        "<b>paused</b>",
        "{overview}"
    );
    let order_page = chromium(dir, &url("/topic?name=order.close"), None);
    assert!(
        order_page.contains("action=\"/actions/resume\""),
        "{order_page}"
    );
    let resumed = submit(&http, "/actions/resume", &fields, &[]);
    assert_eq!(
        resumed.header("location"),
        Some("/topic?name=order.close&done=resumed&count=1"),
        "{}",
        resumed.body
    );
    assert!(!redis.exists::<_, bool>(&pause_key).await.unwrap());
    wait_for_ready(&redis, "order.close", 3).await;

    // The job's page: state, topic, attempts and the body, escaped.
    let job_page = chromium(dir, &url("/job?id=x"), None);
    assert!(
        job_page.contains("<pre>{\"order\": \"x\"}</pre>"),
        "{job_page}"
    );
    assert!(job_page.contains("<dd>ready</dd>"), "{job_page}");
    assert!(!job_page.contains("<img"), "{job_page}");

    if let Some(shots) = std::env::var_os("DELAYER_SCREENSHOTS") {
        let shots = Path::new(&shots);
        // Tall enough for the charts at the foot of the overview and the topic's page.
        for (name, path, height) in [
            ("console-overview.png", "/", 1000),
            ("console-topic.png", "/topic?name=mail.send", 900),
            ("console-job.png", "/job?id=m2", 760),
        ] {
            let size = format!("--window-size=1100,{height}");
            chromium_with(dir, &url(path), Some(&shots.join(name)), &[&size]);
        }
    }
    daemon.stop();
}

#[tokio::test]
async fn with_a_token_every_action_and_every_body_wants_a_login_and_a_form_of_the_console() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "guarded", "token = s3cret");
    dead_jobs(&server, &redis, "t", &["d1", "d2"]).await;
    let requeue = "topic=t&id=d1";

    // Pages name the topics to anyone (as /metrics does), but a body only after a login.
    let overview = request(&http, "GET", "/", &[], b"");
    assert_eq!(overview.status, 200);
    let policy = overview.header("content-security-policy").unwrap();
    for part in [
        "default-src 'none'",
        "script-src 'sha256-",
        "style-src 'sha256-",
    ] {
        assert!(
            policy.contains(part) && !policy.contains("unsafe"),
            "{policy}"
        );
    }
    assert!(!overview.body.contains("anyone who can reach this port"));
    let job = request(&http, "GET", "/job?id=d1", &[], b"");
    assert!(
        !job.body.contains("body of d1") && job.body.contains("Log in"),
        "{}",
        job.body
    );
    assert!(!job.body.contains("/actions/"), "no forms: {}", job.body);

    // Refused, and nothing changes: no session, a forged session, a form token without one.
    let forged = [("Cookie", "delayer_session=9999999999.00ff")];
    for (headers, fields) in [
        (&[][..], requeue.to_string()),
        (&forged[..], requeue.to_string()),
        (&[][..], format!("{requeue}&form_token=00ff")),
    ] {
        let refused = submit(&http, "/actions/requeue", &fields, headers);
        assert_eq!(refused.status, 401, "{headers:?}: {}", refused.body);
    }
    let pause = submit(&http, "/actions/pause", "topic=t&form_token=00ff", &[]);
    assert_eq!(pause.status, 401, "{}", pause.body);
    let paused: bool = redis.exists(format!("{PAUSED_PREFIX}t")).await.unwrap();
    assert!(!paused);
    // Actions are POSTs only: a link (a GET) cannot act.
    let get = request(&http, "GET", "/actions/requeue?topic=t&id=d1", &[], b"");
    assert_eq!(get.status, 405, "{}", get.body);
    assert!(get.body.contains("takes a POST"), "{}", get.body);
    let wrong = submit(&http, "/login", "token=guess&next=/", &[]);
    assert_eq!((wrong.status, wrong.header("set-cookie")), (401, None));
    assert_eq!(dead_ids(&mut redis, "t").await, ["d2", "d1"]);
    let pooled: usize = redis.zcard(JOB_POOL).await.unwrap();
    assert_eq!(pooled, 0);

    // A login sets a strict cookie; with it the body shows, and forms carry a form token.
    let login = submit(&http, "/login", "token=s3cret&next=%2Fjob%3Fid%3Dd1", &[]);
    assert_eq!(login.status, 303, "{}", login.body);
    assert_eq!(login.header("location"), Some("/job?id=d1"));
    let cookie = login.header("set-cookie").unwrap();
    for part in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(part), "{cookie}");
    }
    let session = cookie.split(';').next().unwrap();
    let with_session = [("Cookie", session)];
    let job = request(&http, "GET", "/job?id=d1", &with_session, b"");
    assert!(job.body.contains("<pre>body of d1</pre>"), "{}", job.body);
    let token = field(&job.body, "form_token").to_string();

    // The session alone is not enough (a page of another site could have sent it): the form's
    // token must come too.
    let no_token = submit(&http, "/actions/requeue", requeue, &with_session);
    assert_eq!(no_token.status, 403, "{}", no_token.body);
    assert_eq!(dead_ids(&mut redis, "t").await, ["d2", "d1"]);

    let fields = format!("{requeue}&form_token={token}");
    let requeued = submit(&http, "/actions/requeue", &fields, &with_session);
    assert_eq!(requeued.status, 303, "{}", requeued.body);
    assert_eq!(dead_ids(&mut redis, "t").await, ["d2"]);

    // The job API's Bearer header works here too (no form token: no browser sends that header
    // for another site).
    let bearer = [("Authorization", "Bearer s3cret")];
    let deleted = submit(&http, "/actions/delete", "topic=t&id=d2", &bearer);
    assert_eq!(deleted.status, 303, "{}", deleted.body);
    let exists: bool = redis.exists(job_bucket("d2")).await.unwrap();
    assert!(!exists && dead_ids(&mut redis, "t").await.is_empty());

    // An id not on the dead list is said so, and changes nothing.
    let fields = format!("topic=t&id=nope&form_token={token}");
    let not_dead = submit(&http, "/actions/requeue", &fields, &with_session);
    assert_eq!(not_dead.status, 409, "{}", not_dead.body);
    assert!(
        not_dead.body.contains("not on the dead list"),
        "{}",
        not_dead.body
    );
    daemon.stop();
}

/// Logs in to the console at `http` with `token`; the session's `Cookie` header value.
pub(crate) fn log_in(http: &str, token: &str) -> String {
    let login = submit(http, "/login", &format!("token={token}&next=/"), &[]);
    assert_eq!(login.status, 303, "{}", login.body);
    let cookie = login.header("set-cookie").unwrap();
    cookie.split(';').next().unwrap().to_string()
}

#[tokio::test]
async fn a_logout_ends_the_session_at_once_for_every_daemon_of_the_redis() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    // Two daemons behind one load balancer: each takes the sessions the token signed.
    let (one, _logs, first) = serving(&server, "one", "token = s3cret");
    let (two, _logs, second) = serving(&server, "two", "token = s3cret");
    let session = log_in(&first, "s3cret");
    let with_session = [("Cookie", session.as_str())];
    let logged_in = |http: &str| {
        let page = request(http, "GET", "/", &with_session, b"").body;
        page.contains("action=\"/logout\"")
    };
    assert!(
        logged_in(&first) && logged_in(&second),
        "one session for both"
    );
    let page = request(&first, "GET", "/topic?name=t", &with_session, b"").body;
    let token = field(&page, "form_token").to_string();

    // A copy of the cookie, kept by whoever took it.
    let logout = submit(
        &first,
        "/logout",
        &format!("form_token={token}"),
        &with_session,
    );
    assert_eq!(logout.status, 303, "{}", logout.body);
    assert!(logout.header("set-cookie").unwrap().contains("Max-Age=0"));

    assert!(
        !logged_in(&first) && !logged_in(&second),
        "ended for both at once"
    );
    let fields = format!("form_token={token}&topic=t");
    for http in [&first, &second] {
        let pause = submit(http, "/actions/pause", &fields, &with_session);
        assert_eq!(pause.status, 401, "{}", pause.body);
    }
    let paused: bool = redis.exists(format!("{PAUSED_PREFIX}t")).await.unwrap();
    assert!(!paused);
    // Remembered in Redis until the session would have expired (12 h), and no longer.
    let id = session.split('.').nth(1).unwrap();
    let ttl: i64 = redis.ttl(format!("delayer:logged_out:{id}")).await.unwrap();
    assert!((12 * 3600 - 60..=12 * 3600 + 60).contains(&ttl), "{ttl}");
    // A new login is a new session.
    let again = log_in(&second, "s3cret");
    assert_ne!(again, session);
    assert!(
        request(&first, "GET", "/", &[("Cookie", again.as_str())], b"")
            .body
            .contains("action=\"/logout\"")
    );
    one.stop();
    two.stop();
}

#[tokio::test]
async fn wrong_logins_in_a_row_are_refused_unchecked_after_five_and_the_token_works_again_within_seconds()
 {
    let server = RedisServer::start();
    let (daemon, _logs, http) = serving(&server, "guessed", "token = s3cret");
    let statuses: Vec<u16> = (0..20)
        .map(|n| submit(&http, "/login", &format!("token=guess{n}&next=/"), &[]).status)
        .collect();
    let count = |status| statuses.iter().filter(|&&s| s == status).count();
    assert_eq!((count(401), count(429)), (5, 15), "{statuses:?}");
    assert!(
        statuses[..5].iter().all(|&status| status == 401),
        "{statuses:?}"
    );

    // While it is throttled, even the right token is not looked at.
    let throttled = submit(&http, "/login", "token=s3cret&next=/", &[]);
    assert_eq!(throttled.status, 429, "{}", throttled.body);
    assert_eq!(throttled.header("retry-after"), Some("5"));
    assert!(throttled.header("set-cookie").is_none());
    assert!(
        throttled
            .body
            .contains("Too many failed logins from this address: try again in 5 s"),
        "{}",
        throttled.body
    );
    // A refused try costs nothing: one comes back within 5 s, and the operator is in.
    support::wait_until_sync(Duration::from_secs(10), "the token to log in again", || {
        submit(&http, "/login", "token=s3cret&next=/", &[]).status == 303
    });
    daemon.stop();
}

#[tokio::test]
async fn while_redis_does_not_answer_the_overview_says_so_and_shows_no_zeros() {
    let mut server = RedisServer::start();
    let (daemon, _logs, http) = serving(&server, "down", "");
    server.stop(false);

    let page = request(&http, "GET", "/", &[], b"").body;

    assert!(page.contains("Nothing read from Redis yet"), "{page}");
    assert!(
        page.contains("<dt>reachable</dt><dd><span class=\"bad\">no: "),
        "{page}"
    );
    assert!(!page.contains("<dt>waiting</dt>"), "{page}");
    daemon.stop();
}

/// The ids of schedule `name`'s jobs in the pool or on topic `topic`'s ready list, read at once.
async fn jobs_of(
    redis: &mut MultiplexedConnection,
    topic: &str,
    name: &str,
) -> std::collections::BTreeSet<String> {
    let (pooled, ready): (Vec<String>, Vec<String>) = delayer_client::redis::pipe()
        .atomic()
        .zrange(JOB_POOL, 0, -1)
        .lrange(ready_queue(topic), 0, -1)
        .query_async(redis)
        .await
        .unwrap();
    let prefix = format!("{name}@");
    pooled
        .into_iter()
        .chain(ready)
        .filter(|id| id.starts_with(&prefix))
        .collect()
}

/// Count `field` of schedule `name`'s hash (0 until it counts).
async fn schedule_count(redis: &mut MultiplexedConnection, name: &str, field: &str) -> u64 {
    schedule_field(redis, name, field)
        .await
        .map_or(0, |count| count.parse().unwrap())
}

#[tokio::test]
async fn the_schedules_page_in_a_browser_shows_ticks_in_each_zone_and_its_forms_pause_resume_and_run()
 {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "schedules", "");
    let client = Client::connect(server.info()).await.unwrap();
    let inspector = Inspector::new(&client);
    let mut morning = Definition::new("tokyo-morning", "0 9 * * *", "report");
    morning.zone = "Asia/Tokyo".into();
    morning.body = b"r".to_vec();
    // Every second, on Tokyo's clock; one job for the ticks missed while paused.
    let mut beat = Definition::new("beat", "* * * * * *", "beat");
    beat.zone = "Asia/Tokyo".into();
    beat.body = b"b".to_vec();
    beat.catch_up = CatchUp::Latest;
    for definition in [&morning, &beat] {
        inspector
            .save_schedule(definition, Source::Api)
            .await
            .unwrap();
    }
    wait_for_ready(&redis, "beat", 1).await;
    let url = |path: &str| format!("http://{http}{path}");
    let dir = server.dir();

    // Every schedule, its next ticks in its own zone, with the offset.
    let page = chromium(dir, &url("/schedules"), None);
    let row = schedule_row(&page, "tokyo-morning");
    assert_eq!(
        row[..3],
        [
            "<code>0 9 * * *</code>",
            "Asia/Tokyo",
            "<a href=\"/topic?name=report\">report</a>"
        ],
        "{page}"
    );
    let ticks: Vec<&str> = row[3].split("<br>").collect();
    assert!(
        ticks.len() == 3 && ticks.iter().all(|tick| tick.ends_with("T09:00:00+09:00")),
        "{row:?}"
    );
    let beat_row = schedule_row(&page, "beat");
    assert!(
        beat_row[3]
            .split("<br>")
            .all(|tick| tick.ends_with("+09:00")),
        "{beat_row:?}"
    );
    assert!(
        beat_row[5].contains("<a href=\"/job?id=beat%40"),
        "{beat_row:?}"
    );
    assert_eq!(beat_row[10], "active", "{beat_row:?}");
    let act = &beat_row[11];
    assert!(
        act.contains("action=\"/actions/pause-schedule\"")
            && act.contains("name=\"name\" value=\"beat\""),
        "{act}"
    );

    // The rules of every action: a POST of a form of this console, from this site.
    let token = field(&page, "form_token").to_string();
    let fields = format!("form_token={token}&name=beat");
    let origin = format!("http://{http}");
    let from_page = [
        ("Origin", origin.as_str()),
        ("Sec-Fetch-Site", "same-origin"),
    ];
    let get = request(&http, "GET", "/actions/pause-schedule?name=beat", &[], b"");
    let forged = submit(&http, "/actions/pause-schedule", "name=beat", &from_page);
    let elsewhere = [("Sec-Fetch-Site", "cross-site")];
    let cross = submit(&http, "/actions/pause-schedule", &fields, &elsewhere);
    assert_eq!((get.status, forged.status, cross.status), (405, 403, 403));
    assert_eq!(schedule_field(&mut redis, "beat", "paused").await, None);

    // Pause from the page: no job for three ticks.
    let paused = submit(&http, "/actions/pause-schedule", &fields, &from_page);
    assert_eq!(
        paused.header("location"),
        Some("/schedules?done=schedule-paused"),
        "{}",
        paused.body
    );
    assert!(schedule_field(&mut redis, "beat", "paused").await.is_some());
    let next = schedule_field(&mut redis, "beat", "next").await.unwrap();
    let next_tick = parse_ms(&next).unwrap();
    let fired = schedule_count(&mut redis, "beat", "fired").await;
    let before = jobs_of(&mut redis, "beat", "beat").await;
    // Each would have been claimed half a second ahead.
    wait_for(Duration::from_secs(20), "three ticks to pass", || {
        let mut redis = redis.clone();
        async move { (redis_ms(&mut redis).await > next_tick + 2_500).then_some(()) }
    })
    .await;
    assert_eq!(jobs_of(&mut redis, "beat", "beat").await, before);
    assert_eq!(schedule_count(&mut redis, "beat", "fired").await, fired);
    assert_eq!(schedule_field(&mut redis, "beat", "next").await, Some(next));
    let page = chromium(dir, &url("/schedules?done=schedule-paused"), None);
    assert!(page.contains("no daemon claims its ticks"), "{page}");
    let beat_row = schedule_row(&page, "beat");
    assert!(
        beat_row[10].starts_with("<b>paused</b> since ") && beat_row[10].ends_with("+09:00"),
        "{beat_row:?}"
    );
    assert!(
        beat_row[11].contains("action=\"/actions/resume-schedule\""),
        "{beat_row:?}"
    );

    // Resume from the page: under catch_up = latest, the claim that follows pushes one job for
    // the ticks missed (the latest of them, due already), none for the others; then a job a tick.
    let caught_up = schedule_count(&mut redis, "beat", "caught_up").await;
    let missed = schedule_count(&mut redis, "beat", "missed").await;
    let resumed_at = redis_ms(&mut redis).await;
    let resumed = submit(&http, "/actions/resume-schedule", &fields, &from_page);
    assert_eq!(
        resumed.header("location"),
        Some("/schedules?done=schedule-resumed"),
        "{}",
        resumed.body
    );
    let seen_at = wait_for(
        Duration::from_secs(10),
        "the missed ticks caught up",
        || {
            let mut redis = redis.clone();
            async move {
                let now = redis_ms(&mut redis).await;
                let count = schedule_count(&mut redis, "beat", "caught_up").await;
                (count > caught_up).then_some(now)
            }
        },
    )
    .await;
    // Ticks next_tick and +1 s at least were missed while paused (a tick within a second of the
    // claim is late, not missed): the latest caught up, the rest counted missed.
    assert!(schedule_count(&mut redis, "beat", "missed").await > missed);
    let jobs = jobs_of(&mut redis, "beat", "beat").await;
    let first = (next_tick..seen_at)
        .step_by(1000)
        .find(|&tick| jobs.contains(&tick_id("beat", tick).to_string()))
        .unwrap_or_else(|| panic!("no job for a tick since the pause: {jobs:?}"));
    assert!(
        first >= resumed_at - 2000,
        "a job for tick {first}, missed before the resume at {resumed_at}: {jobs:?}"
    );
    let late: Option<String> = redis
        .hget(job_bucket(tick_id("beat", first)), "delay")
        .await
        .unwrap();
    assert_eq!(late.as_deref(), Some("0.000"), "pushed after its tick");
    let on_time = tick_id("beat", first + 2000).to_string();
    wait_for(Duration::from_secs(10), "a tick after the resume", || {
        let mut redis = redis.clone();
        let bucket = job_bucket(&on_time);
        async move { redis.exists::<_, bool>(bucket).await.unwrap().then_some(()) }
    })
    .await;

    // Run now: the schedule's job, pushed once, shows as its last job, with its state.
    let fields = format!("form_token={token}&name=tokyo-morning");
    let run = submit(&http, "/actions/run-schedule", &fields, &from_page);
    assert_eq!(
        run.header("location"),
        Some("/schedules?done=schedule-run"),
        "{}",
        run.body
    );
    assert_eq!(
        schedule_field(&mut redis, "tokyo-morning", "runs")
            .await
            .as_deref(),
        Some("1")
    );
    let last_job = schedule_field(&mut redis, "tokyo-morning", "last_job")
        .await
        .unwrap();
    assert!(last_job.ends_with("/run"), "{last_job}");
    wait_for_ready(&redis, "report", 1).await;
    let page = chromium(dir, &url("/schedules"), None);
    let row = schedule_row(&page, "tokyo-morning");
    assert!(
        row[5].contains(&format!(">{last_job}</a> (ready)")),
        "{row:?}"
    );

    if let Some(shots) = std::env::var_os("DELAYER_SCREENSHOTS") {
        // Its table is wider than the other pages.
        let shot = Path::new(&shots).join("console-schedules.png");
        let wide = ["--window-size=1500,420"];
        chromium_with(dir, &url("/schedules"), Some(&shot), &wide);
    }
    daemon.stop();
}

#[tokio::test]
async fn with_a_token_the_schedules_page_shows_no_forms_and_its_actions_want_a_login() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "guarded-schedules", "token = s3cret");
    let client = Client::connect(server.info()).await.unwrap();
    let inspector = Inspector::new(&client);
    let definition = Definition::new("nightly", "0 3 * * *", "report");
    inspector
        .save_schedule(&definition, Source::Api)
        .await
        .unwrap();

    let page = request(&http, "GET", "/schedules", &[], b"");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<td>nightly</td>"), "{}", page.body);
    assert!(
        !page.body.contains("-schedule\""),
        "no forms: {}",
        page.body
    );
    for action in ["pause-schedule", "resume-schedule", "run-schedule"] {
        let path = format!("/actions/{action}");
        let refused = submit(&http, &path, "name=nightly&form_token=00ff", &[]);
        assert_eq!(refused.status, 401, "{action}: {}", refused.body);
    }
    assert_eq!(schedule_field(&mut redis, "nightly", "paused").await, None);
    assert_eq!(schedule_field(&mut redis, "nightly", "runs").await, None);

    let session = log_in(&http, "s3cret");
    let with_session = [("Cookie", session.as_str())];
    let page = request(&http, "GET", "/schedules", &with_session, b"").body;
    let token = field(&page, "form_token").to_string();
    let no_token = submit(
        &http,
        "/actions/pause-schedule",
        "name=nightly",
        &with_session,
    );
    assert_eq!(no_token.status, 403, "{}", no_token.body);
    let fields = format!("name=nightly&form_token={token}");
    let paused = submit(&http, "/actions/pause-schedule", &fields, &with_session);
    assert_eq!(paused.status, 303, "{}", paused.body);
    assert!(
        schedule_field(&mut redis, "nightly", "paused")
            .await
            .is_some()
    );
    let fields = format!("name=nope&form_token={token}");
    let unknown = submit(&http, "/actions/run-schedule", &fields, &with_session);
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    daemon.stop();
}
