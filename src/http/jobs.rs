//! The job API: go-delay-queue's `add`, `remove` and `get`, as it answers them, and ours (`pop`,
//! `reserve`, `ack`, `nack`, `touch`). Each is a POST of JSON answered `{"code": 0, "message": ...,
//! "data": ...}` (`remove` and `get` also take go-delay-queue's server's `GET ...?job_id=ID`); a
//! failure's code is its HTTP status (400, 401, 403, 404, 405, 409, 413, 415, 421, 503), its
//! message the problem. Nothing is written unless the whole request is good. Ids and topics that
//! are not UTF-8 come with their bytes in base64 (`id_base64`, `topic_base64`), named so back.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::DateTime;
use delayer_client::time::to_unix;
use delayer_client::{
    Acked, Error, HeldJob, Job, JobInfo, Nacked, NewPush, Receipt, Removed, State as JobState,
    Topic,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::oneshot;
use tracing::{info, warn};

use super::reply::{Answer, bad, ok, refuse, refuse_with, refused, status_of};
use super::request::{Body, JobName, named, seconds, ttr, wait};
use super::state::AppState;
use crate::text::time::rfc3339;
use crate::text::{bytes, escape};

/// The longest one BRPOP of a waiting pop blocks: how long a stop may wait for it.
const POP_SLICE: Duration = Duration::from_secs(1);
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
        }
    }
}

/// A job as `pop` and `reserve` answer it.
#[derive(Serialize)]
struct TakenJson<'a> {
    id: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id_base64: Option<String>,
    topic: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    topic_base64: Option<String>,
    body: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body_base64: Option<String>,
    attempt: u32,
    due: Option<String>,
    /// A reserved job's: the reserve call's token, which names this reservation in ack, nack
    /// and touch.
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<&'a str>,
}

impl TakenJson<'_> {
    fn of(job: &Job) -> TakenJson<'_> {
        TakenJson {
            id: bytes::text(job.id.as_bytes()),
            id_base64: bytes::base64(job.id.as_bytes()),
            topic: bytes::text(job.topic.as_bytes()),
            topic_base64: bytes::base64(job.topic.as_bytes()),
            body: bytes::text(&job.body),
            body_base64: bytes::base64(&job.body),
            attempt: job.attempts,
            due: job.due.map(rfc3339),
            token: job.token.as_deref(),
        }
    }
}

#[derive(Deserialize)]
pub(super) struct Pop {
    topic: Option<String>,
    topic_base64: Option<String>,
    wait: Option<f64>,
}

/// The legacy pop: the job is gone once answered. The pop runs in a task of its own and deletes
/// the job's data only once the job is handed to this handler: a caller that goes away drops the
/// handler, not the pop, and a job taken meanwhile is put back where it was, as it was.
pub(super) async fn pop(State(state): State<Arc<AppState>>, Body(pop): Body<Pop>) -> Answer {
    let wait = wait(pop.wait).map_err(bad)?;
    let topic = named(("topic", pop.topic), ("topic_base64", pop.topic_base64))
        .map_err(bad)?
        .filter(|topic| !topic.is_empty())
        .ok_or_else(|| bad("topic is missing or empty"))?;
    let (answer, answered) = oneshot::channel();
    tokio::spawn(async move {
        let held = match blocking_pop(&state, &topic, wait, &answer).await {
            Ok(Some(held)) => held,
            other => {
                let _ = answer.send(other.map(|_| None));
                return;
            }
        };
        let id = escape::field(&held.job.id).into_owned();
        if answer.send(Ok(Some(held.job.clone()))).is_ok() {
            if let Err(error) = state.client.finish_pop(held).await {
                warn!("Job {id} was popped, but its data could not be deleted ({error})");
            }
            return;
        }
        match state.client.put_back(&held).await {
            Ok(()) => info!("The caller of a pop went away: job {id} is back on its ready list"),
            Err(error) => warn!(
                "The caller of a pop went away, and job {id} cannot be put back on its ready \
                 list ({error}): its data is kept, but no list names it"
            ),
        }
    });
    match answered.await {
        Ok(Ok(job)) => Ok(ok("ok", job.as_ref().map(TakenJson::of))),
        Ok(Err(error)) => Err(refused(error)),
        Err(_) => Err(refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "the pop stopped without an answer",
        )),
    }
}

