//! `-d`: detach into the background, the foreground process waiting until the daemon is up.

use std::fs::{File, OpenOptions};
use std::io::{PipeReader, PipeWriter, Read, Write};
use std::path::Path;

use anyhow::{Context, Result, bail};
use daemonize::{Daemonize, Outcome};

use super::logging::{self, LogSettings};
use super::pidfile;

const READY: &str = "READY";

/// How a starting service tells the foreground process that waits for it (if any) how it went.
pub struct Readiness {
    /// To the foreground process, until the verdict is sent.
    pipe: Option<PipeWriter>,
    detached: bool,
}

impl Readiness {
    /// Nobody is waiting: the service runs in the foreground.
    pub fn foreground() -> Readiness {
        Readiness {
            pipe: None,
            detached: false,
        }
    }

    /// The service is up: the foreground process may exit 0.
    pub fn ready(&mut self) {
        if let Some(mut pipe) = self.pipe.take() {
            let _ = writeln!(pipe, "{READY} {}", std::process::id());
        }
    }

    /// The service could not start: the foreground process prints `error` and exits non-zero.
    /// Returns whether there was one to tell.
    pub fn failed(&mut self, error: &anyhow::Error) -> bool {
        match self.pipe.take() {
            Some(mut pipe) => {
                let _ = write!(pipe, "{error:#}");
                true
            }
            None => false,
        }
    }

    /// True when the service runs in the foreground: it has a terminal of its own.
    pub fn is_foreground(&self) -> bool {
        !self.detached
    }

    fn detached(pipe: PipeWriter) -> Readiness {
        Readiness {
            pipe: Some(pipe),
            detached: true,
        }
    }
}

/// Forks into the background (call before any thread exists), for the configuration `file` with
/// these logs and pid file. Returns `Some` in the daemon, whose stdout and stderr now append to
/// the access and error logs; in the foreground process, waits for the daemon's report and
/// returns `None` once it is up, or its reason for failing.
pub fn detach(file: &Path, log: &LogSettings, pid: Option<&Path>) -> Result<Option<Readiness>> {
    let (Some(access_log), Some(error_log)) = (&log.access_log, &log.error_log) else {
        bail!(
            "{}: -d needs [delayer] access_log and error_log: a daemon has no terminal to log to",
            file.display()
        );
    };
    // A running instance is told at once, before anything is forked or opened: a refused second
    // start must not touch the first one's files.
    if let Some(pid) = pid {
        pidfile::check_free(pid)?;
    }
    let (report, pipe) = std::io::pipe().context("cannot create a pipe to the daemon")?;
    let daemon = Daemonize::new()
        .working_directory("/")
        .stdout(open_log(access_log)?)
        .stderr(open_log(error_log)?);
    match daemon.execute() {
        Outcome::Parent(Ok(_)) => {
            drop(pipe);
            wait_for_report(report, error_log).map(|()| None)
        }
        Outcome::Parent(Err(error)) => bail!("cannot start the daemon: {error}"),
        Outcome::Child(Ok(_)) => Ok(Some(Readiness::detached(pipe))),
        Outcome::Child(Err(error)) => {
            let error = anyhow::anyhow!("cannot start the daemon: {error}");
            Readiness::detached(pipe).failed(&error);
            Err(error)
        }
    }
}

/// Reads the daemon's report until it closes its end of the pipe.
fn wait_for_report(mut report: PipeReader, error_log: &Path) -> Result<()> {
    let mut text = String::new();
    report
        .read_to_string(&mut text)
        .context("cannot read the daemon's report")?;
    match text.strip_prefix(READY) {
        Some(pid) => {
            println!("delayer is running in the background, PID: {}", pid.trim());
            Ok(())
        }
        None if text.is_empty() => bail!(
            "the daemon exited while starting; see {}",
            error_log.display()
        ),
        None => bail!(text),
    }
}

/// Opened before the fork so a bad path is reported on the terminal.
fn open_log(path: &Path) -> Result<File> {
    if let Some(directory) = path.parent() {
        logging::create_directory(directory)?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open log file {}", path.display()))
}
