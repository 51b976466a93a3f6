//! What delayer's tests share: a throwaway redis-server and Kafka broker, polling helpers, the exact command
//! sequences of the legacy PHP and Go clients, and job fillers and counters. Not published.
#![forbid(unsafe_code)]

pub mod cluster;
pub mod jobs;
mod kafka_broker;
pub mod legacy_client;
mod polling;
pub mod proxy;
mod redis_server;
pub mod schedules;
pub mod sentinel;
mod server_programs;
pub mod tls;

pub use kafka_broker::KafkaBroker;
pub use polling::{wait_for, wait_until_sync};
pub use redis_server::{RedisServer, free_port};
