//! The Redis key names and bucket fields: the legacy ones are a contract with the PHP and Go Delayer
//! clients; the others are ours, and legacy clients never look at them.

/// Sorted set: job id → due time in unix seconds (whole seconds from legacy clients).
pub const JOB_POOL: &str = "delayer:job_pool";
/// Prefix of the hash holding a job's fields (see [`field`]).
pub const JOB_BUCKET_PREFIX: &str = "delayer:job_bucket:";
/// Prefix of the list a topic's due job ids wait in for consumers (LPUSHed here, RPOPed by clients).
pub const READY_QUEUE_PREFIX: &str = "delayer:ready_queue:";

/// Ours. Sorted set: reserved job id → the deadline (unix seconds) by which it must be acked,
/// touched or nacked, or be delivered again.
pub const RESERVED: &str = "delayer:reserved";
/// Ours. Prefix of the list of a topic's jobs that failed `max_attempts` times.
pub const DEAD_QUEUE_PREFIX: &str = "delayer:dead_queue:";
/// Ours. Set of every topic seen (pushed by our clients, or moved by the daemon), so that nothing
/// needs to SCAN to find them.
pub const TOPICS: &str = "delayer:topics";

/// The fields of a job's bucket.
pub mod field {
    /// Legacy: the topic.
    pub const TOPIC: &str = "topic";
    /// Legacy: the body.
    pub const BODY: &str = "body";
    /// Ours: how many times the job was reserved.
    pub const ATTEMPTS: &str = "attempts";
    /// Ours: when the job fell (or falls) due, in unix seconds; written by our pushes only.
    pub const DUE: &str = "due";
    /// Ours: the delay the job was pushed with, in seconds; written by our pushes only.
    pub const DELAY: &str = "delay";
    /// Ours: when the job went to its topic's dead list, in unix seconds.
    pub const DIED_AT: &str = "died_at";
}

/// The bucket key of job `id`.
pub fn job_bucket(id: &str) -> String {
    format!("{JOB_BUCKET_PREFIX}{id}")
}

/// The ready list key of `topic`.
pub fn ready_queue(topic: &str) -> String {
    format!("{READY_QUEUE_PREFIX}{topic}")
}

/// The dead list key of `topic`.
pub fn dead_queue(topic: &str) -> String {
    format!("{DEAD_QUEUE_PREFIX}{topic}")
}
