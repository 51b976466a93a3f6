//! What a job becomes in Kafka: its topic there, key, value and headers, in the configured form.

use delayer_client::Job;
use delayer_wire::time::to_unix_ms;

use super::settings::{KafkaSettings, MessageForm};

/// The header naming the job's delayer topic (and, on a delay request, the target topic).
pub const TOPIC_HEADER: &str = "delayer-topic";
/// The header with the job's due time, unix milliseconds.
pub const DUE_HEADER: &str = "delayer-due-ms";
/// The header with the job's attempt: 2 and more for a job delivered again.
pub const ATTEMPT_HEADER: &str = "delayer-attempt";

/// A message for Kafka, owned.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub topic: String,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub headers: Vec<(&'static str, Vec<u8>)>,
}

/// The message `job` becomes, or why it cannot be one (a permanent refusal).
pub fn message(job: &Job, settings: &KafkaSettings) -> Result<Message, String> {
    let topic = std::str::from_utf8(job.topic.as_bytes())
        .map_err(|_| "its topic is not UTF-8, which a Kafka topic's name must be".to_string())?;
    let value = match settings.message {
        MessageForm::Id => job.id.as_bytes().to_vec(),
        MessageForm::Body => job.body.clone(),
    };
    let mut headers = vec![
        (TOPIC_HEADER, job.topic.as_bytes().to_vec()),
        (ATTEMPT_HEADER, job.attempts.to_string().into_bytes()),
    ];
    if let Some(due) = job.due {
        headers.push((DUE_HEADER, to_unix_ms(due).to_string().into_bytes()));
    }
    Ok(Message {
        topic: settings.kafka_topic(topic),
        key: job.id.as_bytes().to_vec(),
        value,
        headers,
    })
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn job() -> Job {
        Job {
            id: "j1".into(),
            topic: "order.close".into(),
            body: b"{\"order\":42}".to_vec(),
            attempts: 2,
            due: Some(UNIX_EPOCH + Duration::from_millis(1_700_000_000_123)),
            token: Some("t".into()),
        }
    }

    #[test]
    fn the_body_form_keys_by_id_and_carries_the_body_and_headers() {
        let mut settings = KafkaSettings::new("k:9092");
        settings.topics = vec!["*".into()];
        settings.topic_prefix = "delayed.".into();
        let message = message(&job(), &settings).unwrap();
        assert_eq!(message.topic, "delayed.order.close");
        assert_eq!(message.key, b"j1");
        assert_eq!(message.value, b"{\"order\":42}");
        assert_eq!(
            message.headers,
            vec![
                (TOPIC_HEADER, b"order.close".to_vec()),
                (ATTEMPT_HEADER, b"2".to_vec()),
                (DUE_HEADER, b"1700000000123".to_vec()),
            ]
        );
    }

    #[test]
    fn the_id_form_carries_the_id_and_a_topic_not_utf8_is_refused() {
        let mut settings = KafkaSettings::new("k:9092");
        settings.message = MessageForm::Id;
        let message = message(&job(), &settings).unwrap();
        assert_eq!(
            (message.topic.as_str(), message.value.as_slice()),
            ("order.close", &b"j1"[..])
        );
        let odd = Job {
            topic: b"\xff".to_vec().into(),
            ..job()
        };
        assert!(
            super::message(&odd, &settings)
                .unwrap_err()
                .contains("not UTF-8")
        );
    }
}
