//! What operators' tools read: `/metrics` (Prometheus) and `/healthz` (load balancers,
//! Kubernetes). People read the console (`console`).

use std::sync::Arc;

use axum::extract::State;
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::state::AppState;
use crate::metrics::Format;

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
    let reading = state.figures.last_census().await;
    let text = state.figures.metrics_page(&reading, format);
    ([(CONTENT_TYPE, content_type)], text).into_response()
}

/// 200 while Redis answered the last look and the loop looked within two `timer_interval`s (and
/// while each sink's receiver takes jobs, and, with `[kafka]`, delay requests move); 503 with the
/// reason otherwise.
pub(super) async fn healthz(State(state): State<Arc<AppState>>) -> Response {
    match health(&state) {
        Ok(fine) => (StatusCode::OK, fine).into_response(),
        Err(trouble) => (StatusCode::SERVICE_UNAVAILABLE, trouble).into_response(),
    }
}

pub(super) fn health(state: &AppState) -> Result<String, String> {
    let (answered, since) = state.metrics.last_look();
    let limit = 2.0 * state.timer_interval.as_secs_f64();
    let Some(since) = since.map(|since| since.as_secs_f64()) else {
        if state.metrics.has_looked() {
            return Err(format!(
                "Redis at {} did not answer: no look at the job pool has succeeded yet\n",
                state.redis_address
            ));
        }
        return Err("not looked at the job pool yet\n".into());
    };
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
    for (title, sink) in state.metrics.sinks() {
        if let Some((failing_since, why)) = sink.state().failing {
            return Err(format!(
                "{title} does not take messages for {:.1} s ({why}): due jobs wait in Redis\n",
                failing_since.elapsed().as_secs_f64()
            ));
        }
    }
    if let Some((topic, partition, waiting, still)) = state.metrics.kafka.requests_stalled() {
        return Err(format!(
            "Kafka delay requests do not move: {waiting} wait in partition {partition} of \
             {topic}, and its offset has not moved for {:.0} s\n",
            still.as_secs_f64()
        ));
    }
    Ok(format!("ok: looked at the job pool {since:.3} s ago\n"))
}
