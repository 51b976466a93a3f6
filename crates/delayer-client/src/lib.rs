//! delayer-client: push delayed jobs and consume them, through the Redis layout that the Go
//! Delayer server and its PHP and Go clients share, so that old and new clients see each other's
//! jobs.
//!
//! The layout (see [`keys`]): a job is a hash `delayer:job_bucket:<id>` {topic, body} and an entry
//! of the sorted set `delayer:job_pool` scored by its due time in unix seconds. When it falls due
//! the daemon moves its id onto the list `delayer:ready_queue:<topic>` (the move script,
//! [`move_script`]), where consumers pop it.
#![forbid(unsafe_code)]

pub mod keys;
pub mod move_script;

pub use redis;
