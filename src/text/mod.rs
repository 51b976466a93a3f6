//! Text for people and programs: what comes from Redis escaped for logs, times as JSON and people
//! read them, bytes (bodies, ids, topics) in JSON, and schedules and waiting jobs as the CLI and
//! the HTTP API show them.

pub mod bytes;
pub mod escape;
pub mod schedule;
pub mod time;
pub mod waiting;
