//! The history (per-minute counts in Redis, see `delayer_wire::history`): daemons that serve the
//! console add up and a restart keeps what was counted, a drop-in daemon writes none; each
//! minute keeps a bounded number of topics apart and a day stays small; in a cluster it has a
//! slot of its own; the overview and a topic's page draw a burst in its minute, in Chromium.

use crate::cluster::{cluster_client, cluster_config};
use crate::console::{chromium, chromium_with};
use crate::support;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use delayer_client::inspector::Counts;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::redis::{self, AsyncCommands};
use delayer_client::{Client, NewPush};
use delayer_testkit::cluster::RedisCluster;
use delayer_wire::history::{KEPT, MAX_TOPICS, field};
use delayer_wire::keys::{HISTORY, history_minute};
use delayer_wire::scripts::count::{Count, CountScript};
use support::http_client::{http_config, serving};
use support::legacy_client::{self, Message};
use support::{Daemon, DaemonSetup, RedisServer, wait_for, wait_for_ready};

/// Pushes `count` jobs to `topic`, due now, in one call.
async fn push(client: &Client, topic: &str, count: usize) {
    let jobs = (0..count).map(|index| NewPush::new(topic, format!("job {index}")));
    client.push_many(jobs).await.unwrap();
}

/// Every key of the history, with its hash's fields: the totals by minute and each topic's
/// (`"<minute>:<topic>"`).
async fn history_keys(redis: &mut MultiplexedConnection) -> HashMap<String, Counts> {
    let keys: Vec<String> = redis.keys(format!("{HISTORY}:*")).await.unwrap();
    let mut held = HashMap::new();
    for key in keys {
        let fields: Vec<(Vec<u8>, Vec<u8>)> = redis.hgetall(&key).await.unwrap();
        let counts = Counts::from_fields(fields.iter().map(|(n, v)| (n.as_slice(), v.as_slice())));
        held.insert(key[HISTORY.len() + 1..].to_string(), counts);
    }
    held
}

/// The counts of every minute added up: of every topic (`None`) or of one.
fn summed(keys: &HashMap<String, Counts>, topic: Option<&str>) -> Counts {
    let mut sum = Counts::default();
    for (name, counts) in keys {
        let of = name.split_once(':').map(|(_, topic)| topic);
        if of == topic {
            sum.add(counts);
        }
    }
    sum
}

/// The current unix minute and second of it, by Redis's clock.
async fn redis_minute(redis: &mut MultiplexedConnection) -> (u64, u64) {
    let (seconds, _): (u64, u64) = redis::cmd("TIME").query_async(redis).await.unwrap();
    (seconds / 60, seconds % 60)
}

#[tokio::test]
async fn two_daemons_add_up_and_a_restart_keeps_what_was_counted_before_it() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();
    let (config_a, _logs_a) = http_config(&server, "a", "", "");
    let (config_b, _logs_b) = http_config(&server, "b", "", "");

    // A alone moves the first jobs, and stops at once: long before its next write (every 5 s),
    // so only the write at its stop can keep them.
    let a = Daemon::start(&config_a);
    push(&client, "first", 30).await;
    wait_for_ready(&redis, "first", 30).await;
    let b = Daemon::start(&config_b);
    a.stop();
    // B alone moves the next; then A runs again beside it.
    push(&client, "second", 20).await;
    wait_for_ready(&redis, "second", 20).await;
    let a = Daemon::start(&config_a);
    push(&client, "third", 10).await;
    wait_for_ready(&redis, "third", 10).await;
    for _ in 0..5 {
        let ttr = Duration::from_secs(30);
        let job = client.reserve(&["first"], ttr, Duration::ZERO).await;
        client.ack(&job.unwrap().unwrap()).await.unwrap();
    }

    let topics = [("first", 30), ("second", 20), ("third", 10)];
    let keys = wait_for(
        Duration::from_secs(20),
        "the history to count 60 pushes and moves and 5 acks",
        || {
            let mut redis = redis.clone();
            async move {
                // The keys are read one at a time: a write can land between two reads, so the
                // counts are awaited in the total and in each topic's key alike.
                let keys = history_keys(&mut redis).await;
                let each = topics.iter().all(|&(topic, jobs)| {
                    let counts = summed(&keys, Some(topic));
                    (counts.pushed, counts.moved) == (jobs, jobs)
                });
                let (total, first) = (summed(&keys, None), summed(&keys, Some("first")));
                let all = (total.moved, total.pushed, total.acked, first.acked) == (60, 60, 5, 5);
                (all && each).then_some(keys)
            }
        },
    )
    .await;
    let total = summed(&keys, None);
    assert_eq!(
        (total.pushed, total.acked, total.again, total.dead),
        (60, 5, 0, 0)
    );
    assert_eq!(total.lags.iter().sum::<u64>(), 60, "a lag for each move");
    for (topic, jobs) in topics {
        let counts = summed(&keys, Some(topic));
        assert_eq!((counts.pushed, counts.moved), (jobs, jobs), "{topic}");
    }
    assert_eq!(summed(&keys, Some("first")).acked, 5);
    a.stop();
    b.stop();
    // Nothing counted twice at the stops.
    assert_eq!(summed(&history_keys(&mut redis).await, None).moved, 60);
}

