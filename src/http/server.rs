//! Accepting connections: a bounded number at once, each closed when its request headers do not
//! come whole within a few seconds, and all of them given a few seconds to finish on a stop.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::warn;

use crate::service::Stop;

/// Connections served at once; more wait in the listen backlog. Each is a file descriptor, as are
/// the mover's connections to Redis, which must never run short.
const MAX_CONNECTIONS: usize = 1024;
/// How long a client may take to send a request's headers: a connection that sends nothing whole
/// is closed rather than held.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stop lets requests in flight finish: within the 10 s systemd gives a stop
/// (`TimeoutStopSec`), with room for the mover's last script call.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// The pause after a failed accept (out of file descriptors, say) before the next.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// Serves `router` on `listener` until a stop; then lets requests in flight finish, for up to
/// [`STOP_GRACE`] or until a second stop signal.
pub async fn serve(listener: TcpListener, router: Router, stop: &Stop) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    let open = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let graceful = GracefulShutdown::new();
    let mut failing = None;
    loop {
        let accepted = tokio::select! {
            accepted = async {
                let permit = open.clone().acquire_owned().await.expect("never closed");
                (listener.accept().await, permit)
            } => accepted,
            () = stop.graceful.cancelled() => break,
        };
        let (stream, permit) = match accepted {
            (Ok((stream, _)), permit) => (stream, permit),
            (Err(error), _) => {
                // Said once per kind of failure, not on every retry.
                if failing != Some(error.kind()) {
                    warn!("Cannot accept HTTP connections ({error}); trying again");
                    failing = Some(error.kind());
                }
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        failing = None;
        // Answers are small and go out whole: no waiting for more to send.
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            // A connection's own failures (a client gone, headers too slow) are its own business.
            let _ = connection.await;
            drop(permit);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(STOP_GRACE) => {
            warn!("HTTP requests still in flight {} s after the stop began are cut off", STOP_GRACE.as_secs());
        }
        () = stop.at_once.cancelled() => warn!("HTTP requests still in flight are cut off"),
    }
}
