//! The console at `/`: an overview of Redis, this daemon and every listed topic; a page per topic
//! with its ready, reserved and dead jobs a window at a time; charts of what happened (`history`);
//! a page per job; the waiting jobs a page at a time; the schedules; the consumers; and actions on
//! dead and waiting jobs, topics and schedules. Server-rendered HTML, a file per page, from maud
//! templates: every value is escaped unless marked otherwise, so nothing a client wrote to Redis
//! (a topic, an id, a body) can become markup. Guarded as `session` says; sent as `layout` says,
//! with a Content-Security-Policy that allows only our own script and style, and nothing from
//! another host.

mod actions;
mod chart;
mod consumers;
mod fields;
mod forms;
mod history;
mod job;
mod kept;
mod layout;
mod links;
mod login;
mod login_tries;
mod logouts;
mod notice;
mod overview;
mod rates;
mod schedules;
mod session;
pub(super) mod state;
mod times;
mod topic;
mod viewer;
mod waiting;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};

use super::state::AppState;
use actions::form;

/// The console's pages and actions: a new page is a file of this folder and a route here.
pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/", get(overview::show))
        .route("/topic", get(topic::show))
        .route("/job", get(job::show))
        .route("/waiting", get(waiting::show))
        .route("/schedules", get(schedules::show))
        .route("/consumers", get(consumers::show))
        .route("/login", get(login::form).post(login::login))
        .route("/logout", post(login::logout))
        .route("/actions/requeue", form(actions::requeue))
        .route("/actions/delete", form(actions::delete))
        .route("/actions/remove", form(actions::remove))
        .route("/actions/promote", form(actions::promote))
        .route("/actions/promote-topic", form(actions::promote_topic))
        .route("/actions/pause", form(actions::pause))
        .route("/actions/resume", form(actions::resume))
        .route("/actions/pause-schedule", form(actions::pause_schedule))
        .route("/actions/resume-schedule", form(actions::resume_schedule))
        .route("/actions/run-schedule", form(actions::run_schedule))
}
