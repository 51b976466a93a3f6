//! The console at `/`: an overview of Redis, this daemon and every listed topic; a page per topic
//! with its ready, reserved and dead jobs a window at a time; a page per job; and actions on dead
//! and waiting jobs. Server-rendered HTML (see `views`), guarded as `session` says; every page
//! carries a Content-Security-Policy that allows only our own script and style, and nothing from
//! another host.

mod login;
mod login_tries;
mod rates;
mod session;
pub(super) mod state;
mod views;

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, COOKIE, LOCATION, REFERRER_POLICY, SET_COOKIE,
    X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use delayer_client::keys::{Names, Placement};
use delayer_client::{Error, Removed, Topic};
use maud::{Markup, PreEscaped, html};
use tokio::time::Instant;

use super::auth::bearer_ok;
use super::census::RESERVATIONS_COUNTED;
use super::figures::Reading;
use super::reply::status_of;
use super::request::named;
use super::state::AppState;
use rates::Counts;
use views::Viewer;

/// Jobs a topic's page shows of each list at a time.
const PAGE: usize = 50;

pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/", get(overview))
        .route("/topic", get(topic))
        .route("/job", get(job))
        .route("/login", get(login::form).post(login::login))
        .route("/logout", post(login::logout))
        .route("/actions/requeue", post(requeue))
        .route("/actions/delete", post(delete))
        .route("/actions/remove", post(remove))
        .route("/actions/pause", post(pause))
        .route("/actions/resume", post(resume))
}

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
        hash(views::REFRESH),
        hash(views::STYLE)
    )
});

/// A page, with the headers every page has: the policy, no sniffing, no referrer (ids are in
/// the links), no caching (bodies are on some pages).
fn respond(status: StatusCode, markup: Markup) -> Response {
    let headers = [
        (CONTENT_SECURITY_POLICY, POLICY.as_str()),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (REFERRER_POLICY, "no-referrer"),
        (CACHE_CONTROL, "no-store"),
    ];
    (status, headers, Html(markup.into_string())).into_response()
}

/// A page of problem `message` (status `status`) with a link back.
fn problem(status: StatusCode, viewer: &Viewer, message: &str, back: &str) -> Response {
    let main = views::problem(message, back);
    respond(status, views::page("Problem", viewer, None, false, main))
}

/// Who is asking, and their session's cookie value ("" when none, or when it ended).
async fn viewer(state: &AppState, headers: &HeaderMap) -> (Viewer, String) {
    let guard = &state.console.guard;
    let cookie = headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find_map(|value| session::cookie(value, session::COOKIE))
        .unwrap_or_default();
    let session = match guard.valid(cookie, unix_seconds()) {
        // One that Redis cannot tell was not ended (while it does not answer) counts as ended.
        Some(signed) if matches!(state.client.session_ended(signed.id).await, Ok(false)) => {
            cookie.to_string()
        }
        _ => String::new(),
    };
    let authorized = !guard.guarded() || !session.is_empty() || bearer_ok(state, headers);
    let viewer = Viewer {
        guarded: guard.guarded(),
        authorized,
        form_token: guard.form_token(&session),
    };
    (viewer, session)
}

/// Now by this host's clock, in whole unix seconds: sessions are the console's own business.
fn unix_seconds() -> u64 {
    delayer_client::time::unix_now() as u64
}

/// The fields of a query or a form.
fn fields(encoded: &[u8]) -> HashMap<String, String> {
    form_urlencoded::parse(encoded).into_owned().collect()
}

/// What the action before this page did, from its redirect's `done` (a word, not text: a link
/// cannot make the page say anything else).
fn said(fields: &HashMap<String, String>) -> Option<String> {
    let count = fields
        .get("count")
        .and_then(|count| count.parse::<u64>().ok());
    Some(match fields.get("done")?.as_str() {
        "requeued" => "The job is back in the pool, due now.".into(),
        "requeued-all" => format!(
            "{} dead jobs are back in the pool, due now.",
            count.unwrap_or(0)
        ),
        "deleted" => "The dead job is deleted.".into(),
        "stale" => "That entry was stale (the job was pushed again since, or its data expired): \
                    it is off the dead list, and nothing else changed."
            .into(),
        "removed" => "The job is removed.".into(),
        "paused" => "The topic is paused: its jobs that fall due wait in the pool.".into(),
        "resumed" => format!(
            "The topic is resumed: {} jobs that fell due meanwhile move now.",
            count.unwrap_or(0)
        ),
        _ => return None,
    })
}

