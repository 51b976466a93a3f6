//! What a client may be told besides where Redis is, and the limits every push and reserve keeps.

use std::time::Duration;

use delayer_wire::keys::Layout;
use delayer_wire::push::Limits;

/// The largest body a push takes unless told otherwise.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1 << 20;
/// How long a job's data outlives its due time, as the legacy clients' default `ready_max_lifetime`.
pub const DEFAULT_READY_MAX_LIFETIME: Duration = Duration::from_secs(604_800);
/// How many times a job is reserved before a failure sends it to its topic's dead list.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 25;
pub use delayer_wire::push::MAX_DELAY;
pub use delayer_wire::scripts::reserve::MIN_TTR;
/// The longest time to run a reservation may have unless told otherwise: a consumer that dies
/// holding a job keeps it from everyone this long at most. A job that runs longer is touched.
pub const DEFAULT_MAX_TTR: Duration = Duration::from_secs(24 * 3600);
/// The most jobs one script call reserves or acks: it holds Redis up for about a millisecond.
pub const MAX_BATCH: usize = 100;
pub use delayer_wire::scripts::push::MAX_PUSH_BATCH;

/// What a client may be told besides where Redis is.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The largest body a push takes.
    pub max_body_bytes: usize,
    /// How long a job's data outlives its due time (the legacy clients' `ready_max_lifetime`).
    pub ready_max_lifetime: Duration,
    /// A nacked job that was reserved this many times goes to its topic's dead list. The daemon
    /// has its own setting for jobs whose reservation lapsed: keep the two the same.
    pub max_attempts: u32,
    /// The longest time to run a reserve or touch takes ([`Error::TtrTooLong`] beyond it).
    ///
    /// [`Error::TtrTooLong`]: crate::Error::TtrTooLong
    pub max_ttr: Duration,
    /// The key names of the jobs: the same as the daemon's. A cluster has the cluster layout,
    /// whatever this says.
    pub layout: Layout,
    /// The longest body this client reads from Redis (`None`, the default: any), for a server
    /// that answers for jobs others wrote. A job with a longer body is left where it was:
    /// [`get`](crate::Client::get) answers it without its body; a pop puts it back at the end of
    /// its ready list, and a reserve gives it back untried (due again at once, its attempt not
    /// counted), each with [`Error::BodyTooLargeToRead`](crate::Error::BodyTooLargeToRead).
    pub max_body_read: Option<usize>,
    /// Whether this client adds its pushes and acks to the history the console draws (on by
    /// default). The daemon's shell commands turn it off for a `delayer.conf` without `[http]`,
    /// so that a drop-in install writes no history key.
    pub count_history: bool,
    /// Jobs pushed to fall due at least this long after their push wait in the compact layout
    /// (a third of the memory; see `docs/compact.md`) while a daemon that stages them runs;
    /// `None`: every job in the legacy form. Default [`DEFAULT_COMPACT_AFTER`] (124 s). Keep it at
    /// 70 s or more: a daemon stages a minute ahead, looking every second on one Redis and every
    /// 10 s at an idle topic of the cluster layout, so a shorter delay can be staged late.
    pub compact_after: Option<Duration>,
}

/// The shortest delay of a job that waits compact, by default (see [`Settings::compact_after`]).
pub const DEFAULT_COMPACT_AFTER: Duration = delayer_wire::compact::DEFAULT_AFTER;

/// What a push may take, as these settings say: the same checks for the client's pushes and the
/// daemon's.
impl From<&Settings> for Limits {
    fn from(settings: &Settings) -> Limits {
        Limits {
            max_body_bytes: settings.max_body_bytes,
            ready_max_lifetime: settings.ready_max_lifetime,
            compact_after: settings.compact_after,
        }
    }
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            ready_max_lifetime: DEFAULT_READY_MAX_LIFETIME,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            max_ttr: DEFAULT_MAX_TTR,
            layout: Layout::default(),
            max_body_read: None,
            count_history: true,
            compact_after: Some(DEFAULT_COMPACT_AFTER),
        }
    }
}
