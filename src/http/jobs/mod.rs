//! The job API: go-delay-queue's `add`, `remove` and `get`, as it answers them, and ours (`pop`,
//! `reserve`, `ack`, `nack`, `touch`, `pause`, `resume`, `waiting`, `promote`). Each is a POST of JSON answered `{"code": 0, "message": ...,
//! "data": ...}` (`remove` and `get` also take go-delay-queue's server's `GET ...?job_id=ID`); a
//! failure's code is its HTTP status (400, 401, 403, 404, 405, 409, 413, 421, 503), its
//! message the problem. Nothing is written unless the whole request is good. Ids and topics that
//! are not UTF-8 come with their bytes in base64 (`id_base64`, `topic_base64`), named so back.

mod consume;
pub(super) mod heartbeats;
mod push;
mod topics;
mod waiting;

use std::sync::Arc;

use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::routing::post;

use super::auth::authorize;
use super::reply::no_such_method;
use super::state::AppState;

/// The job API's routes, under `/delay-queue/api/jobs`: each reads its body as JSON, whatever its
/// `Content-Type` (as go-delay-queue's server does), and, with `[http] token` set, wants the token.
pub(super) fn routes(state: &Arc<AppState>) -> Router<Arc<AppState>> {
    Router::new()
        .route("/add", post(push::add))
        // go-delay-queue's server also serves these two as GET ...?job_id=ID.
        .route("/remove", post(push::remove).get(push::remove))
        .route("/get", post(push::get).get(push::get))
        .route("/pop", post(consume::pop))
        .route("/reserve", post(consume::reserve))
        .route("/ack", post(consume::ack))
        .route("/nack", post(consume::nack))
        .route("/touch", post(consume::touch))
        .route("/pause", post(topics::pause))
        .route("/resume", post(topics::resume))
        .route("/waiting", post(waiting::waiting))
        .route("/promote", post(waiting::promote))
        .method_not_allowed_fallback(no_such_method)
        .layer(from_fn_with_state(state.clone(), authorize))
}
