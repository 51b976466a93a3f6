//! Pausing a topic: while it is paused, the daemons leave its due jobs in the pool, in due order,
//! so that no consumer (legacy or ours) gets anything new of it. A pause is a key in Redis: every
//! daemon on that Redis sees it, and it lasts across their restarts.

use redis::AsyncCommands;

use super::handle::Inspector;
use crate::client::{check_topic_in, check_topic_to_write_in};
use crate::error::{Error, Result};

/// Parked jobs made due again by one call of a resume.
const RESUME_BATCH: usize = 1000;

impl Inspector {
    /// Pauses `topic` (and registers it, so that it is listed while it has no job yet). Jobs
    /// already on its ready list stay there for consumers; pausing a paused topic changes nothing.
    pub async fn pause(&self, topic: impl AsRef<[u8]>) -> Result<()> {
        let topic = topic.as_ref();
        check_topic_to_write_in(self.client.layout(), topic)?;
        let keys = self.client.keys_for(topic);
        let now = self.client.now().await?;
        let paused = keys.paused(topic);
        let mut redis = self.client.connection().await?;
        // NX: the first pause's time is the one to show.
        let _: Option<String> = redis::cmd("SET")
            .arg(&paused)
            .arg(format!("{now:.3}"))
            .arg("NX")
            .query_async(&mut redis)
            .await
            .map_err(|error| Error::about_key(error, &paused))?;
        redis.sadd::<_, _, ()>(keys.topics(), topic).await?;
        Ok(())
    }

    /// Resumes `topic`: its jobs that fell due while it was paused move at once, in the order
    /// they were due. Returns how many. Resuming a topic that is not paused changes nothing.
    pub async fn resume(&self, topic: impl AsRef<[u8]>) -> Result<usize> {
        let topic = topic.as_ref();
        check_topic_to_write_in(self.client.layout(), topic)?;
        let keys = self.client.keys_for(topic);
        let mut total = 0;
        loop {
            let (due, left) = self
                .scripts()
                .resume
                .run(
                    &mut self.client.connection().await?,
                    &keys,
                    topic,
                    RESUME_BATCH,
                )
                .await
                .map_err(|error| Error::about_key(error, keys.paused(topic)))?;
            total += due;
            if left == 0 {
                return Ok(total);
            }
        }
    }

    /// Whether `topic` is paused.
    pub async fn is_paused(&self, topic: impl AsRef<[u8]>) -> Result<bool> {
        let topic = topic.as_ref();
        check_topic_in(self.client.layout(), topic)?;
        let paused = self.client.keys_for(topic).paused(topic);
        Ok(self.client.connection().await?.exists(&paused).await?)
    }
}
