//! The timer loop: moves each job, when it falls due, from its pool to its topic's ready list,
//! and delivers again the jobs whose reservation lapsed. One Redis ([`single`]) and a cluster
//! ([`cluster`]) are two loops over one step ([`step`]): the loops decide when to poll and over
//! which connection, the step moves, releases, counts and logs, and what fails is an outage
//! ([`outage`]), told once when it begins and once when it ends.

mod clock;
mod cluster;
mod log;
mod outage;
mod single;
mod stager;
mod step;
mod wakeup;

use std::sync::Arc;

use anyhow::Result;
use delayer_wire::Target;
use delayer_wire::scripts::move_due::Batch;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::redis::RedisSettings;
use cluster::ClusterMover;
use single::SingleMover;

pub use step::MoverSettings;

/// The timer loop for the configured Redis: one pool for every topic, or placed per topic in a
/// cluster, as `[redis]`'s layout says.
pub enum Mover {
    /// One Redis, or the master its sentinels name.
    Single(Box<SingleMover>),
    /// A Redis Cluster.
    Cluster(Box<ClusterMover>),
}

impl Mover {
    /// The loop for `redis`, not started.
    pub fn new(settings: &MoverSettings, redis: &RedisSettings) -> Result<Mover> {
        Ok(if redis.layout.per_topic() {
            Mover::Cluster(Box::new(ClusterMover::new(settings, redis)?))
        } else {
            Mover::Single(Box::new(SingleMover::new(settings, redis)?))
        })
    }

    /// Fails if Redis answers but refuses the configured credentials (or database, or is no
    /// cluster when one is configured); an unreachable Redis is not an error here, the loop
    /// waits for it.
    pub async fn check_redis(&self) -> Result<()> {
        match self {
            Mover::Single(mover) => mover.check_redis().await,
            Mover::Cluster(mover) => mover.check_redis().await,
        }
    }

    /// Runs the move script once, as of `now` (unix seconds), on one Redis; a cluster has no one
    /// pool to run it on.
    pub async fn tick(&self, now: f64) -> Result<Batch> {
        match self {
            Mover::Single(mover) => mover.tick(now).await,
            Mover::Cluster(_) => anyhow::bail!("a cluster has a pool per topic: no single tick"),
        }
    }

    /// Moves jobs as they fall due until `stop` is cancelled. A script call that has started
    /// always finishes: Redis is never left with a job half-moved.
    pub async fn run(&self, stop: &CancellationToken) {
        match self {
            Mover::Single(mover) => mover.run(stop).await,
            Mover::Cluster(mover) => mover.run(stop).await,
        }
    }

    /// What the loop has counted, for `/metrics` and `/healthz`.
    pub fn metrics(&self) -> Arc<Metrics> {
        match self {
            Mover::Single(mover) => mover.step().metrics().clone(),
            Mover::Cluster(mover) => mover.step().metrics().clone(),
        }
    }

    /// Where Redis is, for the daemon's other connections: one `Target`, so that a failover is
    /// found (and told) once.
    pub fn target(&self) -> Target {
        match self {
            Mover::Single(mover) => mover.target(),
            Mover::Cluster(mover) => mover.target(),
        }
    }
}
