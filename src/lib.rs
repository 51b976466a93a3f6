//! delayer: a Redis-native delayed-message daemon, wire-compatible with the Go Delayer server.
//!
//! Clients (the PHP and Go Delayer libraries, unchanged) write a job as a hash
//! `delayer:job_bucket:<id>` {topic, body} and add `<id>` to the sorted set `delayer:job_pool`
//! scored by its due time in unix seconds. This daemon moves each id, once it is due, onto the list
//! `delayer:ready_queue:<topic>` with one atomic Lua script (`move_due.lua`), so several daemons
//! can share one Redis without ever pushing a job twice. Consumers RPOP/BRPOP the list.
#![forbid(unsafe_code)]

pub mod config;
pub mod keys;
pub mod logging;
pub mod mover;
pub mod pidfile;
pub mod pool;
pub mod signals;

use anyhow::Result;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

pub use config::Config;
pub use deadpool_redis::redis;
pub use mover::Mover;

/// Runs the service until `shutdown` is cancelled: logs the start line, moves jobs as they fall
/// due, and logs the stop line once the last script call has finished.
pub async fn run(config: &Config, shutdown: CancellationToken) -> Result<()> {
    for warning in &config.warnings {
        warn!("{warning}");
    }
    let mover = Mover::new(config)?;
    mover.check_redis().await?;
    let pid = std::process::id();
    info!("Service started successfully, PID: {pid}");
    mover.run(&shutdown).await;
    info!("Service stopped successfully, PID: {pid}");
    Ok(())
}
