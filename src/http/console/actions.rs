//! The console's actions (`/actions/...`), each a POST form that comes back to a page with what
//! it did: requeue or delete dead jobs, remove a waiting one, pause or resume a topic.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use delayer_client::{Error, Removed};

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
