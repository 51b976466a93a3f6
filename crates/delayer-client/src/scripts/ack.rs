//! The ack script (`ack.lua`): finishes a job so that it is never delivered again.

use redis::aio::ConnectionLike;
use redis::{RedisResult, Script};

use super::malformed;
use crate::keys;

pub struct AckScript(Script);

impl Default for AckScript {
    fn default() -> AckScript {
        AckScript(script!("ack.lua"))
    }
}

/// What acking found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acked {
    /// The job was reserved, as it should be.
    WasReserved,
    /// The job existed but its reservation had lapsed: it may have been delivered again.
    Lapsed,
    /// There was no such job.
    Unknown,
}

impl AckScript {
    pub async fn run(&self, connection: &mut impl ConnectionLike, id: &str) -> RedisResult<Acked> {
        let code: i64 = self
            .0
            .key(keys::RESERVED)
            .key(keys::JOB_POOL)
            .key(keys::job_bucket(id))
            .arg(id)
            .invoke_async(connection)
            .await?;
        match code {
            1 => Ok(Acked::WasReserved),
            0 => Ok(Acked::Lapsed),
            -1 => Ok(Acked::Unknown),
            _ => Err(malformed("ack")),
        }
    }
}