/// The legacy pop of `topic`, held (its data kept), waiting up to `wait` for a job, a second at a
/// time so that a stop, or a caller gone (`answer` closed), ends the wait. A BRPOP once sent is
/// always let finish: the job it may take is then answered or put back, never dropped.
async fn blocking_pop(
    state: &AppState,
    topic: &[u8],
    wait: Duration,
    answer: &oneshot::Sender<delayer_client::Result<Option<Job>>>,
) -> delayer_client::Result<Option<HeldJob>> {
    let until = Instant::now() + wait;
    loop {
        if answer.is_closed() {
            return Ok(None);
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || state.stopping.is_cancelled() {
            return state.client.pop_held(topic).await;
        }
        // BRPOP's 0 waits for ever: the last slice is at least a millisecond.
        let slice = left.min(POP_SLICE).max(Duration::from_millis(1));
        if let Some(held) = state.client.bpop_held(&[topic], slice).await? {
            return Ok(Some(held));
        }
    }
}

#[derive(Deserialize)]
pub(super) struct Reserve {
    topic: Option<String>,
    topics: Option<Vec<String>>,
    topic_base64: Option<String>,
    topics_base64: Option<Vec<String>>,
    ttr: Option<f64>,
    wait: Option<f64>,
}

impl Reserve {
    /// The topics named, as text and in base64, in that order; what is wrong otherwise.
    fn topics(&mut self) -> Result<Vec<Vec<u8>>, String> {
        let text = self.topic.take().into_iter();
        let text = text.chain(self.topics.take().into_iter().flatten());
        let mut topics: Vec<Vec<u8>> = text.map(String::into_bytes).collect();
        let encoded = self.topic_base64.take().into_iter();
        for encoded in encoded.chain(self.topics_base64.take().into_iter().flatten()) {
            topics.push(bytes::from_base64("topic_base64", &encoded)?);
        }
        Ok(topics)
    }
}

pub(super) async fn reserve(
    State(state): State<Arc<AppState>>,
    Body(mut reserve): Body<Reserve>,
) -> Answer {
    let topics = reserve.topics().map_err(bad)?;
    if topics.is_empty() {
        return Err(bad("give a topic, or topics"));
    }
    let ttr = ttr(reserve.ttr, state.client.settings().max_ttr).map_err(bad)?;
    let wait = wait(reserve.wait).map_err(bad)?;
    let stopping = state.stopping.cancelled();
    let reserved = state.client.reserve_or(&topics, ttr, wait, stopping);
    let job = reserved.await.map_err(refused)?;
    Ok(ok("ok", job.as_ref().map(TakenJson::of)))
}

/// A reservation, as ack, nack and touch name it: the job (`job_id` or `id_base64`), the attempt
/// and the reserve's `token` (which a client written before it existed may leave out), with what
/// each of them takes besides.
#[derive(Deserialize)]
pub(super) struct Reservation {
    #[serde(flatten)]
    job: JobName,
    attempt: u32,
    token: Option<String>,
    /// For nack: seconds until it is delivered again.
    retry_in: Option<f64>,
    /// For touch: seconds from now that the job must be acked within.
    ttr: Option<f64>,
    /// The job's topic (`topic`, or `topic_base64`), if the caller knows it: with Redis Cluster
    /// it spares a look through every topic for the id.
    topic: Option<String>,
    topic_base64: Option<String>,
}

impl Reservation {
    /// The receipt named; what is wrong otherwise.
    fn receipt(self) -> Result<Receipt, String> {
        let topic = named(("topic", self.topic), ("topic_base64", self.topic_base64))?;
        Ok(Receipt {
            id: self.job.id()?,
            attempt: self.attempt,
            token: self.token,
            topic: topic.map(Topic::from),
        })
    }
}

pub(super) async fn ack(
    State(state): State<Arc<AppState>>,
    Body(reservation): Body<Reservation>,
) -> Answer {
    let receipt = reservation.receipt().map_err(bad)?;
    let (message, acked) = match state.client.ack(receipt).await.map_err(refused)? {
        Acked::Done => ("acked", "done"),
        Acked::Late => (
            "acked after its time to run, before anyone else took it",
            "late",
        ),
        Acked::Stale => (
            "stale: the job was reserved again since, or pushed again; nothing changed",
            "stale",
        ),
    };
    Ok(ok(message, json!({"acked": acked})))
}

pub(super) async fn nack(
    State(state): State<Arc<AppState>>,
    Body(reservation): Body<Reservation>,
) -> Answer {
    let retry_in = seconds("retry_in", reservation.retry_in.unwrap_or(0.0)).map_err(bad)?;
    let receipt = reservation.receipt().map_err(bad)?;
    let outcome = match state
        .client
        .nack(receipt, retry_in)
        .await
        .map_err(refused)?
    {
        Nacked::Retry => "retry",
        Nacked::Dead => "dead",
        Nacked::Gone => "gone",
    };
    Ok(ok("nacked", json!({"outcome": outcome})))
}

/// Extends a reservation: the job must be acked within `ttr` seconds from now (60 when not
/// given), or it is delivered again.
pub(super) async fn touch(
    State(state): State<Arc<AppState>>,
    Body(reservation): Body<Reservation>,
) -> Answer {
    let ttr = ttr(reservation.ttr, state.client.settings().max_ttr).map_err(bad)?;
    let receipt = reservation.receipt().map_err(bad)?;
    state.client.touch(receipt, ttr).await.map_err(refused)?;
    Ok(ok("touched", ()))
}

/// A topic to pause or resume.
#[derive(Deserialize)]
pub(super) struct TopicOnly {
    topic: Option<String>,
    topic_base64: Option<String>,
}

impl TopicOnly {
    fn topic(self) -> Result<Vec<u8>, String> {
        named(("topic", self.topic), ("topic_base64", self.topic_base64))?
            .filter(|topic| !topic.is_empty())
            .ok_or_else(|| "topic is missing or empty".into())
    }
}

/// Pauses a topic: its jobs that fall due wait in the pool until it is resumed.
pub(super) async fn pause(
    State(state): State<Arc<AppState>>,
    Body(request): Body<TopicOnly>,
) -> Answer {
    let topic = request.topic().map_err(bad)?;
    state.client.pause(&topic).await.map_err(refused)?;
    Ok(ok("paused", ()))
}

/// Resumes a topic: its jobs that fell due meanwhile move at once; `moved` says how many.
pub(super) async fn resume(
    State(state): State<Arc<AppState>>,
    Body(request): Body<TopicOnly>,
) -> Answer {
    let topic = request.topic().map_err(bad)?;
    let moved = state.client.resume(&topic).await.map_err(refused)?;
    Ok(ok("resumed", json!({"moved": moved})))
}
