//! The daemon's console's logouts: a key per ended session in Redis, so that every daemon sharing
//! that Redis (behind one load balancer, say) refuses a copy of its cookie at once; the key goes
//! when the session would have expired anyway.

use std::time::Duration;

use redis::AsyncCommands;

use super::Client;
use crate::error::{Error, Result};
use delayer_wire::keys::LOGGED_OUT_PREFIX;

impl Client {
    /// Ends the console session `id` for every daemon on this Redis, for `ttl` (at least what is
    /// left of its life).
    pub async fn end_session(&self, id: &str, ttl: Duration) -> Result<()> {
        let key = format!("{LOGGED_OUT_PREFIX}{id}");
        let mut redis = self.connection().await?;
        redis
            .set_ex::<_, _, ()>(&key, 1, ttl.as_secs().max(1))
            .await
            .map_err(|error| Error::about_key(error, &key))
    }

    /// Whether the console session `id` was ended by [`end_session`](Client::end_session).
    pub async fn session_ended(&self, id: &str) -> Result<bool> {
        let mut redis = self.connection().await?;
        Ok(redis.exists(format!("{LOGGED_OUT_PREFIX}{id}")).await?)
    }
}
