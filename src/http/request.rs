//! The request side: the job API's JSON body, ids and topics named by text or base64 (the
//! console's too), and the seconds a request gives (a delay, a wait, a time to run).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use delayer_client::{JobId, MIN_TTR};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::reply::{bad, refuse};
use super::state::AppState;
use crate::text::bytes;

/// The longest a pop or reserve waits for a job, in seconds.
const MAX_WAIT: f64 = 30.0;
/// A reservation's time to run when the request gives none, in seconds.
const DEFAULT_TTR: f64 = 60.0;

/// A JSON request body, whatever its `Content-Type` (go-delay-queue's server binds any body as
/// JSON, and `curl -d`, PHP's curl and Python's urllib send a form's type); a malformed one is
/// refused in go-delay-queue's shape (400, or 413 when too large), with serde's words for what is
/// wrong. A GET's fields are its query's (go-delay-queue's server serves `remove` and `get` so),
/// each a string.
pub(super) struct Body<T>(pub(super) T);

impl<T: DeserializeOwned> FromRequest<Arc<AppState>> for Body<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &Arc<AppState>) -> Result<Self, Response> {
        if request.method() == Method::GET {
            let query = request.uri().query().unwrap_or_default();
            let fields = form_urlencoded::parse(query.as_bytes())
                .map(|(name, value)| (name.into_owned(), value.into_owned().into()))
                .collect();
            return serde_json::from_value(serde_json::Value::Object(fields))
                .map(Body)
                .map_err(|error| bad(format!("the query is not the one expected: {error}")));
        }
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| match rejection.status() {
                StatusCode::PAYLOAD_TOO_LARGE => refuse(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "the request is too large for a job body of at most {} bytes ([delayer] max_body_bytes)",
                        state.client.settings().max_body_bytes
                    ),
                ),
                status => refuse(status, rejection.body_text()),
            })?;
        serde_json::from_slice(&bytes)
            .map(Body)
            .map_err(|error| bad(format!("the request is not the JSON expected: {error}")))
    }
}

/// An id or a topic as a request names it: as text (`job_id`, `topic`), or by the base64 of its
/// bytes (`id_base64`, `topic_base64`), as a reply gives one that is not UTF-8. `None` when
/// neither is given; what is wrong otherwise.
pub(super) fn named(
    (text_name, text): (&str, Option<String>),
    (base64_name, base64): (&str, Option<String>),
) -> Result<Option<Vec<u8>>, String> {
    match (text, base64) {
        (Some(_), Some(_)) => Err(format!("give {text_name} or {base64_name}, not both")),
        (Some(text), None) => Ok(Some(text.into_bytes())),
        (None, Some(encoded)) => bytes::from_base64(base64_name, &encoded).map(Some),
        (None, None) => Ok(None),
    }
}

/// A job named by `job_id` or `id_base64`.
#[derive(Deserialize)]
pub(super) struct JobName {
    job_id: Option<String>,
    id_base64: Option<String>,
}

impl JobName {
    /// The id named; what is wrong otherwise.
    pub(super) fn id(self) -> Result<JobId, String> {
        match named(("job_id", self.job_id), ("id_base64", self.id_base64))? {
            Some(id) => Ok(id.into()),
            None => Err("job_id is missing (or id_base64, for an id that is not UTF-8)".into()),
        }
    }
}

/// A number of seconds given as `name`, or what is wrong with it.
pub(super) fn seconds(name: &str, value: f64) -> Result<Duration, String> {
    if value < 0.0 {
        return Err(format!(
            "{name} {value} is negative: give seconds, 0 or more"
        ));
    }
    Duration::try_from_secs_f64(value)
        .map_err(|_| format!("{name} {value:e} is too large to be a number of seconds"))
}

/// A `wait` in seconds, at most [`MAX_WAIT`]; what is wrong with it otherwise.
pub(super) fn wait(value: Option<f64>) -> Result<Duration, String> {
    seconds("wait", value.unwrap_or(0.0).min(MAX_WAIT))
}

/// A time to run given as `ttr` (seconds; [`DEFAULT_TTR`] when none, at most `max`), or what is
/// wrong with it.
pub(super) fn ttr(value: Option<f64>, max: Duration) -> Result<Duration, String> {
    match seconds("ttr", value.unwrap_or(DEFAULT_TTR))? {
        ttr if ttr < MIN_TTR => Err(format!(
            "ttr {ttr:?} is under the least time to run, {} s",
            MIN_TTR.as_secs()
        )),
        ttr if ttr > max => Err(format!(
            "ttr {} s is over the longest time to run, {} s ([delayer] max_ttr): touch a long job instead",
            ttr.as_secs_f64(),
            max.as_secs()
        )),
        ttr => Ok(ttr),
    }
}
