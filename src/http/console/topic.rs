//! A topic's page (`/topic?name=TOPIC`, or `?base64=...`): whether it is paused, and its ready,
//! reserved and dead jobs, a page of each list at a time, and what happened to it (`history`);
//! each reserved job with the consumer holding it, when its reserve named one.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use delayer_client::inspector::{JobTimes, TopicDetails};
use delayer_client::{JobId, Topic};
use maud::{Markup, html};

use super::fields::{fields, name_in};
use super::forms::{dead_job_forms, named_field, token_field};
use super::history::{self, Span};
use super::layout::{self, problem};
use super::links::{consumer_link, job_link, query};
use super::times::{span, time};
use super::viewer::{Viewer, viewer};
use crate::http::census::RESERVATIONS_COUNTED;
use crate::http::reply::status_of;
use crate::http::state::AppState;
use crate::text::escape::capped;

/// Jobs a topic's page shows of each list at a time.
const PAGE: usize = 50;

pub(super) async fn show(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let (viewer, _) = viewer(&state, &headers).await;
    let mut fields = fields(uri.query().unwrap_or_default().as_bytes());
    let topic = match name_in(&mut fields, "name", "base64") {
        Ok(topic) => Topic::from(topic),
        Err(wrong) => return problem(StatusCode::BAD_REQUEST, &viewer, &wrong, "/"),
    };
    let skip = |list: &str| fields.get(list).and_then(|n| n.parse().ok()).unwrap_or(0);
    let reading = state.large_reads.acquire().await;
    let read = topic_page(
        &state,
        &topic,
        [skip("ready"), skip("reserved"), skip("dead")],
    )
    .await;
    drop(reading);
    match read {
        Ok(page) => {
            let title = format!("Topic {}", capped(&topic));
            let link = format!("/topic?{}", query("name", "base64", topic.as_bytes()));
            let history = history::section(&state, Some(&topic), Span::asked(&fields), &link);
            let main = html! { (render(&page, &viewer)) (history.await) };
            layout::shown(&title, &viewer, &fields, false, main)
        }
        Err(error) => problem(status_of(&error), &viewer, &error.to_string(), "/"),
    }
}

/// A topic's figures and one page of each of its lists, skipping `[ready, reserved, dead]`.
async fn topic_page<'a>(
    state: &AppState,
    topic: &'a Topic,
    [ready, reserved, dead]: [usize; 3],
) -> delayer_client::Result<TopicPage<'a>> {
    let inspector = &state.inspector;
    let topics = std::slice::from_ref(topic);
    let lengths = inspector.lengths(topics).await?;
    let details = inspector
        .details(topics, RESERVATIONS_COUNTED)
        .await?
        .pop()
        .unwrap_or_default();
    let undated = |ids: Vec<JobId>| ids.into_iter().map(|id| (id, None)).collect();
    let mut lists = vec![
        ListPage {
            list: "ready",
            total: lengths.ready.first().map_or(0, |(_, n)| *n),
            skip: ready,
            ids: undated(inspector.ready_page(topic, ready, PAGE).await?),
            job_times: Vec::new(),
        },
        ListPage {
            list: "reserved",
            total: details.reserved,
            skip: reserved,
            ids: inspector
                .reserved_page(topic, reserved, PAGE, RESERVATIONS_COUNTED)
                .await?,
            job_times: Vec::new(),
        },
        ListPage {
            list: "dead",
            total: lengths.dead.first().map_or(0, |(_, n)| *n),
            skip: dead,
            ids: undated(inspector.dead_page(topic, dead, PAGE).await?),
            job_times: Vec::new(),
        },
    ];
    // One round trip for the three pages' job times, handed back in their order.
    let ids: Vec<_> = lists
        .iter()
        .flat_map(|page| page.ids.iter().map(|(id, _)| id.clone()))
        .collect();
    let mut times = inspector.job_times(topic, &ids).await?.into_iter();
    for page in &mut lists {
        page.job_times = times.by_ref().take(page.ids.len()).collect();
    }
    let oldest_ready_age = inspector.oldest_ready_ages(topics).await?.remove(topic);
    Ok(TopicPage {
        topic,
        details,
        oldest_ready_age,
        paused: lengths.paused.contains(topic),
        lists,
        page_size: PAGE,
    })
}

