//! The job subcommands (push, get, pop, remove, stats, pause, resume, dead, waiting, promote):
//! each connects to the configured Redis through the client library, does one thing (one
//! function each), and prints the result.

use std::fs::File;
use std::io::{BufRead, Read, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, bail};
use delayer_client::inspector::{Cursor, Promoted};
use delayer_client::{Client, Error, Inspector, JobId, NewPush, Removed, State, Topic};
use serde_json::Value;

use super::Command;
use super::args::CompactAction;
use super::output::{info_json, popped_json, stats_json, stats_table};
use crate::config::Config;
use crate::redis::target;
use crate::text::time::rfc3339;
use crate::text::waiting::job_json;

/// Runs one job command against the Redis of `config`.
pub async fn run(config: &Config, command: Command) -> Result<()> {
    let client = Client::connect_to(target(&config.redis)?, config.client_settings())
        .await
        .with_context(|| format!("cannot use Redis at {}", config.redis.address()))?;
    let done = command_with(&client, config, command).await;
    // The pushes counted, before the process exits (best effort: the command is done).
    let _ = client.send_counts().await;
    done
}

/// Runs `command` with `client`, or an [`Inspector`] on it.
async fn command_with(client: &Client, config: &Config, command: Command) -> Result<()> {
    let inspector = Inspector::new(client);
    match command {
        Command::Serve(_) => unreachable!("serving is not a job command"),
        Command::Push {
            topic,
            delay,
            at,
            stdin: true,
            ..
        } => push_lines(client, topic, delay, at).await,
        Command::Push {
            topic,
            body,
            body_file,
            delay,
            at,
            id,
            id_base64,
            ..
        } => {
            let body = body_of(body, body_file.as_deref(), config.max_body_bytes)?;
            let id = id_base64.or(id.map(JobId::from));
            push(client, topic, body, delay, at, id).await
        }
        Command::Get { id } => get(client, id.id()).await,
        Command::Pop { topic, wait } => pop(client, topic.topic(), wait).await,
        Command::Remove { id } => remove(client, id.id()).await,
        Command::Stats { json } => stats(&inspector, json).await,
        Command::Pause { topic } => pause(&inspector, topic.topic()).await,
        Command::Resume { topic } => resume(&inspector, topic.topic()).await,
        Command::Dead {
            topic,
            requeue: true,
            ..
        } => requeue_dead(&inspector, topic.topic()).await,
        Command::Dead { topic, limit, .. } => dead(client, &inspector, topic.topic(), limit).await,
        Command::Waiting {
            topic,
            topic_base64,
            limit,
        } => waiting(&inspector, topic_base64.or(topic.map(Topic::from)), limit).await,
        Command::Promote {
            topic,
            topic_base64,
            limit,
            ..
        } if topic.is_some() || topic_base64.is_some() => {
            let topic = topic_base64.or(topic.map(Topic::from));
            promote_topic(&inspector, topic.expect("one of them"), limit).await
        }
        Command::Promote { id, id_base64, .. } => {
            let id = id_base64.or(id.map(JobId::from));
            promote(&inspector, id.expect("clap requires an id or a topic")).await
        }
        Command::Schedule(command) => super::schedule::run(&inspector, command).await,
        Command::Compact {
            action: CompactAction::Expand,
        } => expand_compact(&inspector).await,
    }
}

/// `compact expand`: every compact job in the legacy form.
async fn expand_compact(inspector: &Inspector) -> Result<()> {
    let expanded = inspector.expand_compact().await?;
    println!(
        "{} compact jobs written in the legacy form; {} dropped (expired, or pushed again by a \
         legacy client)",
        expanded.jobs, expanded.dropped
    );
    Ok(())
}

/// `push`: one job; prints its id.
async fn push(
    client: &Client,
    topic: String,
    body: Vec<u8>,
    delay: Option<Duration>,
    at: Option<SystemTime>,
    id: Option<JobId>,
) -> Result<()> {
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
    let id = push.await.map_err(push_refused)?;
    println!("{id}");
    Ok(())
}

