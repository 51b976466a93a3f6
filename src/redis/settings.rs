//! `[redis]` as the daemon uses it: where Redis is, how to log in, the pool's limits.

use std::path::PathBuf;
use std::time::Duration;

use delayer_wire::connection::host_port;
use delayer_wire::keys::Layout;

/// The `[redis]` section. `Default` is the blank that the key table (`config/keys/`) fills in.
#[derive(Debug, Clone, Default)]
pub struct RedisSettings {
    /// A host name or address, or the path of a unix socket (starting with `/`).
    pub host: String,
    /// The port (not used with a unix socket).
    pub port: u16,
    /// The database number.
    pub database: i64,
    /// The ACL user (Redis 6+); `None`: `default`, as with a password alone.
    pub username: Option<String>,
    /// The password; `None`: no AUTH.
    pub password: Option<String>,
    /// TLS to Redis, when `tls = true`.
    pub tls: Option<TlsSettings>,
    /// Redis Sentinel: the master is where these say, not at `host` and `port`.
    pub sentinel: Option<SentinelSettings>,
    /// Redis Cluster: some of its nodes' addresses (host, port), asked in this order for the rest.
    pub cluster: Option<Vec<(String, u16)>>,
    /// The key names: `key_layout`, or the cluster layout with `cluster`.
    pub layout: Layout,
    /// The most idle connections the pool keeps.
    pub max_idle: usize,
    /// The pool size.
    pub max_active: usize,
    /// An idle connection is closed after this long (`None`: never).
    pub idle_timeout: Option<Duration>,
    /// Any connection is closed after this long (`None`: never).
    pub conn_max_lifetime: Option<Duration>,
}

/// `[redis] sentinels` and the keys that go with it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SentinelSettings {
    /// The sentinels' addresses (host, port), asked in this order.
    pub addresses: Vec<(String, u16)>,
    /// The name they monitor the master by.
    pub master: String,
    /// The sentinels' own ACL user (Redis 6.2+); `None`: `default`.
    pub username: Option<String>,
    /// The sentinels' own password (their `requirepass`, or their user's), if they want one.
    pub password: Option<String>,
}

/// `[redis] tls = true` and the files that go with it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TlsSettings {
    /// The CA that signed Redis's certificate (PEM); `None`: the system's trusted CAs.
    pub ca_file: Option<PathBuf>,
    /// This client's certificate (PEM), for a Redis that checks clients (mutual TLS).
    pub cert_file: Option<PathBuf>,
    /// The key of `cert_file` (PEM).
    pub key_file: Option<PathBuf>,
    /// Do not check Redis's certificate at all.
    pub insecure: bool,
}

impl TlsSettings {
    /// The client certificate and its key, when both are given.
    pub fn client(&self) -> Option<(&PathBuf, &PathBuf)> {
        self.cert_file.as_ref().zip(self.key_file.as_ref())
    }
}

impl RedisSettings {
    /// The address as people write it, for messages.
    pub fn address(&self) -> String {
        if let Some(sentinel) = &self.sentinel {
            format!(
                "master {} (sentinels {})",
                sentinel.master,
                address_list(&sentinel.addresses)
            )
        } else if let Some(nodes) = &self.cluster {
            format!("the cluster of {}", address_list(nodes))
        } else if self.is_unix_socket() {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// Whether `host` is the path of a unix socket.
    pub fn is_unix_socket(&self) -> bool {
        self.host.starts_with('/')
    }
}

/// Addresses as `[redis] sentinels` and `cluster` list them.
pub fn address_list(addresses: &[(String, u16)]) -> String {
    let addresses: Vec<String> = addresses
        .iter()
        .map(|(host, port)| host_port(host, *port))
        .collect();
    addresses.join(",")
}
