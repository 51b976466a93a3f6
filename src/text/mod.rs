//! Text for people and programs: what comes from Redis escaped for logs, times as JSON and people
//! read them, bytes (bodies, ids, topics) in JSON.

pub mod bytes;
pub mod escape;
pub mod time;
