//! The timer loop for Redis Cluster (`[redis] cluster`). In the cluster layout each topic's keys
//! share one hash slot, so the move script runs once per topic, on the master that holds it; the
//! registry of topics (written by pushers) says which pools there are. Each topic is drained on
//! its own schedule, side by side with the others: a master that hangs, or a topic whose script
//! fails, holds up only its own topics, and a long backlog in one topic takes turns with the rest.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Result, bail};
use deadpool_redis::redis::{AsyncCommands, ErrorKind, RedisError, RedisResult};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use crate::cluster_nodes::ClusterNodes;
use crate::cluster_registry::RegistryRepair;
use crate::cluster_watch::ClusterWatch;
use crate::config::{Config, RedisConfig};
use crate::escape;
use crate::metrics::Metrics;
use crate::move_log::{self, StuckTopics};
use crate::mover::{MIN_LOOK_GAP, earliest, wait_until};
use crate::pool::{self, Failure};
use delayer_client::Target;
use delayer_client::keys::{Keys, Layout};
use delayer_client::scripts::move_due::{MoveScript, STUCK_RECHECK};
use delayer_client::scripts::release::ReleaseScript;
use delayer_client::time::unix_now;

/// The first wait after a failure (of the registry, or of one topic); it doubles up to
/// [`MAX_RETRY_WAIT`].
const FIRST_RETRY_WAIT: Duration = Duration::from_millis(50);
const MAX_RETRY_WAIT: Duration = Duration::from_millis(500);
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
    redis: RedisConfig,
    script: MoveScript,
    release: ReleaseScript,
    metrics: Arc<Metrics>,
    stuck: Mutex<StuckTopics>,
    /// Any topic's keys: the registry's name, and the ready and dead list names of every topic.
    keys: Keys,
    batch_size: usize,
    max_attempts: u32,
    timer_interval: Duration,
    registry_repair: RegistryRepair,
}

/// When each topic is to be drained next, and which are failing.
#[derive(Default)]
struct Schedule {
    /// The next look at each topic, in unix seconds; a topic not here is looked at now.
    due: HashMap<String, f64>,
    /// Topics being drained now.
    draining: HashSet<String>,
    /// Topics whose last drain failed: how, and the wait before the next try.
    failing: HashMap<String, (Failure, Duration)>,
    /// Topics of the registry that the cluster layout cannot hold, said once each.
    refused: HashSet<String>,
}

impl ClusterMover {
    pub fn new(config: &Config) -> Result<ClusterMover> {
        Ok(ClusterMover {
            target: pool::target(&config.redis)?,
            nodes: Arc::new(ClusterNodes::new(&config.redis)),
            redis: config.redis.clone(),
            script: MoveScript::default(),
            release: ReleaseScript::default(),
            metrics: Arc::default(),
            stuck: Mutex::default(),
            keys: Layout::Cluster.keys(""),
            batch_size: config.batch_size,
            max_attempts: config.max_attempts,
            timer_interval: config.timer_interval,
            registry_repair: RegistryRepair::default(),
        })
    }

    /// Fails if the nodes answer but are no cluster, or refuse the credentials; an unreachable
    /// cluster is not an error here, the loop waits for it.
    pub async fn check_redis(&self) -> Result<()> {
        match self.nodes.refresh().await {
            Err(error) if pool::is_config_error(&error) => {
                bail!(pool::describe_refusal(&error, &self.redis).await)
            }
            _ => Ok(()),
        }
    }

    /// The cluster, for the daemon's other connections.
    pub fn target(&self) -> Target {
        self.target.clone()
    }

