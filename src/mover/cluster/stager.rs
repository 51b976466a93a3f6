//! Stages compact jobs in the cluster layout (see `super::super::stager` for one Redis): each
//! topic that had compact pushes (the compact topics set) has chunks of its own, in its slot,
//! staged on its master. A topic is checked at again when its earliest chunk comes within the
//! lead, or after [`STAGE_AGAIN`] at the latest: an idle topic costs one script call that often,
//! not one a second. Topics are never taken out of the set: a push adds its topic before it
//! writes a chunk, and no removal can race it.

use std::collections::HashMap;
use std::sync::Arc;

use deadpool_redis::redis::{self, AsyncCommands, RedisError, RedisResult};
use delayer_wire::compact::{BEAT_EVERY, CompactKeys, LEAD, STAGE_AGAIN};
use delayer_wire::keys::Layout;
use delayer_wire::scripts::compact_stage::Reach;
use futures_util::StreamExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::super::stager::{Stager, next_pass, passes, report, tell, wanted_checks};
use super::super::step::Step;
use super::nodes::ClusterNodes;
use crate::service::duty::Trouble;

/// The most topics staged at once: a master that hangs holds up only its own topics' calls.
const MAX_AT_ONCE: usize = 16;
/// Topics read from the set a command (SSCAN's COUNT).
const TOPICS_A_READ: usize = 1_000;

/// One daemon's staging of compact jobs across a cluster.
pub(super) struct ClusterStager {
    stager: Stager,
    layout: Layout,
    /// The cluster-wide keys of the layout: the beats, `wanted`, the compact topics.
    compact: CompactKeys,
}

impl ClusterStager {
    pub(super) fn new(layout: Layout) -> Option<ClusterStager> {
        let keys = layout.keys("");
        Some(ClusterStager {
            stager: Stager::new(&keys),
            layout,
            compact: keys.compact()?.clone(),
        })
    }

    /// Stages until `stop` is cancelled, once a second, as the stager for one Redis does: it
    /// writes nothing until a push asked for the layout (`wanted`) or a topic had compact pushes,
    /// and beats only after a pass where every topic checked at was staged. A script call that
    /// has started finishes.
    pub(super) async fn run(
        &self,
        nodes: &Arc<ClusterNodes>,
        step: &Step,
        stop: &CancellationToken,
    ) {
        let mut active = false;
        let mut beaten: Option<Instant> = None;
        let mut trouble = Trouble::default();
        // When each topic is checked at next, by Redis's clock.
        let mut next_passes: HashMap<String, f64> = HashMap::new();
        let mut passes = passes();
        let mut wanted_checks = wanted_checks();
        while next_pass(&mut passes, &mut wanted_checks, active, stop).await {
            if !active {
                // A user the ACL does not let look never stages, as on one Redis.
                active = self.in_use(nodes).await.unwrap_or(false);
                if !active {
                    continue;
                }
                info!("Staging compact jobs: our pushes write them now");
            }
            let mut result = self.pass(nodes, step, &mut next_passes, stop).await;
            if stop.is_cancelled() {
                return;
            }
            if result.is_ok() && beaten.is_none_or(|at| at.elapsed() >= BEAT_EVERY) {
                result = self.beat(nodes, step).await.map_err(|error| (None, error));
                if result.is_ok() {
                    beaten = Some(Instant::now());
                }
            }
            let failed = result
                .as_ref()
                .err()
                .map(|(topic, error)| (topic.as_deref(), error));
            tell(step, &mut trouble, failed);
        }
    }

