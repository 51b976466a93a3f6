//! The console's logouts: a key per ended session in Redis, so that every daemon sharing that
//! Redis (behind one load balancer, say) refuses a copy of its cookie at once; the key goes when
//! the session would have expired anyway.

use std::sync::Arc;
use std::time::Duration;

use delayer_wire::keys::LOGGED_OUT_PREFIX;
use delayer_wire::redis::{AsyncCommands, RedisResult};
use delayer_wire::shared_connection::SharedConnection;

/// Ends the console session `id` for every daemon on `redis`, for `ttl` (at least what is left of
/// its life).
pub(super) async fn end(redis: &Arc<SharedConnection>, id: &str, ttl: Duration) -> RedisResult<()> {
    let key = format!("{LOGGED_OUT_PREFIX}{id}");
    redis
        .get()
        .await?
        .set_ex(&key, 1, ttl.as_secs().max(1))
        .await
}

/// Whether the console session `id` was ended by [`end`].
pub(super) async fn ended(redis: &Arc<SharedConnection>, id: &str) -> RedisResult<bool> {
    redis
        .get()
        .await?
        .exists(format!("{LOGGED_OUT_PREFIX}{id}"))
        .await
}
