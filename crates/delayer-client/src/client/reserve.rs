//! Reserving jobs (at least once): each is held by one consumer until it is acked, nacked or
//! touched, or its time to run passes and the daemon delivers it again.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tracing::warn;

use super::{Client, check_topic_in};
use crate::error::{Error, Result};
use crate::job::Job;
use crate::settings::MAX_BATCH;
use delayer_wire::connection::unanswered;
use delayer_wire::keys::Keys;
use delayer_wire::scripts::reserve::Reserved;
use delayer_wire::shared_connection::Commands;
use delayer_wire::watch::Ensured;

/// How long a blocking reserve waits between looks when Redis reports no writes (Redis 5, or
/// `CLIENT` denied by ACL), and, when it does, how long it trusts the reports alone.
const POLL_WITHOUT_WATCH: Duration = Duration::from_millis(20);
const POLL_WITH_WATCH: Duration = Duration::from_secs(1);
/// How long the watch of the ready lists runs on after its last waiter (longer than any wait
/// between two calls of `ensure`).
const WATCH_UNUSED: Duration = Duration::from_secs(3);

impl Client {
    /// Reserves the oldest ready job of the first of `topics` that has one, for `ttr` (its time
    /// to run, at least [`MIN_TTR`](crate::MIN_TTR), at most
    /// [`Settings::max_ttr`](crate::Settings::max_ttr)): unless it is acked, touched or nacked
    /// by then, the daemon delivers it again.
    /// Waits up to `timeout` for a job (`Duration::ZERO`: only looks once).
    pub async fn reserve(
        &self,
        topics: &[impl AsRef<[u8]>],
        ttr: Duration,
        timeout: Duration,
    ) -> Result<Option<Job>> {
        self.reserve_or(topics, ttr, timeout, std::future::pending())
            .await
    }

    /// Like [`reserve`](Client::reserve), but stops waiting when `give_up` completes. Only the
    /// wait: a script call in flight is always let finish, so that a job it reserved is returned
    /// rather than left reserved by nobody until its time to run passes.
    pub async fn reserve_or(
        &self,
        topics: &[impl AsRef<[u8]>],
        ttr: Duration,
        timeout: Duration,
        give_up: impl Future<Output = ()>,
    ) -> Result<Option<Job>> {
        let jobs = self.reserve_up_to(topics, ttr, 1, timeout, give_up).await?;
        Ok(jobs.into_iter().next())
    }

    /// Like [`reserve`](Client::reserve), but takes up to `most` jobs (at most
    /// [`MAX_BATCH`] a call) in one round trip, oldest first, those of the first topic first:
    /// for a consumer that runs several at once. Each has its own reservation, to ack (see
    /// [`ack_many`](Client::ack_many)), touch or nack on its own. Waits up to `timeout` for the
    /// first; empty when none came.
    pub async fn reserve_many(
        &self,
        topics: &[impl AsRef<[u8]>],
        ttr: Duration,
        most: usize,
        timeout: Duration,
    ) -> Result<Vec<Job>> {
        self.reserve_up_to(topics, ttr, most, timeout, std::future::pending())
            .await
    }

    /// Reserves up to `most` jobs, waiting up to `timeout` for the first, or until `give_up`.
    pub(crate) async fn reserve_up_to(
        &self,
        topics: &[impl AsRef<[u8]>],
        ttr: Duration,
        most: usize,
        timeout: Duration,
        give_up: impl Future<Output = ()>,
    ) -> Result<Vec<Job>> {
        let topics: Vec<&[u8]> = topics.iter().map(AsRef::as_ref).collect();
        for topic in &topics {
            check_topic_in(self.layout(), topic)?;
        }
        if most == 0 {
            return Ok(Vec::new());
        }
        let ttr = self.checked_ttr(ttr)?;
        let most = most.min(MAX_BATCH);
        // A first look without the watch of the ready lists, whose reports cost Redis and this
        // client a message for each job taken while it runs: a busy consumer (or one that only
        // looks) never needs it, and one that stays busy stops it.
        let jobs = self.reserve_once(&topics, ttr, most).await?;
        if !jobs.is_empty() {
            self.inner.ready_lists.release_unused(WATCH_UNUSED);
        }
        if !jobs.is_empty() || timeout.is_zero() {
            return Ok(jobs);
        }
        tokio::pin!(give_up);
        let until = Instant::now() + timeout;
        loop {
            let poll = match self.inner.ready_lists.ensure().await {
                Ensured::Watching => POLL_WITH_WATCH,
                Ensured::Unsupported(refusal) => {
                    if let Some(refusal) = refusal {
                        warn!(
                            "Redis cannot report writes to ready lists ({refusal}): blocking \
                             reserves look every {} ms",
                            POLL_WITHOUT_WATCH.as_millis()
                        );
                    }
                    POLL_WITHOUT_WATCH
                }
                Ensured::Failed(_) => POLL_WITHOUT_WATCH,
            };
            // Subscribed before looking: a job pushed meanwhile wakes us.
            let mut written = self.inner.ready_lists.subscribe();
            let jobs = self.reserve_once(&topics, ttr, most).await?;
            let now = Instant::now();
            if !jobs.is_empty() || now >= until {
                return Ok(jobs);
            }
            tokio::select! {
                // A consumer that gives up (stops) reserves nothing more, even with a push seen.
                biased;
                () = &mut give_up => return Ok(Vec::new()),
                _ = written.changed() => {}
                () = tokio::time::sleep((until - now).min(poll)) => {}
            }
        }
    }

