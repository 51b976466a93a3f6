//! The webhook sink: a due job sent as one HTTP request (its body, headers naming it, QStash's
//! signature when keys are set), delivered on a 2xx reply. Anything else is a failed attempt,
//! tried again after the retry delay (or the receiver's `Retry-After`) until the retries are
//! spent, then dead-listed with the status and the start of the reply.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use delayer_client::Job;
use delayer_wire::time::to_unix;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, LOCATION, USER_AGENT};
use reqwest::{Method, Response, StatusCode};
use tokio_util::sync::CancellationToken;

use super::failure;
use super::gate::Gate;
use super::settings::WebhookSettings;
use super::signature;
use crate::deliver::{Outcome, Sink, matches};
use crate::metrics::Webhook as Figures;

/// The most bytes of a reply read: enough for a reason, and a receiver that answers without end
/// holds nothing more.
pub const MOST_REPLY_BYTES: usize = 64 * 1024;
/// The most bytes of a reply kept in a dead job's reason.
const REASON_REPLY_BYTES: usize = 300;
/// A `Retry-After` longer than this is ignored, as QStash does: the retry delay applies.
const MOST_RETRY_AFTER: Duration = Duration::from_secs(86_400);

/// The headers that name the job (those of Kafka's records, and its id).
pub const ID_HEADER: &str = "delayer-id";
pub const TOPIC_HEADER: &str = "delayer-topic";
pub const DUE_HEADER: &str = "delayer-due-ms";
pub const ATTEMPT_HEADER: &str = "delayer-attempt";

/// Due jobs to one webhook.
pub struct Webhook {
    pub settings: WebhookSettings,
    /// What this webhook's log lines start with: `webhook NAME`.
    pub title: String,
    pub http: reqwest::Client,
    /// `[qstash] current_signing_key`: requests are signed with it when it is set.
    pub signing_key: Option<String>,
    pub figures: Arc<Figures>,
    /// The topics of the sinks before this one (Kafka's, earlier webhooks'): not this one's.
    pub taken: Vec<String>,
    /// Its flow control, with `parallelism` or `rate`.
    pub gate: Option<Gate>,
    /// The daemon's stop: a request not started yet is not sent.
    pub stop: CancellationToken,
}

impl Sink for Webhook {
    fn name(&self) -> &str {
        &self.title
    }

    fn address(&self) -> &str {
        &self.settings.url
    }

    fn topics(&self) -> &[String] {
        &self.settings.topics
    }

    fn takes(&self, topic: &str) -> bool {
        matches(&self.settings.topics, topic) && !matches(&self.taken, topic)
    }

    fn ttr(&self) -> Duration {
        self.settings.ttr()
    }

    fn room(&self) -> usize {
        self.settings.room()
    }

    fn keep(&self) -> Option<Duration> {
        None
    }

    /// `attempt` tries done: another after the retry delay while retries are left.
    fn retry(&self, attempt: u32) -> Option<Duration> {
        (attempt <= self.settings.retries).then(|| self.settings.retry_delay.before(attempt))
    }

    async fn send(&self, job: &Job) -> Outcome {
        let _pass = match &self.gate {
            Some(gate) => match gate.enter(&self.stop).await {
                Some(pass) => Some(pass),
                None => return Outcome::NotSent,
            },
            None => None,
        };
        let url = url_of(&self.settings.url, job);
        let request = match self.request(&url, job) {
            Ok(request) => request,
            Err(why) => return Outcome::Refused(why),
        };
        let outcome = match request.send().await {
            Ok(reply) => self.outcome(reply).await,
            Err(error) => {
                let (status, why) = failure::of_request(&error, self.settings.timeout);
                Err((status, why, None))
            }
        };
        match outcome {
            Ok(outcome) => outcome,
            Err((status, why, after)) => {
                self.figures.failed(&status);
                Outcome::Failed {
                    why: format!("{why} ({} {url})", self.settings.method),
                    after,
                }
            }
        }
    }
}

