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
//! topic's dead list. While a handler runs, its job's reservation is touched before half its
//! `ttr` has passed (one sweep for all the jobs held), so a long job is not delivered again; if
//! the worker dies, the daemon delivers the job again once `ttr` passes.
//!
//! The worker reserves for all its free slots in one call, and jobs ahead of its slots, so that a
//! slot that frees finds its next job at once: as many as the slots would start within 100 ms (and
//! an eighth of `ttr`) at the handlers' average time, at most [`Worker::prefetch`] (100 unless
//! set). Quick handlers so take a burst 100 jobs a call; handlers of 100 ms or more hold one job a
//! slot. A job that waits unstarted for 3/8 of its `ttr` (its slots held up by slow handlers) is
//! given back untried, due at once for another consumer, rather than touched. The handlers that
//! ended while an ack was at Redis are acked together in the next call (nacks one a job), so a
//! busy worker costs Redis two calls a batch. An ack Redis does not answer is sent again until it
//! does, or the job's `ttr` has passed.
//!
//! On stop the worker reserves nothing more and gives back at once the jobs it had not started
//! (at most `prefetch`, the attempt not counted), lets running handlers finish (up to
//! `stop_timeout`), then stops the rest and gives their jobs back too: no job is lost. A round
//! trip to Redis under way is never cut short, so that no job is left reserved by nobody; stop a
//! worker through `run`'s stop future, not by dropping `run` (or a timeout around it), which would
//! cut them short. A handler that ignores being stopped (blocking work) may still run while its
//! job is given back; one that blocks its thread also holds up the touches and the stop on a
//! runtime with few threads: run blocking work with `tokio::task::spawn_blocking`.
//!
//! While it runs, the worker beats (see [`crate::consumer`]): every 5 s it tells Redis
//! its id (`host:pid:salt`), host, pid, topics, concurrency and the jobs it holds (started or
//! not), so that the daemon's console lists it, and marks it gone 15 s after its last beat. Its
//! reserve tokens start with its id, so that the console names it as the holder of its jobs. A
//! clean stop removes it from the list.

mod finish;
mod heartbeat;
mod slots;

use std::collections::HashMap;
use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use tokio::sync::watch;
use tracing::info;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::job::Job;
use crate::settings::{MAX_BATCH, MIN_TTR};
use delayer_wire::consumer::{self, Heartbeat, LIFETIME};
use delayer_wire::name::Topic;
use delayer_wire::name::unique_id;
use heartbeat::Beating;
use slots::{Handler, Settings, Slots};

/// Handlers running at once, unless told otherwise.
pub const DEFAULT_CONCURRENCY: usize = 10;
/// The most jobs held unstarted, unless told otherwise (or `concurrency`, if more): a reserve
/// call's most, so that quick handlers take a burst in calls of that many.
pub const DEFAULT_PREFETCH: usize = MAX_BATCH;
/// A job's time to run, unless told otherwise.
pub const DEFAULT_TTR: Duration = Duration::from_secs(60);
/// How long a stop waits for running handlers, unless told otherwise.
pub const DEFAULT_STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// The first retry's delay; each next one doubles, up to [`DEFAULT_MAX_BACKOFF`].
pub const DEFAULT_FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest delay between retries, unless told otherwise.
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(3600);

/// Runs handlers for reserved jobs; see the module docs.
pub struct Worker {
    client: Client,
    handlers: HashMap<Topic, Handler>,
    concurrency: usize,
    prefetch: usize,
    ttr: Duration,
    stop_timeout: Duration,
    first_backoff: Duration,
    max_backoff: Duration,
}

impl Worker {
    /// A worker that reserves jobs with `client`, with the defaults until told otherwise; give
    /// it a handler for each topic ([`handle`](Worker::handle)), then [`run`](Worker::run) it.
    pub fn new(client: Client) -> Worker {
        Worker {
            client,
            handlers: HashMap::new(),
            concurrency: DEFAULT_CONCURRENCY,
            prefetch: DEFAULT_PREFETCH,
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

    /// At most this many jobs reserved and not started yet ([`DEFAULT_PREFETCH`] unless set, and
    /// never fewer than `concurrency`: the worker reserves for all its free slots at once). The
    /// worker holds fewer while handlers are slow: only as many as its slots would start within
    /// about 100 ms (and an eighth of `ttr`), none ahead of its slots for handlers of 100 ms or
    /// more. More lets quick handlers take a burst in fewer, larger calls (at most 100 jobs a
    /// call); `prefetch(concurrency)` holds at most one job a slot ahead. At a stop the unstarted
    /// ones are given back untried: at most this many.
    pub fn prefetch(mut self, prefetch: usize) -> Worker {
        self.prefetch = prefetch;
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

    async fn serve(self, stopped: watch::Receiver<bool>) -> Result<()> {
        let max = self.client.settings().max_ttr;
        if self.ttr > max {
            return Err(Error::TtrTooLong { ttr: self.ttr, max });
        }
        let concurrency = self.concurrency;
        let (host, pid) = (consumer::this_host(), std::process::id());
        // The end of a unique id: a few hex digits of a hash of the time, the pid and a counter.
        let id = consumer::worker_id(&host, pid, &unique_id()[26..]);
        let client = self.client.as_consumer(id.clone());
        let held = Arc::new(AtomicUsize::new(0));
        let slots = Slots::new(
            Settings {
                client: client.clone(),
                handlers: self.handlers,
                concurrency,
                prefetch: self.prefetch.max(concurrency),
                ttr: self.ttr,
                stop_timeout: self.stop_timeout,
                first_backoff: self.first_backoff,
                max_backoff: self.max_backoff,
            },
            stopped.clone(),
            held.clone(),
        );
        let beat = Heartbeat {
            id: id.clone(),
            host,
            pid: Some(pid),
            topics: slots.topics().to_vec(),
            concurrency: Some(concurrency),
            held: Some(0),
            lifetime: LIFETIME,
        };
        let beating = Beating::start(client, beat, held);
        info!(consumer = id, topics = ?slots.topics(), concurrency, "worker started");
        let given_back = slots.run(stopped).await;
        beating.stop().await;
        info!(given_back, "worker stopped");
        Ok(())
    }
}
