//! A message published through QStash's API, as its job's body holds it: where it goes, how, and
//! what to send, so that any daemon delivers it and `get` shows it.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};

/// A message: its job's body, as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// The destination: the delivery's URL and its signature's `sub`.
    pub url: String,
    pub method: String,
    /// The headers delivered: the `Upstash-Forward-*` ones (their prefix taken off) and
    /// `Content-Type`.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// The body, base64 (it may be any bytes).
    #[serde(default)]
    pub body: String,
    /// How many times a failed delivery is tried again.
    pub retries: u32,
    /// `Upstash-Retry-Delay` as given; none: QStash's backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_delay: Option<String>,
    /// `Upstash-Timeout`, ms; none: the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// `Upstash-Label`'s labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// When it was published, unix ms.
    pub created_at: i64,
    /// When it falls due, unix ms.
    pub not_before: i64,
    /// `Upstash-Flow-Control-Key` and `-Value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<Flow>,
    /// The schedule whose tick this message is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_id: Option<String>,
    /// The queue it was enqueued into: sent in its order, within its parallelism.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Told of each try, but the last that fails (`Upstash-Callback`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback: Option<Callback>,
    /// Told once its tries ran out (`Upstash-Failure-Callback`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_callback: Option<Callback>,
}

/// Where a message's callback goes, and how: a message of its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Callback {
    pub url: String,
    pub method: String,
    /// Sent with it (`Upstash-Callback-Forward-*`).
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// None: the message's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_delay: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// A flow-control key and its limits, over every daemon: the newest message's limits are the
/// key's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flow {
    pub key: String,
    /// The most in flight at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<u32>,
    /// The most started a period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<u32>,
    /// The rate's period, in whole seconds (QStash's unit).
    pub period: u64,
}

impl Flow {
    /// The limits of `key` that `value` (`parallelism=3, rate=4, period=2s`) gives, or what is
    /// wrong.
    pub fn parse(key: &str, value: &str) -> Result<Flow, String> {
        let mut flow = Flow {
            key: key.to_string(),
            parallelism: None,
            rate: None,
            period: 1,
        };
        if key.is_empty() {
            return Err("the key is empty".into());
        }
        for pair in value
            .split(',')
            .map(str::trim)
            .filter(|pair| !pair.is_empty())
        {
            let (name, number) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?} is not name=value"))?;
            let positive = || {
                number
                    .trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("{name} = {number:?}: expected a whole number above 0"))
            };
            match name.trim() {
                "parallelism" => flow.parallelism = Some(positive()?),
                "rate" => flow.rate = Some(positive()?),
                "period" => {
                    let period = delayer_wire::duration::parse(number)
                        .map_err(|why| format!("period: {why}"))?;
                    if period.as_secs() < 1 || period.as_secs() > 7 * 86_400 {
                        return Err(format!("period = {number:?}: expected 1s to 7d"));
                    }
                    flow.period = period.as_secs();
                }
                other => {
                    return Err(format!("{other:?} is not parallelism, rate or period"));
                }
            }
        }
        if flow.parallelism.is_none() && flow.rate.is_none() {
            return Err("it sets neither parallelism nor rate".into());
        }
        Ok(flow)
    }
}

impl Message {
    /// The message a job's body holds, or why it holds none.
    pub fn of_job(body: &[u8]) -> Result<Message, String> {
        serde_json::from_slice(body)
            .map_err(|error| format!("its body is not a QStash message ({error})"))
    }

    /// The job's body.
    pub fn to_job(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a message serializes")
    }

    /// The body, decoded.
    pub fn body_bytes(&self) -> Vec<u8> {
        STANDARD.decode(&self.body).unwrap_or_default()
    }

    /// `bytes` as the body.
    pub fn set_body(&mut self, bytes: &[u8]) {
        self.body = STANDARD.encode(bytes);
    }
}

/// `headers` as QStash shows them: each name with its values.
pub fn header_map(headers: &[(String, String)]) -> serde_json::Map<String, serde_json::Value> {
    let mut shown = serde_json::Map::new();
    for (name, value) in headers {
        let values = shown
            .entry(name.clone())
            .or_insert_with(|| serde_json::Value::Array(Vec::new()));
        if let serde_json::Value::Array(values) = values {
            values.push(value.clone().into());
        }
    }
    shown
}

/// A new message id: `msg_` and 26 random letters and digits (safe in a URL's path, as the SDKs
/// paste it there).
pub fn new_id() -> String {
    const ALPHABET: &[u8] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
    let mut random = [0u8; 26];
    SystemRandom::new()
        .fill(&mut random)
        .expect("the system's random source");
    let text: String = random
        .iter()
        .map(|byte| ALPHABET[usize::from(*byte) % ALPHABET.len()] as char)
        .collect();
    format!("msg_{text}")
}