/// `push --stdin`: a job per line of standard input, the line its body; prints their ids, one a
/// line (those pushed, when Redis refuses half way).
async fn push_lines(
    client: &Client,
    topic: String,
    delay: Option<Duration>,
    at: Option<SystemTime>,
) -> Result<()> {
    let mut jobs = Vec::new();
    for line in std::io::stdin().lock().split(b'\n') {
        let mut body = line.context("cannot read standard input")?;
        if body.last() == Some(&b'\r') {
            body.pop();
        }
        let job = NewPush::new(topic.clone(), body);
        jobs.push(match (delay, at) {
            (Some(delay), _) => job.delay(delay),
            (_, Some(at)) => job.at(at),
            (None, None) => job,
        });
    }
    let lines = jobs.len();
    let ids = match client.push_many(jobs).await {
        Ok(ids) => ids,
        Err(Error::PartlyPushed { pushed, error }) => {
            // One topic: one run of script calls, so what was written comes first.
            let mut out = std::io::stdout().lock();
            for (_, id) in &pushed {
                writeln!(out, "{id}")?;
            }
            return Err(push_refused(*error).context(format!(
                "lines 1 to {} of {lines} were pushed (their ids are printed), line {} \
                 and after were not",
                pushed.len(),
                pushed.len() + 1
            )));
        }
        Err(Error::InBatch { index, error }) => {
            return Err(
                push_refused(*error).context(format!("line {} of standard input", index + 1))
            );
        }
        Err(other) => return Err(push_refused(other)),
    };
    let mut out = std::io::stdout().lock();
    for id in ids {
        writeln!(out, "{id}")?;
    }
    Ok(())
}

/// `get`: the job as JSON.
async fn get(client: &Client, id: JobId) -> Result<()> {
    let info = client.get(&id).await?;
    if info.state == State::Unknown {
        bail!("no job {id:?} (finished, removed, or never pushed)");
    }
    println!("{}", info_json(&info));
    Ok(())
}

/// `pop`: the legacy pop, as JSON; `null` when nothing is ready (within `wait`, if given).
async fn pop(client: &Client, topic: Topic, wait: Option<Duration>) -> Result<()> {
    let job = match wait {
        Some(wait) => {
            client
                .bpop(&[&topic], wait.max(Duration::from_millis(1)))
                .await?
        }
        None => client.pop(&topic).await?,
    };
    println!("{}", job.as_ref().map_or(Value::Null, popped_json));
    Ok(())
}

/// `remove`: the job, wherever it is.
async fn remove(client: &Client, id: JobId) -> Result<()> {
    match client.remove(&id).await? {
        Removed::Waiting => println!("removed {id}"),
        Removed::Due => println!(
            "removed {id}, which had fallen due: a consumer that takes it now finds it gone"
        ),
        Removed::Unknown => bail!("no job {id:?} (finished, removed, or never pushed)"),
    }
    Ok(())
}

/// `stats`: the queues, and the schedules when there are any, as a table or JSON.
async fn stats(inspector: &Inspector, json: bool) -> Result<()> {
    let stats = inspector.stats().await?;
    let schedules = inspector.schedules().await?;
    if json {
        println!("{}", stats_json(&stats, &schedules));
    } else {
        print!("{}", stats_table(&stats, &schedules));
    }
    Ok(())
}

/// `pause`: the topic's due jobs wait in the pool.
async fn pause(inspector: &Inspector, topic: Topic) -> Result<()> {
    inspector.pause(&topic).await?;
    println!("paused topic {topic}: its jobs that fall due wait until it is resumed");
    Ok(())
}

/// `resume`: the topic's jobs that fell due meanwhile move now.
async fn resume(inspector: &Inspector, topic: Topic) -> Result<()> {
    let paused = inspector.is_paused(&topic).await?;
    let moved = inspector.resume(&topic).await?;
    let jobs = if moved == 1 { "job" } else { "jobs" };
    if paused || moved > 0 {
        println!("resumed topic {topic}: {moved} {jobs} that fell due meanwhile move now");
    } else {
        println!("topic {topic} was not paused");
    }
    Ok(())
}

/// `dead --requeue`: the topic's dead jobs back to the pool, due now.
async fn requeue_dead(inspector: &Inspector, topic: Topic) -> Result<()> {
    let requeued = inspector.requeue_dead(&topic).await?;
    let jobs = if requeued == 1 { "job" } else { "jobs" };
    println!("requeued {requeued} dead {jobs} of topic {topic}");
    Ok(())
}

