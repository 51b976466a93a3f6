//! What operators and their tools read: `/metrics` (Prometheus), `/healthz` (load balancers,
//! Kubernetes) and `/` (a status page for people: plain HTML that refreshes itself).

use std::fmt::Write;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use delayer_client::time::{from_unix, unix_now};

use super::AppState;
use super::figures::Reading;
use crate::metrics::{Census, Format};

/// Everything the daemon counted, and what the pool and the lists hold (see `census`): the same
/// text for every scraper within a second, in OpenMetrics when the `Accept` header asks for it,
/// else in Prometheus's text format 0.0.4. While Redis does not answer, the holdings are left
/// out (not the last ones read, nor 0) and `delayer_redis_up` says why.
pub(super) async fn metrics(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let open_metrics = headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.contains("application/openmetrics-text"));
    let (format, content_type) = if open_metrics {
        (
            Format::OpenMetrics,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )
    } else {
        (
            Format::Prometheus,
            "text/plain; version=0.0.4; charset=utf-8",
        )
    };
    let reading = state.figures.reading().await;
    let text = state.figures.metrics_page(&reading, format);
    ([(CONTENT_TYPE, content_type)], text).into_response()
}

/// 200 while Redis answered the last look and the loop looked within two `timer_interval`s; 503
/// with the reason otherwise.
pub(super) async fn healthz(State(state): State<Arc<AppState>>) -> Response {
    match health(&state) {
        Ok(fine) => (StatusCode::OK, fine).into_response(),
        Err(trouble) => (StatusCode::SERVICE_UNAVAILABLE, trouble).into_response(),
    }
}

fn health(state: &AppState) -> Result<String, String> {
    let (answered, last_look) = state.metrics.last_look();
    let limit = 2.0 * state.timer_interval.as_secs_f64();
    if last_look == 0.0 {
        if state.metrics.has_looked() {
            return Err(format!(
                "Redis at {} did not answer: no look at the job pool has succeeded yet\n",
                state.redis_address
            ));
        }
        return Err("not looked at the job pool yet\n".into());
    }
    let since = unix_now() - last_look;
    if !answered {
        return Err(format!(
            "Redis at {} did not answer the last look (the last good one was {since:.1} s ago)\n",
            state.redis_address
        ));
    }
    if since > limit {
        return Err(format!(
            "no look at the job pool for {since:.1} s, more than twice timer_interval ({limit:.1} s)\n"
        ));
    }
    Ok(format!("ok: looked at the job pool {since:.3} s ago\n"))
}

/// Topics and their ready jobs (those with the most), jobs waiting, the next due time, how late
/// moves are; refreshed every few seconds. All but the health line is made once a second at most.
pub(super) async fn status(State(state): State<Arc<AppState>>) -> Html<Bytes> {
    let reading = state.figures.reading().await;
    let figures = state
        .figures
        .status_page(&reading, || status_figures(&state, &reading));
    let mut page = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"5\">\
         <title>delayer</title><style>body{font:15px/1.5 system-ui,sans-serif;margin:2em;color:#222}\
         table{border-collapse:collapse}td,th{padding:.2em 1em;border-bottom:1px solid #ddd;text-align:left}\
         td.n{text-align:right}.bad{color:#b00}</style></head><body><h1>delayer</h1>",
    );
    match health(&state) {
        Ok(fine) => write!(page, "<p>{}</p>", escape(&fine)).unwrap(),
        Err(trouble) => write!(page, "<p class=\"bad\">{}</p>", escape(&trouble)).unwrap(),
    }
    let mut page = page.into_bytes();
    page.extend_from_slice(&figures);
    Html(Bytes::from(page))
}

/// The status page below its health line.
fn status_figures(state: &AppState, reading: &Reading) -> String {
    let mut page = String::new();
    if let Some(error) = &reading.error {
        write!(
            page,
            "<p class=\"bad\">Redis at {}: {}</p>",
            escape(&state.redis_address),
            escape(error)
        )
        .unwrap();
    }
    let empty = Census::default();
    let census = reading.census.as_deref().unwrap_or(&empty);
    let next = census
        .next_due
        .map_or_else(|| "none".to_string(), crate::text::time::local);
    write!(
        page,
        "<p>Jobs waiting: <b>{}</b> ({} due now). Next due: {next}.</p>",
        census.waiting, census.due_now
    )
    .unwrap();
    match state.metrics.recent_lag_percentiles() {
        Some((p50, p99, max)) => write!(
            page,
            "<p>How late jobs were moved (the last 10,000): median {:.1} ms, 99th percentile {:.1} ms, \
             most {:.1} ms.</p>",
            p50 * 1000.0,
            p99 * 1000.0,
            max * 1000.0
        )
        .unwrap(),
        None => page.push_str("<p>No job moved yet.</p>"),
    }
    page.push_str("<table><tr><th>topic</th><th>ready</th></tr>");
    for (topic, ready) in &census.listed {
        write!(
            page,
            "<tr><td>{}</td><td class=\"n\">{ready}</td></tr>",
            escape(topic)
        )
        .unwrap();
    }
    page.push_str("</table>");
    if census.unlisted_topics > 0 {
        write!(
            page,
            "<p>And {} more topics with {} ready jobs in all ([http] max_listed_topics = {}).</p>",
            census.unlisted_topics,
            census.unlisted_ready,
            state.metrics.listed()
        )
        .unwrap();
    }
    if let Some(at) = from_unix(census.read_at).filter(|_| census.read_at > 0.0) {
        write!(
            page,
            "<p>Read from Redis at {}: {} topics.</p>",
            crate::text::time::local(at),
            census.topics
        )
        .unwrap();
    }
    page.push_str("</body></html>");
    page
}

/// Topics are whatever clients wrote: escaped, so that none can inject markup into the page.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '&' => escaped.push_str("&amp;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn topics_cannot_inject_markup() {
        assert_eq!(
            escape("<script>alert('x')</script>&\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"
        );
    }
}
