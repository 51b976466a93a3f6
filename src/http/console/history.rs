//! What happened: the history's counts (see `delayer_wire::history`) as charts and a table, on
//! the overview (every topic) and on a topic's page. The last hour a bar a minute, or
//! (`history=day`) the last day a bar a quarter of an hour, by Redis's clock, in UTC.

use std::collections::HashMap;
use std::time::Duration;

use chrono::DateTime;
use delayer_client::Topic;
use delayer_client::inspector::Counts;
use delayer_wire::history::{KEPT, LAG_BOUNDS_MS, MAX_TOPICS};
use maud::{Markup, html};

use super::chart::{Bar, bars};
use super::times::span;
use crate::http::state::AppState;

/// How much of the history a page shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Span {
    /// The last hour, a bar a minute.
    Hour,
    /// The last day, a bar a quarter of an hour.
    Day,
}

impl Span {
    /// The span a page's query asks for (`history=day`); the hour unless it does.
    pub(super) fn asked(fields: &HashMap<String, String>) -> Span {
        match fields.get("history").map(String::as_str) {
            Some("day") => Span::Day,
            _ => Span::Hour,
        }
    }

    /// Minutes a bar.
    fn step(self) -> u64 {
        match self {
            Span::Hour => 1,
            Span::Day => 15,
        }
    }

    fn bars(self) -> usize {
        match self {
            Span::Hour => 60,
            Span::Day => (KEPT.as_secs() / 60 / 15) as usize,
        }
    }
}

/// The section: read from Redis now, of every topic or of `topic`. `link` is the page's address
/// with its query, to which `history=` is added.
pub(super) async fn section(
    state: &AppState,
    topic: Option<&Topic>,
    asked: Span,
    link: &str,
) -> Markup {
    let step = asked.step();
    // Enough minutes for the bars, the first one whole.
    let minutes = asked.bars() * step as usize + step as usize - 1;
    let read = state.inspector.history(topic, minutes).await;
    let slots = read.map(|history| {
        let mut slots: Vec<(u64, Counts)> = Vec::new();
        for (index, counts) in history.minutes.iter().enumerate() {
            let start = history.minute(index) / step * step;
            match slots.last_mut() {
                Some((at, sum)) if *at == start => sum.add(counts),
                _ => slots.push((start, counts.clone())),
            }
        }
        let skip = slots.len().saturating_sub(asked.bars());
        slots.split_off(skip)
    });
    let spans = [
        (Span::Hour, "hour", "last hour"),
        (Span::Day, "day", "last day"),
    ];
    let joiner = if link.contains('?') { '&' } else { '?' };
    html! {
        h2 id="history" { "What happened" }
        p {
            @for (index, (span, query, words)) in spans.iter().enumerate() {
                @if index > 0 { " · " }
                @if *span == asked { b { (words) } }
                @else { a href={ (link) (joiner) "history=" (query) } { (words) } }
            }
            ", by Redis's clock (UTC), a bar a " (if step == 1 { "minute" } else { "quarter of an hour" })
            ": counted in Redis by every daemon and delayer client, kept a day."
            @if topic.is_some() {
                " A topic is counted apart in the minutes it is one of the first "
                (MAX_TOPICS) " counted; the overview counts every topic."
            }
        }
        @match slots {
            Err(error) => p.bad { "The history could not be read: " (error) },
            Ok(slots) => (charts(&slots, step)),
        }
    }
}

/// The charts of `slots` (each a start minute and its counts), then their figures in a table.
fn charts(slots: &[(u64, Counts)], step: u64) -> Markup {
    type Figure = fn(&Counts) -> u64;
    let counters: [(&str, Figure); 5] = [
        ("pushed", |c| c.pushed),
        ("moved", |c| c.moved),
        ("acked", |c| c.acked),
        ("delivered again", |c| c.again),
        ("dead", |c| c.dead),
    ];
    let last = slots.last().map(|(start, _)| start + step);
    html! {
        div.charts {
            @for (name, figure) in counters {
                @let drawn: Vec<Bar> = slots.iter().map(|(start, counts)| Bar {
                    key: *start,
                    label: format!("{}: {} {name}", clock(*start), figure(counts)),
                    value: figure(counts) as f64,
                }).collect();
                @let most = slots.iter().map(|(_, counts)| figure(counts)).max().unwrap_or(0);
                (bars(name, &drawn, &most.to_string()))
            }
            @let lags: Vec<Bar> = slots.iter().map(|(start, counts)| Bar {
                key: *start,
                label: format!("{}: move lag p99 {}", clock(*start), lag(counts.lag_p99())),
                value: counts.lag_p99().map_or(0.0, |p99| p99.min(longest()).as_secs_f64()),
            }).collect();
            @let worst = slots.iter().filter_map(|(_, counts)| counts.lag_p99()).max();
            (bars("move lag p99", &lags, &lag(worst)))
        }
        @if let (Some((first, _)), Some(last)) = (slots.first(), last) {
            p.axis { (clock(*first)) " to " (clock(last)) " UTC" }
        }
        details {
            summary { "The figures" }
            table {
                tr {
                    th { "from (UTC)" } th.n { "pushed" } th.n { "moved" } th.n { "acked" }
                    th.n { "delivered again" } th.n { "dead" } th.n { "move lag p99" }
                }
                @for (start, counts) in slots.iter().rev().filter(|(_, counts)| !counts.is_empty()) {
                    tr data-key=(start) {
                        td { (clock(*start)) }
                        td.n { (counts.pushed) } td.n { (counts.moved) } td.n { (counts.acked) }
                        td.n { (counts.again) } td.n { (counts.dead) }
                        td.n { (lag(counts.lag_p99())) }
                    }
                }
            }
            p { "Time spans with nothing counted are left out. The lag is the bound of its bucket: at most that." }
        }
    }
}

/// The longest lag a bucket names: longer ones are drawn as long.
fn longest() -> Duration {
    Duration::from_millis(LAG_BOUNDS_MS[LAG_BOUNDS_MS.len() - 1])
}

/// A 99th percentile of the lag, as its bucket bounds it.
fn lag(p99: Option<Duration>) -> String {
    match p99 {
        None => "—".into(),
        Some(p99) if p99 > longest() => format!("over {}", span(longest())),
        Some(p99) => format!("≤ {}", span(p99)),
    }
}

/// Unix minute `minute` as a time of day in UTC.
fn clock(minute: u64) -> String {
    DateTime::from_timestamp(minute as i64 * 60, 0)
        .map_or_else(|| minute.to_string(), |at| at.format("%H:%M").to_string())
}
