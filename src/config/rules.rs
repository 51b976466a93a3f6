//! What no key says alone: keys that want another (a username wants a password), that exclude
//! another (sentinels say where Redis is, so no host), or that must be there when their section is.

use std::fmt::{self, Display};

use super::ini::IniFile;
use super::keys::{self, Key};
use super::settings::Config;

/// A key whose value is wrong, alone or in the company it keeps.
pub(super) struct Wrong {
    section: &'static str,
    key: &'static str,
    /// As the file gives it (masked for a password).
    value: String,
    why: String,
}

impl Wrong {
    /// `key` of `ini`, wrong for this reason.
    pub(super) fn of(ini: &IniFile, key: &Key, why: String) -> Wrong {
        Wrong {
            section: key.section,
            key: key.name,
            value: shown(ini, key.section, key.name),
            why,
        }
    }
}

/// `[section] key = "value": why`, as problems are told (after the file's name).
impl Display for Wrong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Wrong {
            section,
            key,
            value,
            why,
        } = self;
        write!(f, "[{section}] {key} = {value:?}: {why}")
    }
}

/// Everything wrong with how the keys of `ini`, read into `config`, go together.
pub(super) fn check(config: &Config, ini: &IniFile) -> Vec<Wrong> {
    let mut wrong = Vec::new();
    let given = |key: &str| ini.get("redis", key).is_some();
    let mut say = |key: &'static str, why: &str| {
        wrong.push(Wrong {
            section: "redis",
            key,
            value: shown(ini, "redis", key),
            why: why.to_string(),
        });
    };
    // redis-rs sends no AUTH without a password, so the daemon would be `default` unnoticed (a
    // `nopass` user takes any password).
    if given("username") && !given("password") {
        say(
            "username",
            "given without a password, which Redis needs to log in as that user (any password \
             for a nopass user)",
        );
    }
    if given("sentinel_username") && !given("sentinel_password") {
        say(
            "sentinel_username",
            "given without sentinel_password, which the sentinels need to log in as that user",
        );
    }
    if given("sentinels") {
        for key in ["host", "port"] {
            if given(key) {
                say(key, "set with sentinels, which say where Redis is");
            }
        }
        if !given("sentinel_master") {
            say(
                "sentinel_master",
                "missing: sentinels want the name they know the master by",
            );
        }
    } else {
        for key in ["sentinel_master", "sentinel_password", "sentinel_username"] {
            if given(key) {
                say(key, "given without sentinels");
            }
        }
    }
    if given("cluster") {
        for key in ["host", "port", "sentinels"] {
            if given(key) {
                say(key, "set with cluster, whose nodes say where Redis is");
            }
        }
        if ini
            .get("redis", "database")
            .is_some_and(|database| database != "0")
        {
            say(
                "database",
                "set with cluster: a Redis Cluster has database 0 only",
            );
        }
        if given("key_layout") {
            say(
                "key_layout",
                "set with cluster, which has a layout of its own (topics as hash tags)",
            );
        }
    }
    if config.redis.tls.is_some() {
        if config.redis.is_unix_socket() {
            say("tls", "Redis on a unix socket speaks no TLS");
        }
        match (given("tls_cert_file"), given("tls_key_file")) {
            (true, false) => say("tls_cert_file", "given without tls_key_file"),
            (false, true) => say("tls_key_file", "given without tls_cert_file"),
            _ => {}
        }
    } else {
        for key in [
            "tls_ca_file",
            "tls_cert_file",
            "tls_key_file",
            "tls_insecure",
        ] {
            if given(key) {
                say(key, "set, but tls is not true");
            }
        }
    }
    if ini.has_section("http") {
        let mut say = |key: &'static str, why: &str| {
            wrong.push(Wrong {
                section: "http",
                key,
                value: String::new(),
                why: why.to_string(),
            });
        };
        if ini.get("http", "listen").is_none() {
            say(
                "listen",
                "expected an address and port, like 127.0.0.1:9277 (the [http] section turns \
                 HTTP on: remove it to serve nothing)",
            );
        }
        if ini.get("http", "token").is_none() && ini.has_key("http", "token") {
            say(
                "token",
                "empty, which would leave the job API open: give a token, or remove the key",
            );
        }
    }
    if ini.has_section("kafka") {
        wrong.extend(kafka(config, ini));
    }
    if ini.get("qstash", "token").is_some() && !ini.has_section("http") {
        wrong.push(Wrong {
            section: "qstash",
            key: "token",
            value: "********".into(),
            why: "QStash's API is served on [http] listen: add an [http] section".into(),
        });
    }
    if ini.get("qstash", "next_signing_key").is_some()
        && ini.get("qstash", "current_signing_key").is_none()
    {
        wrong.push(Wrong {
            section: "qstash",
            key: "current_signing_key",
            value: String::new(),
            why: "missing: next_signing_key is the key after it, and requests are signed with \
                  the current one"
                .into(),
        });
    }
    wrong
}

