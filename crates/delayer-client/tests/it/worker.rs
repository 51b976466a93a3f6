//! The worker against a real redis-server: handlers per topic, acks and retries, a concurrency
//! limit, touching long jobs, panics, and a graceful stop that loses nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::fixture::{start, start_with};
use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::worker::DEFAULT_PREFETCH;
use delayer_client::{Client, Inspector, JobId, MIN_TTR, Settings, State, Topic, Worker};
use delayer_testkit::jobs::{command_stats, move_due_jobs, move_until_empty};
use delayer_testkit::proxy::ForgetfulProxy;
use delayer_testkit::{RedisServer, legacy_client, wait_for};
use delayer_wire::keys::{HOLDERS, JOB_POOL, Layout, RESERVED, ready_queue};
use delayer_wire::scripts::release::ReleaseScript;
use tokio::sync::oneshot;

/// Pushes `count` jobs on `topic`, due now, and moves them to its ready list.
async fn ready_jobs(
    client: &Client,
    redis: &mut MultiplexedConnection,
    topic: &str,
    count: usize,
) -> Vec<String> {
    let mut ids = Vec::new();
    for index in 0..count {
        ids.push(
            client
                .push(topic, format!("{topic} {index}"))
                .await
                .unwrap()
                .to_string(),
        );
    }
    move_until_empty(redis).await;
    ids
}

/// A stop signal for `Worker::run`, and the trigger that fires it.
fn stop_signal() -> (oneshot::Sender<()>, impl Future<Output = ()>) {
    let (trigger, signal) = oneshot::channel::<()>();
    (trigger, async move {
        let _ = signal.await;
    })
}

async fn states(client: &Client, ids: &[String]) -> Vec<State> {
    let mut states = Vec::new();
    for id in ids {
        states.push(client.get(id).await.unwrap().state);
    }
    states
}

