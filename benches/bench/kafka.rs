//! Delivery to Kafka by one daemon (a backlog of due jobs over 10 topics, to a tansu broker) beside
//! the ready-list path doing the same Redis work (the daemon moves, one client reserves 500 at a
//! time and acks them): jobs/s, and Redis's and the daemon's CPU per job.

use delayer_testkit::KafkaBroker;

use super::TOPICS;
use super::delivery::{Backlog, drain};
use super::support::RedisServer;

const JOBS: usize = 20_000;

pub async fn kafka(server: &RedisServer) {
    let broker = KafkaBroker::start();
    for topic in TOPICS {
        broker.create_topic(topic, 1);
    }
    println!("\n## Delivery to Kafka ({JOBS} due jobs, 10 topics, one daemon, tansu broker)\n");
    println!("| path | jobs/s | Redis CPU µs/job | daemon CPU µs/job |");
    println!("|---|---:|---:|---:|");
    let kafka = format!(
        "[kafka]\nbrokers = {}\ntopics = {}\n",
        broker.address(),
        TOPICS.join(",")
    );
    for (name, extra) in [
        ("ready lists, a client reserving and acking", ""),
        ("Kafka", kafka.as_str()),
    ] {
        let run = drain(
            server,
            JOBS,
            (!extra.is_empty()).then_some(extra),
            Backlog::Jobs,
        )
        .await;
        println!(
            "| {name} | {:.0} | {:.1} | {:.1} |",
            JOBS as f64 / run.seconds,
            run.redis_cpu * 1e6 / JOBS as f64,
            run.daemon_cpu * 1e6 / JOBS as f64,
        );
    }
}
