//! A worker: runs an async handler for each reserved job of its topics, at least once.
//!
//! ```no_run
//! # async fn example(client: delayer_client::Client) -> delayer_client::Result<()> {
//! use delayer_client::Worker;
//! Worker::new(client)
//!     .handle("order.close", |job| async move {
//!         println!("closing {}", job.body_text().unwrap_or("?"));
//!         Ok::<(), String>(())
//!     })
//!     .run(async { tokio::signal::ctrl_c().await.ok(); })
//!     .await
//! # }
//! ```
//!
//! A handler's `Ok` acks the job; an `Err` (or a panic) nacks it, to be tried again after an
//! exponential backoff until the job has been reserved `max_attempts` times, when it goes to its
//! topic's dead list. While a handler runs, its reservation is touched every half `ttr`, so a long
//! job is not delivered twice; if the worker dies, the daemon delivers the job again once `ttr`
//! passes. While jobs are ready, a slot whose handler finished acks its job and reserves the next
//! in one round trip, together with every other slot that finished meanwhile: one call acks them
//! all and one reserves their next jobs (one a topic in the cluster layout; nacks one a job), so a
//! busy worker costs Redis a fraction of a call a job. An ack Redis does not answer is sent again
//! until it does, or the job's `ttr` has passed. On stop the worker reserves nothing more
//! and starts no handler, lets running handlers finish (up to `stop_timeout`), then stops the rest
//! and gives their jobs back (the attempt not counted): no job is lost. A round trip to Redis
//! under way is never cut short, so that no job is left reserved by nobody; stop a worker through
//! `run`'s stop future, not by dropping `run` (or a timeout around it), which would cut them short.
//! A handler that ignores being stopped (blocking work) may still run while its job is given back;
//! one that blocks its thread also holds up the touches and the stop on a runtime with few
//! threads: run blocking work with `tokio::task::spawn_blocking`.

mod slots;

use std::collections::HashMap;
use std::fmt::Display;
use std::future::Future;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinSet;
use tracing::{info, warn};

use crate::client::Client;
use crate::error::Result;
use crate::job::{Job, Receipt};
use crate::name::Topic;
use crate::settings::{MAX_BATCH, MIN_TTR};
use slots::{Handler, Shared};

/// Handlers running at once, unless told otherwise.
pub const DEFAULT_CONCURRENCY: usize = 10;
/// A job's time to run, unless told otherwise.
pub const DEFAULT_TTR: Duration = Duration::from_secs(60);
/// How long a stop waits for running handlers, unless told otherwise.
pub const DEFAULT_STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// The first retry's delay; each next one doubles, up to [`DEFAULT_MAX_BACKOFF`].
pub const DEFAULT_FIRST_BACKOFF: Duration = Duration::from_secs(1);
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(3600);

/// How long one reserve waits before the loop looks at its slots again.
const RESERVE_WAIT: Duration = Duration::from_secs(1);
/// How long the loop waits after Redis failed it.
const TROUBLE_WAIT: Duration = Duration::from_millis(500);

/// Runs handlers for reserved jobs; see the module docs.
pub struct Worker {
    client: Client,
    handlers: HashMap<Topic, Handler>,
    concurrency: usize,
    ttr: Duration,
    stop_timeout: Duration,
    first_backoff: Duration,
    max_backoff: Duration,
}

impl Worker {
    pub fn new(client: Client) -> Worker {
        Worker {
            client,
            handlers: HashMap::new(),
            concurrency: DEFAULT_CONCURRENCY,
            ttr: DEFAULT_TTR,
            stop_timeout: DEFAULT_STOP_TIMEOUT,
            first_backoff: DEFAULT_FIRST_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
        }
    }

    /// Runs `handler` for each job of `topic`: `Ok` finishes the job, `Err` retries it later.
    pub fn handle<F, Fut, E>(mut self, topic: impl Into<Topic>, handler: F) -> Worker
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Display,
    {
        let handler = Arc::new(handler);
        self.handlers.insert(
            topic.into(),
            Arc::new(move |job| {
                let future = handler(job);
                Box::pin(async move { future.await.map_err(|error| error.to_string()) })
            }),
        );
        self
    }

    /// At most this many handlers at once (at least 1).
    pub fn concurrency(mut self, concurrency: usize) -> Worker {
        self.concurrency = concurrency.max(1);
        self
    }

    /// Each job's time to run (at least a second): touched every half of it while its handler
    /// runs.
    pub fn ttr(mut self, ttr: Duration) -> Worker {
        self.ttr = ttr.max(MIN_TTR);
        self
    }

    /// How long a stop waits for running handlers before it stops them and gives their jobs back.
    pub fn stop_timeout(mut self, timeout: Duration) -> Worker {
        self.stop_timeout = timeout;
        self
    }

