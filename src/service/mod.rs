//! Process plumbing: detaching into the background, the pid file, the stop signals, the logs.

pub mod daemon;
pub mod logging;
pub mod pidfile;
pub mod signals;

pub use signals::Stop;
