//! The deadpool-redis pool built from `[redis]` (for the master its sentinels name, with
//! Sentinel), and Redis failures told in words a user understands.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};

use anyhow::{Context, Result, anyhow, bail};
use deadpool_redis::redis::{
    self, ClientTlsConfig, ConnectionAddr, ConnectionInfo, ErrorKind, IntoConnectionInfo,
    RedisConnectionInfo, TlsCertificates,
};
use deadpool_redis::{Connection, Manager, Pool, PoolError};
use delayer_client::Target;
use delayer_client::connection::{
    MASTER_CHECK, NO_SUCH_MASTER, NOT_A_SENTINEL, SENTINEL_DENIED, SENTINEL_REFUSED,
};
use tokio_util::sync::CancellationToken;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::{RedisConfig, SentinelConfig, TlsConfig};
use delayer_client::connection::{self, CONNECT_TIMEOUT, RESPONSE_TIMEOUT};

/// Connections to the configured Redis, nothing connected until first used. With Sentinel, the
/// pool is for the master found last, checked every [`MASTER_CHECK`]
/// ([`follow_master`](RedisPool::follow_master)) and after a failure
/// ([`forget_master`](RedisPool::forget_master)).
pub struct RedisPool {
    target: Target,
    config: RedisConfig,
    /// The pool, and the address it connects to.
    pool: Mutex<Option<(String, Pool)>>,
    /// Counts the times the master was found elsewhere: a drain under way on the old one stops.
    moves: AtomicU64,
}

impl RedisPool {
    /// The pool for `target`, which `[redis]` of `config` names.
    pub fn new(config: &RedisConfig, target: Target) -> Result<RedisPool> {
        let pool = match &target {
            Target::Address(info) => Some((info.addr().to_string(), build(*info.clone(), config)?)),
            // Built for the master once found; never for a cluster (ClusterMover's own).
            Target::Sentinel(_) | Target::Cluster(_) => None,
        };
        Ok(RedisPool {
            target,
            config: config.clone(),
            pool: Mutex::new(pool),
            moves: AtomicU64::new(0),
        })
    }

    /// How many times the master was found elsewhere so far: a drain that sees this change stops
    /// writing to the old master.
    pub fn master_moves(&self) -> u64 {
        self.moves.load(Ordering::Relaxed)
    }

    /// A connection from the pool (a new one when none is idle).
    pub async fn get(&self) -> Result<Connection, PoolError> {
        let current = self.pool.lock().expect("not poisoned").clone();
        let pool = match current {
            Some((_, pool)) => pool,
            None => {
                let info = self.target.resolve().await.map_err(PoolError::Backend)?;
                self.use_master(info)?
            }
        };
        pool.get().await
    }