    /// Stages each topic of the set that is due for a pass; the first failure (with its
    /// topic), once every other topic was staged.
    async fn pass(
        &self,
        nodes: &Arc<ClusterNodes>,
        step: &Step,
        next_passes: &mut HashMap<String, f64>,
        stop: &CancellationToken,
    ) -> Result<(), (Option<String>, RedisError)> {
        let topics = self.topics(nodes).await.map_err(|error| (None, error))?;
        let now = step.now();
        let due = topics
            .into_iter()
            .filter(|topic| next_passes.get(topic).is_none_or(|&at| at <= now));
        let staged: Vec<(String, RedisResult<Option<u64>>)> = futures_util::stream::iter(due)
            .map(|topic| async move {
                let staged = self.stage(nodes, step, &topic, stop).await;
                (topic, staged)
            })
            .buffer_unordered(MAX_AT_ONCE)
            .collect()
            .await;
        let mut failed = None;
        for (topic, staged) in staged {
            match staged {
                Ok(next_window) => {
                    next_passes.insert(topic, next_pass_at(now, next_window));
                }
                // Looked at again next second.
                Err(error) => failed = failed.or(Some((Some(topic), error))),
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Stages `topic`'s chunks within the lead on its master; the earliest window left.
    async fn stage(
        &self,
        nodes: &Arc<ClusterNodes>,
        step: &Step,
        topic: &str,
        stop: &CancellationToken,
    ) -> RedisResult<Option<u64>> {
        let keys = self.layout.keys(topic);
        // A stop starts no call (of the topics left in a pass).
        let (Some(compact), false) = (keys.compact(), stop.is_cancelled()) else {
            return Ok(None);
        };
        let (master, mut connection) = nodes.for_key(keys.pool()).await.inspect_err(|error| {
            nodes.failed(None, error);
        })?;
        loop {
            let staged = self
                .stager
                .script()
                .run(&mut connection, &keys, compact, Reach::Lead)
                .await
                .inspect_err(|error| nodes.failed(Some(&master), error))?;
            report(&staged, step, Some(topic));
            if !staged.more || stop.is_cancelled() {
                return Ok(staged.next_window);
            }
        }
    }

    /// The topics of the compact topics set that fit the layout.
    async fn topics(&self, nodes: &Arc<ClusterNodes>) -> RedisResult<Vec<String>> {
        let (master, mut connection) = self.on_master_of(nodes, self.compact.topics()).await?;
        let mut topics = Vec::new();
        let mut cursor = 0u64;
        loop {
            let (next, page): (u64, Vec<Vec<u8>>) = redis::cmd("SSCAN")
                .arg(self.compact.topics())
                .arg(cursor)
                .arg("COUNT")
                .arg(TOPICS_A_READ)
                .query_async(&mut connection)
                .await
                .inspect_err(|error| nodes.failed(Some(&master), error))?;
            topics.extend(
                page.into_iter()
                    .filter_map(|topic| String::from_utf8(topic).ok())
                    .filter(|topic| self.layout.refusal(topic).is_none()),
            );
            if next == 0 {
                topics.sort_unstable();
                topics.dedup();
                return Ok(topics);
            }
            cursor = next;
        }
    }

    /// Whether a push asked for the layout, or a topic had compact pushes (each key on its own
    /// master).
    async fn in_use(&self, nodes: &Arc<ClusterNodes>) -> RedisResult<bool> {
        for key in [self.compact.wanted(), self.compact.topics()] {
            let (_, mut connection) = self.on_master_of(nodes, key).await?;
            if connection.exists(key).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Tells pushers that this daemon stages (see [`Stager::beat`]).
    async fn beat(&self, nodes: &Arc<ClusterNodes>, step: &Step) -> RedisResult<()> {
        let (master, mut connection) = self.on_master_of(nodes, self.compact.stagers()).await?;
        self.stager
            .beat(&mut connection, &self.compact, step)
            .await
            .inspect_err(|error| nodes.failed(Some(&master), error))
    }

    async fn on_master_of(
        &self,
        nodes: &Arc<ClusterNodes>,
        key: &str,
    ) -> RedisResult<(String, redis::aio::MultiplexedConnection)> {
        nodes
            .for_key(key)
            .await
            .inspect_err(|error| nodes.failed(None, error))
    }
}

/// When a topic is checked at again, as of `now` (unix seconds by Redis's clock): as the earliest
/// window of its chunks left (`next_window`) comes within the lead, or after [`STAGE_AGAIN`].
fn next_pass_at(now: f64, next_window: Option<u64>) -> f64 {
    let latest = now + STAGE_AGAIN.as_secs_f64();
    let near = next_window.map(|window| window as f64 - LEAD.as_secs_f64());
    near.map_or(latest, |near| near.min(latest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_topic_is_staged_every_ten_seconds_and_a_near_window_in_time() {
        let now = 1_000_000.0;
        assert_eq!(next_pass_at(now, None), now + 10.0, "no chunk left");
        assert_eq!(
            next_pass_at(now, Some(1_003_600)),
            now + 10.0,
            "an hour ahead"
        );
        assert_eq!(
            next_pass_at(now, Some(1_000_065)),
            now + 5.0,
            "within the lead in 5 s"
        );
        assert!(
            next_pass_at(now, Some(1_000_030)) <= now,
            "within the lead now: next second"
        );
    }
}
