//! Jobs as clients see them.

use std::time::SystemTime;

use delayer_wire::name::{JobId, Topic};
use delayer_wire::scripts::reserve::ReservedJob;

/// A job a consumer received.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Its id, the bytes its pusher chose (or made).
    pub id: JobId,
    /// The topic it was pushed to.
    pub topic: Topic,
    /// What its pusher wrote.
    pub body: Vec<u8>,
    /// How many times it was reserved, this time included (0 for a job popped the legacy way).
    pub attempts: u32,
    /// When it fell due; `None` for a job pushed by a legacy client, which does not record it.
    pub due: Option<SystemTime>,
    /// The token of the reserve call that took it: with the id and attempt, it names this
    /// reservation (see [`Receipt`]). `None` for a job popped the legacy way.
    pub token: Option<String>,
}

impl Job {
    /// A job a reserve call of `token` took.
    pub(crate) fn reserved(job: ReservedJob, token: &str) -> Job {
        Job {
            id: job.id,
            topic: job.topic,
            body: job.body,
            attempts: job.attempt,
            due: job.due,
            token: Some(token.to_string()),
        }
    }

    /// The body as text, when it is UTF-8 (every body a legacy client pushed is).
    pub fn body_text(&self) -> Result<&str, std::str::Utf8Error> {
        std::str::from_utf8(&self.body)
    }
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// In the pool, not due yet (or due, and about to be moved).
    Waiting,
    /// Due, on its topic's ready list, waiting for a consumer.
    Ready,
    /// Taken by a consumer that has not acked it yet.
    Reserved,
    /// Reserved `max_attempts` times without an ack, or refused by Kafka: on its topic's dead
    /// list.
    Dead,
    /// Delivered to Kafka by its id: finished, its data kept a while for consumers to read.
    Delivered,
    /// No such job: never pushed, finished, removed, or expired.
    Unknown,
}

impl State {
    /// The lower-case name, as the CLI and HTTP API print it.
    pub fn name(self) -> &'static str {
        match self {
            State::Waiting => "waiting",
            State::Ready => "ready",
            State::Reserved => "reserved",
            State::Dead => "dead",
            State::Delivered => "delivered",
            State::Unknown => "unknown",
        }
    }
}

/// What [`Client::get`](crate::Client::get) tells about a job.
#[derive(Debug, Clone, PartialEq)]
pub struct JobInfo {
    /// The id looked up.
    pub id: JobId,
    /// Where the job is in its life.
    pub state: State,
    /// `None` when the job is unknown.
    pub topic: Option<Topic>,
    /// `None` when the job has none, or when it is longer than
    /// [`Settings::max_body_read`](crate::Settings::max_body_read) (or the limit of
    /// [`Inspector::get_up_to`](crate::Inspector::get_up_to)).
    pub body: Option<Vec<u8>>,
    /// The body's length in bytes, read or not.
    pub body_size: Option<usize>,
    /// When it falls or fell due: known while it waits, and for jobs our clients pushed.
    pub due: Option<SystemTime>,
    /// The delay it was pushed with: known for jobs our clients pushed.
    pub delay: Option<std::time::Duration>,
    /// How many times it was reserved.
    pub attempts: u32,
    /// While reserved: when its reservation ends unless it is acked, touched or nacked.
    pub deadline: Option<SystemTime>,
    /// While dead: why, when something said (Kafka's refusal); `None` for a job that ran out of
    /// attempts.
    pub died_why: Option<String>,
}

impl JobInfo {
    /// What is known of a job there is no trace of.
    pub fn unknown(id: impl Into<JobId>) -> JobInfo {
        JobInfo {
            id: id.into(),
            state: State::Unknown,
            topic: None,
            body: None,
            body_size: None,
            due: None,
            delay: None,
            attempts: 0,
            deadline: None,
            died_why: None,
        }
    }
}

/// One reservation of a job: its id, which attempt it is and the token of the reserve call that
/// made it, as [`reserve`] returned them. Ack, nack and touch name the reservation rather than the
/// job, so that a consumer whose time ran out cannot finish, give back or extend the job another
/// consumer holds now, even one pushed again with the same id, whose attempts count from 1 again.
///
/// [`reserve`]: crate::Client::reserve
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Receipt {
    /// The job's id.
    pub id: JobId,
    /// Which attempt the reservation is ([`Job::attempts`]).
    pub attempt: u32,
    /// The reserve call's token ([`Job::token`]). Without one, the attempt alone names the
    /// reservation, which works only while the job's attempts were never counted afresh (pushed
    /// again or requeued after a reservation): else [`Error::TokenNeeded`].
    ///
    /// [`Error::TokenNeeded`]: crate::Error::TokenNeeded
    pub token: Option<String>,
    /// The job's topic, when known (as from a [`Job`]): in the cluster layout, where a job's
    /// keys depend on its topic, it spares a look through every topic for the id.
    pub topic: Option<Topic>,
}

impl From<&Job> for Receipt {
    fn from(job: &Job) -> Receipt {
        Receipt {
            id: job.id.clone(),
            attempt: job.attempts,
            token: job.token.clone(),
            topic: Some(job.topic.clone()),
        }
    }
}
