//! What a failed delivery means: a refusal of this message for good (to the dead list, with the
//! reason), or trouble with the brokers that passes (the job waits in Redis and is sent again).

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

/// Whether `error` refuses the message itself, for good: sending it again would fail again.
/// Trouble with the link as a whole (brokers down, a login refused) is not: every job would go
/// dead for it, where waiting loses nothing.
pub fn is_permanent(error: &KafkaError) -> bool {
    let Some(code) = error.rdkafka_error_code() else {
        return false;
    };
    matches!(
        code,
        RDKafkaErrorCode::UnknownTopic
            | RDKafkaErrorCode::UnknownTopicOrPartition
            | RDKafkaErrorCode::UnknownTopicId
            | RDKafkaErrorCode::InvalidTopic
            | RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::InvalidRecord
            | RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::PolicyViolation
    )
}

/// `error` in words, for the dead list and the log.
pub fn reason(error: &KafkaError) -> String {
    match error.rdkafka_error_code() {
        Some(code) => format!("Kafka refused it: {code} ({code:?})"),
        None => format!("Kafka refused it: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_that_does_not_exist_is_permanent_and_a_timeout_is_not() {
        let error = |code| KafkaError::MessageProduction(code);
        assert!(is_permanent(&error(RDKafkaErrorCode::UnknownTopic)));
        assert!(is_permanent(&error(RDKafkaErrorCode::MessageSizeTooLarge)));
        assert!(is_permanent(&error(
            RDKafkaErrorCode::TopicAuthorizationFailed
        )));
        assert!(!is_permanent(&error(RDKafkaErrorCode::MessageTimedOut)));
        assert!(!is_permanent(&error(RDKafkaErrorCode::AllBrokersDown)));
        assert!(!is_permanent(&error(
            RDKafkaErrorCode::ClusterAuthorizationFailed
        )));
        assert!(reason(&error(RDKafkaErrorCode::UnknownTopic)).contains("UnknownTopic"));
    }
}