/// `dead`: the topic's `limit` oldest dead jobs, one JSON object each.
async fn dead(client: &Client, inspector: &Inspector, topic: Topic, limit: usize) -> Result<()> {
    // One more than asked: to tell that there are more.
    let ids = inspector.dead(&topic, limit.saturating_add(1)).await?;
    for id in ids.iter().take(limit) {
        println!("{}", info_json(&client.get(id).await?));
    }
    if ids.len() > limit {
        eprintln!(
            "the oldest {limit} dead jobs of topic {topic} are listed; there are more \
             (--limit N lists more, delayer stats counts them)"
        );
    }
    Ok(())
}

/// `waiting`: up to `limit` waiting jobs (of `topic`), earliest first, one JSON object each.
async fn waiting(inspector: &Inspector, topic: Option<Topic>, limit: usize) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let mut listed = 0;
    let mut after: Option<Cursor> = None;
    // A page at a time: each call reads a bounded part of the pool.
    while listed < limit {
        let count = (limit - listed).min(1000);
        let topic = topic.as_ref().map(Topic::as_bytes);
        let page = inspector.waiting(topic, after.as_ref(), count).await?;
        for job in &page.jobs {
            writeln!(out, "{}", job_json(job))?;
        }
        listed += page.jobs.len();
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(()),
        }
    }
    drop(out);
    eprintln!(
        "the first {limit} waiting jobs are listed; there may be more (--limit N lists more)"
    );
    Ok(())
}

/// `promote ID`: the job due now.
async fn promote(inspector: &Inspector, id: JobId) -> Result<()> {
    match inspector.promote(&id).await {
        Ok(Promoted::Due) => println!("job {id} is due now: the daemon moves it at once"),
        Ok(Promoted::WasDue) => println!("job {id} was due already: the daemon moves it shortly"),
        Err(Error::UnknownJob(_)) => {
            bail!("no waiting job {id:?}: no such job (finished, removed, or never pushed)")
        }
        Err(Error::NotWaiting(_)) => {
            bail!(
                "no waiting job {id:?}: it is ready, reserved or dead (delayer get {id} says which)"
            )
        }
        Err(other) => return Err(other.into()),
    }
    Ok(())
}

/// `promote --topic`: up to `limit` of the topic's waiting jobs due now, earliest first. Each
/// call reads a bounded part of the pool; this goes on through all of it.
async fn promote_topic(inspector: &Inspector, topic: Topic, limit: usize) -> Result<()> {
    let mut made_due = 0;
    let mut after: Option<Cursor> = None;
    loop {
        let done = inspector
            .promote_topic(&topic, limit - made_due, after.as_ref())
            .await?;
        made_due += done.made_due;
        after = done.next;
        if after.is_none() || made_due >= limit {
            break;
        }
    }
    let (jobs, are) = if made_due == 1 {
        ("job", "is")
    } else {
        ("jobs", "are")
    };
    println!(
        "{made_due} waiting {jobs} of topic {topic} {are} due now: the daemon moves them at once"
    );
    if after.is_some() {
        eprintln!("--limit {limit} reached: more of its jobs may wait (run it again)");
    }
    Ok(())
}

/// A push's refusal in the words of the command line.
fn push_refused(error: Error) -> anyhow::Error {
    match error {
        Error::InThePast(at) => anyhow::anyhow!("--at {} is in the past", rfc3339(at)),
        too_large @ Error::BodyTooLarge { .. } => {
            anyhow::anyhow!("{too_large} ([delayer] max_body_bytes)")
        }
        other => other.into(),
    }
}

/// The body `push` was given: on the command line, or in a file (see [`read_body`]).
fn body_of(body: Option<String>, body_file: Option<&Path>, limit: usize) -> Result<Vec<u8>> {
    match (body, body_file) {
        (Some(body), _) => Ok(body.into_bytes()),
        (None, Some(path)) => read_body(path, limit),
        (None, None) => unreachable!("clap requires a body, --body-file or --stdin"),
    }
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
