//! Who is consuming: each consumer beats every few seconds (a Worker on its own, any other
//! through [`Client::beat`]) and its reserve tokens start with its id, so that the console lists
//! the live consumers ([`Inspector::consumers`](crate::Inspector::consumers)) and names the one
//! holding each reservation.

use super::Client;
use crate::error::{Error, Result};
use delayer_wire::consumer::{Heartbeat, token};
use delayer_wire::keys::CONSUMERS;
use delayer_wire::name::unique_id;

impl Client {
    /// A handle on the same connection whose reserves are made for consumer `id`: each reserve
    /// token starts with it (`<id>.<32 hex digits>`), so that the console names it as the holder
    /// of those reservations. Beat for it with [`beat`](Client::beat); a Worker does both itself.
    pub fn as_consumer(&self, id: impl Into<String>) -> Client {
        Client {
            inner: self.inner.clone(),
            consumer: Some(id.into().into()),
        }
    }

    /// The consumer this handle reserves for, if one (see [`as_consumer`](Client::as_consumer)).
    pub fn consumer(&self) -> Option<&str> {
        self.consumer.as_deref()
    }

    /// Writes consumer `beat.id`'s heartbeat, by Redis's clock: one script call. Beat every
    /// [`BEAT`](crate::consumer::BEAT) or so, well within `beat.lifetime`, after which the
    /// console marks the consumer gone.
    pub async fn beat(&self, beat: &Heartbeat) -> Result<()> {
        let heartbeat = &self.inner.scripts.heartbeat;
        let mut connection = self.connection().await?;
        let written = heartbeat.beat(&mut connection, beat).await;
        written.map_err(|error| Error::about_key(error, CONSUMERS))
    }

    /// Removes consumer `id` from the list at once: its clean stop.
    pub async fn forget_consumer(&self, id: &str) -> Result<()> {
        let heartbeat = &self.inner.scripts.heartbeat;
        let mut connection = self.connection().await?;
        let removed = heartbeat.forget(&mut connection, id).await;
        removed.map_err(|error| Error::about_key(error, CONSUMERS))
    }

    /// The token of a reserve call: starting with this handle's consumer, if it has one.
    pub(crate) fn reserve_token(&self) -> String {
        match self.consumer() {
            Some(consumer) => token(consumer, &unique_id()),
            None => unique_id(),
        }
    }
}
