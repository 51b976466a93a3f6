//! Schedules for tests: one that ticks every second, a field of a schedule's hash, and a hash
//! that does not read (as a newer version's would not).

use delayer_client::Inspector;
use delayer_wire::schedule::{Definition, Source};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;

/// Schedule `name`, pushing to topic `ticks` every second.
pub fn every_second(name: &str) -> Definition {
    Definition::new(name, "every 1s", "ticks")
}

/// Field `field` of schedule `name`'s hash (the legacy layout's key).
pub async fn schedule_field(
    redis: &mut MultiplexedConnection,
    name: &str,
    field: &str,
) -> Option<String> {
    redis
        .hget(format!("delayer:schedule:{name}"), field)
        .await
        .unwrap()
}

/// Saves schedules `good` and `bad`, both every second, then writes into `bad`'s hash a
/// `catch_up` word this version does not know.
pub async fn save_one_good_one_unreadable(
    inspector: &Inspector,
    redis: &mut MultiplexedConnection,
    good: &str,
    bad: &str,
) {
    for name in [good, bad] {
        inspector
            .save_schedule(&every_second(name), Source::Api)
            .await
            .unwrap();
    }
    let _: () = redis
        .hset(format!("delayer:schedule:{bad}"), "catch_up", "bogus")
        .await
        .unwrap();
}