/// Waits until none of `ids` is known any more: each was acked.
async fn wait_until_finished(client: &Client, ids: &[String]) {
    wait_for(Duration::from_secs(10), "every job to be acked", || async {
        states(client, ids)
            .await
            .iter()
            .all(|state| *state == State::Unknown)
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn handlers_run_per_topic_and_ok_acks_the_job() {
    let (_server, mut redis, client) = start().await;
    let orders = ready_jobs(&client, &mut redis, "order.close", 5).await;
    let mails = ready_jobs(&client, &mut redis, "mail", 5).await;
    let (seen_orders, seen_mails) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (stop, stopped) = stop_signal();
    let (o, m) = (seen_orders.clone(), seen_mails.clone());
    let worker = Worker::new(client.clone())
        .handle("order.close", move |job| {
            let seen = o.clone();
            async move {
                assert!(job.body_text().unwrap().starts_with("order.close"));
                seen.fetch_add(1, Ordering::SeqCst);
                Ok::<(), String>(())
            }
        })
        .handle("mail", move |_| {
            let seen = m.clone();
            async move {
                seen.fetch_add(1, Ordering::SeqCst);
                Ok::<(), String>(())
            }
        });
    let running = tokio::spawn(worker.run(stopped));

    let all: Vec<String> = orders.iter().chain(&mails).cloned().collect();
    wait_until_finished(&client, &all).await;
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();

    assert_eq!(
        (
            seen_orders.load(Ordering::SeqCst),
            seen_mails.load(Ordering::SeqCst)
        ),
        (5, 5)
    );
    let reserved: usize = redis.zcard(RESERVED).await.unwrap();
    assert_eq!(reserved, 0);
}

#[tokio::test]
async fn a_failing_handler_is_retried_with_backoff_until_the_job_is_dead() {
    let settings = Settings {
        max_attempts: 3,
        ..Settings::default()
    };
    let (_server, mut redis, client) = start_with(settings).await;
    let id = ready_jobs(&client, &mut redis, "flaky", 1).await.remove(0);
    let attempts = Arc::new(AtomicUsize::new(0));
    let counted = attempts.clone();
    let (stop, stopped) = stop_signal();
    let worker = Worker::new(client.clone())
        .retry_backoff(Duration::from_millis(100), Duration::from_secs(1))
        .handle("flaky", move |job| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move { Err(format!("attempt {} failed", job.attempts)) }
        });
    let running = tokio::spawn(worker.run(stopped));

    // The daemon's part: a retried job waits in the pool until its backoff has passed.
    for attempt in 1..=3 {
        wait_for(
            Duration::from_secs(10),
            &format!("attempt {attempt}"),
            || {
                let (mut redis, attempts) = (redis.clone(), attempts.clone());
                async move {
                    move_due_jobs(&mut redis).await;
                    (attempts.load(Ordering::SeqCst) >= attempt).then_some(())
                }
            },
        )
        .await;
    }
    wait_for(Duration::from_secs(5), "the job to be dead", || {
        let client = client.clone();
        let id = id.clone();
        async move { (client.get(&id).await.unwrap().state == State::Dead).then_some(()) }
    })
    .await;
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();

    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    let inspector = Inspector::new(&client);
    assert_eq!(inspector.dead("flaky", 10).await.unwrap(), [id]);
}

#[tokio::test]
async fn at_most_concurrency_handlers_run_at_once_and_a_panic_is_a_failed_attempt() {
    let (_server, mut redis, client) = start().await;
    let ids = ready_jobs(&client, &mut redis, "t", 12).await;
    let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let panicked = Arc::new(AtomicUsize::new(0));
    let (n, m, p) = (now.clone(), most.clone(), panicked.clone());
    let (stop, stopped) = stop_signal();
    let worker = Worker::new(client.clone())
        .concurrency(3)
        .retry_backoff(Duration::from_secs(3600), Duration::from_secs(3600))
        .handle("t", move |job| {
            let (now, most, panicked) = (n.clone(), m.clone(), p.clone());
            async move {
                let running = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(running, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                if job.body_text().unwrap() == "t 0" && panicked.fetch_add(1, Ordering::SeqCst) == 0
                {
                    panic!("a handler bug");
                }
                Ok::<(), String>(())
            }
        });
    let running = tokio::spawn(worker.run(stopped));

    wait_for(Duration::from_secs(10), "every job to be done", || {
        let (client, ids) = (client.clone(), ids.clone());
        async move {
            let states = states(&client, &ids).await;
            (states
                .iter()
                .filter(|state| **state == State::Unknown)
                .count()
                == 11)
                .then_some(states)
        }
    })
    .await;
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();

    assert_eq!(most.load(Ordering::SeqCst), 3, "concurrency 3");
    let panicked_job = client.get(&ids[0]).await.unwrap();
    assert_eq!(
        panicked_job.state,
        State::Waiting,
        "nacked, back in the pool for later"
    );
    assert_eq!(panicked_job.attempts, 1);
}

#[tokio::test]
async fn a_long_job_is_touched_so_the_daemon_does_not_deliver_it_again() {
    let (_server, mut redis, client) = start().await;
    let id = ready_jobs(&client, &mut redis, "slow", 1).await.remove(0);
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let (stop, stopped) = stop_signal();
    let worker = Worker::new(client.clone())
        .ttr(Duration::from_millis(600))
        .handle("slow", move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move {
                tokio::time::sleep(Duration::from_millis(2000)).await;
                Ok::<(), String>(())
            }
        });
    let running = tokio::spawn(worker.run(stopped));

    // The daemon's part, looked at often: it must find no lapsed reservation while the job runs.
    let release = Arc::new(ReleaseScript::default());
    let redelivered = Arc::new(AtomicUsize::new(0));
    wait_for(Duration::from_secs(10), "the job to be acked", || {
        let (client, id, mut redis) = (client.clone(), id.clone(), redis.clone());
        let (release, redelivered) = (release.clone(), redelivered.clone());
        async move {
            let released = release
                .lapsed(&mut redis, &Layout::LEGACY.keys(""), 25, 100)
                .await
                .unwrap();
            redelivered.fetch_add(released.retried.len(), Ordering::SeqCst);
            (client.get(&id).await.unwrap().state == State::Unknown).then_some(())
        }
    })
    .await;
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();

    assert_eq!(
        redelivered.load(Ordering::SeqCst),
        0,
        "touched every 300 ms, the 600 ms reservation never lapsed"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_stop_lets_running_handlers_finish_reserves_nothing_more_and_gives_back_the_abandoned() {
    let (_server, mut redis, client) = start().await;
    let ids = ready_jobs(&client, &mut redis, "t", 4).await;
    let started = Arc::new(AtomicUsize::new(0));
    let counted = started.clone();
    let (stop, stopped) = stop_signal();
    // Two finish within the stop timeout, two would take far longer.
    let worker = Worker::new(client.clone())
        .concurrency(4)
        .stop_timeout(Duration::from_millis(500))
        .handle("t", move |job| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move {
                let long = job.body_text().unwrap() >= "t 2";
                tokio::time::sleep(Duration::from_millis(if long { 60_000 } else { 200 })).await;
                Ok::<(), String>(())
            }
        });
    let running = tokio::spawn(worker.run(stopped));
    wait_for(Duration::from_secs(10), "four handlers to start", || {
        let started = started.clone();
        async move { (started.load(Ordering::SeqCst) == 4).then_some(()) }
    })
    .await;
    let later = client.push("t", "pushed after the stop").await.unwrap();
    move_until_empty(&mut redis).await;

    stop.send(()).unwrap();
    running.await.unwrap().unwrap();

    let states = states(&client, &ids).await;
    assert_eq!(
        &states[..2],
        [State::Unknown, State::Unknown],
        "finished and acked"
    );
    assert_eq!(
        &states[2..],
        [State::Waiting, State::Waiting],
        "abandoned, given back"
    );
    assert_eq!(
        client.get(&later).await.unwrap().state,
        State::Ready,
        "not reserved after the stop"
    );
    let pool: usize = redis.zcard(JOB_POOL).await.unwrap();
    let ready: usize = redis.llen(ready_queue("t")).await.unwrap();
    assert_eq!((pool, ready), (2, 1), "nothing lost");
}

#[tokio::test]
async fn a_stop_gives_back_a_job_on_its_last_attempt_rather_than_killing_it() {
    let settings = Settings {
        max_attempts: 1,
        ..Settings::default()
    };
    let (_server, mut redis, client) = start_with(settings).await;
    let id = ready_jobs(&client, &mut redis, "t", 1).await.remove(0);
    let started = Arc::new(AtomicUsize::new(0));
    let counted = started.clone();
    let (stop, stopped) = stop_signal();
    let worker = Worker::new(client.clone())
        .stop_timeout(Duration::from_millis(200))
        .handle("t", move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<Result<(), String>>()
        });
    let running = tokio::spawn(worker.run(stopped));
    wait_for(Duration::from_secs(10), "the handler to start", || {
        let started = started.clone();
        async move { (started.load(Ordering::SeqCst) == 1).then_some(()) }
    })
    .await;

    stop.send(()).unwrap();
    running.await.unwrap().unwrap();

    let info = client.get(&id).await.unwrap();
    assert_eq!(
        (info.state, info.attempts),
        (State::Waiting, 0),
        "given back, not dead"
    );
}

/// What a worker handled of a backlog of 2,000 ready jobs before it was stopped, and where the
/// rest are.
struct StoppedInABacklog {
    /// Kept running for the checks after.
    _server: RedisServer,
    client: Client,
    ids: Vec<String>,
    /// Each handled once (checked).
    handled: Vec<String>,
    ready: usize,
    /// In the pool: given back untried at the stop.
    given_back: usize,
    /// Reserve calls that took jobs (each trimmed the list once).
    reserve_calls: usize,
}

/// Runs `worker` (given its client) on a backlog of 2,000 jobs with handlers that return at once,
/// stops it once it has handled `handled`, and checks that none was handled twice and none is
/// left reserved.
async fn stopped_in_a_backlog(
    worker: impl FnOnce(Worker) -> Worker,
    handled: usize,
) -> StoppedInABacklog {
    let (server, mut redis, client) = start().await;
    let ids = ready_jobs(&client, &mut redis, "t", 2_000).await;
    let _: () = delayer_client::redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut redis)
        .await
        .unwrap();
    let recorded = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (stop, stopped) = stop_signal();
    let record = recorded.clone();
    let worker = worker(Worker::new(client.clone())).handle("t", move |job| {
        record.lock().unwrap().push(job.id.to_string());
        async { Ok::<(), String>(()) }
    });
    let running = tokio::spawn(worker.run(stopped));
    wait_for(Duration::from_secs(20), "jobs handled", || {
        let count = recorded.lock().unwrap().len();
        async move { (count >= handled).then_some(()) }
    })
    .await;
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();

    let mut handled = recorded.lock().unwrap().clone();
    let count = handled.len();
    handled.sort();
    handled.dedup();
    assert_eq!(handled.len(), count, "none handled twice");
    let reserved: usize = redis.zcard(RESERVED).await.unwrap();
    assert_eq!(
        reserved, 0,
        "every handled job acked, nothing left reserved"
    );
    let stats = command_stats(&mut redis).await;
    StoppedInABacklog {
        _server: server,
        client,
        ids,
        handled,
        ready: redis.llen(ready_queue("t")).await.unwrap(),
        given_back: redis.zcard(JOB_POOL).await.unwrap(),
        reserve_calls: stats.get("ltrim").map_or(0, |&(calls, _)| calls as usize),
    }
}

#[tokio::test]
async fn a_stop_in_the_middle_of_a_backlog_loses_and_repeats_nothing() {
    // Slots take job after job (each acked with the next reserve) until the stop.
    let stopped = stopped_in_a_backlog(|worker| worker.concurrency(8), 200).await;
    let count = stopped.handled.len();
    assert!(
        count < stopped.ids.len(),
        "stopped before the end of the backlog"
    );
    // (Jobs reserved and not started at the stop are given back untried, to the pool.)
    let given_back = stopped.given_back;
    assert!(
        given_back <= DEFAULT_PREFETCH,
        "at most the default prefetch: {given_back}"
    );
    assert_eq!(
        stopped.ready + given_back + count,
        stopped.ids.len(),
        "every other job ready or given back"
    );
    for id in &stopped.handled {
        assert_eq!(
            stopped.client.get(id).await.unwrap().state,
            State::Unknown,
            "{id} acked"
        );
    }
}

#[tokio::test]
async fn a_larger_prefetch_takes_a_backlog_in_larger_calls_and_a_stop_gives_back_at_most_it() {
    const SLOTS: usize = 4;
    const PREFETCH: usize = 50;
    let stopped =
        stopped_in_a_backlog(|worker| worker.concurrency(SLOTS).prefetch(PREFETCH), 500).await;
    let (count, reserves) = (stopped.handled.len(), stopped.reserve_calls);
    // With a prefetch of `concurrency` a call takes at most one job a slot.
    assert!(
        reserves > 0 && count > 2 * SLOTS * reserves,
        "{count} jobs handled in {reserves} reserve calls"
    );
    let given_back = stopped.given_back;
    assert!(given_back <= PREFETCH, "at most the prefetch: {given_back}");
    assert_eq!(
        stopped.ready + given_back + count,
        stopped.ids.len(),
        "every other job ready or given back"
    );
}

/// Runs `worker` with one slot on ready jobs whose handlers take 120 ms, and checks that it
/// reserves nothing ahead of its slot: with such handlers none would start within 100 ms.
async fn holds_nothing_ahead_of_slow_handlers(worker: impl FnOnce(Worker) -> Worker) {
    const JOBS: usize = 10;
    let (_server, mut redis, client) = start().await;
    let ids = ready_jobs(&client, &mut redis, "t", JOBS).await;
    // As each handler ends: how many had started, and how many jobs the ready list still held.
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (started, record) = (Arc::new(AtomicUsize::new(0)), seen.clone());
    let (stop, stopped) = stop_signal();
    let worker = worker(Worker::new(client.clone()))
        .concurrency(1)
        .handle("t", move |_job| {
            let (started, record, mut redis) = (started.clone(), record.clone(), redis.clone());
            async move {
                let count = started.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::time::sleep(Duration::from_millis(120)).await;
                let ready: usize = redis.llen(ready_queue("t")).await.unwrap();
                record.lock().unwrap().push((count, ready));
                Ok::<(), String>(())
            }
        });
    let running = tokio::spawn(worker.run(stopped));
    wait_until_finished(&client, &ids).await;
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), JOBS);
    for (started, ready) in seen {
        assert_eq!(ready, JOBS - started, "none reserved ahead of the slot");
    }
}

