//! How every connection of ours (the daemon's and the client's) talks to Redis: its timeouts, and
//! where Redis is (an address, or the master its sentinels name).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{
    AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, ErrorKind, RedisError, RedisResult,
};
use tracing::info;

/// How long connecting may take before it counts as a failure.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a reply may take. Far above the longest script call (a full batch of the largest
/// size takes tens of ms), so that a slow Redis (forking for a save, say) is not taken for a lost
/// one; and it bounds how long a stop waits for a hung Redis.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// The timeouts every connection uses, except those that block on purpose.
pub fn config() -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
}

/// Where Redis is: one address, or the master that Redis Sentinel names at the time.
#[derive(Clone)]
pub enum Target {
    Address(Box<ConnectionInfo>),
    Sentinel(Arc<Sentinels>),
}

/// A master found through its sentinels, asked again at every new connection, so that after a
/// failover new connections go to the new master.
pub struct Sentinels {
    sentinels: Vec<ConnectionInfo>,
    master: String,
    /// How to talk to the master once found (credentials, database, TLS); its address is replaced.
    node: ConnectionInfo,
    /// Where the master was last found ("host:port"), to tell a failover once.
    last: Mutex<Option<String>>,
    /// The sentinel that answered last: asked first next time, so that one that hangs costs a
    /// wait once, not at every connection.
    answered: AtomicUsize,
}

/// How often a long-lived connection asks the sentinels where the master is: after a failover the
/// old master may take writes for many seconds more (until the sentinels demote it), writes the
/// new master never sees.
pub const MASTER_CHECK: Duration = Duration::from_secs(1);

/// `host:port`, with an IPv6 host in brackets.
pub fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// What a [`Target`] resolution fails with when no sentinel knows the master's name.
pub const NO_SUCH_MASTER: &str = "no sentinel knows a master of this name";

impl Target {
    /// The master named `master` by the sentinels at `sentinels`; `node` says how to talk to it
    /// (its address is ignored). Each sentinel is asked in turn until one answers.
    pub fn sentinel(sentinels: Vec<ConnectionInfo>, master: &str, node: ConnectionInfo) -> Target {
        Target::Sentinel(Arc::new(Sentinels {
            sentinels,
            master: master.to_string(),
            node,
            last: Mutex::new(None),
            answered: AtomicUsize::new(0),
        }))
    }

    /// Where to connect now.
    pub async fn resolve(&self) -> RedisResult<ConnectionInfo> {
        match self {
            Target::Address(info) => Ok(info.as_ref().clone()),
            Target::Sentinel(sentinels) => sentinels.master().await,
        }
    }

    /// A new connection, to the master as the sentinels name it now.
    pub async fn connect(
        &self,
        config: &AsyncConnectionConfig,
    ) -> RedisResult<MultiplexedConnection> {
        redis::Client::open(self.resolve().await?)?
            .get_multiplexed_async_connection_with_config(config)
            .await
    }
}

impl From<ConnectionInfo> for Target {
    fn from(info: ConnectionInfo) -> Target {
        Target::Address(Box::new(info))
    }
}

impl Sentinels {
    async fn master(&self) -> RedisResult<ConnectionInfo> {
        let first = self.answered.load(Ordering::Relaxed);
        let count = self.sentinels.len();
        let mut failure = None;
        for index in (first..first + count).map(|index| index % count) {
            match self.ask(&self.sentinels[index]).await {
                Ok(Some((host, port))) => {
                    self.answered.store(index, Ordering::Relaxed);
                    return Ok(self.found(host, port));
                }
                // A sentinel that knows no such master says more than one that cannot be reached.
                Ok(None) => {
                    failure = Some(RedisError::from((
                        ErrorKind::InvalidClientConfig,
                        NO_SUCH_MASTER,
                        self.master.clone(),
                    )));
                }
                Err(error) => {
                    failure.get_or_insert(error);
                }
            }
        }
        Err(failure.unwrap_or_else(|| {
            RedisError::from((ErrorKind::InvalidClientConfig, "no sentinels given"))
        }))
    }

    /// What `sentinel` says of the master: its host and port, or `None` for no such master.
    async fn ask(&self, sentinel: &ConnectionInfo) -> RedisResult<Option<(String, u16)>> {
        let mut connection = redis::Client::open(sentinel.clone())?
            .get_multiplexed_async_connection_with_config(&config())
            .await?;
        redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(&self.master)
            .query_async(&mut connection)
            .await
    }

    /// The master's connection info at `host:port`; a change from the last one is logged once.
    fn found(&self, host: String, port: u16) -> ConnectionInfo {
        let address = host_port(&host, port);
        let mut last = self.last.lock().expect("not poisoned");
        if let Some(was) = last.as_ref().filter(|was| **was != address) {
            info!(
                "Redis master {} is now at {address} (was {was}), as its sentinels say",
                self.master
            );
        }
        *last = Some(address);
        let addr = match self.node.addr() {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => ConnectionAddr::Tcp(host, port),
        };
        self.node.clone().set_addr(addr)
    }
}
