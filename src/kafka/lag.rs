//! How far the reading of delay requests is behind: every few seconds, for each partition of the
//! requests topic this daemon reads, the requests after its committed offset (after its first
//! offset while none is committed), told to the link's figures; and a warning when a partition
//! has held requests without its offset moving for a while (see `KafkaLink::requests_read`).
//! Measured beside the reading loop, not by it: a loop held up (Redis refusing the pushes, a
//! message the broker will not return) is what it must see.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::Offset;
use rdkafka::consumer::{Consumer, StreamConsumer};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::producer::Reports;
use crate::metrics::{KafkaLink, RequestsFlow};
use crate::service::duty::sleep_or_stop;

/// How often the lag is measured.
const EVERY: Duration = Duration::from_secs(5);
/// How long one question to the brokers may take.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// Measures the lag of `consumer`'s partitions of `topic` until `stop`.
pub async fn watch(
    consumer: Arc<StreamConsumer<Reports>>,
    topic: &str,
    link: &KafkaLink,
    stop: &CancellationToken,
) {
    while sleep_or_stop(EVERY, stop).await {
        let asking = consumer.clone();
        // librdkafka's questions block: on a thread of their own.
        let Ok(Some(read)) = tokio::task::spawn_blocking(move || measure(&asking)).await else {
            continue;
        };
        for flow in link.requests_read(topic, &read) {
            match flow {
                RequestsFlow::Stalled {
                    topic,
                    partition,
                    waiting,
                    still,
                } => warn!(
                    topic,
                    partition,
                    waiting,
                    "kafka: delay requests do not move: {waiting} wait in partition {partition} \
                     of {topic}, and its offset has not moved for {} s",
                    still.as_secs()
                ),
                RequestsFlow::Moving { topic, partition } => {
                    info!(topic, partition, "kafka: delay requests move again")
                }
            }
        }
    }
}

/// Each partition assigned to `consumer`: the partition, the requests after its committed offset
/// (its last offset known to the brokers, less that one), and that offset (-1 for none); `None`
/// when the brokers do not answer (the delivery loop tells that).
fn measure(consumer: &StreamConsumer<Reports>) -> Option<Vec<(i32, i64, i64)>> {
    let committed = consumer.committed(ASK_TIMEOUT).ok()?;
    let mut read = Vec::new();
    for element in committed.elements() {
        let (first, end) = consumer
            .fetch_watermarks(element.topic(), element.partition(), ASK_TIMEOUT)
            .ok()?;
        let committed = match element.offset() {
            Offset::Offset(offset) => offset,
            _ => -1,
        };
        let from = if committed >= 0 { committed } else { first };
        read.push((element.partition(), (end - from).max(0), committed));
    }
    Some(read)
}
