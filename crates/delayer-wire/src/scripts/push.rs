//! The push script (`push.lua`): each job's bucket and pool entry, every job's of a
//! batch written or none.

use redis::RedisResult;
use redis::aio::ConnectionLike;

use super::{host_clock, malformed};
use crate::keys::Keys;
use crate::time::score;

script_type!(
    /// The push script: writes one or more jobs of one pool.
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

/// Whether a push may write jobs in the compact layout (see [`crate::compact`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Form {
    /// Every job in the legacy form.
    Legacy,
    /// Jobs due at least this long after the push wait compact, where the layout has compact keys
    /// and a daemon stages them (as the script reads the beats).
    CompactAfter(std::time::Duration),
    /// As `CompactAfter`, a daemon's beats read by the caller: `true` when one stages. For the
    /// cluster layout, where the beats are in another slot than the jobs (the caller then
    /// writes the `wanted` key when none does).
    CompactAfterTold(std::time::Duration, bool),
}

/// Field-value pairs of a hash, set with the jobs in the same script call (see
/// [`Pusher::push`](crate::push::Pusher::push)).
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    /// The hash.
    pub key: String,
    /// What to set in it.
    pub fields: Vec<(String, String)>,
}

/// The most jobs one script call pushes: a [`Pusher`](crate::push::Pusher) sends more in
/// several calls. A call of this many holds Redis up for a few milliseconds.
pub const MAX_PUSH_BATCH: usize = 1_000;

impl PushScript {
    /// Pushes `jobs` in one call: all of them, or none when one is refused. They must share the
    /// keys `keys` names (one pool; in the cluster layout, one topic) and be at most
    /// [`MAX_PUSH_BATCH`], with no id twice. `mark` (one Redis only: its key is not declared)
    /// is set in the same call.
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        keys: &Keys,
        form: Form,
        jobs: &[NewJob<'_>],
        mark: Option<&Mark>,
    ) -> RedisResult<()> {
        register_first(connection, keys, jobs).await?;
        let mut call = self.0.key(keys.pool());
        call.key(keys.reserved());
        for job in jobs {
            call.key(keys.bucket(job.id));
        }
        let (after, stagers) = match form {
            Form::Legacy => (None, "ask"),
            Form::CompactAfter(after) => (Some(after), "ask"),
            Form::CompactAfterTold(after, true) => (Some(after), "yes"),
            Form::CompactAfterTold(after, false) => (Some(after), "no"),
        };
        let compact_after =
            after.map_or(String::new(), |after| format!("{:.3}", after.as_secs_f64()));
        call.arg(keys.registry_for_scripts())
            .arg(host_clock())
            .arg(keys.compact_for_scripts())
            .arg(compact_after)
            .arg(stagers);
        for job in jobs {
            call.arg(job.id)
                .arg(job.topic)
                .arg(job.body)
                .arg(job.due.map(score).unwrap_or_default())
                .arg(job.ttl_seconds)
                .arg(format!("{:.3}", job.delay));
        }
        if let Some(mark) = mark.filter(|mark| !mark.fields.is_empty()) {
            call.arg(&mark.key);
            for (field, value) in &mark.fields {
                call.arg(field).arg(value);
            }
        }
        let written: usize = call.invoke_async(connection).await?;
        if written != jobs.len() {
            return Err(malformed("push"));
        }
        Ok(())
    }
}

/// In the cluster layout, adds the topics of `jobs` to the registry, which is in another slot
/// than their jobs, out of the script's reach. Added first: a job of a topic the daemon does not
/// know never moves. (Elsewhere the scripts add them.)
async fn register_first(
    connection: &mut impl ConnectionLike,
    keys: &Keys,
    jobs: &[NewJob<'_>],
) -> RedisResult<()> {
    if keys.registry_for_scripts().is_empty() {
        let mut topics: Vec<&[u8]> = jobs.iter().map(|job| job.topic).collect();
        topics.sort_unstable();
        topics.dedup();
        redis::cmd("SADD")
            .arg(keys.topics())
            .arg(topics)
            .query_async::<()>(connection)
            .await?;
    }
    Ok(())
}
