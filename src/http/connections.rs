//! How many connections the server holds at once, sized from the open-file limit, and the quick
//! refusal of those beyond it: a short 503 and the connection closed, so that a client (a health
//! probe) is told at once instead of waiting in the listen backlog for a place to free up.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Descriptors kept for everything but the connections: the mover's Redis pool (`[redis]
/// max_active`, 20 unless set), the logs, the pid file, the listener, the refusals under way.
const RESERVED_FILES: u64 = 256;
/// The fewest connections held, however low the limit.
const FEWEST: usize = 16;
/// The most connections held, however high the limit: an idle one costs about 10 KiB (10,000 of
/// them took 105 MB), so this many cost about 350 MB at worst.
const MOST: usize = 32_768;
/// Refusals that wait for the rest of a request at once; beyond them, a refused connection is
/// closed as soon as it is answered.
const REFUSING_AT_ONCE: usize = 64;
/// The longest a refusal waits for the rest of the client's request (see [`Limit::refuse`]):
/// long enough for one sent with the connection, short enough that idle connections do not hold
/// many descriptors.
const REFUSAL_TIME: Duration = Duration::from_millis(250);

/// The connections to hold at once with `open_files` descriptors: half of what the reserve
/// leaves, since each may hold a Redis connection of its own too (a waiting pop or reserve does).
pub fn most(open_files: u64) -> usize {
    let spare = open_files.saturating_sub(RESERVED_FILES) / 2;
    usize::try_from(spare)
        .unwrap_or(usize::MAX)
        .clamp(FEWEST, MOST)
}

/// The places for connections, and the refusal of those beyond them.
pub struct Limit {
    open: Arc<Semaphore>,
    refusing: Arc<Semaphore>,
    /// The whole answer to a connection beyond the limit.
    refusal: Arc<[u8]>,
}

impl Limit {
    /// Places for `most` connections.
    pub fn new(most: usize) -> Limit {
        let body = format!(
            "{{\"code\":503,\"message\":\"the server is at its limit of {most} connections at \
             once: try again in a moment\",\"data\":null}}"
        );
        let refusal = format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        Limit {
            open: Arc::new(Semaphore::new(most)),
            refusing: Arc::new(Semaphore::new(REFUSING_AT_ONCE)),
            refusal: refusal.into_bytes().into(),
        }
    }

    /// A place for one more connection, held until dropped; `None` when every place is taken.
    pub fn admit(&self) -> Option<OwnedSemaphorePermit> {
        self.open.clone().try_acquire_owned().ok()
    }

    /// Answers 503 on `stream`, a connection beyond the limit, and closes it: at once, or after a
    /// moment for the request to come in a task of its own while few refusals are under way.
    pub fn refuse(&self, mut stream: TcpStream) {
        // What takes no wait: the answer, and the request as far as it came (closing with a
        // request unread would reset the connection, and the client could lose the answer).
        let _ = stream.try_write(&self.refusal);
        let mut unread = [0; 1024];
        while stream.try_read(&mut unread).is_ok_and(|read| read > 0) {}
        let Ok(refusing) = self.refusing.clone().try_acquire_owned() else {
            return;
        };
        tokio::spawn(async move {
            let _ = tokio::time::timeout(REFUSAL_TIME, async {
                stream.shutdown().await?;
                while stream.read(&mut unread).await? > 0 {}
                std::io::Result::Ok(())
            })
            .await;
            drop(refusing);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::most;

    #[test]
    fn connections_take_half_of_the_descriptors_left_within_bounds() {
        assert_eq!(most(1024), 384);
        assert_eq!(most(65_536), 32_640);
        assert_eq!(most(400), 72);
        assert_eq!(most(100), 16, "however low the limit");
        assert_eq!(most(1 << 20), 32_768, "however high");
    }
}
