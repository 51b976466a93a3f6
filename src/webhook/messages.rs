//! The sink of QStash's messages (the jobs of topic [`qstash::TOPIC`]): each is sent as its body
//! says (a [`Message`]: destination, method, headers, body, retries, retry delay, timeout), with
//! what QStash's deliveries carry (`Upstash-Message-Id`, `Upstash-Retried`, `Upstash-Signature`,
//! `User-Agent: Upstash-QStash`), and kept readable a while after its delivery.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use delayer_client::{Client, Job};
use reqwest::Method;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, USER_AGENT};
use serde_json::json;
use tracing::warn;

use delayer_wire::scripts::webhook_gate::Limits;
use delayer_wire::shared_connection::SharedConnection;
use tokio_util::sync::CancellationToken;

use super::call::{self, Replied, header};
use super::gate::{self, Gate};
use super::lines::Lines;
use super::retry_delay::RetryDelay;
use super::signature;
use crate::deliver::{Outcome, Sink};
use crate::metrics::Webhook as Figures;
use crate::qstash::{self, Callback, Flow, Message, header_map, new_id};

/// How long a message is reserved while it is sent; the loop touches it meanwhile, so this only
/// bounds a daemon killed mid-request: its message is sent again this long after.
const TTR: Duration = Duration::from_secs(60);
/// A request's timeout when the message sets none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a delivered message stays readable (`GET /v2/messages/{id}`, state `delivered`).
const KEPT: Duration = Duration::from_secs(300);
/// The most requests in flight.
const ROOM: usize = 1_000;
/// A flow-control lease ends this long after its request's timeout (a daemon killed
/// mid-request).
const LEASE_MARGIN: Duration = Duration::from_secs(5);

/// QStash's messages, sent.
pub struct Messages {
    pub http: reqwest::Client,
    /// `[qstash] current_signing_key`.
    pub signing_key: Option<String>,
    pub figures: Arc<Figures>,
    topics: Vec<String>,
    /// For the flow-control keys' leases.
    redis: Arc<SharedConnection>,
    /// The gate of each flow-control key seen, made at its first message.
    gates: Mutex<HashMap<String, Arc<Gate>>>,
    /// The queues' lines: whose turn it is.
    lines: Arc<Lines>,
    /// For the callbacks, published as messages of their own.
    client: Client,
    /// The daemon's stop: a message not started yet is not sent.
    pub stop: CancellationToken,
    /// Cancelled once the delivery loop ended: the gates give back their leases and end.
    pub ended: CancellationToken,
}

impl Messages {
    pub fn new(
        http: reqwest::Client,
        signing_key: Option<String>,
        figures: Arc<Figures>,
        redis: Arc<SharedConnection>,
        client: Client,
    ) -> Self {
        Messages {
            client,
            http,
            signing_key,
            figures,
            topics: vec![qstash::TOPIC.to_string()],
            lines: Arc::new(Lines::new(redis.clone())),
            redis,
            gates: Mutex::default(),
            stop: CancellationToken::new(),
            ended: CancellationToken::new(),
        }
    }

    /// The gate of `flow`'s key, going by its limits (the newest message's are the key's).
    fn gate(&self, flow: &Flow, timeout: Duration) -> Arc<Gate> {
        let limits = Limits {
            most: flow.parallelism,
            spacing: flow
                .rate
                .map(|rate| Duration::from_secs(flow.period) / rate),
            lease: timeout + LEASE_MARGIN,
        };
        let mut gates = self.gates.lock().expect("not poisoned");
        if let Some(gate) = gates.get(&flow.key) {
            gate.update(limits);
            return gate.clone();
        }
        let name = format!("qstash.flow.{}", flow.key);
        let (gate, serving) = gate::new(&name, limits, self.redis.clone(), self.ended.clone());
        tokio::spawn(serving);
        let gate = Arc::new(gate);
        gates.insert(flow.key.clone(), gate.clone());
        gate
    }
}

impl Messages {
    /// Publishes, to `callback`, what became of this try of `job` (QStash's callback body): the
    /// reply if one came; with `dead`, the DLQ id too.
    async fn tell(
        &self,
        job: &Job,
        message: &Message,
        callback: &Callback,
        replied: Option<&Replied>,
        dead: bool,
    ) {
        let replied = replied.cloned().unwrap_or_default();
        let mut said = json!({
            "status": replied.status,
            "header": header_map(&replied.headers),
            "body": STANDARD.encode(&replied.body),
            "retried": job.attempts.saturating_sub(1),
            "maxRetries": message.retries,
            "sourceMessageId": job.id.to_string(),
            "url": message.url,
            "method": message.method,
            "sourceHeader": header_map(&message.headers),
            "sourceBody": message.body,
            "notBefore": message.not_before,
            "createdAt": message.created_at,
        });
        if let Some(schedule) = &message.schedule_id {
            said["scheduleId"] = json!(schedule);
        }
        if dead {
            said["dlqId"] = json!(job.id.to_string());
        }
        let now = delayer_wire::schedule::unix_ms_now();
        let mut headers = callback.headers.clone();
        headers.push(("Content-Type".into(), "application/json".into()));
        let mut told = Message {
            url: callback.url.clone(),
            method: callback.method.clone(),
            headers,
            body: String::new(),
            retries: callback.retries.unwrap_or(message.retries),
            retry_delay: callback
                .retry_delay
                .clone()
                .or_else(|| message.retry_delay.clone()),
            timeout_ms: callback.timeout_ms,
            labels: Vec::new(),
            created_at: now,
            not_before: now,
            flow: None,
            schedule_id: None,
            queue: None,
            callback: None,
            failure_callback: None,
        };
        told.set_body(said.to_string().as_bytes());
        let pushed = self
            .client
            .push(qstash::TOPIC, told.to_job())
            .id(new_id())
            .await;
        if let Err(error) = pushed {
            warn!(id = %job.id, "qstash: cannot publish the callback to {} ({error})", callback.url);
        }
    }
}

