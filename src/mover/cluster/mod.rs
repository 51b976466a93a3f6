//! The loop for Redis Cluster (`[redis] cluster`). In the cluster layout each topic's keys share
//! one hash slot, so the step runs once per topic, on the master that holds it; the registry of
//! topics (written by pushers) says which pools there are. Each topic is drained on its own
//! schedule, side by side with the others: a master that hangs, or a topic whose script fails,
//! holds up only its own topics, and a long backlog in one topic takes turns with the rest.

mod nodes;
mod registry;
mod watch;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};
use deadpool_redis::redis::{AsyncCommands, ErrorKind, RedisError, RedisResult};
use delayer_client::Target;
use delayer_client::keys::Layout;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::error;

use super::said::Failed;
use super::step::{Limits, MIN_LOOK_GAP, MoverSettings, Step, wait_until};
use crate::redis::{Failure, RedisSettings, describe_redis, describe_refusal, target};
use crate::text::escape;
use nodes::ClusterNodes;
use registry::RegistryRepair;
use watch::ClusterWatch;

/// Full batches one topic moves before the others' turn: a backlog of a million jobs in one topic
/// must not keep another topic's due jobs waiting until it is gone.
const BATCHES_PER_TURN: usize = 10;
/// How long a look waits for the registry before it goes on with the topics it knew: a hung
/// master holding the registry must not hold up the others' moves for long.
const REGISTRY_WAIT: Duration = Duration::from_millis(500);

/// Moves due jobs from each topic's pool to its ready list, across a cluster.
pub struct ClusterMover {
    target: Target,
    /// Our own connection to each master: the redis crate's cluster connection holds every
    /// command up while one master hangs.
    nodes: Arc<ClusterNodes>,
    redis: RedisSettings,
    layout: Layout,
    /// The registry of topics.
    registry: String,
    step: Step,
    registry_repair: RegistryRepair,
}

/// When each topic is to be drained next.
#[derive(Default)]
struct Schedule {
    /// The next look at each topic, in unix seconds; a topic not here is looked at now.
    due: HashMap<String, f64>,
    /// Topics being drained now.
    draining: HashSet<String>,
    /// Topics of the registry that the cluster layout cannot hold, said once each.
    refused: HashSet<String>,
}

impl ClusterMover {
    pub(super) fn new(settings: &MoverSettings, redis: &RedisSettings) -> Result<ClusterMover> {
        Ok(ClusterMover {
            target: target(redis)?,
            nodes: Arc::new(ClusterNodes::new(redis)),
            redis: redis.clone(),
            layout: redis.layout,
            registry: redis.layout.keys("").topics().to_string(),
            step: Step::new(settings, redis),
            registry_repair: RegistryRepair::default(),
        })
    }

    pub(super) fn step(&self) -> &Step {
        &self.step
    }

    /// Fails if the nodes answer but are no cluster, or refuse the credentials; an unreachable
    /// cluster is not an error here, the loop waits for it.
    pub(super) async fn check_redis(&self) -> Result<()> {
        match self.nodes.refresh().await {
            Err(error) if Failure::of(&error).is_config_error() => {
                bail!(describe_refusal(&error, &self.redis).await)
            }
            _ => Ok(()),
        }
    }

    /// The cluster, for the daemon's other connections.
    pub(super) fn target(&self) -> Target {
        self.target.clone()
    }

    /// Moves jobs as they fall due until `shutdown` is cancelled; drains under way finish their
    /// script call in flight (and stop before the next), none starts after the stop.
    pub(super) async fn run(&self, shutdown: &CancellationToken) {
        let timer_interval = self.step.settings().timer_interval;
        let mut watch = ClusterWatch::new(&self.redis);
        let mut schedule = Schedule::default();
        let mut drains = FuturesUnordered::new();
        let mut topics: Vec<String> = Vec::new();
        // Whether the registry was read once: from then on the drains go on with the topics
        // known, whatever becomes of the registry's master.
        let mut ready = false;
        let mut retry_wait = Duration::ZERO;
        let mut look = true;
        let mut looked_at = Instant::now();
        // A client pushed (to some topic) since the last look.
        let mut pushed = false;
        loop {
            if look && !shutdown.is_cancelled() {
                watch.seen();
                looked_at = Instant::now();
                match self.read_registry().await {
                    Ok(registry) => {
                        self.step.metrics().looked(true);
                        self.step.said().drained(None);
                        topics = schedule.usable(registry, self.layout);
                        watch.ensure(self.nodes.masters());
                        ready = true;
                    }
                    // The drains go on with the topics known so far.
                    Err(error) => {
                        self.step.metrics().looked(false);
                        let failed = Failed::not_a_move(describe_redis(&error, &self.redis));
                        retry_wait = self.step.said().failed(None, &failed);
                    }
                }
            }
            look = false;
            if ready && !shutdown.is_cancelled() {
                let now = self.step.now();
                for topic in &topics {
                    if schedule.starts(topic, now) {
                        drains.push(self.drain(topic.clone(), shutdown));
                    }
                }
            }
            if shutdown.is_cancelled() && drains.is_empty() {
                return;
            }
            let mut wait = if ready {
                wait_until(schedule.next(&topics), self.step.now(), timer_interval)
            } else {
                retry_wait
            };
            if pushed {
                // Every topic is looked at again, but not more often than MIN_LOOK_GAP.
                wait =
                    wait.min((looked_at + MIN_LOOK_GAP).saturating_duration_since(Instant::now()));
            }
            tokio::select! {
                Some((topic, drained)) = drains.next() => {
                    self.finished(&mut schedule, topic, drained);
                }
                () = tokio::time::sleep(wait) => {
                    if std::mem::take(&mut pushed) {
                        schedule.due.clear();
                    }
                    look = true;
                }
                // Taken note of at once: a wake-up is never lost to a drain ending meanwhile.
                () = watch.written(), if !pushed => pushed = true,
                () = shutdown.cancelled(), if !shutdown.is_cancelled() => {}
            }
        }
    }

