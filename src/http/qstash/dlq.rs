//! QStash's DLQ: the dead list of topic `qstash`, newest first. A dead message's DLQ id is its
//! message id; its last reply's status and start are read from the reason it died with
//! (`HTTP 404 Not Found: <reply>`; status 0 for a failure without a reply, such as a timeout).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{OriginalUri, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use delayer_client::State as JobState;
use serde_json::{Value, json};

use super::error;
use super::messages::{described, found};
use crate::http::state::AppState;
use crate::qstash;

/// The most dead messages listed in one page, as QStash's.
const PAGE: usize = 100;
/// The most dead messages read to list them newest first.
const MOST_READ: usize = 10_000;

pub(super) async fn list(
    State(state): State<Arc<AppState>>,
    OriginalUri(uri): OriginalUri,
) -> Response {
    let query: Vec<(String, String)> =
        form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let value = |name: &str| {
        query
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    let skip: usize = value("cursor")
        .and_then(|cursor| cursor.parse().ok())
        .unwrap_or(0);
    let count = value("count")
        .and_then(|count| count.parse().ok())
        .unwrap_or(PAGE)
        .clamp(1, PAGE);
    let mut ids = match state.inspector.dead(qstash::TOPIC, MOST_READ).await {
        Ok(ids) => ids,
        Err(why) => return error(StatusCode::SERVICE_UNAVAILABLE, why),
    };
    ids.reverse();
    let mut messages = Vec::new();
    let mut next = skip;
    for id in ids.iter().skip(skip) {
        if messages.len() == count {
            break;
        }
        next += 1;
        let id = String::from_utf8_lossy(id.as_bytes()).into_owned();
        if value("messageId").is_some_and(|wanted| wanted != id) {
            continue;
        }
        match dead(&state, &id).await {
            Ok(Some(message)) => messages.push(message),
            Ok(None) => {}
            Err(refusal) => return refusal,
        }
    }
    let mut reply = json!({ "messages": messages });
    if next < ids.len() {
        reply["cursor"] = json!(next.to_string());
    }
    Json(reply).into_response()
}

pub(super) async fn get(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> Response {
    match dead(&state, &id).await {
        Ok(Some(message)) => Json(message).into_response(),
        Ok(None) => error(StatusCode::NOT_FOUND, "dead message not found"),
        Err(refusal) => refusal,
    }
}

pub(super) async fn delete(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> Response {
    match state.inspector.delete_dead_job(qstash::TOPIC, &id).await {
        Ok(_) => Json(json!({ "deleted": 1 })).into_response(),
        Err(delayer_client::Error::NotDead { .. }) => {
            error(StatusCode::NOT_FOUND, "dead message not found")
        }
        Err(why) => error(StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

/// Deletes the ids of `{"dlqIds": [...]}` or of `?dlqIds=...`.
pub(super) async fn delete_many(
    State(state): State<Arc<AppState>>,
    OriginalUri(uri): OriginalUri,
    body: Bytes,
) -> Response {
    let ids = match named(&uri, &body) {
        Ok(ids) => ids,
        Err(why) => return error(StatusCode::BAD_REQUEST, why),
    };
    let mut deleted = 0;
    for id in ids {
        match state.inspector.delete_dead_job(qstash::TOPIC, &id).await {
            Ok(_) => deleted += 1,
            Err(delayer_client::Error::NotDead { .. }) => {}
            Err(why) => return error(StatusCode::SERVICE_UNAVAILABLE, why),
        }
    }
    Json(json!({ "deleted": deleted })).into_response()
}

/// Sends dead messages again (`/v2/dlq/retry/{id}`, or `?dlqIds=`): each due now, its tries
/// counted afresh, under its own id.
pub(super) async fn retry(
    State(state): State<Arc<AppState>>,
    OriginalUri(uri): OriginalUri,
    id: Option<Path<String>>,
    body: Bytes,
) -> Response {
    let ids = match id {
        Some(Path(id)) => vec![id],
        None => match named(&uri, &body) {
            Ok(ids) => ids,
            Err(why) => return error(StatusCode::BAD_REQUEST, why),
        },
    };
    let mut responses = Vec::new();
    for id in ids {
        // A queue's message takes its place at the end of its queue's line again.
        let queue = match found(&state, &id).await {
            Ok(found) => found.and_then(|(_, message)| message.queue),
            Err(refusal) => return refusal,
        };
        if let Some(queue) = &queue {
            let lined = match state.redis.get().await {
                Ok(mut redis) => qstash::queues::enqueue(&mut redis, queue, &id).await,
                Err(why) => Err(why),
            };
            if let Err(why) = lined {
                return error(StatusCode::SERVICE_UNAVAILABLE, why);
            }
        }
        match state.inspector.requeue_dead_job(qstash::TOPIC, &id).await {
            Ok(_) => responses.push(json!({ "messageId": id })),
            Err(delayer_client::Error::NotDead { .. }) => {
                return error(
                    StatusCode::NOT_FOUND,
                    format!("dead message not found: {id}"),
                );
            }
            Err(why) => return error(StatusCode::SERVICE_UNAVAILABLE, why),
        }
    }
    (StatusCode::CREATED, Json(json!({ "responses": responses }))).into_response()
}

/// The DLQ ids a request names: `{"dlqIds": [...]}` in its body, or `?dlqIds=` in its query.
fn named(uri: &axum::http::Uri, body: &[u8]) -> Result<Vec<String>, String> {
    let mut ids: Vec<String> = form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
        .filter(|(name, _)| name == "dlqIds")
        .map(|(_, id)| id.into_owned())
        .collect();
    if !body.is_empty() {
        let json: Value = serde_json::from_slice(body)
            .map_err(|why| format!("the body is not {{\"dlqIds\": [...]}}: {why}"))?;
        let listed = json["dlqIds"].as_array().into_iter().flatten();
        ids.extend(listed.filter_map(|id| id.as_str().map(str::to_string)));
    }
    Ok(ids)
}

/// Dead message `id` as the DLQ shows it, if it is one.
async fn dead(state: &AppState, id: &str) -> Result<Option<Value>, Response> {
    let Some((info, message)) = found(state, id).await? else {
        return Ok(None);
    };
    if info.state != JobState::Dead {
        return Ok(None);
    }
    let mut shown = described(id, &info, &message);
    let why = info.died_why.clone().unwrap_or_default();
    let (status, body) = reply_of(&why);
    shown["dlqId"] = json!(id);
    shown["responseStatus"] = json!(status);
    shown["responseBody"] = json!(body);
    shown["diedWhy"] = json!(why);
    Ok(Some(shown))
}

/// The status and the start of the last reply, from the reason a message died with.
fn reply_of(why: &str) -> (u16, String) {
    let Some(rest) = why.strip_prefix("HTTP ") else {
        return (0, String::new());
    };
    let status = rest
        .get(..3)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = rest
        .split_once(": ")
        .map(|(_, said)| said)
        .unwrap_or_default();
    // The reason ends with the method and URL, in parentheses.
    let body = body.rsplit_once(" (").map_or(body, |(said, _)| said);
    (status, body.to_string())
}

#[cfg(test)]
mod tests {
    use super::reply_of;

    #[test]
    fn a_reason_gives_the_reply_s_status_and_start() {
        assert_eq!(
            reply_of("HTTP 404 Not Found: 404 Not Found (POST http://x/)"),
            (404, "404 Not Found".into())
        );
        assert_eq!(
            reply_of("no reply within 30 s (POST http://x/)"),
            (0, String::new())
        );
    }
}
