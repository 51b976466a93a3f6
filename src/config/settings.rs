//! [`Config`]: every part's settings as `delayer.conf` gave them, validated (read and rendered
//! by `file`).

use std::path::PathBuf;
use std::time::Duration;

use crate::http::HttpSettings;
use crate::kafka::KafkaSettings;
use crate::mover::MoverSettings;
use crate::qstash::QstashSettings;
use crate::redis::RedisSettings;
use crate::service::logging::LogSettings;
use crate::webhook::WebhookSettings;

/// Everything the daemon needs to know, validated; relative paths are already made absolute.
/// [`Config::parse`] of an empty file has the defaults.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file this was read from (for messages).
    pub file: PathBuf,
    /// `[delayer] pid`: the pid file, or `None` to allow several instances.
    pub pid: Option<PathBuf>,
    /// `[delayer]`'s log keys.
    pub log: LogSettings,
    /// `[delayer]`'s keys of the timer loop.
    pub mover: MoverSettings,
    /// `[delayer] max_body_bytes`: the largest job body the shell commands and the HTTP API push.
    pub max_body_bytes: usize,
    /// `[delayer] max_ttr`: the longest time to run the HTTP API gives a reservation.
    pub max_ttr: Duration,
    /// `[delayer] compact_pushes`: whether the shell commands' and the HTTP API's pushes may
    /// write jobs in the compact layout.
    pub compact_pushes: bool,
    /// The `[redis]` section.
    pub redis: RedisSettings,
    /// The `[http]` section: no HTTP server without it.
    pub http: Option<HttpSettings>,
    /// The `[schedule.NAME]` sections, in the file's order.
    pub schedules: Vec<delayer_wire::schedule::Definition>,
    /// The `[kafka]` section: no Kafka link without it.
    pub kafka: Option<KafkaSettings>,
    /// The `[webhook.NAME]` sections, in the file's order.
    pub webhooks: Vec<WebhookSettings>,
    /// The `[qstash]` section: QStash's API and the signing keys.
    pub qstash: QstashSettings,
    /// Unknown sections and keys (a typo, most likely): ignored with a warning, as the original
    /// did, but refused by `--check-config`.
    pub unknown: Vec<String>,
    /// Other things worth a warning (a key set twice), logged once logging is up.
    pub warnings: Vec<String>,
}

impl Config {
    /// The blank that the keys fill in, each with its value or its default.
    pub(super) fn blank(file: PathBuf) -> Config {
        Config {
            file,
            pid: None,
            log: LogSettings::default(),
            mover: MoverSettings::default(),
            max_body_bytes: 0,
            max_ttr: Duration::ZERO,
            compact_pushes: true,
            redis: RedisSettings::default(),
            http: None,
            schedules: Vec::new(),
            kafka: None,
            webhooks: Vec::new(),
            qstash: QstashSettings::default(),
            unknown: Vec::new(),
            warnings: Vec::new(),
        }
    }
}
