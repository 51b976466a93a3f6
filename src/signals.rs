//! SIGTERM, SIGINT, SIGQUIT and SIGHUP → a graceful stop (as in the original, all four stop it).

use anyhow::{Context, Result};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tracing::info;

/// A token cancelled on the first stop signal. Call from inside the runtime.
pub fn stop_token() -> Result<CancellationToken> {
    let mut terminate = listen(SignalKind::terminate(), "SIGTERM")?;
    let mut interrupt = listen(SignalKind::interrupt(), "SIGINT")?;
    let mut quit = listen(SignalKind::quit(), "SIGQUIT")?;
    let mut hangup = listen(SignalKind::hangup(), "SIGHUP")?;
    let token = CancellationToken::new();
    let stop = token.clone();
    tokio::spawn(async move {
        let received = tokio::select! {
            _ = terminate.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
            _ = quit.recv() => "SIGQUIT",
            _ = hangup.recv() => "SIGHUP",
        };
        info!("Stopping ({received} received)");
        stop.cancel();
    });
    Ok(token)
}

fn listen(kind: SignalKind, name: &str) -> Result<Signal> {
    signal(kind).with_context(|| format!("cannot handle {name}"))
}
