//! Acting on one schedule: `pause`, `resume`, `remove`, and `run` (its job pushed once now).

use std::sync::Arc;

use axum::extract::State;
use delayer_client::Error;
use delayer_client::inspector::Changed;
use serde_json::json;

use super::Named;
use crate::http::reply::{Answer, bad, ok, refused};
use crate::http::request::Body;
use crate::http::state::AppState;
use crate::text::bytes;

/// A change of a schedule's state.
#[derive(Clone, Copy)]
enum Change {
    Pause,
    Resume,
    Remove,
}

/// Stops a schedule ticking, for every daemon, until it is resumed.
pub(super) async fn pause(State(state): State<Arc<AppState>>, Body(named): Body<Named>) -> Answer {
    change(&state, named, Change::Pause).await
}

/// Lets a paused schedule tick again: the ticks it missed go by its catch-up policy.
pub(super) async fn resume(State(state): State<Arc<AppState>>, Body(named): Body<Named>) -> Answer {
    change(&state, named, Change::Resume).await
}

/// Removes a schedule; the jobs it pushed stay.
pub(super) async fn remove(State(state): State<Arc<AppState>>, Body(named): Body<Named>) -> Answer {
    change(&state, named, Change::Remove).await
}

/// Makes `change`; `changed` says whether it changed anything; 404 for no such schedule.
async fn change(state: &AppState, named: Named, change: Change) -> Answer {
    let name = named.name().map_err(bad)?;
    let inspector = &state.inspector;
    let (changed, done, already) = match change {
        Change::Pause => (
            inspector.pause_schedule(&name).await,
            "paused",
            "paused already",
        ),
        Change::Resume => (
            inspector.resume_schedule(&name).await,
            "resumed",
            "not paused",
        ),
        Change::Remove => (
            inspector.remove_schedule(&name).await,
            "removed",
            "removed already",
        ),
    };
    match changed.map_err(refused)? {
        Changed::Done => Ok(ok(done, json!({"changed": true}))),
        Changed::Already => Ok(ok(already, json!({"changed": false}))),
        Changed::Gone => Err(refused(Error::UnknownSchedule(name))),
    }
}

/// Pushes the schedule's job once now, outside its ticks; answers its id.
pub(super) async fn run(State(state): State<Arc<AppState>>, Body(named): Body<Named>) -> Answer {
    let name = named.name().map_err(bad)?;
    let id = state.inspector.run_schedule(&name).await.map_err(refused)?;
    Ok(ok("pushed", json!({"id": bytes::text(id.as_bytes())})))
}