impl Sink for Messages {
    fn name(&self) -> &str {
        "qstash"
    }

    fn address(&self) -> &str {
        "each message's destination"
    }

    fn topics(&self) -> &[String] {
        &self.topics
    }

    fn ttr(&self) -> Duration {
        TTR
    }

    fn room(&self) -> usize {
        ROOM
    }

    fn keep(&self) -> Option<Duration> {
        Some(KEPT)
    }

    fn retry(&self, job: &Job) -> Option<Duration> {
        let message = Message::of_job(&job.body).ok()?;
        let tried = job.attempts;
        if tried > message.retries {
            return None;
        }
        let delay = match &message.retry_delay {
            Some(expression) => RetryDelay::parse(expression).ok()?,
            None => RetryDelay::Backoff,
        };
        Some(delay.before(tried))
    }

    async fn send(&self, job: &Job) -> Outcome {
        let message = match Message::of_job(&job.body) {
            Ok(message) => message,
            Err(why) => return Outcome::Refused(why),
        };
        let Ok(method) = Method::from_bytes(message.method.as_bytes()) else {
            return Outcome::Refused(format!("its method {:?} is not one", message.method));
        };
        let url = match reqwest::Url::parse(&message.url) {
            Ok(url) => url,
            Err(error) => {
                return Outcome::Refused(format!("its URL {:?} is not one: {error}", message.url));
            }
        };
        let timeout = message
            .timeout_ms
            .map_or(DEFAULT_TIMEOUT, Duration::from_millis);
        // A queue's message waits for its turn in the queue's line.
        if let Some(queue) = &message.queue
            && !self
                .lines
                .wait_turn(queue, &job.id.to_string(), &self.stop)
                .await
        {
            return Outcome::NotSent;
        }
        // Within its flow-control key's limits, over every daemon.
        let _pass = match &message.flow {
            Some(flow) => match self.gate(flow, timeout).enter(&self.stop).await {
                Some(pass) => Some(pass),
                None => return Outcome::NotSent,
            },
            None => None,
        };
        let body = message.body_bytes();
        let mut headers = HeaderMap::new();
        for (name, value) in &message.headers {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                headers.append(name, value);
            }
        }
        headers.insert(USER_AGENT, HeaderValue::from_static("Upstash-QStash"));
        header(&mut headers, "upstash-message-id", job.id.as_bytes());
        let retried = job.attempts.saturating_sub(1).to_string();
        header(&mut headers, "upstash-retried", retried.as_bytes());
        if let Some(schedule) = &message.schedule_id {
            header(&mut headers, "upstash-schedule-id", schedule.as_bytes());
        }
        if let Some(key) = &self.signing_key {
            let signature = signature::sign(key, &message.url, &body);
            header(&mut headers, "upstash-signature", signature.as_bytes());
        }
        let request = self
            .http
            .request(method, url)
            .headers(headers)
            .timeout(timeout)
            .body(body);
        let (outcome, replied) = call::send(
            request,
            (&message.method, &message.url),
            timeout,
            "QStash's messages follow none",
            &self.figures,
        )
        .await;
        // Done for good (delivered, or dead): the queue's next message may go.
        let dead = match &outcome {
            Outcome::Refused(_) => true,
            Outcome::Failed { .. } => job.attempts > message.retries,
            _ => false,
        };
        let done = dead || outcome == Outcome::Delivered;
        if let Some(queue) = message.queue.as_ref().filter(|_| done) {
            self.lines.leave(queue, &job.id.to_string()).await;
        }
        // Callbacks: of each try but a last one that fails, and of the tries running out.
        if let Some(callback) = message.callback.as_ref().filter(|_| !dead) {
            self.tell(job, &message, callback, replied.as_ref(), false)
                .await;
        }
        if let Some(callback) = message.failure_callback.as_ref().filter(|_| dead) {
            self.tell(job, &message, callback, replied.as_ref(), true)
                .await;
        }
        outcome
    }
}
