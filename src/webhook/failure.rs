//! What a request that got no reply ran into, said plainly: a timeout, a refused connection, a
//! DNS or TLS failure (reqwest's own message nests each cause in the next).

use std::error::Error;
use std::io;
use std::time::Duration;

/// The status a failed request is counted under (`timeout`, `connect`, `dns`, `tls`, `error`),
/// and why it failed, for the dead list.
pub fn of_request(error: &reqwest::Error, timeout: Duration) -> (String, String) {
    let causes = causes(error);
    let said: Vec<String> = causes.iter().map(ToString::to_string).collect();
    let innermost = said.last().map_or("", String::as_str);
    let (status, why) = if error.is_timeout() {
        (
            "timeout",
            format!("no reply within {} s", timeout.as_secs_f64()),
        )
    } else if let Some(tls) = causes.iter().find_map(|cause| tls(*cause)) {
        ("tls", format!("TLS failed: {tls}"))
    } else if said.iter().any(|cause| cause.contains("dns error")) {
        ("dns", format!("DNS lookup failed: {innermost}"))
    } else if causes.iter().any(|cause| refused(*cause)) {
        ("connect", "connection refused".into())
    } else if error.is_connect() {
        ("connect", format!("cannot connect: {innermost}"))
    } else {
        ("error", format!("the request failed: {}", said.join(": ")))
    };
    (status.into(), why)
}

/// `error` and each of its causes.
fn causes(error: &reqwest::Error) -> Vec<&(dyn Error + 'static)> {
    let mut causes: Vec<&(dyn Error + 'static)> = vec![error];
    let mut source = error.source();
    while let Some(cause) = source {
        causes.push(cause);
        source = cause.source();
    }
    causes
}

/// The TLS error `cause` is, if it is one: rustls's, or one inside an I/O error (hyper wraps
/// rustls's I/O error in one of its own, and an I/O error's `source` skips what it wraps).
fn tls<'a>(cause: &'a (dyn Error + 'static)) -> Option<&'a rustls::Error> {
    if let Some(tls) = cause.downcast_ref::<rustls::Error>() {
        return Some(tls);
    }
    let inner: &(dyn Error + 'static) = cause.downcast_ref::<io::Error>()?.get_ref()?;
    tls(inner)
}

fn refused(cause: &(dyn Error + 'static)) -> bool {
    cause
        .downcast_ref::<io::Error>()
        .is_some_and(|io| io.kind() == io::ErrorKind::ConnectionRefused)
}