    /// One look for up to `most` jobs to reserve for `ttr`: one script call for all `topics`, or
    /// in the cluster layout (where they are in different slots) one per topic, in order, until
    /// it has `most`.
    async fn reserve_once(&self, topics: &[&[u8]], ttr: Duration, most: usize) -> Result<Vec<Job>> {
        let mut connection = self.connection().await?;
        let (mut jobs, mut failed) = (Vec::new(), None);
        for (keys, group) in self.keys().shards(topics) {
            let wanted = most.saturating_sub(jobs.len());
            let more = self
                .reserve_call(&mut connection, &keys, group, ttr, wanted)
                .await;
            // A topic that fails keeps neither the jobs reserved from the topics before it (they
            // are returned, not left held by nobody) nor the topics after it from being served:
            // its error comes when the look found nothing, as one call for all topics does.
            match more {
                Ok(more) => jobs.extend(more),
                Err(error) => {
                    failed.get_or_insert(error);
                }
            }
            if jobs.len() >= most {
                break;
            }
        }
        match failed {
            Some(error) if jobs.is_empty() => Err(error),
            Some(error) => {
                warn!("cannot reserve from every topic: {error}");
                Ok(jobs)
            }
            None => Ok(jobs),
        }
    }

    /// One reserve call for `topics` (all in one slot): up to `most` jobs for `ttr`. When it
    /// fails, its reply may be lost while the call ran (it timed out, the connection broke, or a
    /// cluster connection sent it again and that failed): what it reserved is looked for, and
    /// returned while at least half its time to run is left. With less, a consumer that touches
    /// every half ttr (as the Worker does) could lose a job to another meanwhile: such jobs are
    /// left to lapse and be delivered again. (An error Redis answered about the keys or
    /// permissions is the script's own: nothing to look for.)
    async fn reserve_call(
        &self,
        connection: &mut Commands,
        keys: &Keys,
        topics: &[&[u8]],
        ttr: Duration,
        most: usize,
    ) -> Result<Vec<Job>> {
        let (token, started) = (self.reserve_token(), Instant::now());
        let reserve = &self.inner.scripts.reserve;
        let call = (ttr, token.as_str());
        let most_body = self.inner.settings.max_body_read;
        let error = match reserve
            .run(connection, keys, call, most, most_body, topics)
            .await
        {
            Ok(reserved) => return self.give_back_too_large(reserved, &token).await,
            Err(error) => error,
        };
        if unanswered(&error)
            && started.elapsed() < ttr / 2
            && let Some(found) = self
                .find_reserved(keys, (ttr, &token, started), topics, most)
                .await
            && started.elapsed() < ttr / 2
        {
            return self.give_back_too_large(found, &token).await;
        }
        Err(Error::about_key(error, keys.reserved()))
    }

    /// The jobs the reserve call of `token` took (`reserved`), once those whose body is over
    /// [`Settings::max_body_read`](crate::Settings::max_body_read) are given back (untried, due
    /// again at once): an error naming one of those when they were all it took.
    async fn give_back_too_large(&self, reserved: Reserved, token: &str) -> Result<Vec<Job>> {
        let mut refused = None;
        for (job, size) in reserved.too_large {
            let job = Job::reserved(job, token);
            let limit = self.inner.settings.max_body_read.unwrap_or_default();
            if let Err(error) = self.give_back(&job).await {
                warn!(
                    "job {} has a body of {size} bytes, over the {limit} read here, and cannot \
                     be given back ({error}): it is delivered again once its time to run ends",
                    job.id
                );
            }
            refused.get_or_insert(Error::BodyTooLargeToRead {
                id: job.id,
                size,
                limit,
            });
        }
        let jobs = reserved.jobs.into_iter();
        let jobs: Vec<Job> = jobs.map(|job| Job::reserved(job, token)).collect();
        match refused {
            Some(error) if jobs.is_empty() => Err(error),
            Some(error) => {
                warn!("{error}: given back");
                Ok(jobs)
            }
            None => Ok(jobs),
        }
    }

    /// What a reserve `call` (time to run, token, when sent) that failed had reserved all the
    /// same, at most `most` jobs; `None` when it reserved nothing, or that cannot be known. Best
    /// effort: a call still waiting in Redis (behind a slow command) may run after this look, and
    /// a call a cluster connection sent again with success had run once before; the jobs of
    /// those are delivered again once their deadline passes, as they were before this look
    /// existed.
    async fn find_reserved(
        &self,
        keys: &Keys,
        call: (Duration, &str, Instant),
        topics: &[&[u8]],
        most: usize,
    ) -> Option<Reserved> {
        let found = match self.connection().await {
            Ok(mut connection) => {
                let (scripts, most_body) = (&self.inner.scripts, self.inner.settings.max_body_read);
                let find = &scripts.find_reserved;
                find.run(&mut connection, keys, call, most_body).await
            }
            Err(error) => Err(error),
        };
        let mut found = match found {
            Ok(found) if !(found.jobs.is_empty() && found.too_large.is_empty()) => found,
            Ok(_) => return None,
            Err(error) => {
                warn!(
                    "a reserve failed, and what it reserved cannot be looked for ({error}): jobs \
                     it may have reserved are delivered again once their time to run ends"
                );
                return None;
            }
        };
        // The topic is the bucket's: a job whose list was another's (an id pushed again to
        // another topic) is left to lapse rather than given to a consumer of other topics. More
        // than asked for: a cluster connection ran the call twice. The rest are delivered again
        // once their time to run ends.
        found
            .jobs
            .retain(|job| topics.contains(&job.topic.as_bytes()));
        found.jobs.truncate(most);
        found
            .too_large
            .retain(|(job, _)| topics.contains(&job.topic.as_bytes()));
        if found.jobs.is_empty() && found.too_large.is_empty() {
            return None;
        }
        warn!(
            jobs = found.jobs.len() + found.too_large.len(),
            "a reserve's reply was lost, but what it reserved was found"
        );
        Some(found)
    }
}
