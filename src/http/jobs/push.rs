//! Adding jobs (`add`, one or a batch), and naming one by id: `remove` and `get`.

use std::borrow::Cow;
use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use chrono::DateTime;
use delayer_client::{Error, JobInfo, NewPush, Removed, State as JobState, Topic};
use delayer_wire::time::to_unix;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::http::reply::{Answer, bad, ok, refuse_with, refused, status_of};
use crate::http::request::{Body, JobName, seconds};
use crate::http::state::AppState;
use crate::text::bytes;
use crate::text::time::rfc3339;

/// A job to add, or (`jobs`) several.
#[derive(Deserialize)]
pub(super) struct Add {
    id: Option<String>,
    topic: Option<String>,
    /// Seconds (fractional ones too).
    delay: Option<f64>,
    /// Ours: an RFC 3339 time instead of a delay.
    at: Option<String>,
    body: Option<String>,
    /// Ours: the batch form, each job as the single form gives one, all added or none.
    jobs: Option<Vec<Add>>,
}

impl Add {
    /// The job this names, or what is wrong with it.
    fn job(self) -> Result<NewPush, String> {
        if self.jobs.is_some() {
            return Err("give jobs, or one job's fields, not both".into());
        }
        let Some(topic) = self.topic.filter(|topic| !topic.is_empty()) else {
            return Err("topic is missing or empty".into());
        };
        let mut job = NewPush::new(topic, self.body.unwrap_or_default());
        match (self.delay, self.at) {
            (Some(_), Some(_)) => return Err("give delay or at, not both".into()),
            (Some(delay), None) => job = job.delay(seconds("delay", delay)?),
            (None, Some(at)) => {
                let at = DateTime::parse_from_rfc3339(&at).map_err(|_| {
                    format!("at {at:?} is not an RFC 3339 time like 2026-12-24T18:00:00Z")
                })?;
                job = job.at(at.into());
            }
            (None, None) => {}
        }
        if let Some(id) = self.id {
            job = job.id(id);
        }
        Ok(job)
    }
}

pub(super) async fn add(State(state): State<Arc<AppState>>, Body(add): Body<Add>) -> Answer {
    let Some(batch) = add.jobs else {
        let at = [add.at.clone()];
        let job = add.job().map_err(bad)?;
        let ids = state
            .client
            .push_many([job])
            .await
            .map_err(|error| match error {
                Error::InBatch { error, .. } => refused_push(*error, &at),
                error => refused(error),
            })?;
        let id = bytes::text(ids[0].as_bytes());
        // Both names: go-delay-queue's README says `id`, some of its servers answer `job_id`.
        return Ok(ok("added", json!({"id": id, "job_id": id})));
    };
    if add.topic.is_some() || add.id.is_some() || add.body.is_some() {
        return Err(bad("give jobs, or one job's fields, not both"));
    }
    if batch.is_empty() {
        return Err(bad("jobs is empty: give at least one job"));
    }
    let ats: Vec<_> = batch.iter().map(|add| add.at.clone()).collect();
    let jobs = batch
        .into_iter()
        .enumerate()
        .map(|(index, add)| {
            add.job()
                .map_err(|wrong| format!("job {index} of the batch: {wrong}"))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad)?;
    let ids = state
        .client
        .push_many(jobs)
        .await
        .map_err(|error| refused_push(error, &ats))?;
    let ids: Vec<_> = ids.iter().map(|id| bytes::text(id.as_bytes())).collect();
    Ok(ok("added", json!({"ids": ids})))
}

/// A push's refusal, with an `at` in the past quoted as the client wrote it (`ats`, by the job's
/// index), not as the unix seconds it came to; one that added some jobs of a batch names them
/// (`added`: each job's index and id).
fn refused_push(error: Error, ats: &[Option<String>]) -> Response {
    match &error {
        Error::PartlyPushed { pushed, .. } => {
            let added: Vec<_> = pushed
                .iter()
                .map(|(index, id)| json!({"index": index, "id": bytes::text(id.as_bytes())}))
                .collect();
            refuse_with(status_of(&error), error, json!({"added": added}))
        }
        Error::InBatch {
            index,
            error: inner,
        } => match (&**inner, ats.get(*index)) {
            (Error::InThePast(_), Some(Some(at))) => bad(format!(
                "job {index} of the batch: at {at:?} is in the past"
            )),
            _ => refused(error),
        },
        Error::InThePast(_) => match ats.first() {
            Some(Some(at)) => bad(format!("at {at:?} is in the past")),
            _ => refused(error),
        },
        _ => refused(error),
    }
}

pub(super) async fn remove(State(state): State<Arc<AppState>>, Body(job): Body<JobName>) -> Answer {
    let id = job.id().map_err(bad)?;
    match state.client.remove(&id).await.map_err(refused)? {
        Removed::Waiting => Ok(ok("removed", ())),
        Removed::Due => Ok(ok(
            "removed; it had fallen due, so a consumer that takes it now finds it gone",
            (),
        )),
        Removed::Unknown => Err(refused(Error::UnknownJob(id))),
    }
}

pub(super) async fn get(State(state): State<Arc<AppState>>, Body(job): Body<JobName>) -> Answer {
    let id = job.id().map_err(bad)?;
    let info = state.client.get(&id).await.map_err(refused)?;
    if let (None, Some(size)) = (&info.body, info.body_size) {
        let limit = state.client.settings().max_body_read.unwrap_or(usize::MAX);
        return Err(refused(Error::BodyTooLargeToRead { id, size, limit }));
    }
    if info.state == JobState::Unknown {
        Ok(ok("ok", ()))
    } else {
        Ok(ok("ok", InfoJson::of(&info)))
    }
}

/// A job as `get` answers it: go-delay-queue's fields in its order (exec_time in unix seconds,
/// delay in whole seconds, as its Go clients decode them), then ours. Each of topic, id and body
/// that is not UTF-8 is followed by its bytes in base64.
#[derive(Serialize)]
struct InfoJson<'a> {
    topic: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    topic_base64: Option<String>,
    id: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id_base64: Option<String>,
    exec_time: Option<i64>,
    delay: Option<u64>,
    body: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body_base64: Option<String>,
    state: &'static str,
    due: Option<String>,
    attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    died_why: Option<&'a str>,
}

impl InfoJson<'_> {
    fn of(info: &JobInfo) -> InfoJson<'_> {
        let topic = info.topic.as_ref().map(Topic::as_bytes);
        InfoJson {
            topic: topic.map(bytes::text),
            topic_base64: topic.and_then(bytes::base64),
            id: bytes::text(info.id.as_bytes()),
            id_base64: bytes::base64(info.id.as_bytes()),
            // `as` saturates: a score beyond i64 (a legacy writer's) cannot fail the answer.
            exec_time: info.due.map(|due| to_unix(due).ceil() as i64),
            delay: info.delay.map(|delay| delay.as_secs_f64().ceil() as u64),
            body: info.body.as_deref().map(bytes::text),
            body_base64: info.body.as_deref().and_then(bytes::base64),
            state: info.state.name(),
            due: info.due.map(rfc3339),
            attempts: info.attempts,
            died_why: info.died_why.as_deref(),
        }
    }
}
