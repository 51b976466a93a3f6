//! Pausing a topic and resuming it.

use std::sync::Arc;

use axum::extract::State;
use serde::Deserialize;
use serde_json::json;

use crate::http::reply::{Answer, bad, ok, refused};
use crate::http::request::{Body, named};
use crate::http::state::AppState;

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
    state.inspector.pause(&topic).await.map_err(refused)?;
    Ok(ok("paused", ()))
}

/// Resumes a topic: its jobs that fell due meanwhile move at once; `moved` says how many.
pub(super) async fn resume(
    State(state): State<Arc<AppState>>,
    Body(request): Body<TopicOnly>,
) -> Answer {
    let topic = request.topic().map_err(bad)?;
    let moved = state.inspector.resume(&topic).await.map_err(refused)?;
    Ok(ok("resumed", json!({"moved": moved})))
}
