//! The console's pages, as maud templates: every value is escaped unless marked otherwise, so
//! nothing a client wrote to Redis (a topic, an id, a body) can become markup. No script, no
//! asset from another host: the pages work offline and without JavaScript (the overview's one
//! small script only spares a reload).

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use delayer_client::{JobId, JobInfo, JobMarks, State, Topic, TopicDetails};
use maud::{DOCTYPE, Markup, PreEscaped, html};

use crate::metrics::Census;
use crate::text::escape::capped;
use crate::text::time::rfc3339;

/// The pages' style sheet, inline (its hash is in the Content-Security-Policy).
pub const STYLE: &str = "body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#222}\
header{background:#243447;color:#fff;padding:.5em 2em;display:flex;gap:2em;align-items:center}\
header a{color:#fff}main{padding:1em 2em}table{border-collapse:collapse;margin:.5em 0}\
td,th{padding:.2em .8em;border-bottom:1px solid #ddd;text-align:left}td.n,th.n{text-align:right}\
.bad{color:#b00}.warn{background:#fff3cd;padding:.5em 2em}.said{background:#d1e7dd;padding:.5em 2em}\
form.inline{display:inline}pre{background:#f6f6f6;padding:.5em;white-space:pre-wrap;word-break:break-all}\
dl{display:grid;grid-template-columns:max-content auto;gap:0 1em;margin:0}dt{font-weight:bold}dd{margin:0}\
h1{font-size:1.4em;margin:.3em 0}h2{font-size:1.1em;margin:1em 0 .3em}.cards{display:flex;gap:3em;flex-wrap:wrap}";

/// The overview's one script: every 5 s, the page's `main` again in place (marked
/// `data-refreshed`), unless someone is typing in a field. Without JavaScript, a `<noscript>`
/// refresh reloads the page instead.
pub const REFRESH: &str = "setInterval(async()=>{const a=document.activeElement;\
if(a&&a.tagName==='INPUT')return;try{const r=await fetch(location.href);if(!r.ok)return;\
const m=new DOMParser().parseFromString(await r.text(),'text/html').querySelector('main');\
if(m){m.dataset.refreshed='';document.querySelector('main').replaceWith(m)}}catch(e){}},5000);";

/// Who is looking.
pub struct Viewer {
    /// Whether `[http] token` guards the console.
    pub guarded: bool,
    /// Whether they may see bodies and act (logged in, or no token).
    pub authorized: bool,
    /// The token their forms carry.
    pub form_token: String,
}

/// A whole page: the header with the search box, the warnings, what an action said, `main`.
pub fn page(
    title: &str,
    viewer: &Viewer,
    said: Option<&str>,
    refresh: bool,
    main: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                @if refresh {
                    noscript { meta http-equiv="refresh" content="5"; }
                    script { (PreEscaped(REFRESH)) }
                }
                title { (title) " · delayer" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header {
                    a href="/" { b { "delayer" } }
                    form method="get" action="/job" {
                        input type="search" name="id" placeholder="job id" aria-label="job id";
                        " " button { "Find" }
                    }
                    @if viewer.guarded {
                        @if viewer.authorized {
                            form.inline method="post" action="/logout" {
                                (token_field(viewer))
                                button { "Log out" }
                            }
                        } @else {
                            a href="/login" { "Log in" }
                        }
                    }
                }
                @if !viewer.guarded {
                    p.warn { "No [http] token is set: anyone who can reach this port can read job bodies and act on jobs." }
                }
                @if let Some(said) = said { p.said { (said) } }
                main { (main) }
            }
        }
    }
}

/// The hidden field that proves a form came from this console.
fn token_field(viewer: &Viewer) -> Markup {
    html! { input type="hidden" name="form_token" value=(viewer.form_token); }
}

/// A topic's or id's query: by text when it is UTF-8, else by the base64 of its bytes.
pub fn query(text_name: &str, base64_name: &str, bytes: &[u8]) -> String {
    let (name, value) = match crate::text::bytes::base64(bytes) {
        Some(encoded) => (base64_name, encoded),
        None => (text_name, String::from_utf8_lossy(bytes).into_owned()),
    };
    let value: String = form_urlencoded::byte_serialize(value.as_bytes()).collect();
    format!("{name}={value}")
}

