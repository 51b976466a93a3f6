//! Every key of `delayer.conf`, once: its section, name, default, one line of doc, how its value
//! is read into the [`Config`] and how it is shown again. The unknown-key check, parsing,
//! `--check-config`'s printout and the comments of the shipped `dist/delayer.conf` all follow
//! from [`KEYS`]. A key that fills in what another made (`sentinel_master` in what `sentinels`
//! made) comes after it: the keys are read in this order, whatever the file's.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use delayer_wire::keys::{Layout, Names};

use super::Config;
use super::values::{addresses, assign, boolean, choice, duration, name_of, number, path, seconds};
use crate::http::{HostName, HttpSettings};
use crate::kafka::{DEFAULT_GROUP, KafkaSettings, Mechanism, MessageForm, Protocol};
use crate::metrics::{DEFAULT_LISTED_SCHEDULES, DEFAULT_LISTED_TOPICS};
use crate::redis::{SentinelSettings, TlsSettings, address_list};
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
const MESSAGE_FORMS: &[(&str, MessageForm)] =
    &[("body", MessageForm::Body), ("id", MessageForm::Id)];
const NAMES: &[(&str, Names)] = &[("legacy", Names::Legacy), ("jop", Names::Jop)];

/// One key of `delayer.conf`.
pub(super) struct Key {
    pub section: &'static str,
    pub name: &'static str,
    /// The value when the file gives none, as the file would say it; "" for none.
    pub default: &'static str,
    /// One line, for `--check-config`'s printout and the shipped `delayer.conf`.
    pub doc: &'static str,
    /// A password: masked wherever it would be printed or named in a message.
    pub secret: bool,
    /// Puts a value into `config`, or says what is wrong with it.
    pub set: fn(&mut Config, &str) -> Result<(), String>,
    /// The value `config` holds, as the file would say it; `None` leaves the key out of the
    /// printout (a feature that is off).
    pub show: fn(&Config) -> Option<String>,
}

