//! The loop with a sink of the test's own, against a real Redis (the mover beside it): each
//! outcome does to its job what it says, and a job that waits past its time to run is touched,
//! not delivered twice.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use delayer_client::{Client, Job, MIN_TTR, State};
use delayer_testkit::{RedisServer, wait_for};
use tokio_util::sync::CancellationToken;

use super::{Outcome, Sink};
use crate::config::Config;
use crate::metrics::Deliveries;
use crate::mover::Mover;

/// A sink whose jobs' bodies say what becomes of them; it notes each job's attempts sent.
struct Scripted {
    topics: Vec<String>,
    sent: Mutex<HashMap<String, Vec<u32>>>,
    /// How many sends find the receiver unreachable before it answers.
    unreachable: Mutex<u32>,
}

impl Sink for Scripted {
    fn name(&self) -> &str {
        "test"
    }

    fn address(&self) -> &str {
        "nowhere"
    }

    fn topics(&self) -> &[String] {
        &self.topics
    }

    fn ttr(&self) -> Duration {
        MIN_TTR
    }

    fn room(&self) -> usize {
        10
    }

    fn keep(&self) -> Option<Duration> {
        None
    }

    /// Two tries.
    fn retry(&self, job: &Job) -> Option<Duration> {
        (job.attempts < 2).then_some(Duration::from_millis(100))
    }

    async fn send(&self, job: &Job) -> Outcome {
        let id = String::from_utf8_lossy(job.id.as_bytes()).into_owned();
        self.sent
            .lock()
            .unwrap()
            .entry(id)
            .or_default()
            .push(job.attempts);
        let failed = |after| Outcome::Failed {
            why: "busy".into(),
            after,
        };
        match (job.body_text().unwrap(), job.attempts) {
            ("deliver", _) => Outcome::Delivered,
            ("refuse", _) => Outcome::Refused("not here".into()),
            ("fail", _) => failed(None),
            ("fail once", 1) => failed(Some(Duration::from_millis(300))),
            ("fail once", _) => Outcome::Delivered,
            ("slow", _) => {
                tokio::time::sleep(3 * MIN_TTR).await;
                Outcome::Delivered
            }
            ("unreachable", _) => {
                let mut left = self.unreachable.lock().unwrap();
                if *left == 0 {
                    return Outcome::Delivered;
                }
                *left -= 1;
                Outcome::Unreachable("down".into())
            }
            (body, _) => panic!("no such job: {body}"),
        }
    }
}

/// Pushes a job to topic `t` for each of `jobs` (its id and its body the same) and one to another
/// topic, then runs the mover and the loop to `sink` until each job of `t` is in its state.
async fn deliver(server: &RedisServer, sink: &Scripted, jobs: &[(&str, State)]) -> Deliveries {
    let config = Config::parse(&server.config_text(""), Path::new("test.conf")).unwrap();
    let mover = Mover::new(&config.mover, &config.redis).unwrap();
    let redis = delayer_wire::shared_connection::SharedConnection::lazy(mover.target());
    let client = Client::on(redis, config.client_settings());
    for (body, _) in jobs {
        client.push("t", *body).id(*body).await.unwrap();
    }
    client.push("other", "deliver").id("other").await.unwrap();
    let figures = Deliveries::default();
    let stop = CancellationToken::new();
    let running = async {
        tokio::join!(mover.run(&stop), super::run(&client, sink, &figures, &stop));
    };
    let settled = async {
        wait_for(Duration::from_secs(30), "every job settled", || async {
            for (id, state) in jobs {
                if client.get(*id).await.unwrap().state != *state {
                    return None;
                }
            }
            Some(())
        })
        .await;
        stop.cancel();
    };
    tokio::join!(running, settled);
    let other = client.get("other").await.unwrap();
    assert_eq!(other.state, State::Ready, "a topic the sink does not take");
    figures
}

fn sink(unreachable: u32) -> Scripted {
    Scripted {
        topics: vec!["t".into()],
        sent: Mutex::default(),
        unreachable: Mutex::new(unreachable),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn each_outcome_does_what_it_says_to_its_job() {
    let server = RedisServer::start();
    let sink = sink(2);
    let jobs = [
        ("deliver", State::Unknown),
        ("refuse", State::Dead),
        ("fail", State::Dead),
        ("fail once", State::Unknown),
        ("unreachable", State::Unknown),
    ];
    let figures = deliver(&server, &sink, &jobs).await;
    let sent = sink.sent.into_inner().unwrap();
    assert_eq!(sent["deliver"], [1]);
    assert_eq!(sent["refuse"], [1]);
    assert_eq!(sent["fail"], [1, 2], "tried again once, then dead");
    assert_eq!(sent["fail once"], [1, 2]);
    assert_eq!(sent["unreachable"], [1, 1, 1], "given back untried");
    let client = Client::connect(server.info()).await.unwrap();
    for (id, why) in [("refuse", "not here"), ("fail", "busy")] {
        let info = client.get(id).await.unwrap();
        assert_eq!(info.died_why.as_deref(), Some(why), "{id}");
    }
    // Delivered, refused, given back, tried again, in flight.
    assert_eq!(figures.counts(), [3, 2, 2, 2, 0]);
    let state = figures.state();
    assert!(state.failing.is_none() && state.delivered_once);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_that_waits_past_its_time_to_run_is_touched_not_sent_twice() {
    let server = RedisServer::start();
    let sink = sink(0);
    let figures = deliver(&server, &sink, &[("slow", State::Unknown)]).await;
    assert_eq!(sink.sent.into_inner().unwrap()["slow"], [1]);
    assert_eq!(figures.counts(), [1, 0, 0, 0, 0]);
}