    /// With Sentinel, until `stop`: every [`MASTER_CHECK`] asks where the master is, and when it
    /// moved, drops the pool so that the next connection goes there. Beside the loop, never in
    /// its way: a sentinel slow to answer holds up no move, and one that does not answer changes
    /// nothing (the connections say whether the master still works).
    pub async fn follow_master(&self, stop: &CancellationToken) {
        if let Target::Address(_) = self.target {
            return;
        }
        loop {
            tokio::select! {
                () = tokio::time::sleep(MASTER_CHECK) => {}
                () = stop.cancelled() => return,
            }
            // Sentinels that hang must not hold up a stop.
            let found = tokio::select! {
                found = self.target.resolve() => found,
                () = stop.cancelled() => return,
            };
            let Ok(info) = found else {
                continue;
            };
            let mut pool = self.pool.lock().expect("not poisoned");
            if pool
                .as_ref()
                .is_some_and(|(address, _)| *address != info.addr().to_string())
            {
                *pool = None;
                self.moves.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// After a failure: with Sentinel, the master may have changed; ask again on the next `get`.
    pub fn forget_master(&self) {
        if let Target::Sentinel(_) = self.target {
            *self.pool.lock().expect("not poisoned") = None;
        }
    }

    fn use_master(&self, info: ConnectionInfo) -> Result<Pool, PoolError> {
        let address = info.addr().to_string();
        let pool = build(info, &self.config).map_err(|error| {
            PoolError::Backend(redis::RedisError::from((
                ErrorKind::InvalidClientConfig,
                "cannot build the Redis connection pool",
                format!("{error:#}"),
            )))
        })?;
        *self.pool.lock().expect("not poisoned") = Some((address, pool.clone()));
        Ok(pool)
    }

    /// Where Redis is, for other connections (the pool watch's).
    pub fn target(&self) -> Target {
        self.target.clone()
    }

    /// Closes connections past `idle_timeout` or `conn_max_lifetime`, and idle ones beyond
    /// `max_idle`.
    pub fn prune(&self) {
        let Some((_, pool)) = self.pool.lock().expect("not poisoned").clone() else {
            return;
        };
        let config = &self.config;
        let mut kept = 0;
        pool.retain(|_, metrics| {
            let fresh = config
                .idle_timeout
                .is_none_or(|limit| metrics.last_used() < limit)
                && config
                    .conn_max_lifetime
                    .is_none_or(|limit| metrics.age() < limit);
            kept += usize::from(fresh);
            fresh && kept <= config.max_idle
        });
    }
}

fn build(info: ConnectionInfo, config: &RedisConfig) -> Result<Pool> {
    let manager = Manager::new_with_config(info, connection::config())?;
    Pool::builder(manager)
        .max_size(config.max_active)
        .build()
        .context("cannot build the Redis connection pool")
}

/// Where `[redis]` says Redis is: its address, or the master its sentinels name (asked over the
/// same TLS, with `sentinel_username` and `sentinel_password`: a master's are not theirs).
pub fn target(config: &RedisConfig) -> Result<Target> {
    if let Some(nodes) = &config.cluster {
        let nodes = nodes.iter().map(|(host, port)| {
            connection_info(&RedisConfig {
                host: host.clone(),
                port: *port,
                ..config.clone()
            })
        });
        let nodes = nodes.collect::<Result<Vec<_>>>()?;
        let cluster = match &config.tls {
            Some(tls) => Target::cluster_tls(nodes, certificates(tls)?),
            None => Target::cluster(nodes),
        };
        return cluster.context("cannot set up the Redis Cluster client");
    }
    let node = connection_info(config)?;
    let Some(sentinel) = &config.sentinel else {
        return Ok(node.into());
    };
    let sentinels = sentinel
        .addresses
        .iter()
        .map(|(host, port)| {
            let addr = match node.addr() {
                ConnectionAddr::TcpTls {
                    insecure,
                    tls_params,
                    ..
                } => ConnectionAddr::TcpTls {
                    host: host.clone(),
                    port: *port,
                    insecure: *insecure,
                    tls_params: tls_params.clone(),
                },
                _ => ConnectionAddr::Tcp(host.clone(), *port),
            };
            let mut settings = RedisConnectionInfo::default();
            if let Some(password) = &sentinel.password {
                settings = settings.set_password(password);
            }
            if let Some(username) = &sentinel.username {
                settings = settings.set_username(username);
            }
            node.clone().set_addr(addr).set_redis_settings(settings)
        })
        .collect();
    Ok(Target::sentinel(sentinels, &sentinel.master, node))
}

/// Where and how to connect, as `[redis]` says; with TLS, its files read and checked.
pub fn connection_info(config: &RedisConfig) -> Result<ConnectionInfo> {
    let addr = match &config.tls {
        _ if config.is_unix_socket() => ConnectionAddr::Unix(config.host.clone().into()),
        Some(tls) => ConnectionAddr::TcpTls {
            host: config.host.clone(),
            port: config.port,
            insecure: tls.insecure,
            tls_params: None,
        },
        None => ConnectionAddr::Tcp(config.host.clone(), config.port),
    };
    let mut settings = RedisConnectionInfo::default().set_db(config.database);
    if let Some(username) = &config.username {
        settings = settings.set_username(username);
    }
    if let Some(password) = &config.password {
        settings = settings.set_password(password);
    }
    let info = addr.into_connection_info()?.set_redis_settings(settings);
    match &config.tls {
        Some(tls) => with_certificates(info, tls),
        None => Ok(info),
    }
}

/// How to reach the cluster node at `address` (`host:port`, an IPv6 host in brackets), with
/// `[redis]`'s credentials and TLS.
pub fn node_info(config: &RedisConfig, address: &str) -> Result<ConnectionInfo> {
    let (host, port) = address
        .rsplit_once(':')
        .and_then(|(host, port)| Some((host.trim_matches(['[', ']']), port.parse().ok()?)))
        .with_context(|| format!("{address:?} is not host:port"))?;
    connection_info(&RedisConfig {
        host: host.to_string(),
        port,
        cluster: None,
        ..config.clone()
    })
}

/// `info` with the CA and client certificate of `tls` attached, each file named when it cannot
/// be read or holds no usable PEM.
fn with_certificates(info: ConnectionInfo, tls: &TlsConfig) -> Result<ConnectionInfo> {
    let client = redis::Client::build_with_tls(info, certificates(tls)?)
        .map_err(|error| anyhow!("the TLS files of [redis] are not usable: {error}"))?;
    Ok(client.get_connection_info().clone())
}

/// The CA and client certificate of `tls`, read, each file named when it cannot be read or holds
/// no usable PEM.
fn certificates(tls: &TlsConfig) -> Result<TlsCertificates> {
    static CRYPTO: Once = Once::new();
    // rustls wants its cryptography chosen once per process: ring, the one compiled in.
    CRYPTO.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    let root_cert = match &tls.ca_file {
        Some(path) => Some(pem_file(path, "tls_ca_file", Pem::Certificates)?),
        None => None,
    };
    let client_tls = match &tls.client {
        Some((cert, key)) => {
            let client_cert = pem_file(cert, "tls_cert_file", Pem::Certificates)?;
            let client_key = pem_file(key, "tls_key_file", Pem::PrivateKey)?;
            check_pair(&client_cert, &client_key).with_context(|| {
                format!(
                    "[redis] tls_cert_file {} and tls_key_file {} do not belong together",
                    cert.display(),
                    key.display()
                )
            })?;
            Some(ClientTlsConfig {
                client_cert,
                client_key,
            })
        }
        None => None,
    };
    Ok(TlsCertificates {
        client_tls,
        root_cert,
    })
}

/// Fails unless `key` is the private key of the first certificate in `cert` (both PEM, parsed
/// already): rustls would otherwise refuse them at every connection, as if Redis were down.
fn check_pair(cert: &[u8], key: &[u8]) -> Result<()> {
    let chain = CertificateDer::pem_slice_iter(cert).collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(key)?;
    rustls::ClientConfig::builder()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_client_auth_cert(chain, key)?;
    Ok(())
}

/// What a PEM file of `[redis]` must hold.
enum Pem {
    Certificates,
    PrivateKey,
}

/// The file at `path` (`[redis] key`), read and checked to hold what `holds` says.
fn pem_file(path: &Path, key: &str, holds: Pem) -> Result<Vec<u8>> {
    let named = || format!("[redis] {key} {}", path.display());
    let pem = std::fs::read(path).with_context(|| format!("cannot read {}", named()))?;
    let usable = match holds {
        Pem::Certificates => CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map(|certificates| !certificates.is_empty()),
        Pem::PrivateKey => PrivateKeyDer::from_pem_slice(&pem).map(|_| true),
    };
    let wanted = match holds {
        Pem::Certificates => "PEM certificate (-----BEGIN CERTIFICATE-----)",
        Pem::PrivateKey => "PEM private key (-----BEGIN PRIVATE KEY-----)",
    };
    match usable {
        Ok(true) => Ok(pem),
        Ok(false) => bail!("{} holds no {wanted}", named()),
        Err(error) => bail!("{} does not hold a usable {wanted}: {error}", named()),
    }
}

/// Connects once and returns the server's `redis_version`.
pub async fn server_version(config: &RedisConfig) -> Result<String> {
    if config.cluster.is_some() {
        let mut connection = target(config)?
            .connect()
            .await
            .map_err(|error| anyhow!(describe_redis(&error, config)))?;
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut connection)
            .await
            .map_err(|error| anyhow!(describe_redis(&error, config)))?;
        return Ok(redis_version(&info));
    }
    let pool = RedisPool::new(config, target(config)?)?;
    let mut connection = match pool.get().await {
        Ok(connection) => connection,
        Err(PoolError::Backend(error)) if failure_kind(&error) == Failure::Password => {
            bail!(describe_refusal(&error, config).await)
        }
        // With what connecting says (a TLS port spoken to in plain text, and the reverse).
        Err(error) => bail!(describe(&error, config)),
    };
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut connection)
        .await
        .map_err(|error| anyhow!(describe_redis(&error, config)))?;
    Ok(redis_version(&info))
}

/// `redis_version` from the reply of `INFO server`.
fn redis_version(info: &str) -> String {
    info.lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .unwrap_or("unknown")
        .to_string()
}

/// Like [`describe_redis`], with Redis's own words when it refused the password: redis-rs puts
/// its own ("Password authentication failed") in their place, so AUTH is sent once more by hand,
/// on a connection without credentials, to hear what Redis says.
pub async fn describe_refusal(error: &redis::RedisError, config: &RedisConfig) -> Trouble {
    let mut trouble = describe_redis(error, config);
    if error.kind() == ErrorKind::AuthenticationFailed
        && let Some(said) = auth_reply(config).await
    {
        trouble.message = match &config.username {
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
    trouble
}

/// What Redis answers to `AUTH [username] <password>`, when it refuses it.
async fn auth_reply(config: &RedisConfig) -> Option<String> {
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

/// A failure to talk to Redis: its kind (an outage is logged once per kind) and what to tell the user.
#[derive(Debug)]
pub struct Trouble {
    pub kind: Failure,
    pub message: String,
}

impl std::fmt::Display for Trouble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// What went wrong, as far as it changes what the daemon says and waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Redis refuses the configured password (or wants one).
    Password,
    /// Redis has no such database.
    Database,
    /// No connection could be made.
    Unreachable,
    /// An open connection broke (Redis went away, or the connection was killed).
    ConnectionLost,
    /// Redis took longer than [`RESPONSE_TIMEOUT`] to reply: it may be alive but blocked.
    Timeout,
    /// Redis refuses writes: maxmemory reached under a `noeviction` policy.
    OutOfMemory,
    /// Redis refuses writes: it is a replica.
    ReadOnly,
    /// Redis is loading its data set after a restart.
    Loading,
    /// Redis refuses writes: it cannot save to disk (`stop-writes-on-bgsave-error`).
    CannotSave,
    /// Another client's script runs too long: Redis answers nothing else.
    Busy,
    /// The Redis user may not run a command or touch a key the daemon needs (ACL).
    NoPermission,
    /// TLS failed: Redis's certificate is not trusted, it wants ours, or it speaks no TLS there.
    Tls,
    /// No sentinel knows a master of the configured name, or one is not a sentinel at all.
    NoMaster,
    /// `[redis] cluster` names a Redis whose cluster support is off.
    NotCluster,
    Other,
}

impl Failure {
    /// What the daemon does about it, said after the failure itself.
    pub fn waiting_for(self) -> &'static str {
        match self {
            Failure::Password | Failure::Database => "retrying until Redis accepts them",
            Failure::Tls | Failure::NoMaster | Failure::NotCluster => "retrying",
            Failure::Unreachable | Failure::ConnectionLost | Failure::Timeout => {
                "retrying until it answers"
            }
            Failure::OutOfMemory => {
                "no job can move until Redis has memory to spare (maxmemory, eviction policy); retrying"
            }
            Failure::ReadOnly => {
                "no job can move until it is promoted or [redis] names the master; retrying"
            }
            Failure::Loading => "waiting until it has loaded",
            Failure::CannotSave => "no job can move until it can save again; retrying",
            Failure::Busy => "waiting until the script ends (SCRIPT KILL ends it)",
            Failure::NoPermission => {
                "no job can move until the user may (see the ACL a delayer user needs in the README); retrying"
            }
            Failure::Other => "retrying",
        }
    }

    /// The line that ends an outage of this kind.
    pub fn recovered(self, address: &str) -> String {
        match self {
            Failure::OutOfMemory | Failure::ReadOnly | Failure::CannotSave => {
                format!("Redis at {address} accepts writes again")
            }
            Failure::Loading => format!("Redis at {address} has loaded its data"),
            Failure::Password
            | Failure::Database
            | Failure::NoPermission
            | Failure::Tls
            | Failure::NoMaster
            | Failure::NotCluster
            | Failure::Other => {
                format!("Redis at {address} works again")
            }
            Failure::Unreachable | Failure::ConnectionLost | Failure::Timeout | Failure::Busy => {
                format!("Redis at {address} answers again")
            }
        }
    }
}

/// Why getting a connection failed, in the words of someone running the daemon.
pub fn describe(error: &PoolError, config: &RedisConfig) -> Trouble {
    match error {
        // Before the I/O failures: a TLS handshake fails as I/O, but no wait mends it.
        PoolError::Backend(error) if failure_kind(error) == Failure::Tls => {
            describe_redis(error, config)
        }
        // Connecting includes a handshake: a Redis that is blocked (or a host that drops packets)
        // lets it time out.
        PoolError::Backend(error) if error.is_timeout() => Trouble {
            kind: Failure::Timeout,
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
        PoolError::Backend(error) if error.is_io_error() => Trouble {
            kind: Failure::Unreachable,
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
        PoolError::Backend(error) => describe_redis(error, config),
        other => Trouble {
            kind: Failure::Other,
            message: format!("Redis at {}: {other}", config.address()),
        },
    }
}

/// Like [`describe`], for an error from a command.
pub fn describe_redis(error: &redis::RedisError, config: &RedisConfig) -> Trouble {
    let address = config.address();
    let kind = failure_kind(error);
    let message = match kind {
        Failure::Password if error.to_string().contains(SENTINEL_REFUSED) => format!(
            "Redis {address}: the sentinels refused the password ([redis] {}): {}",
            match &config.sentinel {
                Some(SentinelConfig {
                    username: Some(username),
                    ..
                }) => format!("sentinel_username {username:?} and its sentinel_password"),
                Some(sentinel) if sentinel.password.is_some() => "sentinel_password is set".into(),
                _ => "sentinel_password is empty".into(),
            },
            error.detail().unwrap_or_default()
        ),
        Failure::Password => format!(
            "Redis at {address} refused the password ([redis] password is {}): {error}",
            if config.password.is_some() {
                "set"
            } else {
                "empty"
            }
        ),
        Failure::Database => format!(
            "Redis at {address} has no database {} ([redis] database): {error}",
            config.database
        ),
        Failure::Unreachable => format!("cannot reach Redis at {address}: {error}"),
        Failure::ConnectionLost => format!("lost the connection to Redis at {address}: {error}"),
        Failure::Timeout => format!(
            "Redis at {address} did not answer within {} s",
            RESPONSE_TIMEOUT.as_secs()
        ),
        Failure::OutOfMemory => format!("Redis at {address} is out of memory: {error}"),
        Failure::ReadOnly => format!("Redis at {address} is a read-only replica: {error}"),
        Failure::Loading => format!("Redis at {address} is loading its data set: {error}"),
        Failure::CannotSave => {
            format!("Redis at {address} refuses writes because it cannot save to disk: {error}")
        }
        Failure::Busy => format!("Redis at {address} is busy running a script: {error}"),
        Failure::NoPermission if error.to_string().contains(SENTINEL_DENIED) => format!(
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
        Failure::NoPermission => format!(
            "Redis at {address} does not let this user do what delayer needs (ACL): {error}"
        ),
        Failure::Tls => tls_trouble(error, config),
        Failure::NoMaster if error.to_string().contains(NOT_A_SENTINEL) => format!(
            "Redis {address}: {} is a plain Redis, not a sentinel: [redis] sentinels wants the \
             addresses of `redis-server --sentinel` (port 26379 by default)",
            error
                .detail()
                .and_then(|detail| detail.split(" said ").next())
                .unwrap_or("one of the sentinels")
        ),
        Failure::NoMaster => match &config.sentinel {
            Some(sentinel) => format!(
                "none of the sentinels {} knows a master named {:?}: [redis] sentinel_master must \
                 be the name of their `sentinel monitor` line",
                crate::config::address_list(&sentinel.addresses),
                sentinel.master
            ),
            None => format!("Redis at {address}: {error}"),
        },
        Failure::NotCluster => format!(
            "{address} is not a Redis Cluster ({error}): [redis] cluster wants nodes of a \
             cluster (cluster-enabled yes); for a single Redis give host and port instead"
        ),
        Failure::Other => format!("Redis at {address} failed: {error}"),
    };
    Trouble { kind, message }
}

/// True for failures that may pass by themselves or be fixed on the Redis side while we wait.
pub fn is_retryable(error: &redis::RedisError) -> bool {
    failure_kind(error) != Failure::Other
}

/// True for failures that retrying cannot fix: the configured password, database or TLS files
/// are wrong.
pub fn is_config_error(error: &redis::RedisError) -> bool {
    matches!(
        failure_kind(error),
        Failure::Password
            | Failure::Database
            | Failure::Tls
            | Failure::NoMaster
            | Failure::NotCluster
    )
}

/// The TLS error under `error`, if TLS is what failed.
fn tls_error(error: &redis::RedisError) -> Option<&rustls::Error> {
    type Shared = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = cause {
        if let Some(tls) = error.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        cause = if let Some(shared) = error.downcast_ref::<Shared>() {
            // redis-rs keeps the error it wraps behind an Arc.
            Some(shared.as_ref())
        } else if let Some(io) = error.downcast_ref::<std::io::Error>() {
            // An io::Error's source() skips the error it wraps: look at that one itself.
            io.get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static))
        } else {
            error.source()
        };
    }
    None
}

/// How rustls words a certificate it does not trust.
const UNTRUSTED: &str = "invalid peer certificate";

/// A failed TLS handshake, with what to change in `[redis]`.
fn tls_trouble(error: &redis::RedisError, config: &RedisConfig) -> String {
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

/// True when a command that failed this way may still have run: it was sent, but its reply never
/// came (a timeout, or a connection that broke while waiting). A reply that is an error means the
/// command did not run.
pub fn reply_may_be_lost(error: &redis::RedisError) -> bool {
    matches!(
        failure_kind(error),
        Failure::Timeout | Failure::ConnectionLost
    )
}

fn failure_kind(error: &redis::RedisError) -> Failure {
    let text = error.to_string();
    let code = error.code().unwrap_or("");
    if error.kind() == ErrorKind::AuthenticationFailed
        || matches!(code, "NOAUTH" | "WRONGPASS")
        || ["invalid password", "without any password"]
            .iter()
            .any(|marker| text.contains(marker))
    {
        Failure::Password
    } else if error.kind() == ErrorKind::InvalidClientConfig
        && (text.contains(NO_SUCH_MASTER) || text.contains(NOT_A_SENTINEL))
    {
        Failure::NoMaster
    } else if text.contains("cluster support disabled") {
        Failure::NotCluster
    } else if text.contains("DB index") {
        Failure::Database
    } else if code == "OOM" || text.contains("OOM command not allowed") {
        Failure::OutOfMemory
    } else if code == "READONLY" || text.contains("READONLY") {
        Failure::ReadOnly
    } else if code == "LOADING" {
        Failure::Loading
    } else if code == "MISCONF" {
        Failure::CannotSave
    } else if code == "BUSY" {
        Failure::Busy
    } else if code == "NOPERM"
        || ["NOPERM", "can't access", "has no permissions"]
            .iter()
            .any(|marker| text.contains(marker))
    {
        Failure::NoPermission
    } else if tls_error(error).is_some() || text.contains(UNTRUSTED) {
        Failure::Tls
    } else if error.is_timeout() {
        Failure::Timeout
    } else if error.is_connection_refusal() {
        Failure::Unreachable
    } else if error.is_io_error() || error.is_connection_dropped() {
        Failure::ConnectionLost
    } else {
        Failure::Other
    }
}
