//! delayer-client: push delayed jobs and consume them, through the Redis layout that the Go
//! Delayer server and its PHP and Go clients share, so that old and new clients see each other's
//! jobs.
//!
//! ```no_run
//! # async fn example() -> delayer_client::Result<()> {
//! use std::time::Duration;
//! let client = delayer_client::Client::connect("redis://127.0.0.1:6379/0").await?;
//! let id = client.push("order.close", "order 42").delay(Duration::from_secs(1800)).await?;
//! // Later, in a consumer: at least once, with 30 s to finish each job.
//! if let Some(job) = client.reserve(&["order.close"], Duration::from_secs(30), Duration::from_secs(5)).await? {
//!     // ... close the order ...
//!     client.ack(&job).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! What operators call to look at the queues and act on them (stats, waiting jobs a page at a
//! time, dead lists, pauses, consumers, the history, schedules) is an [`Inspector`]'s, made from a
//! client whose connection it shares; what its calls answer is in [`inspector`].
//!
//! The layout (see [`delayer_wire::keys`]): a job is a hash `delayer:job_bucket:<id>` {topic, body} and an entry
//! of the sorted set `delayer:job_pool` scored by its due time in unix seconds. When it falls due,
//! the daemon moves its id onto the list `delayer:ready_queue:<topic>`, where consumers pop it
//! (legacy, at most once) or reserve it (at least once: it is recorded in `delayer:reserved`
//! until acked, and delivered again if its time to run passes). Every change of more than one key
//! is one Lua script ([`delayer_wire::scripts`]), so that nothing is ever half done.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod client;
mod error;
pub mod inspector;
mod job;
mod settings;
pub mod worker;

pub use client::Client;
pub use client::finish::{Acked, Nacked};
pub use client::pop::HeldJob;
pub use client::push::{Push, Removed};
pub use delayer_wire::consumer::{self, Heartbeat};
pub use delayer_wire::keys::Layout;
pub use delayer_wire::push::NewPush;
pub use delayer_wire::{JobId, Target, Topic, redis};
pub use error::{Error, Result};
pub use inspector::Inspector;
pub use job::{Job, JobInfo, Receipt, State};
pub use settings::{
    DEFAULT_COMPACT_AFTER, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_TTR,
    DEFAULT_READY_MAX_LIFETIME, MAX_BATCH, MAX_DELAY, MAX_PUSH_BATCH, MIN_TTR, Settings,
};
pub use worker::Worker;
