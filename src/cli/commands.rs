//! The job subcommands (push, get, pop, remove, stats, dead): each connects to the configured
//! Redis through the client library, does one thing, and prints the result.

use std::fs::File;
use std::io::{BufRead, Read, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use delayer_client::{Client, Error, JobId, NewPush, Removed, State};
use serde_json::Value;

use super::Command;
use super::output::{info_json, popped_json, stats_json, stats_table};
use crate::config::Config;
use crate::redis::target;
use crate::text::time::rfc3339;

/// Runs one job command against the Redis of `config`.
pub async fn run(config: &Config, command: Command) -> Result<()> {
    let client = Client::connect_to(target(&config.redis)?, config.client_settings())
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
            stdin,
            id,
            id_base64,
        } => {
            if stdin {
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
                        return Err(push_refused(*error)
                            .context(format!("line {} of standard input", index + 1)));
                    }
                    Err(other) => return Err(push_refused(other)),
                };
                let mut out = std::io::stdout().lock();
                for id in ids {
                    writeln!(out, "{id}")?;
                }
                return Ok(());
            }
            let limit = config.max_body_bytes;
            let body = match (body, body_file) {
                (Some(body), _) => body.into_bytes(),
                (None, Some(path)) => read_body(&path, limit)?,
                (None, None) => unreachable!("clap requires a body, --body-file or --stdin"),
            };
            let mut push = client.push(topic, body);
            if let Some(delay) = delay {
                push = push.delay(delay);
            }
            if let Some(at) = at {
                push = push.at(at);
            }
            if let Some(id) = id_base64.or(id.map(JobId::from)) {
                push = push.id(id);
            }
            let id = push.await.map_err(push_refused)?;
            println!("{id}");
        }
        Command::Get { id } => {
            let id = id.id();
            let info = client.get(&id).await?;
            if info.state == State::Unknown {
                bail!("no job {id:?} (finished, removed, or never pushed)");
            }
            println!("{}", info_json(&info));
        }
        Command::Pop { topic, wait } => {
            let topic = topic.topic();
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
        Command::Remove { id } => {
            let id = id.id();
            match client.remove(&id).await? {
                Removed::Waiting => println!("removed {id}"),
                Removed::Due => println!(
                    "removed {id}, which had fallen due: a consumer that takes it now finds it gone"
                ),
                Removed::Unknown => bail!("no job {id:?} (finished, removed, or never pushed)"),
            }
        }
        Command::Stats { json } => {
            let stats = client.stats().await?;
            if json {
                println!("{}", stats_json(&stats));
            } else {
                print!("{}", stats_table(&stats));
            }
        }
        Command::Pause { topic } => {
            let topic = topic.topic();
            client.pause(&topic).await?;
            println!("paused topic {topic}: its jobs that fall due wait until it is resumed");
        }
        Command::Resume { topic } => {
            let topic = topic.topic();
            let paused = client.is_paused(&topic).await?;
            let moved = client.resume(&topic).await?;
            let jobs = if moved == 1 { "job" } else { "jobs" };
            if paused || moved > 0 {
                println!("resumed topic {topic}: {moved} {jobs} that fell due meanwhile move now");
            } else {
                println!("topic {topic} was not paused");
            }
        }
        Command::Dead {
            topic,
            requeue: true,
            ..
        } => {
            let topic = topic.topic();
            let requeued = client.requeue_dead(&topic).await?;
            let jobs = if requeued == 1 { "job" } else { "jobs" };
            println!("requeued {requeued} dead {jobs} of topic {topic}");
        }
        Command::Dead { topic, limit, .. } => {
            let topic = topic.topic();
            // One more than asked: to tell that there are more.
            let ids = client.dead(&topic, limit.saturating_add(1)).await?;
            for id in ids.iter().take(limit) {
                println!("{}", info_json(&client.get(id).await?));
            }
            if ids.len() > limit {
                eprintln!(
                    "the oldest {limit} dead jobs of topic {topic} are listed; there are more \
                     (--limit N lists more, delayer stats counts them)"
                );
            }
        }
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
