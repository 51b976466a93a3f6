//! The `[kafka]` keys: the brokers, the topics delivered to Kafka, delay requests read from it.

use std::time::Duration;

use super::super::settings::Config;
use super::super::values::{addresses, assign, choice, duration, name_of, path};
use super::{Key, shown_duration, shown_path};
use crate::kafka::{DEFAULT_GROUP, KafkaSettings, Mechanism, MessageForm, Protocol};

const MESSAGE_FORMS: &[(&str, MessageForm)] =
    &[("body", MessageForm::Body), ("id", MessageForm::Id)];

/// The section's keys, in the order the printout and `dist/delayer.conf` list them.
pub(super) const KEYS: &[Key] = &[
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
