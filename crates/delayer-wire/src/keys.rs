//! The Redis key names and bucket fields: the legacy ones are a contract with the PHP and Go Delayer
//! clients; the others are ours, and legacy clients never look at them. A [`Layout`] is two
//! choices, what the keys are called ([`Names`]) and where a topic's keys are ([`Placement`]);
//! [`Keys`] holds the names it gives. Every key name any part of delayer uses comes from here.

use std::borrow::Cow;

use crate::compact::CompactKeys;

/// Sorted set: job id → due time in unix seconds (whole seconds from legacy clients).
pub const JOB_POOL: &str = "delayer:job_pool";
/// Prefix of the hash holding a job's fields (see [`field`]).
pub const JOB_BUCKET_PREFIX: &str = "delayer:job_bucket:";
/// Prefix of the list a topic's due job ids wait in for consumers (LPUSHed here, RPOPed by clients).
pub const READY_QUEUE_PREFIX: &str = "delayer:ready_queue:";
/// The pool of the earliest Delayer generation (servers v1.0.1-1.0.2, PHP client 1.0.1).
pub const JOP_POOL: &str = "delayer:jop_pool";
/// Its bucket prefix.
pub const JOP_BUCKET_PREFIX: &str = "delayer:jop_bucket:";

/// Ours. Sorted set: reserved job id → the deadline (whole unix milliseconds) by which it must be
/// acked, touched or nacked, or be delivered again.
pub const RESERVED: &str = "delayer:reserved";
/// Ours. Hash: reserved job id → `<attempt>:<token>`, the attempt the reservation is and the
/// token of the reserve call that made it (see [`Keys::holders`]). Written for a whole reserve
/// call at once, so that nothing is written to a job's bucket while it is reserved. Reservations
/// made before it existed have no entry: their attempt is the bucket's `attempts`.
pub const HOLDERS: &str = "delayer:reserved:holders";
/// What follows a reservations key in its holders' key name.
const HOLDERS_SUFFIX: &str = ":holders";
/// Ours. Prefix of the list of a topic's jobs that failed `max_attempts` times.
pub const DEAD_QUEUE_PREFIX: &str = "delayer:dead_queue:";
/// Ours. Prefix of a topic's pause: while the key exists (its value is when it was paused, unix
/// seconds), the daemon leaves the topic's due jobs in the pool.
pub const PAUSED_PREFIX: &str = "delayer:paused:";
/// Ours. Prefix of the sorted set of a paused topic's jobs that fell due and wait in the pool,
/// each scored by its own due time, so that a resume finds them without a scan and takes them in
/// due order.
pub const PARKED_PREFIX: &str = "delayer:parked_by_due:";
/// Ours, written by earlier builds: prefix of the set of a paused topic's parked jobs, without
/// their due times. A resume deletes it; its jobs move a recheck after they were parked.
pub const PARKED_SET_PREFIX: &str = "delayer:parked:";
/// Ours. Prefix of a console session ended by a logout (the session's id follows): while the key
/// exists, until the session would have expired anyway, every daemon on this Redis refuses it.
pub const LOGGED_OUT_PREFIX: &str = "delayer:logged_out:";
/// Ours. What the keys of the compact layout start with (see [`crate::compact`]): where jobs
/// our own code pushes wait until shortly before they fall due (one Redis; placed per topic,
/// `delayer:{TOPIC}:compact:`).
pub const COMPACT_PREFIX: &str = "delayer:compact:";
/// Ours. Set of every topic seen (pushed by our clients, or moved by the daemon), so that nothing
/// needs to SCAN to find them.
pub const TOPICS: &str = "delayer:topics";

