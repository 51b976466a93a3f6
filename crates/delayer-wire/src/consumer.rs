//! Consumers' heartbeats: what a consumer (a Worker, or a caller of the daemon's HTTP reserve)
//! tells Redis of itself every few seconds, read back for the console; and the consumer id that
//! starts each of its reserve tokens, so that a reservation's holder names its consumer.
//!
//! A beat writes two keys ([`CONSUMERS`](crate::keys::CONSUMERS) and the consumer's hash, see
//! [`keys::consumer`](crate::keys::consumer)) in one script call (`heartbeat.lua`), by Redis's
//! clock. A consumer whose last beat is older than its lifetime is gone; it stays listed, marked
//! so, until its last beat is [`KEPT`] old.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::name::Topic;

/// How often a Worker beats.
pub const BEAT: Duration = Duration::from_secs(5);
/// How long after its last beat a Worker counts as gone: three beats, so that one late or lost
/// beat does not mark it.
pub const LIFETIME: Duration = Duration::from_secs(15);
/// How long a consumer stays listed (marked gone) after its last beat; its hash expires then.
pub const KEPT: Duration = Duration::from_secs(600);
/// The most topics a beat records (a consumer of more says how many it has).
pub const MAX_TOPICS: usize = 100;
/// The longest name an HTTP caller may give itself.
pub const MAX_NAME: usize = 64;

/// The fields of a consumer's hash.
pub mod field {
    /// The host it runs on (an HTTP caller's: its address as the daemon sees it).
    pub const HOST: &str = "host";
    /// Its process id (none for an HTTP caller).
    pub const PID: &str = "pid";
    /// How many jobs it runs at once (a Worker's concurrency).
    pub const CONCURRENCY: &str = "concurrency";
    /// How many jobs it held at its last beat (running, and reserved not started).
    pub const HELD: &str = "held";
    /// When it first beat, unix milliseconds by Redis's clock (written by the first beat only).
    pub const STARTED: &str = "started";
    /// How long after a beat it counts as gone without another, in milliseconds.
    pub const LIFETIME: &str = "lifetime";
    /// How many topics it consumes; the first [`MAX_TOPICS`](super::MAX_TOPICS) follow, each in
    /// a field of its own, `topic:1`, `topic:2`, ... (any bytes, as topics are).
    pub const TOPICS: &str = "topics";
    /// What comes before a topic's place in its field's name.
    pub const TOPIC_PREFIX: &str = "topic:";
}

/// What a consumer tells of itself in each beat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    /// Its id: every reserve token of its starts with it (see [`token`]).
    pub id: String,
    /// The host it runs on; for an HTTP caller, its address.
    pub host: String,
    /// Its process id, when known.
    pub pid: Option<u32>,
    /// The topics it consumes.
    pub topics: Vec<Topic>,
    /// How many jobs it runs at once, when it says.
    pub concurrency: Option<usize>,
    /// How many jobs it holds now, when it knows.
    pub held: Option<usize>,
    /// How long after this beat it counts as gone without another.
    pub lifetime: Duration,
}

impl Heartbeat {
    /// The hash fields a beat writes (`started` apart: the script writes it once).
    pub fn fields(&self) -> Vec<(String, Vec<u8>)> {
        let number = |name: &str, value: String| (name.to_string(), value.into_bytes());
        let mut fields = vec![
            (field::HOST.to_string(), self.host.clone().into_bytes()),
            number(field::LIFETIME, self.lifetime.as_millis().to_string()),
            number(field::TOPICS, self.topics.len().to_string()),
        ];
        fields.extend(self.pid.map(|pid| number(field::PID, pid.to_string())));
        let concurrency = self
            .concurrency
            .map(|n| number(field::CONCURRENCY, n.to_string()));
        fields.extend(concurrency);
        fields.extend(self.held.map(|held| number(field::HELD, held.to_string())));
        for (index, topic) in self.topics.iter().take(MAX_TOPICS).enumerate() {
            let name = format!("{}{}", field::TOPIC_PREFIX, index + 1);
            fields.push((name, topic.as_bytes().to_vec()));
        }
        fields
    }
}

/// A consumer as the console lists it: what its last beat told, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumer {
    /// Its last beat (empty fields where its hash is gone).
    pub beat: Heartbeat,
    /// How many topics it consumes: more than `beat.topics` when over [`MAX_TOPICS`].
    pub topics_total: usize,
    /// When it first beat.
    pub started: Option<SystemTime>,
    /// When it last beat.
    pub last_seen: SystemTime,
    /// Whether its last beat is older than its lifetime: it stopped beating (killed, hung, or cut
    /// off from Redis) without a clean stop.
    pub gone: bool,
}

