//! `POST /v2/publish/{destination}` and `POST /v2/batch`: each message a job of QStash's topic,
//! its id `msg_...`, due when its headers say; a duplicate (`Upstash-Deduplication-Id`, or
//! `Upstash-Content-Based-Deduplication`) within 10 minutes answers the first one's id.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use delayer_client::redis;
use ring::digest::{SHA256, digest};
use serde::Deserialize;
use serde_json::{Value, json};

use super::headers::{self, Due};
use super::{api, error};
use crate::http::state::AppState;
use crate::qstash::queues::{self, Queue};
use crate::qstash::{self, Destination, Message, new_id};
use crate::text::bytes::hex;
use delayer_wire::schedule::unix_ms_now;

/// How long a deduplication id is remembered, as QStash does.
const DEDUPLICATION_SECONDS: u64 = 600;

/// A message ready to push: its id, its message and when it falls due.
struct Ready {
    id: String,
    message: Message,
    due: Due,
    /// Its deduplication key, if it has one.
    dedup: Option<String>,
}

pub(super) async fn publish(
    State(state): State<Arc<AppState>>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let raw = uri.path().strip_prefix("/v2/publish/").unwrap_or_default();
    let raw = match uri.query() {
        Some(query) => format!("{raw}?{query}"),
        None => raw.to_string(),
    };
    publish_into(&state, None, &raw, &headers, &body).await
}

/// Publishes a message to the destination `raw` (into `queue`, if one is named): the reply.
pub(super) async fn publish_into(
    state: &AppState,
    queue: Option<&str>,
    raw: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let ready = match prepare(state, queue, raw, headers, body).await {
        Ok(ready) => ready,
        Err(refusal) => return refusal,
    };
    match push(state, ready).await {
        Ok((status, reply)) => (status, Json(reply)).into_response(),
        Err(refusal) => refusal,
    }
}

/// An item of a batch, as the SDKs send it.
#[derive(Deserialize)]
pub(super) struct Item {
    destination: String,
    #[serde(default)]
    headers: std::collections::HashMap<String, String>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    queue: Option<String>,
}

pub(super) async fn batch(State(state): State<Arc<AppState>>, body: Bytes) -> Response {
    let mut items: Vec<Item> = match serde_json::from_slice(&body) {
        Ok(items) => items,
        Err(why) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("a batch is a JSON array of {{destination, headers, body}}: {why}"),
            );
        }
    };
    // The whole batch is checked before any message is pushed.
    let mut batch = Vec::with_capacity(items.len());
    for (index, item) in items.iter_mut().enumerate() {
        // Go's SDK sends `"queue": ""` for none.
        item.queue.take_if(|queue| queue.is_empty());
        if let Some(queue) = item
            .queue
            .as_deref()
            .filter(|queue| !queues::valid_name(queue))
        {
            return error(
                StatusCode::BAD_REQUEST,
                format!(
                    "item {index}: the queue's name {queue:?}: letters, digits, '.', '_' and '-'"
                ),
            );
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &item.headers {
            let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) else {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("item {index}: the header {name:?} is not one"),
                );
            };
            headers.append(name, value);
        }
        let body = item.body.clone().unwrap_or_default();
        let queue = item.queue.as_deref();
        match prepare(&state, queue, &item.destination, &headers, body.as_bytes()).await {
            Ok(ready) => batch.push(ready),
            Err(refusal) => return refusal,
        }
    }
    let mut replies = Vec::with_capacity(batch.len());
    for ready in batch {
        match push(&state, ready).await {
            Ok((_, reply)) => replies.push(reply),
            Err(refusal) => return refusal,
        }
    }
    Json(replies).into_response()
}

