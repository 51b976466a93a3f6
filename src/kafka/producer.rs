//! librdkafka's configuration for the brokers and security keys, and the context that turns its
//! reports into log lines and figures.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, Producer};
use tracing::{debug, error, info, warn};

use super::settings::{KafkaSettings, Mechanism, Protocol};
use crate::metrics::KafkaLink;

/// How long librdkafka tries to deliver a message (retrying as the brokers come and go) before
/// it reports a failure: the job is then given back, to be tried again after a backoff.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a topic may be missing from the brokers' metadata before its messages fail as
/// "unknown topic" (librdkafka's default is 30 s).
const TOPIC_PROPAGATION: Duration = Duration::from_secs(5);

/// The settings every client of the link shares: brokers, security, and a client id.
pub fn common(settings: &KafkaSettings) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &settings.brokers)
        .set("client.id", "delayer");
    let security = &settings.security;
    let protocol = match security.protocol {
        Protocol::Plaintext => "plaintext",
        Protocol::Ssl => "ssl",
        Protocol::SaslPlaintext => "sasl_plaintext",
        Protocol::SaslSsl => "sasl_ssl",
    };
    config.set("security.protocol", protocol);
    if let Some(ca_file) = &security.ca_file {
        config.set("ssl.ca.location", ca_file.display().to_string());
    }
    if security.protocol.sasl() {
        let mechanism = match security.mechanism {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
        };
        config.set("sasl.mechanism", mechanism);
        config.set(
            "sasl.username",
            security.username.clone().unwrap_or_default(),
        );
        config.set(
            "sasl.password",
            security.password.clone().unwrap_or_default(),
        );
    }
    config
}

/// Why a Kafka client could not be made, naming the key at fault when librdkafka names its
/// setting (`ssl.ca.location`: `[kafka] ssl_ca_file` and its path).
pub fn not_made(settings: &KafkaSettings, error: &KafkaError) -> anyhow::Error {
    match &settings.security.ca_file {
        Some(path) if error.to_string().contains("ssl.ca.location") => anyhow::anyhow!(
            "[kafka] ssl_ca_file = {}: librdkafka cannot use it as CA certificates (PEM): {error}",
            path.display()
        ),
        _ => anyhow::anyhow!("[kafka]: cannot make a Kafka client: {error}"),
    }
}

/// The producer: idempotent (a retry after a lost reply writes no second copy), every in-sync
/// replica acknowledging each message before its delivery is reported.
fn producer(
    settings: &KafkaSettings,
    link: Arc<KafkaLink>,
) -> Result<FutureProducer<Reports>, KafkaError> {
    let mut config = common(settings);
    config
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        .set(
            "message.timeout.ms",
            DELIVERY_TIMEOUT.as_millis().to_string(),
        )
        .set(
            "topic.metadata.propagation.max.ms",
            TOPIC_PROPAGATION.as_millis().to_string(),
        );
    config.create_with_context(Reports { link })
}

/// The producer in use. An idempotent producer that hits a fatal error (the broker lost track
/// of its message sequence, say) takes no more messages: it is then made again, and what it
/// held fails and is given back, to be sent by the new one.
pub struct Producers {
    /// The producer, and how many were made before it (to make it again once per failure).
    current: Mutex<(u64, FutureProducer<Reports>)>,
    settings: KafkaSettings,
    link: Arc<KafkaLink>,
}

impl Producers {
    /// The first producer for `settings`.
    pub fn new(settings: &KafkaSettings, link: Arc<KafkaLink>) -> Result<Producers, KafkaError> {
        Ok(Producers {
            current: Mutex::new((0, producer(settings, link.clone())?)),
            settings: settings.clone(),
            link,
        })
    }

    /// The producer in use, with its generation (for [`failed`](Producers::failed)).
    pub fn current(&self) -> (u64, FutureProducer<Reports>) {
        self.current.lock().expect("not poisoned").clone()
    }

    /// Told that the producer of `generation` failed a message with `error`: when the error is
    /// fatal, the producer is made again (once, whichever message tells it first).
    pub fn failed(&self, generation: u64, error: &KafkaError) {
        if error.rdkafka_error_code() != Some(RDKafkaErrorCode::Fatal) {
            return;
        }
        let mut current = self.current.lock().expect("not poisoned");
        if current.0 != generation {
            return;
        }
        let why = current.1.client().fatal_error().map_or_else(
            || error.to_string(),
            |(code, why)| format!("{code:?}: {why}"),
        );
        match producer(&self.settings, self.link.clone()) {
            Ok(made) => {
                *current = (generation + 1, made);
                self.link.producer_remade();
                warn!(
                    "kafka: the producer failed for good ({why}): made again; the jobs it held \
                     are given back and sent again"
                );
            }
            Err(made) => {
                error!(
                    "kafka: the producer failed for good ({why}) and cannot be made again: {made}"
                )
            }
        }
    }
}

/// Where librdkafka's log lines and errors go: the daemon's log (at debug for what repeats while
/// a broker is down: the delivery loop says that once) and the link's figures.
pub struct Reports {
    pub link: Arc<KafkaLink>,
}

impl ClientContext for Reports {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error
            | RDKafkaLogLevel::Warning => warn!(facility, "librdkafka: {message}"),
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                info!(facility, "librdkafka: {message}")
            }
            RDKafkaLogLevel::Debug => debug!(facility, "librdkafka: {message}"),
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.link.broker_error();
        debug!("kafka: {error}: {reason}");
    }
}

impl ConsumerContext for Reports {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fatal_error_makes_the_producer_again_once_and_others_do_not() {
        let link = Arc::new(KafkaLink::default());
        // No broker answers there; librdkafka connects only when it has something to send.
        let producers = Producers::new(&KafkaSettings::new("127.0.0.1:1"), link.clone()).unwrap();
        let timed_out = KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut);
        producers.failed(0, &timed_out);
        assert_eq!(producers.current().0, 0, "not fatal: kept");
        let fatal = KafkaError::MessageProduction(RDKafkaErrorCode::Fatal);
        producers.failed(0, &fatal);
        assert_eq!(producers.current().0, 1, "fatal: made again");
        // The other messages of the failed producer tell the same failure: made again once.
        producers.failed(0, &fatal);
        assert_eq!(producers.current().0, 1);
        assert_eq!(link.producers_remade(), 1);
    }
}
