//! delayer-wire: the Redis layout that delayer's daemon and client share with the Go Delayer
//! server and its PHP and Go clients, and every operation on it.
//!
//! A job is a hash `delayer:job_bucket:<id>` {topic, body} and an entry of the sorted set
//! `delayer:job_pool` scored by its due time in unix seconds. When it falls due, the daemon moves
//! its id onto the list `delayer:ready_queue:<topic>`, where consumers pop it (at most once) or
//! reserve it (at least once: recorded in `delayer:reserved` until acked, delivered again when its
//! time to run passes). [`keys`] names every key and where a topic's keys are; [`scripts`] holds
//! every change of more than one key, one Lua script each, so that nothing is ever half done.
//! [`push`] checks jobs and writes them a batch at a time. [`history`] is what happened, counted
//! per minute; [`duration`] reads durations as people write them. [`name`] holds ids and topics
//! as the bytes clients wrote; [`time`] turns Redis's scores and times into Rust's; [`consumer`]
//! holds what consumers tell of themselves in their heartbeats; [`connection`] and [`watch`] reach Redis (one
//! server, Sentinel or a cluster) and hear of writes to keys. [`compact`] is where jobs our own
//! code pushes wait until shortly before they fall due, in a third of the memory.
#![forbid(unsafe_code)]

pub mod compact;
pub mod connection;
pub mod consumer;
pub mod duration;
pub mod history;
pub mod keys;
pub mod name;
pub mod push;
pub mod schedule;
pub mod scripts;
pub mod shared_connection;
pub mod time;
pub mod watch;

pub use connection::{Target, unanswered};
pub use name::{JobId, Topic};
pub use redis;