/// The login page's address, going on to `path` after.
fn login_then(path: &str) -> String {
    let path: String = form_urlencoded::byte_serialize(path.as_bytes()).collect();
    format!("/login?next={path}")
}

/// Hidden fields naming a topic or an id as [`query`] does.
fn named_field(text_name: &str, base64_name: &str, bytes: &[u8]) -> Markup {
    match crate::text::bytes::base64(bytes) {
        Some(encoded) => html! { input type="hidden" name=(base64_name) value=(encoded); },
        None => {
            html! { input type="hidden" name=(text_name) value=(String::from_utf8_lossy(bytes)); }
        }
    }
}

pub fn topic_link(topic: &Topic) -> Markup {
    html! { a href={ "/topic?" (query("name", "base64", topic.as_bytes())) } { (capped(topic)) } }
}

fn job_link(id: &JobId) -> Markup {
    html! { a href={ "/job?" (query("id", "id_base64", id.as_bytes())) } { (capped(id)) } }
}

/// A span of time as people read it: 850 ms, 12.5 s, 3 min 20 s, 2 h 5 min.
pub fn span(span: Duration) -> String {
    let seconds = span.as_secs_f64();
    match span.as_secs() {
        0 => format!("{:.0} ms", seconds * 1000.0),
        1..60 => format!("{seconds:.1} s"),
        60..3600 => format!("{} min {} s", span.as_secs() / 60, span.as_secs() % 60),
        _ => format!(
            "{} h {} min",
            span.as_secs() / 3600,
            span.as_secs() % 3600 / 60
        ),
    }
}

fn time(at: Option<SystemTime>) -> String {
    at.map_or_else(|| "—".into(), rfc3339)
}

/// The overview's figures, as the census read them.
pub struct Overview<'a> {
    pub redis_address: &'a str,
    pub redis_version: Option<&'a str>,
    /// Why the last read of Redis failed.
    pub redis_error: Option<&'a str>,
    pub version: &'a str,
    pub uptime: Duration,
    pub layout: &'a str,
    /// The last census read whole; `None` before the first.
    pub census: Option<&'a Census>,
    /// How late jobs were moved: median, 99th percentile, most (seconds).
    pub lag: Option<(f64, f64, f64)>,
    /// By topic, as `census.listed`: (moved, delivered again) per minute.
    pub rates: Vec<Option<(f64, f64)>>,
    pub listed_most: usize,
    pub reservations_counted: usize,
}

/// The overview below its health line: made once a second at most, whoever looks.
pub fn overview(o: &Overview) -> Markup {
    html! {
        div.cards {
            section {
                h2 { "Redis" }
                dl {
                    dt { "address" } dd { (o.redis_address) }
                    dt { "version" } dd { (o.redis_version.unwrap_or("—")) }
                    dt { "reachable" } dd {
                        @match o.redis_error {
                            None => "yes",
                            Some(error) => span.bad { "no: " (error) },
                        }
                    }
                }
            }
            section {
                h2 { "This daemon" }
                dl {
                    dt { "version" } dd { (o.version) }
                    dt { "up for" } dd { (span(o.uptime)) }
                    dt { "key layout" } dd { (o.layout) }
                    dt { "move lag" } dd { (lag(o.lag)) }
                }
            }
            @if let Some(census) = o.census { (jobs(census, o.redis_error.is_some())) }
        }
        @match o.census {
            // Never zeros: a Redis that does not answer must not pass for an empty one.
            None => p.bad { "Nothing read from Redis yet: no figures to show." },
            Some(census) => (topics(o, census)),
        }
    }
}

/// How late jobs were moved: median, 99th percentile, most.
fn lag(lag: Option<(f64, f64, f64)>) -> Markup {
    let at = |seconds: f64| span(Duration::from_secs_f64(seconds));
    html! {
        @match lag {
            Some((p50, p99, max)) => {
                "median " (at(p50)) ", 99th percentile " (at(p99)) ", most " (at(max))
            }
            None => "no job moved yet",
        }
    }
}

