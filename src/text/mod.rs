//! Text for people and programs: what comes from Redis escaped for logs, times as JSON and people
//! read them, a job's body in JSON.

pub mod body;
pub mod escape;
pub mod time;
