//! delayer: a Redis-native delayed-message daemon, wire-compatible with the Go Delayer server.
//!
//! Clients (the PHP and Go Delayer libraries, unchanged) write a job as a hash
//! `delayer:job_bucket:<id>` {topic, body} and add `<id>` to the sorted set `delayer:job_pool`
//! scored by its due time in unix seconds. This daemon moves each id, once it is due, onto the list
//! `delayer:ready_queue:<topic>` with one atomic Lua script (`move_due.lua`), so several daemons
//! can share one Redis without ever pushing a job twice. Consumers RPOP/BRPOP the list.
#![forbid(unsafe_code)]

pub mod body_json;
pub mod check;
pub mod cli;
pub mod cluster_mover;
pub mod cluster_nodes;
pub mod cluster_registry;
pub mod cluster_watch;
pub mod commands;
pub mod config;
pub mod daemon;
pub mod escape;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod move_log;
pub mod mover;
pub mod pidfile;
pub mod pool;
pub mod signals;
pub mod time_text;
pub mod wakeup;

use anyhow::Result;
use tracing::{error, info, warn};

use cluster_mover::ClusterMover;
pub use config::Config;
pub use deadpool_redis::redis;
use http::Http;
pub use mover::Mover;
pub use signals::Stop;

/// The service, checked and ready to run.
pub struct Service {
    mover: Movers,
    http: Option<Http>,
}

/// The timer loop for one Redis (or the master its sentinels name), or for a cluster.
enum Movers {
    Single(Box<Mover>),
    Cluster(Box<ClusterMover>),
}

impl Service {
    /// Logs the configuration's warnings, refuses a Redis that rejects the configured password
    /// or database (an unreachable one is waited for), and binds the HTTP server's address if
    /// `[http]` asks for one.
    pub async fn start(config: &Config) -> Result<Service> {
        for warning in config.unknown.iter().chain(&config.warnings) {
            warn!("{warning}");
        }
        if config.redis.cluster.is_some() {
            let mover = ClusterMover::new(config)?;
            mover.check_redis().await?;
            let http = Http::bind(config, mover.metrics(), mover.target()).await?;
            return Ok(Service {
                mover: Movers::Cluster(Box::new(mover)),
                http,
            });
        }
        let mover = Mover::new(config)?;
        mover.check_redis().await?;
        let http = Http::bind(config, mover.metrics(), mover.target()).await?;
        Ok(Service {
            mover: Movers::Single(Box::new(mover)),
            http,
        })
    }

    /// Logs the start line, moves jobs as they fall due (and serves HTTP) until a stop is asked
    /// for, then logs the stop line once the last script call and the requests in flight have
    /// finished.
    pub async fn run(self, stop: Stop) {
        info!("Service started successfully, PID: {}", std::process::id());
        let serving = async {
            if let Some(http) = self.http
                && let Err(error) = http.serve(&stop).await
            {
                error!("{error:#}");
            }
        };
        let moving = async {
            match &self.mover {
                Movers::Single(mover) => mover.run(&stop.graceful).await,
                Movers::Cluster(mover) => mover.run(&stop.graceful).await,
            }
        };
        tokio::join!(moving, serving);
        info!("Service stopped successfully, PID: {}", std::process::id());
    }
}

/// Starts the service and runs it until a stop is asked for.
pub async fn run(config: &Config, stop: Stop) -> Result<()> {
    Service::start(config).await?.run(stop).await;
    Ok(())
}

/// For `--check-config`: connects to the configured Redis once and returns its version.
pub async fn redis_version(config: &Config) -> Result<String> {
    pool::server_version(&config.redis).await
}
