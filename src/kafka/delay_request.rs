//! What a delay request read from Kafka says: the target topic, when, the job's id and its body.
//! Headers (`delayer-topic`, and `delayer-delay-ms` or `delayer-due-ms`; the value is the body),
//! or, when the message has none of them, a JSON envelope as its value:
//! `{"topic": "t", "delay_ms": 1500 | "due_ms": 1700000000000, "id": "j1", "body": ...}`.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rdkafka::Message as _;
use rdkafka::message::{BorrowedMessage, Headers};
use serde::Deserialize;

use super::record::{DUE_HEADER, TOPIC_HEADER};

/// The header with a request's delay, in milliseconds.
pub const DELAY_HEADER: &str = "delayer-delay-ms";

/// One request, read.
#[derive(Debug, PartialEq)]
pub struct Request {
    pub id: String,
    pub topic: String,
    pub body: Vec<u8>,
    pub due: Due,
}

/// When a request's job falls due.
#[derive(Debug, PartialEq)]
pub enum Due {
    In(Duration),
    At(SystemTime),
}

/// The envelope: a request in the value, for producers that cannot set headers. Unknown fields
/// are refused, so that a misspelt `delay_ms` is told rather than read as no delay.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    topic: String,
    delay_ms: Option<u64>,
    due_ms: Option<u64>,
    id: Option<String>,
    /// A string is the body as is; any other JSON value is the body as JSON text.
    body: serde_json::Value,
}

/// The request `message` holds, or why it is none.
pub fn request(message: &BorrowedMessage<'_>) -> Result<Request, String> {
    let mut headers: HashMap<&str, &[u8]> = HashMap::new();
    if let Some(all) = message.headers() {
        for header in all.iter() {
            if let Some(value) = header.value {
                headers.insert(header.key, value);
            }
        }
    }
    let derived = || {
        format!(
            "kafka:{}:{}:{}",
            message.topic(),
            message.partition(),
            message.offset()
        )
    };
    read(
        &headers,
        message.key(),
        message.payload().unwrap_or_default(),
        derived,
    )
}

/// A request from its headers, key and value; `derived` makes its id when it names none.
fn read(
    headers: &HashMap<&str, &[u8]>,
    key: Option<&[u8]>,
    value: &[u8],
    derived: impl FnOnce() -> String,
) -> Result<Request, String> {
    let id = |named: Option<String>| -> Result<String, String> {
        match named.filter(|id| !id.is_empty()) {
            Some(id) => Ok(id),
            None => match key.filter(|key| !key.is_empty()) {
                Some(key) => {
                    String::from_utf8(key.to_vec()).map_err(|_| "its key is not UTF-8".to_string())
                }
                None => Ok(derived()),
            },
        }
    };
    if ![TOPIC_HEADER, DELAY_HEADER, DUE_HEADER]
        .iter()
        .any(|name| headers.contains_key(name))
    {
        let mut request = enveloped(value)?;
        request.id = id(Some(request.id))?;
        return checked(request);
    }
    let text = |name: &str| -> Result<Option<&str>, String> {
        headers
            .get(name)
            .map(|value| {
                std::str::from_utf8(value).map_err(|_| format!("header {name} is not UTF-8"))
            })
            .transpose()
    };
    let millis = |name: &str| -> Result<Option<u64>, String> {
        text(name)?
            .map(|value| {
                value.trim().parse::<u64>().map_err(|_| {
                    format!("header {name} = {value:?} is not a whole number of milliseconds")
                })
            })
            .transpose()
    };
    let topic = text(TOPIC_HEADER)?
        .filter(|topic| !topic.is_empty())
        .ok_or_else(|| format!("no header {TOPIC_HEADER} naming the topic to push to"))?;
    let due = when(
        millis(DELAY_HEADER)?,
        millis(DUE_HEADER)?,
        (DELAY_HEADER, DUE_HEADER),
    )?;
    checked(Request {
        id: id(None)?,
        topic: topic.to_string(),
        body: value.to_vec(),
        due,
    })
}

/// `request`, unless its topic is odd: a control character, or blanks around the name, is
/// almost always a producer's mistake, and would make a topic nobody reads.
fn checked(request: Request) -> Result<Request, String> {
    let topic = &request.topic;
    if topic.chars().any(char::is_control) || topic.trim() != topic {
        return Err(format!(
            "the topic {topic:?} has a control character or blanks around it"
        ));
    }
    Ok(request)
}

/// The request an envelope holds; its id empty when it names none.
fn enveloped(value: &[u8]) -> Result<Request, String> {
    let envelope: Envelope = serde_json::from_slice(value).map_err(|error| {
        format!(
            "no header {TOPIC_HEADER}, and the value is no JSON envelope \
             {{\"topic\", \"delay_ms\" or \"due_ms\", \"body\"}}: {error}"
        )
    })?;
    if envelope.topic.is_empty() {
        return Err("the envelope's topic is empty".into());
    }
    let due = when(envelope.delay_ms, envelope.due_ms, ("delay_ms", "due_ms"))?;
    let body = match envelope.body {
        serde_json::Value::String(text) => text.into_bytes(),
        serde_json::Value::Null => return Err("the envelope's body is null".into()),
        json => json.to_string().into_bytes(),
    };
    Ok(Request {
        id: envelope.id.unwrap_or_default(),
        topic: envelope.topic,
        body,
        due,
    })
}

