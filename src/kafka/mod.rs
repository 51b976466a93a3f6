//! The Kafka link (`docs/kafka.md`): due jobs of the configured topics delivered to Kafka (the
//! delivery loop's Kafka sink, [`sink`]), and delay requests read from a Kafka topic
//! and pushed as jobs ([`requests`]). Only with a `[kafka]` section: without one, no Kafka client
//! exists (and librdkafka starts no thread).

mod settings;

#[cfg(feature = "kafka")]
mod delay_request;
#[cfg(feature = "kafka")]
mod lag;
#[cfg(feature = "kafka")]
mod producer;
#[cfg(feature = "kafka")]
mod record;
#[cfg(feature = "kafka")]
mod refusal;
#[cfg(feature = "kafka")]
mod requests;
#[cfg(feature = "kafka")]
mod sink;

pub use settings::{DEFAULT_GROUP, KafkaSettings, Mechanism, MessageForm, Protocol};

#[cfg(feature = "kafka")]
pub use link::{Link, brokers_answer};
#[cfg(feature = "kafka")]
pub use producer::Producers;

#[cfg(feature = "kafka")]
mod link {
    use std::path::Path;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use anyhow::{Context, Result, bail};
    use delayer_client::{Client, Target};
    use rdkafka::client::ClientContext;
    use rdkafka::config::RDKafkaLogLevel;
    use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
    use rdkafka::error::KafkaError;
    use rdkafka::producer::Producer;
    use tokio_util::sync::CancellationToken;

    use super::producer::{self, Producers};
    use super::requests;
    use super::settings::KafkaSettings;
    use super::sink::Kafka;
    use crate::deliver;
    use crate::metrics::Metrics;

    /// How long `--check-config` waits for the brokers' metadata.
    const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

    /// The link, its producer made (librdkafka connects in the background).
    pub struct Link {
        client: Client,
        /// For the offsets of the requests pushed.
        target: Target,
        settings: KafkaSettings,
        /// Its name in the consumer group of `requests_topic`.
        instance: String,
        producers: Producers,
        metrics: Arc<Metrics>,
    }

    impl Link {
        /// The link to `settings`' brokers (read from `file`), for the jobs `client` reaches.
        pub fn new(
            settings: &KafkaSettings,
            file: &Path,
            client: Client,
            target: Target,
            metrics: Arc<Metrics>,
        ) -> Result<Link> {
            let producers = Producers::new(settings, metrics.kafka.clone())
                .map_err(|error| producer::not_made(settings, &error))?;
            metrics.kafka.turn_on(&settings.brokers);
            let title = format!("Kafka at {}", settings.brokers);
            metrics.add_sink(title, metrics.kafka.out.clone());
            Ok(Link {
                client,
                target,
                settings: settings.clone(),
                // Stable across restarts (a daemon killed takes its partitions back when it comes
                // again), and apart for two daemons of one host with their own files.
                instance: settings.instance.clone().unwrap_or_else(|| {
                    format!(
                        "{}:{}",
                        delayer_client::consumer::this_host(),
                        file.display()
                    )
                }),
                producers,
                metrics,
            })
        }

        /// Delivers due jobs to Kafka, and reads delay requests when `requests_topic` names a
        /// topic, until `stop`; then waits for the messages still queued.
        pub async fn run(self, stop: &CancellationToken) {
            let link = &self.metrics.kafka;
            let sink = Kafka {
                settings: &self.settings,
                producers: &self.producers,
            };
            let delivering = deliver::run(&self.client, &sink, &link.out, stop);
            let reading = async {
                if let Some(topic) = &self.settings.requests_topic {
                    requests::run(
                        &self.client,
                        &self.target,
                        &self.settings,
                        topic,
                        &self.instance,
                        &self.metrics,
                        stop,
                    )
                    .await;
                }
            };
            tokio::join!(delivering, reading);
            let (_, producer) = self.producers.current();
            // Nothing is left queued once the loop ends (each job's report is awaited), but flush
            // all the same.
            let _ =
                tokio::task::spawn_blocking(move || producer.flush(Duration::from_secs(5))).await;
        }
    }

    /// For `--check-config`: whether the brokers answer (their metadata, within a few seconds),
    /// with how many brokers and topics they told of; else why not, in librdkafka's words, and
    /// naming the key at fault. A `requests_topic` the brokers do not have is a problem too:
    /// nothing would be read.
    pub async fn brokers_answer(settings: &KafkaSettings) -> Result<String> {
        let settings = settings.clone();
        tokio::task::spawn_blocking(move || {
            let probe = Probe::default();
            let consumer: BaseConsumer<Probe> = producer::common(&settings)
                .create_with_context(probe)
                .map_err(|error| producer::not_made(&settings, &error))?;
            let brokers = &settings.brokers;
            let metadata = match consumer.fetch_metadata(None, PROBE_TIMEOUT) {
                Ok(metadata) => metadata,
                Err(error) => {
                    // librdkafka's errors and log lines come as events, served by a poll.
                    let _ = consumer.poll(Duration::ZERO);
                    let why = consumer
                        .context()
                        .why()
                        .unwrap_or_else(|| error.to_string());
                    bail!("[kafka] brokers = {brokers}: no broker answers: {why}");
                }
            };
            if let Some(topic) = &settings.requests_topic {
                let listed = metadata
                    .topics()
                    .iter()
                    .any(|listed| listed.name() == topic && listed.error().is_none());
                if !listed {
                    bail!(
                        "[kafka] requests_topic = {topic}: the brokers {brokers} have no such \
                         topic (create it: delayer reads it, and a consumer does not create it)"
                    );
                }
            }
            Ok(format!(
                "the Kafka brokers {brokers} answer ({} brokers, {} topics)",
                metadata.brokers().len(),
                metadata.topics().len()
            ))
        })
        .await
        .context("the Kafka check stopped")?
    }

    /// The probe's context: what librdkafka said went wrong, which its errors' codes do not
    /// ("BrokerTransportFailure" for a refused connection and an unknown host alike).
    #[derive(Default)]
    struct Probe {
        reasons: Mutex<Vec<String>>,
    }

    impl Probe {
        /// What went wrong, if librdkafka said: each reason once, in order.
        fn why(&self) -> Option<String> {
            let reasons = self.reasons.lock().expect("not poisoned");
            (!reasons.is_empty()).then(|| reasons.join("; "))
        }

        fn said(&self, reason: &str) {
            // "[thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: Connect to ... failed: ...":
            // the thread adds nothing.
            let reason = match reason.split_once("]: ") {
                Some((thread, rest)) if thread.starts_with("[thrd:") => rest,
                _ => reason,
            };
            let mut reasons = self.reasons.lock().expect("not poisoned");
            // "1/1 brokers are down" follows each broker's own reason: it adds nothing.
            if !reasons.iter().any(|known| known == reason) && !reason.ends_with("brokers are down")
            {
                reasons.push(reason.to_string());
            }
        }
    }

    impl ClientContext for Probe {
        fn log(&self, level: RDKafkaLogLevel, _: &str, message: &str) {
            if (level as i32) <= RDKafkaLogLevel::Warning as i32 {
                self.said(message);
            }
        }

        fn error(&self, _: KafkaError, reason: &str) {
            self.said(reason);
        }
    }

    impl ConsumerContext for Probe {}
}
