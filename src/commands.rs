//! The job subcommands (push, get, pop, remove, stats, dead): each connects to the configured
//! Redis through the client library, does one thing, and prints the result.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use delayer_client::{Client, Error, Job, JobInfo, Removed, Stats};
use serde_json::{Value, json};

use crate::body_json;
use crate::cli::Command;
use crate::config::Config;
use crate::pool;
use crate::time_text::rfc3339;

/// Runs one job command against the Redis of `config`.
pub async fn run(config: &Config, command: Command) -> Result<()> {
    let client = Client::connect_to(pool::target(&config.redis)?, config.client_settings())
        .await
        .with_context(|| format!("cannot use Redis at {}", config.redis.address()))?;
    match command {
        Command::Serve(_) => unreachable!("serving is not a job command"),
        Command::Push {
            topic,
            body,
            body_file,
            delay,
            at,
            id,
        } => {
            let limit = config.max_body_bytes;
            let body = match (body, body_file) {
                (Some(body), _) => body.into_bytes(),
                (None, Some(path)) => read_body(&path, limit)?,
                (None, None) => unreachable!("clap requires a body or --body-file"),
            };
            let mut push = client.push(topic, body);
            if let Some(delay) = delay {
                push = push.delay(delay);
            }
            if let Some(at) = at {
                push = push.at(at);
            }
            if let Some(id) = id {
                push = push.id(id);
            }
            let id = push.await.map_err(|error| match error {
                Error::InThePast(at) => anyhow::anyhow!("--at {} is in the past", rfc3339(at)),
                too_large @ Error::BodyTooLarge { .. } => {
                    anyhow::anyhow!("{too_large} ([delayer] max_body_bytes)")
                }
                other => other.into(),
            })?;
            println!("{id}");
        }
        Command::Get { id } => println!("{}", info_json(&client.get(&id).await?)),
        Command::Pop { topic, wait } => {
            let job = match wait {
                Some(wait) => {
                    client
                        .bpop(&[&topic], wait.max(Duration::from_millis(1)))
                        .await?
                }
                None => client.pop(&topic).await?,
            };
            println!("{}", job.as_ref().map_or(Value::Null, popped_json));
        }
        Command::Remove { id } => match client.remove(&id).await? {
            Removed::Waiting => println!("removed {id}"),
            Removed::Due => println!(
                "removed {id}, which had fallen due: a consumer that takes it now finds it gone"
            ),
            Removed::Unknown => bail!("no job {id:?} (finished, removed, or never pushed)"),
        },
        Command::Stats { json } => {
            let stats = client.stats().await?;
            if json {
                println!("{}", stats_json(&stats));
            } else {
                print!("{}", stats_table(&stats));
            }
        }
        Command::Dead {
            topic,
            requeue: true,
            ..
        } => {
            let requeued = client.requeue_dead(&topic).await?;
            println!("requeued {requeued} dead jobs of topic {topic}");
        }
        Command::Dead { topic, limit, .. } => {
            for id in client.dead(&topic, limit).await? {
                println!("{}", info_json(&client.get(&id).await?));
            }
        }
    }
    Ok(())
}

/// The body in the file at `path` (`-`: standard input), read no further than `limit` bytes and
/// one more, so that a huge file is refused without being read whole.
fn read_body(path: &Path, limit: usize) -> Result<Vec<u8>> {
    let stdin = path == Path::new("-");
    let name = if stdin {
        "standard input".to_string()
    } else {
        path.display().to_string()
    };
    let source: Box<dyn Read> = if stdin {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(File::open(path).with_context(|| format!("cannot read the body file {name}"))?)
    };
    let mut body = Vec::new();
    source
        .take(limit as u64 + 1)
        .read_to_end(&mut body)
        .with_context(|| format!("cannot read the body file {name}"))?;
    if body.len() > limit {
        bail!("the body in {name} is over the limit of {limit} bytes ([delayer] max_body_bytes)");
    }
    Ok(body)
}

fn info_json(info: &JobInfo) -> Value {
    let mut json = json!({
        "id": info.id,
        "topic": info.topic,
        "body": info.body.as_deref().map(body_json::text),
        "state": info.state.name(),
        "due": info.due.map(rfc3339),
        "attempts": info.attempts,
        "deadline": info.deadline.map(rfc3339),
    });
    with_body_base64(&mut json, info.body.as_deref());
    json
}

fn popped_json(job: &Job) -> Value {
    let mut json = json!({
        "id": job.id,
        "topic": job.topic,
        "body": body_json::text(&job.body),
        "state": "popped",
        "due": job.due.map(rfc3339),
    });
    with_body_base64(&mut json, Some(&job.body));
    json
}

/// Adds `body_base64` to a job's `json` when its body is not UTF-8.
fn with_body_base64(json: &mut Value, body: Option<&[u8]>) {
    if let Some(encoded) = body.and_then(body_json::base64) {
        json["body_base64"] = Value::String(encoded);
    }
}

fn stats_json(stats: &Stats) -> Value {
    let topics: Vec<Value> = stats
        .topics
        .iter()
        .map(|topic| {
            json!({
                "topic": topic.topic,
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

fn stats_table(stats: &Stats) -> String {
    let next = stats.next_due.map_or_else(|| "none".to_string(), rfc3339);
    let mut text = format!(
        "jobs waiting: {} ({} due now), next due: {next}\n",
        stats.waiting, stats.due_now
    );
    let width = stats
        .topics
        .iter()
        .map(|topic| topic.topic.chars().count())
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
            crate::escape::field(&topic.topic),
            topic.ready,
            topic.reserved,
            topic.dead,
            age
        );
        if let Some(problem) = &topic.problem {
            // It names keys, which anyone who writes to Redis chooses: kept to one line.
            text += &format!("  ! {}\n", crate::escape::one_line(problem));
        }
    }
    text
}