impl Consumer {
    /// Consumer `id` as its hash (`fields`) and its last beat (`last_ms`, unix ms) tell it, at
    /// `now_ms` by Redis's clock.
    pub fn read(id: String, last_ms: f64, now_ms: f64, fields: &HashMap<String, Vec<u8>>) -> Self {
        let text = |name: &str| fields.get(name).and_then(|v| std::str::from_utf8(v).ok());
        let number = |name: &str| text(name)?.parse::<u64>().ok();
        let lifetime = number(field::LIFETIME).map_or(LIFETIME, Duration::from_millis);
        let topics_total = number(field::TOPICS).unwrap_or(0) as usize;
        let topics = (1..=topics_total.min(MAX_TOPICS))
            .filter_map(|index| fields.get(&format!("{}{index}", field::TOPIC_PREFIX)))
            .map(|topic| Topic::from(topic.clone()))
            .collect();
        let at = |ms: f64| UNIX_EPOCH + Duration::from_millis(ms.max(0.0) as u64);
        Consumer {
            beat: Heartbeat {
                id,
                host: fields
                    .get(field::HOST)
                    .map(|host| String::from_utf8_lossy(host).into_owned())
                    .unwrap_or_default(),
                pid: number(field::PID).and_then(|pid| u32::try_from(pid).ok()),
                topics,
                concurrency: number(field::CONCURRENCY).map(|n| n as usize),
                held: number(field::HELD).map(|n| n as usize),
                lifetime,
            },
            topics_total,
            started: number(field::STARTED).map(|ms| at(ms as f64)),
            last_seen: at(last_ms),
            gone: now_ms - last_ms > lifetime.as_millis() as f64,
        }
    }
}

/// A Worker's id: its host (as [`id_part`] keeps it), its pid and `salt` (a few hex digits that
/// tell apart two Workers of one process, or a pid used again): `web-1:4242:9f3a1c`, as
/// Sidekiq names its processes, readable wherever the id shows.
pub fn worker_id(host: &str, pid: u32, salt: &str) -> String {
    format!("{}:{pid}:{salt}", id_part(host))
}

/// The id of an HTTP caller that named itself `name`: `http:NAME`. A name is 1 to [`MAX_NAME`]
/// letters, digits and `.`, `_`, `-`, `@`; never a `:`, so that no such id is a Worker's.
pub fn http_id(name: &str) -> Result<String, String> {
    let fits = |byte: u8| byte.is_ascii_alphanumeric() || b"._-@".contains(&byte);
    if name.is_empty() || name.len() > MAX_NAME || !name.bytes().all(fits) {
        return Err(format!(
            "consumer must be 1 to {MAX_NAME} letters, digits and . _ - @"
        ));
    }
    Ok(format!("http:{name}"))
}

/// `host` as a part of an id: letters, digits, `.`, `-` and `_` (anything else `_`), at most 64.
fn id_part(host: &str) -> String {
    let part: String = host
        .chars()
        .take(64)
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '-' | '_' => c,
            _ => '_',
        })
        .collect();
    if part.is_empty() {
        "unknown".into()
    } else {
        part
    }
}

/// The name of this host, as the kernel gives it (`unknown` when it cannot be read).
pub fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|name| name.trim().to_string())
        .ok()
        .filter(|name| !name.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}

/// The reserve token of consumer `consumer`'s call whose own token is `unique` (32 hex digits):
/// `<consumer>.<unique>`.
pub fn token(consumer: &str, unique: &str) -> String {
    format!("{consumer}.{unique}")
}

/// The consumer a reserve token names: what comes before the last `.`, when 32 hex digits follow
/// it. `None` for a token of a caller that named none (32 hex digits alone, as every token was
/// before consumers beat).
pub fn consumer_of_token(token: &str) -> Option<&str> {
    let (consumer, unique) = token.rsplit_once('.')?;
    let unique_ok = unique.len() == 32 && unique.bytes().all(|byte| byte.is_ascii_hexdigit());
    (unique_ok && !consumer.is_empty()).then_some(consumer)
}

