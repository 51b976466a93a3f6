//! The console's actions (`/actions/...`), each a POST form that comes back to a page with what
//! it did: requeue or delete dead jobs, run a waiting job now or remove it, run all of a topic's
//! waiting jobs now, pause or resume a topic, and pause, resume or run a schedule.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{MethodRouter, post};
use delayer_client::inspector::{Changed, MAX_PROMOTE, Promoted};
use delayer_client::{Error, Removed};

use super::fields::{cursor_in, name_if_in, name_in};
use super::layout::{problem, see_other};
use super::links::{cursor_query, query};
use super::viewer::{allowed, viewer};
use crate::http::reply::status_of;
use crate::http::state::AppState;

/// A form's fields, by name.
type Fields = HashMap<String, String>;

/// What an action did: where to go next (the page it came from, saying what it did), or why it
/// failed.
type Done = Result<String, (StatusCode, String)>;

/// The route of `action`: a POST whose form [`allowed`] checks, then the action, then a redirect
/// to where it says, or a page saying what went wrong.
pub(super) fn form<F, Next>(action: F) -> MethodRouter<Arc<AppState>>
where
    F: Fn(Arc<AppState>, Fields) -> Next + Clone + Send + Sync + 'static,
    Next: Future<Output = Done> + Send,
{
    post(
        async move |State(state): State<Arc<AppState>>, headers: HeaderMap, body: Bytes| {
            let (viewer, session) = viewer(&state, &headers).await;
            let fields = match allowed(&state, &headers, (&viewer, &session), &body) {
                Ok(fields) => fields,
                Err((status, message, back)) => return problem(status, &viewer, message, back),
            };
            match action(state, fields).await {
                Ok(location) => see_other(&location, None),
                Err((status, message)) => problem(status, &viewer, &message, "/"),
            }
        },
    )
}

/// A client's error as an action's failure.
fn failed(error: Error) -> (StatusCode, String) {
    (status_of(&error), error.to_string())
}

fn bad(wrong: String) -> (StatusCode, String) {
    (StatusCode::BAD_REQUEST, wrong)
}

/// Requeues one dead job (`id` given) or all of a topic's.
pub(super) async fn requeue(state: Arc<AppState>, mut fields: Fields) -> Done {
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
}

/// Deletes one dead job.
pub(super) async fn delete(state: Arc<AppState>, mut fields: Fields) -> Done {
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
}

/// Where an action on job `id` comes back to, saying `done`: the waiting jobs' page it was sent
/// from (`page=waiting`, of its `topic` if any), else the job's page.
fn back_to(fields: &mut Fields, id: &[u8], done: &str) -> Result<String, (StatusCode, String)> {
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
pub(super) async fn remove(state: Arc<AppState>, mut fields: Fields) -> Done {
    let id = name_in(&mut fields, "id", "id_base64").map_err(bad)?;
    match state.client.remove(&id).await.map_err(failed)? {
        Removed::Waiting | Removed::Due => back_to(&mut fields, &id, "removed"),
        Removed::Unknown => Err(failed(Error::UnknownJob(id.into()))),
    }
}

/// Makes a waiting job due now ("run now"): the daemon moves it at once.
pub(super) async fn promote(state: Arc<AppState>, mut fields: Fields) -> Done {
    let id = name_in(&mut fields, "id", "id_base64").map_err(bad)?;
    let done = match state.inspector.promote(&id).await.map_err(failed)? {
        Promoted::Due => "promoted",
        Promoted::WasDue => "was-due",
    };
    back_to(&mut fields, &id, done)
}

/// Makes up to [`MAX_PROMOTE`] of a topic's waiting jobs due now, once confirmed (the waiting
/// jobs' page asks first), going on from `after` if given; comes back saying how many, and from
/// where to go on when more may wait.
pub(super) async fn promote_topic(state: Arc<AppState>, mut fields: Fields) -> Done {
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
}

/// Pauses a topic: its jobs that fall due wait in the pool until it is resumed.
pub(super) async fn pause(state: Arc<AppState>, mut fields: Fields) -> Done {
    let topic = name_in(&mut fields, "topic", "topic_base64").map_err(bad)?;
    state.inspector.pause(&topic).await.map_err(failed)?;
    let page = query("name", "base64", &topic);
    Ok(format!("/topic?{page}&done=paused"))
}

/// Resumes a topic: its jobs that fell due meanwhile move at once, in due order.
pub(super) async fn resume(state: Arc<AppState>, mut fields: Fields) -> Done {
    let topic = name_in(&mut fields, "topic", "topic_base64").map_err(bad)?;
    let count = state.inspector.resume(&topic).await.map_err(failed)?;
    let page = query("name", "base64", &topic);
    Ok(format!("/topic?{page}&done=resumed&count={count}"))
}

/// The schedule named by a form's `name` (or `name_base64`).
fn schedule_in(fields: &mut Fields) -> Result<String, (StatusCode, String)> {
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
pub(super) async fn pause_schedule(state: Arc<AppState>, mut fields: Fields) -> Done {
    let name = schedule_in(&mut fields)?;
    let done = state
        .inspector
        .pause_schedule(&name)
        .await
        .map_err(failed)?;
    changed(done, name, "schedule-paused", "schedule-was-paused")
}

/// Resumes a schedule from the tick it was paused at: the ticks it missed go by its catch-up
/// policy.
pub(super) async fn resume_schedule(state: Arc<AppState>, mut fields: Fields) -> Done {
    let name = schedule_in(&mut fields)?;
    let done = state
        .inspector
        .resume_schedule(&name)
        .await
        .map_err(failed)?;
    changed(done, name, "schedule-resumed", "schedule-was-active")
}

/// Pushes a schedule's job once now, outside its ticks.
pub(super) async fn run_schedule(state: Arc<AppState>, mut fields: Fields) -> Done {
    let name = schedule_in(&mut fields)?;
    state.inspector.run_schedule(&name).await.map_err(failed)?;
    Ok("/schedules?done=schedule-run".into())
}
