//! The overview (`/`): a health line, the live consumers, then Redis, this daemon, the jobs, and
//! a row per listed topic, then what happened (`history`); its figures, consumers and charts are
//! made once a second at most, whoever looks.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use delayer_wire::keys::{Names, Placement};
use maud::{Markup, PreEscaped, html};
use tokio::time::Instant;

use super::consumers;
use super::fields::fields;
use super::history::{self, Span};
use super::layout;
use super::links::topic_link;
use super::rates::Counts;
use super::times::{span, time};
use super::viewer::viewer;
use crate::http::census::RESERVATIONS_COUNTED;
use crate::http::figures::LastCensus;
use crate::http::pages::health;
use crate::http::state::AppState;
use crate::metrics::Census;

pub(super) async fn show(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let (viewer, _) = viewer(&state, &headers).await;
    let reading = state.figures.last_census().await;
    let figures = state
        .figures
        .overview(&reading, || overview_figures(&state, &reading));
    let health = health(&state);
    let fields = fields(uri.query().unwrap_or_default().as_bytes());
    let asked = Span::asked(&fields);
    let kept = &state.console;
    let charts = &kept.charts[usize::from(asked == Span::Day)];
    let history = charts.get(|| history::section(&state, None, asked, "/"));
    let consumers = kept.consumers.get(|| consumers::summary(&state));
    let (history, consumers) = tokio::join!(history, consumers);
    let main = html! {
        @match &health {
            Ok(fine) => p { (fine) },
            Err(trouble) => p.bad { (trouble) },
        }
        (consumers)
        (kafka_line(&state))
        (webhook_lines(&state))
        (PreEscaped(String::from_utf8_lossy(&figures)))
        (history)
    };
    layout::shown("Overview", &viewer, &fields, true, main)
}

/// The Kafka link's state and counts since the start, when `[kafka]` turns it on.
fn kafka_line(state: &AppState) -> Markup {
    let kafka = &state.metrics.kafka;
    if !kafka.is_on() {
        return html! {};
    }
    let out = kafka.out.state();
    let [delivered, refused, given_back, _, in_flight] = kafka.out.counts();
    let errors = kafka.broker_errors();
    let doing = match (&out.failing, out.delivered_once) {
        (Some(_), _) => "not taking messages: due jobs wait in Redis",
        (None, true) => "delivering",
        (None, false) => "nothing delivered yet",
    };
    html! {
        p.kafka {
            "Kafka at " code { (kafka.brokers()) } ": " (doing) ". Since the start: "
            (delivered) " delivered, " (refused) " refused (to the dead list), "
            (given_back) " given back to try again, " (in_flight) " in flight, "
            (errors) " broker errors."
        }
    }
}

/// Each webhook's counts since the start: deliveries, failed tries by status, requests in flight.
fn webhook_lines(state: &AppState) -> Markup {
    html! {
        @for hook in state.metrics.webhooks.all() {
            @let [delivered, dead, _, retried, in_flight] = hook.out.counts();
            @let failures = hook.failures();
            p.webhook {
                "Webhook " code { (hook.name) } ". Since the start: " (delivered) " delivered, "
                (dead) " to the dead list, " (retried) " tried again, " (in_flight) " in flight. "
                @if failures.is_empty() {
                    "No failed tries."
                } @else {
                    "Failed tries: "
                    @for (i, (status, count)) in failures.iter().enumerate() {
                        @if i > 0 { ", " }
                        (count) " " (status)
                    }
                    "."
                }
            }
        }
    }
}

/// The overview below its health line, as of `reading`.
fn overview_figures(state: &AppState, reading: &LastCensus) -> String {
    let census = reading.census.as_deref();
    let now = Instant::now();
    let listed = census.map_or(&[][..], |census| &census.listed_topics);
    let counted: Vec<(String, u64, u64)> = listed
        .iter()
        .map(|topic| state.metrics.counts(topic))
        .collect();
    let counts: Counts = counted
        .iter()
        .map(|(label, moved, again)| (label.clone(), (*moved, *again)))
        .collect();
    let per_minute = state.console.rates.per_minute(now, counts);
    let layout = state.client.settings().layout;
    let layout = match (layout.names, layout.placement) {
        (_, Placement::PerTopic) => "cluster (each topic's keys in a slot of their own)",
        (Names::Legacy, Placement::Shared) => "legacy (delayer:job_pool)",
        (Names::Jop, Placement::Shared) => "jop (delayer:jop_pool, the earliest Delayer's)",
    };
    render(&Overview {
        redis_address: &state.redis_address,
        redis_version: census.and_then(|census| census.redis_version.as_deref()),
        redis_error: reading.error.as_deref(),
        version: env!("CARGO_PKG_VERSION"),
        uptime: now.duration_since(state.console.started),
        layout,
        census,
        lag: state.metrics.recent_lag_percentiles(),
        // A label shared by the topics beyond the first counted tells no one topic's rate.
        rates: counted
            .iter()
            .map(|(label, _, _)| per_minute.get(label).copied().filter(|_| !label.is_empty()))
            .collect(),
        listed_most: state.metrics.listed(),
        reservations_counted: RESERVATIONS_COUNTED,
    })
    .into_string()
}

