//! Logging in and out: a login with `[http] token` sets the session cookie, its tries counted
//! against guessing (see `login_tries`); a logout ends the session in Redis for every daemon there, so
//! that a copy of the cookie stops working at once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::header::{RETRY_AFTER, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::Response;
use maud::{Markup, html};
use tokio::time::Instant;

use super::fields::fields;
use super::layout::{self, problem, respond, see_other};
use super::login_tries::Throttled;
use super::logouts;
use super::session::{self, unix_seconds};
use super::viewer::{allowed, viewer};
use crate::http::auth::same;
use crate::http::state::AppState;

/// How much longer than its session an ended session is remembered: the clocks of the daemons
/// that check it may differ a little from this one's.
const CLOCK_SLACK: Duration = Duration::from_secs(60);

pub(super) async fn form(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let (viewer, _) = viewer(&state, &headers).await;
    let next = fields(uri.query().unwrap_or_default().as_bytes())
        .remove("next")
        .unwrap_or_else(|| "/".into());
    let main = render(&next, None);
    respond(
        StatusCode::OK,
        layout::page("Log in", &viewer, None, false, main),
    )
}

/// The login form, with what went wrong with the last try, if anything.
fn render(next: &str, trouble: Option<&str>) -> Markup {
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

/// A path on this host to go on to: `next` when it is one, else `/` (never another site: not
/// `//host`, nor `/\\host` or `/<tab>/host`, which browsers read as `//host`).
fn local(next: Option<&String>) -> String {
    match next {
        Some(next)
            if next.starts_with('/')
                && !next.starts_with("//")
                && next.chars().all(|c| c.is_ascii_graphic() && c != '\\') =>
        {
            next.clone()
        }
        _ => "/".into(),
    }
}

pub(super) async fn login(
    State(state): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (viewer, _) = viewer(&state, &headers).await;
    let fields = fields(&body);
    let next = local(fields.get("next"));
    let Some(token) = &state.token else {
        return see_other(&next, None);
    };
    let page = |status, trouble: &str| {
        let main = render(&next, Some(trouble));
        respond(status, layout::page("Log in", &viewer, None, false, main))
    };
    let tries = &state.console.login_tries;
    if let Err(throttled) = tries.take(peer.ip(), Instant::now()) {
        let (whose, wait) = match throttled {
            Throttled::Address(wait) => ("from this address", wait),
            Throttled::InAll(wait) => ("from all addresses together", wait),
        };
        let seconds = wait.as_secs_f64().ceil() as u64;
        let trouble = format!(
            "Too many failed logins {whose}: try again in {seconds} s (the token was not checked)."
        );
        let mut response = page(StatusCode::TOO_MANY_REQUESTS, &trouble);
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(seconds));
        return response;
    }
    let given = fields.get("token").map_or("", String::as_str);
    if !same(given.as_bytes(), token.as_bytes()) {
        return page(StatusCode::UNAUTHORIZED, "That is not the token.");
    }
    tries.succeeded(peer.ip());
    let expires = unix_seconds() + session::LIFETIME.as_secs();
    let value = state.console.guard.session(expires).unwrap_or_default();
    let cookie = format!(
        "{}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}",
        session::COOKIE,
        session::LIFETIME.as_secs()
    );
    see_other(&next, Some(cookie))
}

/// Ends the session for every daemon on this Redis, until it would have expired, and clears the
/// cookie. Kept in Redis rather than in this process: daemons behind one load balancer share
/// sessions (each accepts what the token signed), so each must see the end too.
pub(super) async fn logout(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (viewer, session) = viewer(&state, &headers).await;
    if let Err((status, message, back)) = allowed(&state, &headers, (&viewer, &session), &body) {
        return problem(status, &viewer, message, back);
    }
    let clear = format!(
        "{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
        session::COOKIE
    );
    let now = unix_seconds();
    if let Some(signed) = state.console.guard.valid(&session, now) {
        let left = Duration::from_secs(signed.expires - now) + CLOCK_SLACK;
        if let Err(error) = logouts::end(&state.redis, signed.id, left).await {
            let message = format!(
                "Logged out in this browser, but the session could not be ended ({error}): a \
                 copy of its cookie works until it expires. Log in and out again once Redis \
                 answers."
            );
            let mut response = problem(StatusCode::SERVICE_UNAVAILABLE, &viewer, &message, "/");
            if let Ok(clear) = clear.parse() {
                response.headers_mut().insert(SET_COOKIE, clear);
            }
            return response;
        }
    }
    see_other("/", Some(clear))
}

#[cfg(test)]
mod tests {
    use super::local;

    #[test]
    fn a_login_goes_on_to_a_page_of_this_host_only() {
        let next = |path: &str| local(Some(&path.to_string()));
        assert_eq!(next("/job?id=a%20b"), "/job?id=a%20b");
        for elsewhere in [
            "//evil.example",
            "/\\evil.example",
            "/\t/evil.example",
            "https://x",
            "",
        ] {
            assert_eq!(next(elsewhere), "/", "{elsewhere:?}");
        }
        assert_eq!(local(None), "/");
    }
}