/// The pool's figures; `stale` when Redis did not answer the last read.
fn jobs(census: &Census, stale: bool) -> Markup {
    html! {
        section {
            h2 { "Jobs" @if stale { " (as last read)" } }
            dl {
                dt { "waiting" } dd { (census.waiting) }
                dt { "due now" } dd { (census.due_now) }
                dt { "reserved" } dd { (census.reserved) }
                dt { "next due" } dd { (time(census.next_due)) }
            }
        }
    }
}

fn topics(o: &Overview, census: &Census) -> Markup {
    let ages: HashMap<&str, f64> = census
        .oldest_ready_age
        .iter()
        .map(|(name, age)| (name.as_str(), *age))
        .collect();
    html! {
        h2 { "Topics" }
        table {
            tr {
                th { "topic" } th.n { "waiting" } th.n { "ready" } th.n { "reserved" } th.n { "dead" }
                th.n { "oldest ready" } th.n { "moved / min" } th.n { "delivered again / min" }
                th { "state" }
            }
            @for (index, topic) in census.listed_topics.iter().enumerate() {
                // No details when they could not be read: dashes, not zeros.
                @let details = census.details.get(index);
                @let dash = || "—".to_string();
                @let rates = o.rates.get(index).copied().flatten();
                @let name = census.listed[index].0.as_str();
                tr {
                    td { (topic_link(topic)) }
                    td.n { (details.and_then(|d| d.waiting).map_or_else(dash, |n| n.to_string())) }
                    td.n { (census.listed[index].1) }
                    td.n { (details.map_or_else(dash, |d| d.reserved.to_string())) }
                    td.n { (census.dead.get(index).map_or(0, |(_, dead)| *dead)) }
                    td.n { (ages.get(name).map_or_else(dash, |age| span(Duration::from_secs_f64(*age)))) }
                    td.n { (rates.map_or_else(|| "—".into(), |(moved, _)| format!("{moved:.1}"))) }
                    td.n { (rates.map_or_else(|| "—".into(), |(_, again)| format!("{again:.1}"))) }
                    td { @if census.paused.contains(name) { b { "paused" } } }
                }
            }
        }
        @if census.unlisted_topics > 0 {
            p {
                "And " (census.unlisted_topics) " more topics with " (census.unlisted_ready)
                " ready jobs in all ([http] max_listed_topics = " (o.listed_most) ")."
            }
        }
        p {
            "Waiting by topic is known in the cluster layout only (one pool holds every topic's jobs otherwise)."
            @if census.reserved > o.reservations_counted as u64 {
                " Reserved by topic counts the " (o.reservations_counted) " reservations due back soonest."
            }
            " Rates are this daemon's moves, over the last minute (or since it started)."
        }
        p { "Read from Redis at " (time(delayer_wire::time::from_unix(census.read_at))) ": " (census.topics) " topics." }
    }
}

/// One list of a topic's page.
pub struct Window {
    /// `ready`, `reserved` or `dead`: the list and its query parameter.
    pub list: &'static str,
    /// How many the list holds (of those counted).
    pub total: u64,
    /// How many were skipped to get here.
    pub skip: usize,
    /// The window's jobs, with their reservation's deadline (reserved jobs only).
    pub ids: Vec<(JobId, Option<SystemTime>)>,
    /// What each job's data says, in the same order.
    pub marks: Vec<JobMarks>,
}

pub struct TopicPage<'a> {
    pub topic: &'a Topic,
    pub details: TopicDetails,
    pub oldest_ready_age: Option<Duration>,
    pub paused: bool,
    pub windows: Vec<Window>,
    pub page_size: usize,
}

