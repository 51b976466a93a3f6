//! The schedule API: recurring schedules at run time, as `delayer schedule` changes them. Each is
//! a POST of JSON answered `{"code": 0, "message": ..., "data": ...}` like the job API's: `add`
//! (create or change), `list`, `show`, `remove`, `pause`, `resume` and `run`. A bad definition is
//! refused (400) naming the schedule and the field, and nothing is written; an unknown schedule
//! is a 404.

mod add;
mod change;
mod read;

use std::sync::Arc;

use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::routing::post;
use serde::Deserialize;

use super::auth::authorize;
use super::reply::no_such_method;
use super::state::AppState;

/// The schedule API's routes, under `/delay-queue/api/schedules`: each reads its body as JSON,
/// whatever its `Content-Type`, and, with `[http] token` set, wants the token.
pub(super) fn routes(state: &Arc<AppState>) -> Router<Arc<AppState>> {
    Router::new()
        .route("/add", post(add::add))
        .route("/list", post(read::list))
        .route("/show", post(read::show))
        .route("/remove", post(change::remove))
        .route("/pause", post(change::pause))
        .route("/resume", post(change::resume))
        .route("/run", post(change::run))
        .method_not_allowed_fallback(no_such_method)
        .layer(from_fn_with_state(state.clone(), authorize))
}

/// A request that names one schedule.
#[derive(Deserialize)]
struct Named {
    name: Option<String>,
}

impl Named {
    /// The schedule named; what is wrong otherwise.
    fn name(self) -> Result<String, &'static str> {
        self.name
            .filter(|name| !name.is_empty())
            .ok_or("name is missing or empty")
    }
}
