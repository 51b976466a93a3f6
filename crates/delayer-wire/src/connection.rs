//! How every connection of ours (the daemon's and the client's) talks to Redis: its timeouts, and
//! where Redis is (an address, the master its sentinels name, or a cluster).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, Pipeline, RedisError,
    RedisFuture, RedisResult, Value,
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

/// How long a blocking command may wait for its reply on a cluster connection, which cannot do
/// without a limit: the command's own timeout bounds the wait.
const BLOCKING_REPLY_LIMIT: Duration = Duration::from_secs(365 * 24 * 3600);
/// How many times a blocking command on a cluster is tried again (after a MOVED, or a lost node).
const BLOCKING_RETRIES: u32 = 3;

/// Where Redis is: one address, the master that Redis Sentinel names at the time, or a cluster
/// (the cluster layout: each command goes to the master of its keys' slot).
#[derive(Clone)]
pub enum Target {
    Address(Box<ConnectionInfo>),
    Sentinel(Arc<Sentinels>),
    Cluster(Arc<ClusterClients>),
}

/// The clients of one cluster: for commands, each reply (retries included) bounded by
/// [`RESPONSE_TIMEOUT`], so that a master that hangs fails its calls rather than holding them;
/// and for commands that block, bounded by their own timeouts only.
pub struct ClusterClients {
    commands: ClusterClient,
    blocking: ClusterClient,
}

/// A connection to one Redis, or to every master of a cluster.
#[derive(Clone)]
pub enum Connection {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(connection) => connection.req_packed_command(cmd),
            Connection::Cluster(connection) => connection.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(connection) => connection.req_packed_commands(cmd, offset, count),
            Connection::Cluster(connection) => connection.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(connection) => connection.get_db(),
            Connection::Cluster(connection) => connection.get_db(),
        }
    }
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
    /// The connection to the sentinel (by index) that answered last, kept for the next question:
    /// asked every [`MASTER_CHECK`], a sentinel would otherwise see a new connection (a TLS
    /// handshake, and the system's CA store loaded again) every second.
    open: Mutex<Option<(usize, MultiplexedConnection)>>,
}

/// How long a sentinel has to answer on the connection kept from its last answer, before a new
/// connection is tried: a healthy one answers within a millisecond.
const KEPT_ANSWER: Duration = Duration::from_millis(500);

/// How often a long-lived connection asks the sentinels where the master is: after a failover the
/// old master may take writes for many seconds more (until the sentinels demote it), writes the
/// new master never sees.
pub const MASTER_CHECK: Duration = Duration::from_secs(1);

