//! The `Upstash-*` headers of a publish (or of a batch's item), read into a [`Message`] and its due
//! time; a bad value is refused naming its header.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::HeaderMap;

use crate::qstash::{Callback, Flow, Message};
use crate::webhook::{METHODS, RetryDelay};

/// The longest `Upstash-Timeout`: a day.
const MOST_TIMEOUT_MS: u64 = 86_400_000;

/// When a message falls due.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Due {
    /// After this long, by Redis's clock (`Upstash-Delay`, or none).
    After(Duration),
    /// At this unix time (`Upstash-Not-Before`).
    At(SystemTime),
}

/// The message the headers `headers` make for `url` with `body`, published at `now` (unix ms),
/// with at most `most_retries`, and when it falls due; or what is wrong, naming the header.
pub(super) fn message(
    headers: &HeaderMap,
    url: String,
    body: &[u8],
    now: i64,
    most_retries: u32,
) -> Result<(Message, Due), String> {
    let text = |name: &str| -> Result<Option<String>, String> {
        match headers.get(name) {
            None => Ok(None),
            Some(value) => value
                .to_str()
                .map(|value| Some(value.trim().to_string()))
                .map_err(|_| format!("{name}: not text")),
        }
    };
    let wrong = |name: &str, value: &str, why: &str| format!("{name}: {value:?}: {why}");
    let method = match text("upstash-method")? {
        Some(method) => {
            let upper = method.to_ascii_uppercase();
            if !METHODS.contains(&upper.as_str()) {
                return Err(wrong(
                    "Upstash-Method",
                    &method,
                    "expected GET, POST, PUT, PATCH or DELETE",
                ));
            }
            upper
        }
        None => "POST".into(),
    };
    let retries = match text("upstash-retries")? {
        Some(retries) => retries
            .parse::<u32>()
            .ok()
            .filter(|retries| *retries <= most_retries)
            .ok_or_else(|| {
                wrong(
                    "Upstash-Retries",
                    &retries,
                    &format!("expected a whole number from 0 to {most_retries}"),
                )
            })?,
        None => 3.min(most_retries),
    };
    let retry_delay = match text("upstash-retry-delay")? {
        Some(expression) => {
            RetryDelay::parse(&expression)
                .map_err(|why| wrong("Upstash-Retry-Delay", &expression, &why))?;
            Some(expression)
        }
        None => None,
    };
    let timeout_ms = match text("upstash-timeout")? {
        Some(timeout) => Some(
            delayer_wire::duration::parse(&timeout)
                .ok()
                .map(|timeout| timeout.as_millis() as u64)
                .filter(|ms| (1..=MOST_TIMEOUT_MS).contains(ms))
                .ok_or_else(|| {
                    wrong(
                        "Upstash-Timeout",
                        &timeout,
                        "expected a duration up to 1d, such as 30s",
                    )
                })?,
        ),
        None => None,
    };
    let (not_before, due) = match (text("upstash-not-before")?, text("upstash-delay")?) {
        (Some(at), _) => {
            let seconds: f64 = at
                .parse()
                .ok()
                .filter(|seconds: &f64| seconds.is_finite() && *seconds >= 0.0)
                .ok_or_else(|| wrong("Upstash-Not-Before", &at, "expected unix seconds"))?;
            let at = UNIX_EPOCH + Duration::from_secs(seconds.trunc() as u64);
            ((seconds.trunc() as i64 * 1000).max(now), Due::At(at))
        }
        (None, Some(delay)) => {
            let delay = delayer_wire::duration::parse(&delay)
                .map_err(|why| wrong("Upstash-Delay", &delay, &why))?;
            (now + delay.as_millis() as i64, Due::After(delay))
        }
        (None, None) => (now, Due::After(Duration::ZERO)),
    };
    let flow = match (
        text("upstash-flow-control-key")?,
        text("upstash-flow-control-value")?,
    ) {
        (Some(key), Some(value)) => Some(
            Flow::parse(&key, &value)
                .map_err(|why| wrong("Upstash-Flow-Control-Value", &value, &why))?,
        ),
        (Some(key), None) => {
            return Err(wrong(
                "Upstash-Flow-Control-Key",
                &key,
                "given without Upstash-Flow-Control-Value (parallelism=N, rate=N, period=P)",
            ));
        }
        (None, Some(value)) => {
            return Err(wrong(
                "Upstash-Flow-Control-Value",
                &value,
                "given without Upstash-Flow-Control-Key",
            ));
        }
        (None, None) => None,
    };
    let labels = text("upstash-label")?
        .map(|labels| {
            labels
                .split(',')
                .map(|label| label.trim().to_string())
                .filter(|label| !label.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let failure_callback = callback_of(headers, "upstash-failure-callback", most_retries)?;
    let callback = callback_of(headers, "upstash-callback", most_retries)?;
    let mut forwarded = Vec::new();
    for (name, value) in headers {
        let name = name.as_str();
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        if let Some(rest) = name.strip_prefix("upstash-forward-") {
            forwarded.push((canonical(rest), value));
        } else if name == "content-type" && !headers.contains_key("upstash-forward-content-type") {
            forwarded.push(("Content-Type".into(), value));
        }
    }
    let mut message = Message {
        url,
        method,
        headers: forwarded,
        body: String::new(),
        retries,
        retry_delay,
        timeout_ms,
        labels,
        created_at: now,
        not_before,
        flow,
        schedule_id: None,
        queue: None,
        callback,
        failure_callback,
    };
    message.set_body(body);
    Ok((message, due))
}

/// The callback that header `prefix` (`upstash-callback`) and those it starts configure: its
/// `-Method`, `-Retries`, `-Retry-Delay`, `-Timeout`, and the headers to send it
/// (`-Forward-<Name>`, or, as QStash's Python SDK writes them, `-<Name>`).
fn callback_of(
    headers: &HeaderMap,
    prefix: &str,
    most_retries: u32,
) -> Result<Option<Callback>, String> {
    let Some(url) = headers.get(prefix) else {
        return Ok(None);
    };
    let url = url
        .to_str()
        .map_err(|_| format!("{}: not text", canonical(prefix)))?
        .trim()
        .to_string();
    let mut callback = Callback {
        url,
        method: "POST".into(),
        headers: Vec::new(),
        retries: None,
        retry_delay: None,
        timeout_ms: None,
    };
    let start = format!("{prefix}-");
    for (name, value) in headers {
        let Some(key) = name.as_str().strip_prefix(&start) else {
            continue;
        };
        let shown = canonical(name.as_str());
        let value = value
            .to_str()
            .map_err(|_| format!("{shown}: not text"))?
            .trim();
        let wrong = |why: &str| format!("{shown}: {value:?}: {why}");
        match key {
            "method" => {
                let method = value.to_ascii_uppercase();
                if !METHODS.contains(&method.as_str()) {
                    return Err(wrong("expected GET, POST, PUT, PATCH or DELETE"));
                }
                callback.method = method;
            }
            "retries" => {
                let retries = value.parse::<u32>().ok().filter(|r| *r <= most_retries);
                callback.retries = Some(retries.ok_or_else(|| {
                    wrong(&format!("expected a whole number from 0 to {most_retries}"))
                })?);
            }
            "retry-delay" => {
                RetryDelay::parse(value).map_err(|why| wrong(&why))?;
                callback.retry_delay = Some(value.to_string());
            }
            "timeout" => {
                let timeout = delayer_wire::duration::parse(value).map_err(|why| wrong(&why))?;
                callback.timeout_ms = Some(timeout.as_millis() as u64);
            }
            "delay" => return Err(format!("{shown}: not served by delayer yet")),
            other => {
                let name = other.strip_prefix("forward-").unwrap_or(other);
                callback.headers.push((canonical(name), value.to_string()));
            }
        }
    }
    Ok(Some(callback))
}

/// A header's name as people write it: `upstash-forward-x-id` is `Upstash-Forward-X-Id`.
pub(super) fn canonical(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("-")
}
