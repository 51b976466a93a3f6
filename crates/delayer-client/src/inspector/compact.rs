//! Going back from the compact layout (see `docs/compact.md`): every job waiting compact written
//! in the legacy form, with its own due time and data.

use redis::AsyncCommands;

use super::handle::Inspector;
use crate::error::{Error, Result};
use delayer_wire::name::Topic;
use delayer_wire::scripts::compact_stage::Reach;

/// What [`Inspector::expand_compact`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Expanded {
    /// Jobs written in the legacy form.
    pub jobs: u64,
    /// Jobs dropped: their data had expired, or a legacy client had pushed their id again.
    pub dropped: u64,
}

impl Inspector {
    /// Writes every job waiting compact in the legacy form now, whatever its due time, with its
    /// own due time and data (see `docs/compact.md`, going back): the last step before running
    /// a daemon of a version without the compact layout. Turn compact pushes off first, or new
    /// jobs wait compact again.
    pub async fn expand_compact(&self) -> Result<Expanded> {
        let mut expanded = Expanded::default();
        let Some(compact) = self.client.keys().compact() else {
            return Ok(expanded);
        };
        let mut connection = self.client.connection().await?;
        // The shards of the topics that had compact pushes: one a topic in the cluster layout,
        // the one of every topic elsewhere (where pushes do not list them).
        let topics: Vec<Topic> = connection.smembers(compact.topics()).await?;
        let script = &self.scripts().compact_stage;
        for (keys, _) in self.client.keys().shards(&topics) {
            let Some(compact) = keys.compact() else {
                continue;
            };
            loop {
                let staged = script
                    .run(&mut connection, &keys, compact, Reach::All)
                    .await
                    .map_err(|error| Error::about_key(error, keys.pool()))?;
                expanded.jobs += staged.jobs;
                expanded.dropped += staged.expired + staged.replaced;
                if !staged.more {
                    break;
                }
            }
        }
        Ok(expanded)
    }
}
