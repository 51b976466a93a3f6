//! The console's own state: the session keys, the login tries, the rates, when it started, and
//! the overview's parts kept a moment.

use maud::Markup;
use tokio::time::Instant;

use super::kept::Kept;
use super::login_tries::LoginTries;
use super::rates::Rates;
use super::session::Guard;

/// The console's own state.
pub struct Console {
    pub(super) guard: Guard,
    pub(super) login_tries: LoginTries,
    pub(super) rates: Rates,
    pub(super) started: Instant,
    /// The overview's charts of the last hour, and of the last day.
    pub(super) charts: [Kept<Markup>; 2],
    /// The overview's consumers.
    pub(super) consumers: Kept<Markup>,
}

impl Console {
    pub fn new(token: Option<&str>) -> Console {
        let started = Instant::now();
        Console {
            guard: Guard::new(token),
            login_tries: LoginTries::new(started),
            rates: Rates::new(started),
            started,
            charts: Default::default(),
            consumers: Kept::default(),
        }
    }
}
