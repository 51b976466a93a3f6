//! The heartbeats of HTTP consumers: a reserve that names its caller (`"consumer": "NAME"`)
//! registers it as consumer `http:NAME`, as a Worker registers itself, so that the console lists
//! it and names it as the holder of what it reserved. The daemon cannot see such a caller
//! between its calls: each call beats for it, alive for the call's wait and a Worker's lifetime
//! after, and the console marks it gone when it stops calling.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayer_client::consumer::{BEAT, LIFETIME};
use delayer_client::{Client, Heartbeat, Topic};
use tokio::time::Instant;
use tracing::{info, warn};

/// Callers remembered at most; past that, those whose beats have lapsed are forgotten.
const MOST_REMEMBERED: usize = 10_000;

/// The HTTP consumers this daemon beat for lately.
#[derive(Default)]
pub(in crate::http) struct HttpConsumers {
    /// Consumer id → until when its last beat keeps it alive.
    alive_until: Mutex<HashMap<String, Instant>>,
    /// Whether the last beat failed: a failure is said once, and its end once.
    failing: Arc<AtomicBool>,
}

impl HttpConsumers {
    /// Beats for consumer `id` (a caller at `peer`, reserving from `topics` and waiting up to
    /// `wait`) in a task of its own, so the reserve waits for nothing: at most once a beat
    /// interval, unless the call waits longer than the last beat keeps the caller alive.
    pub(in crate::http) fn beat(
        &self,
        client: &Client,
        id: &str,
        peer: SocketAddr,
        topics: &[Vec<u8>],
        wait: Duration,
    ) {
        let lifetime = LIFETIME + wait;
        if !self.due(id, Instant::now() + lifetime) {
            return;
        }
        let beat = Heartbeat {
            id: id.to_string(),
            host: peer.ip().to_string(),
            pid: None,
            topics: topics.iter().cloned().map(Topic::from).collect(),
            concurrency: None,
            held: None,
            lifetime,
        };
        let (client, failing) = (client.clone(), self.failing.clone());
        tokio::spawn(async move {
            match client.beat(&beat).await {
                Ok(()) => {
                    if failing.swap(false, Ordering::Relaxed) {
                        info!(
                            consumer = beat.id,
                            "HTTP consumers' heartbeats written again"
                        );
                    }
                }
                Err(error) => {
                    if !failing.swap(true, Ordering::Relaxed) {
                        warn!(
                            consumer = beat.id,
                            "cannot write an HTTP consumer's heartbeat ({error}): its reserves \
                             go on, but the console may not list it"
                        );
                    }
                }
            }
        });
    }

    /// Whether a beat keeping `id` alive until `until` is due: the last one keeps it alive less
    /// than a beat interval short of that (or there was none). Notes it as made when due.
    fn due(&self, id: &str, until: Instant) -> bool {
        let mut alive = self.alive_until.lock().expect("not poisoned");
        if alive.get(id).is_some_and(|last| *last + BEAT >= until) {
            return false;
        }
        if alive.len() >= MOST_REMEMBERED {
            let now = Instant::now();
            alive.retain(|_, last| *last > now);
        }
        alive.insert(id.to_string(), until);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_beats_once_a_beat_unless_its_call_waits_longer() {
        let consumers = HttpConsumers::default();
        let now = Instant::now();
        assert!(consumers.due("a", now + LIFETIME), "the first call");
        assert!(
            !consumers.due("a", now + LIFETIME + BEAT / 2),
            "half a beat later"
        );
        assert!(consumers.due("b", now + LIFETIME), "another caller");
        assert!(
            consumers.due("a", now + LIFETIME + Duration::from_secs(30)),
            "a call that waits 30 s outlives the last beat"
        );
        assert!(consumers.due("a", now + LIFETIME * 4), "a beat later");
    }
}
