//! Log set-up: info lines to `access_log`, warnings and errors to `error_log`, in the original's shape.

use std::fmt;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_appender::non_blocking::{NonBlocking, NonBlockingBuilder, WorkerGuard};
use tracing_appender::rolling::{RollingFileAppender, Rotation};
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{Layer, Registry};

use crate::text::escape::OneLine;

/// The log target of the lines whose text is part of the compatibility promise (the original's
/// "Job is ready, Topic: ..., IDs: [...]"): they say their fields in their own words, so text log
/// lines leave the fields out of them. It is `mover::log`'s module path (a test there checks).
pub const ORIGINAL_LINES: &str = "delayer::mover::log";

/// `[delayer]`'s log keys. `Default` is the blank that the key table (`config/keys/`) fills in.
#[derive(Debug, Clone, Default)]
pub struct LogSettings {
    /// `access_log`: where info lines go (`None`: stdout).
    pub access_log: Option<PathBuf>,
    /// `error_log`: where warnings and errors go (`None`: stdout).
    pub error_log: Option<PathBuf>,
    /// `log_rotate`: whether log files roll over daily.
    pub rotate: LogRotation,
    /// `log_max_files`: with daily rotation, how many files of each log to keep (`None`: all).
    pub max_files: Option<usize>,
    /// `log_level`: the least severe lines logged.
    pub level: LogLevel,
    /// `log_format`: the original's lines, or one JSON object per line.
    pub format: LogFormat,
}

/// The least severe log lines written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum LogLevel {
    /// Everything, the "Job is ready" lines included.
    #[default]
    Info,
    /// Warnings and errors only.
    Warn,
    /// Errors only.
    Error,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// `[info] 2018/10/21 11:24:24 message`, as the original.
    #[default]
    Text,
    /// One JSON object per line: level, time, message, and the event's fields.
    Json,
}

/// When log files roll over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogRotation {
    /// One file, appended to for ever (rotate it from outside with logrotate's `copytruncate`).
    #[default]
    Never,
    /// A new file each day (UTC), named `<file>.YYYY-MM-DD`.
    Daily,
}

