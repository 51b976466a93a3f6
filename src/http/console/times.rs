//! Times and spans of time as the pages show them.

use std::time::{Duration, SystemTime};

use crate::text::time::rfc3339;

/// A span of time as people read it: 850 ms, 12.5 s, 3 min 20 s, 2 h 5 min.
pub(super) fn span(span: Duration) -> String {
    let seconds = span.as_secs_f64();
    match span.as_secs() {
        0 => format!("{:.0} ms", seconds * 1000.0),
        1..60 => format!("{seconds:.1} s"),
        60..3600 => format!("{} min {} s", span.as_secs() / 60, span.as_secs() % 60),
        _ => format!(
            "{} h {} min",
            span.as_secs() / 3600,
            span.as_secs() % 3600 / 60
        ),
    }
}

/// A time in RFC 3339 (UTC), or a dash for none.
pub(super) fn time(at: Option<SystemTime>) -> String {
    at.map_or_else(|| "—".into(), rfc3339)
}
