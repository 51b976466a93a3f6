//! The command line: its arguments, the job subcommands for people at a shell (push, get, pop,
//! remove, stats, dead, schedule), and `--check-config`.

mod args;
pub mod check;
pub mod commands;
mod output;
pub mod schedule;

pub use args::{Args, Command, Serving};
