//! Kafka in: delay requests read from `[kafka] requests_topic` in a consumer group, each pushed as
//! a job (value = body; headers `delayer-topic`, and `delayer-delay-ms` or `delayer-due-ms`; the
//! key, when there is one, is the job's id, else an id derived from the message's place). Offsets
//! are committed only after the push; the last offset pushed of each partition is kept in Redis
//! too, written by the push's own script call, so that a request read again after a crash
//! between the push and the commit is not pushed twice.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayer_client::redis;
use delayer_client::{Client, Error, Mark, NewPush, Target};
use delayer_wire::keys::KAFKA_OFFSETS_PREFIX;
use rdkafka::Message as _;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::message::{BorrowedMessage, Headers};
use rdkafka::{Offset, TopicPartitionList};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::producer::{self, Reports};
use super::record::{DUE_HEADER, TOPIC_HEADER};
use super::settings::KafkaSettings;
use crate::metrics::KafkaLink;
use std::sync::Arc;

/// The header with a request's delay, in milliseconds.
pub const DELAY_HEADER: &str = "delayer-delay-ms";
/// The most requests pushed in one call.
const BATCH: usize = 500;
/// How long a batch waits for more requests once it has one.
const GATHER: Duration = Duration::from_millis(20);
/// The longest wait for the consumer to leave its group at a stop.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(3);
/// The wait after Redis or the brokers failed.
const AFTER_A_FAILURE: Duration = Duration::from_secs(1);

/// One request, read.
#[derive(Debug, PartialEq)]
pub struct Request {
    pub id: String,
    pub topic: String,
    pub body: Vec<u8>,
    pub due: Due,
}

/// When a request's job falls due.
#[derive(Debug, PartialEq)]
pub enum Due {
    In(Duration),
    At(SystemTime),
}

/// Reads requests until `stop`; a batch pushed is committed before the loop looks at `stop`.
pub async fn run(
    client: &Client,
    target: &Target,
    settings: &KafkaSettings,
    topic: &str,
    instance: &str,
    link: &Arc<KafkaLink>,
    stop: &CancellationToken,
) {
    let consumer: StreamConsumer<Reports> = match producer::common(settings)
        .set("group.id", &settings.group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        // A daemon killed keeps its partitions until its session times out: 10 s, not
        // librdkafka's 45, so that another daemon (or this one restarted) reads on soon.
        .set("session.timeout.ms", "10000")
        // Static membership (KIP-345): this daemon restarted takes its partitions back at once,
        // without a rebalance; a broker that never evicts a member that died without leaving
        // (tansu) hands them to no one else.
        .set("group.instance.id", instance)
        .create_with_context(Reports { link: link.clone() })
    {
        Ok(consumer) => consumer,
        Err(error) => {
            warn!("kafka: cannot make the consumer of {topic}: {error}");
            return;
        }
    };
    if let Err(error) = consumer.subscribe(&[topic]) {
        warn!("kafka: cannot subscribe to {topic}: {error}");
        return;
    }
    info!(
        topic,
        group = settings.group,
        instance,
        "kafka: reading delay requests"
    );
    let offsets_key = format!("{KAFKA_OFFSETS_PREFIX}{}", settings.group);
    'reading: while !stop.is_cancelled() {
        let first = tokio::select! {
            message = consumer.recv() => message,
            () = stop.cancelled() => break,
        };
        let mut messages = match first {
            Ok(message) => vec![message],
            Err(error) => {
                warn!("kafka: cannot read delay requests: {error}");
                pause(stop).await;
                continue;
            }
        };
        while messages.len() < BATCH
            && let Ok(Ok(message)) = tokio::time::timeout(GATHER, consumer.recv()).await
        {
            messages.push(message);
        }
        // Retried (the offsets not committed) until Redis takes them.
        loop {
            match push(client, target, &offsets_key, &messages).await {
                Ok(count) => {
                    link.requests(count);
                    break;
                }
                Err(error) => {
                    warn!("kafka: cannot push delay requests (tried again): {error:#}");
                    pause(stop).await;
                    if stop.is_cancelled() {
                        break 'reading;
                    }
                }
            }
        }
        let mut offsets = TopicPartitionList::new();
        for message in &messages {
            let _ = offsets.add_partition_offset(
                message.topic(),
                message.partition(),
                Offset::Offset(message.offset() + 1),
            );
        }
        if let Err(error) = consumer.commit(&offsets, CommitMode::Async) {
            warn!("kafka: cannot commit the offsets of pushed requests: {error}");
        }
    }
    close(consumer).await;
}