/// Ours. Sorted set: consumer id → its last heartbeat, unix milliseconds by Redis's clock (see
/// [`crate::consumer`]). Each beat drops the entries older than
/// [`KEPT`](crate::consumer::KEPT), so that listing it costs what the consumers seen lately cost.
pub const CONSUMERS: &str = "delayer:consumers";
/// Ours. Prefix of a consumer's hash (its id follows; see [`consumer`]): what its last beat told
/// (host, pid, topics, ...: [`crate::consumer::field`]), expiring [`KEPT`](crate::consumer::KEPT)
/// after that beat. Its hash tag is [`CONSUMERS`], so that in a cluster every consumer key is in
/// that one slot, and one script writes the set and a hash.
pub const CONSUMER_PREFIX: &str = "delayer:consumer:{delayer:consumers}:";

/// Ours. Hash: schedule name → its topic, every schedule's (in a slot of its own in a cluster).
pub const SCHEDULES: &str = "delayer:schedules";
/// The daemon's Kafka link: per consumer group (the suffix), a hash of the last offset of each
/// `<kafka topic>:<partition>` whose delay requests were pushed as jobs.
pub const KAFKA_OFFSETS_PREFIX: &str = "delayer:kafka_offsets:";
/// Ours. Prefix of a schedule's hash (its definition and state; see [`crate::schedule`]).
pub const SCHEDULE_PREFIX: &str = "delayer:schedule:";
/// Ours. Sorted set: schedule name → its next tick (unix seconds), while it is not paused.
pub const SCHEDULES_BY_NEXT: &str = "delayer:schedules_by_next";

/// Ours. Prefix of the history's keys (see [`crate::history`]): `delayer:{history}:<minute>`,
/// a hash of every topic's counts of that unix minute, and `delayer:{history}:<minute>:<topic>`,
/// one topic's. The same in every layout: the hash tag keeps them in one slot of their own in a
/// cluster, where the count script writes a minute's keys together.
pub const HISTORY: &str = "delayer:{history}";

/// How every key of a topic placed [`Placement::PerTopic`] begins: the topic follows, as the
/// hash tag.
const PER_TOPIC_PREFIX: &str = "delayer:{";
/// The name of each topic's reservations key, placed per topic (after its hash tag).
const PER_TOPIC_RESERVED: &str = "reserved";
/// Each topic's pause and parked jobs (and earlier builds' parked set), placed per topic (after
/// its hash tag).
const PER_TOPIC_PAUSED: &str = "paused";
const PER_TOPIC_PARKED: &str = "parked_by_due";
const PER_TOPIC_PARKED_SET: &str = "parked";

/// The fields of a job's bucket.
pub mod field {
    /// Legacy: the topic.
    pub const TOPIC: &str = "topic";
    /// Legacy: the body.
    pub const BODY: &str = "body";
    /// Ours: how many times the job was reserved, not counting a reservation current now (whose
    /// attempt the holders hash has), save for reservations made by versions before it.
    pub const ATTEMPTS: &str = "attempts";
    /// Ours: when the job fell (or falls) due, in unix seconds; written by our pushes only.
    pub const DUE: &str = "due";
    /// Ours: the delay the job was pushed with, in seconds; written by our pushes only.
    pub const DELAY: &str = "delay";
    /// Ours: when the job went to its topic's dead list, in unix seconds.
    pub const DIED_AT: &str = "died_at";
    /// Ours: why the job went to its dead list, when something said (Kafka's refusal); absent
    /// for a job that ran out of attempts.
    pub const DIED_WHY: &str = "died_why";
    /// Ours: when a job was delivered to Kafka in the `id` form, in unix seconds; its data is
    /// kept a while after (`[kafka] keep_delivered`) for consumers to read with `get`.
    pub const DELIVERED_AT: &str = "delivered_at";
    /// Ours, written by versions before the holders hash ([`HOLDERS`](super::HOLDERS)): the
    /// token of the reserve call that reserved the job last, to find what a call whose reply was
    /// lost reserved. Still read for reservations such versions made.
    pub const RESERVED_BY: &str = "reserved_by";
    /// Ours: while the job waits in the pool because its topic is paused, the score it was
    /// parked at; a resume makes it due again only if the pool still holds it there (a job pushed
    /// again meanwhile keeps its new due time).
    pub const PARKED: &str = "parked";
}