/// The overview's figures, as the census read them.
struct Overview<'a> {
    redis_address: &'a str,
    redis_version: Option<&'a str>,
    /// Why the last read of Redis failed.
    redis_error: Option<&'a str>,
    version: &'a str,
    uptime: Duration,
    layout: &'a str,
    /// The last census read whole; `None` before the first.
    census: Option<&'a Census>,
    /// How late jobs were moved: median, 99th percentile, most (seconds).
    lag: Option<(f64, f64, f64)>,
    /// By topic, as `census.listed`: (moved, delivered again) per minute.
    rates: Vec<Option<(f64, f64)>>,
    listed_most: usize,
    reservations_counted: usize,
}

/// The overview below its health line: made once a second at most, whoever looks.
fn render(o: &Overview) -> Markup {
    html! {
        div.cards {
            section {
                h2 { "Redis" }
                dl {
                    dt { "address" } dd { (o.redis_address) }
                    dt { "version" } dd { (o.redis_version.unwrap_or("—")) }
                    dt { "reachable" } dd {
                        @match o.redis_error {
                            None => "yes",
                            Some(error) => span.bad { "no: " (error) },
                        }
                    }
                }
            }
            section {
                h2 { "This daemon" }
                dl {
                    dt { "version" } dd { (o.version) }
                    dt { "up for" } dd { (span(o.uptime)) }
                    dt { "key layout" } dd { (o.layout) }
                    dt { "move lag" } dd { (lag(o.lag)) }
                }
            }
            @if let Some(census) = o.census { (jobs(census, o.redis_error.is_some())) }
        }
        @match o.census {
            // Never zeros: a Redis that does not answer must not pass for an empty one.
            None => p.bad { "Nothing read from Redis yet: no figures to show." },
            Some(census) => (topics(o, census)),
        }
    }
}

/// How late jobs were moved: median, 99th percentile, most.
fn lag(lag: Option<(f64, f64, f64)>) -> Markup {
    let at = |seconds: f64| span(Duration::from_secs_f64(seconds));
    html! {
        @match lag {
            Some((p50, p99, max)) => {
                "median " (at(p50)) ", 99th percentile " (at(p99)) ", most " (at(max))
            }
            None => "no job moved yet",
        }
    }
}

/// The pool's figures; `stale` when Redis did not answer the last read.
fn jobs(census: &Census, stale: bool) -> Markup {
    html! {
        section {
            h2 { "Jobs" @if stale { " (as last read)" } }
            dl {
                dt { "waiting" } dd { a href="/waiting" { (census.waiting) } }
                dt { "due now" } dd { (census.due_now) }
                dt { "reserved" } dd { (census.reserved) }
                dt { "next due" } dd { (time(census.next_due)) }
            }
        }
    }
}

fn topics(o: &Overview, census: &Census) -> Markup {
    let ages: HashMap<&str, f64> = census
        .oldest_ready_age
        .iter()
        .map(|(name, age)| (name.as_str(), *age))
        .collect();
    html! {
        h2 { "Topics" }
        table {
            tr {
                th { "topic" } th.n { "waiting" } th.n { "ready" } th.n { "reserved" } th.n { "dead" }
                th.n { "oldest ready" } th.n { "moved / min" } th.n { "delivered again / min" }
                th { "state" }
            }
            @for (index, topic) in census.listed_topics.iter().enumerate() {
                // No details when they could not be read: dashes, not zeros.
                @let details = census.details.get(index);
                @let dash = || "—".to_string();
                @let rates = o.rates.get(index).copied().flatten();
                @let name = census.listed[index].0.as_str();
                tr {
                    td { (topic_link(topic)) }
                    td.n { (details.and_then(|d| d.waiting).map_or_else(dash, |n| n.to_string())) }
                    td.n { (census.listed[index].1) }
                    td.n { (details.map_or_else(dash, |d| d.reserved.to_string())) }
                    td.n { (census.dead.get(index).map_or(0, |(_, dead)| *dead)) }
                    td.n { (ages.get(name).map_or_else(dash, |age| span(Duration::from_secs_f64(*age)))) }
                    td.n { (rates.map_or_else(|| "—".into(), |(moved, _)| format!("{moved:.1}"))) }
                    td.n { (rates.map_or_else(|| "—".into(), |(_, again)| format!("{again:.1}"))) }
                    td { @if census.paused.contains(name) { b { "paused" } } }
                }
            }
        }
        @if census.unlisted_topics > 0 {
            p {
                "And " (census.unlisted_topics) " more topics with " (census.unlisted_ready)
                " ready jobs in all ([http] max_listed_topics = " (o.listed_most) ")."
            }
        }
        p {
            "Waiting by topic is known in the cluster layout only (one pool holds every topic's jobs otherwise)."
            @if census.reserved > o.reservations_counted as u64 {
                " Reserved by topic counts the " (o.reservations_counted) " reservations due back soonest."
            }
            " Rates are this daemon's moves, over the last minute (or since it started)."
        }
        p { "Read from Redis at " (time(delayer_wire::time::from_unix(census.read_at))) ": " (census.topics) " topics." }
    }
}
