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

use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use chrono::DateTime;
use delayer_client::time::to_unix;
use delayer_client::{
    Acked, Error, HeldJob, Job, JobId, JobInfo, MIN_TTR, Nacked, NewPush, Receipt, Removed,
    State as JobState, Topic,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::oneshot;
use tracing::{info, warn};

use super::reply::{Answer, bad, ok, refuse, refuse_with, refused, status_of};
use super::state::AppState;
use crate::text::time::rfc3339;
use crate::text::{bytes, escape};

/// The longest a pop or reserve waits for a job, in seconds.
const MAX_WAIT: f64 = 30.0;
/// The longest one BRPOP of a waiting pop blocks: how long a stop may wait for it.
const POP_SLICE: Duration = Duration::from_secs(1);
/// A reservation's time to run when the request gives none, in seconds.
const DEFAULT_TTR: f64 = 60.0;

/// A JSON request body (as application/json, or without a Content-Type: `cross_site::json_only`);
/// a malformed one is refused in go-delay-queue's shape (400, or 413 when too large), with serde's
/// words for what is wrong. A GET's fields are its query's (go-delay-queue's server serves
/// `remove` and `get` so), each a string.
pub(super) struct Body<T>(T);

impl<T: DeserializeOwned> FromRequest<Arc<AppState>> for Body<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &Arc<AppState>) -> Result<Self, Response> {
        if request.method() == Method::GET {
            let query = request.uri().query().unwrap_or_default();
            let fields = form_urlencoded::parse(query.as_bytes())
                .map(|(name, value)| (name.into_owned(), value.into_owned().into()))
                .collect();
            return serde_json::from_value(serde_json::Value::Object(fields))
                .map(Body)
                .map_err(|error| bad(format!("the query is not the one expected: {error}")));
        }
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| match rejection.status() {
                StatusCode::PAYLOAD_TOO_LARGE => refuse(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "the request is too large for a job body of at most {} bytes ([delayer] max_body_bytes)",
                        state.client.settings().max_body_bytes
                    ),
                ),
                status => refuse(status, rejection.body_text()),
            })?;
        serde_json::from_slice(&bytes)
            .map(Body)
            .map_err(|error| bad(format!("the request is not the JSON expected: {error}")))
    }
}

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

/// An id or a topic as a request names it: as text (`job_id`, `topic`), or by the base64 of its
/// bytes (`id_base64`, `topic_base64`), as a reply gives one that is not UTF-8. `None` when
/// neither is given; what is wrong otherwise.
pub(super) fn named(
    (text_name, text): (&str, Option<String>),
    (base64_name, base64): (&str, Option<String>),
) -> Result<Option<Vec<u8>>, String> {
    match (text, base64) {
        (Some(_), Some(_)) => Err(format!("give {text_name} or {base64_name}, not both")),
        (Some(text), None) => Ok(Some(text.into_bytes())),
        (None, Some(encoded)) => bytes::from_base64(base64_name, &encoded).map(Some),
        (None, None) => Ok(None),
    }
}

/// A job named by `job_id` or `id_base64`.
#[derive(Deserialize)]
pub(super) struct JobName {
    job_id: Option<String>,
    id_base64: Option<String>,
}

impl JobName {
    /// The id named; what is wrong otherwise.
    fn id(self) -> Result<JobId, String> {
        match named(("job_id", self.job_id), ("id_base64", self.id_base64))? {
            Some(id) => Ok(id.into()),
            None => Err("job_id is missing (or id_base64, for an id that is not UTF-8)".into()),
        }
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

/// A number of seconds given as `name`, or what is wrong with it.
fn seconds(name: &str, value: f64) -> Result<Duration, String> {
    if value < 0.0 {
        return Err(format!(
            "{name} {value} is negative: give seconds, 0 or more"
        ));
    }
    Duration::try_from_secs_f64(value)
        .map_err(|_| format!("{name} {value:e} is too large to be a number of seconds"))
}

/// A `wait` in seconds, at most [`MAX_WAIT`]; what is wrong with it otherwise.
fn wait(value: Option<f64>) -> Result<Duration, String> {
    seconds("wait", value.unwrap_or(0.0).min(MAX_WAIT))
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

/// A time to run given as `ttr` (seconds; [`DEFAULT_TTR`] when none, at most `max`), or what is
/// wrong with it.
fn ttr(value: Option<f64>, max: Duration) -> Result<Duration, String> {
    match seconds("ttr", value.unwrap_or(DEFAULT_TTR))? {
        ttr if ttr < MIN_TTR => Err(format!(
            "ttr {ttr:?} is under the least time to run, {} s",
            MIN_TTR.as_secs()
        )),
        ttr if ttr > max => Err(format!(
            "ttr {} s is over the longest time to run, {} s ([delayer] max_ttr): touch a long job instead",
            ttr.as_secs_f64(),
            max.as_secs()
        )),
        ttr => Ok(ttr),
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
