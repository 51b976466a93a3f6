//! Replies and refusals in go-delay-queue's `{"code","message","data"}` shape, the HTTP status
//! of each of the client's errors, and the 404 and 405 of paths and methods not served.

use std::fmt::Display;

use axum::Json;
use axum::extract::OriginalUri;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use delayer_client::Error;
use serde::Serialize;

/// Every answer, in go-delay-queue's shape and field order.
#[derive(Serialize)]
struct Reply<'a, T> {
    code: u16,
    message: &'a str,
    data: T,
}

/// What a handler answers: a refusal is an `Err`, so that `?` refuses.
pub(super) type Answer = Result<Response, Response>;

/// A success.
pub(super) fn ok(message: &str, data: impl Serialize) -> Response {
    Json(Reply {
        code: 0,
        message,
        data,
    })
    .into_response()
}

/// A failure: `status` as the HTTP status and the code, `message` saying what is wrong.
pub(super) fn refuse(status: StatusCode, message: impl Display) -> Response {
    refuse_with(status, message, ())
}

/// A failure that did part of its work, which `data` says.
pub(super) fn refuse_with(
    status: StatusCode,
    message: impl Display,
    data: impl Serialize,
) -> Response {
    let reply = Reply {
        code: status.as_u16(),
        message: &message.to_string(),
        data,
    };
    (status, Json(reply)).into_response()
}

/// The refusal of a request that is not good: 400, `wrong` saying why.
pub(super) fn bad(wrong: impl Display) -> Response {
    refuse(StatusCode::BAD_REQUEST, wrong)
}

/// The HTTP status for each of the client's errors.
pub(super) fn refused(error: Error) -> Response {
    let status = status_of(&error);
    match &error {
        // Most likely the text of an id that is not UTF-8, sent back in place of its bytes.
        Error::UnknownJob(id) | Error::NotReserved(id) | Error::NotWaiting(id)
            if id
                .to_str()
                .is_some_and(|id| id.contains(char::REPLACEMENT_CHARACTER)) =>
        {
            let hint = "an id that is not UTF-8 is named by the id_base64 its reply gave";
            refuse(status, format!("{error} ({hint})"))
        }
        Error::BodyTooLarge { .. } => refuse(status, format!("{error} ([delayer] max_body_bytes)")),
        Error::BodyTooLargeToRead { .. } => refuse(
            status,
            format!(
                "{error} ([delayer] max_body_bytes): it stays in Redis for a client that reads it there"
            ),
        ),
        _ => refuse(status, error),
    }
}

/// The HTTP status for one of the client's errors (a batch's: its job's).
pub(super) fn status_of(error: &Error) -> StatusCode {
    match error {
        Error::EmptyTopic
        | Error::DuplicateId(_)
        | Error::EmptyId
        | Error::EmptyBody
        | Error::InThePast(_)
        | Error::TooFar(_)
        | Error::TtrTooLong { .. }
        | Error::TopicRefused(..)
        | Error::TopicNeeded
        | Error::InvalidSchedule(_) => StatusCode::BAD_REQUEST,
        Error::BodyTooLarge { .. } | Error::BodyTooLargeToRead { .. } => {
            StatusCode::PAYLOAD_TOO_LARGE
        }
        Error::UnknownJob(_) | Error::Incomplete(_) | Error::UnknownSchedule(_) => {
            StatusCode::NOT_FOUND
        }
        Error::NotReserved(_)
        | Error::TokenNeeded(_)
        | Error::NotDead { .. }
        | Error::NotWaiting(_)
        | Error::WrongType { .. }
        | Error::AmbiguousId { .. } => StatusCode::CONFLICT,
        Error::InBatch { error, .. } | Error::PartlyPushed { error, .. } => status_of(error),
        Error::Redis(_) => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// A path the server does not serve: 404, in the job API's shape.
pub(super) async fn no_such_path(OriginalUri(uri): OriginalUri) -> Response {
    refuse(
        StatusCode::NOT_FOUND,
        format!("no such path: {}", uri.path()),
    )
}

/// A method a path is not served by: 405, in the job API's shape.
pub(super) async fn no_such_method(method: Method, OriginalUri(uri): OriginalUri) -> Response {
    let message = match uri.path() {
        path if path.starts_with("/delay-queue/api/schedules/") => {
            format!("{path} does not take a {method}: the schedule API takes a POST of JSON")
        }
        path if path.starts_with("/delay-queue/") => {
            format!("{path} does not take a {method}: the job API takes a POST of JSON")
        }
        path if path.starts_with("/actions/") || path == "/logout" => {
            format!("{path} takes a POST (a form of the console's pages), not a {method}")
        }
        path => format!("{path} takes a GET, not a {method}"),
    };
    refuse(StatusCode::METHOD_NOT_ALLOWED, message)
}
