//! The `delayer` binary: arguments → config → (detach) → pid file → logging → runtime → run → exit code.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use delayer::config::{self, Config};
use delayer::daemon::{self, Readiness};
use delayer::pidfile::PidFile;
use delayer::{Service, logging, signals};

const BANNER: &str = r"    ____       __
   / __ \___  / /___ ___  _____  _____
  / / / / _ \/ / __ `/ / / / _ \/ ___/
 / /_/ /  __/ / /_/ / /_/ /  __/ /
/_____/\___/_/\__,_/\__, /\___/_/
                   /____/";

#[derive(Parser)]
#[command(
    version,
    about = "Moves delayed jobs, when they fall due, from Redis's job pool to per-topic ready lists.",
    disable_version_flag = true
)]
struct Args {
    /// Configuration file path [default: the first of ./delayer.conf, /etc/delayer/delayer.conf]
    #[arg(short = 'c', long = "configuration", value_name = "FILENAME")]
    configuration: Option<PathBuf>,
    /// Run in the background (returns once the daemon is up, or prints why it is not)
    #[arg(short = 'd', long = "daemon")]
    daemon: bool,
    /// Check the configuration and the Redis connection, print what would be used, and exit
    #[arg(long = "check-config")]
    check_config: bool,
    /// Print version number and exit
    #[arg(short = 'v', long = "version", action = clap::ArgAction::Version)]
    version: (),
}

fn main() -> ExitCode {
    let args = Args::parse();
    match serve(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("ERROR: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: &Args) -> Result<()> {
    let config = Config::load(&config::locate(args.configuration.as_deref())?)?;
    if args.check_config {
        return check(&config);
    }
    let mut readiness = if args.daemon {
        // Forks here, before any thread exists; the foreground process returns once it knows.
        match daemon::detach(&config)? {
            Some(readiness) => readiness,
            None => return Ok(()),
        }
    } else {
        Readiness::foreground()
    };
    let result = run(&config, &mut readiness);
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
