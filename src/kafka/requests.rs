//! Kafka in: delay requests read from `[kafka] requests_topic` in a consumer group, each pushed as
//! a job (what a request says: [`delay_request`](super::delay_request)); a bad one is skipped,
//! logged and counted. Of one key's requests read together, the last is pushed: in Kafka, a
//! key's later message is its current one. Offsets are committed only after the push; the last
//! offset pushed of each partition is kept in Redis too, written by the push's own script call,
//! so that a request read again after a crash between the push and the commit is not pushed
//! twice. Meanwhile [`lag`](super::lag) measures how many requests wait.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use delayer_client::redis;
use delayer_client::{Client, Error, Target};
use delayer_wire::connection::Connection;
use delayer_wire::keys::KAFKA_OFFSETS_PREFIX;
use delayer_wire::name::Topic;
use delayer_wire::push::{Failure, Limits, NewPush, Pusher};
use delayer_wire::scripts::push::Mark;
use delayer_wire::time::redis_now;
use rdkafka::Message as _;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::message::BorrowedMessage;
use rdkafka::{Offset, TopicPartitionList};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::delay_request::{Due, Request, request};
use super::lag;
use super::producer::{self, Reports};
use super::settings::KafkaSettings;
use crate::deliver::matches;
use crate::history::Tally;
use crate::metrics::{KafkaLink, Metrics};
use crate::service::duty::sleep_or_stop;

/// The most requests pushed in one call.
const BATCH: usize = 500;
/// How long a batch waits for more requests once it has one.
const GATHER: Duration = Duration::from_millis(20);
/// The longest wait for the consumer to leave its group at a stop.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(3);
/// The wait after Redis or the brokers failed.
const AFTER_A_FAILURE: Duration = Duration::from_secs(1);

/// Reads requests until `stop`; a batch pushed is committed before the loop looks at `stop`.
/// Pushes as `client` would (its layout and limits), counting them in `metrics`' history.
pub async fn run(
    client: &Client,
    target: &Target,
    settings: &KafkaSettings,
    topic: &str,
    instance: &str,
    metrics: &Metrics,
    stop: &CancellationToken,
) {
    let (link, history) = (&metrics.kafka, metrics.history());
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
    let consumer = Arc::new(consumer);
    let pusher = Pusher::new(client.settings().layout, Limits::from(client.settings()));
    let pushing = (&pusher, &*history);
    let reading = read(pushing, target, settings, link, &consumer, stop);
    let watching = lag::watch(consumer.clone(), topic, link, stop);
    tokio::join!(reading, watching);
    close(consumer).await;
}

/// Reads requests and pushes them, a batch at a time, until `stop`; a batch pushed is committed
/// before the loop looks at `stop`.
async fn read(
    pushing: (&Pusher, &Tally),
    target: &Target,
    settings: &KafkaSettings,
    link: &KafkaLink,
    consumer: &StreamConsumer<Reports>,
    stop: &CancellationToken,
) {
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
                sleep_or_stop(AFTER_A_FAILURE, stop).await;
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
            match push(pushing, target, settings, &offsets_key, &messages).await {
                Ok(pushed) => {
                    link.requests(pushed.jobs, pushed.bad, pushed.superseded);
                    break;
                }
                Err(error) => {
                    warn!("kafka: cannot push delay requests (tried again): {error:#}");
                    sleep_or_stop(AFTER_A_FAILURE, stop).await;
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
}

/// Closes `consumer` (it leaves its group and commits what is left), on a thread of its own:
/// librdkafka waits for the coordinator, which must not hold the daemon's stop for long. What
/// is not committed by then is read again, and skipped by the offsets kept in Redis.
async fn close(consumer: Arc<StreamConsumer<Reports>>) {
    let (closed, done) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        drop(consumer);
        let _ = closed.send(());
    });
    if tokio::time::timeout(CLOSE_TIMEOUT, done).await.is_err() {
        warn!("kafka: the consumer of delay requests did not close in time; stopping anyway");
    }
}

/// What came of a batch of requests.
struct Pushed {
    /// Pushed as jobs.
    jobs: usize,
    /// Skipped as bad.
    bad: usize,
    /// Left out for a later request of the same key in the batch.
    superseded: usize,
}

/// Where a request was read, for the log.
struct Place {
    partition: i32,
    offset: i64,
    /// The message's key, as text ("" for none).
    key: String,
}

impl Place {
    fn of(message: &BorrowedMessage<'_>) -> Place {
        Place {
            partition: message.partition(),
            offset: message.offset(),
            key: String::from_utf8_lossy(message.key().unwrap_or_default()).into_owned(),
        }
    }
}

