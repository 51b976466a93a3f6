//! The worker's loop: keeps its slots fed from a small buffer of reserved jobs, one reserve call
//! for all the slots free (or about to be), one ack call for all the handlers that ended, and one
//! sweep that touches the reservations of running handlers and gives back the jobs that waited
//! too long unstarted.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::{self, JoinHandle, JoinSet};
use tokio::time::{Instant, MissedTickBehavior};
use tracing::{debug, warn};

use super::finish::{Finished, Finisher, backoff};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::job::{Job, Receipt};
use crate::settings::MAX_BATCH;
use delayer_wire::name::Topic;

pub(super) type Handler =
    Arc<dyn Fn(Job) -> Pin<Box<dyn Future<Output = Outcome> + Send>> + Send + Sync>;
/// A handler's answer: `Err` with why it failed.
pub(super) type Outcome = std::result::Result<(), String>;

/// How long one reserve waits for a job, when the last found none, before the loop looks again.
const RESERVE_WAIT: Duration = Duration::from_secs(1);
/// How long the loop waits after Redis failed a reserve.
const TROUBLE_WAIT: Duration = Duration::from_millis(500);
/// Jobs are reserved ahead of free slots only as far as the slots would start them within this
/// (and within an eighth of `ttr`) at the handlers' average time: `concurrency` jobs for each
/// handler's time that fits. Then each starts long before its time to run passes; slower
/// handlers gain nothing from it.
const PREFETCH_BELOW: Duration = Duration::from_millis(100);

/// What the worker was built with.
pub(super) struct Settings {
    pub(super) client: Client,
    pub(super) handlers: HashMap<Topic, Handler>,
    pub(super) concurrency: usize,
    /// The most jobs held unstarted, those of a reserve under way included (at least
    /// `concurrency`); fewer while handlers are slow (see [`Slots::ahead`]).
    pub(super) prefetch: usize,
    pub(super) ttr: Duration,
    pub(super) stop_timeout: Duration,
    pub(super) first_backoff: Duration,
    pub(super) max_backoff: Duration,
}

/// A reservation the worker holds, and when it was last extended (the reserve or touch sent).
struct Held {
    reservation: Receipt,
    extended: Instant,
}

/// A running handler's job.
struct Running {
    held: Held,
    started: Instant,
    backoff: Duration,
}

/// The loop's state; see [`Slots::run`].
pub(super) struct Slots {
    settings: Settings,
    finisher: Arc<Finisher>,
    topics: Vec<Topic>,
    /// Counts reserves, each starting with another topic.
    turn: usize,
    /// Jobs reserved whose handlers have not started, with when their reserve was sent, oldest
    /// first.
    ready: VecDeque<(Job, Instant)>,
    handlers: JoinSet<Outcome>,
    running: HashMap<task::Id, Running>,
    /// Jobs whose handlers ended, for the next ack call.
    finished: Vec<Finished>,
    /// The reserve calls under way: what each found, when it was sent and how many it asked for.
    reserving: JoinSet<(Result<Vec<Job>>, Instant, usize)>,
    /// How many jobs the reserves under way ask for.
    asked: usize,
    /// Whether the last reserve found fewer jobs than it asked for: the next one waits for more.
    drained: bool,
    /// No reserve before then: Redis failed the last.
    trouble_until: Option<Instant>,
    acking: Option<JoinHandle<Vec<Receipt>>>,
    acking_again: JoinSet<()>,
    touching: JoinSet<(Receipt, Result<()>)>,
    giving_back: JoinSet<()>,
    /// How long handlers take, on average (none ended yet: `None`).
    handler_time: Option<Duration>,
    /// How many jobs were given back at the stop.
    given_back_at_stop: usize,
    /// How many jobs it holds (running, and reserved not started), for the heartbeat.
    held: Arc<AtomicUsize>,
}

impl Slots {
    pub(super) fn new(
        settings: Settings,
        stopped: watch::Receiver<bool>,
        held: Arc<AtomicUsize>,
    ) -> Slots {
        let finisher = Arc::new(Finisher {
            client: settings.client.clone(),
            ttr: settings.ttr,
            stopped,
        });
        Slots {
            topics: settings.handlers.keys().cloned().collect(),
            settings,
            finisher,
            turn: 0,
            ready: VecDeque::new(),
            handlers: JoinSet::new(),
            running: HashMap::new(),
            finished: Vec::new(),
            reserving: JoinSet::new(),
            asked: 0,
            drained: false,
            trouble_until: None,
            acking: None,
            acking_again: JoinSet::new(),
            touching: JoinSet::new(),
            giving_back: JoinSet::new(),
            handler_time: None,
            given_back_at_stop: 0,
            held,
        }
    }

