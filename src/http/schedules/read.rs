//! Reading schedules: `list` (every one, with its next tick) and `show` (one, with its next five).

use std::sync::Arc;

use axum::extract::State;
use delayer_client::Error;
use serde_json::Value;

use super::Named;
use crate::http::reply::{Answer, bad, ok, refused};
use crate::http::request::Body;
use crate::http::state::AppState;
use crate::text::schedule::{LISTED_TICKS, SHOWN_TICKS, list_json, to_json};

/// Every schedule, by name; one whose hash does not read as its name and why (`unreadable`).
/// The request's body is not read: `list` takes no fields.
pub(super) async fn list(State(state): State<Arc<AppState>>) -> Answer {
    let schedules = state.inspector.schedules().await.map_err(refused)?;
    let list: Vec<Value> = list_json(&schedules, LISTED_TICKS);
    Ok(ok("ok", list))
}

/// One schedule; 404 when there is none of that name.
pub(super) async fn show(State(state): State<Arc<AppState>>, Body(named): Body<Named>) -> Answer {
    let name = named.name().map_err(bad)?;
    match state.inspector.schedule(&name).await.map_err(refused)? {
        Some(stored) => Ok(ok("ok", to_json(&stored, SHOWN_TICKS))),
        None => Err(refused(Error::UnknownSchedule(name))),
    }
}
