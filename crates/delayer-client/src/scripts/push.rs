//! The push script (`push.lua`): a job's bucket and pool entry, written together or not at all.

use redis::RedisResult;
use redis::aio::ConnectionLike;

use super::{host_clock, malformed, seconds};
use crate::keys::Keys;
use crate::time::score;

script_type!(
    /// The push script: writes a job.
    PushScript,
    "push.lua"
);

/// One job to push.
pub struct NewJob<'a> {
    pub id: &'a [u8],
    pub topic: &'a [u8],
    pub body: &'a [u8],
    /// When it falls due, in unix seconds, for a job pushed for a time; `None` for one pushed
    /// with a delay: due that long after now by Redis's clock.
    pub due: Option<f64>,
    /// The bucket's time to live, in whole seconds.
    pub ttl_seconds: u64,
    /// The delay it was pushed with, in seconds.
    pub delay: f64,
}

impl PushScript {
    /// Pushes `job`; returns when it falls due, in unix seconds.
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        job: &NewJob<'_>,
    ) -> RedisResult<f64> {
        if keys.registry_for_scripts().is_empty() {
            // The cluster layout: the registry is in another slot than the job, out of the
            // script's reach. Added first: a job of a topic the daemon does not know never moves.
            redis::cmd("SADD")
                .arg(keys.topics())
                .arg(job.topic)
                .query_async::<()>(connection)
                .await?;
        }
        let due = self
            .0
            .key(keys.pool())
            .key(keys.bucket(job.id))
            .key(keys.reserved())
            .arg(job.id)
            .arg(job.topic)
            .arg(job.body)
            .arg(job.due.map(score).unwrap_or_default())
            .arg(job.ttl_seconds)
            .arg(format!("{:.3}", job.delay))
            .arg(keys.registry_for_scripts())
            .arg(host_clock())
            .invoke_async(connection)
            .await?;
        seconds(due).ok_or_else(|| malformed("push"))
    }
}