    pub(super) fn topics(&self) -> &[Topic] {
        &self.topics
    }

    /// Runs until the stop (see the module docs of the worker): starts handlers while slots are
    /// free and jobs held; reserves while fewer jobs are held than the slots could use; acks the
    /// jobs of ended handlers; touches what runs. Returns how many jobs it gave back at the stop.
    pub(super) async fn run(mut self, mut stopped: watch::Receiver<bool>) -> usize {
        let ttr = self.settings.ttr;
        // Each reservation is touched once it was extended 3/8 ttr ago, looked at every 1/8: at
        // most half its time to run after its last extension, as a handler's own timer would.
        let mut sweep = tokio::time::interval(ttr / 8);
        sweep.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut stop_at: Option<Instant> = None;
        let mut abandoned = false;
        loop {
            let stopping = *stopped.borrow_and_update();
            if stopping && stop_at.is_none() {
                stop_at = Some(Instant::now() + self.settings.stop_timeout);
                // Never started: given back at once, for another consumer.
                for (job, _) in std::mem::take(&mut self.ready) {
                    self.give_back(Receipt::from(&job), GivenBack::Unstarted);
                }
            }
            if !stopping {
                self.start_handlers();
                self.reserve(&stopped);
            }
            let held = self.running.len() + self.ready.len();
            self.held.store(held, Ordering::Relaxed);
            if self.acking.is_none() && !self.finished.is_empty() {
                let batch = std::mem::take(&mut self.finished);
                self.acking = Some(tokio::spawn(self.finisher.clone().finish(batch)));
            }
            if stopping
                && self.reserving.is_empty()
                && self.acking.is_none()
                && self.running.is_empty()
            {
                break;
            }
            tokio::select! {
                // Ended handlers first, so that the ack takes them all.
                biased;
                Some(ended) = self.handlers.join_next_with_id(), if !self.handlers.is_empty() => {
                    self.ended(ended);
                    while let Some(ended) = self.handlers.try_join_next_with_id() {
                        self.ended(ended);
                    }
                }
                Some(reserved) = self.reserving.join_next(), if !self.reserving.is_empty() => {
                    self.reserved(reserved.expect("a reserve's task does not panic"), stopping);
                }
                unanswered = wait(&mut self.acking), if self.acking.is_some() => {
                    self.acking = None;
                    for reservation in unanswered {
                        self.acking_again.spawn(self.finisher.clone().ack_again(reservation));
                    }
                    while self.acking_again.try_join_next().is_some() {}
                }
                Some(touched) = self.touching.join_next(), if !self.touching.is_empty() => {
                    self.touched(touched.expect("a touch does not panic"));
                }
                _ = sweep.tick() => self.sweep_the_old(),
                _ = stopped.changed(), if !stopping => {}
                () = sleep_until(stop_at), if stopping && !abandoned && !self.running.is_empty() => {
                    abandoned = true;
                    self.abandon();
                }
                () = sleep_until(self.trouble_until), if !stopping && self.trouble_until.is_some() => {
                    self.trouble_until = None;
                }
            }
        }
        self.acking_again.join_all().await;
        self.giving_back.join_all().await;
        // Not awaited: a touch is no longer needed, and its answer changes nothing.
        self.touching.abort_all();
        self.given_back_at_stop
    }

    /// Starts a handler for each held job while a slot is free.
    fn start_handlers(&mut self) {
        while self.running.len() < self.settings.concurrency {
            let Some((job, extended)) = self.ready.pop_front() else {
                return;
            };
            let reservation = Receipt::from(&job);
            let backoff = backoff(
                self.settings.first_backoff,
                self.settings.max_backoff,
                job.attempts,
            );
            let handler = self.settings.handlers[&job.topic].clone();
            // Its own task, the handler called in it too: a panic is a failed attempt.
            let handle = self.handlers.spawn(async move { handler(job).await });
            let held = Held {
                reservation,
                extended,
            };
            let running = Running {
                held,
                started: Instant::now(),
                backoff,
            };
            self.running.insert(handle.id(), running);
        }
    }