#[tokio::test]
async fn by_default_handlers_of_100_ms_or_more_hold_one_job_a_slot() {
    holds_nothing_ahead_of_slow_handlers(|worker| worker).await;
}

#[tokio::test]
async fn a_large_prefetch_holds_nothing_ahead_for_handlers_too_slow_to_start_it_soon() {
    // 50 held ahead of one slot would wait 6 s.
    holds_nothing_ahead_of_slow_handlers(|worker| worker.prefetch(50)).await;
}

/// How many reservations Redis holds (each names its holder).
async fn reservations(redis: &MultiplexedConnection) -> usize {
    redis.clone().hlen(HOLDERS).await.unwrap()
}

/// A backlog for a worker of [`SLOTS`] whose handlers return at once for the first [`QUICK`]
/// jobs and then wait for `gate`: all slots held up, and the jobs reserved ahead waiting.
struct HeldUp {
    _server: RedisServer,
    redis: MultiplexedConnection,
    client: Client,
    ids: Vec<String>,
    /// The jobs whose handlers started, in order.
    started: Arc<std::sync::Mutex<Vec<String>>>,
    gate: Arc<tokio::sync::Semaphore>,
    stop: oneshot::Sender<()>,
    running: tokio::task::JoinHandle<delayer_client::Result<()>>,
}

