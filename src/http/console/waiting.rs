//! The waiting jobs' page (`/waiting`, `?topic=T` for one topic's): the pool a page at a time in
//! due order, each job with its due time, topic and attempts; to those who may act, "run now" and
//! "remove" for each, and for a topic, "run all waiting now", a bounded number a click, asked to
//! confirm first (a second form: the page works without JavaScript).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use delayer_client::inspector::{Cursor, MAX_PROMOTE, MAX_WAITING_READ, WaitingPage};
use delayer_wire::time::from_unix;
use maud::{Markup, html};

use super::fields::{cursor_in, fields, name_if_in};
use super::forms::{cursor_fields, named_field, token_field};
use super::layout::{self, problem};
use super::links::{cursor_query, job_link, query, topic_link};
use super::times::time;
use super::viewer::{Viewer, viewer};
use crate::http::reply::status_of;
use crate::http::state::AppState;
use crate::text::escape::capped;

/// Jobs a page shows.
const PAGE: usize = 50;

pub(super) async fn show(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let (viewer, _) = viewer(&state, &headers).await;
    let mut fields = fields(uri.query().unwrap_or_default().as_bytes());
    let asked = name_if_in(&mut fields, "topic", "topic_base64").and_then(|topic| {
        let after = cursor_in(&mut fields, "after")?;
        let go_on = cursor_in(&mut fields, "from")?;
        Ok((topic, after, go_on))
    });
    let (topic, after, go_on) = match asked {
        Ok(asked) => asked,
        Err(wrong) => return problem(StatusCode::BAD_REQUEST, &viewer, &wrong, "/waiting"),
    };
    let view = View {
        topic: topic.as_deref(),
        after: after.as_ref(),
        go_on: go_on.as_ref(),
        confirm: fields
            .get("confirm")
            .is_some_and(|confirm| confirm == "all"),
        per_topic: state.client.settings().layout.per_topic(),
    };
    let title = match view.topic {
        Some(topic) => format!("Waiting jobs of {}", capped(topic)),
        None => "Waiting jobs".into(),
    };
    let main = if view.topic.is_none() && view.per_topic {
        render(&view, None, &viewer)
    } else {
        let _reading = state.large_reads.acquire().await;
        match state.inspector.waiting(view.topic, view.after, PAGE).await {
            Ok(page) => render(&view, Some(&page), &viewer),
            Err(error) => return problem(status_of(&error), &viewer, &error.to_string(), "/"),
        }
    };
    layout::shown(&title, &viewer, &fields, false, main)
}

/// What the page was asked for.
struct View<'a> {
    /// The topic whose jobs it shows; none: every topic's.
    topic: Option<&'a [u8]>,
    /// The place in the pool it starts after.
    after: Option<&'a Cursor>,
    /// Where a "run all waiting now" that stopped at its bound goes on from.
    go_on: Option<&'a Cursor>,
    /// Whether to ask to confirm "run all waiting now".
    confirm: bool,
    /// Whether each topic has a pool of its own (the cluster layout).
    per_topic: bool,
}

impl View<'_> {
    /// This page's address (its topic's, if any) with `more` after it.
    fn link(&self, more: &str) -> String {
        let topic = self.topic.map_or_else(String::new, |topic| {
            query("topic", "topic_base64", topic) + "&"
        });
        format!("/waiting?{topic}{more}")
            .trim_end_matches(['&', '?'])
            .to_string()
    }
}

fn render(view: &View, page: Option<&WaitingPage>, viewer: &Viewer) -> Markup {
    html! {
        h1 { "Waiting jobs" @if let Some(topic) = view.topic { " of topic " (topic_link(&topic.into())) } }
        form method="get" action="/waiting" {
            input type="search" name="topic" placeholder="topic" aria-label="topic"
                value=(view.topic.and_then(|t| std::str::from_utf8(t).ok()).unwrap_or_default());
            " " button { "Show" }
            @if view.topic.is_some() && !view.per_topic { " " a href="/waiting" { "every topic" } }
        }
        @if let (Some(topic), true) = (view.topic, viewer.authorized) {
            (run_all(view, topic, viewer))
        }
        @match page {
            None => p { "In the cluster layout each topic has a pool of its own: name a topic." },
            Some(page) => (jobs(view, page, viewer)),
        }
    }
}

