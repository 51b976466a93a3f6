//! What the job commands print: jobs as JSON, and the queues (with the schedules, when there are
//! any) as JSON or a table. An id, topic or body that is not UTF-8 prints as text and, beside it,
//! as its bytes in base64 (`id_base64`, `topic_base64`, `body_base64`), as the HTTP API answers
//! it.

use delayer_client::inspector::{ScheduleList, Stats};
use delayer_client::{Job, JobInfo, Topic};
use serde_json::{Value, json};

use crate::text::bytes::{self, with_base64};
use crate::text::escape;
use crate::text::schedule::{list_json, next_text, why};
use crate::text::time::rfc3339;

pub(super) fn info_json(info: &JobInfo) -> Value {
    let topic = info.topic.as_ref().map(Topic::as_bytes);
    let mut json = json!({
        "id": bytes::text(info.id.as_bytes()),
        "topic": topic.map(bytes::text),
        "body": info.body.as_deref().map(bytes::text),
        "state": info.state.name(),
        "due": info.due.map(rfc3339),
        "attempts": info.attempts,
        "deadline": info.deadline.map(rfc3339),
    });
    if let Some(why) = &info.died_why {
        json["died_why"] = why.as_str().into();
    }
    with_base64(&mut json, "id", Some(info.id.as_bytes()));
    with_base64(&mut json, "topic", topic);
    with_base64(&mut json, "body", info.body.as_deref());
    json
}

pub(super) fn popped_json(job: &Job) -> Value {
    let mut json = json!({
        "id": bytes::text(job.id.as_bytes()),
        "topic": bytes::text(job.topic.as_bytes()),
        "body": bytes::text(&job.body),
        "state": "popped",
        "due": job.due.map(rfc3339),
    });
    with_base64(&mut json, "id", Some(job.id.as_bytes()));
    with_base64(&mut json, "topic", Some(job.topic.as_bytes()));
    with_base64(&mut json, "body", Some(&job.body));
    json
}

pub(super) fn stats_json(stats: &Stats, schedules: &ScheduleList) -> Value {
    let topics: Vec<Value> = stats
        .topics
        .iter()
        .map(|topic| {
            let mut json = json!({
                "topic": bytes::text(topic.topic.as_bytes()),
                "ready": topic.ready,
                "reserved": topic.reserved,
                "dead": topic.dead,
                "oldest_ready_age_seconds": topic.oldest_ready_age.map(|age| age.as_secs_f64()),
                "paused": topic.paused,
                "problem": topic.problem,
            });
            with_base64(&mut json, "topic", Some(topic.topic.as_bytes()));
            json
        })
        .collect();
    let mut json = json!({
        "waiting": stats.waiting,
        "due_now": stats.due_now,
        "next_due": stats.next_due.map(rfc3339),
        "topics": topics,
    });
    // Only when there are any: a drop-in install prints what it always did.
    if !schedules.is_empty() {
        json["schedules"] = Value::Array(list_json(schedules, 1));
    }
    json
}

pub(super) fn stats_table(stats: &Stats, schedules: &ScheduleList) -> String {
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
    // Said after the row's numbers, where a table reader looks last: most topics are not paused.
    for topic in &stats.topics {
        let age = topic.oldest_ready_age.map_or_else(
            || "-".to_string(),
            |age| format!("{:.1}s", age.as_secs_f64()),
        );
        text += &format!(
            "{:<width$}  {:>8}  {:>8}  {:>8}  {:>12}{}\n",
            escape::field(&topic.topic),
            topic.ready,
            topic.reserved,
            topic.dead,
            age,
            if topic.paused { "  paused" } else { "" }
        );
        if let Some(problem) = &topic.problem {
            // It names keys, which anyone who writes to Redis chooses: kept to one line.
            text += &format!("  ! {}\n", escape::one_line(problem));
        }
    }
    if !schedules.is_empty() {
        text += &schedules_table(schedules);
    }
    text
}

/// The schedules' rows of `stats`, after a blank line, by name: the next tick in each one's
/// zone, or why it cannot tick.
fn schedules_table(schedules: &ScheduleList) -> String {
    let counts = |n: u64| n.to_string();
    let mut rows: Vec<(&str, String, [String; 3])> = schedules
        .readable
        .iter()
        .map(|s| {
            let name = s.definition.name.as_str();
            (
                name,
                next_text(s),
                [s.fired, s.skipped, s.missed].map(counts),
            )
        })
        .collect();
    rows.extend(schedules.unreadable.iter().map(|invalid| {
        let next = format!("unreadable: {}", why(invalid));
        (
            invalid.schedule.as_str(),
            next,
            ["-", "-", "-"].map(String::from),
        )
    }));
    rows.sort_by(|a, b| a.0.cmp(b.0));
    let name_width = rows
        .iter()
        .map(|(name, ..)| name.chars().count())
        .max()
        .unwrap_or(0)
        .max("schedule".len());
    let next_width = rows
        .iter()
        .map(|(_, next, _)| next.chars().count())
        .max()
        .unwrap_or(0)
        .max("next tick".len());
    let mut text = format!(
        "\n{:<name_width$}  {:<next_width$}  {:>8}  {:>8}  {:>8}\n",
        "schedule", "next tick", "fired", "skipped", "missed"
    );
    for (name, next, [fired, skipped, missed]) in &rows {
        text += &format!(
            "{name:<name_width$}  {next:<next_width$}  {fired:>8}  {skipped:>8}  {missed:>8}\n"
        );
    }
    text
}