const SLOTS: usize = 10;
const QUICK: usize = 200;

impl HeldUp {
    async fn start(worker: impl FnOnce(Worker) -> Worker) -> HeldUp {
        let (server, mut redis, client) = start().await;
        let ids = ready_jobs(&client, &mut redis, "t", 1_000).await;
        let started = Arc::new(std::sync::Mutex::new(Vec::new()));
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let (stop, stopped) = stop_signal();
        let (record, wait) = (started.clone(), gate.clone());
        let worker = worker(Worker::new(client.clone()))
            .concurrency(SLOTS)
            .handle("t", move |job| {
                let count = {
                    let mut started = record.lock().unwrap();
                    started.push(job.id.to_string());
                    started.len()
                };
                let wait = wait.clone();
                async move {
                    if count > QUICK {
                        wait.acquire().await.unwrap().forget();
                    }
                    Ok::<(), String>(())
                }
            });
        let running = tokio::spawn(worker.run(stopped));
        HeldUp {
            _server: server,
            redis,
            client,
            ids,
            started,
            gate,
            stop,
            running,
        }
    }

    fn started(&self) -> usize {
        self.started.lock().unwrap().len()
    }

    /// Stops the worker, its slots held up, and returns how many jobs the pool holds once the
    /// stop has given back the unstarted ones (only the held-up slots' reservations left). Then
    /// lets the handlers end, and checks that each job is either acked (those started, each once)
    /// or, moved as the daemon would, back in the ready list, and that Redis holds no
    /// reservation.
    async fn stop_and_check(mut self) -> usize {
        self.stop.send(()).unwrap();
        wait_for(
            Duration::from_secs(10),
            "the unstarted jobs given back",
            || {
                let redis = self.redis.clone();
                async move { (reservations(&redis).await == SLOTS).then_some(()) }
            },
        )
        .await;
        let in_pool: usize = self.redis.zcard(JOB_POOL).await.unwrap();
        self.gate.add_permits(SLOTS);
        self.running.await.unwrap().unwrap();
        assert_eq!(reservations(&self.redis).await, 0, "nothing left reserved");
        let reserved: usize = self.redis.zcard(RESERVED).await.unwrap();
        assert_eq!(reserved, 0);
        let mut started = self.started.lock().unwrap().clone();
        let count = started.len();
        started.sort();
        started.dedup();
        assert_eq!(started.len(), count, "none started twice");
        for id in &started {
            let state = self.client.get(id).await.unwrap().state;
            assert_eq!(state, State::Unknown, "{id} acked");
        }
        move_until_empty(&mut self.redis).await;
        let ready: usize = self.redis.llen(ready_queue("t")).await.unwrap();
        assert_eq!(ready + count, self.ids.len(), "every other job ready again");
        in_pool
    }
}