/// A failed attempt: its status for the metrics, why for the dead list, and the receiver's wait.
type Failure = (String, String, Option<Duration>);

impl Webhook {
    /// The request that delivers `job` to `url`, or why none can.
    fn request(&self, url: &str, job: &Job) -> Result<reqwest::RequestBuilder, String> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|error| format!("the URL {url:?} made for this job is not valid: {error}"))?;
        let method = Method::from_bytes(self.settings.method.as_bytes()).expect("checked");
        let mut headers = HeaderMap::new();
        headers.insert(USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE));
        header(&mut headers, ID_HEADER, job.id.as_bytes());
        header(&mut headers, TOPIC_HEADER, job.topic.as_bytes());
        header(
            &mut headers,
            ATTEMPT_HEADER,
            job.attempts.to_string().as_bytes(),
        );
        if let Some(due) = job.due {
            header(
                &mut headers,
                DUE_HEADER,
                unix_ms(due).to_string().as_bytes(),
            );
        }
        if let Some(key) = &self.signing_key {
            let signature = signature::sign(key, url, &job.body);
            header(&mut headers, "upstash-signature", signature.as_bytes());
            header(&mut headers, "upstash-message-id", job.id.as_bytes());
            let retried = job.attempts.saturating_sub(1).to_string();
            header(&mut headers, "upstash-retried", retried.as_bytes());
        }
        Ok(self
            .http
            .request(method, parsed)
            .headers(headers)
            .body(job.body.clone()))
    }

    /// What `reply` means: delivered on a 2xx, refused on QStash's non-retryable 489, a failed
    /// attempt otherwise.
    async fn outcome(&self, reply: Response) -> Result<Outcome, Failure> {
        let status = reply.status();
        let after = retry_after(reply.headers());
        let location = reply.headers().get(LOCATION).cloned();
        let non_retryable = reply
            .headers()
            .get("upstash-nonretryable-error")
            .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"true"));
        // Read, up to the limit, so that the connection is kept for the next request.
        let start = read_start(reply).await;
        if status.is_success() {
            return Ok(Outcome::Delivered);
        }
        let said = reason_of(status, &start);
        if status.as_u16() == 489 && non_retryable {
            self.figures.failed("489");
            return Ok(Outcome::Refused(format!(
                "{said}, with Upstash-NonRetryable-Error: not tried again ({} {})",
                self.settings.method, self.settings.url
            )));
        }
        if status.is_redirection() {
            let to = location.map_or_else(
                || "no Location".into(),
                |to| String::from_utf8_lossy(to.as_bytes()).into_owned(),
            );
            let why = format!(
                "HTTP {} redirect to {to}, not followed ([webhook.{}] follow_redirects = no)",
                status.as_u16(),
                self.settings.name
            );
            return Err(("redirect".into(), why, after));
        }
        Err((status.as_u16().to_string(), said, after))
    }
}

const USER_AGENT_VALUE: &str = concat!("delayer/", env!("CARGO_PKG_VERSION"));

/// `template` with `{topic}` and `{id}` filled in from `job`, percent-encoded.
pub fn url_of(template: &str, job: &Job) -> String {
    template
        .replace("{topic}", &percent_encoded(job.topic.as_bytes()))
        .replace("{id}", &percent_encoded(job.id.as_bytes()))
}

/// `bytes` as one URL path segment: unreserved characters as they are, the rest `%XX`.
fn percent_encoded(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len());
    for &byte in bytes {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            text.push(byte as char);
        } else {
            text += &format!("%{byte:02X}");
        }
    }
    text
}

/// Adds header `name`: `value`, percent-encoded if it holds what a header value cannot.
fn header(headers: &mut HeaderMap, name: &'static str, value: &[u8]) {
    let value = HeaderValue::from_bytes(value).unwrap_or_else(|_| {
        HeaderValue::from_str(&percent_encoded(value)).expect("percent-encoded is ASCII")
    });
    headers.insert(HeaderName::from_static(name), value);
}

