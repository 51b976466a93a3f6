//! The schedules' page (`/schedules`): every schedule with its next ticks in its own zone, its
//! last tick and job, its counts, whether it is paused, and (to those who may act) pause, resume
//! and run now. A schedule Redis holds that cannot tick (its hash does not read, or its expression
//! or zone cannot be used) has a row that says why.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use delayer_client::State as JobState;
use delayer_client::inspector::Stored;
use delayer_wire::keys::Placement;
use delayer_wire::schedule::{Cadence, Invalid};
use futures_util::StreamExt;
use maud::{Markup, html};

use super::fields::fields;
use super::forms::{named_field, token_field};
use super::layout::{self, problem};
use super::links::{job_link, topic_link};
use super::viewer::{Viewer, viewer};
use crate::http::reply::status_of;
use crate::http::state::AppState;
use crate::text::schedule::{cadence, local, upcoming, why};

/// The next ticks a row shows.
const TICKS_SHOWN: usize = 3;
/// Last jobs looked up at once.
const LOOKUPS_AT_ONCE: usize = 16;

pub(super) async fn show(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let (viewer, _) = viewer(&state, &headers).await;
    let fields = fields(uri.query().unwrap_or_default().as_bytes());
    match rows(&state).await {
        Ok(rows) => layout::shown("Schedules", &viewer, &fields, false, render(&rows, &viewer)),
        Err(error) => problem(status_of(&error), &viewer, &error.to_string(), "/"),
    }
}

/// A schedule as its row shows it.
struct Row {
    stored: Stored,
    /// When it ticks, or why it cannot.
    cadence: Result<Cadence, String>,
    /// The state of its last job, when it is cheap to know (see [`rows`]).
    last_job: Option<JobState>,
}

/// A row of the table: a schedule, or one whose hash does not read.
enum Line {
    Schedule(Box<Row>),
    Unreadable(Invalid),
}

impl Line {
    fn name(&self) -> &str {
        match self {
            Line::Schedule(row) => &row.stored.definition.name,
            Line::Unreadable(invalid) => &invalid.schedule,
        }
    }
}

/// Every schedule by name, with its last job's state. In the cluster layout that state is left
/// to the job's page: finding a job by id alone there asks every topic.
async fn rows(state: &AppState) -> delayer_client::Result<Vec<Line>> {
    let list = state.inspector.schedules().await?;
    let look_up = state.client.settings().layout.placement == Placement::Shared;
    let rows: Vec<Row> = futures_util::stream::iter(list.readable)
        .map(|stored| async move {
            let last_job = match &stored.last_job {
                // Without the body: the page never shows it.
                Some(id) if look_up => state.inspector.get_up_to(id, 0).await.ok(),
                _ => None,
            };
            Row {
                cadence: cadence(&stored),
                last_job: last_job.map(|info| info.state),
                stored,
            }
        })
        .buffered(LOOKUPS_AT_ONCE)
        .collect()
        .await;
    let mut lines: Vec<Line> = rows
        .into_iter()
        .map(|row| Line::Schedule(Box::new(row)))
        .collect();
    lines.extend(list.unreadable.into_iter().map(Line::Unreadable));
    lines.sort_by(|a, b| a.name().cmp(b.name()));
    Ok(lines)
}

fn render(rows: &[Line], viewer: &Viewer) -> Markup {
    html! {
        h1 { "Schedules" }
        @if rows.is_empty() {
            p { "No schedules. Define them in delayer.conf (a [schedule.NAME] section each), with "
                code { "delayer schedule add" } ", or with the HTTP API." }
        } @else {
            p { "Times are in each schedule's own zone." }
            table {
                tr {
                    th { "name" } th { "cron" } th { "zone" } th { "topic" } th { "next ticks" }
                    th { "last tick" } th { "last job" } th.n { "fired" } th.n { "skipped" }
                    th.n { "missed" } th.n { "caught up" } th { "state" }
                    @if viewer.authorized { th { "act" } }
                }
                @for line in rows {
                    @match line {
                        Line::Schedule(row) => (row_of(row, viewer)),
                        Line::Unreadable(invalid) => (unreadable_row(invalid, viewer)),
                    }
                }
            }
        }
    }
}

/// A schedule whose hash does not read: its name, and why across the other columns.
fn unreadable_row(invalid: &Invalid, viewer: &Viewer) -> Markup {
    let columns = if viewer.authorized { 12 } else { 11 };
    html! {
        tr {
            td { (invalid.schedule) }
            td.bad colspan=(columns) {
                "unreadable: " (why(invalid)) "; no daemon claims its ticks until it is saved again"
            }
        }
    }
}