#[tokio::test]
async fn by_default_quick_handlers_have_jobs_reserved_ahead_and_a_stop_gives_back_every_one() {
    let held_up = HeldUp::start(|worker| worker).await;
    // More reserved than the slots and one job ahead of each (the most before the prefetch
    // adapted to the handlers); the heartbeat counts them all.
    let reserved = wait_for(
        Duration::from_secs(20),
        "jobs reserved ahead of the held-up slots, in the heartbeat",
        || {
            let (redis, client) = (held_up.redis.clone(), held_up.client.clone());
            let inspector = Inspector::new(&client);
            let started = held_up.started();
            async move {
                let reserved = reservations(&redis).await;
                let listed = inspector.consumers(10).await.unwrap().listed;
                let beat = listed.first().and_then(|consumer| consumer.beat.held);
                (started == QUICK + SLOTS && reserved > 2 * SLOTS && beat == Some(reserved))
                    .then_some(reserved)
            }
        },
    )
    .await;
    let given_back = held_up.stop_and_check().await;
    assert!(
        given_back >= reserved - SLOTS && given_back <= DEFAULT_PREFETCH,
        "{reserved} reserved, {given_back} given back at the stop"
    );
}

#[tokio::test]
async fn jobs_waiting_behind_held_up_slots_are_given_back_before_their_ttr_and_not_taken_again() {
    let held_up = HeldUp::start(|worker| worker.ttr(MIN_TTR)).await;
    // 3/8 of the 1 s ttr after their reserve, the jobs reserved ahead go back to the pool.
    let given_back = wait_for(
        Duration::from_secs(20),
        "the jobs reserved ahead given back",
        || {
            let mut redis = held_up.redis.clone();
            let started = held_up.started();
            async move {
                let reserved = reservations(&redis).await;
                let in_pool: usize = redis.zcard(JOB_POOL).await.unwrap();
                (started == QUICK + SLOTS && reserved == SLOTS && in_pool > 0).then_some(in_pool)
            }
        },
    )
    .await;
    assert!(given_back <= DEFAULT_PREFETCH, "{given_back}");
    let in_pool = held_up.stop_and_check().await;
    assert_eq!(in_pool, given_back, "nothing reserved ahead again");
}

