//! The `delayer` binary: arguments → config → a job command, or serving: (detach) → pid file →
//! logging → runtime → run → exit code.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Parser;
use delayer::cli::{Args, Command};
use delayer::config::{self, Config};
use delayer::daemon::{self, Readiness};
use delayer::pidfile::PidFile;
use delayer::{Service, commands, logging, signals};

const BANNER: &str = r"    ____       __
   / __ \___  / /___ ___  _____  _____
  / / / / _ \/ / __ `/ / / / _ \/ ___/
 / /_/ /  __/ / /_/ / /_/ /  __/ /
/_____/\___/_/\__,_/\__, /\___/_/
                   /____/";

fn main() -> ExitCode {
    let args = Args::parse();
    match dispatch(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("ERROR: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(args: Args) -> Result<()> {
    let config = Config::load(&config::locate(args.configuration.as_deref())?)?;
    match args.command {
        None | Some(Command::Serve) => serve(&config, args.daemon, args.check_config),
        Some(_) if args.daemon || args.check_config => {
            bail!("-d and --check-config go with serving, not with a job command")
        }
        Some(command) => runtime()?.block_on(commands::run(&config, command)),
    }
}

fn serve(config: &Config, daemon: bool, check_config: bool) -> Result<()> {
    if check_config {
        return check(config);
    }
    let mut readiness = if daemon {
        // Forks here, before any thread exists; the foreground process returns once it knows.
        match daemon::detach(config)? {
            Some(readiness) => readiness,
            None => return Ok(()),
        }
    } else {
        Readiness::foreground()
    };
    let result = run(config, &mut readiness);
    if let Err(error) = &result {
        readiness.failed(error);
    }
    result
}

fn run(config: &Config, readiness: &mut Readiness) -> Result<()> {
    let _pid_file = config.pid.as_deref().map(PidFile::acquire).transpose()?;
    println!(
        "{BANNER}\nService:\t\tdelayer\nVersion:\t\t{}",
        env!("CARGO_PKG_VERSION")
    );
    // Dropped last: the stop line must reach the log.
    let _logs = logging::init(config)?;
    let result = runtime()?.block_on(async {
        let shutdown = signals::stop_token()?;
        let service = Service::start(config).await?;
        readiness.ready();
        service.run(shutdown).await;
        Ok(())
    });
    if let Err(error) = &result {
        tracing::error!("{error:#}");
    }
    result
}

/// `--check-config`: like `nginx -t`.
fn check(config: &Config) -> Result<()> {
    for warning in &config.warnings {
        println!("warning: {warning}");
    }
    println!(
        "; {} as delayer reads it\n{config}\n",
        config.file.display()
    );
    let version = runtime()?.block_on(delayer::redis_version(config))?;
    println!(
        "Redis at {} answers (redis_version {version})",
        config.redis.address()
    );
    println!("configuration {} is OK", config.file.display());
    Ok(())
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}