/// When, from a delay or a due time (unix ms), exactly one of them given (named by `names`).
fn when(delay: Option<u64>, due: Option<u64>, names: (&str, &str)) -> Result<Due, String> {
    let (delay_name, due_name) = names;
    match (delay, due) {
        (Some(_), Some(_)) => Err(format!("both {delay_name} and {due_name}: give one")),
        (Some(delay), None) => Ok(Due::In(Duration::from_millis(delay))),
        (None, Some(due)) => Ok(Due::At(UNIX_EPOCH + Duration::from_millis(due))),
        (None, None) => Err(format!("no {delay_name} or {due_name}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers<'a>(pairs: &[(&'a str, &'a str)]) -> HashMap<&'a str, &'a [u8]> {
        pairs.iter().map(|(k, v)| (*k, v.as_bytes())).collect()
    }

    #[test]
    fn a_request_names_its_topic_and_a_delay_or_a_due_time() {
        let derived = || "kafka:r:0:7".to_string();
        let request = read(
            &headers(&[(TOPIC_HEADER, "t"), (DELAY_HEADER, "1500")]),
            Some(b"job-1"),
            b"body",
            derived,
        )
        .unwrap();
        assert_eq!(
            request,
            Request {
                id: "job-1".into(),
                topic: "t".into(),
                body: b"body".to_vec(),
                due: Due::In(Duration::from_millis(1500)),
            }
        );
        let at = read(
            &headers(&[(TOPIC_HEADER, "t"), (DUE_HEADER, "1700000000000")]),
            None,
            b"b",
            derived,
        )
        .unwrap();
        assert_eq!(
            at.id, "kafka:r:0:7",
            "no key: an id from the message's place"
        );
        assert_eq!(
            at.due,
            Due::At(UNIX_EPOCH + Duration::from_secs(1_700_000_000))
        );
        let wrong =
            |pairs: &[(&str, &str)]| read(&headers(pairs), None, b"b", derived).unwrap_err();
        assert!(wrong(&[(DELAY_HEADER, "5")]).contains(TOPIC_HEADER));
        assert!(wrong(&[(TOPIC_HEADER, "t")]).contains(DELAY_HEADER));
        assert!(wrong(&[(TOPIC_HEADER, "t"), (DELAY_HEADER, "soon")]).contains("\"soon\""));
        assert!(
            wrong(&[(TOPIC_HEADER, "t"), (DELAY_HEADER, "1"), (DUE_HEADER, "1")]).contains("both")
        );
    }

    #[test]
    fn without_headers_the_value_is_a_json_envelope() {
        let derived = || "kafka:r:0:7".to_string();
        let open =
            |value: &str, key: Option<&[u8]>| read(&headers(&[]), key, value.as_bytes(), derived);
        let request = open(
            r#"{"topic": "t", "delay_ms": 1500, "id": "j1", "body": "hello"}"#,
            Some(b"key"),
        )
        .unwrap();
        assert_eq!(
            request,
            Request {
                id: "j1".into(),
                topic: "t".into(),
                body: b"hello".to_vec(),
                due: Due::In(Duration::from_millis(1500)),
            },
            "the envelope's id before the key"
        );
        let json = open(
            r#"{"topic": "t", "due_ms": 1700000000000, "body": {"a": [1]}}"#,
            Some(b"k"),
        )
        .unwrap();
        assert_eq!(
            (json.id.as_str(), json.body.as_slice()),
            ("k", &br#"{"a":[1]}"#[..]),
            "no id: the key; a body not a string: its JSON text"
        );
        assert_eq!(
            json.due,
            Due::At(UNIX_EPOCH + Duration::from_secs(1_700_000_000))
        );
        let unkeyed = open(r#"{"topic": "t", "delay_ms": 0, "body": "b"}"#, None).unwrap();
        assert_eq!(unkeyed.id, "kafka:r:0:7");
        let wrong = |value: &str| open(value, None).unwrap_err();
        assert!(
            wrong("plain text").contains("no JSON envelope"),
            "{}",
            wrong("plain text")
        );
        assert!(wrong(r#"{"delay_ms": 5, "body": "b"}"#).contains("missing field `topic`"));
        assert!(wrong(r#"{"topic": "t", "body": "b"}"#).contains("no delay_ms or due_ms"));
        assert!(
            wrong(r#"{"topic": "t", "delay_ms": 1, "due_ms": 1, "body": "b"}"#).contains("both")
        );
        assert!(
            wrong(r#"{"topic": "t", "delay": 5, "body": "b"}"#).contains("unknown field `delay`")
        );
        assert!(wrong(r#"{"topic": "t", "delay_ms": -5, "body": "b"}"#).contains("delay_ms"));
        assert!(wrong(r#"{"topic": "", "delay_ms": 5, "body": "b"}"#).contains("topic is empty"));
        assert!(wrong(r#"{"topic": "t", "delay_ms": 5, "body": null}"#).contains("null"));
        assert!(wrong(r#"{"topic": "t\n", "delay_ms": 5, "body": "b"}"#).contains("control"));
        let odd = read(
            &headers(&[(TOPIC_HEADER, " t"), (DELAY_HEADER, "5")]),
            None,
            b"b",
            derived,
        );
        assert!(odd.unwrap_err().contains("blanks"));
        // Headers, even a partial set, are read as headers.
        let partial = read(
            &headers(&[(DELAY_HEADER, "5")]),
            None,
            br#"{"topic": "t"}"#,
            derived,
        );
        assert!(partial.unwrap_err().contains(TOPIC_HEADER));
    }
}
