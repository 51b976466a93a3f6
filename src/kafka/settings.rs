//! The `[kafka]` section, read: where the brokers are, how to log in, which delayer topics go to
//! Kafka and in what form, and the topic delay requests come in on.

use std::path::PathBuf;
use std::time::Duration;

use crate::deliver::matches;

/// How long a reservation of a job on its way to Kafka lasts unless touched (`[kafka] ttr`).
pub const DEFAULT_TTR: Duration = Duration::from_secs(30);
/// How long a job delivered by its id keeps its data (`[kafka] keep_delivered`), as
/// go-delay-queue's `job.extent_ttl` keeps it.
pub const DEFAULT_KEEP_DELIVERED: Duration = Duration::from_secs(3600);
/// The consumer group that reads delay requests (`[kafka] group`).
pub const DEFAULT_GROUP: &str = "delayer";

/// The `[kafka]` section.
#[derive(Debug, Clone, PartialEq)]
pub struct KafkaSettings {
    /// `brokers`: host:port, comma-separated (librdkafka's `bootstrap.servers`).
    pub brokers: String,
    /// `topics`: the delayer topics delivered to Kafka, each a name or a pattern with `*`; none
    /// unless the file names some (`*` for every topic).
    pub topics: Vec<String>,
    /// Topics another sink owns whatever `topics` says (QStash's messages, with its API on).
    pub owned_elsewhere: Vec<String>,
    /// `message`: what a delivered message holds.
    pub message: MessageForm,
    /// `topic_prefix`: put before a delayer topic's name to name its Kafka topic.
    pub topic_prefix: String,
    /// `keep_delivered`: how long a job delivered in the `id` form keeps its data.
    pub keep_delivered: Duration,
    /// `requests_topic`: the Kafka topic delay requests are read from; `None`: none are.
    pub requests_topic: Option<String>,
    /// `group`: the consumer group that reads `requests_topic`.
    pub group: String,
    /// `instance`: this daemon's name in the group (its static membership); `None`: this host's
    /// name and the configuration file's path.
    pub instance: Option<String>,
    /// `ttr`: how long a job is reserved for its delivery (touched while the broker is slow).
    pub ttr: Duration,
    /// How to reach the brokers.
    pub security: Security,
}

impl KafkaSettings {
    /// Settings for `brokers`, every other key at its default: no topic delivered to Kafka.
    pub fn new(brokers: &str) -> KafkaSettings {
        KafkaSettings {
            brokers: brokers.to_string(),
            topics: Vec::new(),
            owned_elsewhere: Vec::new(),
            message: MessageForm::Body,
            topic_prefix: String::new(),
            keep_delivered: DEFAULT_KEEP_DELIVERED,
            requests_topic: None,
            group: DEFAULT_GROUP.into(),
            instance: None,
            ttr: DEFAULT_TTR,
            security: Security::default(),
        }
    }
}

impl KafkaSettings {
    /// The Kafka topic that delayer topic `topic`'s jobs are delivered to.
    pub fn kafka_topic(&self, topic: &str) -> String {
        format!("{}{topic}", self.topic_prefix)
    }

    /// Whether due jobs of delayer topic `topic` go to Kafka: `topics` matches it, its Kafka
    /// topic is not the requests topic (a job delivered there would come back as a request, and
    /// so on for ever), and no other sink owns it. The others stay on their ready lists.
    pub fn delivers(&self, topic: &str) -> bool {
        matches(&self.topics, topic)
            && !self.feeds_requests(topic)
            && !self.owned_elsewhere.iter().any(|owned| owned == topic)
    }

    /// Whether delayer topic `topic`'s Kafka topic is `requests_topic`.
    pub fn feeds_requests(&self, topic: &str) -> bool {
        self.requests_topic
            .as_deref()
            .is_some_and(|requests| self.kafka_topic(topic) == requests)
    }

    /// The delayer topic whose Kafka topic would be `requests_topic`, if there is one.
    pub fn topic_of_requests(&self) -> Option<&str> {
        self.requests_topic
            .as_deref()?
            .strip_prefix(self.topic_prefix.as_str())
    }
}

/// What a message delivered to Kafka holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageForm {
    /// go-delay-queue's: the value is the job id (so is the key); the job's data stays readable
    /// by `get` for `keep_delivered`.
    Id,
    /// The key is the job id, the value its body; headers carry its topic, due time and attempt.
    Body,
}

/// The security keys, as librdkafka (and go-delay-queue's `kafka.*` keys) name them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Security {
    /// `security_protocol`: plaintext, ssl, sasl_plaintext or sasl_ssl.
    pub protocol: Protocol,
    /// `ssl_ca_file`: the CA certificates that sign the brokers' (else the system's).
    pub ca_file: Option<PathBuf>,
    /// `sasl_mechanism`: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    pub mechanism: Mechanism,
    /// `sasl_username`.
    pub username: Option<String>,
    /// `sasl_password`.
    pub password: Option<String>,
}

/// `security_protocol`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Protocol {
    /// No TLS, no login.
    #[default]
    Plaintext,
    /// TLS.
    Ssl,
    /// A SASL login without TLS.
    SaslPlaintext,
    /// A SASL login over TLS.
    SaslSsl,
}

impl Protocol {
    /// The names `security_protocol` takes.
    pub const NAMES: &[(&str, Protocol)] = &[
        ("plaintext", Protocol::Plaintext),
        ("ssl", Protocol::Ssl),
        ("sasl_plaintext", Protocol::SaslPlaintext),
        ("sasl_ssl", Protocol::SaslSsl),
    ];

    /// Whether it logs in with SASL.
    pub fn sasl(self) -> bool {
        matches!(self, Protocol::SaslPlaintext | Protocol::SaslSsl)
    }

    /// Whether it speaks TLS.
    pub fn tls(self) -> bool {
        matches!(self, Protocol::Ssl | Protocol::SaslSsl)
    }
}

/// `sasl_mechanism`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mechanism {
    /// The password sent as is (over TLS, with sasl_ssl).
    #[default]
    Plain,
    /// SCRAM with SHA-256.
    ScramSha256,
    /// SCRAM with SHA-512.
    ScramSha512,
}

impl Mechanism {
    /// The names `sasl_mechanism` takes, as Kafka spells them.
    pub const NAMES: &[(&str, Mechanism)] = &[
        ("PLAIN", Mechanism::Plain),
        ("SCRAM-SHA-256", Mechanism::ScramSha256),
        ("SCRAM-SHA-512", Mechanism::ScramSha512),
    ];
}

#[cfg(test)]
mod tests {
    use super::KafkaSettings;

    #[test]
    fn no_topic_is_delivered_unless_named_and_never_one_that_feeds_the_requests_topic() {
        let mut settings = KafkaSettings::new("k:9092");
        assert!(!settings.delivers("orders"), "none by default");
        settings.topics = vec!["*".into()];
        settings.requests_topic = Some("delayed.requests".into());
        settings.topic_prefix = "delayed.".into();
        assert!(settings.delivers("orders"));
        assert!(
            !settings.delivers("requests"),
            "it would come back as a request"
        );
        assert!(settings.feeds_requests("requests"));
        assert_eq!(settings.topic_of_requests(), Some("requests"));
        assert_eq!(settings.kafka_topic("orders"), "delayed.orders");
        settings.topic_prefix = "other.".into();
        assert!(settings.delivers("requests"));
        assert_eq!(settings.topic_of_requests(), None);
    }
}
