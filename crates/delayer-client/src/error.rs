//! What can go wrong, in words that name the job, key or value at fault.

use std::time::SystemTime;

use redis::RedisError;

use crate::name::{JobId, Topic};

/// The errors of [`Client`](crate::Client) and [`Worker`](crate::Worker).
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error("the topic is empty")]
    EmptyTopic,
    #[error("the topic {0:?} {1}")]
    TopicRefused(Topic, &'static str),
    #[error(
        "job {id:?} is in several topics ({}): in the cluster layout ids are per topic; name \
         the topic",
        topics.iter().map(Topic::to_string).collect::<Vec<_>>().join(", ")
    )]
    AmbiguousId { id: JobId, topics: Vec<Topic> },
    #[error("the id is empty")]
    EmptyId,
    #[error(
        "the body is empty (the legacy clients take a job with an empty body for an expired one)"
    )]
    EmptyBody,
    #[error("the body is {size} bytes, over the limit of {limit} bytes")]
    BodyTooLarge { size: usize, limit: usize },
    /// A job read with [`Settings::max_body_read`](crate::Settings::max_body_read) set has a
    /// longer body: it was left where it was (see there).
    #[error("job {id:?} has a body of {size} bytes, over the {limit} bytes read here")]
    BodyTooLargeToRead {
        id: JobId,
        size: usize,
        limit: usize,
    },
    #[error("the due time {} is in the past", crate::time::to_unix(*.0))]
    InThePast(SystemTime),
    #[error(
        "the delay of {0} s is too long: at most {max} s (about 68 years)",
        max = crate::settings::MAX_DELAY.as_secs()
    )]
    TooFar(f64),
    #[error(
        "a time to run of {} s is over the longest allowed, {} s",
        ttr.as_secs_f64(),
        max.as_secs_f64()
    )]
    TtrTooLong {
        ttr: std::time::Duration,
        max: std::time::Duration,
    },
    #[error("job {0:?} is in the batch more than once")]
    DuplicateId(JobId),
    /// A job of a [`push_many`](crate::Client::push_many) batch is refused (`index` counts from
    /// 0): none of the batch was written.
    #[error("job {index} of the batch: {error}")]
    InBatch { index: usize, error: Box<Error> },
    /// A [`push_many`](crate::Client::push_many) call failed after earlier calls of the batch
    /// were written: `pushed` names those jobs (each by its index in the batch, from 0, and its
    /// id), so that a retry can leave them out; the other jobs were not written.
    #[error(
        "{} of the batch's jobs were pushed before this, the others not: {error}",
        pushed.len()
    )]
    PartlyPushed {
        pushed: Vec<(usize, JobId)>,
        error: Box<Error>,
    },
    #[error("no job {0:?}")]
    UnknownJob(JobId),
    #[error(
        "job {0:?} is not reserved: its time to run passed and it was delivered again, or it was \
         never reserved"
    )]
    NotReserved(JobId),
    #[error(
        "job {0:?} was pushed again or requeued since its first reservation, so its attempts \
         count from 1 again and an attempt alone names more than one reservation: name it with \
         the token its reserve gave too"
    )]
    TokenNeeded(JobId),
    #[error("job {id:?} is not on the dead list of topic {topic:?}")]
    NotDead { id: JobId, topic: Topic },
    #[error("job {0:?} expired or is incomplete: its bucket has no topic or no body")]
    Incomplete(JobId),
    #[error("{key} holds the wrong type of value for delayer ({detail})")]
    WrongType { key: String, detail: String },
    #[error("Redis: {0}")]
    Redis(#[from] RedisError),
}

impl Error {
    /// A WRONGTYPE reply from Redis about `key` becomes [`Error::WrongType`]; anything else is a
    /// Redis error. A script's own check names the key it found (`KEY holds a string, not a
    /// list`): that key is the one at fault. (Keys are bytes: one that is not UTF-8 is named
    /// with U+FFFD in the message, as Redis's own reply names it.)
    pub(crate) fn about_key(error: RedisError, key: impl AsRef<[u8]>) -> Error {
        if error.code() == Some("WRONGTYPE") {
            let detail = error.detail().unwrap_or("WRONGTYPE");
            // Redis appends where in a script an error was raised: not the user's business.
            let detail = match detail.rsplit_once(" script: ") {
                Some((said, place)) if place.contains(", on @user_script:") => said,
                _ => detail,
            };
            let key = match detail.rsplit_once(" holds a ") {
                Some((named, _)) => named.to_string(),
                None => String::from_utf8_lossy(key.as_ref()).into_owned(),
            };
            Error::WrongType {
                key,
                detail: detail.to_string(),
            }
        } else {
            Error::Redis(error)
        }
    }
}

/// Whether a call that failed with `error` got no answer from Redis itself: a connection that
/// broke or was refused, a timeout, a reply that could not be read, or a cluster redirection (a
/// cluster connection sends a call again after such a failure, so an earlier try may have run).
/// Such a call may have run, or not; an error Redis answered means it did not.
pub fn unanswered(error: &RedisError) -> bool {
    error.code().is_none() || error.is_cluster_error()
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