pub fn topic(t: &TopicPage, viewer: &Viewer) -> Markup {
    let name = query("name", "base64", t.topic.as_bytes());
    html! {
        h1 { "Topic " (capped(t.topic)) @if t.paused { " (paused)" } }
        p {
            "Oldest ready job: " (t.oldest_ready_age.map_or_else(|| "none".into(), span))
            @if let Some(waiting) = t.details.waiting { ". Waiting: " (waiting) }
            "."
            @if t.paused { " Paused: its jobs that fall due wait in the pool until it is resumed." }
        }
        @if viewer.authorized {
            @let (action, label) = if t.paused { ("resume", "Resume") } else { ("pause", "Pause") };
            form method="post" action={ "/actions/" (action) } {
                (token_field(viewer))
                (named_field("topic", "topic_base64", t.topic.as_bytes()))
                button { (label) " this topic" }
            }
        }
        @for window in &t.windows {
            h2 { (window.list) " (" (window.total) ")" }
            @if window.list == "dead" && window.total > 0 && viewer.authorized {
                form method="post" action="/actions/requeue" {
                    (token_field(viewer))
                    (named_field("topic", "topic_base64", t.topic.as_bytes()))
                    button { "Requeue all dead jobs (" (window.total) ")" }
                }
            }
            @if window.ids.is_empty() {
                p { "None" @if window.skip > 0 { " past " (window.skip) } "." }
            } @else {
                table {
                    tr {
                        th.n { "#" } th { "id" }
                        @match window.list {
                            "reserved" => th { "deadline" },
                            "dead" => th { "died" },
                            _ => th { "due" },
                        }
                        th.n { "attempts" }
                        @if window.list == "dead" && viewer.authorized { th { "act" } }
                    }
                    @for (index, (id, deadline)) in window.ids.iter().enumerate() {
                        @let marks = window.marks.get(index).cloned().unwrap_or_default();
                        tr {
                            td.n { (window.skip + index + 1) }
                            td { (job_link(id)) }
                            @match window.list {
                                "reserved" => td { (time(*deadline)) },
                                "dead" => td { (time(marks.died)) },
                                _ => td { (time(marks.due)) },
                            }
                            td.n { (marks.attempts) }
                            @if window.list == "dead" && viewer.authorized {
                                td { (dead_job_forms(viewer, t.topic, id)) }
                            }
                        }
                    }
                }
                @if window.skip > 0 || window.skip + window.ids.len() < window.total as usize { p {
                    @if window.skip > 0 {
                        a href={ "/topic?" (name) "&" (window.list) "=" (window.skip.saturating_sub(t.page_size)) } { "« earlier" }
                        " "
                    }
                    @if (window.skip + window.ids.len()) < window.total as usize {
                        a href={ "/topic?" (name) "&" (window.list) "=" (window.skip + t.page_size) } { "later »" }
                    }
                } }
            }
        }
    }
}

fn dead_job_forms(viewer: &Viewer, topic: &Topic, id: &JobId) -> Markup {
    html! {
        @for (action, label) in [("requeue", "Requeue"), ("delete", "Delete")] {
            form.inline method="post" action={ "/actions/" (action) } {
                (token_field(viewer))
                (named_field("topic", "topic_base64", topic.as_bytes()))
                (named_field("id", "id_base64", id.as_bytes()))
                button { (label) }
            }
            " "
        }
    }
}

/// The most of a body a job's page shows.
pub const BODY_SHOWN: usize = 4096;

pub fn job(info: &JobInfo, viewer: &Viewer) -> Markup {
    html! {
        h1 { "Job " (capped(&info.id)) }
        @if info.state == State::Unknown {
            p { "No such job: no data under this id (never pushed, taken and finished, removed, or expired)." }
        } @else {
            dl {
                dt { "state" } dd { (info.state.name()) }
                dt { "topic" } dd { @if let Some(topic) = &info.topic { (topic_link(topic)) } }
                dt { "due" } dd { (time(info.due)) }
                dt { "attempts" } dd { (info.attempts) }
                dt { "reservation deadline" } dd { (time(info.deadline)) }
            }
            h2 { "Body" }
            @if !viewer.authorized {
                p {
                    a href=(login_then(&format!("/job?{}", query("id", "id_base64", info.id.as_bytes())))) { "Log in" }
                    " to see the body and act on the job."
                }
            } @else if let Some(body) = &info.body {
                (body_view(body))
            } @else if let Some(size) = info.body_size {
                p { "The body is " (size) " bytes, over " code { "[delayer] max_body_bytes" } ": not read here." }
            }
            @if viewer.authorized {
                (job_actions(info, viewer))
            }
        }
    }
}

