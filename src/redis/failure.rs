//! A Redis failure in words someone running the daemon understands: what happened, at which
//! address, and which key of `[redis]` to look at; its kind ([`FailureKind`]) beside them.

use deadpool_redis::PoolError;
use deadpool_redis::redis::{self, ErrorKind, RedisConnectionInfo};
use delayer_wire::connection::{
    self, CONNECT_TIMEOUT, NOT_A_SENTINEL, RESPONSE_TIMEOUT, SENTINEL_DENIED, SENTINEL_REFUSED,
};

use super::connect::target;
use super::failure_kind::{FailureKind, UNTRUSTED, tls_error};
use super::{RedisSettings, SentinelSettings, address_list};

/// A failure to talk to Redis, as someone running the daemon reads it (what it displays).
#[derive(Debug)]
pub struct Failure {
    /// What kind of failure: an outage is logged once per kind.
    pub kind: FailureKind,
    /// What went wrong, in words.
    pub message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl Failure {
    /// Why getting a connection failed, in the words of someone running the daemon.
    pub fn connecting(error: &PoolError, config: &RedisSettings) -> Failure {
        match error {
            // Before the I/O failures: a TLS handshake fails as I/O, but no wait mends it.
            PoolError::Backend(error) if FailureKind::of(error) == FailureKind::Tls => {
                Failure::of(error, config)
            }
            // Connecting includes a handshake: a Redis that is blocked (or a host that drops packets)
            // lets it time out.
            PoolError::Backend(error) if error.is_timeout() => Failure {
                kind: FailureKind::Timeout,
                message: format!(
                    "Redis at {} did not answer within {} s of connecting{}",
                    config.address(),
                    CONNECT_TIMEOUT.as_secs(),
                    // A plain Redis waits for the rest of what it takes for a command.
                    if config.tls.is_some() {
                        " (with tls = true: is this its tls-port?)"
                    } else {
                        ""
                    }
                ),
            },
            // Any other I/O failure while connecting (no such host, no route): nothing was lost.
            PoolError::Backend(error) if error.is_io_error() => Failure {
                kind: FailureKind::Unreachable,
                message: format!(
                    "cannot reach Redis at {}: {error}{}",
                    config.address(),
                    // Redis's TLS port hangs up on a client that speaks no TLS.
                    if config.tls.is_none() && error.to_string().contains("reset by peer") {
                        " (a TLS port? then set [redis] tls = true)"
                    } else {
                        ""
                    }
                ),
            },
            PoolError::Backend(error) => Failure::of(error, config),
            other => Failure {
                kind: FailureKind::Other,
                message: format!("Redis at {}: {other}", config.address()),
            },
        }
    }

    /// Like [`connecting`](Failure::connecting), for an error from a command.
    pub fn of(error: &redis::RedisError, config: &RedisSettings) -> Failure {
        let address = config.address();
        let kind = FailureKind::of(error);
        let message = match kind {
            FailureKind::Password if error.to_string().contains(SENTINEL_REFUSED) => format!(
                "Redis {address}: the sentinels refused the password ([redis] {}): {}",
                match &config.sentinel {
                    Some(SentinelSettings {
                        username: Some(username),
                        ..
                    }) => format!("sentinel_username {username:?} and its sentinel_password"),
                    Some(sentinel) if sentinel.password.is_some() =>
                        "sentinel_password is set".into(),
                    _ => "sentinel_password is empty".into(),
                },
                error.detail().unwrap_or_default()
            ),
            FailureKind::Password => format!(
                "Redis at {address} refused the password ([redis] password is {}): {error}",
                if config.password.is_some() {
                    "set"
                } else {
                    "empty"
                }
            ),
            FailureKind::Database => format!(
                "Redis at {address} has no database {} ([redis] database): {error}",
                config.database
            ),
            FailureKind::Unreachable => format!("cannot reach Redis at {address}: {error}"),
            FailureKind::ConnectionLost => {
                format!("lost the connection to Redis at {address}: {error}")
            }
            FailureKind::Timeout => format!(
                "Redis at {address} did not answer within {} s",
                RESPONSE_TIMEOUT.as_secs()
            ),
            FailureKind::OutOfMemory => format!("Redis at {address} is out of memory: {error}"),
            FailureKind::ReadOnly => format!("Redis at {address} is a read-only replica: {error}"),
            FailureKind::Loading => format!("Redis at {address} is loading its data set: {error}"),
            FailureKind::CannotSave => {
                format!("Redis at {address} refuses writes because it cannot save to disk: {error}")
            }
            FailureKind::Busy => format!("Redis at {address} is busy running a script: {error}"),
            FailureKind::NoPermission if error.to_string().contains(SENTINEL_DENIED) => format!(
                "Redis {address}: the sentinels do not let {} ask where the master is (ACL: it needs \
             +sentinel|get-master-addr-by-name): {}",
                match config
                    .sentinel
                    .as_ref()
                    .and_then(|sentinel| sentinel.username.as_ref())
                {
                    Some(username) => format!("[redis] sentinel_username {username:?}"),
                    None => "their default user".to_string(),
                },
                error.detail().unwrap_or_default()
            ),
            FailureKind::NoPermission => format!(
                "Redis at {address} does not let this user do what delayer needs (ACL): {error}"
            ),
            FailureKind::Tls => tls_message(error, config),
            FailureKind::NoMaster if error.to_string().contains(NOT_A_SENTINEL) => format!(
                "Redis {address}: {} is a plain Redis, not a sentinel: [redis] sentinels wants the \
             addresses of `redis-server --sentinel` (port 26379 by default)",
                error
                    .detail()
                    .and_then(|detail| detail.split(" said ").next())
                    .unwrap_or("one of the sentinels")
            ),
            FailureKind::NoMaster => match &config.sentinel {
                Some(sentinel) => format!(
                    "none of the sentinels {} knows a master named {:?}: [redis] sentinel_master must \
                 be the name of their `sentinel monitor` line",
                    address_list(&sentinel.addresses),
                    sentinel.master
                ),
                None => format!("Redis at {address}: {error}"),
            },
            FailureKind::NotCluster => format!(
                "{address} is not a Redis Cluster ({error}): [redis] cluster wants nodes of a \
             cluster (cluster-enabled yes); for a single Redis give host and port instead"
            ),
            FailureKind::Other => format!("Redis at {address} failed: {error}"),
        };
        Failure { kind, message }
    }

    /// Like [`of`](Failure::of), with Redis's own words when it refused the password: redis-rs puts
    /// its own ("Password authentication failed") in their place, so AUTH is sent once more by hand,
    /// on a connection without credentials, to hear what Redis says.
    pub async fn refusal(error: &redis::RedisError, config: &RedisSettings) -> Failure {
        let mut failure = Failure::of(error, config);
        if error.kind() == ErrorKind::AuthenticationFailed
            && let Some(said) = auth_reply(config).await
        {
            failure.message = match &config.username {
                Some(username) => format!(
                    "Redis at {} refused user {username:?} with the password given ([redis] username \
                 and password): {said}",
                    config.address()
                ),
                None => format!(
                    "Redis at {} refused the password ([redis] password is set): {said}",
                    config.address()
                ),
            };
        }
        failure
    }
}

/// What Redis answers to `AUTH [username] <password>`, when it refuses it.
async fn auth_reply(config: &RedisSettings) -> Option<String> {
    let password = config.password.as_deref()?;
    let info = target(config).ok()?.resolve().await.ok()?;
    let info = info.set_redis_settings(RedisConnectionInfo::default());
    let mut connection = redis::Client::open(info)
        .ok()?
        .get_multiplexed_async_connection_with_config(&connection::config())
        .await
        .ok()?;
    let refused = redis::cmd("AUTH")
        .arg(config.username.as_deref())
        .arg(password)
        .query_async::<()>(&mut connection)
        .await
        .err()?;
    Some(match (refused.code(), refused.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ => refused.to_string(),
    })
}

/// A failed TLS handshake, with what to change in `[redis]`.
fn tls_message(error: &redis::RedisError, config: &RedisSettings) -> String {
    let address = config.address();
    let untrusted = match tls_error(error) {
        Some(rustls::Error::InvalidCertificate(why)) => Some(format!("{why:?}")),
        // The cluster client keeps only the words of the error it met.
        _ => error
            .to_string()
            .split_once(UNTRUSTED)
            .map(|(_, why)| why.trim_start_matches(':').trim().to_string()),
    };
    if let Some(why) = untrusted {
        return format!(
            "Redis at {address} shows a TLS certificate delayer does not trust ({why}): [redis] \
             tls_ca_file must name the CA that signed it, and the certificate must name {}",
            if config.sentinel.is_some() {
                "the address the sentinels give (and the sentinels' theirs)".to_string()
            } else if config.cluster.is_some() {
                "the address each node announces".to_string()
            } else {
                format!("the host {}", config.host)
            }
        );
    }
    match tls_error(error) {
        Some(rustls::Error::AlertReceived(alert))
            if format!("{alert:?}").contains("Certificate") =>
        {
            format!(
                "Redis at {address} refused delayer's TLS client certificate ({alert:?}): it \
                 wants one its CA signed, in [redis] tls_cert_file and tls_key_file"
            )
        }
        Some(rustls::Error::InvalidMessage(_)) => format!(
            "Redis at {address} does not speak TLS ({error}): is {} its tls-port?",
            config.port
        ),
        _ => format!("TLS with Redis at {address} failed: {error}"),
    }
}
