//! SIGTERM, SIGINT, SIGQUIT and SIGHUP → a graceful stop (as in the original, all four stop it);
//! a second one → stop at once, without waiting for HTTP requests still in flight.

use anyhow::{Context, Result};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tracing::info;

/// What the stop signals have asked for.
#[derive(Clone, Default)]
pub struct Stop {
    /// Cancelled on the first: finish what is in flight, start nothing new.
    pub graceful: CancellationToken,
    /// Cancelled on a second: stop waiting for what is in flight.
    pub at_once: CancellationToken,
}

impl Stop {
    /// Tokens cancelled by the stop signals. Call from inside the runtime.
    pub fn on_signals() -> Result<Stop> {
        let mut signals = Signals {
            terminate: listen(SignalKind::terminate(), "SIGTERM")?,
            interrupt: listen(SignalKind::interrupt(), "SIGINT")?,
            quit: listen(SignalKind::quit(), "SIGQUIT")?,
            hangup: listen(SignalKind::hangup(), "SIGHUP")?,
        };
        let stop = Stop::default();
        let asked = stop.clone();
        tokio::spawn(async move {
            let received = signals.next().await;
            info!("Stopping ({received} received)");
            asked.graceful.cancel();
            let received = signals.next().await;
            info!("Stopping at once ({received} received again)");
            asked.at_once.cancel();
        });
        Ok(stop)
    }
}

struct Signals {
    terminate: Signal,
    interrupt: Signal,
    quit: Signal,
    hangup: Signal,
}

impl Signals {
    /// The name of the next stop signal received.
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.interrupt.recv() => "SIGINT",
            _ = self.quit.recv() => "SIGQUIT",
            _ = self.hangup.recv() => "SIGHUP",
        }
    }
}

fn listen(kind: SignalKind, name: &str) -> Result<Signal> {
    signal(kind).with_context(|| format!("cannot handle {name}"))
}
