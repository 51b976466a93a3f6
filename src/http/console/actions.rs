//! The console's actions (`/actions/...`), each a POST form that comes back to a page with what
//! it did: requeue or delete dead jobs, run a waiting job now or remove it, run all of a topic's
//! waiting jobs now, pause or resume a topic, and pause, resume or run a schedule.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use delayer_client::inspector::{Changed, MAX_PROMOTE, Promoted};
use delayer_client::{Error, Removed};

use super::fields::{cursor_in, name_if_in, name_in};
use super::layout::{problem, see_other};
use super::links::{cursor_query, query};
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
        "promoted" => "The job is due now: the daemon moves it to its ready list at once.".into(),
        "was-due" => "The job was due already: the daemon moves it shortly (or, while its topic \
                      is paused, when it is resumed)."
            .into(),
        "promoted-all" => format!(
            "{} waiting jobs of the topic are due now.{}",
            count.unwrap_or(0),
            match fields.contains_key("from") {
                true => " More of its jobs may wait further on: run the next ones below.",
                false => " None is left waiting.",
            }
        ),
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
                .inspector
                .requeue_dead_job(&topic, &id)
                .await
                .map_err(failed)?;
            Ok(format!(
                "{page}&done={}",
                if fresh { "requeued" } else { "stale" }
            ))
        } else {
            let count = state.inspector.requeue_dead(&topic).await.map_err(failed)?;
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
            .inspector
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

/// Where an action on job `id` comes back to, saying `done`: the waiting jobs' page it was sent
/// from (`page=waiting`, of its `topic` if any), else the job's page.
fn back_to(
    fields: &mut HashMap<String, String>,
    id: &[u8],
    done: &str,
) -> Result<String, (StatusCode, String)> {
    if fields.get("page").is_none_or(|page| page != "waiting") {
        return Ok(format!("/job?{}&done={done}", query("id", "id_base64", id)));
    }
    let topic = name_if_in(fields, "topic", "topic_base64").map_err(bad)?;
    Ok(match topic {
        Some(topic) => format!(
            "/waiting?{}&done={done}",
            query("topic", "topic_base64", &topic)
        ),
        None => format!("/waiting?done={done}"),
    })
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
            Removed::Waiting | Removed::Due => back_to(&mut fields, &id, "removed"),
            Removed::Unknown => Err(failed(Error::UnknownJob(id.into()))),
        }
    })
    .await
}

/// Makes a waiting job due now ("run now"): the daemon moves it at once.
pub(super) async fn promote(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(&state, &headers, &body, async |mut fields| {
        let id = name_in(&mut fields, "id", "id_base64").map_err(bad)?;
        let done = match state.inspector.promote(&id).await.map_err(failed)? {
            Promoted::Due => "promoted",
            Promoted::WasDue => "was-due",
        };
        back_to(&mut fields, &id, done)
    })
    .await
}

/// Makes up to [`MAX_PROMOTE`] of a topic's waiting jobs due now, once confirmed (the waiting
/// jobs' page asks first), going on from `after` if given; comes back saying how many, and from
/// where to go on when more may wait.
pub(super) async fn promote_topic(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(&state, &headers, &body, async |mut fields| {
        let topic = name_in(&mut fields, "topic", "topic_base64").map_err(bad)?;
        if fields
            .get("confirmed")
            .is_none_or(|confirmed| confirmed != "yes")
        {
            let ask = "confirm first: the waiting jobs' page of the topic asks (confirmed=yes)";
            return Err(bad(ask.into()));
        }
        let after = cursor_in(&mut fields, "after").map_err(bad)?;
        let _reading = state.large_reads.acquire().await;
        let done = state
            .inspector
            .promote_topic(&topic, MAX_PROMOTE, after.as_ref())
            .await
            .map_err(failed)?;
        let page = query("topic", "topic_base64", &topic);
        let count = done.made_due;
        Ok(match &done.next {
            Some(next) => format!(
                "/waiting?{page}&done=promoted-all&count={count}&{}",
                cursor_query("from", next)
            ),
            None => format!("/waiting?{page}&done=promoted-all&count={count}"),
        })
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
        state.inspector.pause(&topic).await.map_err(failed)?;
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
        let count = state.inspector.resume(&topic).await.map_err(failed)?;
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
        let done = state
            .inspector
            .pause_schedule(&name)
            .await
            .map_err(failed)?;
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
        let done = state
            .inspector
            .resume_schedule(&name)
            .await
            .map_err(failed)?;
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
        state.inspector.run_schedule(&name).await.map_err(failed)?;
        Ok("/schedules?done=schedule-run".into())
    })
    .await
}