/// "Run all waiting now" for a topic: a button that asks to confirm, then the confirmation's
/// form (going on from where the last click stopped, if it did).
fn run_all(view: &View, topic: &[u8], viewer: &Viewer) -> Markup {
    html! {
        @if view.confirm {
            section.warn {
                p {
                    b { "Make up to " (MAX_PROMOTE) " waiting jobs of topic " (capped(topic)) " due now?" }
                    " The daemon moves them to the topic's ready list at once, earliest first"
                    @if let Some(from) = view.go_on { ", from after " (time(from_unix(from.score))) }
                    ". Their due times are not kept."
                }
                form.inline method="post" action="/actions/promote-topic" {
                    (token_field(viewer))
                    (named_field("topic", "topic_base64", topic))
                    input type="hidden" name="confirmed" value="yes";
                    @if let Some(from) = view.go_on { (cursor_fields("after", from)) }
                    button { "Yes, run them now" }
                }
                " " a href=(view.link("")) { "Cancel" }
            }
        } @else {
            form method="get" action="/waiting" {
                (named_field("topic", "topic_base64", topic))
                input type="hidden" name="confirm" value="all";
                @if let Some(from) = view.go_on {
                    (cursor_fields("from", from))
                    button { "Run the next waiting jobs of this topic now…" }
                } @else {
                    button { "Run all waiting jobs of this topic now…" }
                }
            }
        }
    }
}

fn jobs(view: &View, page: &WaitingPage, viewer: &Viewer) -> Markup {
    html! {
        @if page.jobs.is_empty() {
            @if !page.cut_short { p { "None" @if view.after.is_some() { " after the page before" } "." } }
        } @else {
            table {
                tr {
                    th { "id" } th { "due" } th { "topic" } th.n { "attempts" }
                    @if viewer.authorized { th { "act" } }
                }
                @for job in &page.jobs {
                    tr {
                        td { (job_link(&job.id)) }
                        td.nw { (time(from_unix(job.due))) }
                        td { @if let Some(topic) = &job.topic { (topic_link(topic)) } @else { "—" } }
                        td.n { (job.attempts) }
                        @if viewer.authorized { td.nw { (job_forms(view, job.id.as_bytes(), viewer)) } }
                    }
                }
            }
        }
        @if page.cut_short {
            @let found = page.jobs.len();
            p.warn {
                "This page read the next " (page.read) " waiting jobs of every topic and found "
                (found) " of this topic: one pool holds every topic's jobs, so a page reads at most "
                (MAX_WAITING_READ) " of them. "
                @if let Some(next) = &page.next {
                    a href=(view.link(&cursor_query("after", next))) {
                        "Go on after " (time(from_unix(next.score))) " (job " (capped(&next.id)) ") »"
                    }
                }
            }
        }
        p {
            @if view.after.is_some() { a href=(view.link("")) { "« first" } " " }
            @if let (Some(next), false) = (&page.next, page.cut_short) {
                a href=(view.link(&cursor_query("after", next))) { "later »" }
            }
        }
    }
}

/// A waiting job's buttons: run it now, or remove it; each comes back to this page.
fn job_forms(view: &View, id: &[u8], viewer: &Viewer) -> Markup {
    html! {
        @for (action, label) in [("promote", "Run now"), ("remove", "Remove")] {
            form.inline method="post" action={ "/actions/" (action) } {
                (token_field(viewer))
                (named_field("id", "id_base64", id))
                input type="hidden" name="page" value="waiting";
                @if let Some(topic) = view.topic { (named_field("topic", "topic_base64", topic)) }
                button { (label) }
            }
            " "
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{View, render};
    use crate::http::console::viewer::Viewer;
    use delayer_client::inspector::{Cursor, WaitingJob, WaitingPage};

    #[test]
    fn ids_and_topics_are_escaped_and_a_page_cut_short_says_where_to_go_on() {
        let markup = "<b>x</b>";
        let page = WaitingPage {
            jobs: vec![WaitingJob {
                id: markup.into(),
                due: 1_800_000_000.5,
                topic: Some(markup.into()),
                attempts: 2,
            }],
            read: 2000,
            next: Some(Cursor {
                score: 1_800_000_100.25,
                id: "j&k".into(),
            }),
            cut_short: true,
        };
        let view = View {
            topic: Some(markup.as_bytes()),
            after: None,
            go_on: None,
            confirm: true,
            per_topic: false,
        };
        let viewer = Viewer {
            guarded: true,
            authorized: true,
            form_token: "ft".into(),
        };
        let html = render(&view, Some(&page), &viewer).into_string();
        assert!(!html.contains("<b>x"), "{html}");
        assert!(html.contains("&lt;b&gt;x&lt;/b&gt;"), "{html}");
        assert!(html.contains("found 1 of this topic"), "{html}");
        assert!(
            html.contains(
                "href=\"/waiting?topic=%3Cb%3Ex%3C%2Fb%3E&amp;after=1800000100.25&amp;after_id=j%26k\""
            ),
            "{html}"
        );
        assert!(html.contains("action=\"/actions/promote-topic\""), "{html}");
        assert!(html.contains("name=\"confirmed\" value=\"yes\""), "{html}");
    }
}
