//! The console's actions (`/actions/...`), each a POST form that comes back to a page with what
//! it did: requeue or delete dead jobs, remove a waiting one, pause or resume a topic, and pause,
//! resume or run a schedule.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use delayer_client::{Changed, Error, Removed};

use super::fields::name_in;
use super::layout::{problem, see_other};
use super::links::query;
use super::viewer::{allowed, viewer};
use crate::http::reply::status_of;
use crate::http::state::AppState;

/// What the action before this page did, from its redirect's `done` (a word, not text: a link
/// cannot make the page say anything else).
pub(super) fn said(fields: &HashMap<String, String>) -> Option<String> {
    let count = fields
        .get("count")
        .and_then(|count| count.parse::<u64>().ok());
    Some(match fields.get("done")?.as_str() {
        "requeued" => "The job is back in the pool, due now.".into(),
        "requeued-all" => format!(
            "{} dead jobs are back in the pool, due now.",
            count.unwrap_or(0)
        ),
        "deleted" => "The dead job is deleted.".into(),
        "stale" => "That entry was stale (the job was pushed again since, or its data expired): \
                    it is off the dead list, and nothing else changed."
            .into(),
        "removed" => "The job is removed.".into(),
        "paused" => "The topic is paused: its jobs that fall due wait in the pool.".into(),
        "resumed" => format!(
            "The topic is resumed: {} jobs that fell due meanwhile move now.",
            count.unwrap_or(0)
        ),
        "schedule-paused" => {
            "The schedule is paused: no daemon claims its ticks until it is resumed.".into()
        }
        "schedule-was-paused" => "The schedule was paused already.".into(),
        "schedule-resumed" => {
            "The schedule is resumed: the ticks it missed go by its catch-up policy.".into()
        }
        "schedule-was-active" => "The schedule was not paused.".into(),
        "schedule-run" => "The schedule's job is pushed, due now: it is the last job below.".into(),
        _ => return None,
    })
}

/// Runs an action allowed by [`allowed`]: its answer, or a page saying what went wrong.
async fn act<F>(state: &AppState, headers: &HeaderMap, body: &[u8], action: F) -> Response
where
    F: AsyncFnOnce(HashMap<String, String>) -> Result<String, (StatusCode, String)>,
{
    let (viewer, session) = viewer(state, headers).await;
    let fields = match allowed(state, headers, (&viewer, &session), body) {
        Ok(fields) => fields,
        Err((status, message, back)) => return problem(status, &viewer, message, back),
    };
    match action(fields).await {
        Ok(location) => see_other(&location, None),
        Err((status, message)) => problem(status, &viewer, &message, "/"),
    }
}

/// A client's error as an action's failure.
fn failed(error: Error) -> (StatusCode, String) {
    (status_of(&error), error.to_string())
}

fn bad(wrong: String) -> (StatusCode, String) {
    (StatusCode::BAD_REQUEST, wrong)
}

/// Requeues one dead job (`id` given) or all of a topic's.
pub(super) async fn requeue(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(&state, &headers, &body, async |mut fields| {
        let topic = name_in(&mut fields, "topic", "topic_base64").map_err(bad)?;
        let page = format!("/topic?{}", query("name", "base64", &topic));
        if fields.contains_key("id") || fields.contains_key("id_base64") {
            let id = name_in(&mut fields, "id", "id_base64").map_err(bad)?;
            let fresh = state
                .client
                .requeue_dead_job(&topic, &id)
                .await
                .map_err(failed)?;
            Ok(format!(
                "{page}&done={}",
                if fresh { "requeued" } else { "stale" }
            ))
        } else {
            let count = state.client.requeue_dead(&topic).await.map_err(failed)?;
            Ok(format!("{page}&done=requeued-all&count={count}"))
        }
    })
    .await
}

