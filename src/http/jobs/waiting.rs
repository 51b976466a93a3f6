//! The jobs that are waiting: `waiting` lists the pool a page at a time in due order (a topic's
//! jobs, optionally), and `promote` makes a waiting job due now, or a topic's, a bounded number
//! a call, as the console's waiting jobs' page does.

use std::sync::Arc;

use axum::extract::State;
use delayer_client::Error;
use delayer_client::inspector::{Cursor, MAX_PROMOTE, Promoted};
use serde::Deserialize;
use serde_json::json;

use crate::http::reply::{Answer, bad, ok, refused};
use crate::http::request::{Body, named};
use crate::http::state::AppState;
use crate::text::waiting::{cursor_json, job_json};

/// Jobs a `waiting` call answers when it does not say; and the most it may ask for.
const DEFAULT_COUNT: usize = 50;
const MAX_COUNT: usize = 1000;

/// A place in the pool, as `next` answers it: the job's score and its id.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct After {
    score: String,
    id: Option<String>,
    id_base64: Option<String>,
}

impl After {
    fn cursor(self) -> Result<Cursor, String> {
        let id = named(("after.id", self.id), ("after.id_base64", self.id_base64))?
            .filter(|id| !id.is_empty())
            .ok_or("after.id is missing (or after.id_base64)")?;
        let score = match self.score.parse::<f64>() {
            Ok(score) if !score.is_nan() => score,
            _ => {
                return Err(format!(
                    "after.score {:?} is not a score of the pool",
                    self.score
                ));
            }
        };
        Ok(Cursor {
            score,
            id: id.into(),
        })
    }
}

/// `waiting`: a page of the pool. A field it does not know is refused: a misspelt `topic` would
/// list every topic's jobs.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Waiting {
    topic: Option<String>,
    topic_base64: Option<String>,
    after: Option<After>,
    count: Option<usize>,
}

/// A page of the pool in due order, after `after` (from the first without): up to `count` jobs
/// (50 unless given, at most 1000), of `topic` if given; `next` is where the next page starts
/// (null at the pool's end), and `cut_short` says the page read as much of a pool of every
/// topic as a call reads before it found `count` of the topic.
pub(super) async fn waiting(
    State(state): State<Arc<AppState>>,
    Body(request): Body<Waiting>,
) -> Answer {
    let topic = named(
        ("topic", request.topic),
        ("topic_base64", request.topic_base64),
    )
    .map_err(bad)?;
    let after = request.after.map(After::cursor).transpose().map_err(bad)?;
    let count = match request.count.unwrap_or(DEFAULT_COUNT) {
        count @ 1..=MAX_COUNT => count,
        count => return Err(bad(format!("count {count} is not from 1 to {MAX_COUNT}"))),
    };
    let _reading = state.large_reads.acquire().await;
    let page = state
        .inspector
        .waiting(topic.as_deref(), after.as_ref(), count)
        .await
        .map_err(refused)?;
    let data = json!({
        "jobs": page.jobs.iter().map(job_json).collect::<Vec<_>>(),
        "read": page.read,
        "next": page.next.as_ref().map(cursor_json),
        "cut_short": page.cut_short,
    });
    Ok(ok("ok", data))
}

/// `promote`: one job by id, or a topic's. A field it does not know is refused: a misspelt
/// `limit` would run up to 10,000 jobs.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Promote {
    job_id: Option<String>,
    id_base64: Option<String>,
    topic: Option<String>,
    topic_base64: Option<String>,
    limit: Option<usize>,
    after: Option<After>,
}

/// Makes a waiting job due now (`job_id`): 404 for no such job, 409 for one that is not waiting.
/// Or up to `limit` (at most, and unless given, [`MAX_PROMOTE`]) of `topic`'s, after `after`:
/// `promoted` says how many, `next` where to go on from when more may wait (null when none).
pub(super) async fn promote(
    State(state): State<Arc<AppState>>,
    Body(request): Body<Promote>,
) -> Answer {
    let id = named(("job_id", request.job_id), ("id_base64", request.id_base64)).map_err(bad)?;
    let topic = named(
        ("topic", request.topic),
        ("topic_base64", request.topic_base64),
    )
    .map_err(bad)?;
    match (id, topic) {
        (Some(_), Some(_)) => Err(bad("give job_id or topic, not both")),
        (Some(id), None) => {
            if request.limit.is_some() || request.after.is_some() {
                return Err(bad("limit and after go with topic, not job_id"));
            }
            if id.is_empty() {
                return Err(refused(Error::EmptyId));
            }
            match state.inspector.promote(&id).await.map_err(refused)? {
                Promoted::Due => Ok(ok("promoted", json!({"was_due": false}))),
                Promoted::WasDue => Ok(ok("due already", json!({"was_due": true}))),
            }
        }
        (None, Some(topic)) => {
            let limit = match request.limit.unwrap_or(MAX_PROMOTE) {
                limit @ 1..=MAX_PROMOTE => limit,
                limit => return Err(bad(format!("limit {limit} is not from 1 to {MAX_PROMOTE}"))),
            };
            let after = request.after.map(After::cursor).transpose().map_err(bad)?;
            let _reading = state.large_reads.acquire().await;
            let done = state
                .inspector
                .promote_topic(&topic, limit, after.as_ref())
                .await
                .map_err(refused)?;
            let data = json!({
                "promoted": done.made_due,
                "read": done.read,
                "next": done.next.as_ref().map(cursor_json),
            });
            Ok(ok("promoted", data))
        }
        (None, None) => Err(bad(
            "give job_id (or id_base64), or topic (or topic_base64)",
        )),
    }
}
