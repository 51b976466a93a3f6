//! A job's page (`/job?id=ID`, or `?id_base64=...`): its state, topic, due time, attempts,
//! reservation deadline and, to those logged in, its body and what they may do with it.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use delayer_client::{JobInfo, State as JobState};
use maud::{Markup, html};

use super::fields::{fields, name_in};
use super::forms::{dead_job_forms, named_field, token_field};
use super::layout::{self, problem};
use super::links::{login_then, query, topic_link};
use super::times::time;
use super::viewer::{Viewer, viewer};
use crate::http::reply::status_of;
use crate::http::state::AppState;
use crate::text::escape::capped;

pub(super) async fn show(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let (viewer, _) = viewer(&state, &headers).await;
    let mut fields = fields(uri.query().unwrap_or_default().as_bytes());
    let id = match name_in(&mut fields, "id", "id_base64") {
        Ok(id) => id,
        Err(wrong) => return problem(StatusCode::BAD_REQUEST, &viewer, &wrong, "/"),
    };
    // Only what the page shows: no body without a login, and none over the HTTP API's limit.
    let read = match viewer.authorized {
        true => state.client.get(&id).await,
        false => state.inspector.get_up_to(&id, 0).await,
    };
    match read {
        Ok(info) => {
            let title = format!("Job {}", capped(&id));
            layout::shown(&title, &viewer, &fields, false, render(&info, &viewer))
        }
        Err(error) => problem(status_of(&error), &viewer, &error.to_string(), "/"),
    }
}

/// The most of a body a job's page shows.
const BODY_SHOWN: usize = 4096;

fn render(info: &JobInfo, viewer: &Viewer) -> Markup {
    html! {
        h1 { "Job " (capped(&info.id)) }
        @if info.state == JobState::Unknown {
            p { "No such job: no data under this id (never pushed, taken and finished, removed, or expired)." }
        } @else {
            dl {
                dt { "state" } dd { (info.state.name()) }
                dt { "topic" } dd { @if let Some(topic) = &info.topic { (topic_link(topic)) } }
                dt { "due" } dd { (time(info.due)) }
                dt { "attempts" } dd { (info.attempts) }
                dt { "reservation deadline" } dd { (time(info.deadline)) }
                @if let Some(why) = &info.died_why {
                    dt { "dead because" } dd { (why) }
                }
            }
            h2 { "Body" }
            @if !viewer.authorized {
                p {
                    a href=(login_then(&format!("/job?{}", query("id", "id_base64", info.id.as_bytes())))) { "Log in" }
                    " to see the body and act on the job."
                }
            } @else if let Some(body) = &info.body {
                (body_view(body))
            } @else if let Some(size) = info.body_size {
                p { "The body is " (size) " bytes, over " code { "[delayer] max_body_bytes" } ": not read here." }
            }
            @if viewer.authorized {
                (job_actions(info, viewer))
            }
        }
    }
}

fn body_view(body: &[u8]) -> Markup {
    let longer = body.len() > BODY_SHOWN;
    html! {
        @match std::str::from_utf8(body) {
            Ok(text) => { pre { (cut(text, BODY_SHOWN)) } }
            Err(_) => {
                p { "Not UTF-8: in base64." }
                pre { (STANDARD.encode(&body[..body.len().min(BODY_SHOWN / 4 * 3)])) }
            }
        }
        @if longer { p { "The first " (BODY_SHOWN) " bytes or so of " (body.len()) "." } }
    }
}

/// `text`'s first `most` bytes or fewer, whole characters only.
fn cut(text: &str, most: usize) -> &str {
    let mut end = text.len().min(most);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn job_actions(info: &JobInfo, viewer: &Viewer) -> Markup {
    html! {
        @match (info.state, &info.topic) {
            (JobState::Dead, Some(topic)) => { div { (dead_job_forms(viewer, topic, &info.id)) } }
            (JobState::Waiting | JobState::Ready, _) => {
                @if info.state == JobState::Waiting {
                    form method="post" action="/actions/promote" {
                        (token_field(viewer))
                        (named_field("id", "id_base64", info.id.as_bytes()))
                        button { "Run this job now" }
                    }
                }
                form method="post" action="/actions/remove" {
                    (token_field(viewer))
                    (named_field("id", "id_base64", info.id.as_bytes()))
                    button { "Remove this job" }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{BODY_SHOWN, render};
    use crate::http::console::viewer::Viewer;
    use delayer_client::{JobInfo, State};

    fn page_of(body: &[u8], authorized: bool) -> String {
        let info = JobInfo {
            state: State::Dead,
            topic: Some("t".into()),
            body: Some(body.to_vec()),
            ..JobInfo::unknown("j")
        };
        let viewer = Viewer {
            guarded: true,
            authorized,
            form_token: "ft".into(),
        };
        render(&info, &viewer).into_string()
    }

    #[test]
    fn a_body_is_escaped_cut_to_a_few_kib_and_shown_in_base64_when_it_is_not_text() {
        let page = page_of(b"<script>alert(1)</script>", true);
        assert!(
            page.contains("<pre>&lt;script&gt;alert(1)&lt;/script&gt;</pre>"),
            "{page}"
        );

        // Cut at a character's edge: "é" is two bytes.
        let long = "é".repeat(BODY_SHOWN);
        let page = page_of(long.as_bytes(), true);
        let shown = "é".repeat(BODY_SHOWN / 2);
        assert!(page.contains(&format!("<pre>{shown}</pre>")), "{page}");
        assert!(page.contains(&format!("of {}.", 2 * BODY_SHOWN)), "{page}");

        let page = page_of(b"\xff\x00bin", true);
        assert!(
            page.contains("Not UTF-8: in base64.</p><pre>/wBiaW4=</pre>"),
            "{page}"
        );
    }

    #[test]
    fn without_a_login_a_page_shows_no_body_and_no_form() {
        let page = page_of(b"secret", false);
        assert!(
            !page.contains("secret") && !page.contains("<form"),
            "{page}"
        );
        assert!(
            page.contains("href=\"/login?next=%2Fjob%3Fid%3Dj\""),
            "{page}"
        );
        let page = page_of(b"secret", true);
        assert!(page.contains("action=\"/actions/requeue\"") && page.contains("value=\"ft\""));
    }
}