fn body_view(body: &[u8]) -> Markup {
    let longer = body.len() > BODY_SHOWN;
    html! {
        @match std::str::from_utf8(body) {
            Ok(text) => { pre { (cut(text, BODY_SHOWN)) } }
            Err(_) => {
                p { "Not UTF-8: in base64." }
                pre { (STANDARD.encode(&body[..body.len().min(BODY_SHOWN / 4 * 3)])) }
            }
        }
        @if longer { p { "The first " (BODY_SHOWN) " bytes or so of " (body.len()) "." } }
    }
}

/// `text`'s first `most` bytes or fewer, whole characters only.
fn cut(text: &str, most: usize) -> &str {
    let mut end = text.len().min(most);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn job_actions(info: &JobInfo, viewer: &Viewer) -> Markup {
    html! {
        @match (info.state, &info.topic) {
            (State::Dead, Some(topic)) => { div { (dead_job_forms(viewer, topic, &info.id)) } }
            (State::Waiting | State::Ready, _) => {
                form method="post" action="/actions/remove" {
                    (token_field(viewer))
                    (named_field("id", "id_base64", info.id.as_bytes()))
                    button { "Remove this job" }
                }
            }
            _ => {}
        }
    }
}

/// The login form, with what went wrong with the last try, if anything.
pub fn login(next: &str, trouble: Option<&str>) -> Markup {
    html! {
        h1 { "Log in" }
        @if let Some(trouble) = trouble { p.bad { (trouble) } }
        form method="post" action="/login" {
            input type="hidden" name="next" value=(next);
            label { "[http] token " input type="password" name="token" autofocus; }
            " " button { "Log in" }
        }
        p { "The session lasts 12 hours, in a cookie this console alone gets." }
    }
}

/// What went wrong with a request or an action.
pub fn problem(message: &str, back: &str) -> Markup {
    html! {
        p.bad { (message) }
        p { a href=(back) { "Back" } }
    }
}

#[cfg(test)]
mod tests {
    use super::{BODY_SHOWN, Viewer, job};
    use delayer_client::{JobInfo, State};

    fn page_of(body: &[u8], authorized: bool) -> String {
        let info = JobInfo {
            state: State::Dead,
            topic: Some("t".into()),
            body: Some(body.to_vec()),
            ..JobInfo::unknown("j")
        };
        let viewer = Viewer {
            guarded: true,
            authorized,
            form_token: "ft".into(),
        };
        job(&info, &viewer).into_string()
    }

    #[test]
    fn a_body_is_escaped_cut_to_a_few_kib_and_shown_in_base64_when_it_is_not_text() {
        let page = page_of(b"<script>alert(1)</script>", true);
        assert!(
            page.contains("<pre>&lt;script&gt;alert(1)&lt;/script&gt;</pre>"),
            "{page}"
        );

        // Cut at a character's edge: "é" is two bytes.
        let long = "é".repeat(BODY_SHOWN);
        let page = page_of(long.as_bytes(), true);
        let shown = "é".repeat(BODY_SHOWN / 2);
        assert!(page.contains(&format!("<pre>{shown}</pre>")), "{page}");
        assert!(page.contains(&format!("of {}.", 2 * BODY_SHOWN)), "{page}");

        let page = page_of(b"\xff\x00bin", true);
        assert!(
            page.contains("Not UTF-8: in base64.</p><pre>/wBiaW4=</pre>"),
            "{page}"
        );
    }

    #[test]
    fn without_a_login_a_page_shows_no_body_and_no_form() {
        let page = page_of(b"secret", false);
        assert!(
            !page.contains("secret") && !page.contains("<form"),
            "{page}"
        );
        assert!(
            page.contains("href=\"/login?next=%2Fjob%3Fid%3Dj\""),
            "{page}"
        );
        let page = page_of(b"secret", true);
        assert!(page.contains("action=\"/actions/requeue\"") && page.contains("value=\"ft\""));
    }
}