/// One slot, three ready jobs: the first job's handler finishes while Redis holds writes for
/// `pause_ms` (its ack and the next reserve wait in Redis), and the stop comes meanwhile, with
/// `stop_timeout`. Whether the stop waits out the pause or gives up on the slot first, the first
/// job is acked, the one reserved with its ack is given back untried (no handler starts after the
/// stop), the last is untouched, and nothing is left reserved.
async fn stop_while_redis_holds_an_ack_and_the_next_reserve(stop_timeout: Duration, pause_ms: u64) {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    // On its last attempt, the job reserved with the ack would die if it were left reserved.
    let settings = Settings {
        max_attempts: 1,
        ..Settings::default()
    };
    let client = Client::connect_to(server.info(), settings).await.unwrap();
    let ids = ready_jobs(&client, &mut redis, "t", 3).await;
    let started = Arc::new(AtomicUsize::new(0));
    let go = Arc::new(tokio::sync::Notify::new());
    let (counted, release) = (started.clone(), go.clone());
    let (stop, stopped) = stop_signal();
    // One job unstarted at most: the next reserve takes only the second job.
    let worker = Worker::new(client.clone())
        .concurrency(1)
        .prefetch(1)
        .stop_timeout(stop_timeout)
        .handle("t", move |_job| {
            let first = counted.fetch_add(1, Ordering::SeqCst) == 0;
            let release = release.clone();
            async move {
                if first {
                    release.notified().await;
                }
                Ok::<(), String>(())
            }
        });
    let running = tokio::spawn(worker.run(stopped));
    wait_for(Duration::from_secs(10), "the first handler", || {
        let started = started.clone();
        async move { (started.load(Ordering::SeqCst) == 1).then_some(()) }
    })
    .await;
    let _: () = delayer_client::redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(pause_ms)
        .arg("WRITE")
        .query_async(&mut redis)
        .await
        .unwrap();
    go.notify_one();
    wait_for(Duration::from_secs(5), "the ack held by the pause", || {
        let mut redis = redis.clone();
        async move {
            let info: String = delayer_client::redis::cmd("INFO")
                .arg("clients")
                .query_async(&mut redis)
                .await
                .unwrap();
            info.contains("blocked_clients:1").then_some(())
        }
    })
    .await;
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();

    assert_eq!(
        started.load(Ordering::SeqCst),
        1,
        "no handler after the stop"
    );
    assert_eq!(
        states(&client, &ids).await,
        [State::Unknown, State::Waiting, State::Ready],
        "the first acked, the one reserved with its ack given back untried, the last untouched"
    );
    let reserved: Vec<String> = redis.zrange(RESERVED, 0, -1).await.unwrap();
    assert!(reserved.is_empty(), "reserved by nobody: {reserved:?}");
}

