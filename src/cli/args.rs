//! The arguments: the original's flags (serving is what `delayer` does without a subcommand), and
//! the job subcommands.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use delayer_client::{JobId, Topic};
use delayer_wire::duration;

use crate::text::bytes;

/// The command line.
#[derive(Parser)]
#[command(
    version,
    about = "Moves delayed jobs, when they fall due, from Redis's job pool to per-topic ready lists.",
    disable_version_flag = true,
    after_help = "Without a subcommand, serves (as `delayer serve`): delayer -c /etc/delayer/delayer.conf"
)]
pub struct Args {
    /// Configuration file path [default: the first of ./delayer.conf, /etc/delayer/delayer.conf]
    #[arg(
        short = 'c',
        long = "configuration",
        value_name = "FILENAME",
        global = true
    )]
    pub configuration: Option<PathBuf>,
    /// How to serve, when serving.
    #[command(flatten)]
    pub serving: Serving,
    /// Print version number and exit
    #[arg(short = 'v', long = "version", action = clap::ArgAction::Version)]
    pub version: (),
    /// A job command, or `serve` (the default).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The flags of serving, taken before a subcommand or after `serve` (not by the job commands,
/// whose help would otherwise list them).
#[derive(clap::Args, Clone, Copy, Default)]
pub struct Serving {
    /// Run in the background (returns once the daemon is up, or prints why it is not)
    #[arg(short = 'd', long = "daemon")]
    pub daemon: bool,
    /// Check the configuration and the Redis connection, print what would be used, and exit
    #[arg(long = "check-config")]
    pub check_config: bool,
}

/// What `delayer compact` does.
#[derive(Subcommand)]
pub enum CompactAction {
    /// Write every job waiting compact in the legacy form now (set compact_pushes = false, and
    /// the clients' compact_after to none, first)
    Expand,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Move jobs as they fall due (what `delayer` does without a subcommand)
    #[command(after_help = "Example: delayer serve -c /etc/delayer/delayer.conf -d")]
    Serve(Serving),
    /// Push a job (or with --stdin one per line); prints its id (one per line)
    #[command(
        after_help = "Examples:\n  delayer push order.close '{\"order\":42}' --delay 30m\n  \
                            delayer push mail.remind 'user 7' --at 2026-12-24T18:00:00+01:00 --id remind-7\n  \
                            delayer push report.build --body-file request.bin --delay 1h\n  \
                            cut -f1 orders.tsv | delayer push order.close --stdin --delay 30m > ids.txt"
    )]
    Push {
        /// The topic whose ready list the job goes to when due
        topic: String,
        /// The job's body (or --body-file, or --stdin)
        #[arg(
            required_unless_present_any = ["body_file", "stdin"],
            conflicts_with_all = ["body_file", "stdin"]
        )]
        body: Option<String>,
        /// Read the body from this file, `-` for standard input: for bodies that are not text,
        /// or too long for a command line
        #[arg(long, value_name = "FILE", conflicts_with = "stdin")]
        body_file: Option<PathBuf>,
        /// Push one job per line of standard input, the line its body (without the line end),
        /// each with a new id and the same --delay or --at; every line is checked before the
        /// first is written, and they go in batches of 1,000 a call
        #[arg(long, conflicts_with_all = ["id", "id_base64"])]
        stdin: bool,
        /// Due after this long: 90s, 5m, 2h, 1d, 250ms, 1.5s [default: now]
        #[arg(long, value_parser = duration::parse, conflicts_with = "at")]
        delay: Option<Duration>,
        /// Due at this time, RFC 3339 (2026-12-24T18:00:00Z)
        #[arg(long, value_parser = parse_time)]
        at: Option<std::time::SystemTime>,
        /// The job's id [default: a new unique one]
        #[arg(long, conflicts_with = "id_base64")]
        id: Option<String>,
        /// The job's id as the base64 of its bytes, for one that is not UTF-8
        #[arg(long, value_name = "BASE64", value_parser = id_base64)]
        id_base64: Option<JobId>,
    },
    /// Print a job as JSON: id, topic, body, state, due, attempts; exits 1 when there is no
    /// such job
    #[command(after_help = "Example: delayer get 5d41402abc4b2a76b9719d911017c592")]
    Get {
        /// The job
        #[command(flatten)]
        id: IdArg,
    },
    /// Take the oldest ready job of a topic (as the legacy clients' pop: it is gone once
    /// printed); prints it as JSON, or null when there is none
    #[command(after_help = "Example: delayer pop order.close --wait 5s")]
    Pop {
        /// The topic whose ready list to take from
        #[command(flatten)]
        topic: TopicArg,
        /// Wait up to this long for a job
        #[arg(long, value_parser = duration::parse)]
        wait: Option<Duration>,
    },
    /// Remove a job wherever it is (waiting, ready, reserved or dead), as the legacy clients'
    /// remove does; exits 1 when there is no such job
    #[command(after_help = "Example: delayer remove 5d41402abc4b2a76b9719d911017c592")]
    Remove {
        /// The job
        #[command(flatten)]
        id: IdArg,
    },
    /// Jobs waiting and due, and per topic the ready, reserved and dead jobs
    #[command(after_help = "Example: delayer stats --json")]
    Stats {
        /// Print one JSON object instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Pause a topic: its jobs that fall due wait in the pool until it is resumed (for every
    /// daemon on this Redis, across restarts); its ready jobs stay there for consumers
    #[command(after_help = "Example: delayer pause order.close")]
    Pause {
        /// The topic to pause
        #[command(flatten)]
        topic: TopicArg,
    },
    /// Resume a paused topic: its jobs that fell due meanwhile move at once, in due order
    #[command(after_help = "Example: delayer resume order.close")]
    Resume {
        /// The topic to resume
        #[command(flatten)]
        topic: TopicArg,
    },
    /// List the jobs waiting in the pool, in due order (a topic's, with --topic), one JSON
    /// object a line: id, topic, due, attempts
    #[command(
        after_help = "Examples:\n  delayer waiting --limit 20\n  delayer waiting --topic order.close"
    )]
    Waiting {
        /// Only this topic's jobs (in a pool of every topic, they are looked for in all of it)
        #[arg(long, conflicts_with = "topic_base64")]
        topic: Option<String>,
        /// Instead of --topic: its bytes in base64, for a topic that is not UTF-8
        #[arg(long, value_name = "BASE64", value_parser = topic_base64)]
        topic_base64: Option<Topic>,
        /// List at most this many (earliest first)
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Run a waiting job now: due now, by Redis's clock, so that the daemon moves it to its
    /// ready list at once; exits 1 when there is no such waiting job. With --topic, a topic's
    /// waiting jobs, earliest first
    #[command(
        after_help = "Examples:\n  delayer promote 5d41402abc4b2a76b9719d911017c592\n  \
                            delayer promote --topic order.close --limit 500"
    )]
    Promote {
        /// The job's id, as push printed it
        #[arg(
            required_unless_present_any = ["id_base64", "topic", "topic_base64"],
            conflicts_with_all = ["id_base64", "topic", "topic_base64"]
        )]
        id: Option<String>,
        /// Instead of ID: its bytes in base64, for an id that is not UTF-8
        #[arg(
            long,
            value_name = "BASE64",
            value_parser = id_base64,
            conflicts_with_all = ["topic", "topic_base64"]
        )]
        id_base64: Option<JobId>,
        /// Instead of a job: the waiting jobs of this topic
        #[arg(long, conflicts_with = "topic_base64", group = "of_topic")]
        topic: Option<String>,
        /// Instead of --topic: its bytes in base64, for a topic that is not UTF-8
        #[arg(long, value_name = "BASE64", value_parser = topic_base64, group = "of_topic")]
        topic_base64: Option<Topic>,
        /// With --topic: run at most this many (earliest first)
        #[arg(long, default_value_t = 10_000, requires = "of_topic")]
        limit: usize,
    },
    /// The compact layout: `expand` writes every job waiting compact in the legacy form now,
    /// before going back to a version without it (see docs/compact.md)
    #[command(after_help = "Example:\n  delayer compact expand")]
    Compact {
        /// What to do
        #[command(subcommand)]
        action: CompactAction,
    },
    /// Recurring schedules: add, list, show, remove, pause, resume, run
    #[command(subcommand)]
    Schedule(super::schedule::ScheduleCommand),
    /// List a topic's dead jobs (those that failed their last attempt), or requeue them
    #[command(
        after_help = "Examples:\n  delayer dead order.close\n  delayer dead order.close --requeue"
    )]
    Dead {
        /// The topic whose dead list to look at
        #[command(flatten)]
        topic: TopicArg,
        /// Put them all back in the pool, due now, with their attempts counted afresh
        #[arg(long)]
        requeue: bool,
        /// List at most this many (oldest first)
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
}