/// Deletes one dead job.
pub(super) async fn delete(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(&state, &headers, &body, async |mut fields| {
        let topic = name_in(&mut fields, "topic", "topic_base64").map_err(bad)?;
        let id = name_in(&mut fields, "id", "id_base64").map_err(bad)?;
        let fresh = state
            .client
            .delete_dead_job(&topic, &id)
            .await
            .map_err(failed)?;
        let page = query("name", "base64", &topic);
        Ok(format!(
            "/topic?{page}&done={}",
            if fresh { "deleted" } else { "stale" }
        ))
    })
    .await
}

/// Removes a waiting (or ready) job, as the job API's `remove` does.
pub(super) async fn remove(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(&state, &headers, &body, async |mut fields| {
        let id = name_in(&mut fields, "id", "id_base64").map_err(bad)?;
        match state.client.remove(&id).await.map_err(failed)? {
            Removed::Waiting | Removed::Due => Ok(format!(
                "/job?{}&done=removed",
                query("id", "id_base64", &id)
            )),
            Removed::Unknown => Err(failed(Error::UnknownJob(id.into()))),
        }
    })
    .await
}

/// Pauses a topic: its jobs that fall due wait in the pool until it is resumed.
pub(super) async fn pause(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(&state, &headers, &body, async |mut fields| {
        let topic = name_in(&mut fields, "topic", "topic_base64").map_err(bad)?;
        state.client.pause(&topic).await.map_err(failed)?;
        let page = query("name", "base64", &topic);
        Ok(format!("/topic?{page}&done=paused"))
    })
    .await
}

/// Resumes a topic: its jobs that fell due meanwhile move at once, in due order.
pub(super) async fn resume(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(&state, &headers, &body, async |mut fields| {
        let topic = name_in(&mut fields, "topic", "topic_base64").map_err(bad)?;
        let count = state.client.resume(&topic).await.map_err(failed)?;
        let page = query("name", "base64", &topic);
        Ok(format!("/topic?{page}&done=resumed&count={count}"))
    })
    .await
}

/// The schedule named by a form's `name` (or `name_base64`).
fn schedule_in(fields: &mut HashMap<String, String>) -> Result<String, (StatusCode, String)> {
    let name = name_in(fields, "name", "name_base64").map_err(bad)?;
    String::from_utf8(name).map_err(|_| bad("a schedule's name is text".into()))
}

/// Where a change of a schedule comes back to: the schedules' page saying `done` or `already`;
/// a 404 for no such schedule.
fn changed(
    changed: Changed,
    name: String,
    done: &str,
    already: &str,
) -> Result<String, (StatusCode, String)> {
    match changed {
        Changed::Done => Ok(format!("/schedules?done={done}")),
        Changed::Already => Ok(format!("/schedules?done={already}")),
        Changed::Gone => Err(failed(Error::UnknownSchedule(name))),
    }
}

/// Pauses a schedule: no daemon claims its ticks until it is resumed.
pub(super) async fn pause_schedule(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(&state, &headers, &body, async |mut fields| {
        let name = schedule_in(&mut fields)?;
        let done = state.client.pause_schedule(&name).await.map_err(failed)?;
        changed(done, name, "schedule-paused", "schedule-was-paused")
    })
    .await
}

/// Resumes a schedule from the tick it was paused at: the ticks it missed go by its catch-up
/// policy.
pub(super) async fn resume_schedule(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(&state, &headers, &body, async |mut fields| {
        let name = schedule_in(&mut fields)?;
        let done = state.client.resume_schedule(&name).await.map_err(failed)?;
        changed(done, name, "schedule-resumed", "schedule-was-active")
    })
    .await
}

/// Pushes a schedule's job once now, outside its ticks.
pub(super) async fn run_schedule(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(&state, &headers, &body, async |mut fields| {
        let name = schedule_in(&mut fields)?;
        state.client.run_schedule(&name).await.map_err(failed)?;
        Ok("/schedules?done=schedule-run".into())
    })
    .await
}