fn row_of(row: &Row, viewer: &Viewer) -> Markup {
    let stored = &row.stored;
    let definition = &stored.definition;
    let cadence = row.cadence.as_ref().ok();
    let local = |tick: i64| local(cadence, tick);
    html! {
        tr {
            td { (definition.name) }
            td.nw { code { (definition.cron) } }
            td { (definition.zone) }
            td { (topic_link(&definition.topic.as_str().into())) }
            td.nw {
                @if let Err(why) = &row.cadence {
                    span.bad { "unusable: " (why) }
                } @else if stored.paused_since.is_some() {
                    "—"
                } @else {
                    @for (index, tick) in upcoming(stored, cadence, TICKS_SHOWN).into_iter().enumerate() {
                        @if index > 0 { br; }
                        (local(tick))
                    }
                }
            }
            td.nw { (stored.last_tick.map_or_else(|| "—".into(), local)) }
            td {
                @if let Some(id) = &stored.last_job {
                    (job_link(id))
                    @if let Some(state) = row.last_job { " (" (state.name()) ")" }
                } @else { "—" }
            }
            td.n { (stored.fired) }
            td.n { (stored.skipped) }
            td.n { (stored.missed) }
            td.n { (stored.caught_up) }
            td {
                @if let Some(since) = stored.paused_since {
                    b { "paused" } " since " (local((since * 1000.0) as i64))
                } @else { "active" }
            }
            @if viewer.authorized { td { (schedule_forms(viewer, stored)) } }
        }
    }
}

/// A schedule's buttons: pause or resume it, and run it now.
fn schedule_forms(viewer: &Viewer, stored: &Stored) -> Markup {
    let (action, label) = match stored.paused_since {
        Some(_) => ("resume-schedule", "Resume"),
        None => ("pause-schedule", "Pause"),
    };
    html! {
        @for (action, label) in [(action, label), ("run-schedule", "Run now")] {
            form.inline method="post" action={ "/actions/" (action) } {
                (token_field(viewer))
                (named_field("name", "name_base64", stored.definition.name.as_bytes()))
                button { (label) }
            }
            " "
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Line, Row, render};
    use crate::http::console::viewer::Viewer;
    use crate::text::schedule::cadence;
    use delayer_client::inspector::{Definition, Source, Stored};
    use delayer_wire::schedule::Invalid;

    fn page(authorized: bool, paused: bool) -> String {
        // A topic's name may be markup (a name may not).
        let mut definition = Definition::new("n", "0 9 * * *", "<i>t</i>");
        definition.zone = "Asia/Tokyo".into();
        let stored = Stored {
            definition,
            source: Source::Api,
            version: 1,
            // 2026-11-27T00:00:00Z.
            next: Some(1_795_737_600_000),
            paused_since: paused.then_some(1_795_700_000.0),
            last_tick: Some(1_795_651_200_000),
            last_job: Some("n@2026-11-26T00:00:00Z".into()),
            fired: 4,
            skipped: 0,
            missed: 2,
            caught_up: 1,
            runs: 0,
        };
        let row = Row {
            cadence: cadence(&stored),
            last_job: Some(delayer_client::State::Ready),
            stored,
        };
        let viewer = Viewer {
            guarded: true,
            authorized,
            form_token: "ft".into(),
        };
        render(&[Line::Schedule(Box::new(row))], &viewer).into_string()
    }

    #[test]
    fn a_row_shows_ticks_in_the_schedules_zone_escaped_and_forms_only_to_those_who_may_act() {
        let active = page(true, false);
        assert!(
            active.contains("2026-11-27T09:00:00+09:00<br>2026-11-28T09:00:00+09:00<br>"),
            "{active}"
        );
        assert!(active.contains("2026-11-26T09:00:00+09:00"), "{active}");
        assert!(
            active.contains("n@2026-11-26T00:00:00Z</a> (ready)"),
            "{active}"
        );
        assert!(
            active.contains("&lt;i&gt;t&lt;/i&gt;</a>") && !active.contains("<i>"),
            "{active}"
        );
        assert!(
            active.contains("action=\"/actions/pause-schedule\"")
                && active.contains("action=\"/actions/run-schedule\"")
                && active.contains("value=\"ft\""),
            "{active}"
        );
        let paused = page(true, true);
        assert!(
            paused.contains("action=\"/actions/resume-schedule\"")
                && paused.contains("<b>paused</b> since 2026-11-26T22:33:20+09:00"),
            "{paused}"
        );
        assert!(!page(false, false).contains("<form"));
    }

    #[test]
    fn a_schedule_that_cannot_tick_has_a_row_that_says_why() {
        let mut definition = Definition::new("odd", "0 9 * * *", "t");
        definition.zone = "Mars/Olympus".into();
        let stored = Stored::new(definition, Some(1_795_737_600_000));
        let unusable = Line::Schedule(Box::new(Row {
            cadence: cadence(&stored),
            last_job: None,
            stored,
        }));
        let unreadable = Line::Unreadable(Invalid {
            schedule: "bad".into(),
            field: "catch_up",
            why: "\"bogus\" is not one of skip, latest, all".into(),
        });
        let viewer = Viewer {
            guarded: false,
            authorized: true,
            form_token: "ft".into(),
        };
        let page = render(&[unreadable, unusable], &viewer).into_string();
        assert!(
            page.contains("<td>bad</td><td class=\"bad\" colspan=\"12\">unreadable: catch_up: &quot;bogus&quot;"),
            "{page}"
        );
        assert!(
            page.contains("unusable: zone: &quot;Mars/Olympus&quot;"),
            "{page}"
        );
        assert!(!page.contains("1795737600000"), "{page}");
    }
}