    /// How many jobs to hold ahead of the slots, so that a slot that frees finds its next job at
    /// once: as many as the slots start within [`PREFETCH_BELOW`] (and an eighth of `ttr`) at the
    /// handlers' average time, at most `prefetch`; none before a handler has ended.
    fn ahead(&self) -> usize {
        let Some(time) = self.handler_time else {
            return 0;
        };
        let within = PREFETCH_BELOW.min(self.settings.ttr / 8);
        // Handlers that take no measurable time: as many as allowed.
        let rounds = within
            .as_nanos()
            .checked_div(time.as_nanos())
            .unwrap_or(u128::MAX);
        let rounds = usize::try_from(rounds).unwrap_or(usize::MAX);
        self.settings
            .concurrency
            .saturating_mul(rounds)
            .min(self.settings.prefetch)
    }

    /// Reserves, in one call, as many jobs as the slots could use: the free slots, plus those
    /// held [`ahead`](Slots::ahead); at most `prefetch` unstarted (given back at a stop), one call
    /// at a time.
    fn reserve(&mut self, stopped: &watch::Receiver<bool>) {
        // One at a time: two calls for half as many jobs each cost Redis and the worker more than
        // the wait they save (measured with 10 slots).
        if !self.reserving.is_empty() || self.trouble_until.is_some() {
            return;
        }
        let usable = self.settings.concurrency.saturating_add(self.ahead());
        let unstarted = self.ready.len() + self.asked;
        let wanted = usable
            .saturating_sub(self.running.len() + unstarted)
            .min(self.settings.prefetch.saturating_sub(unstarted))
            .min(MAX_BATCH);
        if wanted == 0 {
            return;
        }
        let turn = self.turn;
        self.turn = turn.wrapping_add(1);
        let count = self.topics.len();
        let topics: Vec<Topic> = (0..count)
            .map(|index| self.topics[(turn + index) % count].clone())
            .collect();
        let (client, ttr) = (self.settings.client.clone(), self.settings.ttr);
        // Waits for a job only when the last look found too few: a busy worker never waits.
        let wait = if self.drained {
            RESERVE_WAIT
        } else {
            Duration::ZERO
        };
        let mut stop = stopped.clone();
        let give_up = async move {
            let _ = stop.wait_for(|stop| *stop).await;
        };
        // Its own task: a call under way is never cut short, so no job is left reserved by nobody.
        self.reserving.spawn(async move {
            let sent = Instant::now();
            let reserved = client
                .reserve_up_to(&topics, ttr, wanted, wait, give_up)
                .await;
            (reserved, sent, wanted)
        });
        self.asked += wanted;
    }

    fn reserved(
        &mut self,
        (reserved, sent, asked): (Result<Vec<Job>>, Instant, usize),
        stopping: bool,
    ) {
        self.asked -= asked;
        let jobs = match reserved {
            Ok(jobs) => jobs,
            Err(error) => {
                warn!("worker cannot reserve: {error}");
                self.trouble_until = Some(Instant::now() + TROUBLE_WAIT);
                return;
            }
        };
        self.drained = jobs.len() < asked;
        if stopping {
            // Reserved as the stop came: given back untried.
            for job in &jobs {
                self.give_back(Receipt::from(job), GivenBack::Unstarted);
            }
            return;
        }
        self.ready.extend(jobs.into_iter().map(|job| (job, sent)));
    }

    /// A handler ended (or was stopped): its job is to be acked, nacked or given back.
    fn ended(&mut self, ended: std::result::Result<(task::Id, Outcome), task::JoinError>) {
        let (id, outcome) = match ended {
            Ok((id, outcome)) => (id, outcome),
            Err(error) if error.is_cancelled() => {
                if let Some(running) = self.running.remove(&error.id()) {
                    self.give_back(running.held.reservation, GivenBack::Abandoned);
                }
                return;
            }
            Err(error) => (error.id(), Err(format!("the handler panicked: {error}"))),
        };
        let Some(running) = self.running.remove(&id) else {
            return;
        };
        let took = running.started.elapsed();
        // An average over the last few: one slow job does not stop the reserving ahead at once.
        self.handler_time = Some(match self.handler_time {
            Some(average) => (average * 7 + took) / 8,
            None => took,
        });
        self.finished.push(Finished {
            reservation: running.held.reservation,
            failure: outcome.err(),
            backoff: running.backoff,
        });
    }