/// A connection's address as `host:port` (IPv6 in brackets), or its socket path.
fn address_of(info: &ConnectionInfo) -> String {
    match info.addr() {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            host_port(host, *port)
        }
        other => other.to_string(),
    }
}

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
/// What a [`Target`] resolution fails with when a sentinel's address is a plain Redis.
pub const NOT_A_SENTINEL: &str = "not a sentinel";
/// What a [`Target`] resolution fails with when a sentinel's ACL does not let the user ask where
/// the master is.
pub const SENTINEL_DENIED: &str = "a sentinel denied the question";
/// What a [`Target`] resolution fails with when a sentinel refuses to answer without its password
/// (or with the one given).
pub const SENTINEL_REFUSED: &str = "a sentinel refused the password";

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
            open: Mutex::new(None),
        }))
    }

    /// A Redis Cluster: some of its nodes' addresses (with the credentials to use); the others
    /// are found from them.
    pub fn cluster(nodes: Vec<ConnectionInfo>) -> RedisResult<Target> {
        Target::cluster_with(|| ClusterClientBuilder::new(nodes.clone()))
    }

    /// A Redis Cluster over TLS: `nodes` as for [`cluster`](Target::cluster), with TLS
    /// addresses (whose `insecure` flag counts; their certificates do not), and `certificates`
    /// what to trust and what to show.
    #[cfg(feature = "tls-rustls")]
    pub fn cluster_tls(
        nodes: Vec<ConnectionInfo>,
        certificates: redis::TlsCertificates,
    ) -> RedisResult<Target> {
        let insecure = nodes.first().is_some_and(|node| {
            matches!(node.addr(), ConnectionAddr::TcpTls { insecure: true, .. })
        });
        let mode = if insecure {
            redis::TlsMode::Insecure
        } else {
            redis::TlsMode::Secure
        };
        Target::cluster_with(|| {
            ClusterClientBuilder::new(nodes.clone())
                .tls(mode)
                .certs(certificates.clone())
        })
    }

    fn cluster_with(builder: impl Fn() -> ClusterClientBuilder) -> RedisResult<Target> {
        let commands = builder()
            .connection_timeout(CONNECT_TIMEOUT)
            .response_timeout(RESPONSE_TIMEOUT)
            .build()?;
        let blocking = builder()
            .connection_timeout(CONNECT_TIMEOUT)
            .response_timeout(BLOCKING_REPLY_LIMIT)
            .overall_response_timeout(None)
            // Without an overall limit, the tries are what bounds a call to a master that is gone.
            .retries(BLOCKING_RETRIES)
            .build()?;
        Ok(Target::Cluster(Arc::new(ClusterClients {
            commands,
            blocking,
        })))
    }

    /// Where to connect now; an error for a cluster, which has no one address.
    pub async fn resolve(&self) -> RedisResult<ConnectionInfo> {
        match self {
            Target::Address(info) => Ok(info.as_ref().clone()),
            Target::Sentinel(sentinels) => sentinels.master().await,
            Target::Cluster(_) => Err(RedisError::from((
                ErrorKind::InvalidClientConfig,
                "a Redis Cluster has no single address",
            ))),
        }
    }

    /// A new connection (to the master as the sentinels name it now), with [`config`]'s timeouts.
    pub async fn connect(&self) -> RedisResult<Connection> {
        match self {
            Target::Cluster(clients) => Ok(Connection::Cluster(
                clients.commands.get_async_connection().await?,
            )),
            _ => self.connect_single(&config()).await,
        }
    }

    /// A new connection for commands that block: no limit on how long a reply may take (the
    /// command's own timeout bounds it).
    pub async fn connect_blocking(&self) -> RedisResult<Connection> {
        match self {
            Target::Cluster(clients) => Ok(Connection::Cluster(
                clients.blocking.get_async_connection().await?,
            )),
            _ => {
                self.connect_single(&config().set_response_timeout(None))
                    .await
            }
        }
    }

    async fn connect_single(&self, config: &AsyncConnectionConfig) -> RedisResult<Connection> {
        let connection = redis::Client::open(self.resolve().await?)?
            .get_multiplexed_async_connection_with_config(config)
            .await?;
        Ok(Connection::Single(connection))
    }

    /// Whether this is a cluster, whose keys are in the cluster layout.
    pub fn is_cluster(&self) -> bool {
        matches!(self, Target::Cluster(_))
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
            match self.ask(index).await {
                Ok(Some((host, port))) => {
                    self.answered.store(index, Ordering::Relaxed);
                    return Ok(self.found(host, port));
                }
                // What a sentinel answered (no such master, not a sentinel at all, a refused
                // password) says more than one that cannot be reached.
                Ok(None) => {
                    failure = Some(RedisError::from((
                        ErrorKind::InvalidClientConfig,
                        NO_SUCH_MASTER,
                        self.master.clone(),
                    )));
                }
                Err(error)
                    if error.kind() != ErrorKind::InvalidClientConfig
                        && error.kind() != ErrorKind::AuthenticationFailed =>
                {
                    failure.get_or_insert(error);
                }
                Err(answered) => failure = Some(answered),
            }
        }
        Err(failure.unwrap_or_else(|| {
            RedisError::from((ErrorKind::InvalidClientConfig, "no sentinels given"))
        }))
    }

    /// What sentinel `index` says of the master: its host and port, or `None` for no such master.
    /// Over the connection kept from the last answer when it still works, else a new one.
    async fn ask(&self, index: usize) -> RedisResult<Option<(String, u16)>> {
        // Shared, not taken: each pooled connection checks the master every second, and a
        // question asked while another was under way opened a connection of its own and kept it
        // in place of the first, so the sentinel saw a new connection every second.
        let kept = self.open.lock().expect("not poisoned").clone();
        if let Some((_, mut connection)) = kept.filter(|(asked, _)| *asked == index) {
            // Short: a kept connection may have died unnoticed (a restart, a firewall or NAT
            // forgetting it), and then a new one is tried with the usual timeouts.
            let answer = tokio::time::timeout(KEPT_ANSWER, self.question(&mut connection)).await;
            if let Ok(Ok(answer)) = answer {
                return Ok(answer);
            }
        }
        let sentinel = &self.sentinels[index];
        let asked = async {
            let mut connection = redis::Client::open(sentinel.clone())?
                .get_multiplexed_async_connection_with_config(&config())
                .await?;
            let answer = self.question(&mut connection).await?;
            self.keep(index, connection, &answer);
            Ok(answer)
        };
        // Told apart from the master refusing its password, which is another setting, and from
        // Redis failing: an address that is no sentinel is a mistake in the configuration.
        asked.await.map_err(|error: RedisError| {
            let said = || format!("{} said {error}", address_of(sentinel));
            let text = error.to_string().to_lowercase();
            if error.kind() == ErrorKind::AuthenticationFailed
                || matches!(error.code(), Some("NOAUTH" | "WRONGPASS"))
            {
                RedisError::from((ErrorKind::AuthenticationFailed, SENTINEL_REFUSED, said()))
            } else if error.code() == Some("NOPERM") {
                RedisError::from((error.kind(), SENTINEL_DENIED, said()))
            } else if text.contains("unknown command") && text.contains("sentinel") {
                // Redis 7 quotes the command 'SENTINEL', Redis 5 and 6 `SENTINEL`.
                RedisError::from((ErrorKind::InvalidClientConfig, NOT_A_SENTINEL, said()))
            } else {
                error
            }
        })
    }

    /// Keeps the connection to a sentinel that named the master, which is asked first next time.
    fn keep(
        &self,
        index: usize,
        connection: MultiplexedConnection,
        answer: &Option<(String, u16)>,
    ) {
        if answer.is_some() {
            *self.open.lock().expect("not poisoned") = Some((index, connection));
        }
    }

    async fn question(
        &self,
        connection: &mut MultiplexedConnection,
    ) -> RedisResult<Option<(String, u16)>> {
        redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(&self.master)
            .query_async(connection)
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

/// Whether a call that failed with `error` got no answer from Redis itself: a connection that
/// broke or was refused, a timeout, a reply that could not be read, or a cluster redirection (a
/// cluster connection sends a call again after such a failure, so an earlier try may have run).
/// Such a call may have run, or not; an error Redis answered means it did not.
pub fn unanswered(error: &RedisError) -> bool {
    error.code().is_none() || error.is_cluster_error()
}
