//! The history at its largest, written for the tests and the bench that measure its bound.

use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::redis::{self, AsyncCommands};
use delayer_wire::history::{KEPT, MAX_TOPICS, field, lag_field};
use delayer_wire::keys::HISTORY;
use delayer_wire::scripts::count::{Count, CountScript};

/// Writes a full day of history up to unix minute `last` at its largest: every minute with more
/// topics than it keeps apart, each with every counter and a few lag buckets. Returns how many
/// minutes that is.
pub async fn fill_a_full_day(redis: &mut MultiplexedConnection, last: u64) -> u64 {
    let names: Vec<String> = (0..MAX_TOPICS + 5)
        .map(|topic| format!("topic.number.{topic}"))
        .collect();
    let counters = [
        field::PUSHED,
        field::MOVED,
        field::ACKED,
        field::AGAIN,
        field::DEAD,
    ];
    let mut counts = Vec::new();
    for name in &names {
        let topic = name.as_bytes();
        for field in counters {
            counts.push(Count {
                topic,
                field,
                n: 1234,
            });
        }
        for bucket in [0, 3, 8] {
            let field = lag_field(bucket);
            counts.push(Count {
                topic,
                field,
                n: 1234,
            });
        }
    }
    let (day, script) = (KEPT.as_secs() / 60, CountScript::default());
    for back in 0..day {
        let minute = Some(last - back);
        assert!(script.run(redis, minute, &counts).await.unwrap());
    }
    day
}

/// How many keys the history has, and their bytes by `MEMORY USAGE`.
pub async fn size(redis: &mut MultiplexedConnection) -> (u64, u64) {
    let keys: Vec<String> = redis.keys(format!("{HISTORY}:*")).await.unwrap();
    let mut bytes = 0;
    for key in &keys {
        let used: u64 = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .query_async(redis)
            .await
            .unwrap();
        bytes += used;
    }
    (keys.len() as u64, bytes)
}
