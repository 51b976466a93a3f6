//! The console's own state: the session keys, the login tries, the rates and when it started.

use tokio::time::Instant;

use super::login_tries::LoginTries;
use super::rates::Rates;
use super::session::Guard;

/// The console's own state.
pub struct Console {
    pub(super) guard: Guard,
    pub(super) login_tries: LoginTries,
    pub(super) rates: Rates,
    pub(super) started: Instant,
}

impl Console {
    pub fn new(token: Option<&str>) -> Console {
        let started = Instant::now();
        Console {
            guard: Guard::new(token),
            login_tries: LoginTries::new(started),
            rates: Rates::new(started),
            started,
        }
    }
}