/// One list of a topic's page.
struct ListPage {
    /// `ready`, `reserved` or `dead`: the list and its query parameter.
    list: &'static str,
    /// How many the list holds (of those counted).
    total: u64,
    /// How many were skipped to get here.
    skip: usize,
    /// The page's jobs, with their reservation's deadline (reserved jobs only).
    ids: Vec<(JobId, Option<SystemTime>)>,
    /// What each job's data says, in the same order.
    job_times: Vec<JobTimes>,
}

struct TopicPage<'a> {
    topic: &'a Topic,
    details: TopicDetails,
    oldest_ready_age: Option<Duration>,
    paused: bool,
    lists: Vec<ListPage>,
    page_size: usize,
}

fn render(t: &TopicPage, viewer: &Viewer) -> Markup {
    let name = query("name", "base64", t.topic.as_bytes());
    html! {
        h1 { "Topic " (capped(t.topic)) @if t.paused { " (paused)" } }
        p {
            "Oldest ready job: " (t.oldest_ready_age.map_or_else(|| "none".into(), span))
            @if let Some(waiting) = t.details.waiting { ". Waiting: " (waiting) }
            "."
            @if t.paused { " Paused: its jobs that fall due wait in the pool until it is resumed." }
            " " a href={ "/waiting?" (query("topic", "topic_base64", t.topic.as_bytes())) } { "Its waiting jobs" }
        }
        @if viewer.authorized {
            @let (action, label) = if t.paused { ("resume", "Resume") } else { ("pause", "Pause") };
            form method="post" action={ "/actions/" (action) } {
                (token_field(viewer))
                (named_field("topic", "topic_base64", t.topic.as_bytes()))
                button { (label) " this topic" }
            }
        }
        @for page in &t.lists {
            h2 { (page.list) " (" (page.total) ")" }
            @if page.list == "dead" && page.total > 0 && viewer.authorized {
                form method="post" action="/actions/requeue" {
                    (token_field(viewer))
                    (named_field("topic", "topic_base64", t.topic.as_bytes()))
                    button { "Requeue all dead jobs (" (page.total) ")" }
                }
            }
            @if page.ids.is_empty() {
                p { "None" @if page.skip > 0 { " past " (page.skip) } "." }
            } @else {
                table {
                    tr {
                        th.n { "#" } th { "id" }
                        @match page.list {
                            "reserved" => th { "deadline" },
                            "dead" => th { "died" },
                            _ => th { "due" },
                        }
                        th.n { "attempts" }
                        @if page.list == "reserved" { th { "consumer" } }
                        @if page.list == "dead" && viewer.authorized { th { "act" } }
                    }
                    @for (index, (id, deadline)) in page.ids.iter().enumerate() {
                        @let times = page.job_times.get(index).cloned().unwrap_or_default();
                        tr {
                            td.n { (page.skip + index + 1) }
                            td { (job_link(id)) }
                            @match page.list {
                                "reserved" => td { (time(*deadline)) },
                                "dead" => td { (time(times.died)) },
                                _ => td { (time(times.due)) },
                            }
                            td.n { (times.attempts) }
                            @if page.list == "reserved" {
                                td { @match &times.holder {
                                    Some(holder) => (consumer_link(holder)),
                                    None => "—",
                                } }
                            }
                            @if page.list == "dead" && viewer.authorized {
                                td { (dead_job_forms(viewer, t.topic, id)) }
                            }
                        }
                    }
                }
                @if page.skip > 0 || page.skip + page.ids.len() < page.total as usize { p {
                    @if page.skip > 0 {
                        a href={ "/topic?" (name) "&" (page.list) "=" (page.skip.saturating_sub(t.page_size)) } { "« earlier" }
                        " "
                    }
                    @if (page.skip + page.ids.len()) < page.total as usize {
                        a href={ "/topic?" (name) "&" (page.list) "=" (page.skip + t.page_size) } { "later »" }
                    }
                } }
            }
        }
    }
}