    /// The stop has waited `stop_timeout`: running handlers are stopped, their jobs given back
    /// (but those that ended meanwhile are acked).
    fn abandon(&mut self) {
        self.handlers.abort_all();
        while let Some(ended) = self.handlers.try_join_next_with_id() {
            self.ended(ended);
        }
        // A handler that ignores being stopped (blocking work) is left running.
        self.handlers.detach_all();
        for (_, running) in std::mem::take(&mut self.running) {
            self.give_back(running.held.reservation, GivenBack::Abandoned);
        }
    }

    /// Gives a reservation back untried (the attempt not counted): nothing is lost, and a job on
    /// its last attempt is not sent to the dead list for a stop.
    fn give_back(&mut self, reservation: Receipt, why: GivenBack) {
        if let GivenBack::Unstarted | GivenBack::Abandoned = why {
            self.given_back_at_stop += 1;
        }
        let client = self.settings.client.clone();
        self.giving_back.spawn(async move {
            let id = &reservation.id;
            let (why, routine) = match why {
                GivenBack::Unstarted => ("stopping before the job started", true),
                GivenBack::Abandoned => ("stopping before the job was done", false),
                GivenBack::Waited => ("the job waited unstarted behind slow handlers", false),
            };
            match client.give_back(reservation.clone()).await {
                // Up to `prefetch` at each stop: counted in the worker's last line.
                Ok(_) if routine => debug!(id = %id, "{why}: given back"),
                Ok(_) => warn!(id = %id, "{why}: given back"),
                Err(error) => {
                    warn!(id = %id, "{why}, and giving it back failed ({error}): it is delivered again once its time to run passes")
                }
            }
        });
    }

    /// Touches the reservations of running handlers last extended 3/8 ttr ago, and gives back the
    /// jobs reserved that long ago and not started yet.
    fn sweep_the_old(&mut self) {
        let ttr = self.settings.ttr;
        let now = Instant::now();
        let old = |extended: Instant| now.duration_since(extended) >= ttr * 3 / 8;
        while self.giving_back.try_join_next().is_some() {}
        // Not touched: its slots are held up by handlers far slower than those that had it
        // reserved, and another consumer may start it sooner. Oldest first, so a front run.
        while let Some(&(_, reserved)) = self.ready.front() {
            if !old(reserved) {
                break;
            }
            // A handler's time is at least that wait: nothing more is reserved ahead until
            // handlers are quick again.
            let waited = now.duration_since(reserved);
            self.handler_time = Some(self.handler_time.map_or(waited, |time| time.max(waited)));
            let (job, _) = self.ready.pop_front().expect("looked at above");
            self.give_back(Receipt::from(&job), GivenBack::Waited);
        }
        let (client, touching) = (&self.settings.client, &mut self.touching);
        let mut touch = |reservation: &Receipt| {
            let (client, reservation) = (client.clone(), reservation.clone());
            touching.spawn(async move {
                let touched = client.touch(reservation.clone(), ttr).await;
                (reservation, touched)
            });
        };
        for running in self.running.values_mut() {
            if old(running.held.extended) {
                touch(&running.held.reservation);
                running.held.extended = now;
            }
        }
    }

    /// A touch failed: said unless the job is no longer held (it ended meanwhile).
    fn touched(&mut self, (reservation, touched): (Receipt, Result<()>)) {
        let Err(error) = touched else {
            return;
        };
        let held = self
            .running
            .values()
            .any(|running| running.held.reservation == reservation);
        if held || !matches!(error, Error::NotReserved(_)) {
            let id = &reservation.id;
            warn!(id = %id, "cannot extend the job's time to run: {error}");
        }
    }
}

/// Why a reservation is given back untried.
enum GivenBack {
    /// The worker stops before its handler started.
    Unstarted,
    /// The worker stops, and stopped its handler.
    Abandoned,
    /// It waited unstarted for 3/8 of its time to run.
    Waited,
}

/// The answer of a call under way (its task never fails).
async fn wait<T>(call: &mut Option<JoinHandle<T>>) -> T {
    let handle = call.as_mut().expect("only waited for while under way");
    handle.await.expect("a call's task does not panic")
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
