//! The Kafka link (`docs/kafka.md`): due jobs of the configured topics delivered to Kafka
//! ([`out`]), and delay requests read from a Kafka topic and pushed as jobs ([`requests`]). Only
//! with a `[kafka]` section: without one, no Kafka client exists (and librdkafka starts no thread).

mod settings;

#[cfg(feature = "kafka")]
mod delay_request;
#[cfg(feature = "kafka")]
mod out;
#[cfg(feature = "kafka")]
mod patterns;
#[cfg(feature = "kafka")]
mod producer;
#[cfg(feature = "kafka")]
mod record;
#[cfg(feature = "kafka")]
mod refusal;
#[cfg(feature = "kafka")]
mod requests;
#[cfg(feature = "kafka")]
mod topics;

pub use settings::{DEFAULT_GROUP, KafkaSettings, Mechanism, MessageForm, Protocol};

#[cfg(feature = "kafka")]
pub use link::{Link, brokers_answer};

#[cfg(feature = "kafka")]
mod link {
    use std::path::Path;
    use std::sync::Arc;
    use std::time::Duration;

    use anyhow::{Context, Result};
    use delayer_client::{Client, Target};
    use rdkafka::producer::Producer;
    use tokio_util::sync::CancellationToken;

    use super::producer::{self, Producers};
    use super::settings::KafkaSettings;
    use super::{out, requests};
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
                .context("cannot make a Kafka producer ([kafka])")?;
            metrics.kafka.turn_on(&settings.brokers);
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
            let delivering = out::run(&self.client, &self.producers, &self.settings, link, stop);
            let reading = async {
                if let Some(topic) = &self.settings.requests_topic {
                    requests::run(
                        &self.client,
                        &self.target,
                        &self.settings,
                        topic,
                        &self.instance,
                        link,
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
    /// with how many brokers and topics they told of.
    pub async fn brokers_answer(settings: &KafkaSettings) -> Result<String> {
        let settings = settings.clone();
        tokio::task::spawn_blocking(move || {
            let consumer: rdkafka::consumer::BaseConsumer = producer::common(&settings)
                .create()
                .context("cannot make a Kafka client")?;
            let metadata =
                rdkafka::consumer::Consumer::fetch_metadata(&consumer, None, PROBE_TIMEOUT)
                    .with_context(|| {
                        format!("the Kafka brokers {} do not answer", settings.brokers)
                    })?;
            Ok(format!(
                "the Kafka brokers {} answer ({} brokers, {} topics)",
                settings.brokers,
                metadata.brokers().len(),
                metadata.topics().len()
            ))
        })
        .await
        .context("the Kafka check stopped")?
    }
}