/// Keeps the log writers running; drop it last, after the final line, so nothing is lost.
#[must_use = "logs are flushed when this is dropped"]
pub struct LogGuards(#[allow(dead_code)] Vec<WorkerGuard>);

/// Opens the log destinations (creating files and directories) and installs the global subscriber.
pub fn init(config: &LogSettings) -> Result<LogGuards> {
    let mut guards = Vec::new();
    let access = open(config.access_log.as_deref(), config, &mut guards)?;
    let error = if config.error_log == config.access_log {
        access.clone()
    } else {
        open(config.error_log.as_deref(), config, &mut guards)?
    };
    let most_verbose = match config.level {
        LogLevel::Info => Level::INFO,
        LogLevel::Warn => Level::WARN,
        LogLevel::Error => Level::ERROR,
    };
    let lines = |path: &Option<PathBuf>| Lines {
        json: config.format == LogFormat::Json,
        journald: path.is_none() && stdout_is_the_journal(),
    };
    let subscriber = Registry::default()
        .with(
            tracing_subscriber::fmt::layer()
                .event_format(lines(&config.access_log))
                .with_writer(access)
                .with_filter(filter_fn(move |metadata| {
                    *metadata.level() == Level::INFO && Level::INFO <= most_verbose
                })),
        )
        .with(
            tracing_subscriber::fmt::layer()
                .event_format(lines(&config.error_log))
                .with_writer(error)
                .with_filter(filter_fn(move |metadata| {
                    *metadata.level() <= Level::WARN && *metadata.level() <= most_verbose
                })),
        );
    tracing::subscriber::set_global_default(subscriber).context("cannot install the logger")?;
    Ok(LogGuards(guards))
}

/// True when stdout is a stream to systemd's journal: systemd says so in `JOURNAL_STREAM`
/// ("device:inode" of that stream), which must be stdout itself (not a file it was redirected to).
fn stdout_is_the_journal() -> bool {
    let Ok(stream) = std::env::var("JOURNAL_STREAM") else {
        return false;
    };
    fs::metadata("/proc/self/fd/1")
        .is_ok_and(|stdout| stream == format!("{}:{}", stdout.dev(), stdout.ino()))
}

/// A writer on its own thread, so the move loop never waits for the disk; it waits rather than
/// drop a line when its buffer (128k lines) is full.
fn open(
    path: Option<&Path>,
    config: &LogSettings,
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
fn appender(path: &Path, config: &LogSettings) -> Result<RollingFileAppender> {
    let (Some(directory), Some(name)) = (path.parent(), path.file_name()) else {
        bail!("log path {} does not name a file", path.display());
    };
    create_directory(directory)?;
    let mut builder = RollingFileAppender::builder()
        .rotation(match config.rotate {
            LogRotation::Never => Rotation::NEVER,
            LogRotation::Daily => Rotation::DAILY,
        })
        .filename_prefix(name.to_string_lossy());
    if let Some(count) = config.max_files {
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

/// The lines: `[info] 2018/10/21 11:24:24 message`, as the Go original printed them (local time),
/// or one JSON object per line; with journald's priority in front when that is where they go.
struct Lines {
    json: bool,
    journald: bool,
}

impl<S, N> FormatEvent<S, N> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _context: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let level = *event.metadata().level();
        if self.journald {
            // sd-daemon(3) priorities: journalctl -p warning then shows warnings and errors.
            let priority = match level {
                Level::ERROR => 3,
                Level::WARN => 4,
                Level::INFO => 6,
                Level::DEBUG | Level::TRACE => 7,
            };
            write!(writer, "<{priority}>")?;
        }
        let name = match level {
            Level::ERROR => "error",
            Level::WARN => "warning",
            Level::INFO => "info",
            Level::DEBUG => "debug",
            Level::TRACE => "trace",
        };
        if self.json {
            let mut fields = JsonFields(serde_json::Map::new());
            fields.0.insert("level".into(), name.into());
            let time = chrono::Local::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, false);
            fields.0.insert("time".into(), time.into());
            event.record(&mut fields);
            // serde_json escapes every control character: one event, one line.
            writeln!(writer, "{}", serde_json::Value::Object(fields.0))
        } else {
            let time = chrono::Local::now().format("%Y/%m/%d %H:%M:%S");
            write!(writer, "[{name}] {time} ")?;
            // Whatever a message holds (it may quote data from Redis), it stays one line.
            event.record(&mut Message(OneLine(&mut writer)));
            // The original's lines ("Job is ready, Topic: ..., IDs: [...]") keep their shape.
            if event.metadata().target() != ORIGINAL_LINES {
                event.record(&mut TextFields(OneLine(&mut writer)));
            }
            writeln!(writer)
        }
    }
}

/// Writes an event's message.
struct Message<W>(W);

impl<W: fmt::Write> Visit for Message<W> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        }
    }
}

/// Writes an event's fields after its message, ` name=value` each (text quoted), as text lines
/// show them.
struct TextFields<W>(W);

impl<W: fmt::Write> Visit for TextFields<W> {
    fn record_str(&mut self, field: &Field, value: &str) {
        let _ = write!(self.0, " {}={value:?}", field.name());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() != "message" {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
}

/// An event's fields as JSON. `ids` carries a JSON array as text (see `move_log`), written as the
/// array itself.
struct JsonFields(serde_json::Map<String, serde_json::Value>);

impl Visit for JsonFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        let value = match field.name() {
            "ids" => serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
            _ => serde_json::Value::String(text),
        };
        self.0.insert(field.name().into(), value);
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use tracing::{info, warn};

    use super::*;

    /// What `log` writes as text lines.
    fn text_of(log: impl FnOnce()) -> String {
        let written = Arc::new(Mutex::new(Vec::new()));
        let sink = written.clone();
        let layer = tracing_subscriber::fmt::layer()
            .event_format(Lines {
                json: false,
                journald: false,
            })
            .with_writer(move || Sink(sink.clone()));
        tracing::subscriber::with_default(Registry::default().with(layer), log);
        String::from_utf8(written.lock().unwrap().clone()).unwrap()
    }

    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn text_lines_carry_their_fields_but_the_originals_keep_their_shape() {
        let text = text_of(|| {
            warn!(
                partition = 3,
                offset = 7_i64,
                key = "order-42",
                "kafka: delay request skipped: why"
            );
            info!(target: ORIGINAL_LINES, topic = "t", count = 1, "Job is ready, Topic: t, IDs: [a]");
        });
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("[warning] ")
                && lines[0].ends_with(
                    " kafka: delay request skipped: why partition=3 offset=7 key=\"order-42\""
                ),
            "{text}"
        );
        assert!(
            lines[1].ends_with(" Job is ready, Topic: t, IDs: [a]"),
            "{text}"
        );
    }
}
