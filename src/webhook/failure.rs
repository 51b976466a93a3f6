//! What a request that got no reply ran into, said plainly: a timeout, a refused connection, a
//! DNS or TLS failure (reqwest's own message nests each cause in the next).

use std::error::Error;
use std::io;
use std::time::Duration;

/// The status a failed request is counted under (`timeout`, `connect`, `dns`, `tls`, `error`),
/// and why it failed, for the dead list.
pub fn of_request(error: &reqwest::Error, timeout: Duration) -> (String, String) {
    let causes = causes(error);
    let (status, why) = if error.is_timeout() {
        (
            "timeout",
            format!("no reply within {} s", timeout.as_secs_f64()),
        )
    } else if let Some(tls) = causes.iter().find(|cause| is_tls(cause)) {
        ("tls", format!("TLS failed: {tls}"))
    } else if let Some(dns) = causes.iter().find(|cause| cause.contains("dns error")) {
        (
            "dns",
            format!("DNS lookup failed: {}", causes.last().unwrap_or(dns)),
        )
    } else if refused(error) {
        ("connect", "connection refused".into())
    } else if error.is_connect() {
        let cause = causes.last().map_or("", String::as_str);
        ("connect", format!("cannot connect: {cause}"))
    } else {
        (
            "error",
            format!("the request failed: {}", causes.join(": ")),
        )
    };
    (status.into(), why)
}

/// Each message in `error`'s chain of causes.
fn causes(error: &reqwest::Error) -> Vec<String> {
    let mut causes = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        causes.push(cause.to_string());
        source = cause.source();
    }
    causes
}

fn is_tls(cause: &str) -> bool {
    let cause = cause.to_ascii_lowercase();
    ["certificate", "tls", "handshake", "peer sent", "alert"]
        .iter()
        .any(|word| cause.contains(word))
}

fn refused(error: &reqwest::Error) -> bool {
    let mut source = error.source();
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<io::Error>()
            && io.kind() == io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        source = cause.source();
    }
    false
}
