//! QStash's API (v2), with `[qstash] token`: publish (and its batch), messages (get, cancel one,
//! by ids, by filters or all), queues, schedules, the DLQ (list, get, delete, retry) and the
//! signing keys, answered as QStash answers, so that its SDKs work with their base URL set to this
//! server. Errors are `{"error": "..."}`. What is not served (URL groups, events, the
//! flow-control endpoints, the LLM helpers) answers 404 naming it.

mod dlq;
mod filter;
mod headers;
mod messages;
mod publish;
mod queues;
mod schedules;

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{OriginalUri, Request, State};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use super::auth::same;
use super::state::AppState;
use crate::qstash::Api;

/// The API's routes, under `/v2`.
pub(super) fn routes(state: &Arc<AppState>) -> Router<Arc<AppState>> {
    Router::new()
        .route("/publish/{*destination}", post(publish::publish))
        .route("/enqueue/{*rest}", post(queues::enqueue))
        .route("/batch", post(publish::batch))
        .route("/queues", get(queues::list).post(queues::upsert))
        .route("/queues/{name}", get(queues::get).delete(queues::delete))
        .route("/queues/{name}/pause", post(queues::pause))
        .route("/queues/{name}/resume", post(queues::resume))
        .route("/messages", axum::routing::delete(messages::cancel_many))
        .route(
            "/messages/{id}",
            get(messages::get).delete(messages::cancel),
        )
        .route("/dlq", get(dlq::list).delete(dlq::delete_many))
        .route("/dlq/retry", post(dlq::retry))
        .route("/dlq/retry/{id}", post(dlq::retry))
        .route("/dlq/{id}", get(dlq::get).delete(dlq::delete))
        .route("/schedules", get(schedules::list))
        .route("/schedules/{*rest}", axum::routing::any(schedules::at))
        // Go's SDK creates and gets schedules under this spelling.
        .route("/Schedules/{*rest}", axum::routing::any(schedules::at))
        .route("/keys", get(keys))
        .route("/keys/rotate", post(rotate))
        // Go's SDK rotates here.
        .route("/rotate", post(rotate))
        .fallback(not_served)
        .layer(from_fn_with_state(state.clone(), authorize))
}

/// A QStash error: `{"error": why}` with `status`.
pub(super) fn error(status: StatusCode, why: impl std::fmt::Display) -> Response {
    (status, Json(json!({ "error": why.to_string() }))).into_response()
}

/// The API's settings (the routes exist only when they do).
fn api(state: &AppState) -> &Api {
    state
        .qstash
        .as_ref()
        .expect("the API's routes exist with its settings")
}

/// The API wants `Authorization: Bearer <[qstash] token>`.
async fn authorize(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let token = api(&state).settings.token.as_deref().unwrap_or_default();
    let given = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, given)| given.trim());
    if !given.is_some_and(|given| same(given.as_bytes(), token.as_bytes())) {
        return error(
            StatusCode::UNAUTHORIZED,
            "missing or wrong token: send Authorization: Bearer <token> ([qstash] token)",
        );
    }
    next.run(request).await
}

/// `GET /v2/keys`: the signing keys.
async fn keys(State(state): State<Arc<AppState>>) -> Response {
    match &api(&state).settings.keys {
        Some(keys) => Json(json!({
            "current": keys.current,
            "next": keys.next.as_deref().unwrap_or_default(),
        }))
        .into_response(),
        None => error(
            StatusCode::NOT_FOUND,
            "no signing keys: set [qstash] current_signing_key and next_signing_key",
        ),
    }
}

/// `POST /v2/keys/rotate`: the keys are the configuration's, the same for every daemon.
async fn rotate() -> Response {
    error(
        StatusCode::BAD_REQUEST,
        "keys are rotated in delayer.conf: make next_signing_key the current one, set a new \
         next one, and restart the daemons one by one",
    )
}

/// What the API does not serve, named.
async fn not_served(OriginalUri(uri): OriginalUri) -> Response {
    let path = uri.path();
    let part = path
        .strip_prefix("/v2/")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_default();
    let what = match part {
        "topics" | "topic" => "URL groups",
        "events" | "logs" => "the events log",
        "flowControl" | "globalParallelism" => "the flow-control endpoints",
        "llm" => "the LLM helpers",
        _ => "this path",
    };
    error(
        StatusCode::NOT_FOUND,
        format!(
            "{what} of QStash's API {} not served by delayer: {path}",
            if what == "this path" { "is" } else { "are" }
        ),
    )
}
