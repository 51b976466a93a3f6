//! The job API: go-delay-queue's `add`, `remove` and `get`, as it answers them, and ours (`pop`,
//! `reserve`, `ack`, `nack`). Each is a POST of JSON answered `{"code": 0, "message": ...,
//! "data": ...}`; a failure's code is its HTTP status (400, 401, 404, 409, 413, 503) and its message
//! names the problem. Nothing is written unless the whole request is good.

use std::fmt::Display;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, SecondsFormat, Utc};
use delayer_client::{Acked, Error, Job, JobInfo, Nacked, Receipt, Removed, State as JobState};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::AppState;

/// The longest a pop or reserve waits for a job, in seconds.
const MAX_WAIT: f64 = 30.0;
/// A reservation's time to run when the request gives none, in seconds.
const DEFAULT_TTR: f64 = 60.0;

/// Every answer, in go-delay-queue's shape and field order.
#[derive(Serialize)]
struct Reply<'a> {
    code: u16,
    message: &'a str,
    data: Value,
}

/// A success.
fn ok(message: &str, data: Value) -> Response {
    Json(Reply {
        code: 0,
        message,
        data,
    })
    .into_response()
}

/// A failure: `status` as the HTTP status and the code, `message` saying what is wrong.
fn refuse(status: StatusCode, message: impl Display) -> Response {
    let reply = Reply {
        code: status.as_u16(),
        message: &message.to_string(),
        data: Value::Null,
    };
    (status, Json(reply)).into_response()
}

/// The HTTP status for each of the client's errors.
fn refused(error: Error) -> Response {
    let status = match &error {
        Error::EmptyTopic | Error::EmptyId | Error::EmptyBody | Error::InThePast(_) => {
            StatusCode::BAD_REQUEST
        }
        Error::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        Error::UnknownJob(_) | Error::Incomplete(_) => StatusCode::NOT_FOUND,
        Error::NotReserved(_) | Error::WrongType { .. } => StatusCode::CONFLICT,
        Error::Redis(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    refuse(status, error)
}

/// A JSON request body, whatever its Content-Type says (go-delay-queue's clients often send none);
/// a malformed one is refused in go-delay-queue's shape (400, or 413 when too large), with serde's
/// words for what is wrong.
pub(super) struct Body<T>(T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| refuse(rejection.status(), rejection.body_text()))?;
        serde_json::from_slice(&bytes).map(Body).map_err(|error| {
            refuse(
                StatusCode::BAD_REQUEST,
                format!("the request is not the JSON expected: {error}"),
            )
        })
    }
}

/// With `[http] token` set, the job API wants `Authorization: Bearer <token>`.
pub(super) async fn authorize(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(token) = &state.token {
        let given = request
            .headers()
            .get(AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        if !given.is_some_and(|given| same(given.as_bytes(), token.as_bytes())) {
            return refuse(
                StatusCode::UNAUTHORIZED,
                "missing or wrong token: send Authorization: Bearer <token> ([http] token)",
            );
        }
    }
    next.run(request).await
}

/// Compares without stopping at the first difference, so the time taken does not tell how much of
/// a guessed token was right.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0, |differ, (a, b)| differ | (a ^ b)) == 0
}

#[derive(Deserialize)]
pub(super) struct Add {
    id: Option<String>,
    topic: Option<String>,
    /// Seconds (fractional ones too).
    delay: Option<f64>,
    /// Ours: an RFC 3339 time instead of a delay.
    at: Option<String>,
    body: Option<String>,
}

pub(super) async fn add(State(state): State<Arc<AppState>>, Body(add): Body<Add>) -> Response {
    let Some(topic) = add.topic.filter(|topic| !topic.is_empty()) else {
        return refuse(StatusCode::BAD_REQUEST, "topic is missing or empty");
    };
    let mut push = state.client.push(topic, add.body.unwrap_or_default());
    match (add.delay, add.at) {
        (Some(_), Some(_)) => {
            return refuse(StatusCode::BAD_REQUEST, "give delay or at, not both");
        }
        (Some(delay), None) => match Duration::try_from_secs_f64(delay) {
            Ok(delay) => push = push.delay(delay),
            Err(_) => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    format!("delay {delay} is negative: give the seconds from now, 0 or more"),
                );
            }
        },
        (None, Some(at)) => match DateTime::parse_from_rfc3339(&at) {
            Ok(at) => push = push.at(at.into()),
            Err(_) => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    format!("at {at:?} is not an RFC 3339 time like 2026-12-24T18:00:00Z"),
                );
            }
        },
        (None, None) => {}
    }
    if let Some(id) = add.id {
        push = push.id(id);
    }
    match push.await {
        Ok(id) => ok("added", json!({"id": id})),
        Err(error) => refused(error),
    }
}

#[derive(Deserialize)]
pub(super) struct JobId {
    job_id: String,
}

pub(super) async fn remove(State(state): State<Arc<AppState>>, Body(job): Body<JobId>) -> Response {
    match state.client.remove(&job.job_id).await {
        Ok(Removed::Waiting) => ok("removed", Value::Null),
        Ok(Removed::Due) => ok(
            "removed; it had fallen due, so a consumer that takes it now finds it gone",
            Value::Null,
        ),
        Ok(Removed::Unknown) => refuse(StatusCode::NOT_FOUND, format!("no job {:?}", job.job_id)),
        Err(error) => refused(error),
    }
}