#[tokio::test]
async fn a_stop_timing_out_while_redis_holds_an_ack_and_the_next_reserve_strands_nothing() {
    stop_while_redis_holds_an_ack_and_the_next_reserve(Duration::from_millis(300), 1500).await;
}

#[tokio::test]
async fn a_job_reserved_with_an_ack_held_up_by_redis_is_not_started_after_the_stop() {
    // A stop timeout longer than the pause: nothing is abandoned, the stop only waits.
    stop_while_redis_holds_an_ack_and_the_next_reserve(Duration::from_secs(10), 500).await;
}

#[tokio::test]
async fn a_job_a_slot_took_after_another_is_given_back_when_the_stop_abandons_it() {
    let (_server, mut redis, client) = start().await;
    let ids = ready_jobs(&client, &mut redis, "t", 2).await;
    let started = Arc::new(AtomicUsize::new(0));
    let counted = started.clone();
    let (stop, stopped) = stop_signal();
    // One slot: the second job is the one it reserved with the first one's ack.
    let worker = Worker::new(client.clone())
        .concurrency(1)
        .stop_timeout(Duration::from_millis(200))
        .handle("t", move |_job| {
            let first = counted.fetch_add(1, Ordering::SeqCst) == 0;
            async move {
                if !first {
                    std::future::pending::<()>().await;
                }
                Ok::<(), String>(())
            }
        });
    let running = tokio::spawn(worker.run(stopped));
    wait_for(Duration::from_secs(10), "the second handler", || {
        let started = started.clone();
        async move { (started.load(Ordering::SeqCst) == 2).then_some(()) }
    })
    .await;
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();

    assert_eq!(
        states(&client, &ids).await,
        [State::Unknown, State::Waiting]
    );
    let reserved: usize = redis.zcard(RESERVED).await.unwrap();
    assert_eq!(reserved, 0);
}

#[tokio::test]
async fn a_handler_that_panics_before_its_first_await_is_a_failed_attempt() {
    let (_server, mut redis, client) = start().await;
    let ids = ready_jobs(&client, &mut redis, "t", 1).await;
    let (stop, stopped) = stop_signal();
    let worker = Worker::new(client.clone())
        .retry_backoff(Duration::from_secs(60), Duration::from_secs(60))
        .handle("t", |_job| -> std::future::Ready<Result<(), String>> {
            panic!("before any await")
        });
    let running = tokio::spawn(worker.run(stopped));
    wait_for(Duration::from_secs(10), "the job nacked", || {
        let client = client.clone();
        let id = ids[0].clone();
        async move { (client.get(&id).await.unwrap().state == State::Waiting).then_some(()) }
    })
    .await;
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
    let info = client.get(&ids[0]).await.unwrap();
    assert_eq!(
        (info.state, info.attempts),
        (State::Waiting, 1),
        "one failed attempt"
    );
}

/// How many script calls Redis ran since its stats were reset.
async fn script_calls(redis: &mut MultiplexedConnection) -> usize {
    let stats = command_stats(redis).await;
    ["evalsha", "eval"]
        .iter()
        .filter_map(|command| stats.get(*command))
        .map(|&(calls, _)| calls as usize)
        .sum()
}

