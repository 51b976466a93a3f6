//! The loop for Redis Cluster (`[redis] cluster`). In the cluster layout each topic's keys share
//! one hash slot, so the step runs once per topic, on the master that holds it; the registry of
//! topics (written by pushers) says which pools there are. Each topic is polled when it is due
//! ([`polls`]), side by side with the others: a master that hangs, or a topic whose script fails,
//! holds up only its own topics, and a long backlog in one topic takes turns with the rest.

mod nodes;
mod polls;
mod registry;
mod stager;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};
use deadpool_redis::redis::{AsyncCommands, ErrorKind, RedisError, RedisResult};
use delayer_wire::keys::Layout;
use delayer_wire::scripts::reserve::MIN_TTR;
use delayer_wire::watch::Written;
use delayer_wire::{Target, Topic};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::outage::PollFailure;
use super::step::{Limits, MIN_POLL_GAP, MoverSettings, Step, wait_until};
use crate::redis::{Failure, FailureKind, RedisSettings, target};
use nodes::ClusterNodes;
use polls::Polls;
use registry::RegistryRepair;
use stager::ClusterStager;
use watch::ClusterWatch;

/// Full batches one topic moves before the others' turn: a backlog of a million jobs in one topic
/// must not keep another topic's due jobs waiting until it is gone.
const BATCHES_PER_TURN: usize = 10;
/// How long a poll waits for the registry before it goes on with the topics it knew: a hung
/// master holding the registry must not hold up the others' moves for long.
const REGISTRY_WAIT: Duration = Duration::from_millis(500);
/// How long the registry may go unread, its reads timing out, before that is an outage: its
/// master's connection also carries the drains' script calls, queued ahead of the read, so a busy
/// master is slow, not lost, for as long as a reply may take.
const REGISTRY_SLOW_FOR: Duration = delayer_wire::connection::RESPONSE_TIMEOUT;
/// The most topics drained at once: each script call of a drain waits behind those before it on
/// its master's connection, so more would only make each wait longer (until a reply seems lost),
/// and a stop waits for every call in flight.
const MAX_DRAINS: usize = 32;
/// While every master reports writes, how often the registry is read (new topics are known from
/// their first push) and how often a topic nobody wrote to is polled, as safety nets: a
/// registry of 20,000 idle topics then costs Redis a few dozen script calls a second.
const REGISTRY_EVERY: Duration = Duration::from_secs(10);
const IDLE_RECHECK: Duration = Duration::from_secs(600);

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
    stager: Option<ClusterStager>,
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
            stager: ClusterStager::new(redis.layout),
        })
    }

    pub(super) fn step(&self) -> &Step {
        &self.step
    }

    /// Fails if the nodes answer but are no cluster, or refuse the credentials; an unreachable
    /// cluster is not an error here, the loop waits for it.
    pub(super) async fn check_redis(&self) -> Result<()> {
        match self.nodes.refresh().await {
            Err(error) if FailureKind::of(&error).is_config_error() => {
                bail!(Failure::refusal(&error, &self.redis).await)
            }
            _ => Ok(()),
        }
    }

    /// The cluster, for the daemon's other connections.
    pub(super) fn target(&self) -> Target {
        self.target.clone()
    }

    /// Moves jobs as they fall due, and stages compact ones, until `stop` is cancelled;
    /// drains under way finish their script call in flight (and stop before the next), none
    /// starts after the stop.
    pub(super) async fn run(&self, stop: &CancellationToken) {
        let stage = async {
            if let Some(stager) = &self.stager {
                stager.run(&self.nodes, &self.step, stop).await;
            }
        };
        tokio::join!(self.poll(stop), stage);
    }

    /// The loop itself: the registry read, each topic drained as it falls due.
    async fn poll(&self, stop: &CancellationToken) {
        let timer_interval = self.step.settings().timer_interval;
        let mut watch = ClusterWatch::new(&self.redis);
        let mut polls = Polls::default();
        let mut drains = FuturesUnordered::new();
        // Whether the registry was read once: from then on the drains go on with the topics
        // known, whatever becomes of the registry's master.
        let mut ready = false;
        let mut read_registry_at = Instant::now();
        let mut registry_read_at = Instant::now();
        loop {
            if !stop.is_cancelled() && Instant::now() >= read_registry_at {
                read_registry_at = Instant::now() + self.read_registry_every(&watch);
                let patient = ready && registry_read_at.elapsed() < REGISTRY_SLOW_FOR;
                match self.read_registry(patient).await {
                    Ok(Some(registry)) => {
                        self.step.metrics().polled(true);
                        self.step.outages().succeeded(None);
                        polls.add_topics(registry, self.layout, self.step.now());
                        watch.ensure(self.nodes.masters());
                        ready = true;
                        registry_read_at = Instant::now();
                    }
                    // Slow: the drains go on with the topics known, and it is read again soon.
                    Ok(None) => read_registry_at = Instant::now() + timer_interval,
                    // The drains go on with the topics known so far.
                    Err(error) => {
                        self.step.metrics().polled(false);
                        let failed = PollFailure::not_a_move(Failure::of(&error, &self.redis));
                        let wait = self.step.outages().failed(None, &failed);
                        read_registry_at = Instant::now() + wait;
                    }
                }
            }
            if ready && !stop.is_cancelled() {
                let room = MAX_DRAINS.saturating_sub(drains.len());
                for topic in polls.take_due(self.step.now(), room) {
                    drains.push(self.drain(topic, stop));
                }
            }
            if stop.is_cancelled() && drains.is_empty() {
                return;
            }
            let mut wait = read_registry_at.saturating_duration_since(Instant::now());
            if ready && drains.len() < MAX_DRAINS {
                wait = wait.min(wait_until(polls.next(), self.step.now(), timer_interval));
            }
            tokio::select! {
                Some((topic, drained)) = drains.next() => {
                    self.finished(&mut polls, &watch, topic, drained);
                }
                () = tokio::time::sleep(wait) => {}
                // Taken note of at once: a wake-up is never lost to a drain ending meanwhile.
                () = watch.written() => {
                    if self.woken(&mut polls, watch.take_written()) {
                        read_registry_at = Instant::now();
                    }
                }
                () = stop.cancelled(), if !stop.is_cancelled() => {}
            }
        }
    }

    /// How long until the registry is read again: while every master reports writes, a new
    /// topic is known from its first push, and the registry is only a safety net.
    fn read_registry_every(&self, watch: &ClusterWatch) -> Duration {
        if watch.watches_all(&self.nodes.masters()) {
            REGISTRY_EVERY
        } else {
            self.step.settings().timer_interval
        }
    }

    /// Wakes the topics whose keys were `written`: a pool's topic now, a reservation's topic when
    /// the earliest reservation could lapse. True when any key may have been written (a watch
    /// began or lost some): then every topic is woken, and the registry is to be read again.
    fn woken(&self, polls: &mut Polls, written: Written) -> bool {
        let now = self.step.now();
        if written.any {
            polls.wake_all(now);
            return true;
        }
        for key in &written.keys {
            if let Some(topic) = self.layout.topic_of_pool(key) {
                polls.wake(topic, now);
            } else if let Some(topic) = self.layout.topic_of_reservations(key) {
                polls.wake(topic, now + MIN_TTR.as_secs_f64());
            }
        }
        false
    }

    /// The topics of the registry (the slot map read first, if not known yet). Redis's time is
    /// read after them, once the moves go by it: idle topics run no script that would read it, and
    /// the loop decides by it which topics are due. Each read is bounded by [`REGISTRY_WAIT`]: the
    /// drains under way are not polled meanwhile. `patient`: a read that times out is `None`, not
    /// a failure (see [`REGISTRY_SLOW_FOR`]).
    async fn read_registry(&self, patient: bool) -> RedisResult<Option<Vec<Topic>>> {
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
        let read = tokio::time::timeout(REGISTRY_WAIT, connection.smembers(&self.registry)).await;
        if read.is_err() && patient {
            debug!(
                "The registry's master did not answer within {REGISTRY_WAIT:?}; read again soon"
            );
            return Ok(None);
        }
        let topics: RedisResult<Vec<Topic>> = read.unwrap_or_else(|_| {
            Err(RedisError::from((
                ErrorKind::Io,
                "the registry's master did not answer within",
                format!("{} ms", REGISTRY_WAIT.as_millis()),
            )))
        });
        let clock = self.step.clock();
        if topics.is_ok() && clock.seen() {
            // A help only, and no part of the poll: the next move reads Redis's time anyway.
            let _ = tokio::time::timeout(REGISTRY_WAIT, clock.read(&mut connection)).await;
        }
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
        topics.map(Some)
    }

    /// Takes note of a drain's end: when to poll its topic again.
    fn finished(
        &self,
        polls: &mut Polls,
        watch: &ClusterWatch,
        topic: String,
        drained: Result<Option<f64>, PollFailure>,
    ) {
        self.step.metrics().polled(drained.is_ok());
        let now = self.step.now();
        let due = match drained {
            Ok(next_due) => {
                self.step.outages().succeeded(Some(&topic));
                // While every master reports writes, a topic nobody wrote to has nothing new:
                // polled again only as a safety net. Else at least every timer_interval, as
                // with one Redis: a push that could not be reported waits no longer than that.
                let recheck = if watch.watches_all(&self.nodes.masters()) {
                    IDLE_RECHECK
                } else {
                    self.step.settings().timer_interval
                };
                let latest = now + recheck.as_secs_f64();
                next_due.map_or(latest, |due| due.min(latest))
            }
            Err(failed) => {
                let wait = self.step.outages().failed(Some(&topic), &failed);
                now + wait.as_secs_f64()
            }
        };
        polls.drained(topic, due, now + MIN_POLL_GAP.as_secs_f64());
    }

    /// Drains `topic` (see [`Step::drain`]) for one turn of [`BATCHES_PER_TURN`] full batches at
    /// most, over our connection to its master. Returns when to poll the topic again.
    async fn drain(
        &self,
        topic: String,
        stop: &CancellationToken,
    ) -> (String, Result<Option<f64>, PollFailure>) {
        let keys = self.layout.keys(&topic);
        let (master, mut connection) = match self.nodes.for_key(keys.pool()).await {
            Ok(found) => found,
            Err(error) => {
                self.nodes.failed(None, &error);
                let failed = PollFailure::not_a_move(Failure::of(&error, &self.redis));
                return (topic, Err(failed));
            }
        };
        let must_end = || stop.is_cancelled();
        let limits = Limits {
            turn: Some(BATCHES_PER_TURN),
            end: &must_end,
        };
        let drained = self
            .step
            .drain(&mut connection, &keys, Some(&topic), &limits)
            .await;
        let drained = drained.map_err(|error| {
            self.nodes.failed(Some(&master), &error);
            PollFailure::call(&error, &self.redis)
        });
        (topic, drained)
    }
}
