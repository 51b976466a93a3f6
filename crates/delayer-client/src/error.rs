//! What can go wrong, in words that name the job, key or value at fault.

use std::time::SystemTime;

use redis::RedisError;

use delayer_wire::name::{JobId, Topic};
use delayer_wire::push::{Failure, Refusal};
use delayer_wire::scripts::wrong_type;

/// The errors of [`Client`](crate::Client) and [`Worker`](crate::Worker).
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// A push, pop or reserve named an empty topic.
    #[error("the topic is empty")]
    EmptyTopic,
    /// The layout cannot hold this topic, for the reason given (see
    /// [`Layout::refusal`](crate::Layout::refusal)).
    #[error("the topic {0:?} {1}")]
    TopicRefused(Topic, &'static str),
    /// In the cluster layout, a job named without its topic is in several topics.
    #[error(
        "job {id:?} is in several topics ({}): in the cluster layout ids are per topic; name \
         the topic",
        topics.iter().map(Topic::to_string).collect::<Vec<_>>().join(", ")
    )]
    AmbiguousId {
        /// The id.
        id: JobId,
        /// The topics that hold a job of that id.
        topics: Vec<Topic>,
    },
    /// A push or a receipt named an empty id.
    #[error("the id is empty")]
    EmptyId,
    /// A schedule cannot be written: the schedule, the field at fault and why.
    #[error("{0}")]
    InvalidSchedule(#[from] delayer_wire::schedule::Invalid),
    /// There is no schedule of this name.
    #[error("there is no schedule {:?}", delayer_wire::schedule::shortened(.0))]
    UnknownSchedule(String),
    /// A push had an empty body, which the legacy clients take for an expired job.
    #[error(
        "the body is empty (the legacy clients take a job with an empty body for an expired one)"
    )]
    EmptyBody,
    /// A push's body is over [`Settings::max_body_bytes`](crate::Settings::max_body_bytes).
    #[error("the body is {size} bytes, over the limit of {limit} bytes")]
    BodyTooLarge {
        /// The body's length, in bytes.
        size: usize,
        /// The limit, in bytes.
        limit: usize,
    },
    /// A job read with [`Settings::max_body_read`](crate::Settings::max_body_read) set has a
    /// longer body: it was left where it was (see there).
    #[error("job {id:?} has a body of {size} bytes, over the {limit} bytes read here")]
    BodyTooLargeToRead {
        /// The job.
        id: JobId,
        /// The body's length, in bytes.
        size: usize,
        /// The limit, in bytes.
        limit: usize,
    },
    /// A push was given a due time in the past.
    #[error("the due time {} is in the past", delayer_wire::time::to_unix(*.0))]
    InThePast(SystemTime),
    /// A push's delay (or a nack's `retry_in`), in seconds, is over
    /// [`MAX_DELAY`](crate::MAX_DELAY).
    #[error(
        "the delay of {0} s is too long: at most {max} s (about 68 years)",
        max = crate::settings::MAX_DELAY.as_secs()
    )]
    TooFar(f64),
    /// A reserve's or touch's time to run is over
    /// [`Settings::max_ttr`](crate::Settings::max_ttr).
    #[error(
        "a time to run of {} s is over the longest allowed, {} s",
        ttr.as_secs_f64(),
        max.as_secs_f64()
    )]
    TtrTooLong {
        /// The time to run asked for.
        ttr: std::time::Duration,
        /// The longest allowed.
        max: std::time::Duration,
    },
    /// A [`push_many`](crate::Client::push_many) batch names this id twice.
    #[error("job {0:?} is in the batch more than once")]
    DuplicateId(JobId),
    /// A job of a [`push_many`](crate::Client::push_many) batch is refused (`index` counts from
    /// 0): none of the batch was written.
    #[error("job {index} of the batch: {error}")]
    InBatch {
        /// Which job of the batch, from 0.
        index: usize,
        /// Why it was refused.
        error: Box<Error>,
    },
    /// A [`push_many`](crate::Client::push_many) call failed after earlier calls of the batch
    /// were written: `pushed` names those jobs (each by its index in the batch, from 0, and its
    /// id), so that a retry can leave them out; the other jobs were not written.
    #[error(
        "{} of the batch's jobs were pushed before this, the others not: {error}",
        pushed.len()
    )]
    PartlyPushed {
        /// The jobs written: each one's index in the batch and id.
        pushed: Vec<(usize, JobId)>,
        /// Why the call after them failed.
        error: Box<Error>,
    },
    /// There is no such job.
    #[error("no job {0:?}")]
    UnknownJob(JobId),
    /// The reservation a receipt names is not current: it lapsed, or was never made.
    #[error(
        "job {0:?} is not reserved: its time to run passed and it was delivered again, or it was \
         never reserved"
    )]
    NotReserved(JobId),
    /// A receipt without a token cannot name one reservation: the job's attempts count from 1
    /// again since it was pushed again or requeued.
    #[error(
        "job {0:?} was pushed again or requeued since its first reservation, so its attempts \
         count from 1 again and an attempt alone names more than one reservation: name it with \
         the token its reserve gave too"
    )]
    TokenNeeded(JobId),
    /// The job is not on the topic's dead list.
    #[error("job {id:?} is not on the dead list of topic {topic:?}")]
    NotDead {
        /// The job.
        id: JobId,
        /// The topic whose dead list was looked at.
        topic: Topic,
    },
    /// The job is not waiting in the pool: it is ready, reserved or dead.
    #[error("job {0:?} is not waiting: it is ready, reserved or dead")]
    NotWaiting(JobId),
    /// In the cluster layout, where each topic has a pool of its own, the pool was asked for
    /// without a topic.
    #[error("in the cluster layout each topic has a pool of its own: name the topic")]
    TopicNeeded,
    /// A popped job's data is gone or incomplete: the legacy clients' "expired".
    #[error("job {0:?} expired or is incomplete: its bucket has no topic or no body")]
    Incomplete(JobId),
    /// A key holds another type of value than delayer writes there.
    #[error("{key} holds the wrong type of value for delayer ({detail})")]
    WrongType {
        /// The key.
        key: String,
        /// What Redis said.
        detail: String,
    },
    /// Any other failure of Redis, or of the connection to it.
    #[error("Redis: {0}")]
    Redis(#[from] RedisError),
}