/// A job named by its id, or by the base64 of its bytes (what `id_base64` in the JSON printed).
#[derive(clap::Args)]
pub struct IdArg {
    /// The job's id, as push printed it
    #[arg(required_unless_present = "id_base64", conflicts_with = "id_base64")]
    id: Option<String>,
    /// Instead of ID: its bytes in base64, for an id that is not UTF-8 (as "id_base64" printed it)
    #[arg(long, value_name = "BASE64", value_parser = id_base64)]
    id_base64: Option<JobId>,
}

impl IdArg {
    pub fn id(self) -> JobId {
        self.id_base64
            .or(self.id.map(JobId::from))
            .expect("clap requires one of them")
    }
}

/// A topic named as text, or by the base64 of its bytes (what `topic_base64` in the JSON printed).
#[derive(clap::Args)]
pub struct TopicArg {
    /// The topic
    #[arg(
        required_unless_present = "topic_base64",
        conflicts_with = "topic_base64"
    )]
    topic: Option<String>,
    /// Instead of TOPIC: its bytes in base64, for a topic that is not UTF-8 (as "topic_base64"
    /// printed it)
    #[arg(long, value_name = "BASE64", value_parser = topic_base64)]
    topic_base64: Option<Topic>,
}

impl TopicArg {
    pub fn topic(self) -> Topic {
        self.topic_base64
            .or(self.topic.map(Topic::from))
            .expect("clap requires one of them")
    }
}

fn id_base64(text: &str) -> Result<JobId, String> {
    bytes::from_base64("the id", text).map(JobId::from)
}

fn topic_base64(text: &str) -> Result<Topic, String> {
    bytes::from_base64("the topic", text).map(Topic::from)
}

/// An RFC 3339 time, as `--at` takes it.
fn parse_time(text: &str) -> Result<std::time::SystemTime> {
    let time = chrono::DateTime::parse_from_rfc3339(text.trim())
        .with_context(|| format!("{text:?} is not an RFC 3339 time like 2026-12-24T18:00:00Z"))?;
    Ok(time.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339() {
        let time = parse_time("2026-12-24T18:00:00+01:00").unwrap();
        let seconds = time
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert_eq!(seconds, 1_798_131_600);
        assert!(parse_time("tomorrow").is_err());
    }
}
