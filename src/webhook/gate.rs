//! A webhook's flow control over every daemon (`parallelism`, `rate`): a request starts once the
//! gate script granted it a lease in Redis, and at the time the script gave it. The requests that
//! wait at once are asked for in one call, and the leases given back go with the next call, so
//! the gate costs one round trip for many requests.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayer_wire::scripts::webhook_gate::{AHEAD, Limits, WebhookGateScript};
use delayer_wire::shared_connection::SharedConnection;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::service::duty::{Trouble, sleep_or_stop};

/// How often the gate asks again while requests wait for a lease that another daemon holds.
const ASK_AGAIN: Duration = Duration::from_millis(20);
/// After a lease comes back, how long the gate gathers more before it asks: one call for many.
const GATHER_WAIT: Duration = Duration::from_millis(1);

/// Where requests wait for their lease.
pub struct Gate {
    asks: mpsc::UnboundedSender<oneshot::Sender<Lease>>,
    given_back: mpsc::UnboundedSender<String>,
    /// The limits the next asks go by (a QStash flow-control key takes its newest message's).
    limits: Arc<Mutex<Limits>>,
}

/// A lease granted: its name, and when its request may start.
type Lease = (String, Instant);

/// The right to have one request in flight: given back when dropped.
pub struct Pass {
    lease: String,
    given_back: mpsc::UnboundedSender<String>,
}

impl Drop for Pass {
    fn drop(&mut self) {
        // After the gate's end, the lease ends by itself.
        let _ = self.given_back.send(std::mem::take(&mut self.lease));
    }
}

impl Gate {
    /// Goes by `limits` from the next ask on.
    pub fn update(&self, limits: Limits) {
        *self.limits.lock().expect("not poisoned") = limits;
    }

    /// Waits for a lease, and then for its start time: the pass, or `None` at `stop`.
    pub async fn enter(&self, stop: &CancellationToken) -> Option<Pass> {
        let (reply, granted) = oneshot::channel();
        self.asks.send(reply).ok()?;
        let (lease, at) = tokio::select! {
            granted = granted => granted.ok()?,
            () = stop.cancelled() => return None,
        };
        let pass = Pass {
            lease,
            given_back: self.given_back.clone(),
        };
        tokio::select! {
            () = tokio::time::sleep_until(at) => Some(pass),
            () = stop.cancelled() => None,
        }
    }
}

/// The gate of webhook `name`, and the loop that serves it until `end` (then it gives back the
/// leases of the requests that ended).
pub fn new(
    name: &str,
    limits: Limits,
    redis: Arc<SharedConnection>,
    end: CancellationToken,
) -> (Gate, impl Future<Output = ()> + use<>) {
    let (asks, mut asked) = mpsc::unbounded_channel::<oneshot::Sender<Lease>>();
    let (given_back, mut returned) = mpsc::unbounded_channel();
    let name = name.to_string();
    let shared = Arc::new(Mutex::new(limits));
    let current = shared.clone();
    let serving = async move {
        let script = WebhookGateScript::default();
        // Lease names: this process's own, numbered.
        let prefix = format!("{}:{}", std::process::id(), delayer_wire::time::unix_now());
        let mut numbered = 0u64;
        let mut waiting: VecDeque<oneshot::Sender<Lease>> = VecDeque::new();
        let mut done: Vec<String> = Vec::new();
        let mut trouble = Trouble::default();
        loop {
            if waiting.is_empty() && done.is_empty() {
                tokio::select! {
                    Some(ask) = asked.recv() => waiting.push_back(ask),
                    Some(lease) = returned.recv() => done.push(lease),
                    () = end.cancelled() => break,
                }
            }
            while let Ok(ask) = asked.try_recv() {
                waiting.push_back(ask);
            }
            while let Ok(lease) = returned.try_recv() {
                done.push(lease);
            }
            waiting.retain(|ask| !ask.is_closed());
            let wanted: Vec<String> = waiting
                .iter()
                .map(|_| {
                    numbered += 1;
                    format!("{prefix}:{numbered}")
                })
                .collect();
            let limits = *current.lock().expect("not poisoned");
            let asked_at = Instant::now();
            let reply = match redis.get().await {
                Ok(mut connection) => {
                    script
                        .ask(&mut connection, &name, &limits, &wanted, &done)
                        .await
                }
                Err(error) => Err(error),
            };
            let (granted, first) = match reply {
                Ok(reply) => {
                    if trouble.worked() {
                        info!("webhook {name}: its flow control in Redis works again");
                    }
                    done.clear();
                    reply
                }
                Err(error) => {
                    if trouble.failed() {
                        warn!(
                            "webhook {name}: cannot ask Redis for leave to send ({error}): \
                             requests wait"
                        );
                    }
                    sleep_or_stop(Duration::from_secs(1), &end).await;
                    if end.is_cancelled() {
                        break;
                    }
                    continue;
                }
            };
            let spacing = limits.spacing.unwrap_or_default();
            for (i, lease) in wanted.into_iter().take(granted).enumerate() {
                let at = asked_at + first + spacing * i as u32;
                let ask = waiting.pop_front().expect("one a lease");
                if let Err((lease, _)) = ask.send((lease, at)) {
                    done.push(lease);
                }
            }
            if !waiting.is_empty() {
                // Full: a lease given back here, or another daemon's after a while.
                let wait = if granted == 0 && limits.spacing.is_some() {
                    AHEAD / 2
                } else {
                    ASK_AGAIN
                };
                tokio::select! {
                    Some(lease) = returned.recv() => {
                        done.push(lease);
                        tokio::time::sleep(GATHER_WAIT).await;
                    }
                    () = tokio::time::sleep(wait) => {}
                    () = end.cancelled() => break,
                }
            }
        }
        // The requests have ended: their leases go back at once, not when they would end.
        while let Ok(lease) = returned.try_recv() {
            done.push(lease);
        }
        if !done.is_empty()
            && let Ok(mut connection) = redis.get().await
        {
            let limits = *current.lock().expect("not poisoned");
            let _ = script
                .ask(&mut connection, &name, &limits, &[], &done)
                .await;
        }
    };
    let gate = Gate {
        asks,
        given_back,
        limits: shared,
    };
    (gate, serving)
}
