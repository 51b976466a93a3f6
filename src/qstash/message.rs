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