fn unix_ms(time: SystemTime) -> i64 {
    (to_unix(time) * 1e3).round() as i64
}

/// The start of `reply`'s body: at most [`MOST_REPLY_BYTES`] read, however long it is.
async fn read_start(mut reply: Response) -> Vec<u8> {
    let mut start = Vec::new();
    while start.len() < MOST_REPLY_BYTES {
        match reply.chunk().await {
            Ok(Some(chunk)) => start.extend_from_slice(&chunk),
            // A reply cut short tells as much as it said.
            Ok(None) | Err(_) => break,
        }
    }
    start.truncate(MOST_REPLY_BYTES);
    start
}

/// "HTTP 503 Service Unavailable: <the reply's start>", its white space made single spaces.
fn reason_of(status: StatusCode, reply: &[u8]) -> String {
    let reason = match status.canonical_reason() {
        Some(reason) => format!("HTTP {} {reason}", status.as_u16()),
        None => format!("HTTP {}", status.as_u16()),
    };
    let text = String::from_utf8_lossy(&reply[..reply.len().min(REASON_REPLY_BYTES * 4)]);
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if words.is_empty() {
        return format!("{reason}: (an empty reply)");
    }
    let mut said: String = words.chars().take(REASON_REPLY_BYTES).collect();
    if said.len() < words.len() || reply.len() > REASON_REPLY_BYTES * 4 {
        said += "...";
    }
    format!("{reason}: {said}")
}

/// The receiver's own wait before a retry: `Retry-After` (or a rate limit's reset), in seconds,
/// as an HTTP date or as a duration such as `6m5s`; ignored past a day.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let names = [
        "retry-after",
        "x-ratelimit-reset",
        "x-ratelimit-reset-requests",
        "x-ratelimit-reset-tokens",
    ];
    let value = names
        .iter()
        .find_map(|name| headers.get(*name)?.to_str().ok())?
        .trim();
    let wait = if let Ok(seconds) = value.parse::<u64>() {
        Duration::from_secs(seconds)
    } else if let Ok(date) = chrono::DateTime::parse_from_rfc2822(value) {
        let at = SystemTime::from(date);
        at.duration_since(SystemTime::now()).unwrap_or_default()
    } else {
        delayer_wire::duration::parse(value).ok()?
    };
    (wait <= MOST_RETRY_AFTER).then_some(wait)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use reqwest::StatusCode;
    use reqwest::header::{HeaderMap, HeaderValue};

    use super::{percent_encoded, reason_of, retry_after};

    #[test]
    fn a_segment_is_percent_encoded() {
        assert_eq!(percent_encoded(b"order.close-1_~"), "order.close-1_~");
        assert_eq!(percent_encoded(b"a b/c?\xff"), "a%20b%2Fc%3F%FF");
    }

    #[test]
    fn retry_after_takes_seconds_dates_and_durations_up_to_a_day() {
        let wait = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert("retry-after", HeaderValue::from_str(value).unwrap());
            retry_after(&headers)
        };
        assert_eq!(wait("0"), Some(Duration::ZERO));
        assert_eq!(wait("10"), Some(Duration::from_secs(10)));
        assert_eq!(wait("6m5s"), Some(Duration::from_secs(365)));
        assert_eq!(wait("Wed, 21 Oct 2015 07:28:00 GMT"), Some(Duration::ZERO));
        assert_eq!(wait("100000"), None);
        assert_eq!(wait("soon"), None);
    }

    #[test]
    fn a_reason_has_the_status_and_the_start_of_the_reply() {
        let status = StatusCode::SERVICE_UNAVAILABLE;
        assert_eq!(
            reason_of(status, b"down for\n maintenance"),
            "HTTP 503 Service Unavailable: down for maintenance"
        );
        assert_eq!(
            reason_of(status, b""),
            "HTTP 503 Service Unavailable: (an empty reply)"
        );
        let long = reason_of(status, &[b'x'; 70_000]);
        assert!(long.ends_with("x..."), "{long}");
        assert!(long.len() < 400, "{}", long.len());
    }
}
