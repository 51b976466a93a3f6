//! A topic's dead list: read a page at a time, and its jobs requeued (back to the pool, due
//! now, their attempts counted afresh) or deleted, one by id or all of them.

use super::handle::Inspector;
use crate::client::{check_id, check_topic_in};
use crate::error::{Error, Result};
use delayer_wire::name::JobId;
use delayer_wire::scripts::dead_job::DeadAction;

/// Dead jobs requeued per script call.
const REQUEUE_BATCH: usize = 1000;

impl Inspector {
    /// The ids on `topic`'s dead list, oldest first, at most `limit`.
    pub async fn dead(&self, topic: impl AsRef<[u8]>, limit: usize) -> Result<Vec<JobId>> {
        self.dead_page(topic, 0, limit).await
    }

    /// A page of `topic`'s dead list: `count` ids at most, oldest first, after skipping the
    /// `skip` oldest. One LRANGE of the page, whatever the list's length.
    pub async fn dead_page(
        &self,
        topic: impl AsRef<[u8]>,
        skip: usize,
        count: usize,
    ) -> Result<Vec<JobId>> {
        let topic = topic.as_ref();
        check_topic_in(self.client.layout(), topic)?;
        self.page_of(self.client.keys_for(topic).dead(topic), skip, count)
            .await
    }

    /// Moves dead job `id` of `topic` back to the pool, due now, its attempts counted afresh;
    /// [`Error::NotDead`] when it is not on the topic's dead list. Atomic: the job is never both
    /// dead and waiting, nor neither. `false` when its entry was stale (the job pushed again
    /// since, or its data expired): the entry is dropped and nothing else changes.
    pub async fn requeue_dead_job(
        &self,
        topic: impl AsRef<[u8]>,
        id: impl AsRef<[u8]>,
    ) -> Result<bool> {
        self.dead_job(topic.as_ref(), id.as_ref(), DeadAction::Requeue)
            .await
    }

    /// Deletes dead job `id` of `topic` (its dead-list entry and its data); [`Error::NotDead`]
    /// when it is not on the topic's dead list. `false` when its entry was stale (see
    /// [`requeue_dead_job`](Inspector::requeue_dead_job)): only the entry is dropped.
    pub async fn delete_dead_job(
        &self,
        topic: impl AsRef<[u8]>,
        id: impl AsRef<[u8]>,
    ) -> Result<bool> {
        self.dead_job(topic.as_ref(), id.as_ref(), DeadAction::Delete)
            .await
    }

    async fn dead_job(&self, topic: &[u8], id: &[u8], action: DeadAction) -> Result<bool> {
        check_topic_in(self.client.layout(), topic)?;
        check_id(id)?;
        let keys = self.client.keys_for(topic);
        let done = self
            .scripts()
            .dead_job
            .run(
                &mut self.client.connection().await?,
                &keys,
                topic,
                id,
                action,
            )
            .await
            .map_err(|error| Error::about_key(error, keys.dead(topic)))?;
        match done {
            0 => Err(Error::NotDead {
                id: id.into(),
                topic: topic.into(),
            }),
            done => Ok(done == 1),
        }
    }

    /// Moves every dead job of `topic` back to the pool, due now, its attempts counted afresh.
    /// Returns how many went back (those whose data had expired are dropped).
    pub async fn requeue_dead(&self, topic: impl AsRef<[u8]>) -> Result<usize> {
        let topic = topic.as_ref();
        check_topic_in(self.client.layout(), topic)?;
        let mut total = 0;
        loop {
            let (requeued, dropped) = self
                .scripts()
                .requeue_dead
                .run(
                    &mut self.client.connection().await?,
                    &self.client.keys_for(topic),
                    topic,
                    REQUEUE_BATCH,
                )
                .await
                .map_err(|error| {
                    Error::about_key(error, self.client.keys_for(topic).dead(topic))
                })?;
            total += requeued;
            if requeued + dropped < REQUEUE_BATCH {
                return Ok(total);
            }
        }
    }
}