/// Pushes the requests of `messages` not pushed before (by any daemon of the group: a partition
/// may have moved between them), recording with them the last offset pushed of each partition.
async fn push(
    pushing: (&Pusher, &Tally),
    target: &Target,
    settings: &KafkaSettings,
    offsets_key: &str,
    messages: &[BorrowedMessage<'_>],
) -> anyhow::Result<Pushed> {
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
    let (mut requests, mut bad) = (Vec::new(), 0);
    let mut last: HashMap<String, i64> = HashMap::new();
    for message in messages {
        let field = field(message);
        if message.offset() <= pushed[&field] {
            continue;
        }
        last.insert(field, message.offset());
        let place = Place::of(message);
        match request(message).and_then(|request| unless_looping(settings, request)) {
            Ok(request) => requests.push((place, request)),
            Err(why) => {
                warn!(
                    partition = place.partition,
                    offset = place.offset,
                    key = place.key,
                    "kafka: delay request skipped: {why}"
                );
                bad += 1;
            }
        }
    }
    let read = requests.len();
    let requests = latest_of_each_id(requests);
    let superseded = read - requests.len();
    let mark = Mark {
        key: offsets_key.to_string(),
        fields: last
            .into_iter()
            .map(|(field, offset)| (field, offset.to_string()))
            .collect(),
    };
    let (jobs, refused) = push_all(pushing, &mut redis, requests, &mark).await?;
    Ok(Pushed {
        jobs,
        bad: bad + refused,
        superseded,
    })
}

/// `request`, unless it is for a topic whose jobs would be delivered to the requests topic
/// itself: read back as a request, pushed again, and so on for ever.
fn unless_looping(settings: &KafkaSettings, request: Request) -> Result<Request, String> {
    if matches(&settings.topics, &request.topic) && settings.feeds_requests(&request.topic) {
        return Err(format!(
            "its topic {:?} is delivered to the Kafka topic {:?}, the requests topic itself: it \
             would come back as a request again and again",
            request.topic,
            settings.kafka_topic(&request.topic)
        ));
    }
    Ok(request)
}

/// Of the requests for one job id, the last read (in Kafka, a key's later message is the current
/// one); the others left out, in order otherwise.
fn latest_of_each_id<T>(requests: Vec<(T, Request)>) -> Vec<(T, Request)> {
    let mut last: HashMap<&str, usize> = HashMap::new();
    for (index, (_, request)) in requests.iter().enumerate() {
        last.insert(request.id.as_str(), index);
    }
    let keep: Vec<bool> = requests
        .iter()
        .enumerate()
        .map(|(index, (_, request))| last[request.id.as_str()] == index)
        .collect();
    requests
        .into_iter()
        .zip(keep)
        .filter_map(|(request, keep)| keep.then_some(request))
        .collect()
}

/// Pushes `requests` with `mark`, leaving out (with a warning) those the pusher refuses: a bad
/// one must not keep the others back. How many it pushed, and how many it left out.
async fn push_all(
    (pusher, history): (&Pusher, &Tally),
    redis: &mut Connection,
    mut requests: Vec<(Place, Request)>,
    mark: &Mark,
) -> anyhow::Result<(usize, usize)> {
    let mut refused = 0;
    loop {
        let jobs = requests.iter().map(|(_, request)| {
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
        let pushed = pusher
            .push(redis, jobs.collect::<Vec<_>>(), Some(mark))
            .await;
        let written: Vec<&Topic> = match &pushed {
            Ok(jobs) => jobs.iter().map(|(_, topic)| topic).collect(),
            Err(Failure::Call { pushed, .. }) => pushed.iter().map(|(_, _, topic)| topic).collect(),
            Err(_) => Vec::new(),
        };
        // Counted as a client counts its pushes; a count's minute is Redis's (best effort).
        if !written.is_empty()
            && let Ok(now) = redis_now(redis).await
        {
            history.pushed(written, now);
        }
        match pushed.map_err(Error::from) {
            Ok(ids) => return Ok((ids.len(), refused)),
            Err(Error::InBatch { index, error }) => {
                let (place, request) = requests.remove(index);
                warn!(
                    partition = place.partition,
                    offset = place.offset,
                    key = place.key,
                    id = request.id,
                    topic = request.topic,
                    "kafka: delay request skipped: {error}"
                );
                refused += 1;
            }
            Err(error) => return Err(error.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn request(id: &str, delay: u64) -> Request {
        Request {
            id: id.into(),
            topic: "t".into(),
            body: Vec::new(),
            due: Due::In(Duration::from_secs(delay)),
        }
    }

    #[test]
    fn of_one_ids_requests_the_last_read_is_kept() {
        let read = vec![
            (0, request("k", 600)),
            (1, request("other", 1)),
            (2, request("k", 1200)),
        ];
        let kept: Vec<(i32, u64)> = latest_of_each_id(read)
            .into_iter()
            .map(|(offset, request)| match request.due {
                Due::In(delay) => (offset, delay.as_secs()),
                Due::At(_) => unreachable!(),
            })
            .collect();
        assert_eq!(kept, [(1, 1), (2, 1200)]);
    }

    #[test]
    fn a_request_that_would_come_back_as_a_request_is_refused() {
        let mut settings = KafkaSettings::new("k:9092");
        settings.topics = vec!["*".into()];
        settings.requests_topic = Some("req".into());
        let mut looping = request("k", 0);
        looping.topic = "req".into();
        let why = unless_looping(&settings, looping).unwrap_err();
        assert!(why.contains("the requests topic itself"), "{why}");
        assert!(unless_looping(&settings, request("k", 0)).is_ok());
        // Not delivered to Kafka: a ready list of that name, no loop.
        settings.topics = vec!["orders".into()];
        let mut plain = request("k", 0);
        plain.topic = "req".into();
        assert!(unless_looping(&settings, plain).is_ok());
    }
}
