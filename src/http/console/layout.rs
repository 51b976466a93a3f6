//! The frame of every page (the header with the links to the other pages and the search box, the
//! warnings, the style sheet, the overview's one script) and how pages go out: with the headers
//! every page has, as a problem, or as a redirect. No asset from another host: the pages work
//! offline and without JavaScript (the script only spares the overview and the consumers' page a
//! reload).

use std::collections::HashMap;
use std::sync::LazyLock;

use axum::http::StatusCode;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, LOCATION, REFERRER_POLICY, SET_COOKIE,
    X_CONTENT_TYPE_OPTIONS,
};
use axum::response::{Html, IntoResponse, Response};
use base64::Engine;
use maud::{DOCTYPE, Markup, PreEscaped, html};

use super::forms::token_field;
use super::notice;
use super::viewer::Viewer;

/// The pages' style sheet, inline (its hash is in the Content-Security-Policy).
const STYLE: &str = "body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#222}\
header{background:#243447;color:#fff;padding:.5em 2em;display:flex;gap:2em;align-items:center}\
header a{color:#fff}main{padding:1em 2em}table{border-collapse:collapse;margin:.5em 0}\
td,th{padding:.2em .8em;border-bottom:1px solid #ddd;text-align:left}td.n,th.n{text-align:right}\
.bad{color:#b00}.warn{background:#fff3cd;padding:.5em 2em}.done{background:#d1e7dd;padding:.5em 2em}\
form.inline{display:inline}.nw{white-space:nowrap}pre{background:#f6f6f6;padding:.5em;white-space:pre-wrap;word-break:break-all}\
dl{display:grid;grid-template-columns:max-content auto;gap:0 1em;margin:0}dt{font-weight:bold}dd{margin:0}\
h1{font-size:1.4em;margin:.3em 0}h2{font-size:1.1em;margin:1em 0 .3em}.cards{display:flex;gap:3em;flex-wrap:wrap}\
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));gap:.2em 2em;max-width:1100px}\
figure.chart{margin:0}figure.chart svg{display:block;width:100%;height:auto}.axis{color:#666;margin:0}";

/// The overview's one script: every 5 s, the page's `main` again in place (marked
/// `data-refreshed`), unless someone is typing in a field. Without JavaScript, a `<noscript>`
/// refresh reloads the page instead.
const REFRESH: &str = "setInterval(async()=>{const a=document.activeElement;\
if(a&&a.tagName==='INPUT')return;try{const r=await fetch(location.href);if(!r.ok)return;\
const m=new DOMParser().parseFromString(await r.text(),'text/html').querySelector('main');\
if(m){m.dataset.refreshed='';document.querySelector('main').replaceWith(m)}}catch(e){}},5000);";

/// Scripts and styles by the hashes of the one of each (no other runs, whatever a page holds),
/// fetches from this host only (the overview's refresh), forms to this host only, and no framing
/// (a page of another site cannot overlay ours to steal clicks).
static POLICY: LazyLock<String> = LazyLock::new(|| {
    let hash = |text: &str| {
        let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
        base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
    };
    format!(
        "default-src 'none'; script-src 'sha256-{}'; style-src 'sha256-{}'; connect-src 'self'; \
         form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        hash(REFRESH),
        hash(STYLE)
    )
});

/// A page's answer (200): the whole page, saying what the action before it did (from the query's
/// `fields`: see [`notice`](super::notice)).
pub(super) fn shown(
    title: &str,
    viewer: &Viewer,
    fields: &HashMap<String, String>,
    refresh: bool,
    main: Markup,
) -> Response {
    let done = notice::done(fields);
    respond(
        StatusCode::OK,
        page(title, viewer, done.as_deref(), refresh, main),
    )
}

/// A whole page: the header with the links to the other pages and the search box, the warnings,
/// what an action did (`done`), `main`.
pub(super) fn page(
    title: &str,
    viewer: &Viewer,
    done: Option<&str>,
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
                    a href="/waiting" { "Waiting" }
                    a href="/schedules" { "Schedules" }
                    a href="/consumers" { "Consumers" }
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
                @if let Some(done) = done { p.done { (done) } }
                main { (main) }
            }
        }
    }
}

/// A page, with the headers every page has: the policy, no sniffing, a referrer for this server
/// alone (ids are in the links, and a form's `Origin` then names this server, not `null`), no
/// caching (bodies are on some pages).
pub(super) fn respond(status: StatusCode, markup: Markup) -> Response {
    let headers = [
        (CONTENT_SECURITY_POLICY, POLICY.as_str()),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (REFERRER_POLICY, "same-origin"),
        (CACHE_CONTROL, "no-store"),
    ];
    (status, headers, Html(markup.into_string())).into_response()
}

/// A page of problem `message` (status `status`) with a link back.
pub(super) fn problem(status: StatusCode, viewer: &Viewer, message: &str, back: &str) -> Response {
    let main = html! {
        p.bad { (message) }
        p { a href=(back) { "Back" } }
    };
    respond(status, page("Problem", viewer, None, false, main))
}

/// A 303 to `location`, with `cookie` set if given.
pub(super) fn see_other(location: &str, cookie: Option<String>) -> Response {
    let mut response = (StatusCode::SEE_OTHER, [(LOCATION, location.to_string())]).into_response();
    if let Some(cookie) = cookie.and_then(|cookie| cookie.parse().ok()) {
        response.headers_mut().insert(SET_COOKIE, cookie);
    }
    response
}
