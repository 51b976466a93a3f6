//! Waiting jobs and places in the pool as the CLI and the HTTP API show them. An id or topic
//! that is not UTF-8 prints as text and, beside it, as its bytes in base64.

use delayer_client::inspector::{Cursor, WaitingJob};
use delayer_wire::time::from_unix;
use serde_json::{Value, json};

use super::bytes::{self, with_base64};
use super::time::rfc3339;

/// A waiting job: its id, due time (RFC 3339), topic and attempts.
pub fn job_json(job: &WaitingJob) -> Value {
    let topic = job.topic.as_ref().map(|topic| topic.as_bytes());
    let mut json = json!({
        "id": bytes::text(job.id.as_bytes()),
        "topic": topic.map(bytes::text),
        "due": from_unix(job.due).map(rfc3339),
        "attempts": job.attempts,
    });
    with_base64(&mut json, "id", Some(job.id.as_bytes()));
    with_base64(&mut json, "topic", topic);
    json
}

/// A place in the pool, as a page's `next` gives it and `after` takes it back: the job's score
/// and its id. The score is text, in the shortest form that reads back exactly: a JSON number
/// may be read back a little off, and the place with it.
pub fn cursor_json(cursor: &Cursor) -> Value {
    let score = cursor.score.to_string();
    let mut json = json!({"score": score, "id": bytes::text(cursor.id.as_bytes())});
    with_base64(&mut json, "id", Some(cursor.id.as_bytes()));
    json
}
