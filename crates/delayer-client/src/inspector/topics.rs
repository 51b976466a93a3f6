//! The registry of topics (`delayer:topics`), which the daemon and our pushes keep: read whole,
//! counted, or a page at a time, never found by a SCAN.

use redis::AsyncCommands;

use super::handle::Inspector;
use crate::error::Result;
use delayer_wire::name::Topic;

impl Inspector {
    /// The topics of the registry: every topic our pushes, the daemon's moves and its dead lists
    /// have seen.
    pub async fn topics(&self) -> Result<Vec<Topic>> {
        self.client.topics().await
    }

    /// How many topics the registry holds (SCARD): a cheap look for whether a topic was added,
    /// before reading them all with [`topics`](Inspector::topics).
    pub async fn topic_count(&self) -> Result<u64> {
        let mut connection = self.client.connection().await?;
        Ok(connection.scard(self.client.keys().topics()).await?)
    }

    /// One page of the registry (SSCAN): `count` topics or so from `cursor` (0 to begin), and the
    /// cursor of the next page (0 after the last). A topic may come twice in one pass, as SSCAN
    /// gives it; one there throughout the pass comes at least once.
    pub async fn topics_page(&self, cursor: u64, count: usize) -> Result<(u64, Vec<Topic>)> {
        Ok(redis::cmd("SSCAN")
            .arg(self.client.keys().topics())
            .arg(cursor)
            .arg("COUNT")
            .arg(count)
            .query_async(&mut self.client.connection().await?)
            .await?)
    }
}
