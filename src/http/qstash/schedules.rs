//! QStash's schedules: each a delayer schedule (`[schedule.NAME]`'s kind, saved through the API)
//! of topic `qstash` whose job is the message to send, so that each tick is sent once by one
//! daemon, and `delayer schedule list` and the console show it. `Upstash-Cron` takes
//! `CRON_TZ=<zone> ` in front for a time zone (UTC by default).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use delayer_client::Error;
use delayer_client::inspector::Changed;
use delayer_wire::schedule::{Definition, Source, Stored};
use serde_json::{Value, json};

use super::publish::prepare_message;
use super::{api, error};
use crate::http::state::AppState;
use crate::qstash::{self, Destination, Message, header_map, new_id, percent_decoded};
use delayer_wire::schedule::unix_ms_now;

/// `/v2/schedules/...`: a create when a destination follows (`POST /v2/schedules/https://...`),
/// else one schedule's get, delete, pause or resume.
pub(super) async fn at(
    State(state): State<Arc<AppState>>,
    method: Method,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let rest = String::from_utf8_lossy(&percent_decoded(after_prefix(&uri))).into_owned();
    let lower = rest.to_ascii_lowercase();
    if method == Method::POST && (lower.starts_with("http:") || lower.starts_with("https:")) {
        return create(&state, &uri, &headers, &body).await;
    }
    let (id, action) = match rest.rsplit_once('/') {
        Some((id, action @ ("pause" | "resume"))) => (id.to_string(), Some(action)),
        _ => (rest.clone(), None),
    };
    match (method, action) {
        (Method::GET, None) => get(&state, &id).await,
        (Method::DELETE, None) => delete(&state, &id).await,
        (Method::PATCH | Method::POST, Some("pause")) => pause(&state, &id).await,
        (Method::PATCH | Method::POST, Some(_)) => resume(&state, &id).await,
        (method, _) => error(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{method} is not served on /v2/schedules/{rest}"),
        ),
    }
}

/// The path after `/v2/schedules/` (or `/v2/Schedules/`, as Go's SDK spells it).
fn after_prefix(uri: &Uri) -> &str {
    let path = uri.path();
    path.strip_prefix("/v2/schedules/")
        .or_else(|| path.strip_prefix("/v2/Schedules/"))
        .unwrap_or_default()
}

