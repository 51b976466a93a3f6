//! The sink of QStash's messages (the jobs of topic [`qstash::TOPIC`]): each is sent as its body
//! says (a [`Message`]: destination, method, headers, body, retries, retry delay, timeout), with
//! what QStash's deliveries carry (`Upstash-Message-Id`, `Upstash-Retried`, `Upstash-Signature`,
//! `User-Agent: Upstash-QStash`), and kept readable a while after its delivery.

use std::sync::Arc;
use std::time::Duration;

use delayer_client::Job;
use reqwest::Method;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, USER_AGENT};

use super::call::{self, header};
use super::retry_delay::RetryDelay;
use super::signature;
use crate::deliver::{Outcome, Sink};
use crate::metrics::Webhook as Figures;
use crate::qstash::{self, Message};

/// How long a message is reserved while it is sent; the loop touches it meanwhile, so this only
/// bounds a daemon killed mid-request: its message is sent again this long after.
const TTR: Duration = Duration::from_secs(60);
/// A request's timeout when the message sets none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a delivered message stays readable (`GET /v2/messages/{id}`, state `delivered`).
const KEPT: Duration = Duration::from_secs(300);
/// The most requests in flight.
const ROOM: usize = 1_000;

/// QStash's messages, sent.
pub struct Messages {
    pub http: reqwest::Client,
    /// `[qstash] current_signing_key`.
    pub signing_key: Option<String>,
    pub figures: Arc<Figures>,
    topics: Vec<String>,
}

impl Messages {
    pub fn new(http: reqwest::Client, signing_key: Option<String>, figures: Arc<Figures>) -> Self {
        Messages {
            http,
            signing_key,
            figures,
            topics: vec![qstash::TOPIC.to_string()],
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
        if let Some(key) = &self.signing_key {
            let signature = signature::sign(key, &message.url, &body);
            header(&mut headers, "upstash-signature", signature.as_bytes());
        }
        let timeout = message
            .timeout_ms
            .map_or(DEFAULT_TIMEOUT, Duration::from_millis);
        let request = self
            .http
            .request(method, url)
            .headers(headers)
            .timeout(timeout)
            .body(body);
        call::send(
            request,
            (&message.method, &message.url),
            timeout,
            "QStash's messages follow none",
            &self.figures,
        )
        .await
    }
}
