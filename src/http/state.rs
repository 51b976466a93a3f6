//! What every handler may use (`AppState`), built once when the server binds.

use std::sync::Arc;
use std::time::Duration;

use delayer_client::{Client, Inspector};
use delayer_wire::shared_connection::SharedConnection;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::console::state::Console;
use super::cross_site::HostName;
use super::figures::Figures;
use super::jobs::heartbeats::HttpConsumers;
use crate::metrics::Metrics;

/// What every handler may use; shared, not cloned, by each request.
pub(super) struct AppState {
    pub(super) client: Client,
    /// The operators' calls, on the client's connection.
    pub(super) inspector: Inspector,
    /// The client's connection, for the daemon's own keys (the console's logouts).
    pub(super) redis: Arc<SharedConnection>,
    pub(super) metrics: Arc<Metrics>,
    /// What `/metrics` and the console show, shared by their readers.
    pub(super) figures: Arc<Figures>,
    pub(super) token: Option<String>,
    /// `[http] hosts`.
    pub(super) hosts: Arc<[HostName]>,
    pub(super) timer_interval: Duration,
    pub(super) redis_address: String,
    pub(super) console: Console,
    /// The callers of reserve that named themselves, for their heartbeats.
    pub(super) http_consumers: HttpConsumers,
    /// One large read at a time for the console and the waiting jobs' API (a page of the job
    /// pool, a topic's page with its reservations' scan): more would wait in Redis, in front of
    /// the mover's moves (the `waiting` bench: 20 clients at once made moves 4 times later at the
    /// 99th percentile; one at a time, no later than without them).
    pub(super) large_reads: Semaphore,
    /// QStash's API, with `[qstash] token`.
    pub(super) qstash: Option<crate::qstash::Api>,
    /// Cancelled when a stop begins: waits for jobs end early, so that a stop never waits them out.
    pub(super) stopping: CancellationToken,
}
