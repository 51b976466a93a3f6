//! Accepting connections: a bounded number at once (those beyond are refused at once, see
//! `connections`), each closed when its request headers do not come whole within a few seconds,
//! and all of them given a few seconds to finish on a stop.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::{Service, service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use socket2::{Domain, Socket, Type};
use tokio::net::TcpListener;
use tracing::warn;

use super::connections::Limit;
use crate::service::Stop;

/// Connections the kernel completes for the server to accept: room for a burst. With the 128 of
/// Rust's standard library, a burst of a few hundred connections loses SYNs, which the clients
/// send again only a second later.
const BACKLOG: i32 = 1024;
/// How long a client may take to send a request's headers: a connection that sends nothing whole
/// is closed rather than held. hyper counts it from the moment it waits for a request, so it also
/// closes a connection that never sends a byte and one left idle between requests.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stop lets requests in flight finish: within the 10 s systemd gives a stop
/// (`TimeoutStopSec`), with room for the mover's last script call.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// The pause after a failed accept (out of file descriptors, say) before the next.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// A listener on `address`, not blocking, ready for the server's runtime.
pub fn listen(address: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(address), Type::STREAM, None)?;
    // As the standard library does: a restart binds again while old connections linger.
    socket.set_reuse_address(true)?;
    socket.bind(&address.into())?;
    socket.listen(BACKLOG)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Serves `router` on `listener`, at most as many connections at once as `limit` has places for,
/// until a stop; then lets requests in flight finish, for up to [`STOP_GRACE`] or until a second
/// stop signal.
pub async fn serve(listener: TcpListener, router: Router, limit: &Limit, stop: &Stop) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    let graceful = GracefulShutdown::new();
    let mut failing = None;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.graceful.cancelled() => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
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
        let Some(permit) = limit.admit() else {
            limit.refuse(stream);
            continue;
        };
        // Answers are small and go out whole: no waiting for more to send.
        let _ = stream.set_nodelay(true);
        // Each request carries the client's address (the console counts failed logins by it).
        let router = TowerToHyperService::new(router.clone());
        let service = service_fn(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            router.call(request)
        });
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