/// The bucket key of job `id` in the legacy layout. Keys are bytes, as ids and topics are (see
/// [`JobId`](crate::JobId)).
pub fn job_bucket(id: impl AsRef<[u8]>) -> Vec<u8> {
    [JOB_BUCKET_PREFIX.as_bytes(), id.as_ref()].concat()
}

/// The ready list key of `topic` in the legacy layout.
pub fn ready_queue(topic: impl AsRef<[u8]>) -> Vec<u8> {
    [READY_QUEUE_PREFIX.as_bytes(), topic.as_ref()].concat()
}

/// The dead list key of `topic` in the legacy layout.
pub fn dead_queue(topic: impl AsRef<[u8]>) -> Vec<u8> {
    [DEAD_QUEUE_PREFIX.as_bytes(), topic.as_ref()].concat()
}

/// The hash of consumer `id` (see [`CONSUMER_PREFIX`]): one name in every layout.
pub fn consumer(id: &str) -> String {
    format!("{CONSUMER_PREFIX}{id}")
}

/// The history's hash of every topic's counts of unix minute `minute`.
pub fn history_minute(minute: u64) -> String {
    format!("{HISTORY}:{minute}")
}

/// The history's hash of `topic`'s counts of unix minute `minute`.
pub fn history_topic_minute(minute: u64, topic: impl AsRef<[u8]>) -> Vec<u8> {
    [history_minute(minute).as_bytes(), b":", topic.as_ref()].concat()
}

/// What the pool and the buckets are called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Names {
    /// The Delayer servers' and clients' names (`job_pool`, `job_bucket`).
    #[default]
    Legacy,
    /// The earliest generation's (`jop_pool`, `jop_bucket`).
    Jop,
}

/// Where a topic's keys are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// One pool for every topic (`delayer:job_pool`): one Redis, as the legacy clients use it.
    #[default]
    Shared,
    /// Each topic's keys under the topic as their hash tag (`delayer:{TOPIC}:job_pool`), so that
    /// they share one slot of a Redis Cluster and the scripts work on them atomically. Legacy
    /// clients do not know it.
    PerTopic,
}

/// Which key names a Redis holds its jobs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Layout {
    pub names: Names,
    pub placement: Placement,
}

impl Layout {
    /// The legacy clients' layout.
    pub const LEGACY: Layout = Layout {
        names: Names::Legacy,
        placement: Placement::Shared,
    };
    /// The earliest generation's names, on one Redis.
    pub const JOP: Layout = Layout {
        names: Names::Jop,
        placement: Placement::Shared,
    };
    /// For Redis Cluster: the legacy names, each topic's keys in a slot of their own.
    pub const CLUSTER: Layout = Layout {
        names: Names::Legacy,
        placement: Placement::PerTopic,
    };

    /// Whether each topic has keys of its own (a pool, reservations), in another slot than the
    /// registry of topics.
    pub fn per_topic(self) -> bool {
        self.placement == Placement::PerTopic
    }

