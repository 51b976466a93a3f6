//! The consumers' page (`/consumers`): each consumer seen lately (Workers, and callers of the HTTP
//! reserve that name themselves), by its heartbeat: host, pid, topics, concurrency, jobs held,
//! start and last beat. One whose beats stopped is marked gone until it ages out of the list.
//! The overview says how many are live and gone (`summary`).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use delayer_client::consumer::{KEPT, LIFETIME};
use delayer_client::inspector::{Consumer, Consumers};
use maud::{Markup, html};

use super::layout::{self, problem, respond};
use super::links::{consumer_anchor, topic_link};
use super::times::{span, time};
use super::viewer::viewer;
use crate::http::reply::status_of;
use crate::http::state::AppState;
use crate::text::escape::capped;

/// Consumers the page lists at most, the most recently seen first.
const LISTED: usize = 200;

pub(super) async fn show(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let (viewer, _) = viewer(&state, &headers).await;
    match state.inspector.consumers(LISTED).await {
        // Refreshed in place as the overview is: an operator keeps it open to watch.
        Ok(consumers) => respond(
            StatusCode::OK,
            layout::page("Consumers", &viewer, None, true, render(&consumers)),
        ),
        Err(error) => problem(status_of(&error), &viewer, &error.to_string(), "/"),
    }
}

/// The overview's line: how many consumers are live and how many gone, a link to the page.
pub(super) async fn summary(state: &AppState) -> Markup {
    let consumers = match state.inspector.consumers(LISTED).await {
        Ok(consumers) => consumers,
        Err(error) => return html! { p.bad { "The consumers could not be read: " (error) } },
    };
    let listed = consumers.listed.len();
    let gone = consumers
        .listed
        .iter()
        .filter(|consumer| consumer.gone)
        .count();
    html! {
        p id="consumers" {
            a href="/consumers" { "Consumers" } ": "
            (listed - gone) " live, "
            @if gone > 0 { b.bad { (gone) " gone" } } @else { "0 gone" }
            @if consumers.total > listed {
                " (of the " (listed) " seen most recently; " (consumers.total)
                " seen in the last " (KEPT.as_secs() / 60) " min)"
            }
            "."
        }
    }
}

fn render(consumers: &Consumers) -> Markup {
    let kept = KEPT.as_secs() / 60;
    html! {
        h1 { "Consumers" }
        p {
            "Each Worker beats every 5 s, and is gone once it has not for " (LIFETIME.as_secs())
            " s; a caller of the HTTP reserve that names itself (" code { "consumer" } ") beats "
            "with each call. A consumer that stopped cleanly leaves the list; one that is gone "
            "stays " (kept) " min after its last beat."
        }
        @if consumers.listed.is_empty() {
            p { "No consumer seen in the last " (kept) " min." }
        } @else {
            table {
                tr {
                    th { "consumer" } th { "state" } th { "host" } th.n { "pid" } th { "topics" }
                    th.n { "concurrency" } th.n { "held" } th { "started" } th { "last seen" }
                }
                @for consumer in &consumers.listed { (row(consumer, consumers)) }
            }
            @if consumers.total > consumers.listed.len() {
                p { "The " (consumers.listed.len()) " seen most recently of " (consumers.total) "." }
            }
        }
    }
}

fn row(consumer: &Consumer, consumers: &Consumers) -> Markup {
    let beat = &consumer.beat;
    let ago = consumers
        .now
        .duration_since(consumer.last_seen)
        .unwrap_or(Duration::ZERO);
    let dash = || "—".to_string();
    html! {
        tr id=(consumer_anchor(&beat.id)) {
            td { (capped(&beat.id)) }
            td { @if consumer.gone { b.bad { "gone" } } @else { "live" } }
            td { (capped(&beat.host)) }
            td.n { (beat.pid.map_or_else(dash, |pid| pid.to_string())) }
            td {
                @for (index, topic) in beat.topics.iter().enumerate() {
                    @if index > 0 { ", " }
                    (topic_link(topic))
                }
                @if consumer.topics_total > beat.topics.len() {
                    " and " (consumer.topics_total - beat.topics.len()) " more"
                }
            }
            td.n { (beat.concurrency.map_or_else(dash, |n| n.to_string())) }
            td.n { (beat.held.map_or_else(dash, |n| n.to_string())) }
            td.nw { (time(consumer.started)) }
            td.nw { (time(Some(consumer.last_seen))) " (" (span(ago)) " ago)" }
        }
    }
}
