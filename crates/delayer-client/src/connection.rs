//! How every connection of ours (the daemon's and the client's) talks to Redis: its timeouts.

use std::time::Duration;

use redis::AsyncConnectionConfig;

/// How long connecting may take before it counts as a failure.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a reply may take. Far above the longest script call (a full batch of the largest
/// size takes tens of ms), so that a slow Redis (forking for a save, say) is not taken for a lost
/// one; and it bounds how long a stop waits for a hung Redis.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// The timeouts every connection uses, except those that block on purpose.
pub fn config() -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
}