/// A topic or an id named by `text_name` or `base64_name` among `fields`.
fn name_in(
    fields: &mut HashMap<String, String>,
    text_name: &str,
    base64_name: &str,
) -> Result<Vec<u8>, String> {
    let text = fields.remove(text_name);
    let encoded = fields.remove(base64_name);
    named((text_name, text), (base64_name, encoded))?
        .filter(|name| !name.is_empty())
        .ok_or_else(|| format!("give {text_name} (or {base64_name})"))
}

async fn overview(State(state): State<Arc<AppState>>, headers: HeaderMap, uri: Uri) -> Response {
    let (viewer, _) = viewer(&state, &headers).await;
    let reading = state.figures.reading().await;
    let figures = state
        .figures
        .overview(&reading, || overview_figures(&state, &reading));
    let health = super::pages::health(&state);
    let main = html! {
        @match &health {
            Ok(fine) => p { (fine) },
            Err(trouble) => p.bad { (trouble) },
        }
        (PreEscaped(String::from_utf8_lossy(&figures)))
    };
    let said = said(&fields(uri.query().unwrap_or_default().as_bytes()));
    respond(
        StatusCode::OK,
        views::page("Overview", &viewer, said.as_deref(), true, main),
    )
}

/// The overview below its health line, as of `reading`.
fn overview_figures(state: &AppState, reading: &Reading) -> String {
    let census = reading.census.as_deref();
    let now = Instant::now();
    let listed = census.map_or(&[][..], |census| &census.listed_topics);
    let counted: Vec<(String, u64, u64)> = listed
        .iter()
        .map(|topic| state.metrics.counts(topic))
        .collect();
    let counts: Counts = counted
        .iter()
        .map(|(label, moved, again)| (label.clone(), (*moved, *again)))
        .collect();
    let per_minute = state.console.rates.per_minute(now, counts);
    let layout = state.client.settings().layout;
    let layout = match (layout.names, layout.placement) {
        (_, Placement::PerTopic) => "cluster (each topic's keys in a slot of their own)",
        (Names::Legacy, Placement::Shared) => "legacy (delayer:job_pool)",
        (Names::Jop, Placement::Shared) => "jop (delayer:jop_pool, the earliest Delayer's)",
    };
    let overview = views::Overview {
        redis_address: &state.redis_address,
        redis_version: census.and_then(|census| census.redis_version.as_deref()),
        redis_error: reading.error.as_deref(),
        version: env!("CARGO_PKG_VERSION"),
        uptime: now.duration_since(state.console.started),
        layout,
        census,
        lag: state.metrics.recent_lag_percentiles(),
        // A label shared by the topics beyond the first counted tells no one topic's rate.
        rates: counted
            .iter()
            .map(|(label, _, _)| per_minute.get(label).copied().filter(|_| !label.is_empty()))
            .collect(),
        listed_most: state.metrics.listed(),
        reservations_counted: RESERVATIONS_COUNTED,
    };
    views::overview(&overview).into_string()
}

async fn topic(State(state): State<Arc<AppState>>, headers: HeaderMap, uri: Uri) -> Response {
    let (viewer, _) = viewer(&state, &headers).await;
    let mut fields = fields(uri.query().unwrap_or_default().as_bytes());
    let topic = match name_in(&mut fields, "name", "base64") {
        Ok(topic) => Topic::from(topic),
        Err(wrong) => return problem(StatusCode::BAD_REQUEST, &viewer, &wrong, "/"),
    };
    let skip = |list: &str| fields.get(list).and_then(|n| n.parse().ok()).unwrap_or(0);
    match topic_page(
        &state,
        &topic,
        [skip("ready"), skip("reserved"), skip("dead")],
    )
    .await
    {
        Ok(page) => {
            let title = format!("Topic {}", crate::text::escape::capped(&topic));
            let main = views::topic(&page, &viewer);
            let said = said(&fields);
            respond(
                StatusCode::OK,
                views::page(&title, &viewer, said.as_deref(), false, main),
            )
        }
        Err(error) => problem(status_of(&error), &viewer, &error.to_string(), "/"),
    }
}

