//! The open-file limit: raised at start to the most the system allows, as daemons do, since each
//! HTTP connection and each Redis connection is a file descriptor.

use rlimit::Resource;
use tracing::warn;

/// The most asked for: Linux's default ceiling (`fs.nr_open`), for a hard limit of "unlimited",
/// which no soft limit may be.
const MOST: u64 = 1 << 20;

/// Raises the soft limit on open files to the hard one; says so in the log when it cannot. Called
/// before the service starts: the HTTP server sizes its connection limit from the result.
pub fn raise() {
    if let Err(error) = rlimit::increase_nofile_limit(MOST) {
        warn!(
            "Cannot raise the open-file limit ({error}); it stays at {}",
            limit()
        );
    }
}

/// The open-file limit in force (the soft one); 1024, the usual default, if it cannot be read.
pub fn limit() -> u64 {
    Resource::NOFILE.get_soft().unwrap_or(1024)
}
