//! Every console page against a large Redis: 200,000 registered topics (2,000 with ready jobs),
//! 1,000,000 jobs waiting, 10,000 reservations of one topic, 300 live consumers, 100 schedules and
//! a full day of history at its largest. The history's size; each page's time asked alone and
//! while 20 clients load them all; the move lag with and without the loads (`pages_under_load`).

use std::time::Duration;

use delayer_client::inspector::Definition;
use delayer_client::redis;
use delayer_client::{Client, Heartbeat, Inspector, Topic};
use delayer_wire::keys::{job_bucket, ready_queue};

use super::fresh;
use super::scrape::{IDLE_TOPICS, register_topics};
use super::support::RedisServer;
use super::support::history::{fill_a_full_day, size};
use super::waiting::{CLIENTS, Page, RATE, SECONDS, WAITING, fill_pool, pages_under_load};

/// Jobs one consumer holds, all of [`HELD_TOPIC`].
const RESERVED: usize = 10_000;
const HELD_TOPIC: &str = "held";
const CONSUMERS: usize = 300;
const SCHEDULES: usize = 100;

pub async fn console(server: &RedisServer) {
    println!(
        "\n## The console's pages ({IDLE_TOPICS} topics, {WAITING} jobs waiting, {RESERVED} reserved, {CONSUMERS} consumers, {SCHEDULES} schedules, a full day of history; {RATE} jobs/s falling due; {CLIENTS} clients loading every page for the last {SECONDS} of {} s)\n",
        2 * SECONDS
    );
    let mut redis = fresh(server).await;
    register_topics(&mut redis).await;
    let waiting = fill_pool(&mut redis).await;
    let client = Client::connect(server.info()).await.unwrap();
    let inspector = Inspector::new(&client);
    hold(&mut redis, &client).await;
    for index in 0..CONSUMERS {
        let beat = Heartbeat {
            id: format!("consumer-{index:03}"),
            host: format!("host-{}", index % 10),
            pid: Some(1000 + index as u32),
            topics: vec![Topic::from(format!("idle-{index:06}"))],
            concurrency: Some(8),
            held: Some(index % 8),
            lifetime: Duration::from_secs(3600),
        };
        client.beat(&beat).await.unwrap();
    }
    for index in 0..SCHEDULES {
        // Once a year: none ticks while the bench runs.
        let schedule = Definition::new(&format!("yearly-{index:03}"), "0 0 1 1 *", "reports");
        inspector.create_schedule(&schedule).await.unwrap();
    }
    let (seconds, _): (u64, u64) = redis::cmd("TIME").query_async(&mut redis).await.unwrap();
    let minutes = fill_a_full_day(&mut redis, seconds / 60).await;
    let (keys, bytes) = size(&mut redis).await;
    println!(
        "The history after a day at its largest: {keys} keys ({minutes} minutes), {:.2} MB by MEMORY USAGE.\n",
        bytes as f64 / 1e6
    );

    let mut pages: Vec<Page> = vec![
        ("overview", "/".to_string()),
        ("overview, the day's charts", "/?history=day".to_string()),
        ("consumers", "/consumers".to_string()),
        ("schedules", "/schedules".to_string()),
        ("a topic's page", "/topic?name=idle-000007".to_string()),
        (
            "reservations (a topic's page, 10,000 held)",
            format!("/topic?name={HELD_TOPIC}"),
        ),
    ];
    pages.extend(waiting);
    pages_under_load(server, &mut redis, "console", &pages).await;
}

/// Has one consumer reserve [`RESERVED`] jobs of [`HELD_TOPIC`] for an hour.
async fn hold(redis: &mut redis::aio::MultiplexedConnection, client: &Client) {
    let ids: Vec<String> = (0..RESERVED).map(|n| format!("held-{n:05}")).collect();
    let mut pipe = redis::pipe();
    for id in &ids {
        pipe.hset_multiple(job_bucket(id), &[("topic", HELD_TOPIC), ("body", "b")])
            .ignore();
    }
    pipe.lpush(ready_queue(HELD_TOPIC), &ids).ignore();
    pipe.query_async::<()>(&mut *redis).await.unwrap();
    let consumer = client.as_consumer("consumer-000");
    let mut held = 0;
    while held < RESERVED {
        let ttr = Duration::from_secs(3600);
        let jobs = consumer
            .reserve_many(&[HELD_TOPIC], ttr, 1_000, Duration::ZERO)
            .await
            .unwrap();
        assert!(!jobs.is_empty(), "every held job is reserved");
        held += jobs.len();
    }
}