impl Error {
    /// A WRONGTYPE reply from Redis about `key` becomes [`Error::WrongType`]; anything else is a
    /// Redis error. A script's own check names the key it found (`KEY holds a string, not a
    /// list`): that key is the one at fault. (Keys are bytes: one that is not UTF-8 is named
    /// with U+FFFD in the message, as Redis's own reply names it.)
    pub(crate) fn about_key(error: RedisError, key: impl AsRef<[u8]>) -> Error {
        match wrong_type(&error) {
            Some((detail, named)) => Error::WrongType {
                key: named.map_or_else(
                    || String::from_utf8_lossy(key.as_ref()).into_owned(),
                    str::to_string,
                ),
                detail: detail.to_string(),
            },
            None => Error::Redis(error),
        }
    }
}

impl From<Refusal> for Error {
    fn from(refusal: Refusal) -> Error {
        match refusal {
            Refusal::EmptyTopic => Error::EmptyTopic,
            Refusal::TopicRefused(topic, why) => Error::TopicRefused(topic, why),
            Refusal::EmptyBody => Error::EmptyBody,
            Refusal::BodyTooLarge { size, limit } => Error::BodyTooLarge { size, limit },
            Refusal::EmptyId => Error::EmptyId,
            Refusal::InThePast(time) => Error::InThePast(time),
            Refusal::TooFar(delay) => Error::TooFar(delay),
            Refusal::DuplicateId(id) => Error::DuplicateId(id),
        }
    }
}

/// A failed push in words: a job refused, or a bucket of the wrong type, is named by its index
/// in the batch ([`Error::InBatch`]); a call refused after others were written names those
/// ([`Error::PartlyPushed`]).
impl From<Failure> for Error {
    fn from(failure: Failure) -> Error {
        match failure {
            Failure::Refused { index, why } => Error::InBatch {
                index,
                error: Box::new(why.into()),
            },
            Failure::Call {
                pushed,
                index,
                key,
                error,
            } => {
                let mut error = Error::about_key(error, key);
                if let Some(index) = index {
                    let error_of_job = Box::new(error);
                    error = Error::InBatch {
                        index,
                        error: error_of_job,
                    };
                }
                if pushed.is_empty() {
                    return error;
                }
                Error::PartlyPushed {
                    pushed: pushed
                        .into_iter()
                        .map(|(index, id, _)| (index, id))
                        .collect(),
                    error: Box::new(error),
                }
            }
            Failure::Mark { key, error } => Error::about_key(error, key),
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
