//! The Kafka sink: a due job produced to its Kafka topic (in the configured form, see
//! [`record`](super::record)) by an idempotent producer with `acks=all`, delivered once
//! the broker reports it; a refusal for good is dead-listed, trouble with the brokers gives the
//! job back. librdkafka retries a message itself (for `DELIVERY_TIMEOUT`) before it reports a
//! failure, so a job has no retries of its own.

use std::time::Duration;

use delayer_client::Job;
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::FutureRecord;

use super::record::{self, Message};
use super::refusal;
use super::{KafkaSettings, MessageForm, Producers};
use crate::deliver::{Outcome, Sink};

/// The most jobs on their way at once: jobs are reserved while earlier ones are in flight, so a
/// slow report does not hold up the next due jobs, and never so many that a broker outage gives
/// back more than this.
const MOST_IN_FLIGHT: usize = 2_000;

/// Due jobs to Kafka, by `producers`, as `settings` say.
pub struct Kafka<'a> {
    /// The `[kafka]` section.
    pub settings: &'a KafkaSettings,
    /// The producer in use, made again after a fatal error.
    pub producers: &'a Producers,
}

impl Sink for Kafka<'_> {
    fn name(&self) -> &str {
        "kafka"
    }

    fn address(&self) -> &str {
        &self.settings.brokers
    }

    fn topics(&self) -> &[String] {
        &self.settings.topics
    }

    /// Never the topic whose Kafka topic is the requests topic (its jobs would come back as
    /// requests, for ever).
    fn takes(&self, topic: &str) -> bool {
        self.settings.delivers(topic)
    }

    fn ttr(&self) -> Duration {
        self.settings.ttr
    }

    fn room(&self) -> usize {
        MOST_IN_FLIGHT
    }

    fn keep(&self) -> Option<Duration> {
        (self.settings.message == MessageForm::Id).then_some(self.settings.keep_delivered)
    }

    /// None: what fails for now is the link to the brokers, not one job (`Unreachable`).
    fn retry(&self, _job: &Job) -> Option<Duration> {
        None
    }

    async fn send(&self, job: &Job) -> Outcome {
        let message = match record::message(job, self.settings) {
            Ok(message) => message,
            Err(why) => return Outcome::Refused(why),
        };
        let (generation, sent) = {
            let (generation, producer) = self.producers.current();
            let sent = producer.send_result(record(&message));
            (generation, sent.map_err(|(error, _)| error))
        };
        drop(message);
        let delivered = match sent {
            Ok(report) => match report.await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err((error, _))) => Err(error),
                // A producer made again after a fatal error drops what it held.
                Err(_) => Err(KafkaError::Canceled),
            },
            Err(error) => Err(error),
        };
        match delivered {
            Ok(()) => Outcome::Delivered,
            Err(error) => {
                self.producers.failed(generation, &error);
                if refusal::is_permanent(&error) {
                    Outcome::Refused(refusal::reason(&error))
                } else {
                    Outcome::Unreachable(error.to_string())
                }
            }
        }
    }
}

/// The record of `message`, for the producer.
fn record(message: &Message) -> FutureRecord<'_, [u8], [u8]> {
    let mut headers = OwnedHeaders::new_with_capacity(message.headers.len());
    for (key, value) in &message.headers {
        headers = headers.insert(Header {
            key,
            value: Some(value),
        });
    }
    FutureRecord::to(&message.topic)
        .key(&message.key[..])
        .payload(&message.value[..])
        .headers(headers)
}
