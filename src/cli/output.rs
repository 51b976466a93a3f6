//! What the job commands print: jobs as JSON, and the queues as JSON or a table.

use delayer_client::{Job, JobInfo, Stats, Topic};
use serde_json::{Value, json};

use crate::text::bytes;
use crate::text::escape;
use crate::text::time::rfc3339;

pub(super) fn info_json(info: &JobInfo) -> Value {
    let mut json = json!({
        "id": info.id.to_str_lossy(),
        "topic": info.topic.as_ref().map(Topic::to_str_lossy),
        "body": info.body.as_deref().map(bytes::text),
        "state": info.state.name(),
        "due": info.due.map(rfc3339),
        "attempts": info.attempts,
        "deadline": info.deadline.map(rfc3339),
    });
    with_body_base64(&mut json, info.body.as_deref());
    json
}

pub(super) fn popped_json(job: &Job) -> Value {
    let mut json = json!({
        "id": job.id.to_str_lossy(),
        "topic": job.topic.to_str_lossy(),
        "body": bytes::text(&job.body),
        "state": "popped",
        "due": job.due.map(rfc3339),
    });
    with_body_base64(&mut json, Some(&job.body));
    json
}

/// Adds `body_base64` to a job's `json` when its body is not UTF-8.
fn with_body_base64(json: &mut Value, body: Option<&[u8]>) {
    if let Some(encoded) = body.and_then(bytes::base64) {
        json["body_base64"] = Value::String(encoded);
    }
}

pub(super) fn stats_json(stats: &Stats) -> Value {
    let topics: Vec<Value> = stats
        .topics
        .iter()
        .map(|topic| {
            json!({
                "topic": topic.topic.to_str_lossy(),
                "ready": topic.ready,
                "reserved": topic.reserved,
                "dead": topic.dead,
                "oldest_ready_age_seconds": topic.oldest_ready_age.map(|age| age.as_secs_f64()),
                "problem": topic.problem,
            })
        })
        .collect();
    json!({
        "waiting": stats.waiting,
        "due_now": stats.due_now,
        "next_due": stats.next_due.map(rfc3339),
        "topics": topics,
    })
}

pub(super) fn stats_table(stats: &Stats) -> String {
    let next = stats.next_due.map_or_else(|| "none".to_string(), rfc3339);
    let mut text = format!(
        "jobs waiting: {} ({} due now), next due: {next}\n",
        stats.waiting, stats.due_now
    );
    let width = stats
        .topics
        .iter()
        .map(|topic| escape::field(&topic.topic).chars().count())
        .max()
        .unwrap_or(0)
        .max("topic".len());
    text += &format!(
        "{:<width$}  {:>8}  {:>8}  {:>8}  {:>12}\n",
        "topic", "ready", "reserved", "dead", "oldest ready"
    );
    for topic in &stats.topics {
        let age = topic.oldest_ready_age.map_or_else(
            || "-".to_string(),
            |age| format!("{:.1}s", age.as_secs_f64()),
        );
        text += &format!(
            "{:<width$}  {:>8}  {:>8}  {:>8}  {:>12}\n",
            escape::field(&topic.topic),
            topic.ready,
            topic.reserved,
            topic.dead,
            age
        );
        if let Some(problem) = &topic.problem {
            // It names keys, which anyone who writes to Redis chooses: kept to one line.
            text += &format!("  ! {}\n", escape::one_line(problem));
        }
    }
    text
}