    /// The topics of the registry (the slot map read first, if not known yet). Bounded by
    /// [`REGISTRY_WAIT`]: the drains under way are not polled meanwhile.
    async fn read_registry(&self) -> RedisResult<Vec<String>> {
        if self.nodes.masters().is_empty() {
            self.nodes.refresh().await?;
        }
        let (master, mut connection) = match self.nodes.for_key(&self.registry).await {
            Ok(found) => found,
            Err(error) => {
                self.nodes.failed(None, &error);
                return Err(error);
            }
        };
        let read = tokio::time::timeout(REGISTRY_WAIT, connection.smembers(&self.registry));
        let topics: RedisResult<Vec<String>> = read.await.unwrap_or_else(|_| {
            Err(RedisError::from((
                ErrorKind::Io,
                "the registry's master did not answer within",
                format!("{} ms", REGISTRY_WAIT.as_millis()),
            )))
        });
        match &topics {
            Ok(found) => self.registry_repair.read_from(
                &master,
                found.len(),
                &self.nodes,
                &self.registry,
                self.layout,
            ),
            Err(error) => self.nodes.failed(Some(&master), error),
        }
        topics
    }

    /// Takes note of a drain's end: when to look at its topic again.
    fn finished(
        &self,
        schedule: &mut Schedule,
        topic: String,
        drained: Result<Option<f64>, Failed>,
    ) {
        schedule.draining.remove(&topic);
        self.step.metrics().looked(drained.is_ok());
        let now = self.step.now();
        let due = match drained {
            Ok(next_due) => {
                self.step.said().drained(Some(&topic));
                // At least every timer_interval, as with one Redis: a push the watches missed (or
                // a Redis that cannot report them) waits no longer than that.
                let latest = now + self.step.settings().timer_interval.as_secs_f64();
                next_due.map_or(latest, |due| due.min(latest))
            }
            Err(failed) => now + self.step.said().failed(Some(&topic), &failed).as_secs_f64(),
        };
        schedule.due.insert(topic, due);
    }

    /// Drains `topic` (see [`Step::drain`]) for one turn of [`BATCHES_PER_TURN`] full batches at
    /// most, over our connection to its master. Returns when to look at the topic again.
    async fn drain(
        &self,
        topic: String,
        shutdown: &CancellationToken,
    ) -> (String, Result<Option<f64>, Failed>) {
        let keys = self.layout.keys(&topic);
        let (master, mut connection) = match self.nodes.for_key(keys.pool()).await {
            Ok(found) => found,
            Err(error) => {
                self.nodes.failed(None, &error);
                let failed = Failed::not_a_move(describe_redis(&error, &self.redis));
                return (topic, Err(failed));
            }
        };
        let stop = || shutdown.is_cancelled();
        let limits = Limits {
            turn: Some(BATCHES_PER_TURN),
            stop: &stop,
        };
        let drained = self
            .step
            .drain(&mut connection, &keys, Some(&topic), &limits)
            .await;
        let drained = drained.map_err(|error| {
            self.nodes.failed(Some(&master), &error);
            Failed::call(&error, &self.redis)
        });
        (topic, drained)
    }
}

impl Schedule {
    /// The registry's topics that `layout` can hold; each of the others is said once.
    fn usable(&mut self, registry: Vec<String>, layout: Layout) -> Vec<String> {
        registry
            .into_iter()
            .filter(|topic| match layout.refusal(topic) {
                None => true,
                Some(why) => {
                    if self.refused.insert(topic.clone()) {
                        error!(
                            "Topic {} of the registry is left alone: it {why}",
                            escape::field(topic)
                        );
                    }
                    false
                }
            })
            .collect()
    }

    /// Whether `topic` is due for a drain at `now`; if so, it is marked as being drained.
    fn starts(&mut self, topic: &str, now: f64) -> bool {
        let due = self.due.get(topic).is_none_or(|due| *due <= now);
        due && self.draining.insert(topic.to_string())
    }

    /// When the next of `topics` not being drained is due.
    fn next(&self, topics: &[String]) -> Option<f64> {
        topics
            .iter()
            .filter(|topic| !self.draining.contains(*topic))
            .map(|topic| self.due.get(topic).copied().unwrap_or(0.0))
            .min_by(f64::total_cmp)
    }
}
