//! The exact command sequences the PHP and Go Delayer clients send (see shared/wire-format.md).
//! Written out command by command on purpose: this is the contract the daemon must honour.

use std::time::{SystemTime, UNIX_EPOCH};

use delayer_wire::keys::{JOB_POOL, Layout, job_bucket};
use redis::RedisResult;
use redis::aio::MultiplexedConnection;

/// What the clients use when the caller gives no `ready_max_lifetime`.
pub const READY_MAX_LIFETIME: i64 = 604_800;

/// A job as the clients return it from pop.
#[derive(Debug, PartialEq, Eq)]
pub struct Message {
    pub id: String,
    pub topic: String,
    pub body: String,
}

/// The client's clock: whole unix seconds, like PHP's `time()`.
pub fn now_seconds() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// push(message, delay, ready_max_lifetime):
/// `MULTI; HMSET bucket topic t body b; EXPIRE bucket delay+lifetime; ZADD pool now+delay id; EXEC`.
pub async fn push(
    connection: &mut MultiplexedConnection,
    message: &Message,
    delay: i64,
) -> RedisResult<()> {
    push_in(Layout::LEGACY, connection, message, delay).await
}

/// [`push`] as the clients of `layout`'s generation send it (the same commands on other keys:
/// `Layout::JOP` for the PHP client 1.0.1).
pub async fn push_in(
    layout: Layout,
    connection: &mut MultiplexedConnection,
    message: &Message,
    delay: i64,
) -> RedisResult<()> {
    let Message { id, topic, body } = message;
    let job = [id, topic, body].map(String::as_bytes);
    push_bytes_in(layout, connection, job, delay).await
}

/// [`push`] of a job whose `[id, topic, body]` are any bytes, as the PHP and Go clients can
/// write them (a PHP string is bytes; so is a Go string).
pub async fn push_bytes(
    connection: &mut MultiplexedConnection,
    job: [&[u8]; 3],
    delay: i64,
) -> RedisResult<()> {
    push_bytes_in(Layout::LEGACY, connection, job, delay).await
}

async fn push_bytes_in(
    layout: Layout,
    connection: &mut MultiplexedConnection,
    [id, topic, body]: [&[u8]; 3],
    delay: i64,
) -> RedisResult<()> {
    // The legacy clients' layouts have one pool for every topic: the topic names no key here.
    let keys = layout.keys("");
    let bucket = keys.bucket(id);
    redis::pipe()
        .atomic()
        .cmd("HMSET")
        .arg(&bucket)
        .arg("topic")
        .arg(topic)
        .arg("body")
        .arg(body)
        .cmd("EXPIRE")
        .arg(&bucket)
        .arg(delay + READY_MAX_LIFETIME)
        .cmd("ZADD")
        .arg(keys.pool())
        .arg(now_seconds() + delay)
        .arg(id)
        .query_async::<()>(connection)
        .await
}

/// pop(topic): `RPOP ready_queue`, then [`fetch`].
pub async fn pop(
    connection: &mut MultiplexedConnection,
    topic: &str,
) -> RedisResult<Option<Message>> {
    pop_in(Layout::LEGACY, connection, topic).await
}

/// [`pop`] as the clients of `layout`'s generation send it.
pub async fn pop_in(
    layout: Layout,
    connection: &mut MultiplexedConnection,
    topic: &str,
) -> RedisResult<Option<Message>> {
    let keys = layout.keys(topic);
    let id: Option<String> = redis::cmd("RPOP")
        .arg(keys.ready(topic))
        .query_async(connection)
        .await?;
    match id {
        Some(id) => fetch(connection, &keys.bucket(&id), id).await,
        None => Ok(None),
    }
}

/// bPop(topic, timeout): `BRPOP ready_queue timeout`, then [`fetch`].
pub async fn bpop(
    connection: &mut MultiplexedConnection,
    topic: &str,
    timeout_seconds: u64,
) -> RedisResult<Option<Message>> {
    let popped: Option<(String, String)> = redis::cmd("BRPOP")
        .arg(Layout::LEGACY.keys(topic).ready(topic))
        .arg(timeout_seconds)
        .query_async(connection)
        .await?;
    match popped {
        Some((_, id)) => fetch(connection, &job_bucket(&id), id).await,
        None => Ok(None),
    }
}

/// `HGETALL bucket`; topic or body missing → "expired or incomplete" (None); else `DEL bucket`.
async fn fetch(
    connection: &mut MultiplexedConnection,
    bucket: &[u8],
    id: String,
) -> RedisResult<Option<Message>> {
    let fields: std::collections::HashMap<String, String> = redis::cmd("HGETALL")
        .arg(bucket)
        .query_async(connection)
        .await?;
    let (Some(topic), Some(body)) = (fields.get("topic"), fields.get("body")) else {
        return Ok(None);
    };
    let message = Message {
        id,
        topic: topic.clone(),
        body: body.clone(),
    };
    redis::cmd("DEL")
        .arg(bucket)
        .query_async::<()>(connection)
        .await?;
    Ok(Some(message))
}

/// remove(id): `MULTI; ZREM pool id; DEL bucket; EXEC` → true only if both removed something.
pub async fn remove(connection: &mut MultiplexedConnection, id: &str) -> RedisResult<bool> {
    let (removed_from_pool, removed_bucket): (i64, i64) = redis::pipe()
        .atomic()
        .cmd("ZREM")
        .arg(JOB_POOL)
        .arg(id)
        .cmd("DEL")
        .arg(job_bucket(id))
        .query_async(connection)
        .await?;
    Ok(removed_from_pool > 0 && removed_bucket > 0)
}

/// The PHP client's connect: always `AUTH password` and `SELECT database`.
pub async fn php_connect(
    socket: &std::path::Path,
    password: &str,
    database: i64,
) -> MultiplexedConnection {
    let info = redis::ConnectionAddr::Unix(socket.to_path_buf());
    let client =
        redis::Client::open(redis::IntoConnectionInfo::into_connection_info(info).unwrap())
            .unwrap();
    let mut connection = client
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_response_timeout(None),
        )
        .await
        .unwrap();
    redis::cmd("AUTH")
        .arg(password)
        .query_async::<()>(&mut connection)
        .await
        .unwrap();
    redis::cmd("SELECT")
        .arg(database)
        .query_async::<()>(&mut connection)
        .await
        .unwrap();
    connection
}