/// A message of `headers` and `body` to the destination `raw` (into `queue`), checked; or the
/// refusal.
async fn prepare(
    state: &AppState,
    queue: Option<&str>,
    raw: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Ready, Response> {
    let api = api(state);
    let destination = Destination::checked(raw, &api.settings.allow, api.listen)
        .await
        .map_err(|refused| error(StatusCode::BAD_REQUEST, refused.0))?;
    let (mut message, due) = message_of(state, destination.url, headers, body)
        .map_err(|(status, why)| error(status, why))?;
    message.queue = queue.map(str::to_string);
    for (header, callback) in [
        ("Upstash-Callback", message.callback.as_mut()),
        (
            "Upstash-Failure-Callback",
            message.failure_callback.as_mut(),
        ),
    ] {
        if let Some(callback) = callback {
            let checked = Destination::checked(&callback.url, &api.settings.allow, api.listen)
                .await
                .map_err(|refused| {
                    error(StatusCode::BAD_REQUEST, format!("{header}: {}", refused.0))
                })?;
            callback.url = checked.url;
        }
    }
    let dedup = match headers.get("upstash-deduplication-id") {
        Some(id) => Some(format!("id:{}", String::from_utf8_lossy(id.as_bytes()))),
        None => content_based(headers)
            .map_err(|why| error(StatusCode::BAD_REQUEST, why))?
            .then(|| {
                let mut content = message.url.clone();
                for (name, value) in &message.headers {
                    content += &format!("\n{name}: {value}");
                }
                content += "\n\n";
                let mut bytes = content.into_bytes();
                bytes.extend_from_slice(body);
                format!("content:{}", hex(digest(&SHA256, &bytes).as_ref()))
            }),
    };
    Ok(Ready {
        id: new_id(),
        message,
        due,
        dedup,
    })
}

/// A refusal: its status and why.
pub(super) type Refusal = (StatusCode, String);

/// The message the headers make for `url` with `body`, and when it falls due, checked (its size
/// as a job too); or the refusal.
fn message_of(
    state: &AppState,
    url: String,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(Message, Due), Refusal> {
    let settings = state.client.settings();
    let most_retries = settings.max_attempts.saturating_sub(1);
    let (message, due) = headers::message(headers, url, body, unix_ms_now(), most_retries)
        .map_err(|why| (StatusCode::BAD_REQUEST, why))?;
    // The job holds the body in base64 beside the message's settings.
    let size = message.to_job().len();
    if size > settings.max_body_bytes {
        return Err((
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the message is {size} bytes as a job (its body of {} bytes in base64, and its \
                 settings), over [delayer] max_body_bytes ({})",
                body.len(),
                settings.max_body_bytes
            ),
        ));
    }
    Ok((message, due))
}

/// The message a schedule sends at each tick: as [`message_of`] makes it.
pub(super) fn prepare_message(
    state: &AppState,
    url: String,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Message, Refusal> {
    message_of(state, url, headers, body).map(|(message, _)| message)
}

/// Whether `Upstash-Content-Based-Deduplication` asks for it (Go's booleans, as the SDKs send
/// `True` and `False`).
fn content_based(headers: &HeaderMap) -> Result<bool, String> {
    let Some(value) = headers.get("upstash-content-based-deduplication") else {
        return Ok(false);
    };
    match value.to_str().unwrap_or_default().trim() {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        other => Err(format!(
            "Upstash-Content-Based-Deduplication: {other:?}: expected true or false"
        )),
    }
}

/// Pushes `ready` (unless a message of its deduplication key came within 10 minutes): the
/// reply's status and body.
async fn push(state: &AppState, ready: Ready) -> Result<(StatusCode, Value), Response> {
    let unavailable = |why: String| error(StatusCode::SERVICE_UNAVAILABLE, why);
    if let Some(key) = &ready.dedup {
        let key = format!("delayer:qstash:dedup:{key}");
        let mut connection = state
            .redis
            .get()
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        let set: Option<String> = redis::cmd("SET")
            .arg(&key)
            .arg(&ready.id)
            .arg("NX")
            .arg("EX")
            .arg(DEDUPLICATION_SECONDS)
            .query_async(&mut connection)
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        let first: Option<String> = match set {
            Some(_) => None,
            None => redis::cmd("GET")
                .arg(&key)
                .query_async(&mut connection)
                .await
                .map_err(|e| unavailable(e.to_string()))?,
        };
        if let Some(first) = first {
            let reply =
                json!({ "messageId": first, "url": ready.message.url, "deduplicated": true });
            return Ok((StatusCode::ACCEPTED, reply));
        }
    }
    if let Some(queue) = &ready.message.queue {
        // In its line first: a message sent before it joined would go out of order.
        let mut redis = state
            .redis
            .get()
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        let made = queues::get(&mut redis, queue)
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        if made.is_none() {
            let now = unix_ms_now();
            let new = Queue {
                parallelism: 1,
                paused: false,
                created_at: now,
                updated_at: now,
            };
            queues::save(&mut redis, queue, &new)
                .await
                .map_err(|e| unavailable(e.to_string()))?;
        }
        queues::enqueue(&mut redis, queue, &ready.id)
            .await
            .map_err(|e| unavailable(e.to_string()))?;
    }
    let push = state
        .client
        .push(qstash::TOPIC, ready.message.to_job())
        .id(ready.id.as_str());
    let push = match ready.due {
        Due::After(delay) => push.delay(delay),
        Due::At(at) => push.at(at),
    };
    push.await.map_err(|e| unavailable(e.to_string()))?;
    Ok((
        StatusCode::OK,
        json!({ "messageId": ready.id, "url": ready.message.url }),
    ))
}
