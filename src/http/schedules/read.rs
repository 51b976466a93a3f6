//! Reading schedules: `list` (every one, with its next tick) and `show` (one, with its next five).

use std::sync::Arc;

use axum::extract::State;
use delayer_client::Error;
use serde_json::Value;

use super::Named;
use crate::http::reply::{Answer, bad, ok, refused};
use crate::http::request::Body;
use crate::http::state::AppState;
use crate::text::schedule::{LISTED_TICKS, SHOWN_TICKS, to_json};

/// Every schedule, by name. The request's body is not read: `list` takes no fields.
pub(super) async fn list(State(state): State<Arc<AppState>>) -> Answer {
    let schedules = state.client.schedules().await.map_err(refused)?;
    let list: Vec<Value> = schedules
        .iter()
        .map(|stored| to_json(stored, LISTED_TICKS))
        .collect();
    Ok(ok("ok", list))
}

/// One schedule; 404 when there is none of that name.
pub(super) async fn show(State(state): State<Arc<AppState>>, Body(named): Body<Named>) -> Answer {
    let name = named.name().map_err(bad)?;
    match state.client.schedule(&name).await.map_err(refused)? {
        Some(stored) => Ok(ok("ok", to_json(&stored, SHOWN_TICKS))),
        None => Err(refused(Error::UnknownSchedule(name))),
    }
}
