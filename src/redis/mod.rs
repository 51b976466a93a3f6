//! Redis as the daemon meets it: the pool, where Redis is and how to connect (TLS included), and
//! what a failure means and how to say it.

mod connect;
mod failure;
mod failure_kind;
mod pool;
mod settings;
mod tls;
mod version;

pub use connect::{node_info, target};
pub use failure::Failure;
pub use failure_kind::{FailureKind, reply_may_be_lost, slot_moving};
pub use pool::RedisPool;
pub use settings::{RedisSettings, SentinelSettings, TlsSettings, address_list};
pub use version::server_version;
