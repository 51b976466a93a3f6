//! The Redis key names shared with the PHP and Go Delayer clients (a compatibility contract).

/// Sorted set: job id → due time in unix seconds.
pub const JOB_POOL: &str = "delayer:job_pool";
/// Prefix of the hash holding a job's `topic` and `body`.
pub const JOB_BUCKET_PREFIX: &str = "delayer:job_bucket:";
/// Prefix of the list a topic's due job ids wait in for consumers (LPUSHed here, RPOPed by clients).
pub const READY_QUEUE_PREFIX: &str = "delayer:ready_queue:";

/// The bucket key of job `id`.
pub fn job_bucket(id: &str) -> String {
    format!("{JOB_BUCKET_PREFIX}{id}")
}

/// The ready list key of `topic`.
pub fn ready_queue(topic: &str) -> String {
    format!("{READY_QUEUE_PREFIX}{topic}")
}