    /// Why this layout cannot hold `topic`, if it cannot: placed per topic, a topic that starts
    /// with `}` makes an empty hash tag, which would scatter its keys over the cluster; and one
    /// that is not UTF-8 cannot be named in key names, which are text there (the cluster layout
    /// is ours alone: no legacy client writes it).
    pub fn refusal(self, topic: impl AsRef<[u8]>) -> Option<&'static str> {
        let topic = topic.as_ref();
        if !self.per_topic() {
            None
        } else if topic.starts_with(b"}") {
            Some("starts with '}', so its keys could not share a hash slot in the cluster layout")
        } else if std::str::from_utf8(topic).is_err() {
            Some("is not UTF-8, which the cluster layout's key names do not hold")
        } else {
            None
        }
    }

    /// Why no new job (nor a pause) may be written to `topic` in this layout, if none may: what
    /// [`refusal`](Self::refusal) says and, placed per topic, a `}` anywhere. Its hash tag ends at
    /// the first `}`, so the rest of the topic runs into the key's name, and its keys could be
    /// another topic's: topic `x}:job_bucket:Q`'s job `I` and topic `x`'s job `Q}:job_bucket:I`
    /// would share one bucket. Jobs such a topic already holds are still moved and taken.
    pub fn write_refusal(self, topic: impl AsRef<[u8]>) -> Option<&'static str> {
        let topic = topic.as_ref();
        self.refusal(topic).or_else(|| {
            (self.per_topic() && topic.contains(&b'}')).then_some(
                "holds '}', so its keys could be another topic's in the cluster layout; its jobs \
                 still move, but it takes no new ones",
            )
        })
    }

    /// Placed per topic, what comes before and after the topic in each topic's pool
    /// (`delayer:{` and `}:job_pool`); `None` with one pool for every topic.
    pub fn topic_pools(self) -> Option<Affixes> {
        let (pool, _) = self.words();
        self.per_topic().then(|| Affixes {
            prefix: PER_TOPIC_PREFIX.to_string(),
            suffix: format!("}}:{pool}"),
        })
    }

    /// Placed per topic, what comes before and after the topic in each topic's reservations
    /// (`delayer:{` and `}:reserved`); `None` with one key for every topic.
    pub fn topic_reservations(self) -> Option<Affixes> {
        self.per_topic().then(|| Affixes {
            prefix: PER_TOPIC_PREFIX.to_string(),
            suffix: format!("}}:{PER_TOPIC_RESERVED}"),
        })
    }

    /// The topic whose pool `key` is, placed per topic; `None` for a key this layout would not
    /// have written so (or a layout with one pool for every topic).
    pub fn topic_of_pool(self, key: &str) -> Option<&str> {
        self.topic_in(key, self.topic_pools()?)
    }

    /// The topic whose reservations `key` is, as [`topic_of_pool`](Self::topic_of_pool).
    pub fn topic_of_reservations(self, key: &str) -> Option<&str> {
        self.topic_in(key, self.topic_reservations()?)
    }

    fn topic_in(self, key: &str, affixes: Affixes) -> Option<&str> {
        let topic = key
            .strip_prefix(affixes.prefix.as_str())?
            .strip_suffix(affixes.suffix.as_str())?;
        (!topic.is_empty() && self.refusal(topic).is_none()).then_some(topic)
    }

    /// The names in this layout; `topic` matters only when keys are placed per topic.
    pub fn keys(self, topic: &str) -> Keys {
        let (pool, bucket) = self.words();
        match self.placement {
            Placement::Shared => Keys {
                layout: self,
                pool: format!("delayer:{pool}"),
                bucket_prefix: format!("delayer:{bucket}:"),
                ready: Affixes::prefix(READY_QUEUE_PREFIX),
                dead: Affixes::prefix(DEAD_QUEUE_PREFIX),
                reserved: RESERVED.to_string(),
                paused: Affixes::prefix(PAUSED_PREFIX),
                parked: Affixes::prefix(PARKED_PREFIX),
                parked_set: Affixes::prefix(PARKED_SET_PREFIX),
                topics: TOPICS.to_string(),
                schedule_prefix: SCHEDULE_PREFIX.to_string(),
                schedules_by_next: SCHEDULES_BY_NEXT.to_string(),
                compact: Some(CompactKeys::new(COMPACT_PREFIX)),
                topic: None,
            },
            Placement::PerTopic => {
                let tagged = |name: &str| format!("{PER_TOPIC_PREFIX}{topic}}}:{name}");
                let around = |name: &str| Affixes {
                    prefix: PER_TOPIC_PREFIX.to_string(),
                    suffix: format!("}}:{name}"),
                };
                Keys {
                    layout: self,
                    pool: tagged(pool),
                    bucket_prefix: tagged(&format!("{bucket}:")),
                    ready: around("ready_queue"),
                    dead: around("dead_queue"),
                    reserved: tagged(PER_TOPIC_RESERVED),
                    paused: around(PER_TOPIC_PAUSED),
                    parked: around(PER_TOPIC_PARKED),
                    parked_set: around(PER_TOPIC_PARKED_SET),
                    // One key for the whole cluster, in a slot of its own: pushers add to it, the
                    // daemon reads it to know which topics' pools to look at.
                    topics: TOPICS.to_string(),
                    // A schedule's keys are its topic's: the claim script pushes its jobs.
                    schedule_prefix: tagged("schedule:"),
                    schedules_by_next: tagged("schedules_by_next"),
                    // In the topic's slot, with its pool and buckets, for the scripts; never
                    // ending in `:job_pool`, which the mover's pool SCAN matches.
                    compact: Some(CompactKeys::new(&tagged("compact:"))),
                    topic: Some(topic.to_string()),
                }
            }
        }
    }

    /// The words for the pool and the buckets.
    fn words(self) -> (&'static str, &'static str) {
        match self.names {
            Names::Legacy => ("job_pool", "job_bucket"),
            Names::Jop => ("jop_pool", "jop_bucket"),
        }
    }
}