/// A topic named by two sinks (Kafka and a webhook, or two webhooks): its jobs would go to the
/// first only, which the file does not say.
pub(super) fn sinks(config: &Config) -> Vec<String> {
    // Each topic a sink names, with the sink.
    let mut owners: Vec<(&str, String)> = Vec::new();
    if let Some(kafka) = &config.kafka {
        owners.extend(
            kafka
                .topics
                .iter()
                .map(|topic| (topic.as_str(), "[kafka]".into())),
        );
    }
    let mut problems = Vec::new();
    for hook in &config.webhooks {
        let name = format!("[webhook.{}]", hook.name);
        for topic in &hook.topics {
            if let Some((_, owner)) = owners.iter().find(|(known, _)| known == topic) {
                problems.push(format!(
                    "{name} topics: {topic:?} is delivered by {owner} already: a topic's due \
                     jobs go to one place"
                ));
            }
        }
        owners.extend(
            hook.topics
                .iter()
                .map(|topic| (topic.as_str(), name.clone())),
        );
    }
    problems
}

/// What is wrong with how the `[kafka]` keys go together.
fn kafka(config: &Config, ini: &IniFile) -> Vec<Wrong> {
    let mut wrong = Vec::new();
    let mut say = |key: &'static str, why: &str| {
        wrong.push(Wrong {
            section: "kafka",
            key,
            value: shown(ini, "kafka", key),
            why: why.to_string(),
        });
    };
    let Some(kafka) = &config.kafka else {
        // A value given but wrong is told by the key itself.
        if ini.get("kafka", "brokers").is_none() {
            say(
                "brokers",
                "missing: the [kafka] section wants the brokers, like kafka1:9092,kafka2:9092 \
                 (remove the section to deliver nothing to Kafka)",
            );
        }
        return wrong;
    };
    if kafka.topics.is_empty() && kafka.requests_topic.is_none() {
        say(
            "topics",
            "none, and no requests_topic: the section would deliver nothing to Kafka and read \
             nothing from it; name the topics to deliver (* for every topic), or a \
             requests_topic, or remove the section",
        );
    }
    if let Some(requests) = &kafka.requests_topic {
        let named = kafka.topics.iter().filter(|topic| !topic.contains('*'));
        for topic in named.filter(|topic| kafka.feeds_requests(topic)) {
            say(
                "topics",
                &format!(
                    "{topic:?} would be delivered to the Kafka topic {requests:?}, the \
                     requests_topic, and read back as a request again and again: leave it out, \
                     or change topic_prefix"
                ),
            );
        }
    }
    let protocol = kafka.security.protocol;
    if protocol.sasl() {
        for key in ["sasl_username", "sasl_password"] {
            if ini.get("kafka", key).is_none() {
                say(
                    key,
                    "missing: security_protocol logs in with SASL, which wants it",
                );
            }
        }
    } else {
        for key in ["sasl_mechanism", "sasl_username", "sasl_password"] {
            if ini.get("kafka", key).is_some() {
                say(
                    key,
                    "set, but security_protocol is not sasl_plaintext or sasl_ssl",
                );
            }
        }
    }
    if !protocol.tls() && ini.get("kafka", "ssl_ca_file").is_some() {
        say(
            "ssl_ca_file",
            "set, but security_protocol is not ssl or sasl_ssl",
        );
    }
    wrong
}

/// What works, but should not stay: a warning at every start.
pub(super) fn risky(config: &Config) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(kafka) = &config.kafka
        && let Some(topic) = kafka.topic_of_requests()
        && crate::deliver::matches(&kafka.topics, topic)
    {
        warnings.push(format!(
            "[kafka] topics = {:?} covers the topic {topic:?}, whose Kafka topic would be the \
             requests_topic: its jobs stay on its ready list (a job delivered there would come \
             back as a request again and again), and delay requests for it are skipped",
            kafka.topics.join(", ")
        ));
    }
    if config.redis.tls.as_ref().is_some_and(|tls| tls.insecure) {
        warnings.push(
            "[redis] tls_insecure = true: Redis's certificate is not checked, so anyone on the way \
             to Redis can pose as it and read or change every job; use it only to try TLS out"
                .to_string(),
        );
    }
    warnings
}

/// The value of `[section] key` as a message may show it: masked when it is a password.
fn shown(ini: &IniFile, section: &str, key: &str) -> String {
    match keys::find(section, key) {
        Some(key) if key.secret => "********".into(),
        _ => ini.get(section, key).unwrap_or_default().to_string(),
    }
}
