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
use super::filter::Selection;
use super::messages::{described, found};
use crate::http::state::AppState;
use crate::qstash::{self, Message};

/// The most dead messages listed in one page, as QStash's.
const PAGE: usize = 100;
/// The most dead messages read to list them newest first.
const MOST_READ: usize = 10_000;

/// `GET /v2/dlq`: a page of the dead messages a [`Selection`] chooses, newest first.
pub(super) async fn list(
    State(state): State<Arc<AppState>>,
    OriginalUri(uri): OriginalUri,
) -> Response {
    let selection = match Selection::of(&uri, b"", "dlqIds") {
        Ok(selection) => selection,
        Err(why) => return error(StatusCode::BAD_REQUEST, why),
    };
    let skip = selection
        .cursor
        .as_deref()
        .and_then(|cursor| cursor.parse().ok())
        .unwrap_or(0);
    let count = selection.count.unwrap_or(PAGE).min(PAGE);
    let (messages, next) = match chosen(&state, &selection, skip, count).await {
        Ok(chosen) => chosen,
        Err(refusal) => return refusal,
    };
    let messages: Vec<Value> = messages.into_iter().map(|(_, shown)| shown).collect();
    let mut reply = json!({ "messages": messages });
    if let Some(next) = next {
        reply["cursor"] = json!(next.to_string());
    }
    Json(reply).into_response()
}

pub(super) async fn get(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> Response {
    match dead(&state, &id).await {
        Ok(Some((_, shown))) => Json(shown).into_response(),
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

/// `DELETE /v2/dlq`: deletes the dead messages a [`Selection`] chooses (by filter or all: `count`
/// at a time, with a cursor while more are left).
pub(super) async fn delete_many(
    State(state): State<Arc<AppState>>,
    OriginalUri(uri): OriginalUri,
    body: Bytes,
) -> Response {
    let (ids, more) = match bulk(&state, &uri, &body).await {
        Ok(bulk) => bulk,
        Err(refusal) => return refusal,
    };
    let mut deleted = 0;
    for id in ids {
        match state.inspector.delete_dead_job(qstash::TOPIC, &id).await {
            Ok(_) => deleted += 1,
            Err(delayer_client::Error::NotDead { .. }) => {}
            Err(why) => return error(StatusCode::SERVICE_UNAVAILABLE, why),
        }
    }
    let mut reply = json!({ "deleted": deleted });
    if more {
        reply["cursor"] = json!("more");
    }
    Json(reply).into_response()
}

/// Sends dead messages again (`/v2/dlq/retry/{id}`, or those a [`Selection`] chooses): each due
/// now, its tries counted afresh, under its own id.
pub(super) async fn retry(
    State(state): State<Arc<AppState>>,
    OriginalUri(uri): OriginalUri,
    id: Option<Path<String>>,
    body: Bytes,
) -> Response {
    let (ids, more) = match id {
        Some(Path(id)) => (vec![id], false),
        None => match bulk(&state, &uri, &body).await {
            Ok(bulk) => bulk,
            Err(refusal) => return refusal,
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
    let mut reply = json!({ "responses": responses });
    if more {
        reply["cursor"] = json!("more");
    }
    (StatusCode::CREATED, Json(reply)).into_response()
}

/// The ids a bulk delete or retry acts on, and whether more are left for another call: those
/// named, or `count` (100 by default) of those the filters choose. What it acts on leaves the
/// DLQ, so the next call starts from the newest again, whatever its cursor.
async fn bulk(
    state: &AppState,
    uri: &axum::http::Uri,
    body: &[u8],
) -> Result<(Vec<String>, bool), Response> {
    let selection =
        Selection::of(uri, body, "dlqIds").map_err(|why| error(StatusCode::BAD_REQUEST, why))?;
    let most = match selection.ids {
        Some(_) => usize::MAX,
        None => selection.count.unwrap_or(PAGE),
    };
    let (chosen, next) = chosen(state, &selection, 0, most).await?;
    Ok((
        chosen.into_iter().map(|(id, _)| id).collect(),
        next.is_some(),
    ))
}

/// The dead messages `selection` chooses (id and as shown), newest first, from the `skip`th dead
/// message on, at most `most`; and where the next page starts, while any are left.
async fn chosen(
    state: &AppState,
    selection: &Selection,
    skip: usize,
    most: usize,
) -> Result<(Vec<(String, Value)>, Option<usize>), Response> {
    let ids = match &selection.ids {
        Some(ids) => ids.clone(),
        None => {
            let mut ids = state
                .inspector
                .dead(qstash::TOPIC, MOST_READ)
                .await
                .map_err(|why| error(StatusCode::SERVICE_UNAVAILABLE, why))?;
            ids.reverse();
            ids.iter()
                .map(|id| String::from_utf8_lossy(id.as_bytes()).into_owned())
                .collect()
        }
    };
    let mut chosen = Vec::new();
    for (at, id) in ids.into_iter().enumerate().skip(skip) {
        if chosen.len() == most {
            return Ok((chosen, Some(at)));
        }
        let Some((message, shown)) = dead(state, &id).await? else {
            continue;
        };
        let status = shown["responseStatus"].as_u64().map(|status| status as u16);
        if selection.matches(&id, &message, status) {
            chosen.push((id, shown));
        }
    }
    Ok((chosen, None))
}

/// Dead message `id`, and as the DLQ shows it, if it is one.
async fn dead(state: &AppState, id: &str) -> Result<Option<(Message, Value)>, Response> {
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
    Ok(Some((message, shown)))
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