/// A topic's figures and one window of each of its lists, skipping `[ready, reserved, dead]`.
async fn topic_page<'a>(
    state: &AppState,
    topic: &'a Topic,
    [ready, reserved, dead]: [usize; 3],
) -> delayer_client::Result<views::TopicPage<'a>> {
    let client = &state.client;
    let topics = std::slice::from_ref(topic);
    let lengths = client.lengths(topics).await?;
    let details = client
        .details(topics, RESERVATIONS_COUNTED)
        .await?
        .pop()
        .unwrap_or_default();
    let undated = |ids: Vec<delayer_client::JobId>| ids.into_iter().map(|id| (id, None)).collect();
    let mut windows = vec![
        views::Window {
            list: "ready",
            total: lengths.ready.first().map_or(0, |(_, n)| *n),
            skip: ready,
            ids: undated(client.ready_window(topic, ready, PAGE).await?),
            marks: Vec::new(),
        },
        views::Window {
            list: "reserved",
            total: details.reserved,
            skip: reserved,
            ids: client
                .reserved_window(topic, reserved, PAGE, RESERVATIONS_COUNTED)
                .await?,
            marks: Vec::new(),
        },
        views::Window {
            list: "dead",
            total: lengths.dead.first().map_or(0, |(_, n)| *n),
            skip: dead,
            ids: undated(client.dead_window(topic, dead, PAGE).await?),
            marks: Vec::new(),
        },
    ];
    // One round trip for the three windows' marks, handed back in their order.
    let ids: Vec<_> = windows
        .iter()
        .flat_map(|window| window.ids.iter().map(|(id, _)| id.clone()))
        .collect();
    let mut marks = client.marks(topic, &ids).await?.into_iter();
    for window in &mut windows {
        window.marks = marks.by_ref().take(window.ids.len()).collect();
    }
    let oldest_ready_age = client.oldest_ready_ages(topics).await?.remove(topic);
    Ok(views::TopicPage {
        topic,
        details,
        oldest_ready_age,
        paused: lengths.paused.contains(topic),
        windows,
        page_size: PAGE,
    })
}

async fn job(State(state): State<Arc<AppState>>, headers: HeaderMap, uri: Uri) -> Response {
    let (viewer, _) = viewer(&state, &headers).await;
    let mut fields = fields(uri.query().unwrap_or_default().as_bytes());
    let id = match name_in(&mut fields, "id", "id_base64") {
        Ok(id) => id,
        Err(wrong) => return problem(StatusCode::BAD_REQUEST, &viewer, &wrong, "/"),
    };
    // Only what the page shows: no body without a login, and none over the HTTP API's limit.
    let read = match viewer.authorized {
        true => state.client.get(&id).await,
        false => state.client.get_up_to(&id, 0).await,
    };
    match read {
        Ok(info) => {
            let title = format!("Job {}", crate::text::escape::capped(&id));
            let said = said(&fields);
            let main = views::job(&info, &viewer);
            respond(
                StatusCode::OK,
                views::page(&title, &viewer, said.as_deref(), false, main),
            )
        }
        Err(error) => problem(status_of(&error), &viewer, &error.to_string(), "/"),
    }
}

/// A 303 to `location`, with `cookie` set if given.
fn see_other(location: &str, cookie: Option<String>) -> Response {
    let mut response = (StatusCode::SEE_OTHER, [(LOCATION, location.to_string())]).into_response();
    if let Some(cookie) = cookie.and_then(|cookie| cookie.parse().ok()) {
        response.headers_mut().insert(SET_COOKIE, cookie);
    }
    response
}

/// Why an action is refused: its status, what to say, where to go from there.
type Refusal = (StatusCode, &'static str, &'static str);

/// An action's form, if `viewer` (of `session`) may act: with `[http] token` set, from a session
/// (or with the token as a Bearer header); and, unless it has the Bearer header, with its
/// session's form token.
fn allowed(
    state: &AppState,
    headers: &HeaderMap,
    (viewer, session): (&Viewer, &str),
    body: &[u8],
) -> Result<HashMap<String, String>, Refusal> {
    let fields = fields(body);
    if !viewer.authorized {
        let message = "Log in first: with [http] token set, actions need it.";
        return Err((StatusCode::UNAUTHORIZED, message, "/login"));
    }
    let given = fields.get("form_token").map_or("", String::as_str);
    if !bearer_ok(state, headers) && !state.console.guard.form_token_is(session, given) {
        let message = "This form did not come from this console's pages (or its session ended): \
                       open the page again and retry.";
        return Err((StatusCode::FORBIDDEN, message, "/"));
    }
    Ok(fields)
}

