//! Log set-up: info lines to `access_log`, warnings and errors to `error_log`, in the original's shape.

use std::fmt;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result, bail};
use tracing::{Event, Level, Subscriber};
use tracing_appender::non_blocking::{NonBlocking, NonBlockingBuilder, WorkerGuard};
use tracing_appender::rolling::{RollingFileAppender, Rotation};
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{Layer, Registry};

use crate::config::{Config, LogRotation};
use crate::escape::OneLine;

/// Keeps the log writers running; drop it last, after the final line, so nothing is lost.
#[must_use = "logs are flushed when this is dropped"]
pub struct LogGuards(#[allow(dead_code)] Vec<WorkerGuard>);

/// Opens the log destinations (creating files and directories) and installs the global subscriber.
pub fn init(config: &Config) -> Result<LogGuards> {
    let mut guards = Vec::new();
    let access = open(config.access_log.as_deref(), config, &mut guards)?;
    let error = if config.error_log == config.access_log {
        access.clone()
    } else {
        open(config.error_log.as_deref(), config, &mut guards)?
    };
    let subscriber = Registry::default()
        .with(
            tracing_subscriber::fmt::layer()
                .event_format(LegacyFormat)
                .with_writer(access)
                .with_filter(filter_fn(|metadata| *metadata.level() == Level::INFO)),
        )
        .with(
            tracing_subscriber::fmt::layer()
                .event_format(LegacyFormat)
                .with_writer(error)
                .with_filter(filter_fn(|metadata| *metadata.level() <= Level::WARN)),
        );
    tracing::subscriber::set_global_default(subscriber).context("cannot install the logger")?;
    Ok(LogGuards(guards))
}

/// A writer on its own thread, so the move loop never waits for the disk; it waits rather than
/// drop a line when its buffer (128k lines) is full.
fn open(
    path: Option<&Path>,
    config: &Config,
    guards: &mut Vec<WorkerGuard>,
) -> Result<NonBlocking> {
    let builder = NonBlockingBuilder::default().lossy(false);
    let (writer, guard) = match path {
        None => builder.finish(std::io::stdout()),
        Some(path) => builder.finish(appender(path, config)?),
    };
    guards.push(guard);
    Ok(writer)
}

/// A log file, appended to, rolling over daily when configured.
fn appender(path: &Path, config: &Config) -> Result<RollingFileAppender> {
    let (Some(directory), Some(name)) = (path.parent(), path.file_name()) else {
        bail!("log path {} does not name a file", path.display());
    };
    create_directory(directory)?;
    let mut builder = RollingFileAppender::builder()
        .rotation(match config.log_rotate {
            LogRotation::Never => Rotation::NEVER,
            LogRotation::Daily => Rotation::DAILY,
        })
        .filename_prefix(name.to_string_lossy());
    if let Some(count) = config.log_max_files {
        builder = builder.max_log_files(count);
    }
    builder
        .build(directory)
        .with_context(|| format!("cannot open log file {}", path.display()))
}

/// Creates a log file's directory (and its parents) when missing.
pub fn create_directory(directory: &Path) -> Result<()> {
    fs::create_dir_all(directory)
        .with_context(|| format!("cannot create log directory {}", directory.display()))
}

/// `[info] 2018/10/21 11:24:24 message key=value`, as the Go original printed (local time).
struct LegacyFormat;

impl<S, N> FormatEvent<S, N> for LegacyFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        context: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let level = match *event.metadata().level() {
            Level::ERROR => "error",
            Level::WARN => "warning",
            Level::INFO => "info",
            Level::DEBUG => "debug",
            Level::TRACE => "trace",
        };
        write!(
            writer,
            "[{level}] {} ",
            chrono::Local::now().format("%Y/%m/%d %H:%M:%S")
        )?;
        // Whatever a message holds (it may quote data from Redis), it stays one line.
        let mut line = OneLine(&mut writer);
        context
            .field_format()
            .format_fields(Writer::new(&mut line), event)?;
        writeln!(writer)
    }
}
