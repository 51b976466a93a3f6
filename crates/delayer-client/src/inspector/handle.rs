//! The Inspector: a client's connection and settings, and the scripts only operators call.

use std::sync::LazyLock;

use redis::{RedisResult, Value};

use crate::client::Client;
use crate::error::Result;
use delayer_wire::scripts::compact_job::CompactJobScript;
use delayer_wire::scripts::compact_page::CompactPageScript;
use delayer_wire::scripts::compact_stage::StageScript;
use delayer_wire::scripts::dead_job::DeadJobScript;
use delayer_wire::scripts::pool_page::PoolPageScript;
use delayer_wire::scripts::promote::PromoteScript;
use delayer_wire::scripts::requeue_dead::RequeueDeadScript;
use delayer_wire::scripts::resume::ResumeScript;
use delayer_wire::scripts::schedule_claim::ScheduleClaimScript;
use delayer_wire::scripts::schedule_save::ScheduleSaveScript;
use delayer_wire::scripts::schedule_state::ScheduleStateScript;

/// Looks at the queues and acts on them for operators: stats, waiting jobs a page at a time,
/// dead lists, pauses, consumers, the history and schedules. Made from a [`Client`]
/// ([`Inspector::new`]), whose connection, layout and settings it uses; cheap to make and to
/// clone.
///
/// ```no_run
/// # async fn example() -> delayer_client::Result<()> {
/// use delayer_client::{Client, Inspector};
/// let client = Client::connect("redis://127.0.0.1:6379/0").await?;
/// let inspector = Inspector::new(&client);
/// for topic in inspector.stats().await?.topics {
///     println!("{}: {} ready, {} dead", topic.topic, topic.ready, topic.dead);
/// }
/// inspector.requeue_dead("order.close").await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Inspector {
    pub(super) client: Client,
}

/// The scripts of the Inspector's calls: the same for every Inspector (a script is its text and
/// hash).
#[derive(Default)]
pub(super) struct Scripts {
    pub(super) compact_job: CompactJobScript,
    pub(super) compact_stage: StageScript,
    pub(super) compact_page: CompactPageScript,
    pub(super) dead_job: DeadJobScript,
    pub(super) pool_page: PoolPageScript,
    pub(super) promote: PromoteScript,
    pub(super) requeue_dead: RequeueDeadScript,
    pub(super) resume: ResumeScript,
    pub(super) schedule_claim: ScheduleClaimScript,
    pub(super) schedule_save: ScheduleSaveScript,
    pub(super) schedule_state: ScheduleStateScript,
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(Scripts::default);

impl Inspector {
    /// An Inspector on `client`'s connection, with its layout and settings.
    pub fn new(client: &Client) -> Inspector {
        Inspector {
            client: client.clone(),
        }
    }

    /// The scripts its calls run.
    pub(super) fn scripts(&self) -> &'static Scripts {
        &SCRIPTS
    }

    /// The Redis server's version (`INFO server`; on a cluster, the first master's that
    /// answers), if this Redis user may ask.
    pub async fn server_version(&self) -> Result<Option<String>> {
        let info: RedisResult<Value> = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut self.client.connection().await?)
            .await;
        match info {
            Ok(info) => Ok(version_in(&info)),
            Err(error) if error.code() == Some("NOPERM") => Ok(None),
            Err(error) => Err(error.into()),
        }
    }
}

/// The `redis_version` of an INFO reply: one text, or on a cluster one per node.
fn version_in(info: &Value) -> Option<String> {
    match info {
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok().and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("redis_version:"))
                .map(|version| version.trim().to_string())
        }),
        Value::VerbatimString { text, .. } | Value::SimpleString(text) => {
            version_in(&Value::BulkString(text.clone().into_bytes()))
        }
        Value::Array(items) => items.iter().find_map(version_in),
        Value::Map(pairs) => pairs.iter().find_map(|(_, value)| version_in(value)),
        _ => None,
    }
}