/// Closes `consumer` (it leaves its group and commits what is left), on a thread of its own:
/// librdkafka waits for the coordinator, which must not hold the daemon's stop for long. What
/// is not committed by then is read again, and skipped by the offsets kept in Redis.
async fn close(consumer: StreamConsumer<Reports>) {
    let (closed, done) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        drop(consumer);
        let _ = closed.send(());
    });
    if tokio::time::timeout(CLOSE_TIMEOUT, done).await.is_err() {
        warn!("kafka: the consumer of delay requests did not close in time; stopping anyway");
    }
}

/// Pushes the requests of `messages` not pushed before (by any daemon of the group: a partition
/// may have moved between them), recording with them the last offset pushed of each partition;
/// how many it pushed.
async fn push(
    client: &Client,
    target: &Target,
    offsets_key: &str,
    messages: &[BorrowedMessage<'_>],
) -> anyhow::Result<usize> {
    let mut redis = target.connect().await?;
    let field =
        |message: &BorrowedMessage<'_>| format!("{}:{}", message.topic(), message.partition());
    let mut fields: Vec<String> = messages.iter().map(field).collect();
    fields.sort();
    fields.dedup();
    let known: Vec<Option<i64>> = redis::cmd("HMGET")
        .arg(offsets_key)
        .arg(&fields)
        .query_async(&mut redis)
        .await?;
    let pushed: HashMap<String, i64> = fields
        .into_iter()
        .zip(known)
        .map(|(field, offset)| (field, offset.unwrap_or(-1)))
        .collect();
    let mut jobs = Vec::new();
    let mut last: HashMap<String, i64> = HashMap::new();
    for message in messages {
        let field = field(message);
        if message.offset() <= pushed[&field] {
            continue;
        }
        last.insert(field, message.offset());
        match request(message) {
            Ok(request) => jobs.push(request),
            Err(why) => warn!(
                partition = message.partition(),
                offset = message.offset(),
                "kafka: delay request ignored: {why}"
            ),
        }
    }
    let mark = Mark {
        key: offsets_key.to_string(),
        fields: last
            .into_iter()
            .map(|(field, offset)| (field, offset.to_string()))
            .collect(),
    };
    push_all(client, jobs, &mark).await
}

/// Pushes `requests` with `mark`, leaving out (with a warning) those the client refuses: a bad
/// one must not keep the others back.
async fn push_all(
    client: &Client,
    mut requests: Vec<Request>,
    mark: &Mark,
) -> anyhow::Result<usize> {
    loop {
        let jobs = requests.iter().map(|request| {
            let job =
                NewPush::new(request.topic.as_str(), request.body.clone()).id(request.id.as_str());
            match request.due {
                Due::In(delay) => job.delay(delay),
                // A due time is kept as the job's score, so it moves when Redis's clock passes it.
                // A past one (by this host's clock) is due at this host's now: never before the
                // time asked, whichever of the two clocks is ahead.
                Due::At(at) => job.at(at.max(SystemTime::now())),
            }
        });
        match client
            .push_many_marked(jobs.collect::<Vec<_>>(), Some(mark))
            .await
        {
            Ok(ids) => return Ok(ids.len()),
            Err(Error::InBatch { index, error }) => {
                let request = requests.remove(index);
                warn!(id = request.id, "kafka: delay request ignored: {error}");
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// The request `message` holds, or why it is none.
pub fn request(message: &BorrowedMessage<'_>) -> Result<Request, String> {
    let mut headers: HashMap<&str, &[u8]> = HashMap::new();
    if let Some(all) = message.headers() {
        for header in all.iter() {
            if let Some(value) = header.value {
                headers.insert(header.key, value);
            }
        }
    }
    let derived = || {
        format!(
            "kafka:{}:{}:{}",
            message.topic(),
            message.partition(),
            message.offset()
        )
    };
    read(
        &headers,
        message.key(),
        message.payload().unwrap_or_default(),
        derived,
    )
}

/// A request from its headers, key and value; `derived` makes its id when there is no key.
fn read(
    headers: &HashMap<&str, &[u8]>,
    key: Option<&[u8]>,
    value: &[u8],
    derived: impl FnOnce() -> String,
) -> Result<Request, String> {
    let text = |name: &str| -> Result<Option<&str>, String> {
        headers
            .get(name)
            .map(|value| {
                std::str::from_utf8(value).map_err(|_| format!("header {name} is not UTF-8"))
            })
            .transpose()
    };
    let millis = |name: &str| -> Result<Option<u64>, String> {
        text(name)?
            .map(|value| {
                value.trim().parse::<u64>().map_err(|_| {
                    format!("header {name} = {value:?} is not a whole number of milliseconds")
                })
            })
            .transpose()
    };
    let topic = text(TOPIC_HEADER)?
        .filter(|topic| !topic.is_empty())
        .ok_or_else(|| format!("no header {TOPIC_HEADER} naming the topic to push to"))?;
    let due = match (millis(DELAY_HEADER)?, millis(DUE_HEADER)?) {
        (Some(_), Some(_)) => {
            return Err(format!("both {DELAY_HEADER} and {DUE_HEADER}: give one"));
        }
        (Some(delay), None) => Due::In(Duration::from_millis(delay)),
        (None, Some(due)) => Due::At(UNIX_EPOCH + Duration::from_millis(due)),
        (None, None) => return Err(format!("no header {DELAY_HEADER} or {DUE_HEADER}")),
    };
    let id = match key.filter(|key| !key.is_empty()) {
        Some(key) => {
            String::from_utf8(key.to_vec()).map_err(|_| "its key is not UTF-8".to_string())?
        }
        None => derived(),
    };
    Ok(Request {
        id,
        topic: topic.to_string(),
        body: value.to_vec(),
        due,
    })
}

async fn pause(stop: &CancellationToken) {
    tokio::select! {
        () = tokio::time::sleep(AFTER_A_FAILURE) => {}
        () = stop.cancelled() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers<'a>(pairs: &[(&'a str, &'a str)]) -> HashMap<&'a str, &'a [u8]> {
        pairs.iter().map(|(k, v)| (*k, v.as_bytes())).collect()
    }

    #[test]
    fn a_request_names_its_topic_and_a_delay_or_a_due_time() {
        let derived = || "kafka:r:0:7".to_string();
        let request = read(
            &headers(&[(TOPIC_HEADER, "t"), (DELAY_HEADER, "1500")]),
            Some(b"job-1"),
            b"body",
            derived,
        )
        .unwrap();
        assert_eq!(
            request,
            Request {
                id: "job-1".into(),
                topic: "t".into(),
                body: b"body".to_vec(),
                due: Due::In(Duration::from_millis(1500)),
            }
        );
        let at = read(
            &headers(&[(TOPIC_HEADER, "t"), (DUE_HEADER, "1700000000000")]),
            None,
            b"b",
            derived,
        )
        .unwrap();
        assert_eq!(
            at.id, "kafka:r:0:7",
            "no key: an id from the message's place"
        );
        assert_eq!(
            at.due,
            Due::At(UNIX_EPOCH + Duration::from_secs(1_700_000_000))
        );
        let wrong =
            |pairs: &[(&str, &str)]| read(&headers(pairs), None, b"b", derived).unwrap_err();
        assert!(wrong(&[(DELAY_HEADER, "5")]).contains(TOPIC_HEADER));
        assert!(wrong(&[(TOPIC_HEADER, "t")]).contains(DELAY_HEADER));
        assert!(wrong(&[(TOPIC_HEADER, "t"), (DELAY_HEADER, "soon")]).contains("\"soon\""));
        assert!(
            wrong(&[(TOPIC_HEADER, "t"), (DELAY_HEADER, "1"), (DUE_HEADER, "1")]).contains("both")
        );
    }
}
