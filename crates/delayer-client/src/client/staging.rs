//! Whether a daemon stages compact jobs, as pushes in the cluster layout learn it: there the
//! beats are in another slot than a topic's keys, out of the push script's reach, so the client
//! reads them (every [`BEAT_EVERY`] at most, by Redis's clock) and tells the script.

use std::time::{Duration, Instant};

use delayer_wire::compact::{BEAT_EVERY, BEAT_FRESH, WANTED_KEPT};

use super::Client;
use crate::error::Result;
use delayer_wire::name::Topic;
use delayer_wire::scripts::push::Form;

/// How soon "no daemon stages" is read again: a daemon starts staging within a moment of a push
/// that wanted it, and the pushes after should see it as soon.
const NONE_STAGES_READ_AGAIN: Duration = Duration::from_millis(100);

impl Client {
    /// How a push writes its jobs (see [`Settings::compact_after`]); `far` are the topics of its
    /// jobs due at least that long ahead (by this host's clock: the script decides by Redis's).
    /// In the cluster layout a topic is added to the compact topics before any of its jobs
    /// waits compact, so that a daemon stages it; no daemon removes one, so that no push races
    /// a removal.
    ///
    /// [`Settings::compact_after`]: crate::Settings::compact_after
    pub(super) async fn push_form(&self, far: &[&Topic]) -> Result<Form> {
        let Some(after) = self.settings().compact_after else {
            return Ok(Form::Legacy);
        };
        let compact = match self.keys().compact() {
            Some(compact) if self.keys().every_topic().is_none() => compact,
            _ => return Ok(Form::CompactAfter(after)),
        };
        if far.is_empty() {
            return Ok(Form::CompactAfterTold(after, false));
        }
        let staging = self.stagers_alive().await;
        let mut connection = self.connection().await?;
        if !staging {
            // As the push script does on one Redis: a daemon that can stage starts when it sees
            // it. A user that may not write it pushes in the legacy form all the same.
            let _: redis::RedisResult<()> = redis::cmd("SET")
                .arg(compact.wanted())
                .arg(1)
                .arg("EX")
                .arg(WANTED_KEPT.as_secs())
                .query_async(&mut connection)
                .await;
            return Ok(Form::CompactAfterTold(after, false));
        }
        let added: redis::RedisResult<()> = redis::cmd("SADD")
            .arg(compact.topics())
            .arg(far)
            .query_async(&mut connection)
            .await;
        // Not added, not staged: the legacy form then.
        Ok(Form::CompactAfterTold(after, added.is_ok()))
    }

    /// Whether a daemon beat within [`BEAT_FRESH`], by Redis's clock; read again once the last
    /// answer is [`BEAT_EVERY`] old ([`NONE_STAGES_READ_AGAIN`] for a "no"). A failed read is
    /// "no": the legacy form is always safe.
    async fn stagers_alive(&self) -> bool {
        let known = *self.inner.beats.0.lock().expect("not poisoned");
        if let Some((read_at, alive)) = known
            && read_at.elapsed()
                < if alive {
                    BEAT_EVERY
                } else {
                    NONE_STAGES_READ_AGAIN
                }
        {
            return alive;
        }
        let alive = self.read_beats().await.unwrap_or(false);
        *self.inner.beats.0.lock().expect("not poisoned") = Some((Instant::now(), alive));
        alive
    }

    async fn read_beats(&self) -> Result<bool> {
        let Some(compact) = self.keys().compact() else {
            return Ok(false);
        };
        let now = self.now().await?;
        let fresh = ((now - BEAT_FRESH.as_secs_f64()) * 1000.0).ceil() as i64;
        let found: Vec<Vec<u8>> = redis::cmd("ZRANGEBYSCORE")
            .arg(compact.stagers())
            .arg(fresh)
            .arg("+inf")
            .arg("LIMIT")
            .arg(0)
            .arg(1)
            .query_async(&mut self.connection().await?)
            .await?;
        Ok(!found.is_empty())
    }
}