#[tokio::test]
async fn slots_that_finish_together_are_acked_in_one_call_and_fed_in_another() {
    const SLOTS: usize = 8;
    const ROUNDS: usize = 10;
    let (_server, mut redis, client) = start().await;
    let ids = ready_jobs(&client, &mut redis, "t", SLOTS * ROUNDS).await;
    let _: () = delayer_client::redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut redis)
        .await
        .unwrap();
    // Every handler ends only once all slots hold a job: they all finish at once.
    let together = Arc::new(tokio::sync::Barrier::new(SLOTS));
    let handled = Arc::new(AtomicUsize::new(0));
    let (stop, stopped) = stop_signal();
    let (t, h) = (together.clone(), handled.clone());
    let worker = Worker::new(client.clone())
        .concurrency(SLOTS)
        .handle("t", move |_| {
            let (together, handled) = (t.clone(), h.clone());
            async move {
                together.wait().await;
                handled.fetch_add(1, Ordering::SeqCst);
                Ok::<(), String>(())
            }
        });
    let running = tokio::spawn(worker.run(stopped));
    wait_until_finished(&client, &ids).await;
    let calls = script_calls(&mut redis).await;
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();

    assert_eq!(handled.load(Ordering::SeqCst), SLOTS * ROUNDS, "each once");
    // One ack and one reserve a job would be 160 calls; batches take at most 4 a round.
    assert!(calls <= 4 * ROUNDS + 4, "{calls} script calls");
    let reserved: usize = redis.zcard(RESERVED).await.unwrap();
    assert_eq!(reserved, 0);
}

#[tokio::test]
async fn an_ack_redis_did_not_answer_is_sent_again_and_the_job_runs_once() {
    let (server, port) = RedisServer::start_tcp(&[]);
    let mut redis = server.connect().await;
    let proxy = ForgetfulProxy::start(port).await;
    let client = Client::connect(proxy.url()).await.unwrap();
    let ids = ready_jobs(&client, &mut redis, "t", 1).await;
    let (runs, started, release) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Notify::new()),
    );
    let (stop, stopped) = stop_signal();
    let (r, s, l) = (runs.clone(), started.clone(), release.clone());
    let worker = Worker::new(client.clone())
        .concurrency(1)
        .ttr(Duration::from_secs(20))
        .handle("t", move |_job| {
            let (r, s, l) = (r.clone(), s.clone(), l.clone());
            async move {
                r.fetch_add(1, Ordering::SeqCst);
                s.notify_one();
                l.notified().await;
                Ok::<(), String>(())
            }
        });
    let running = tokio::spawn(worker.run(stopped));
    started.notified().await;
    // The connection the ack goes out on now passes nothing: the ack times out unanswered.
    proxy.forget_open_connections();
    release.notify_one();

    wait_for(Duration::from_secs(15), "the job acked", || {
        let mut redis = redis.clone();
        let id = ids[0].clone();
        async move {
            let left: bool = redis
                .exists(delayer_wire::keys::job_bucket(&id))
                .await
                .unwrap();
            (!left).then_some(())
        }
    })
    .await;
    let reserved: usize = redis.zcard(RESERVED).await.unwrap();
    assert_eq!(reserved, 0);
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1, "run once");
}

/// Ids and topics are bytes: a job whose id (or topic) is not UTF-8, as the legacy clients can
/// push it, is handled once and acked, not handed out again after each ack that could not name it.
#[tokio::test]
async fn a_job_whose_id_or_topic_is_not_utf8_runs_once() {
    let (_server, mut redis, client) = start().await;
    let jobs: [(&[u8], &[u8]); 2] = [(b"job-\xff\xfe", b"mail"), (b"job-2", b"t\xff")];
    for (id, topic) in jobs {
        legacy_client::push_bytes(&mut redis, [id, topic, b"b"], 0)
            .await
            .unwrap();
    }
    move_until_empty(&mut redis).await;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (stop, stopped) = stop_signal();
    let mut worker = Worker::new(client.clone()).ttr(Duration::from_secs(1));
    for (_, topic) in jobs {
        let seen = seen.clone();
        worker = worker.handle(topic, move |job| {
            seen.lock().unwrap().push((job.id, job.topic));
            async { Ok::<(), String>(()) }
        });
    }
    let running = tokio::spawn(worker.run(stopped));

    wait_for(Duration::from_secs(10), "both jobs acked", || {
        let mut redis = redis.clone();
        async move {
            let left: usize = redis
                .exists(&jobs.map(|(id, _)| delayer_wire::keys::job_bucket(id)))
                .await
                .unwrap();
            (left == 0).then_some(())
        }
    })
    .await;
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    let mut expected: Vec<(JobId, Topic)> =
        jobs.map(|(id, topic)| (id.into(), topic.into())).into();
    expected.sort();
    assert_eq!(seen, expected, "each handled once, its id and topic whole");
    let reserved: usize = redis.zcard(RESERVED).await.unwrap();
    assert_eq!(reserved, 0);
}
