//! The `delayer` binary: arguments → config → pid file → logging → runtime → run → exit code.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use delayer::config::{self, Config};
use delayer::pidfile::PidFile;
use delayer::{logging, signals};

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
    /// Run in the background
    #[arg(short = 'd', long = "daemon")]
    daemon: bool,
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
    let _pid_file = config.pid.as_deref().map(PidFile::acquire).transpose()?;
    println!(
        "{BANNER}\nService:\t\tdelayer\nVersion:\t\t{}",
        env!("CARGO_PKG_VERSION")
    );
    // Dropped last: the stop line must reach the log.
    let _logs = logging::init(&config)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(async {
        let shutdown = signals::stop_token()?;
        delayer::run(&config, shutdown).await
    });
    if let Err(error) = &result {
        tracing::error!("{error:#}");
    }
    result
}