/// Every key, section by section, in the order the printout and `dist/delayer.conf` list them.
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
    Key {
        section: "redis",
        name: "host",
        default: "127.0.0.1",
        doc: "address, or the path of a unix socket",
        secret: false,
        set: |config, raw| assign(&mut config.redis.host, Ok(raw.to_string())),
        show: |config| found_by_address(config).then(|| config.redis.host.clone()),
    },
    Key {
        section: "redis",
        name: "port",
        default: "6379",
        doc: "port",
        secret: false,
        set: |config, raw| assign(&mut config.redis.port, number(raw, 1..=u16::MAX)),
        show: |config| found_by_address(config).then(|| config.redis.port.to_string()),
    },
    Key {
        section: "redis",
        name: "database",
        default: "0",
        doc: "database number",
        secret: false,
        set: |config, raw| {
            assign(
                &mut config.redis.database,
                number(raw, 0..=i64::from(i32::MAX)),
            )
        },
        show: |config| Some(config.redis.database.to_string()),
    },
    Key {
        section: "redis",
        name: "username",
        default: "",
        doc: "ACL user (Redis 6+), with a password; empty: default",
        secret: false,
        set: |config, raw| assign(&mut config.redis.username, Ok(Some(raw.to_string()))),
        show: |config| config.redis.username.clone(),
    },
    Key {
        section: "redis",
        name: "password",
        default: "",
        doc: "password; leave empty for no AUTH",
        secret: true,
        set: |config, raw| assign(&mut config.redis.password, Ok(Some(raw.to_string()))),
        show: |config| Some(config.redis.password.clone().unwrap_or_default()),
    },
    Key {
        section: "redis",
        name: "tls",
        default: "false",
        doc: "true: TLS to Redis",
        secret: false,
        set: |config, raw| {
            let on = boolean(raw).map(|on| on.then(TlsSettings::default));
            assign(&mut config.redis.tls, on)
        },
        show: |config| config.redis.tls.as_ref().map(|_| "true".into()),
    },
    Key {
        section: "redis",
        name: "tls_ca_file",
        default: "",
        doc: "the CA that signed Redis's certificate (PEM); empty: the system's CAs",
        secret: false,
        set: |config, raw| with_tls(config, |tls| assign(&mut tls.ca_file, path(raw).map(Some))),
        show: |config| tls_of(config).map(|tls| shown_path(&tls.ca_file)),
    },
    Key {
        section: "redis",
        name: "tls_cert_file",
        default: "",
        doc: "with tls_key_file: a client certificate (PEM), for mutual TLS",
        secret: false,
        set: |config, raw| {
            with_tls(config, |tls| {
                assign(&mut tls.cert_file, path(raw).map(Some))
            })
        },
        show: |config| tls_of(config)?.cert_file.as_deref().map(shown),
    },
    Key {
        section: "redis",
        name: "tls_key_file",
        default: "",
        doc: "the key of tls_cert_file (PEM)",
        secret: false,
        set: |config, raw| with_tls(config, |tls| assign(&mut tls.key_file, path(raw).map(Some))),
        show: |config| tls_of(config)?.key_file.as_deref().map(shown),
    },
    Key {
        section: "redis",
        name: "tls_insecure",
        default: "false",
        doc: "true: Redis's certificate is not checked (only to try TLS out)",
        secret: false,
        set: |config, raw| {
            let insecure = boolean(raw);
            with_tls(config, |tls| assign(&mut tls.insecure, insecure))
        },
        show: |config| tls_of(config)?.insecure.then(|| "true".into()),
    },
    Key {
        section: "redis",
        name: "sentinels",
        default: "",
        doc: "host:port,... of Redis Sentinels, instead of host and port",
        secret: false,
        set: |config, raw| {
            let addresses = addresses(raw, 26379);
            let sentinel = config.redis.sentinel.get_or_insert_default();
            assign(&mut sentinel.addresses, addresses)
        },
        show: |config| Some(address_list(&sentinel_of(config)?.addresses)),
    },
    Key {
        section: "redis",
        name: "sentinel_master",
        default: "",
        doc: "the name the sentinels know the master by",
        secret: false,
        set: |config, raw| with_sentinel(config, |sentinel| sentinel.master = raw.to_string()),
        show: |config| Some(sentinel_of(config)?.master.clone()),
    },
    Key {
        section: "redis",
        name: "sentinel_username",
        default: "",
        doc: "the sentinels' own ACL user (Redis 6.2+)",
        secret: false,
        set: |config, raw| {
            with_sentinel(config, |sentinel| sentinel.username = Some(raw.to_string()))
        },
        show: |config| sentinel_of(config)?.username.clone(),
    },
    Key {
        section: "redis",
        name: "sentinel_password",
        default: "",
        doc: "the sentinels' own password, if they want one",
        secret: true,
        set: |config, raw| {
            with_sentinel(config, |sentinel| sentinel.password = Some(raw.to_string()))
        },
        show: |config| sentinel_of(config)?.password.clone(),
    },
    Key {
        section: "redis",
        name: "key_layout",
        default: "legacy",
        doc: "legacy, or jop for the earliest Delayer generation's key names",
        secret: false,
        set: |config, raw| assign(&mut config.redis.layout.names, choice(raw, NAMES)),
        show: |config| (config.redis.layout == Layout::JOP).then(|| "jop".into()),
    },
    Key {
        section: "redis",
        name: "cluster",
        default: "",
        doc: "host:port,... of Redis Cluster nodes: the cluster layout",
        secret: false,
        set: |config, raw| {
            config.redis.cluster = Some(addresses(raw, 6379)?);
            assign(&mut config.redis.layout, Ok(Layout::CLUSTER))
        },
        show: |config| config.redis.cluster.as_deref().map(address_list),
    },
    Key {
        section: "redis",
        name: "max_idle",
        default: "2",
        doc: "most idle connections kept",
        secret: false,
        set: |config, raw| assign(&mut config.redis.max_idle, number(raw, 0..=100_000)),
        show: |config| Some(config.redis.max_idle.to_string()),
    },
    Key {
        section: "redis",
        name: "max_active",
        default: "20",
        doc: "most open connections (pool size)",
        secret: false,
        set: |config, raw| assign(&mut config.redis.max_active, number(raw, 1..=100_000)),
        show: |config| Some(config.redis.max_active.to_string()),
    },
    Key {
        section: "redis",
        name: "idle_timeout",
        default: "3600",
        doc: "s before an idle connection is closed (0: never)",
        secret: false,
        set: |config, raw| assign(&mut config.redis.idle_timeout, seconds(raw)),
        show: |config| Some(shown_seconds(config.redis.idle_timeout)),
    },
    Key {
        section: "redis",
        name: "conn_max_lifetime",
        default: "3600",
        doc: "s before any connection is recycled (0: never)",
        secret: false,
        set: |config, raw| assign(&mut config.redis.conn_max_lifetime, seconds(raw)),
        show: |config| Some(shown_seconds(config.redis.conn_max_lifetime)),
    },
    Key {
        section: "http",
        name: "listen",
        default: "",
        doc: "address and port of the job API, /metrics, /healthz and the console",
        secret: false,
        set: |config, raw| {
            let listen: SocketAddr = raw.parse().map_err(|_| {
                "expected an address and port, like 127.0.0.1:9277 (the [http] section turns \
                 HTTP on: remove it to serve nothing)"
            })?;
            assign(
                &mut config.http,
                Ok(Some(HttpSettings {
                    listen,
                    token: None,
                    max_listed_topics: DEFAULT_LISTED_TOPICS,
                    max_listed_schedules: DEFAULT_LISTED_SCHEDULES,
                    hosts: Vec::new(),
                })),
            )
        },
        show: |config| Some(config.http.as_ref()?.listen.to_string()),
    },
    Key {
        section: "http",
        name: "token",
        default: "",
        doc: "the job API wants Authorization: Bearer <token>, the console a login; leave out for open access",
        secret: true,
        set: |config, raw| match &mut config.http {
            Some(http) => assign(&mut http.token, Ok(Some(raw.to_string()))),
            // The rules say that listen is missing.
            None => Ok(()),
        },
        show: |config| config.http.as_ref()?.token.clone(),
    },
    Key {
        section: "http",
        name: "max_listed_topics",
        default: "500",
        doc: "most topics /metrics and the console name one by one; the others are summed",
        secret: false,
        set: |config, raw| match &mut config.http {
            Some(http) => assign(&mut http.max_listed_topics, number(raw, 0..=100_000)),
            None => Ok(()),
        },
        show: |config| Some(config.http.as_ref()?.max_listed_topics.to_string()),
    },
    Key {
        section: "http",
        name: "max_listed_schedules",
        default: "500",
        doc: "most schedules /metrics names one by one (the first by name); the others are counted",
        secret: false,
        set: |config, raw| match &mut config.http {
            Some(http) => assign(&mut http.max_listed_schedules, number(raw, 0..=100_000)),
            None => Ok(()),
        },
        show: |config| Some(config.http.as_ref()?.max_listed_schedules.to_string()),
    },
    Key {
        section: "http",
        name: "hosts",
        default: "",
        doc: "names (or name:port) that requests may give as their Host, besides IP addresses and localhost",
        secret: false,
        set: |config, raw| match &mut config.http {
            Some(http) => {
                let hosts = raw.split(',').map(|entry| HostName::parse(entry.trim()));
                assign(&mut http.hosts, hosts.collect())
            }
            None => Ok(()),
        },
        show: |config| {
            let hosts = &config.http.as_ref()?.hosts;
            let hosts: Vec<String> = hosts.iter().map(HostName::to_string).collect();
            (!hosts.is_empty()).then(|| hosts.join(", "))
        },
    },
    Key {
        section: "kafka",
        name: "brokers",
        default: "",
        doc: "Kafka's brokers, host:port, comma-separated; the [kafka] section turns the Kafka link on",
        secret: false,
        set: |config, raw| {
            addresses(raw, 9092)?;
            assign(&mut config.kafka, Ok(Some(KafkaSettings::new(raw))))
        },
        show: |config| Some(config.kafka.as_ref()?.brokers.clone()),
    },
    Key {
        section: "kafka",
        name: "topics",
        default: "",
        doc: "the delayer topics delivered to Kafka: names, comma-separated, * matching any run of characters (* alone: every topic); empty: none",
        secret: false,
        set: |config, raw| {
            with_kafka(config, |kafka| {
                let topics: Vec<String> = raw
                    .split(',')
                    .map(|topic| topic.trim().to_string())
                    .collect();
                if topics.iter().any(String::is_empty) {
                    return Err("expected topic names or patterns, comma-separated".into());
                }
                kafka.topics = topics;
                Ok(())
            })
        },
        show: |config| Some(config.kafka.as_ref()?.topics.join(", ")),
    },
    Key {
        section: "kafka",
        name: "message",
        default: "body",
        doc: "body: key = job id, value = body, headers topic, due and attempt; id: value = job id (get reads the data)",
        secret: false,
        set: |config, raw| {
            let form = choice(raw, MESSAGE_FORMS);
            with_kafka(config, |kafka| assign(&mut kafka.message, form))
        },
        show: |config| Some(name_of(config.kafka.as_ref()?.message, MESSAGE_FORMS)),
    },
    Key {
        section: "kafka",
        name: "topic_prefix",
        default: "",
        doc: "put before a delayer topic's name to name its Kafka topic; empty: the same name",
        secret: false,
        set: |config, raw| {
            with_kafka(config, |kafka| {
                assign(&mut kafka.topic_prefix, Ok(raw.into()))
            })
        },
        show: |config| Some(config.kafka.as_ref()?.topic_prefix.clone()),
    },
    Key {
        section: "kafka",
        name: "keep_delivered",
        default: "3600",
        doc: "with message = id, how long a delivered job's data stays readable by get, in seconds (or 30m, 1d)",
        secret: false,
        set: |config, raw| {
            let most = Duration::from_secs(u64::from(u32::MAX));
            let keep = duration(raw, Duration::from_secs(1)..=most);
            with_kafka(config, |kafka| assign(&mut kafka.keep_delivered, keep))
        },
        show: |config| Some(shown_duration(config.kafka.as_ref()?.keep_delivered)),
    },
    Key {
        section: "kafka",
        name: "ttr",
        default: "30",
        doc: "how long a job on its way to Kafka is reserved, in seconds (or 30s, 5m); renewed while the broker is slow",
        secret: false,
        set: |config, raw| {
            let ttr = duration(raw, Duration::from_secs(2)..=Duration::from_secs(86_400));
            with_kafka(config, |kafka| assign(&mut kafka.ttr, ttr))
        },
        show: |config| Some(shown_duration(config.kafka.as_ref()?.ttr)),
    },
    Key {
        section: "kafka",
        name: "requests_topic",
        default: "",
        doc: "a Kafka topic of delay requests to push as jobs (headers delayer-topic, delayer-delay-ms or delayer-due-ms); empty: none",
        secret: false,
        set: |config, raw| {
            with_kafka(config, |kafka| {
                assign(&mut kafka.requests_topic, Ok(Some(raw.into())))
            })
        },
        show: |config| {
            Some(
                config
                    .kafka
                    .as_ref()?
                    .requests_topic
                    .clone()
                    .unwrap_or_default(),
            )
        },
    },
    Key {
        section: "kafka",
        name: "group",
        default: DEFAULT_GROUP,
        doc: "the consumer group that reads requests_topic",
        secret: false,
        set: |config, raw| with_kafka(config, |kafka| assign(&mut kafka.group, Ok(raw.into()))),
        show: |config| Some(config.kafka.as_ref()?.group.clone()),
    },
    Key {
        section: "kafka",
        name: "instance",
        default: "",
        doc: "this daemon's name in the group (static membership: restarted, it takes its partitions back at once); empty: the host's name and this file's path",
        secret: false,
        set: |config, raw| {
            with_kafka(config, |kafka| {
                assign(&mut kafka.instance, Ok(Some(raw.into())))
            })
        },
        show: |config| Some(config.kafka.as_ref()?.instance.clone().unwrap_or_default()),
    },
    Key {
        section: "kafka",
        name: "security_protocol",
        default: "plaintext",
        doc: "plaintext, ssl, sasl_plaintext or sasl_ssl",
        secret: false,
        set: |config, raw| {
            let protocol = choice(raw, Protocol::NAMES);
            with_kafka(config, |kafka| {
                assign(&mut kafka.security.protocol, protocol)
            })
        },
        show: |config| {
            Some(name_of(
                config.kafka.as_ref()?.security.protocol,
                Protocol::NAMES,
            ))
        },
    },
    Key {
        section: "kafka",
        name: "ssl_ca_file",
        default: "",
        doc: "the CA certificates (PEM) that sign the brokers'; empty: the system's",
        secret: false,
        set: |config, raw| {
            let file = path(raw).map(Some);
            with_kafka(config, |kafka| assign(&mut kafka.security.ca_file, file))
        },
        show: |config| Some(shown_path(&config.kafka.as_ref()?.security.ca_file)),
    },
    Key {
        section: "kafka",
        name: "sasl_mechanism",
        default: "PLAIN",
        doc: "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
        secret: false,
        set: |config, raw| {
            let mechanism = choice(raw, Mechanism::NAMES);
            with_kafka(config, |kafka| {
                assign(&mut kafka.security.mechanism, mechanism)
            })
        },
        show: |config| {
            let kafka = config.kafka.as_ref()?;
            kafka
                .security
                .protocol
                .sasl()
                .then(|| name_of(kafka.security.mechanism, Mechanism::NAMES))
        },
    },
    Key {
        section: "kafka",
        name: "sasl_username",
        default: "",
        doc: "the user to log in to Kafka as",
        secret: false,
        set: |config, raw| {
            with_kafka(config, |kafka| {
                assign(&mut kafka.security.username, Ok(Some(raw.into())))
            })
        },
        show: |config| config.kafka.as_ref()?.security.username.clone(),
    },
    Key {
        section: "kafka",
        name: "sasl_password",
        default: "",
        doc: "sasl_username's password",
        secret: true,
        set: |config, raw| {
            with_kafka(config, |kafka| {
                assign(&mut kafka.security.password, Ok(Some(raw.into())))
            })
        },
        show: |config| config.kafka.as_ref()?.security.password.clone(),
    },
];

