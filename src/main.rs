//! The `delayer` binary: arguments → config → a job command, or serving: (detach) → pid file →
//! logging → runtime → run → exit code.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Parser;
use delayer::cli::{self, Args, Command, Serving};
use delayer::config::{self, Config, Problems};
use delayer::service::daemon::{self, Readiness};
use delayer::service::pidfile::PidFile;
use delayer::service::signals::EarlySignals;
use delayer::service::{logging, open_files};
use delayer::text::escape::one_line;
use delayer::{Service, Stop};

const BANNER: &str = r"    ____       __
   / __ \___  / /___ ___  _____  _____
  / / / / _ \/ / __ `/ / / / _ \/ ___/
 / /_/ /  __/ / /_/ / /_/ /  __/ /
/_____/\___/_/\__,_/\__, /\___/_/
                   /____/";

/// An error already reported to whoever waits for this daemon (see `serve`).
#[derive(Debug)]
struct Reported;

impl std::fmt::Display for Reported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("reported to the process that started the daemon")
    }
}

impl std::error::Error for Reported {}

fn main() -> ExitCode {
    let args = Args::parse();
    match dispatch(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if error.is::<Reported>() => ExitCode::FAILURE,
        Err(error) => {
            if let Some(problems) = error.downcast_ref::<Problems>() {
                // A configuration's problems, one a line, with the warnings that go with them.
                for problem in &problems.errors {
                    eprintln!("ERROR: {}", one_line(problem));
                }
                for warning in &problems.warnings {
                    eprintln!("warning: {}", one_line(warning));
                }
            } else {
                // Kept to one line: ids and keys in it are chosen by whoever writes to Redis.
                eprintln!("ERROR: {}", one_line(&causes(&error)));
            }
            ExitCode::FAILURE
        }
    }
}

/// `error` and its causes, as `{:#}` joins them, less each cause that the text before it already
/// ends with: a Redis error repeats its I/O error, and our errors repeat the Redis error, so a
/// refused connection would read "Connection refused" three times.
fn causes(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if text.ends_with(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}

fn dispatch(args: Args) -> Result<()> {
    let path = config::locate(args.configuration.as_deref())?;
    match args.command {
        None => serve(&path, args.serving),
        Some(Command::Serve(serving)) => serve(
            &path,
            Serving {
                daemon: args.serving.daemon || serving.daemon,
                check_config: args.serving.check_config || serving.check_config,
            },
        ),
        Some(_) if args.serving.daemon || args.serving.check_config => {
            bail!("-d and --check-config go with serving, not with a job command")
        }
        Some(command) => {
            let config = Config::load(&path)?;
            runtime()?.block_on(cli::commands::run(&config, command))
        }
    }
}

fn serve(path: &Path, serving: Serving) -> Result<()> {
    // Before anything else of a start in the foreground (a daemon catches them once detached).
    let mut early = if serving.daemon || serving.check_config {
        None
    } else {
        Some(EarlySignals::catch()?)
    };
    let mut reading = Config::read(path)?;
    if serving.check_config {
        return runtime()?.block_on(cli::check::run(reading));
    }
    if !reading.errors.is_empty() {
        // Told with the values' problems, so that a start does not fail on one after another;
        // alone, a path fails where it is used (the pid file's lock, the logs' files).
        reading.errors.extend(reading.config.path_problems());
    }
    let config = &reading.into_config()?;
    let mut readiness = if serving.daemon {
        // Forks here, before any thread exists; the foreground process returns once it knows.
        match daemon::detach(&config.file, &config.log, config.pid.as_deref())? {
            Some(readiness) => {
                early = Some(EarlySignals::catch()?);
                readiness
            }
            None => return Ok(()),
        }
    } else {
        Readiness::foreground()
    };
    let result = run(config, &mut readiness, early);
    match result {
        // The foreground process that waits for this daemon prints it; here stderr is the error
        // log, which may be another instance's.
        Err(error) if readiness.failed(&error) => Err(Reported.into()),
        result => result,
    }
}

fn run(config: &Config, readiness: &mut Readiness, early: Option<EarlySignals>) -> Result<()> {
    let _pid_file = config.pid.as_deref().map(PidFile::acquire).transpose()?;
    // Dropped last: the stop line must reach the log.
    let _logs = logging::init(&config.log)?;
    open_files::raise();
    // The mover is one loop: one thread. An HTTP server runs on threads of its own (see http).
    let result = runtime()?.block_on(async {
        let stop = Stop::on_signals(early)?;
        let service = Service::start(config).await?;
        // Once the start can no longer fail; a daemon has no terminal to show it on.
        if readiness.is_foreground() {
            println!(
                "{BANNER}\nService:\t\tdelayer\nVersion:\t\t{}",
                env!("CARGO_PKG_VERSION")
            );
        }
        readiness.ready();
        service.run(stop).await;
        Ok(())
    });
    if let Err(error) = &result {
        tracing::error!("{error:#}");
    }
    result
}

/// A runtime on the calling thread alone.
fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}