    /// A failed job is tried again after `first`, then twice as long each time, at most `max`.
    pub fn retry_backoff(mut self, first: Duration, max: Duration) -> Worker {
        self.first_backoff = first;
        self.max_backoff = max;
        self
    }

    /// Runs until `stop` completes, then stops gracefully (see the module docs).
    pub async fn run(self, stop: impl Future<Output = ()>) -> Result<()> {
        let (stopping, stopped) = watch::channel(false);
        let serving = self.serve(stopped);
        tokio::pin!(serving, stop);
        let mut stop_seen = false;
        loop {
            tokio::select! {
                result = &mut serving => return result,
                () = &mut stop, if !stop_seen => {
                    stop_seen = true;
                    stopping.send_replace(true);
                }
            }
        }
    }

    async fn serve(self, mut stopped: watch::Receiver<bool>) -> Result<()> {
        let topics: Vec<Topic> = self.handlers.keys().cloned().collect();
        let slots = Arc::new(Semaphore::new(self.concurrency));
        let mut running = JoinSet::new();
        info!(topics = ?topics, concurrency = self.concurrency, "worker started");
        let (abandon, abandoned) = watch::channel(false);
        let shared = Arc::new(Shared {
            client: self.client.clone(),
            handlers: self.handlers,
            topics,
            turn: AtomicUsize::new(0),
            ttr: self.ttr,
            first_backoff: self.first_backoff,
            max_backoff: self.max_backoff,
            unfinished: Mutex::default(),
            stopped: stopped.clone(),
            abandoned,
        });
        let (to_batches, batches) = mpsc::unbounded_channel();
        let finishing = tokio::spawn(shared.clone().finish_in_batches(batches));
        loop {
            let slot = tokio::select! {
                biased;
                _ = stopped.wait_for(|stop| *stop) => break,
                slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            };
            // Every free slot is filled in one call.
            let mut free = vec![slot];
            while free.len() < MAX_BATCH {
                match slots.clone().try_acquire_owned() {
                    Ok(slot) => free.push(slot),
                    Err(_) => break,
                }
            }
            while running.try_join_next().is_some() {}
            let mut stop = stopped.clone();
            let give_up = async move {
                let _ = stop.wait_for(|stop| *stop).await;
            };
            let jobs = match self
                .client
                .reserve_up_to(&shared.order(), self.ttr, free.len(), RESERVE_WAIT, give_up)
                .await
            {
                Ok(jobs) => jobs,
                Err(error) => {
                    warn!("worker cannot reserve: {error}");
                    tokio::select! {
                        () = tokio::time::sleep(TROUBLE_WAIT) => continue,
                        _ = stopped.wait_for(|stop| *stop) => break,
                    }
                }
            };
            // A call returns at most as many as asked; were it more, the rest would be given back
            // at the stop, not lost.
            for job in &jobs {
                shared.hold(job);
            }
            for (job, slot) in jobs.into_iter().zip(free) {
                running.spawn(shared.clone().run_slot(job, slot, to_batches.clone()));
            }
        }

        // Stopping: no more reservations; running handlers get `stop_timeout` to finish, then
        // are stopped. Slots are never aborted: one may be waiting for Redis to ack its job and
        // reserve the next, and a reply dropped would leave a job reserved by nobody.
        let waited = tokio::time::timeout(self.stop_timeout, async {
            while running.join_next().await.is_some() {}
        })
        .await;
        if waited.is_err() {
            abandon.send_replace(true);
            while running.join_next().await.is_some() {}
        }
        // The slots are gone: so is every sender, and the batches end once done.
        drop(to_batches);
        finishing.await.expect("finishing does not panic");
        let abandoned: Vec<Receipt> = shared
            .unfinished
            .lock()
            .expect("not poisoned")
            .drain()
            .collect();
        // All at once: with Redis not answering, each waits out the reply timeout, together.
        let mut giving_back = JoinSet::new();
        for reservation in abandoned.iter().cloned() {
            let client = self.client.clone();
            giving_back.spawn(async move {
                let given = client.give_back(reservation.clone()).await;
                (reservation.id, given)
            });
        }
        while let Some(given) = giving_back.join_next().await {
            let (id, given) = given.expect("giving back does not panic");
            // Back at once for another consumer, the attempt not counted: nothing is lost, and a
            // job on its last attempt is not sent to the dead list for a stop.
            match given {
                Ok(_) => warn!(id = %id, "stopping before the job was done: given back"),
                Err(error) => {
                    warn!(id = %id, "stopping before the job was done, and giving it back failed ({error}): it is delivered again once its time to run passes")
                }
            }
        }
        info!(abandoned = abandoned.len(), "worker stopped");
        Ok(())
    }
}