/// The key named so, if it is one.
pub(super) fn find(section: &str, name: &str) -> Option<&'static Key> {
    KEYS.iter()
        .find(|key| key.section == section && key.name == name)
}

/// Fills in the TLS settings, when `tls = true` made them (else the rules say what is amiss).
fn with_tls(
    config: &mut Config,
    fill: impl FnOnce(&mut TlsSettings) -> Result<(), String>,
) -> Result<(), String> {
    match &mut config.redis.tls {
        Some(tls) => fill(tls),
        None => Ok(()),
    }
}

/// Fills in the sentinel settings, when `sentinels` made them (else the rules say what is amiss).
fn with_sentinel(
    config: &mut Config,
    fill: impl FnOnce(&mut SentinelSettings),
) -> Result<(), String> {
    if let Some(sentinel) = &mut config.redis.sentinel {
        fill(sentinel);
    }
    Ok(())
}

/// Fills in the Kafka settings, when `brokers` made them (else the rules say it is missing).
fn with_kafka(
    config: &mut Config,
    fill: impl FnOnce(&mut KafkaSettings) -> Result<(), String>,
) -> Result<(), String> {
    match &mut config.kafka {
        Some(kafka) => fill(kafka),
        None => Ok(()),
    }
}

fn tls_of(config: &Config) -> Option<&TlsSettings> {
    config.redis.tls.as_ref()
}

fn sentinel_of(config: &Config) -> Option<&SentinelSettings> {
    config.redis.sentinel.as_ref()
}

/// Whether `host` and `port` say where Redis is (not sentinels, nor a cluster's nodes).
fn found_by_address(config: &Config) -> bool {
    config.redis.sentinel.is_none() && config.redis.cluster.is_none()
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

fn shown_path(path: &Option<PathBuf>) -> String {
    path.as_deref().map_or_else(String::new, shown)
}

/// A duration in seconds, as [`duration`] reads it back.
fn shown_duration(duration: Duration) -> String {
    duration.as_secs_f64().to_string()
}

fn shown_seconds(limit: Option<Duration>) -> String {
    limit.map_or(0, |limit| limit.as_secs()).to_string()
}
