//! Delivery of due jobs to sinks (Kafka): which delayer topics a sink takes.

mod patterns;

pub use patterns::matches;
