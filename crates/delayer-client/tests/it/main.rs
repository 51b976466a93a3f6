//! The client crate's integration tests, in one binary, each against a throwaway redis-server of
//! its own: `client` (push, pop, reserve and what ends a reservation), `compact` (the compact
//! layout of our pushes), `consumers` (heartbeats),
//! `push_many`, `schedules`, `waiting`, `worker`.

mod client;
mod compact;
mod consumers;
mod fixture;
mod push_many;
mod schedules;
mod waiting;
mod worker;
