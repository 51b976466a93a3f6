//! QStash's API (`docs/webhooks.md#qstashs-api`), served with `[qstash] token`: messages published
//! through it are jobs of the topic [`TOPIC`], each with its destination and settings in its body
//! (a [`Message`]), delivered by the webhook module's message sink, signed with `[qstash]`'s keys.

mod destination;
mod message;
pub mod queues;
mod settings;

pub use destination::{Allowed, Destination, Resolver, percent_decoded};
pub use message::{Callback, Flow, Message, header_map, new_id};
pub use settings::{QstashSettings, SigningKeys};

/// The delayer topic of the messages published through QStash's API.
pub const TOPIC: &str = "qstash";

/// What the API needs to serve: `[qstash]`, and the daemon's own address, which it refuses as a
/// destination.
pub struct Api {
    pub settings: QstashSettings,
    /// `[http] listen`.
    pub listen: std::net::SocketAddr,
}
