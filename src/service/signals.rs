//! SIGTERM, SIGINT, SIGQUIT and SIGHUP → a graceful stop (as in the original, all four stop it);
//! a second one → stop at once, without waiting for HTTP requests still in flight. Caught from the
//! first moment of a start ([`EarlySignals`]), before the runtime and its listeners exist.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result};
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
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

/// The stop signals that came before [`Stop::on_signals`] listened: caught (not left to their
/// default action, which would kill the process without its clean-up: pid file, stop line) and
/// told to it then.
pub struct EarlySignals(Arc<AtomicUsize>);

impl EarlySignals {
    /// Catches the stop signals from now on.
    pub fn catch() -> Result<EarlySignals> {
        let caught = Arc::new(AtomicUsize::new(0));
        for (number, name) in STOP_SIGNALS {
            signal_hook::flag::register_usize(number, caught.clone(), number as usize)
                .with_context(|| format!("cannot handle {name}"))?;
        }
        Ok(EarlySignals(caught))
    }

    /// The name of the stop signal caught so far, if any (the last one).
    fn caught(&self) -> Option<&'static str> {
        let number = self.0.load(Ordering::SeqCst);
        STOP_SIGNALS
            .iter()
            .find(|(signal, _)| *signal as usize == number)
            .map(|(_, name)| *name)
    }
}

const STOP_SIGNALS: [(i32, &str); 4] = [
    (SIGTERM, "SIGTERM"),
    (SIGINT, "SIGINT"),
    (SIGQUIT, "SIGQUIT"),
    (SIGHUP, "SIGHUP"),
];

impl Stop {
    /// Tokens cancelled by the stop signals, the first already when one came `early`. Call from
    /// inside the runtime.
    pub fn on_signals(early: Option<EarlySignals>) -> Result<Stop> {
        let mut signals = Signals {
            terminate: listen(SignalKind::terminate(), "SIGTERM")?,
            interrupt: listen(SignalKind::interrupt(), "SIGINT")?,
            quit: listen(SignalKind::quit(), "SIGQUIT")?,
            hangup: listen(SignalKind::hangup(), "SIGHUP")?,
        };
        let stop = Stop::default();
        let asked = stop.clone();
        let early = early.and_then(|early| early.caught());
        tokio::spawn(async move {
            let received = match early {
                Some(received) => received,
                None => signals.next().await,
            };
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
