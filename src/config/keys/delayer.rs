//! The `[delayer]` keys: the daemon's own (pid file, timer, logs, limits).

use std::time::Duration;

use super::super::values::{assign, boolean, choice, duration, name_of, number, path};
use super::{Key, shown_duration, shown_path};
use crate::service::logging::{LogFormat, LogLevel, LogRotation};

/// The largest `max_body_bytes`: Redis's own limit for one value (its proto-max-bulk-len).
const MAX_BODY_BYTES: usize = 512 << 20;

/// The largest batch: one script call blocks Redis while it runs (about 2 µs a job), so it must
/// stay short.
const MAX_BATCH_SIZE: usize = 10_000;

const ROTATIONS: &[(&str, LogRotation)] =
    &[("never", LogRotation::Never), ("daily", LogRotation::Daily)];

const LEVELS: &[(&str, LogLevel)] = &[
    ("info", LogLevel::Info),
    ("warn", LogLevel::Warn),
    ("error", LogLevel::Error),
];

const FORMATS: &[(&str, LogFormat)] = &[("text", LogFormat::Text), ("json", LogFormat::Json)];

/// The section's keys, in the order the printout and `dist/delayer.conf` list them.
pub(super) const KEYS: &[Key] = &[
    Key {
        section: "delayer",
        name: "pid",
        default: "",
        doc: "pid file, locked while the daemon runs; empty: several instances may run",
        secret: false,
        set: |config, raw| assign(&mut config.pid, path(raw).map(Some)),
        show: |config| Some(shown_path(&config.pid)),
    },
    Key {
        section: "delayer",
        name: "timer_interval",
        default: "1000",
        doc: "longest wait between two looks at the job pool, in ms",
        secret: false,
        set: |config, raw| {
            let millis = number(raw, 1..=86_400_000).map(Duration::from_millis);
            assign(&mut config.mover.timer_interval, millis)
        },
        show: |config| Some(config.mover.timer_interval.as_millis().to_string()),
    },
    Key {
        section: "delayer",
        name: "access_log",
        default: "",
        doc: "info log, appended to; empty: stdout",
        secret: false,
        set: |config, raw| assign(&mut config.log.access_log, path(raw).map(Some)),
        show: |config| Some(shown_path(&config.log.access_log)),
    },
    Key {
        section: "delayer",
        name: "error_log",
        default: "",
        doc: "warning and error log, appended to; empty: stdout",
        secret: false,
        set: |config, raw| assign(&mut config.log.error_log, path(raw).map(Some)),
        show: |config| Some(shown_path(&config.log.error_log)),
    },
    Key {
        section: "delayer",
        name: "log_rotate",
        default: "never",
        doc: "never or daily (files then end in .YYYY-MM-DD)",
        secret: false,
        set: |config, raw| assign(&mut config.log.rotate, choice(raw, ROTATIONS)),
        show: |config| Some(name_of(config.log.rotate, ROTATIONS)),
    },
    Key {
        section: "delayer",
        name: "log_max_files",
        default: "0",
        doc: "with daily rotation, how many files of each log to keep (0: all)",
        secret: false,
        set: |config, raw| {
            let count = number(raw, 0..=100_000).map(|count| (count > 0).then_some(count));
            assign(&mut config.log.max_files, count)
        },
        show: |config| Some(config.log.max_files.unwrap_or(0).to_string()),
    },
    Key {
        section: "delayer",
        name: "log_level",
        default: "info",
        doc: "the least severe lines logged: info, warn or error",
        secret: false,
        set: |config, raw| assign(&mut config.log.level, choice(raw, LEVELS)),
        show: |config| Some(name_of(config.log.level, LEVELS)),
    },
    Key {
        section: "delayer",
        name: "log_format",
        default: "text",
        doc: "text (the original's lines) or json (one object a line)",
        secret: false,
        set: |config, raw| assign(&mut config.log.format, choice(raw, FORMATS)),
        show: |config| Some(name_of(config.log.format, FORMATS)),
    },
    // Chosen with the benchmark (`cargo bench --bench bench -- batch`).
    Key {
        section: "delayer",
        name: "batch_size",
        default: "1000",
        doc: "most jobs moved by one script call",
        secret: false,
        set: |config, raw| {
            assign(
                &mut config.mover.batch_size,
                number(raw, 1..=MAX_BATCH_SIZE),
            )
        },
        show: |config| Some(config.mover.batch_size.to_string()),
    },
    Key {
        section: "delayer",
        name: "max_attempts",
        default: "25",
        doc: "reservations of a job before a lapsed one goes to its topic's dead list",
        secret: false,
        set: |config, raw| assign(&mut config.mover.max_attempts, number(raw, 1..=1_000_000)),
        show: |config| Some(config.mover.max_attempts.to_string()),
    },
    Key {
        section: "delayer",
        name: "max_body_bytes",
        default: "1048576",
        doc: "largest job body that delayer push and the HTTP API take",
        secret: false,
        set: |config, raw| assign(&mut config.max_body_bytes, number(raw, 1..=MAX_BODY_BYTES)),
        show: |config| Some(config.max_body_bytes.to_string()),
    },
    Key {
        section: "delayer",
        name: "compact_pushes",
        default: "true",
        doc: "true: jobs delayer push and the HTTP API add 124 s or more ahead wait in a third of \
              the memory (docs/compact.md); false: all in the legacy form",
        secret: false,
        set: |config, raw| assign(&mut config.compact_pushes, boolean(raw)),
        show: |config| Some(config.compact_pushes.to_string()),
    },
    Key {
        section: "delayer",
        name: "max_ttr",
        default: "86400",
        doc: "longest time to run, in seconds (or 30s, 5m, 1h), a reservation over HTTP may ask for",
        secret: false,
        set: |config, raw| {
            let most = Duration::from_secs(u64::from(i32::MAX as u32));
            assign(
                &mut config.max_ttr,
                duration(raw, Duration::from_secs(1)..=most),
            )
        },
        show: |config| Some(shown_duration(config.max_ttr)),
    },
];
