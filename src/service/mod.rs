//! Process plumbing: detaching into the background, the pid file, the stop signals, the logs, the
//! open-file limit, and what background duties share.

pub mod daemon;
pub mod duty;
pub mod logging;
pub mod open_files;
pub mod pidfile;
pub mod signals;

pub use signals::Stop;