/// The consumer a holders entry (`<attempt>:<token>`) names, as [`consumer_of_token`].
pub fn consumer_of_holder(holder: &[u8]) -> Option<&str> {
    let holder = std::str::from_utf8(holder).ok()?;
    consumer_of_token(holder.split_once(':')?.1)
}

/// The attempt a holders entry (`<attempt>:<token>`) names, as the scripts read it.
pub fn attempt_of_holder(holder: &[u8]) -> Option<u32> {
    let digits = &holder[..holder.iter().position(|&byte| byte == b':')?];
    std::str::from_utf8(digits).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNIQUE: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn a_token_names_its_consumer_and_older_tokens_none() {
        let id = worker_id("web-1.example.com", 4242, "9f3a1c");
        assert_eq!(id, "web-1.example.com:4242:9f3a1c");
        let token = token(&id, UNIQUE);
        assert_eq!(consumer_of_token(&token), Some(id.as_str()));
        let holder = format!("3:{token}");
        assert_eq!(consumer_of_holder(holder.as_bytes()), Some(id.as_str()));
        assert_eq!(attempt_of_holder(holder.as_bytes()), Some(3));
        assert_eq!(attempt_of_holder(b"x:y"), None);
        assert_eq!(consumer_of_token(UNIQUE), None, "a token before consumers");
        assert_eq!(consumer_of_holder(format!("1:{UNIQUE}").as_bytes()), None);
        assert_eq!(consumer_of_token(".0123456789abcdef0123456789abcdef"), None);
        assert_eq!(consumer_of_token("x.short"), None);
        assert_eq!(
            consumer_of_holder(b"1:\xff.0123456789abcdef0123456789abcdef"),
            None
        );
        let http = http_id("billing-1").unwrap();
        assert_eq!(
            consumer_of_token(&super::token(&http, UNIQUE)),
            Some("http:billing-1")
        );
    }

    #[test]
    fn names_and_hosts_keep_to_a_few_characters() {
        assert_eq!(http_id("a.b_c-d@e").unwrap(), "http:a.b_c-d@e");
        for wrong in ["", "a:b", "a b", "<img>", &"x".repeat(MAX_NAME + 1)] {
            assert!(http_id(wrong).is_err(), "{wrong}");
        }
        assert_eq!(worker_id("a:b c{d}", 1, "ff"), "a_b_c_d_:1:ff");
        assert_eq!(worker_id("", 1, "ff"), "unknown:1:ff");
    }

    #[test]
    fn a_beat_reads_back_as_written() {
        let beat = Heartbeat {
            id: "h:1:ab".into(),
            host: "h".into(),
            pid: Some(1),
            topics: vec!["a".into(), Topic::from(b"\xff\n".to_vec())],
            concurrency: Some(4),
            held: Some(2),
            lifetime: LIFETIME,
        };
        let mut fields: HashMap<String, Vec<u8>> = beat.fields().into_iter().collect();
        fields.insert(field::STARTED.into(), b"1000".to_vec());
        let read = Consumer::read("h:1:ab".into(), 5_000.0, 19_000.0, &fields);
        assert_eq!(read.beat, beat);
        assert_eq!(read.topics_total, 2);
        assert_eq!(read.started, Some(UNIX_EPOCH + Duration::from_secs(1)));
        assert_eq!(read.last_seen, UNIX_EPOCH + Duration::from_secs(5));
        assert!(!read.gone, "14 s after its beat, within 15");
        assert!(Consumer::read("h:1:ab".into(), 5_000.0, 20_001.0, &fields).gone);
        // Its hash expired or deleted: the id and the times alone.
        let bare = Consumer::read("x".into(), 0.0, 1.0, &HashMap::new());
        assert_eq!(
            (bare.beat.pid, bare.topics_total, bare.gone),
            (None, 0, false)
        );
    }

    #[test]
    fn a_beat_records_the_first_topics_and_how_many() {
        let beat = Heartbeat {
            id: "x".into(),
            host: String::new(),
            pid: None,
            topics: (0..MAX_TOPICS + 5)
                .map(|n| Topic::from(n.to_string()))
                .collect(),
            concurrency: None,
            held: None,
            lifetime: LIFETIME,
        };
        let fields: HashMap<String, Vec<u8>> = beat.fields().into_iter().collect();
        let read = Consumer::read("x".into(), 0.0, 0.0, &fields);
        assert_eq!(read.topics_total, MAX_TOPICS + 5);
        assert_eq!(read.beat.topics.len(), MAX_TOPICS);
    }
}
