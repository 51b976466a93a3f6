//! The Redis key names and bucket fields: the legacy ones are a contract with the PHP and Go Delayer
//! clients; the others are ours, and legacy clients never look at them. [`Layout`] says which names
//! a Redis uses, [`Keys`] holds them: every key name any part of delayer uses comes from here.

/// Sorted set: job id → due time in unix seconds (whole seconds from legacy clients).
pub const JOB_POOL: &str = "delayer:job_pool";
/// Prefix of the hash holding a job's fields (see [`field`]).
pub const JOB_BUCKET_PREFIX: &str = "delayer:job_bucket:";
/// Prefix of the list a topic's due job ids wait in for consumers (LPUSHed here, RPOPed by clients).
pub const READY_QUEUE_PREFIX: &str = "delayer:ready_queue:";

/// Ours. Sorted set: reserved job id → the deadline (whole unix milliseconds) by which it must be
/// acked, touched or nacked, or be delivered again.
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
    /// Ours: the token of the reserve call that reserved the job last, to find what a call whose
    /// reply was lost reserved.
    pub const RESERVED_BY: &str = "reserved_by";
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

/// The pool of the earliest Delayer generation (servers v1.0.1-1.0.2, PHP client 1.0.1): the
/// same layout under other names.
pub const JOP_POOL: &str = "delayer:jop_pool";
/// Its bucket prefix.
pub const JOP_BUCKET_PREFIX: &str = "delayer:jop_bucket:";

/// Which key names a Redis holds its jobs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// The Delayer servers' and clients' names (`delayer:job_pool`, ...).
    #[default]
    Legacy,
    /// The earliest generation's (`delayer:jop_pool`, `delayer:jop_bucket:<id>`).
    Jop,
    /// For Redis Cluster: every key of a topic carries the topic as its hash tag
    /// (`delayer:{TOPIC}:job_pool`, ...), so that each topic lives in one slot and the scripts
    /// can work on it atomically. Legacy clients do not know it.
    Cluster,
}

/// The key names of one layout: of every topic's jobs, or in the cluster layout one topic's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    pool: String,
    bucket_prefix: String,
    ready: Affixes,
    dead: Affixes,
    reserved: String,
    topics: String,
    /// The cluster layout's: the one topic whose keys these are. The registry of topics is in
    /// another slot than they are then, out of the scripts' reach.
    topic: Option<String>,
}

/// A key made of a topic between a prefix and a suffix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Affixes {
    pub prefix: String,
    pub suffix: String,
}

impl Affixes {
    fn around(&self, topic: &str) -> String {
        format!("{}{topic}{}", self.prefix, self.suffix)
    }
}

impl Layout {
    /// Why this layout cannot hold `topic`, if it cannot: in the cluster layout a topic that
    /// starts with `}` makes an empty hash tag, which would scatter its keys over the cluster.
    pub fn refusal(self, topic: &str) -> Option<&'static str> {
        (self == Layout::Cluster && topic.starts_with('}')).then_some(
            "starts with '}', so its keys could not share a hash slot in the cluster layout",
        )
    }

    /// The names in this layout; `topic` matters only to the cluster layout.
    pub fn keys(self, topic: &str) -> Keys {
        let (pool, bucket_prefix) = match self {
            Layout::Legacy => (JOB_POOL, JOB_BUCKET_PREFIX),
            Layout::Jop => (JOP_POOL, JOP_BUCKET_PREFIX),
            Layout::Cluster => return Keys::cluster(topic),
        };
        let prefixed = |prefix: &str| Affixes {
            prefix: prefix.to_string(),
            suffix: String::new(),
        };
        Keys {
            pool: pool.to_string(),
            bucket_prefix: bucket_prefix.to_string(),
            ready: prefixed(READY_QUEUE_PREFIX),
            dead: prefixed(DEAD_QUEUE_PREFIX),
            reserved: RESERVED.to_string(),
            topics: TOPICS.to_string(),
            topic: None,
        }
    }
}

/// How every key of the cluster layout begins: the topic follows, as the hash tag.
pub const CLUSTER_PREFIX: &str = "delayer:{";
/// How a topic's pool ends in the cluster layout (`delayer:{TOPIC}:job_pool`).
pub const CLUSTER_POOL_SUFFIX: &str = "}:job_pool";

impl Keys {
    fn cluster(topic: &str) -> Keys {
        let tagged = |name: &str| format!("{CLUSTER_PREFIX}{topic}}}:{name}");
        let around = |name: &str| Affixes {
            prefix: CLUSTER_PREFIX.to_string(),
            suffix: format!("}}:{name}"),
        };
        Keys {
            pool: format!("{CLUSTER_PREFIX}{topic}{CLUSTER_POOL_SUFFIX}"),
            bucket_prefix: tagged("job_bucket:"),
            ready: around("ready_queue"),
            dead: around("dead_queue"),
            reserved: tagged("reserved"),
            // One key for the whole cluster, in a slot of its own: pushers add to it, the daemon
            // reads it to know which topics' pools to look at.
            topics: TOPICS.to_string(),
            topic: Some(topic.to_string()),
        }
    }

    /// The sorted set of waiting job ids, scored by due time.
    pub fn pool(&self) -> &str {
        &self.pool
    }

    /// The hash holding job `id`'s fields.
    pub fn bucket(&self, id: &str) -> String {
        format!("{}{id}", self.bucket_prefix)
    }

    pub fn bucket_prefix(&self) -> &str {
        &self.bucket_prefix
    }

    /// The list `topic`'s due job ids wait in.
    pub fn ready(&self, topic: &str) -> String {
        self.ready.around(topic)
    }

    pub fn ready_affixes(&self) -> &Affixes {
        &self.ready
    }

    /// The list of `topic`'s jobs that failed too often.
    pub fn dead(&self, topic: &str) -> String {
        self.dead.around(topic)
    }

    pub fn dead_affixes(&self) -> &Affixes {
        &self.dead
    }

    /// The sorted set of reserved job ids, scored by deadline.
    pub fn reserved(&self) -> &str {
        &self.reserved
    }

    /// The set of every topic seen.
    pub fn topics(&self) -> &str {
        &self.topics
    }

    /// The topic every job under these keys belongs to, as the scripts are told it: in the
    /// cluster layout the one whose keys these are (its lists are the only ones in the scripts'
    /// slot), else "" (each job's own `topic` field says).
    pub fn topic_for_scripts(&self) -> &str {
        self.topic.as_deref().unwrap_or("")
    }

    /// The registry of topics as the scripts are told it: "" where it is in another slot than
    /// the script's keys (the cluster layout: there the clients add a topic before pushing).
    pub fn registry_for_scripts(&self) -> &str {
        if self.topic.is_none() {
            &self.topics
        } else {
            ""
        }
    }
}
