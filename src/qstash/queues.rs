//! QStash's queues, in Redis: each queue's settings (a field of `delayer:qstash:queues`) and its
//! line, the ids of its messages not finished yet in the order they were enqueued
//! (`delayer:qstash:queue:{NAME}:line`). A message of a queue is sent only while it is among the
//! first `parallelism` of its line, and leaves the line once delivered or dead: so a queue's
//! messages go in order, at most `parallelism` at once, over every daemon.

use delayer_client::redis::aio::ConnectionLike;
use delayer_client::redis::{self, RedisResult};
use serde::{Deserialize, Serialize};

/// The queues' settings, by name.
const QUEUES: &str = "delayer:qstash:queues";

/// A queue's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Queue {
    pub parallelism: u32,
    pub paused: bool,
    /// Unix ms.
    pub created_at: i64,
    pub updated_at: i64,
}

/// Whether `name` may name a queue: letters, digits, `.`, `_` and `-`, as QStash's.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// The line's key and its counter's (one hash slot).
fn keys(name: &str) -> (String, String) {
    (
        format!("delayer:qstash:queue:{{{name}}}:line"),
        format!("delayer:qstash:queue:{{{name}}}:next"),
    )
}

/// Queue `name`'s settings, if it exists.
pub async fn get(redis: &mut impl ConnectionLike, name: &str) -> RedisResult<Option<Queue>> {
    let raw: Option<String> = redis::cmd("HGET")
        .arg(QUEUES)
        .arg(name)
        .query_async(redis)
        .await?;
    Ok(raw.and_then(|raw| serde_json::from_str(&raw).ok()))
}

/// Every queue, by name.
pub async fn list(redis: &mut impl ConnectionLike) -> RedisResult<Vec<(String, Queue)>> {
    let all: Vec<(String, String)> = redis::cmd("HGETALL").arg(QUEUES).query_async(redis).await?;
    let mut queues: Vec<(String, Queue)> = all
        .into_iter()
        .filter_map(|(name, raw)| Some((name, serde_json::from_str(&raw).ok()?)))
        .collect();
    queues.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(queues)
}

/// Writes queue `name`'s settings.
pub async fn save(redis: &mut impl ConnectionLike, name: &str, queue: &Queue) -> RedisResult<()> {
    redis::cmd("HSET")
        .arg(QUEUES)
        .arg(name)
        .arg(serde_json::to_string(queue).expect("a queue serializes"))
        .query_async(redis)
        .await
}

/// Deletes queue `name`: its settings and its line (its messages are sent as they come, alone).
pub async fn delete(redis: &mut impl ConnectionLike, name: &str) -> RedisResult<()> {
    redis::cmd("HDEL")
        .arg(QUEUES)
        .arg(name)
        .query_async::<()>(redis)
        .await?;
    let (line, next) = keys(name);
    redis::cmd("DEL")
        .arg(line)
        .arg(next)
        .query_async(redis)
        .await
}

/// Puts message `id` at the end of queue `name`'s line.
pub async fn enqueue(redis: &mut impl ConnectionLike, name: &str, id: &str) -> RedisResult<()> {
    let (line, next) = keys(name);
    let place: i64 = redis::cmd("INCR").arg(next).query_async(redis).await?;
    redis::cmd("ZADD")
        .arg(line)
        .arg(place)
        .arg(id)
        .query_async(redis)
        .await
}

/// Takes message `id` out of queue `name`'s line (delivered, dead or cancelled).
pub async fn leave(redis: &mut impl ConnectionLike, name: &str, id: &str) -> RedisResult<()> {
    redis::cmd("ZREM")
        .arg(keys(name).0)
        .arg(id)
        .query_async(redis)
        .await
}

/// How many messages of queue `name` are not finished.
pub async fn lag(redis: &mut impl ConnectionLike, name: &str) -> RedisResult<u64> {
    redis::cmd("ZCARD")
        .arg(keys(name).0)
        .query_async(redis)
        .await
}

/// The messages of queue `name` that may be sent now: the first `parallelism` of its line, none
/// while it is paused. A queue that has no settings (deleted) lets every message go.
pub async fn sendable(
    redis: &mut impl ConnectionLike,
    name: &str,
) -> RedisResult<Option<Vec<String>>> {
    let Some(queue) = get(redis, name).await? else {
        return Ok(None);
    };
    if queue.paused {
        return Ok(Some(Vec::new()));
    }
    let front: Vec<String> = redis::cmd("ZRANGE")
        .arg(keys(name).0)
        .arg(0)
        .arg(i64::from(queue.parallelism) - 1)
        .query_async(redis)
        .await?;
    Ok(Some(front))
}
