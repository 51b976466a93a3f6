//! The webhook gate script (`webhook_gate.lua`): a webhook's leases in flight and its spaced
//! starts, over every daemon.

use std::time::Duration;

use redis::RedisResult;
use redis::aio::ConnectionLike;

use super::host_clock;

script_type!(
    /// The webhook gate script: leases to start requests.
    WebhookGateScript,
    "webhook_gate.lua"
);

/// A webhook's limits, as the gate applies them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// The most requests in flight; `None`: no limit.
    pub most: Option<u32>,
    /// The least time between two starts; `None`: no rate.
    pub spacing: Option<Duration>,
    /// How long a lease lasts after its start (a request's timeout, and a margin).
    pub lease: Duration,
}

/// How far ahead a start is handed out: a call serves the starts of this long.
pub const AHEAD: Duration = Duration::from_millis(200);

/// The keys of webhook `name`'s gate: its leases and its next free start (one hash slot).
pub fn keys(name: &str) -> (String, String) {
    (
        format!("delayer:webhook:{{{name}}}:in_flight"),
        format!("delayer:webhook:{{{name}}}:rate"),
    )
}

impl WebhookGateScript {
    /// Asks for a lease for each of `wanted` (names unique to the caller), giving back `done`
    /// first: how many of `wanted`, from the first, are leases now, and when the first may start
    /// (after `first`; the next ones `spacing` apart).
    pub async fn ask(
        &self,
        connection: &mut impl ConnectionLike,
        name: &str,
        limits: &Limits,
        wanted: &[String],
        done: &[String],
    ) -> RedisResult<(usize, Duration)> {
        let (leases, rate) = keys(name);
        let mut call = self.0.key(leases);
        call.key(rate)
            .arg(wanted.len())
            .arg(limits.most.unwrap_or(0))
            .arg(limits.spacing.map_or_else(
                || "0".to_string(),
                |spacing| format!("{:.3}", spacing.as_secs_f64() * 1e3),
            ))
            .arg(AHEAD.as_millis() as u64)
            .arg(limits.lease.as_millis() as u64)
            .arg(host_clock())
            .arg(wanted)
            .arg(done);
        let (granted, first): (usize, i64) = call.invoke_async(connection).await?;
        Ok((granted, Duration::from_micros(first.max(0) as u64)))
    }
}
