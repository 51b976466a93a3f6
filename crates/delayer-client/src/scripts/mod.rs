//! The Lua scripts, one `.lua` file each (its header says what KEYS, ARGV and the reply are), each
//! with `prelude.lua` in front, and the typed calls that read their replies.

use redis::{ErrorKind, RedisError, Value};

/// A type for the script in `$file`, with the shared prelude in front of it; loaded into Redis on
/// first use (and again whenever Redis lost it).
macro_rules! script_type {
    ($(#[$doc:meta])* $name:ident, $file:literal) => {
        $(#[$doc])*
        pub struct $name(redis::Script);

        impl Default for $name {
            fn default() -> $name {
                $name(redis::Script::new(concat!(
                    include_str!("prelude.lua"),
                    include_str!($file)
                )))
            }
        }
    };
}

pub mod ack;
pub mod find_reserved;
pub mod move_due;
pub mod push;
pub mod release;
pub mod requeue_dead;
pub mod reserve;
pub mod touch;

/// The error for a reply that does not have the shape a script's header promises.
fn malformed(script: &str) -> RedisError {
    RedisError::from((
        ErrorKind::UnexpectedReturnType,
        "malformed script reply",
        script.to_string(),
    ))
}

/// An array reply's first `N` items, and the rest; `None` for anything else, or a shorter array.
fn leading<const N: usize>(reply: Value) -> Option<([Value; N], std::vec::IntoIter<Value>)> {
    let Value::Array(items) = reply else {
        return None;
    };
    let mut items = items.into_iter();
    let first: Vec<Value> = items.by_ref().take(N).collect();
    Some((first.try_into().ok()?, items))
}

/// Ids and topics are whatever bytes clients wrote; those that are not UTF-8 are read lossily.
fn text(value: Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(
            String::from_utf8(bytes)
                .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned()),
        ),
        _ => None,
    }
}

fn texts(value: Value) -> Option<Vec<String>> {
    match value {
        Value::Array(items) => items.into_iter().map(text).collect(),
        _ => None,
    }
}

/// A flat array {a1, b1, a2, b2, ...} read as pairs.
fn pairs(value: Value) -> Option<Vec<(String, String)>> {
    let items = texts(value)?;
    let mut items = items.into_iter();
    let mut pairs = Vec::new();
    while let Some(first) = items.next() {
        pairs.push((first, items.next()?));
    }
    Some(pairs)
}

/// A score or time in unix seconds; "" (or nil) means none.
/// This host's clock as a script's fallback (`now` when the Redis user may not run TIME).
fn host_clock() -> String {
    format!("{:.6}", crate::time::unix_now())
}

fn seconds(value: Value) -> Option<f64> {
    text(value).and_then(|text| text.parse().ok())
}
