//! Taking jobs: the legacy `pop`, and `reserve` with its `ack`, `nack` and `touch`.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, State};
use axum::http::StatusCode;
use delayer_client::consumer::http_id;
use delayer_client::{Acked, HeldJob, Job, Nacked, Receipt, Topic};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::http::reply::{Answer, bad, ok, refuse, refused};
use crate::http::request::{Body, JobName, named, seconds, ttr, wait};
use crate::http::state::AppState;
use crate::text::time::rfc3339;
use crate::text::{bytes, escape};

/// The longest one BRPOP of a waiting pop blocks: how long a stop may wait for it.
const POP_SLICE: Duration = Duration::from_secs(1);

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
    /// The caller's name, if it gives one: it is listed on the console's consumers page as
    /// `http:NAME`, and named as the holder of the jobs it reserves (see `heartbeats`).
    consumer: Option<String>,
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
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Body(mut reserve): Body<Reserve>,
) -> Answer {
    let topics = reserve.topics().map_err(bad)?;
    if topics.is_empty() {
        return Err(bad("give a topic, or topics"));
    }
    let ttr = ttr(reserve.ttr, state.client.settings().max_ttr).map_err(bad)?;
    let wait = wait(reserve.wait).map_err(bad)?;
    let consumer = reserve.consumer.as_deref().map(http_id).transpose();
    let client = match consumer.map_err(bad)? {
        Some(id) => {
            let beats = &state.http_consumers;
            beats.beat(&state.client, &id, peer, &topics, wait);
            Cow::Owned(state.client.as_consumer(id))
        }
        None => Cow::Borrowed(&state.client),
    };
    let stopping = state.stopping.cancelled();
    let reserved = client.reserve_or(&topics, ttr, wait, stopping);
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