/// The key names of one layout: of every topic's jobs, or placed per topic, one topic's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    /// The layout that named these.
    layout: Layout,
    pool: String,
    bucket_prefix: String,
    ready: Affixes,
    dead: Affixes,
    reserved: String,
    paused: Affixes,
    parked: Affixes,
    parked_set: Affixes,
    topics: String,
    schedule_prefix: String,
    schedules_by_next: String,
    compact: Option<CompactKeys>,
    /// Placed per topic: the one topic whose keys these are. The registry of topics is in
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
    fn prefix(prefix: &str) -> Affixes {
        Affixes {
            prefix: prefix.to_string(),
            suffix: String::new(),
        }
    }

    fn around(&self, topic: &[u8]) -> Vec<u8> {
        [self.prefix.as_bytes(), topic, self.suffix.as_bytes()].concat()
    }
}

/// Where topics' keys are is answered here alone, so that a new layout touches this module only.
/// A *shard* is the keys one script call works on: in the shared layouts one shard holds every
/// topic; placed per topic, each topic is a shard of its own (a slot of a cluster).
impl Keys {
    /// Whether these are one topic's keys (see [`Layout::per_topic`]).
    pub fn per_topic(&self) -> bool {
        self.topic.is_some()
    }

    /// The keys of `topic`'s jobs: these, when one shard holds every topic; else the topic's own
    /// (a topic that is not UTF-8 named with U+FFFD: the cluster layout refuses such topics
    /// before their keys are needed).
    pub fn of_topic(&self, topic: impl AsRef<[u8]>) -> Cow<'_, Keys> {
        if self.layout.per_topic() {
            Cow::Owned(self.layout.keys(&String::from_utf8_lossy(topic.as_ref())))
        } else {
            Cow::Borrowed(self)
        }
    }

    /// `topics` by shard, each with its shard's keys, in order: all in one shard (even none), or
    /// placed per topic one shard a topic.
    pub fn shards<'t, T: AsRef<[u8]>>(&self, topics: &'t [T]) -> Vec<(Cow<'_, Keys>, &'t [T])> {
        if self.layout.per_topic() {
            topics
                .chunks(1)
                .map(|topic| (self.of_topic(&topic[0]), topic))
                .collect()
        } else {
            vec![(Cow::Borrowed(self), topics)]
        }
    }

    /// These keys, when one shard holds every topic (the shared layouts): a job's keys then do
    /// not depend on its topic, and the pool and the reservations hold every topic's jobs.
    pub fn every_topic(&self) -> Option<&Keys> {
        (!self.layout.per_topic()).then_some(self)
    }

    /// The sorted set of waiting job ids, scored by due time.
    pub fn pool(&self) -> &str {
        &self.pool
    }

    /// The hash holding job `id`'s fields.
    pub fn bucket(&self, id: impl AsRef<[u8]>) -> Vec<u8> {
        [self.bucket_prefix.as_bytes(), id.as_ref()].concat()
    }

    /// What every bucket key starts with.
    pub fn bucket_prefix(&self) -> &str {
        &self.bucket_prefix
    }

    /// The list `topic`'s due job ids wait in.
    pub fn ready(&self, topic: impl AsRef<[u8]>) -> Vec<u8> {
        self.ready.around(topic.as_ref())
    }

    /// What comes before and after the topic in a ready list's key.
    pub fn ready_affixes(&self) -> &Affixes {
        &self.ready
    }

    /// The list of `topic`'s jobs that failed too often.
    pub fn dead(&self, topic: impl AsRef<[u8]>) -> Vec<u8> {
        self.dead.around(topic.as_ref())
    }

    /// What comes before and after the topic in a dead list's key.
    pub fn dead_affixes(&self) -> &Affixes {
        &self.dead
    }

    /// The sorted set of reserved job ids, scored by deadline.
    pub fn reserved(&self) -> &str {
        &self.reserved
    }

    /// The hash of who holds each reservation: reserved job id → `<attempt>:<token>` (the attempt
    /// it is, and the reserve call's token). Beside the reservations, in their slot.
    pub fn holders(&self) -> String {
        format!("{}{HOLDERS_SUFFIX}", self.reserved)
    }

    /// The key whose existence pauses `topic` (see [`PAUSED_PREFIX`]).
    pub fn paused(&self, topic: impl AsRef<[u8]>) -> Vec<u8> {
        self.paused.around(topic.as_ref())
    }

    /// What comes before and after the topic in a pause's key.
    pub fn paused_affixes(&self) -> &Affixes {
        &self.paused
    }

    /// The sorted set of `topic`'s jobs parked while it is paused, by due time (see
    /// [`PARKED_PREFIX`]).
    pub fn parked(&self, topic: impl AsRef<[u8]>) -> Vec<u8> {
        self.parked.around(topic.as_ref())
    }

    /// What comes before and after the topic in the key of its parked jobs.
    pub fn parked_affixes(&self) -> &Affixes {
        &self.parked
    }

    /// The set of `topic`'s parked jobs that earlier builds wrote (see [`PARKED_SET_PREFIX`]).
    pub fn parked_set(&self, topic: impl AsRef<[u8]>) -> Vec<u8> {
        self.parked_set.around(topic.as_ref())
    }

    /// What comes before and after the topic in the key of earlier builds' parked set.
    pub fn parked_set_affixes(&self) -> &Affixes {
        &self.parked_set
    }

    /// The set of every topic seen.
    pub fn topics(&self) -> &str {
        &self.topics
    }

    /// The hash of schedule `name` (of a schedule of these keys' topic, placed per topic).
    pub fn schedule(&self, name: &str) -> String {
        format!("{}{name}", self.schedule_prefix)
    }

    /// The sorted set of this shard's schedules that are not paused, by next tick.
    pub fn schedules_by_next(&self) -> &str {
        &self.schedules_by_next
    }

    /// The registry of schedules: name → topic, every shard's.
    pub fn schedules(&self) -> &str {
        SCHEDULES
    }

    /// The registry of schedules as the scripts are told it: "" where it is in another slot
    /// (placed per topic: there the clients write it apart).
    pub fn schedules_for_scripts(&self) -> &str {
        if self.per_topic() { "" } else { SCHEDULES }
    }

    /// The topic every job under these keys belongs to, as the scripts are told it: placed per
    /// topic the one whose keys these are (its lists are the only ones in the scripts' slot),
    /// else "" (each job's own `topic` field says).
    pub fn topic_for_scripts(&self) -> &str {
        self.topic.as_deref().unwrap_or("")
    }

    /// The keys of the compact layout, where this layout has one: every layout's, placed per
    /// topic the topic's own (see [`crate::compact`]).
    pub fn compact(&self) -> Option<&CompactKeys> {
        self.compact.as_ref()
    }

    /// What the compact layout's keys start with, as the scripts are told it: "" for none.
    pub fn compact_for_scripts(&self) -> &str {
        self.compact.as_ref().map_or("", CompactKeys::prefix)
    }

    /// The registry of topics as the scripts are told it: "" where it is in another slot than
    /// the script's keys (placed per topic: there the clients add a topic before pushing).
    pub fn registry_for_scripts(&self) -> &str {
        if self.per_topic() { "" } else { &self.topics }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_layout_names_its_keys() {
        let legacy = Layout::LEGACY.keys("");
        assert_eq!(legacy.pool(), JOB_POOL);
        let text = |key: Vec<u8>| String::from_utf8(key).unwrap();
        assert_eq!(
            text(legacy.bucket("5d41")),
            format!("{JOB_BUCKET_PREFIX}5d41")
        );
        assert_eq!(text(legacy.ready("t")), format!("{READY_QUEUE_PREFIX}t"));
        assert_eq!(text(legacy.dead("t")), format!("{DEAD_QUEUE_PREFIX}t"));
        assert_eq!(text(legacy.paused("t")), "delayer:paused:t");
        assert_eq!(text(legacy.parked("t")), "delayer:parked_by_due:t");
        assert_eq!(text(legacy.parked_set("t")), "delayer:parked:t");
        assert_eq!(
            legacy.bucket(b"\xff"),
            b"delayer:job_bucket:\xff",
            "any bytes"
        );
        assert_eq!((legacy.reserved(), legacy.topics()), (RESERVED, TOPICS));
        assert_eq!(legacy.holders(), HOLDERS);
        assert_eq!(legacy.registry_for_scripts(), TOPICS);
        assert_eq!(legacy.schedule("n"), "delayer:schedule:n");
        assert_eq!(legacy.schedules_by_next(), SCHEDULES_BY_NEXT);
        let jop = Layout::JOP.keys("");
        assert_eq!(jop.pool(), JOP_POOL);
        assert_eq!(text(jop.bucket("5d41")), format!("{JOP_BUCKET_PREFIX}5d41"));
        let cluster = Layout::CLUSTER.keys("order.close");
        assert_eq!(cluster.pool(), "delayer:{order.close}:job_pool");
        assert_eq!(
            text(cluster.bucket("7")),
            "delayer:{order.close}:job_bucket:7"
        );
        assert_eq!(text(cluster.ready("x")), "delayer:{x}:ready_queue");
        assert_eq!(text(cluster.dead("x")), "delayer:{x}:dead_queue");
        assert_eq!(text(cluster.paused("x")), "delayer:{x}:paused");
        assert_eq!(text(cluster.parked("x")), "delayer:{x}:parked_by_due");
        assert_eq!(text(cluster.parked_set("x")), "delayer:{x}:parked");
        assert_eq!(cluster.reserved(), "delayer:{order.close}:reserved");
        assert_eq!(cluster.holders(), "delayer:{order.close}:reserved:holders");
        assert_eq!(cluster.topics(), TOPICS);
        assert_eq!(cluster.registry_for_scripts(), "");
        assert_eq!(cluster.schedule("n"), "delayer:{order.close}:schedule:n");
        assert_eq!(
            cluster.schedules_by_next(),
            "delayer:{order.close}:schedules_by_next"
        );
        assert_eq!(cluster.schedules_for_scripts(), "");
        let compact = cluster.compact().unwrap();
        assert_eq!(compact.prefix(), "delayer:{order.close}:compact:");
        assert_eq!(compact.index(), "delayer:{order.close}:compact:index");
        assert_eq!(compact.stagers(), "delayer:compact:stagers");
        assert_eq!(legacy.compact().unwrap().prefix(), COMPACT_PREFIX);
        assert!(cluster.per_topic() && !legacy.per_topic());
    }

    #[test]
    fn consumer_keys_share_one_slot_apart_from_every_topics_keys() {
        let hash = consumer("web-1:4242:9f3a1c");
        assert_eq!(
            hash,
            "delayer:consumer:{delayer:consumers}:web-1:4242:9f3a1c"
        );
        // The hash tag of a consumer's hash is the whole name of the set: one slot for both.
        let tag = &hash[hash.find('{').unwrap() + 1..hash.find('}').unwrap()];
        assert_eq!((tag, CONSUMERS.contains('{')), ("delayer:consumers", false));
        // Never a key of a topic placed per topic, whatever the id.
        let cluster = Layout::CLUSTER.keys("consumers");
        for id in ["job_pool", "reserved", "}x{"] {
            assert!(!consumer(id).starts_with(PER_TOPIC_PREFIX));
            assert_ne!(consumer(id), cluster.pool());
        }
        assert!(CONSUMERS.starts_with("delayer:") && CONSUMER_PREFIX.starts_with("delayer:"));
    }

    #[test]
    fn the_history_is_one_hash_a_minute_and_one_a_topic_in_one_slot() {
        assert_eq!(history_minute(29_000_000), "delayer:{history}:29000000");
        assert_eq!(
            history_topic_minute(29_000_000, b"a{b}\xff"),
            b"delayer:{history}:29000000:a{b}\xff"
        );
        // The first braces are the hash tag: whatever a topic holds, its keys share the slot.
        assert!(history_topic_minute(1, "}{").starts_with(b"delayer:{history}:"));
    }

    #[test]
    fn a_pool_key_names_its_topic() {
        let cluster = Layout::CLUSTER;
        let topic_of = |key| cluster.topic_of_pool(key);
        assert_eq!(
            topic_of("delayer:{order.close}:job_pool"),
            Some("order.close")
        );
        assert_eq!(topic_of("delayer:{a}b}:job_pool"), Some("a}b"));
        assert_eq!(
            topic_of("delayer:{}x}:job_pool"),
            None,
            "refused: empty hash tag"
        );
        assert_eq!(topic_of("delayer:{t}:ready_queue"), None);
        assert_eq!(topic_of("delayer:{}:job_pool"), None, "no topic");
        assert_eq!(Layout::LEGACY.topic_of_pool(JOB_POOL), None);
        assert_eq!(
            cluster.topic_of_reservations("delayer:{order.close}:reserved"),
            Some("order.close")
        );
        assert_eq!(cluster.topic_of_reservations("delayer:{t}:job_pool"), None);
        assert!(
            cluster.refusal(b"t\xff").is_some(),
            "its key names are text"
        );
        assert_eq!(Layout::LEGACY.refusal(b"t\xff"), None);
        assert_eq!(
            cluster.refusal("x}:job_bucket:Q"),
            None,
            "its jobs still move"
        );
        assert!(cluster.write_refusal("x}:job_bucket:Q").is_some());
        assert!(
            cluster
                .write_refusal("}x")
                .unwrap()
                .starts_with("starts with")
        );
        assert_eq!(cluster.write_refusal("x{y"), None);
        assert_eq!(Layout::LEGACY.write_refusal("x}y"), None);
        let pools = cluster.topic_pools().unwrap();
        assert_eq!(
            format!("{}t{}", pools.prefix, pools.suffix),
            cluster.keys("t").pool()
        );
    }
}