/// Runs an action allowed by [`allowed`]: its answer, or a page saying what went wrong.
async fn act<F>(state: &AppState, headers: &HeaderMap, body: &[u8], action: F) -> Response
where
    F: AsyncFnOnce(HashMap<String, String>) -> Result<String, (StatusCode, String)>,
{
    let (viewer, session) = viewer(state, headers).await;
    let fields = match allowed(state, headers, (&viewer, &session), body) {
        Ok(fields) => fields,
        Err((status, message, back)) => return problem(status, &viewer, message, back),
    };
    match action(fields).await {
        Ok(location) => see_other(&location, None),
        Err((status, message)) => problem(status, &viewer, &message, "/"),
    }
}

/// A client's error as an action's failure.
fn failed(error: Error) -> (StatusCode, String) {
    (status_of(&error), error.to_string())
}

fn bad(wrong: String) -> (StatusCode, String) {
    (StatusCode::BAD_REQUEST, wrong)
}

/// Requeues one dead job (`id` given) or all of a topic's.
async fn requeue(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Bytes) -> Response {
    act(&state, &headers, &body, async |mut fields| {
        let topic = name_in(&mut fields, "topic", "topic_base64").map_err(bad)?;
        let page = format!("/topic?{}", views::query("name", "base64", &topic));
        if fields.contains_key("id") || fields.contains_key("id_base64") {
            let id = name_in(&mut fields, "id", "id_base64").map_err(bad)?;
            let fresh = state
                .client
                .requeue_dead_job(&topic, &id)
                .await
                .map_err(failed)?;
            Ok(format!(
                "{page}&done={}",
                if fresh { "requeued" } else { "stale" }
            ))
        } else {
            let count = state.client.requeue_dead(&topic).await.map_err(failed)?;
            Ok(format!("{page}&done=requeued-all&count={count}"))
        }
    })
    .await
}

/// Deletes one dead job.
async fn delete(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Bytes) -> Response {
    act(&state, &headers, &body, async |mut fields| {
        let topic = name_in(&mut fields, "topic", "topic_base64").map_err(bad)?;
        let id = name_in(&mut fields, "id", "id_base64").map_err(bad)?;
        let fresh = state
            .client
            .delete_dead_job(&topic, &id)
            .await
            .map_err(failed)?;
        let page = views::query("name", "base64", &topic);
        Ok(format!(
            "/topic?{page}&done={}",
            if fresh { "deleted" } else { "stale" }
        ))
    })
    .await
}

/// Removes a waiting (or ready) job, as the job API's `remove` does.
async fn remove(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Bytes) -> Response {
    act(&state, &headers, &body, async |mut fields| {
        let id = name_in(&mut fields, "id", "id_base64").map_err(bad)?;
        match state.client.remove(&id).await.map_err(failed)? {
            Removed::Waiting | Removed::Due => Ok(format!(
                "/job?{}&done=removed",
                views::query("id", "id_base64", &id)
            )),
            Removed::Unknown => Err(failed(Error::UnknownJob(id.into()))),
        }
    })
    .await
}

/// Pauses a topic: its jobs that fall due wait in the pool until it is resumed.
async fn pause(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Bytes) -> Response {
    act(&state, &headers, &body, async |mut fields| {
        let topic = name_in(&mut fields, "topic", "topic_base64").map_err(bad)?;
        state.client.pause(&topic).await.map_err(failed)?;
        let page = views::query("name", "base64", &topic);
        Ok(format!("/topic?{page}&done=paused"))
    })
    .await
}

/// Resumes a topic: its jobs that fell due meanwhile move at once, in due order.
async fn resume(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Bytes) -> Response {
    act(&state, &headers, &body, async |mut fields| {
        let topic = name_in(&mut fields, "topic", "topic_base64").map_err(bad)?;
        let count = state.client.resume(&topic).await.map_err(failed)?;
        let page = views::query("name", "base64", &topic);
        Ok(format!("/topic?{page}&done=resumed&count={count}"))
    })
    .await
}