/// The original's configuration (no `[http]`: no console to draw it) writes no history: a
/// drop-in daemon leaves Redis as the original did.
#[tokio::test]
async fn a_drop_in_daemon_writes_no_history() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (config, _logs) = server.daemon_config("drop-in", "timer_interval = 50");
    let daemon = Daemon::start(&config);
    for index in 0..20 {
        let job = Message {
            id: format!("php-{index}"),
            topic: "mail".into(),
            body: "hello".into(),
        };
        legacy_client::push(&mut redis, &job, 0).await.unwrap();
    }
    wait_for_ready(&redis, "mail", 20).await;
    // Its stop is when the history's last write would come.
    daemon.stop();
    let keys: Vec<String> = redis.keys(format!("{HISTORY}:*")).await.unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

#[tokio::test]
async fn a_minute_keeps_the_first_topics_apart_and_a_full_day_stays_small() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let client = Client::connect(server.info()).await.unwrap();

    // One push of a job to each of 30 topics: the minute's total counts them all, and only the
    // first MAX_TOPICS have a hash of their own.
    let (minute, second) = redis_minute(&mut redis).await;
    if second > 55 {
        wait_for(Duration::from_secs(10), "the next minute", || {
            let mut redis = redis.clone();
            async move { (redis_minute(&mut redis).await.0 > minute).then_some(()) }
        })
        .await;
    }
    let topics = MAX_TOPICS + 10;
    let jobs = (0..topics)
        .map(|topic| NewPush::new(format!("t{topic}"), "b").delay(Duration::from_secs(3600)));
    client.push_many(jobs).await.unwrap();
    // The client sends its counts within a second.
    let keys = wait_for(Duration::from_secs(5), "the pushes counted", || {
        let mut redis = redis.clone();
        async move {
            let keys = history_keys(&mut redis).await;
            (summed(&keys, None).pushed == topics as u64).then_some(keys)
        }
    })
    .await;
    assert_eq!(keys.len(), 1 + MAX_TOPICS, "{:?}", keys.keys());
    let minute: u64 = keys
        .keys()
        .find(|key| !key.contains(':'))
        .unwrap()
        .parse()
        .unwrap();
    let apart: u64 = (0..topics)
        .filter_map(|topic| keys.get(&format!("{minute}:t{topic}")))
        .map(|counts| counts.pushed)
        .sum();
    assert_eq!(apart, MAX_TOPICS as u64);
    let total_key = history_minute(minute);
    let marked: String = redis.hget(&total_key, field::TOPICS).await.unwrap();
    assert_eq!(marked, MAX_TOPICS.to_string());
    let ttl: u64 = redis.ttl(&total_key).await.unwrap();
    assert!(ttl > KEPT.as_secs() && ttl <= KEPT.as_secs() + 60, "{ttl}");

    // A full day at its largest.
    let day = support::history::fill_a_full_day(&mut redis, minute).await;
    let (keys, bytes) = support::history::size(&mut redis).await;
    assert_eq!(keys, day * (1 + MAX_TOPICS as u64));
    println!("a full day of history: {keys} keys, {bytes} bytes (MEMORY USAGE)");
    assert!(bytes < 12 << 20, "{bytes} bytes");
    // A minute older than a day is no longer counted.
    let late = [Count {
        topic: b"t",
        field: field::MOVED,
        n: 1,
    }];
    let script = CountScript::default();
    let counted = script.run(&mut redis, Some(minute - day - 1), &late);
    assert!(!counted.await.unwrap());
}