    /// What the daemon has counted, for `/metrics` and `/healthz`.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// Moves jobs as they fall due until `shutdown` is cancelled; drains under way finish their
    /// script call in flight (and stop before the next), none starts after the stop.
    pub async fn run(&self, shutdown: &CancellationToken) {
        let mut watch = ClusterWatch::new(&self.redis);
        let mut schedule = Schedule::default();
        let mut drains = FuturesUnordered::new();
        let mut topics: Vec<String> = Vec::new();
        // Whether the registry was read once: from then on the drains go on with the topics
        // known, whatever becomes of the registry's master.
        let mut ready = false;
        let mut outage: Option<Failure> = None;
        let mut retry_wait = FIRST_RETRY_WAIT;
        let mut look = true;
        let mut looked_at = Instant::now();
        // A client pushed (to some topic) since the last look.
        let mut pushed = false;
        loop {
            if look && !shutdown.is_cancelled() {
                watch.seen();
                looked_at = Instant::now();
                match self.registry().await {
                    Ok(registry) => {
                        self.metrics.looked(true);
                        if let Some(failure) = outage.take() {
                            info!("{}", failure.recovered(&self.redis.address()));
                        }
                        retry_wait = FIRST_RETRY_WAIT;
                        topics = schedule.usable(registry);
                        watch.ensure(self.nodes.masters());
                        ready = true;
                    }
                    // The drains go on with the topics known so far.
                    Err(error) => {
                        self.metrics.looked(false);
                        let trouble = pool::describe_redis(&error, &self.redis);
                        // Once per outage (or change of cause), not on every retry.
                        if outage != Some(trouble.kind) {
                            error!("{trouble}; {}", trouble.kind.waiting_for());
                        }
                        outage = Some(trouble.kind);
                    }
                }
            }
            look = false;
            if ready && !shutdown.is_cancelled() {
                let now = unix_now();
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
                wait_until(schedule.next(&topics), self.timer_interval)
            } else {
                let wait = retry_wait;
                retry_wait = (retry_wait * 2).min(MAX_RETRY_WAIT);
                wait
            };
            if pushed {
                // Every topic is looked at again, but not more often than MIN_LOOK_GAP.
                wait =
                    wait.min((looked_at + MIN_LOOK_GAP).saturating_duration_since(Instant::now()));
            }
            tokio::select! {
                Some((topic, drained, sent)) = drains.next() => {
                    self.finished(&mut schedule, topic, drained, sent);
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
    async fn registry(&self) -> RedisResult<Vec<String>> {
        if self.nodes.masters().is_empty() {
            self.nodes.refresh().await?;
        }
        let (master, mut connection) = match self.nodes.for_key(self.keys.topics()).await {
            Ok(found) => found,
            Err(error) => {
                self.nodes.failed(None, &error);
                return Err(error);
            }
        };
        let read = tokio::time::timeout(REGISTRY_WAIT, connection.smembers(self.keys.topics()));
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
                self.keys.topics(),
            ),
            Err(error) => self.nodes.failed(Some(&master), error),
        }
        topics
    }

    /// Takes note of a drain's end: when to look at its topic again, and whether it failed
    /// (`sent`: with a script call sent, whose reply may be lost).
    fn finished(
        &self,
        schedule: &mut Schedule,
        topic: String,
        drained: RedisResult<Option<f64>>,
        sent: bool,
    ) {
        schedule.draining.remove(&topic);
        self.metrics.looked(drained.is_ok());
        let now = unix_now();
        match drained {
            Ok(next_due) => {
                if let Some((failure, _)) = schedule.failing.remove(&topic) {
                    info!(
                        "{}: topic {} moves again",
                        failure.recovered(&self.redis.address()),
                        escape::field(&topic)
                    );
                }
                // At least every timer_interval, as with one Redis: a push the watches missed (or
                // a Redis that cannot report them) waits no longer than that.
                let latest = now + self.timer_interval.as_secs_f64();
                let due = next_due.map_or(latest, |due| due.min(latest));
                schedule.due.insert(topic, due);
            }
            Err(error) => {
                let trouble = pool::describe_redis(&error, &self.redis);
                if sent && pool::reply_may_be_lost(&error) {
                    // Every lost reply is said: each may hide moved jobs no other line lists.
                    error!(
                        "The reply to a move of topic {} never came ({trouble}): it may have moved \
                         up to {} jobs that no \"Job is ready\" line lists; {}",
                        escape::field(&topic),
                        self.batch_size,
                        trouble.kind.waiting_for()
                    );
                } else if schedule.failing.get(&topic).map(|(kind, _)| *kind) != Some(trouble.kind)
                {
                    if slot_moving(&error) {
                        // A resharding: the script was refused before any write; nothing is amiss.
                        info!(
                            "Topic {} waits while its slot moves to another master ({error}); \
                             tried again",
                            escape::field(&topic)
                        );
                    } else {
                        error!(
                            "Topic {} cannot move: {trouble}; {}",
                            escape::field(&topic),
                            trouble.kind.waiting_for()
                        );
                    }
                }
                let wait = schedule
                    .failing
                    .get(&topic)
                    .map_or(FIRST_RETRY_WAIT, |(_, wait)| {
                        (*wait * 2).min(MAX_RETRY_WAIT)
                    });
                schedule.failing.insert(topic.clone(), (trouble.kind, wait));
                schedule.due.insert(topic, now + wait.as_secs_f64());
            }
        }
    }

    /// Moves `topic`'s due jobs until a batch comes back short, [`BATCHES_PER_TURN`] full ones
    /// were moved, or a stop is asked for; then delivers again its jobs whose reservation lapsed.
    /// Returns when to look at the topic again.
    async fn drain(
        &self,
        topic: String,
        shutdown: &CancellationToken,
    ) -> (String, RedisResult<Option<f64>>, bool) {
        let keys = Layout::Cluster.keys(&topic);
        let (master, mut connection) = match self.nodes.for_key(keys.pool()).await {
            Ok(found) => found,
            Err(error) => {
                self.nodes.failed(None, &error);
                return (topic, Err(error), false);
            }
        };
        let drained = async {
            let mut turns = 0;
            loop {
                let batch = loop {
                    let now = unix_now();
                    let started = std::time::Instant::now();
                    let batch = self
                        .script
                        .run(&mut connection, &keys, now, self.batch_size)
                        .await?;
                    self.metrics.moved(&batch, now, started.elapsed());
                    self.stuck.lock().expect("not poisoned").note(&batch, &keys);
                    move_log::moves(&batch);
                    turns += 1;
                    if !batch.is_full(self.batch_size)
                        || shutdown.is_cancelled()
                        || turns >= BATCHES_PER_TURN
                    {
                        break batch;
                    }
                };
                self.stuck
                    .lock()
                    .expect("not poisoned")
                    .report(STUCK_RECHECK, &keys);
                let started = std::time::Instant::now();
                let released = self
                    .release
                    .lapsed(
                        &mut connection,
                        &keys,
                        unix_now(),
                        self.max_attempts,
                        self.batch_size,
                    )
                    .await?;
                self.metrics.released(&released, started.elapsed());
                move_log::released(&released, self.max_attempts, &keys);
                if batch.is_full(self.batch_size) {
                    // Its turn is over, with more due: again after the others had theirs.
                    return Ok(Some(unix_now()));
                }
                let put_back = !released.retried.is_empty() || !released.blocked.is_empty();
                if !put_back || shutdown.is_cancelled() {
                    return Ok(earliest(batch.next_due, released.next_deadline));
                }
                // The jobs put back are due now: moved in this same turn.
            }
        };
        let drained = drained.await;
        if let Err(error) = &drained {
            self.nodes.failed(Some(&master), error);
        }
        (topic, drained, true)
    }
}

/// Whether `error` says the key's slot is moving between masters (a resharding): MOVED, ASK,
/// TRYAGAIN, or a script that met a key already moved.
fn slot_moving(error: &RedisError) -> bool {
    matches!(error.code(), Some("MOVED" | "ASK" | "TRYAGAIN"))
        || error.to_string().contains("non local key")
}

impl Schedule {
    /// The registry's topics the cluster layout can hold; each of the others is said once.
    fn usable(&mut self, registry: Vec<String>) -> Vec<String> {
        registry
            .into_iter()
            .filter(|topic| match Layout::Cluster.refusal(topic) {
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
