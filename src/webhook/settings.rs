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
    /// The most requests in flight to this webhook at once, over every daemon; `None`: no limit
    /// (each daemon keeps up to [`MOST_IN_FLIGHT`]).
    pub parallelism: Option<u32>,
    /// The most requests started in a period, over every daemon, spaced evenly; `None`: no limit.
    pub rate: Option<Rate>,
    /// Whether a 3xx reply's `Location` is followed (up to 10 hops); if not, it is a failure.
    pub follow_redirects: bool,
}

/// The most requests one daemon keeps in flight to one webhook (and the most `parallelism`).
pub const MOST_IN_FLIGHT: u32 = 1_000;

/// A rate: `count` requests a `period`, spaced evenly (one every `period / count`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub count: u32,
    pub period: Duration,
}

impl Rate {
    /// `500/s`, `10/2s`, `100/1m`, or a bare count a second; or what is wrong.
    pub fn parse(text: &str) -> Result<Rate, String> {
        let wrong = || format!("{text:?} is not a rate like 500/s, 100/1m or 10/2s");
        let (count, period) = text.split_once('/').unwrap_or((text, "s"));
        let count: u32 = count.trim().parse().map_err(|_| wrong())?;
        let period = period.trim();
        // "/s" is "/1s".
        let period = if period.starts_with(|c: char| c.is_ascii_digit()) {
            delayer_wire::duration::parse(period).map_err(|_| wrong())?
        } else {
            delayer_wire::duration::parse(&format!("1{period}")).map_err(|_| wrong())?
        };
        if count == 0 || period.is_zero() {
            return Err(format!(
                "{text:?}: a rate needs a count and a period above 0"
            ));
        }
        Ok(Rate { count, period })
    }

    /// The time between two starts.
    pub fn spacing(&self) -> Duration {
        self.period / self.count
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}s", self.count, self.period.as_secs_f64())
    }
}

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
            parallelism: None,
            rate: None,
            follow_redirects: false,
        }
    }

    /// How long a job is reserved while it is sent: its request's time and a margin (the loop
    /// touches the reservation while the request lasts, so this only bounds a daemon killed
    /// mid-request).
    pub fn ttr(&self) -> Duration {
        self.timeout + Duration::from_secs(5)
    }

    /// How many jobs one daemon takes on at once: the parallelism, and with a rate no more than
    /// two seconds of starts (the others stay waiting in Redis, free for other daemons).
    pub fn room(&self) -> usize {
        let mut room = self.parallelism.unwrap_or(MOST_IN_FLIGHT);
        if let Some(rate) = self.rate {
            let two_seconds = Duration::from_secs(2).as_secs_f64() / rate.spacing().as_secs_f64();
            room = room.min((two_seconds as u32).max(1));
        }
        room as usize
    }
}
