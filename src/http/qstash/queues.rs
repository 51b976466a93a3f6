//! QStash's queues: `POST /v2/queues` (upsert), `GET /v2/queues[/{name}]`, `DELETE
//! /v2/queues/{name}`, `POST /v2/queues/{name}/pause` and `/resume`; and `POST
//! /v2/enqueue/{queue}/{destination}`, a publish into a queue (made with parallelism 1 if new).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{OriginalUri, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::error;
use super::publish::publish_into;
use crate::http::state::AppState;
use crate::qstash::queues::{self, Queue};
use delayer_wire::schedule::unix_ms_now;

/// The body of an upsert, as the SDKs send it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Upsert {
    queue_name: String,
    #[serde(default = "one")]
    parallelism: u32,
    #[serde(default)]
    paused: bool,
}

fn one() -> u32 {
    1
}

/// The most messages of one queue in flight at once.
const MOST_PARALLELISM: u32 = 1_000;

pub(super) async fn upsert(State(state): State<Arc<AppState>>, body: Bytes) -> Response {
    let mut upsert: Upsert = match serde_json::from_slice(&body) {
        Ok(upsert) => upsert,
        Err(why) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("expected {{\"queueName\", \"parallelism\", \"paused\"}}: {why}"),
            );
        }
    };
    if !queues::valid_name(&upsert.queue_name) {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "queueName {:?}: letters, digits, '.', '_' and '-'",
                upsert.queue_name
            ),
        );
    }
    // Go's SDK sends 0 when none is given: QStash's default then.
    if upsert.parallelism == 0 {
        upsert.parallelism = 1;
    }
    if !(1..=MOST_PARALLELISM).contains(&upsert.parallelism) {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "parallelism {}: expected 1 to {MOST_PARALLELISM}",
                upsert.parallelism
            ),
        );
    }
    let result = async {
        let mut redis = state.redis.get().await?;
        let now = unix_ms_now();
        let created_at = queues::get(&mut redis, &upsert.queue_name)
            .await?
            .map_or(now, |queue| queue.created_at);
        let queue = Queue {
            parallelism: upsert.parallelism,
            paused: upsert.paused,
            created_at,
            updated_at: now,
        };
        queues::save(&mut redis, &upsert.queue_name, &queue).await
    };
    match result.await {
        Ok(()) => Json(json!({})).into_response(),
        Err(why) => error(StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

pub(super) async fn list(State(state): State<Arc<AppState>>) -> Response {
    let result = async {
        let mut redis = state.redis.get().await?;
        let mut shown = Vec::new();
        for (name, queue) in queues::list(&mut redis).await? {
            let lag = queues::lag(&mut redis, &name).await?;
            shown.push(described(&name, &queue, lag));
        }
        Ok::<_, delayer_client::redis::RedisError>(shown)
    };
    match result.await {
        Ok(shown) => Json(shown).into_response(),
        Err(why) => error(StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

pub(super) async fn get(State(state): State<Arc<AppState>>, Path(name): Path<String>) -> Response {
    let result = async {
        let mut redis = state.redis.get().await?;
        let Some(queue) = queues::get(&mut redis, &name).await? else {
            return Ok(None);
        };
        let lag = queues::lag(&mut redis, &name).await?;
        Ok::<_, delayer_client::redis::RedisError>(Some(described(&name, &queue, lag)))
    };
    match result.await {
        Ok(Some(shown)) => Json(shown).into_response(),
        Ok(None) => error(StatusCode::NOT_FOUND, "queue not found"),
        Err(why) => error(StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

pub(super) async fn delete(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
) -> Response {
    let result = async {
        let mut redis = state.redis.get().await?;
        queues::delete(&mut redis, &name).await
    };
    match result.await {
        Ok(()) => Json(json!({})).into_response(),
        Err(why) => error(StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

pub(super) async fn pause(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
) -> Response {
    set_paused(&state, &name, true).await
}

pub(super) async fn resume(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
) -> Response {
    set_paused(&state, &name, false).await
}

async fn set_paused(state: &AppState, name: &str, paused: bool) -> Response {
    let result = async {
        let mut redis = state.redis.get().await?;
        let Some(mut queue) = queues::get(&mut redis, name).await? else {
            return Ok(false);
        };
        queue.paused = paused;
        queue.updated_at = unix_ms_now();
        queues::save(&mut redis, name, &queue).await?;
        Ok::<_, delayer_client::redis::RedisError>(true)
    };
    match result.await {
        Ok(true) => Json(json!({})).into_response(),
        Ok(false) => error(StatusCode::NOT_FOUND, "queue not found"),
        Err(why) => error(StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

/// `POST /v2/enqueue/{queue}/{destination}`.
pub(super) async fn enqueue(
    State(state): State<Arc<AppState>>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let rest = uri.path().strip_prefix("/v2/enqueue/").unwrap_or_default();
    let Some((queue, destination)) = rest.split_once('/') else {
        return error(
            StatusCode::BAD_REQUEST,
            "expected /v2/enqueue/{queue}/{destination}",
        );
    };
    if !queues::valid_name(queue) {
        return error(
            StatusCode::BAD_REQUEST,
            format!("the queue's name {queue:?}: letters, digits, '.', '_' and '-'"),
        );
    }
    let destination = match uri.query() {
        Some(query) => format!("{destination}?{query}"),
        None => destination.to_string(),
    };
    publish_into(&state, Some(queue), &destination, &headers, &body).await
}

/// A queue as QStash's API shows it.
fn described(name: &str, queue: &Queue, lag: u64) -> Value {
    json!({
        "name": name,
        "parallelism": queue.parallelism,
        "createdAt": queue.created_at,
        "updatedAt": queue.updated_at,
        "lag": lag,
        "paused": queue.paused,
    })
}