async fn create(state: &AppState, uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Response {
    let raw = after_prefix(uri);
    let raw = match uri.query() {
        Some(query) => format!("{raw}?{query}"),
        None => raw.to_string(),
    };
    let Some(cron) = headers
        .get("upstash-cron")
        .and_then(|cron| cron.to_str().ok())
    else {
        return error(
            StatusCode::BAD_REQUEST,
            "Upstash-Cron is missing: a schedule needs a cron expression",
        );
    };
    for unserved in ["upstash-queue-name", "upstash-delay"] {
        if headers.contains_key(unserved) {
            return error(
                StatusCode::BAD_REQUEST,
                format!(
                    "{}: not served by delayer on schedules yet",
                    super::headers::canonical(unserved)
                ),
            );
        }
    }
    let api = api(state);
    let destination = match Destination::checked(&raw, &api.settings.allow, api.listen).await {
        Ok(destination) => destination,
        Err(refused) => return error(StatusCode::BAD_REQUEST, refused.0),
    };
    let id = match headers.get("upstash-schedule-id") {
        Some(id) => String::from_utf8_lossy(id.as_bytes()).into_owned(),
        None => new_id().replacen("msg_", "scd_", 1),
    };
    let mut message = match prepare_message(state, destination.url, headers, body) {
        Ok(message) => message,
        Err((status, why)) => return error(status, why),
    };
    message.schedule_id = Some(id.clone());
    let (zone, cron) = match cron.trim().strip_prefix("CRON_TZ=") {
        Some(rest) => match rest.split_once(' ') {
            Some((zone, cron)) => (zone.to_string(), cron.trim().to_string()),
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("Upstash-Cron: {cron:?}: no expression after the zone"),
                );
            }
        },
        None => ("UTC".to_string(), cron.trim().to_string()),
    };
    let mut definition = Definition::new(&id, &cron, qstash::TOPIC);
    definition.zone = zone;
    definition.body = message.to_job();
    if let Err(invalid) = definition.check(unix_ms_now()) {
        let header = match invalid.field {
            "name" => "Upstash-Schedule-Id",
            _ => "Upstash-Cron",
        };
        return error(
            StatusCode::BAD_REQUEST,
            format!("{header}: {}", invalid.why),
        );
    }
    match state
        .inspector
        .save_schedule(&definition, Source::Api)
        .await
    {
        Ok(_) => Json(json!({ "scheduleId": id })).into_response(),
        Err(why) => error(StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

async fn get(state: &AppState, id: &str) -> Response {
    match state.inspector.schedule(id).await {
        Ok(Some(stored)) => match shown(&stored) {
            Some(schedule) => Json(schedule).into_response(),
            None => error(StatusCode::NOT_FOUND, "schedule not found"),
        },
        Ok(None) => error(StatusCode::NOT_FOUND, "schedule not found"),
        Err(why) => error(StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

pub(super) async fn list(State(state): State<Arc<AppState>>) -> Response {
    match state.inspector.schedules().await {
        Ok(list) => {
            let shown: Vec<Value> = list.readable.iter().filter_map(shown).collect();
            Json(shown).into_response()
        }
        Err(why) => error(StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

async fn delete(state: &AppState, id: &str) -> Response {
    if let Some(refusal) = not_ours(state, id).await {
        return refusal;
    }
    answer(state.inspector.remove_schedule(id).await)
}

async fn pause(state: &AppState, id: &str) -> Response {
    if let Some(refusal) = not_ours(state, id).await {
        return refusal;
    }
    answer(state.inspector.pause_schedule(id).await)
}

async fn resume(state: &AppState, id: &str) -> Response {
    if let Some(refusal) = not_ours(state, id).await {
        return refusal;
    }
    answer(state.inspector.resume_schedule(id).await)
}

/// A 404 unless `id` is one of QStash's schedules.
async fn not_ours(state: &AppState, id: &str) -> Option<Response> {
    match state.inspector.schedule(id).await {
        Ok(Some(stored)) if shown(&stored).is_some() => None,
        Ok(_) => Some(error(StatusCode::NOT_FOUND, "schedule not found")),
        Err(why) => Some(error(StatusCode::SERVICE_UNAVAILABLE, why)),
    }
}

fn answer(changed: Result<Changed, Error>) -> Response {
    match changed {
        Ok(Changed::Done | Changed::Already) => Json(json!({})).into_response(),
        Ok(Changed::Gone) | Err(Error::UnknownSchedule(_)) => {
            error(StatusCode::NOT_FOUND, "schedule not found")
        }
        Err(why) => error(StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

/// `stored` as QStash's API shows a schedule, if it is one of QStash's.
fn shown(stored: &Stored) -> Option<Value> {
    let definition = &stored.definition;
    if definition.topic != qstash::TOPIC {
        return None;
    }
    let message = Message::of_job(&definition.body).ok()?;
    let cron = if definition.zone == "UTC" {
        definition.cron.clone()
    } else {
        format!("CRON_TZ={} {}", definition.zone, definition.cron)
    };
    let mut shown = json!({
        "scheduleId": definition.name,
        "destination": message.url,
        "cron": cron,
        "createdAt": message.created_at,
        "method": message.method,
        "retries": message.retries,
        "header": header_map(&message.headers),
        "isPaused": stored.paused_since.is_some(),
    });
    match String::from_utf8(message.body_bytes()) {
        Ok(text) => shown["body"] = json!(text),
        Err(bytes) => {
            use base64::Engine;
            shown["bodyBase64"] =
                json!(base64::engine::general_purpose::STANDARD.encode(bytes.as_bytes()));
        }
    }
    if let Some(next) = stored.next {
        shown["nextScheduleTime"] = json!(next);
    }
    if let Some(last) = stored.last_tick {
        shown["lastScheduleTime"] = json!(last);
    }
    if let Some(expression) = &message.retry_delay {
        shown["retryDelayExpression"] = json!(expression);
    }
    if let Some(label) = message.labels.first() {
        shown["label"] = json!(label);
        shown["labels"] = json!(message.labels);
    }
    if let Some(timeout) = message.timeout_ms {
        shown["timeout"] = json!(timeout / 1000);
    }
    if let Some(flow) = &message.flow {
        shown["flowControlKey"] = json!(flow.key);
        shown["parallelism"] = json!(flow.parallelism);
        shown["rate"] = json!(flow.rate);
        shown["period"] = json!(flow.period);
    }
    Some(shown)
}
