//! The move script (`move_due.lua`), which the daemon runs: its call, and what its reply says.

use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{RedisResult, ScriptInvocation, Value};

use super::{leading, malformed, name, names, seconds};
use crate::keys::Keys;
use crate::name::{JobId, Topic};

/// How long a job whose ready list key is not a list stays parked before it is looked at again.
/// Each look at a parked job costs Redis about as much as a move, so a minute keeps even a million
/// of them to a few percent of one core, while a fixed key gets its jobs moving within a minute.
pub const STUCK_RECHECK: Duration = Duration::from_secs(60);

script_type!(
    /// The move script: moves due jobs onto their ready lists.
    MoveScript,
    "move_due.lua"
);

impl MoveScript {
    /// One call, as of now by Redis's clock (`now`, unix seconds, only when this Redis user may
    /// not run TIME): moves at most `batch_size` due jobs, and parks those that cannot move until
    /// [`STUCK_RECHECK`] from now. With `hold`, jobs due in or after a compact window still being
    /// staged once it has begun wait until it is staged whole (see `move_due.lua`): the caller
    /// stages, and its staging works.
    pub fn call(
        &self,
        keys: &Keys,
        now: f64,
        batch_size: usize,
        hold: bool,
    ) -> ScriptInvocation<'_> {
        let mut call = self.0.key(keys.pool());
        call.arg(format!("{now:.6}"))
            .arg(batch_size)
            .arg(keys.bucket_prefix())
            .arg(&keys.ready_affixes().prefix)
            .arg(STUCK_RECHECK.as_secs())
            .arg(keys.registry_for_scripts())
            .arg(&keys.ready_affixes().suffix)
            .arg(keys.topic_for_scripts())
            .arg(&keys.paused_affixes().prefix)
            .arg(&keys.paused_affixes().suffix)
            .arg(&keys.parked_affixes().prefix)
            .arg(&keys.parked_affixes().suffix)
            .arg(&keys.parked_set_affixes().prefix)
            .arg(&keys.parked_set_affixes().suffix)
            .arg(keys.reserved())
            .arg(keys.compact_for_scripts())
            .arg(if hold { "1" } else { "" });
        call
    }

    /// Runs one call and reads what it did.
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        now: f64,
        batch_size: usize,
        hold: bool,
    ) -> RedisResult<Batch> {
        let reply: Value = self
            .call(keys, now, batch_size, hold)
            .invoke_async(connection)
            .await?;
        Batch::from_reply(reply)
    }
}

/// What one run of the move script did.
#[derive(Debug, Default, PartialEq)]
pub struct Batch {
    /// How many due ids the call dealt with (moved, dropped or parked); equal to the batch size
    /// when more may be due.
    pub taken: usize,
    /// When the earliest job that is not due yet falls due, in unix seconds.
    pub next_due: Option<f64>,
    /// Ids dropped from the pool because their bucket or its topic is gone.
    pub orphans: Vec<JobId>,
    /// Topics whose jobs cannot move; their jobs were parked.
    pub stuck: Vec<Stuck>,
    /// Each topic pushed to, with its ids in due order.
    pub moved: Vec<(Topic, Vec<JobId>)>,
    /// The due times (unix seconds) of the earliest and the latest job the call took.
    pub first_due: Option<f64>,
    pub last_due: Option<f64>,
    /// The time the call went by, unix seconds: Redis's, unless [`by_redis`](Self::by_redis) is
    /// false.
    pub now: f64,
    /// Whether the call went by Redis's clock: false when this Redis user may not run TIME, and
    /// the daemon's clock was used instead.
    pub by_redis: bool,
    /// Ids moved whose compact copy was dropped: a legacy client pushed them again.
    pub replaced: Vec<JobId>,
}

/// A topic whose jobs cannot move.
#[derive(Debug, Clone, PartialEq)]
pub struct Stuck {
    pub topic: Topic,
    pub why: StuckBecause,
    /// How many of its jobs this call parked in the pool, to be looked at again later.
    pub parked: usize,
}

/// Why a topic's jobs cannot move onto its ready list.
#[derive(Debug, Clone, PartialEq)]
pub enum StuckBecause {
    /// The ready list key holds another type: `string`, `hash`, ..., as Redis's TYPE names it.
    WrongType(String),
    /// This Redis user may not write the ready list key (ACL).
    NoPermission,
    /// The topic is paused (its pause key exists: see `Inspector::pause` in delayer-client).
    Paused,
}

impl Batch {
    /// How many jobs were pushed onto ready lists.
    pub fn moved_count(&self) -> usize {
        self.moved.iter().map(|(_, ids)| ids.len()).sum()
    }

    /// More jobs may be due right now.
    pub fn is_full(&self, batch_size: usize) -> bool {
        self.taken >= batch_size
    }

    /// Reads the script's reply.
    fn from_reply(reply: Value) -> RedisResult<Batch> {
        read(reply).ok_or_else(|| malformed("move_due"))
    }
}

fn read(reply: Value) -> Option<Batch> {
    let (
        [
            Value::Int(taken),
            next_due,
            orphans,
            Value::Array(stuck),
            first_due,
            last_due,
            now,
            Value::Int(by_redis),
            replaced,
        ],
        mut items,
    ) = leading(reply)?
    else {
        return None;
    };
    let mut batch = Batch {
        taken: usize::try_from(taken).ok()?,
        next_due: seconds(next_due),
        orphans: names(orphans)?,
        stuck: stuck.into_iter().map(read_stuck).collect::<Option<_>>()?,
        moved: Vec::new(),
        first_due: seconds(first_due),
        last_due: seconds(last_due),
        now: seconds(now)?,
        by_redis: by_redis == 1,
        replaced: names(replaced)?,
    };
    while let (Some(topic), Some(ids)) = (items.next(), items.next()) {
        batch.moved.push((name(topic)?, names(ids)?));
    }
    Some(batch)
}

fn read_stuck(entry: Value) -> Option<Stuck> {
    let ([topic, why, Value::Int(parked)], _) = leading(entry)? else {
        return None;
    };
    let why = String::from_utf8_lossy(&name::<Vec<u8>>(why)?).into_owned();
    Some(Stuck {
        topic: name(topic)?,
        why: match why.as_str() {
            "noperm" => StuckBecause::NoPermission,
            "paused" => StuckBecause::Paused,
            _ => StuckBecause::WrongType(why),
        },
        parked: usize::try_from(parked).ok()?,
    })
}
