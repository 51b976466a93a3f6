//! Waiting for a condition by polling it, never by sleeping a guessed time.

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `poll` every few milliseconds until it returns something; panics naming `what` after
/// `timeout`.
pub async fn wait_for<T, F, Fut>(timeout: Duration, what: &str, mut poll: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = poll().await {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Like [`wait_for`], for a condition checked outside a runtime.
pub fn wait_until_sync(timeout: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting until {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
