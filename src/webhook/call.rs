//! One HTTP request of a delivery, and what its reply means: delivered on a 2xx; refused for good
//! on QStash's 489 with `Upstash-NonRetryable-Error`; a failed try otherwise (a status, a
//! timeout, a refused connection, DNS, TLS, a redirect not followed), with the receiver's own
//! wait when it gave one. At most [`MOST_REPLY_BYTES`] of a reply is read. For the webhooks' sink
//! and QStash's messages alike.

use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, LOCATION};
use reqwest::{RequestBuilder, Response, StatusCode};

use super::failure;
use crate::deliver::Outcome;
use crate::metrics::Webhook as Figures;

/// The most bytes of a reply read: enough for a reason, and a receiver that answers without end
/// holds nothing more.
pub const MOST_REPLY_BYTES: usize = 64 * 1024;
/// The most bytes of a reply kept in a dead job's reason.
const REASON_REPLY_BYTES: usize = 300;
/// A `Retry-After` longer than this is ignored, as QStash does: the retry delay applies.
const MOST_RETRY_AFTER: Duration = Duration::from_secs(86_400);

/// A reply: its status, headers, and its body's start (at most [`MOST_REPLY_BYTES`]).
#[derive(Debug, Clone, Default)]
pub struct Replied {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Sends `request` (made for `method` and `url`, within `timeout`) and says what became of it,
/// with the reply if one came; a failed try is counted in `figures` by its status. `follow`
/// says why a redirect is not followed, for the reason.
pub async fn send(
    request: RequestBuilder,
    (method, url): (&str, &str),
    timeout: Duration,
    follow: &str,
    figures: &Figures,
) -> (Outcome, Option<Replied>) {
    let (outcome, replied) = match request.send().await {
        Ok(reply) => {
            let (outcome, replied) = outcome(reply, follow).await;
            (outcome, Some(replied))
        }
        Err(error) => {
            let (status, why) = failure::of_request(&error, timeout);
            (Err((status, why, None)), None)
        }
    };
    let outcome = match outcome {
        Ok(Outcome::Refused(why)) => {
            figures.failed("489");
            Outcome::Refused(format!("{why} ({method} {url})"))
        }
        Ok(outcome) => outcome,
        Err((status, why, after)) => {
            figures.failed(&status);
            Outcome::Failed {
                why: format!("{why} ({method} {url})"),
                after,
            }
        }
    };
    (outcome, replied)
}

/// A failed try: its status for the metrics, why for the dead list, and the receiver's wait.
type Failure = (String, String, Option<Duration>);

/// What `reply` means, and the reply.
async fn outcome(reply: Response, follow: &str) -> (Result<Outcome, Failure>, Replied) {
    let status = reply.status();
    let after = retry_after(reply.headers());
    let location = reply.headers().get(LOCATION).cloned();
    let non_retryable = reply
        .headers()
        .get("upstash-nonretryable-error")
        .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"true"));
    let headers = reply
        .headers()
        .iter()
        .map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            (name.as_str().to_string(), value)
        })
        .collect();
    // Read, up to the limit, so that the connection is kept for the next request.
    let body = read_start(reply).await;
    let outcome = judged(status, after, location, non_retryable, follow, &body);
    let replied = Replied {
        status: status.as_u16(),
        headers,
        body,
    };
    (outcome, replied)
}

/// What a reply of `status` means, given its headers' say and its body's start.
fn judged(
    status: StatusCode,
    after: Option<Duration>,
    location: Option<HeaderValue>,
    non_retryable: bool,
    follow: &str,
    start: &[u8],
) -> Result<Outcome, Failure> {
    if status.is_success() {
        return Ok(Outcome::Delivered);
    }
    let said = reason_of(status, start);
    if status.as_u16() == 489 && non_retryable {
        return Ok(Outcome::Refused(format!(
            "{said}, with Upstash-NonRetryable-Error: not tried again"
        )));
    }
    if status.is_redirection() {
        let to = location.map_or_else(
            || "no Location".into(),
            |to| String::from_utf8_lossy(to.as_bytes()).into_owned(),
        );
        let why = format!(
            "HTTP {} redirect to {to}, not followed ({follow})",
            status.as_u16()
        );
        return Err(("redirect".into(), why, after));
    }
    Err((status.as_u16().to_string(), said, after))
}

/// `bytes` as one URL path segment: unreserved characters as they are, the rest `%XX`.
pub fn percent_encoded(bytes: &[u8]) -> String {
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
pub fn header(headers: &mut HeaderMap, name: &'static str, value: &[u8]) {
    let value = HeaderValue::from_bytes(value).unwrap_or_else(|_| {
        HeaderValue::from_str(&percent_encoded(value)).expect("percent-encoded is ASCII")
    });
    headers.insert(HeaderName::from_static(name), value);
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
