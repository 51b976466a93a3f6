//! The history in the daemon: what the mover counts (moves and their lag, deliveries again, dead
//! jobs) is kept in a [`Tally`] and added to Redis's per-minute history every [`WRITE_EVERY`] and
//! once more when the mover has stopped, so that several daemons add up and a restart loses
//! nothing (a kill -9 loses what was counted since the last write). Pushes and acks are counted
//! by the clients, which send their counts every second (`Client::send_counts`). Only a daemon
//! that serves the console (`[http]`) writes it: a drop-in configuration writes no key the
//! original did not.

mod tally;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use delayer_wire::history::{Counts, field, lag_field, minute_of};
use delayer_wire::redis::RedisResult;
use delayer_wire::scripts::count::{Count, CountScript};
use delayer_wire::shared_connection::SharedConnection;
use delayer_wire::time::unix_now;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::service::duty::{Trouble, sleep_or_stop};
use tally::Minute;
pub use tally::{Tally, lags};

/// How often what was counted goes to Redis: what a kill -9 may lose.
pub const WRITE_EVERY: Duration = Duration::from_secs(5);
/// The longest the last write waits at a stop: a Redis that does not answer must not hold it up.
const LAST_WRITE_WAIT: Duration = Duration::from_secs(2);

/// Has `tally` count for the history (the metrics' tally, which the mover counts in) and writes
/// what it counted to `redis` every [`WRITE_EVERY`] until `moved` is cancelled (the mover has
/// stopped: nothing more is counted), then once more.
pub async fn run(redis: Arc<SharedConnection>, tally: Arc<Tally>, moved: &CancellationToken) {
    tally.keep();
    let mut writer = Writer {
        redis,
        script: CountScript::default(),
        trouble: Trouble::default(),
        refused_told: false,
    };
    while sleep_or_stop(WRITE_EVERY, moved).await {
        writer.write(&tally).await;
    }
    if tokio::time::timeout(LAST_WRITE_WAIT, writer.write(&tally))
        .await
        .is_err()
    {
        warn!("the history lost what was counted since its last write: Redis did not answer");
    }
}

/// Writes to the history, and what was said about the writes, so that each trouble is said once.
struct Writer {
    redis: Arc<SharedConnection>,
    script: CountScript,
    trouble: Trouble,
    refused_told: bool,
}

impl Writer {
    /// Adds the tally's counts to the history, a minute a call; what is not written is put back.
    async fn write(&mut self, tally: &Tally) {
        let mut minutes = tally.take();
        while let Some((minute, counts)) = minutes.pop_first() {
            match self.count(minute, &script_counts(&counts)).await {
                Ok(kept) => {
                    if !kept && !self.refused_told {
                        self.refused_told = true;
                        warn!(
                            "the Redis user may not write the history (delayer:{{history}}:*): \
                             nothing is kept of what happened (allow +hincrby +hget +hset +expire)"
                        );
                    }
                    if self.trouble.worked() {
                        info!("the history is written again");
                    }
                }
                Err(error) => {
                    if self.trouble.failed() {
                        warn!("cannot write the history yet: {error}");
                    }
                    let mut left = BTreeMap::from([(minute, counts)]);
                    left.append(&mut minutes);
                    tally.put_back(left, minute_of(unix_now()));
                    return;
                }
            }
        }
    }
}

impl Writer {
    /// Adds `counts` to unix minute `minute`; whether Redis kept them (not when this Redis user
    /// may not write the history, nor for a minute it no longer keeps).
    async fn count(&self, minute: u64, counts: &[Count<'_>]) -> RedisResult<bool> {
        if counts.is_empty() {
            return Ok(true);
        }
        let mut connection = self.redis.get().await?;
        self.script.run(&mut connection, Some(minute), counts).await
    }
}

/// A minute's counts as the count script takes them: each topic's (busiest first, so that they
/// are the ones counted apart when the minute has room for few) and the others' (topic "").
fn script_counts(minute: &Minute) -> Vec<Count<'_>> {
    let mut counts = Vec::new();
    for (topic, of_topic) in minute.busiest_first() {
        let topic = topic.map_or(&b""[..], |topic| topic.as_bytes());
        push_counts(&mut counts, topic, of_topic);
    }
    counts
}

fn push_counts<'a>(counts: &mut Vec<Count<'a>>, topic: &'a [u8], of_topic: &Counts) {
    let fields = [
        (field::PUSHED, of_topic.pushed),
        (field::MOVED, of_topic.moved),
        (field::AGAIN, of_topic.again),
        (field::DEAD, of_topic.dead),
    ];
    for (field, n) in fields {
        if n > 0 {
            counts.push(Count { topic, field, n });
        }
    }
    for (bucket, &n) in of_topic.lags.iter().enumerate() {
        if n > 0 {
            counts.push(Count {
                topic,
                field: lag_field(bucket),
                n,
            });
        }
    }
}
