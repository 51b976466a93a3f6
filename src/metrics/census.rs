//! What Redis holds, read in whole by a census, and the gauges that take its figures.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::SystemTime;

use delayer_wire::Topic;

use super::Schedules;

/// What Redis holds, read in whole: the pools' counts, and the ready lists' lengths of the
/// topics with the most ready jobs and the sum of the others'.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Census {
    /// Jobs in the pool (or pools).
    pub waiting: u64,
    /// Of those, the ones due now.
    pub due_now: u64,
    /// When the next job not yet due falls due.
    pub next_due: Option<SystemTime>,
    /// Topics whose ready lists were read (those holding another type of value included, which
    /// are left out of the rest).
    pub topics: u64,
    /// The topics with the most ready jobs, most first (ties by name), as labels name them;
    /// at most `[http] max_listed_topics`.
    pub listed: Vec<(String, u64)>,
    /// The listed topics themselves, in the same order.
    pub listed_topics: Vec<Topic>,
    /// The listed topics' dead jobs, in the same order.
    pub dead: Vec<(String, u64)>,
    /// The other topics whose ready lists were read.
    pub unlisted_topics: u64,
    /// Their ready jobs.
    pub unlisted_ready: u64,
    /// Their dead jobs.
    pub unlisted_dead: u64,
    /// Jobs reserved.
    pub reserved: u64,
    /// How long the job next in line has been ready, for the listed topics that have one.
    pub oldest_ready_age: Vec<(String, f64)>,
    /// Every paused topic, as labels name them, by name.
    pub paused: BTreeSet<String>,
    /// The schedules; none when they could not be read.
    pub schedules: Option<Arc<Schedules>>,
    /// What the console shows of the listed topics besides, in the same order.
    pub details: Vec<delayer_client::inspector::TopicDetails>,
    /// The Redis server's version, when this Redis user may ask.
    pub redis_version: Option<String>,
    /// When the read began (unix time).
    pub read_at: f64,
}
