//! `GET /v2/messages/{id}`, `DELETE /v2/messages/{id}` and `DELETE /v2/messages` (by ids, by
//! QStash's filters, or every message): a message is its job, so whatever state the job is
//! in (waiting, due, in flight, between tries, delivered a while ago) tells the message's.

use std::sync::Arc;
use std::time::UNIX_EPOCH;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{OriginalUri, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use delayer_client::{JobInfo, Removed, State as JobState};
use serde_json::{Value, json};

use super::error;
use super::filter::Selection;
use crate::http::state::AppState;
use crate::qstash::{self, Message, header_map};

pub(super) async fn get(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> Response {
    match found(&state, &id).await {
        Ok(Some((info, message))) => Json(described(&id, &info, &message)).into_response(),
        Ok(None) => error(StatusCode::NOT_FOUND, "message not found"),
        Err(refusal) => refusal,
    }
}

/// Message `id` and what its job's state is, if it is a message known still.
pub(super) async fn found(
    state: &AppState,
    id: &str,
) -> Result<Option<(JobInfo, Message)>, Response> {
    let info = state
        .inspector
        .get_up_to(id, usize::MAX)
        .await
        .map_err(|why| error(StatusCode::SERVICE_UNAVAILABLE, why))?;
    let ours = info
        .topic
        .as_ref()
        .is_some_and(|topic| topic.as_bytes() == qstash::TOPIC.as_bytes());
    if !ours || info.state == JobState::Unknown {
        return Ok(None);
    }
    let message = info.body.as_deref().map(Message::of_job);
    Ok(match message {
        Some(Ok(message)) => Some((info, message)),
        _ => None,
    })
}

/// Message `id` as QStash's API shows it.
pub(super) fn described(id: &str, info: &JobInfo, message: &Message) -> Value {
    let not_before = info.due.map_or(message.not_before, |due| {
        due.duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as i64
    });
    let header = header_map(&message.headers);
    let mut reply = json!({
        "messageId": id,
        "url": message.url,
        "method": message.method,
        "maxRetries": message.retries,
        "notBefore": not_before,
        "createdAt": message.created_at,
        "header": header,
        "state": info.state.name(),
    });
    match String::from_utf8(message.body_bytes()) {
        Ok(text) => reply["body"] = json!(text),
        Err(bytes) => reply["bodyBase64"] = json!(STANDARD.encode(bytes.as_bytes())),
    }
    if let Some(expression) = &message.retry_delay {
        reply["retryDelayExpression"] = json!(expression);
    }
    if let Some(label) = message.labels.first() {
        reply["label"] = json!(label);
        reply["labels"] = json!(message.labels);
    }
    if let Some(schedule) = &message.schedule_id {
        reply["scheduleId"] = json!(schedule);
    }
    if let Some(queue) = &message.queue {
        reply["queueName"] = json!(queue);
    }
    for (url, headers, callback) in [
        ("callback", "callbackHeader", &message.callback),
        (
            "failureCallback",
            "failureCallbackHeader",
            &message.failure_callback,
        ),
    ] {
        if let Some(callback) = callback {
            reply[url] = json!(callback.url);
            reply[headers] = json!(header_map(&callback.headers));
        }
    }
    if let Some(flow) = &message.flow {
        reply["flowControlKey"] = json!(flow.key);
        reply["parallelism"] = json!(flow.parallelism);
        reply["rate"] = json!(flow.rate);
        reply["period"] = json!(flow.period);
    }
    reply
}

pub(super) async fn cancel(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> Response {
    match remove(&state, &id, &Selection::default()).await {
        Ok(true) => Json(json!({ "cancelled": 1 })).into_response(),
        Ok(false) => error(StatusCode::NOT_FOUND, "message not found"),
        Err(refusal) => refusal,
    }
}

/// Cancels the messages a [`Selection`] chooses: ids (`messageIds`, in the query or a JSON body),
/// QStash's filters, or every message.
pub(super) async fn cancel_many(
    State(state): State<Arc<AppState>>,
    OriginalUri(uri): OriginalUri,
    body: Bytes,
) -> Response {
    let selection = match Selection::of(&uri, &body, "messageIds") {
        Ok(selection) => selection,
        Err(why) => return error(StatusCode::BAD_REQUEST, why),
    };
    let ids = match &selection.ids {
        Some(ids) => ids.clone(),
        None => match every_message(&state).await {
            Ok(ids) => ids,
            Err(refusal) => return refusal,
        },
    };
    let mut cancelled = 0;
    for id in ids {
        match remove(&state, &id, &selection).await {
            Ok(true) => cancelled += 1,
            Ok(false) => {}
            Err(refusal) => return refusal,
        }
    }
    Json(json!({ "cancelled": cancelled })).into_response()
}

/// Removes message `id` if `selection` chooses it: whether it was one, waiting, due or in flight.
async fn remove(state: &AppState, id: &str, selection: &Selection) -> Result<bool, Response> {
    let Some((info, message)) = found(state, id).await? else {
        return Ok(false);
    };
    if info.state == JobState::Delivered || !selection.matches(id, &message, None) {
        return Ok(false);
    }
    if let Some(queue) = &message.queue {
        let mut redis = state
            .redis
            .get()
            .await
            .map_err(|why| error(StatusCode::SERVICE_UNAVAILABLE, why))?;
        crate::qstash::queues::leave(&mut redis, queue, id)
            .await
            .map_err(|why| error(StatusCode::SERVICE_UNAVAILABLE, why))?;
    }
    let removed = state
        .client
        .remove(id)
        .await
        .map_err(|why| error(StatusCode::SERVICE_UNAVAILABLE, why))?;
    Ok(!matches!(removed, Removed::Unknown))
}

/// The most messages a cancel of all looks through in each list: waiting, due, reserved.
const MOST_CANCELLED: usize = 100_000;

/// Every message not delivered yet: waiting, due or reserved (up to [`MOST_CANCELLED`] of each).
async fn every_message(state: &AppState) -> Result<Vec<String>, Response> {
    let unavailable = |why: delayer_client::Error| error(StatusCode::SERVICE_UNAVAILABLE, why);
    let inspector = &state.inspector;
    let topic = qstash::TOPIC.as_bytes();
    let mut ids = Vec::new();
    let mut after = None;
    loop {
        let page = inspector
            .waiting(Some(topic), after.as_ref(), 1_000)
            .await
            .map_err(unavailable)?;
        let ours = page
            .jobs
            .into_iter()
            .filter(|job| job.topic.as_ref().is_some_and(|of| of.as_bytes() == topic));
        ids.extend(ours.map(|job| job.id));
        match page.next {
            Some(next) if ids.len() < MOST_CANCELLED => after = Some(next),
            _ => break,
        }
    }
    let ready = inspector
        .ready_page(topic, 0, MOST_CANCELLED)
        .await
        .map_err(unavailable)?;
    ids.extend(ready);
    let reserved = inspector
        .reserved_page(topic, 0, MOST_CANCELLED, MOST_CANCELLED)
        .await
        .map_err(unavailable)?;
    ids.extend(reserved.into_iter().map(|(id, _)| id));
    Ok(ids
        .into_iter()
        .map(|id| String::from_utf8_lossy(id.as_bytes()).into_owned())
        .collect())
}