pub(super) async fn get(State(state): State<Arc<AppState>>, Body(job): Body<JobId>) -> Response {
    match state.client.get(&job.job_id).await {
        Ok(info) if info.state == JobState::Unknown => ok("ok", Value::Null),
        Ok(info) => ok("ok", info_json(&info)),
        Err(error) => refused(error),
    }
}

/// go-delay-queue's fields (exec_time and delay in seconds), and ours.
fn info_json(info: &JobInfo) -> Value {
    let unix = |time: SystemTime| delayer_client::time::to_unix(time);
    json!({
        "topic": info.topic,
        "id": info.id,
        "exec_time": info.due.map(|due| unix(due).ceil() as i64),
        "delay": info.delay.map(|delay| delay.as_secs_f64()),
        "body": info.body.as_deref().map(String::from_utf8_lossy),
        "state": info.state.name(),
        "due": info.due.map(rfc3339),
        "attempts": info.attempts,
    })
}

fn job_json(job: &Job) -> Value {
    json!({
        "id": job.id,
        "topic": job.topic,
        "body": String::from_utf8_lossy(&job.body),
        "attempt": job.attempts,
        "due": job.due.map(rfc3339),
    })
}

fn rfc3339(time: SystemTime) -> String {
    DateTime::<Utc>::from(time).to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A `wait` in seconds, at most [`MAX_WAIT`]; what is wrong with it otherwise.
fn wait(seconds: Option<f64>) -> Result<Duration, String> {
    let seconds = seconds.unwrap_or(0.0);
    Duration::try_from_secs_f64(seconds.min(MAX_WAIT))
        .map_err(|_| format!("wait {seconds} is negative: give seconds, 0 to {MAX_WAIT}"))
}

#[derive(Deserialize)]
pub(super) struct Pop {
    topic: String,
    wait: Option<f64>,
}

/// The legacy pop: the job is gone once answered.
pub(super) async fn pop(State(state): State<Arc<AppState>>, Body(pop): Body<Pop>) -> Response {
    let wait = match wait(pop.wait) {
        Ok(wait) => wait,
        Err(wrong) => return refuse(StatusCode::BAD_REQUEST, wrong),
    };
    let job = if wait.is_zero() {
        state.client.pop(&pop.topic).await
    } else {
        state.client.bpop(&[&pop.topic], wait).await
    };
    match job {
        Ok(job) => ok("ok", job.as_ref().map_or(Value::Null, job_json)),
        Err(error) => refused(error),
    }
}

#[derive(Deserialize)]
pub(super) struct Reserve {
    topic: Option<String>,
    topics: Option<Vec<String>>,
    ttr: Option<f64>,
    wait: Option<f64>,
}

pub(super) async fn reserve(
    State(state): State<Arc<AppState>>,
    Body(reserve): Body<Reserve>,
) -> Response {
    let topics: Vec<String> = reserve
        .topic
        .into_iter()
        .chain(reserve.topics.into_iter().flatten())
        .collect();
    if topics.is_empty() {
        return refuse(StatusCode::BAD_REQUEST, "give a topic, or topics");
    }
    let ttr = reserve.ttr.unwrap_or(DEFAULT_TTR);
    let Ok(ttr) = Duration::try_from_secs_f64(ttr) else {
        return refuse(StatusCode::BAD_REQUEST, format!("ttr {ttr} is negative"));
    };
    let wait = match wait(reserve.wait) {
        Ok(wait) => wait,
        Err(wrong) => return refuse(StatusCode::BAD_REQUEST, wrong),
    };
    let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
    match state.client.reserve(&topics, ttr, wait).await {
        Ok(job) => ok("ok", job.as_ref().map_or(Value::Null, job_json)),
        Err(error) => refused(error),
    }
}

#[derive(Deserialize)]
pub(super) struct Reservation {
    job_id: String,
    attempt: u32,
    /// For nack: seconds until it is delivered again.
    retry_in: Option<f64>,
}

impl Reservation {
    fn receipt(&self) -> Receipt {
        Receipt {
            id: self.job_id.clone(),
            attempt: self.attempt,
        }
    }
}

pub(super) async fn ack(
    State(state): State<Arc<AppState>>,
    Body(reservation): Body<Reservation>,
) -> Response {
    let acked = match state.client.ack(reservation.receipt()).await {
        Ok(acked) => acked,
        Err(error) => return refused(error),
    };
    let (message, acked) = match acked {
        Acked::Done => ("acked", "done"),
        Acked::Late => (
            "acked after its time to run, before anyone else took it",
            "late",
        ),
        Acked::Stale => (
            "stale: the job was reserved again since, or pushed again; nothing changed",
            "stale",
        ),
    };
    ok(message, json!({"acked": acked}))
}

pub(super) async fn nack(
    State(state): State<Arc<AppState>>,
    Body(reservation): Body<Reservation>,
) -> Response {
    let retry_in = reservation.retry_in.unwrap_or(0.0);
    let Ok(retry_in) = Duration::try_from_secs_f64(retry_in) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            format!("retry_in {retry_in} is negative"),
        );
    };
    match state.client.nack(reservation.receipt(), retry_in).await {
        Ok(nacked) => {
            let outcome = match nacked {
                Nacked::Retry => "retry",
                Nacked::Dead => "dead",
                Nacked::Gone => "gone",
            };
            ok("nacked", json!({"outcome": outcome}))
        }
        Err(error) => refused(error),
    }
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"s3cret", b"s3cret"));
        assert!(!same(b"s3cret", b"s3creT"));
        assert!(!same(b"s3cre", b"s3cret"));
    }
}
