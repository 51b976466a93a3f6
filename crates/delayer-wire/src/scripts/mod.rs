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
pub mod body;
pub mod compact_job;
pub mod compact_page;
pub mod compact_stage;
pub mod count;
pub mod dead_job;
pub mod find_reserved;
pub mod heartbeat;
pub mod move_due;
pub mod pool_page;
pub mod promote;
pub mod push;
pub mod release;
pub mod requeue_dead;
pub mod reserve;
pub mod resume;
pub mod schedule_claim;
pub mod schedule_save;
pub mod schedule_state;
pub mod touch;
pub mod webhook_gate;

/// Whether a receipt named a job's current reservation (for touch and release).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    /// It did, and the script did its work.
    Current,
    /// It did not (the reservation lapsed, or is another's): nothing changed.
    NotCurrent,
    /// The receipt has no token, and the job's attempts were counted afresh since its first
    /// reservation, so its attempt names more than one: nothing changed.
    TokenNeeded,
}

/// What a WRONGTYPE error says, without Redis's note of the place in a script where it was
/// raised, and the key it names when a script's own check said (`KEY holds a string, not a
/// list`); `None` for any other error.
pub fn wrong_type(error: &RedisError) -> Option<(&str, Option<&str>)> {
    if error.code() != Some("WRONGTYPE") {
        return None;
    }
    let detail = error.detail().unwrap_or("WRONGTYPE");
    let detail = match detail.rsplit_once(" script: ") {
        Some((said, place)) if place.contains(", on @user_script:") => said,
        _ => detail,
    };
    let named = detail.rsplit_once(" holds a ").map(|(key, _)| key);
    Some((detail, named))
}

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

/// A bulk string's bytes: an id or a topic, whatever bytes clients wrote (see [`JobId`]).
///
/// [`JobId`]: crate::JobId
fn name<T: From<Vec<u8>>>(value: Value) -> Option<T> {
    match value {
        Value::BulkString(bytes) => Some(T::from(bytes)),
        _ => None,
    }
}

fn names<T: From<Vec<u8>>>(value: Value) -> Option<Vec<T>> {
    match value {
        Value::Array(items) => items.into_iter().map(name).collect(),
        _ => None,
    }
}

/// A flat array {a1, b1, a2, b2, ...} read as pairs.
fn pairs<A: From<Vec<u8>>, B: From<Vec<u8>>>(value: Value) -> Option<Vec<(A, B)>> {
    let Value::Array(items) = value else {
        return None;
    };
    let mut items = items.into_iter();
    let mut pairs = Vec::new();
    while let Some(first) = items.next() {
        pairs.push((name(first)?, name(items.next()?)?));
    }
    Some(pairs)
}

/// This host's clock as a script's fallback (`now` when the Redis user may not run TIME).
fn host_clock() -> String {
    format!("{:.6}", crate::time::unix_now())
}

/// A score or time in unix seconds; "" (or nil) means none.
fn seconds(value: Value) -> Option<f64> {
    let bytes: Vec<u8> = name(value)?;
    std::str::from_utf8(&bytes).ok()?.parse().ok()
}
