//! What operators look at and act on (the CLI, the HTTP API and the console): an [`Inspector`],
//! made from a [`Client`](crate::Client) whose connection it shares, and what its calls answer.
//! Its files, by concern: `topics` (the registry of topics), `stats` (what the queues hold),
//! `lists` (a topic's ready and reserved jobs a window at a time), `dead` (dead lists, requeued or
//! deleted), `waiting` (the pool a page at a time, and waiting jobs due now), `pause` (pause and
//! resume a topic), `schedules` (recurring schedules), `consumers` (who is consuming), `history`
//! (what happened, per minute) and `compact` (jobs waiting compact written back in the legacy
//! form); `handle` holds the Inspector itself.

mod compact;
mod consumers;
mod dead;
mod handle;
mod history;
mod lists;
mod pause;
mod schedules;
mod stats;
mod topics;
mod waiting;

pub use compact::Expanded;
pub use consumers::Consumers;
pub use delayer_wire::consumer::Consumer;
pub use delayer_wire::history::Counts;
pub use delayer_wire::schedule::{CatchUp, Definition, Overlap, Source, Stored};
pub use delayer_wire::scripts::schedule_save::Saved;
pub use delayer_wire::scripts::schedule_state::Changed;
pub use handle::Inspector;
pub use history::History;
pub use lists::JobTimes;
pub use schedules::ScheduleList;
pub use stats::{Lengths, Stats, TopicDetails, TopicStats};
pub use waiting::{
    Cursor, MAX_PROMOTE, MAX_PROMOTE_READ, MAX_WAITING_READ, Promoted, TopicPromotion, WaitingJob,
    WaitingPage,
};