#[tokio::test]
async fn in_a_cluster_the_history_has_a_slot_of_its_own_and_counts_pushes_moves_and_acks() {
    let cluster = RedisCluster::start(3);
    let dir = tempfile::tempdir().unwrap();
    let (config, _logs) = cluster_config(&dir, "history", &cluster.addresses());
    let serving = format!("{}\n[http]\nlisten = 127.0.0.1:0\n", support::read(&config));
    std::fs::write(&config, serving).unwrap();
    let daemon = Daemon::start(&config);
    let client = cluster_client(&cluster).await;
    // Topics on several masters: each push and ack runs on its topic's, and is counted on the
    // history's.
    let topics = ["a", "b", "c", "d"];
    for topic in topics {
        push(&client, topic, 3).await;
        let ttr = Duration::from_secs(30);
        let job = client.reserve(&[topic], ttr, Duration::from_secs(5)).await;
        client.ack(&job.unwrap().unwrap()).await.unwrap();
    }
    let mut node = cluster.connect_node(cluster.node_of(HISTORY)).await;
    let keys = wait_for(
        Duration::from_secs(20),
        "the history to count 12 moves, 3 a topic",
        || {
            let mut node = node.clone();
            async move {
                // The keys are read one at a time: a write of the daemon's can land between two
                // reads, so the moves are awaited in the total and in each topic's key alike.
                let keys = history_keys(&mut node).await;
                let each = topics
                    .iter()
                    .all(|topic| summed(&keys, Some(topic)).moved == 3);
                (summed(&keys, None).moved == 12 && each).then_some(keys)
            }
        },
    )
    .await;
    let total = summed(&keys, None);
    assert_eq!((total.pushed, total.acked), (12, 4));
    for topic in topics {
        let counts = summed(&keys, Some(topic));
        assert_eq!(
            (counts.pushed, counts.moved, counts.acked),
            (3, 3, 1),
            "{topic}"
        );
    }
    daemon.stop();
    assert_eq!(summed(&history_keys(&mut node).await, None).moved, 12);
}

/// The titles of the bars of unix minute `minute`, chart by chart, in the page `dom`.
fn bar_titles(dom: &str, minute: u64) -> Vec<String> {
    let start = format!("<g data-key=\"{minute}\"><title>");
    dom.match_indices(&start)
        .map(|(at, _)| {
            let title = &dom[at + start.len()..];
            title[..title.find("</title>").unwrap()].to_string()
        })
        .collect()
}

#[tokio::test]
async fn the_overviews_chart_shows_a_burst_in_its_minute() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let (daemon, _logs, http) = serving(&server, "burst", "");
    let client = Client::connect(server.info()).await.unwrap();

    // The burst falls in one minute by Redis's clock: not in a minute's last seconds.
    let (minute, second) = redis_minute(&mut redis).await;
    if second > 50 {
        wait_for(Duration::from_secs(15), "the next minute", || {
            let mut redis = redis.clone();
            async move { (redis_minute(&mut redis).await.0 > minute).then_some(()) }
        })
        .await;
    }
    push(&client, "burst", 37).await;
    let (minute, _) = redis_minute(&mut redis).await;
    wait_for_ready(&redis, "burst", 37).await;
    let ttr = Duration::from_secs(30);
    let jobs = client
        .reserve_many(&["burst"], ttr, 12, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(jobs.len(), 12);
    for acked in client.ack_many(&jobs).await {
        acked.unwrap();
    }

    let dir = server.dir();
    let url = format!("http://{http}/");
    // The moves show once the daemon wrote them (every 5 s).
    let dom = wait_for(
        Duration::from_secs(30),
        "the burst's moves on the chart",
        || {
            let dom = chromium(dir, &url, None);
            let moved = bar_titles(&dom, minute)
                .iter()
                .any(|title| title.ends_with(": 37 moved"));
            async move { moved.then_some(dom) }
        },
    )
    .await;
    let titles = bar_titles(&dom, minute);
    assert_eq!(titles.len(), 6, "six charts: {titles:?}");
    assert!(titles[0].ends_with(": 37 pushed"), "{titles:?}");
    assert!(titles[1].ends_with(": 37 moved"), "{titles:?}");
    assert!(titles[2].ends_with(": 12 acked"), "{titles:?}");
    assert!(titles[5].contains("move lag p99 ≤"), "{titles:?}");
    let before = bar_titles(&dom, minute - 1);
    assert!(before[0].ends_with(": 0 pushed"), "{before:?}");
    // The bar is the tallest, and the table below says the same.
    let bar = &dom[dom.find(&format!("<g data-key=\"{minute}\">")).unwrap()..];
    assert!(
        bar[..bar.find("</g>").unwrap()].contains("height=\"50\""),
        "{bar}"
    );
    let row = &dom[dom.find(&format!("<tr data-key=\"{minute}\">")).unwrap()..];
    assert!(
        row[..row.find("</tr>").unwrap()]
            .contains("<td class=\"n\">37</td><td class=\"n\">37</td>"),
        "{row}"
    );

    // The topic's page draws the topic's own.
    let topic_page = chromium(dir, &format!("http://{http}/topic?name=burst"), None);
    let titles = bar_titles(&topic_page, minute);
    assert!(titles[0].ends_with(": 37 pushed"), "{titles:?}");
    assert!(titles[1].ends_with(": 37 moved"), "{titles:?}");

    if let Some(shots) = std::env::var_os("DELAYER_SCREENSHOTS") {
        let shot = Path::new(&shots).join("console-history.png");
        let tall = ["--window-size=1100,1000"];
        chromium_with(dir, &url, Some(&shot), &tall);
    }
    daemon.stop();
}
