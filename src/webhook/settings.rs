//! A `[webhook.NAME]` section, read and checked (by `config::webhooks`): where a topic's due jobs
//! are sent, how, and how often a failed one is tried again.

use std::time::Duration;

use super::retry_delay::RetryDelay;

/// One webhook: the due jobs of `topics`, each sent by HTTP to `url`.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookSettings {
    /// The section's name after `webhook.`: in logs, metrics and the console.
    pub name: String,
    /// The delayer topics delivered here: names, or patterns where `*` matches any run of
    /// characters.
    pub topics: Vec<String>,
    /// The URL, `{topic}` and `{id}` filled in (percent-encoded) for each job.
    pub url: String,
    /// The request's method: POST, PUT, PATCH, GET or DELETE (the body is sent with each).
    pub method: String,
    /// How long a request may take, connecting and reading the reply included.
    pub timeout: Duration,
    /// How many times a failed delivery is tried again before its job goes to the dead list.
    pub retries: u32,
    /// The wait before each retry.
    pub retry_delay: RetryDelay,
    /// The most requests in flight to this webhook at once.
    pub parallelism: u32,
    /// Whether a 3xx reply's `Location` is followed (up to 10 hops); if not, it is a failure.
    pub follow_redirects: bool,
}

/// The most requests in flight to one webhook by default.
pub const DEFAULT_PARALLELISM: u32 = 100;

/// Up to this, one daemon keeps its requests in flight; QStash's own limit is about there too.
pub const MOST_PARALLELISM: u32 = 10_000;

/// The methods a webhook may use.
pub const METHODS: [&str; 5] = ["POST", "PUT", "PATCH", "GET", "DELETE"];

impl WebhookSettings {
    /// A webhook named `name` with the defaults, for the section's keys to fill in.
    pub fn new(name: &str, topics: Vec<String>, url: &str) -> WebhookSettings {
        WebhookSettings {
            name: name.to_string(),
            topics,
            url: url.to_string(),
            method: "POST".into(),
            timeout: Duration::from_secs(30),
            retries: 3,
            retry_delay: RetryDelay::default(),
            parallelism: DEFAULT_PARALLELISM,
            follow_redirects: false,
        }
    }

    /// How long a job is reserved while it is sent: its request's time and a margin (the loop
    /// touches the reservation while the request lasts, so this only bounds a daemon killed
    /// mid-request).
    pub fn ttr(&self) -> Duration {
        self.timeout + Duration::from_secs(30)
    }
}

/// `[qstash]`'s signing keys: each webhook request is signed with the current one.
#[derive(Debug, Clone, PartialEq)]
pub struct SigningKeys {
    /// Signs every request.
    pub current: String,
    /// Signs once `current` is retired (rotation); a receiver checks with both.
    pub next: Option<String>,
}
