//! Where `[redis]` says Redis is, and how to connect there: addresses, credentials and TLS as
//! the redis crate takes them.

use anyhow::{Context, Result, anyhow};
use deadpool_redis::redis::{
    self, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo,
};
use delayer_wire::Target;

use super::tls::certificates;
use super::{RedisSettings, TlsSettings};

/// Where `[redis]` says Redis is: its address, or the master its sentinels name (asked over the
/// same TLS, with `sentinel_username` and `sentinel_password`: a master's are not theirs).
pub fn target(config: &RedisSettings) -> Result<Target> {
    if let Some(nodes) = &config.cluster {
        let nodes = nodes.iter().map(|(host, port)| {
            connection_info(&RedisSettings {
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
pub fn connection_info(config: &RedisSettings) -> Result<ConnectionInfo> {
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
pub fn node_info(config: &RedisSettings, address: &str) -> Result<ConnectionInfo> {
    let (host, port) = address
        .rsplit_once(':')
        .and_then(|(host, port)| Some((host.trim_matches(['[', ']']), port.parse().ok()?)))
        .with_context(|| format!("{address:?} is not host:port"))?;
    connection_info(&RedisSettings {
        host: host.to_string(),
        port,
        cluster: None,
        ..config.clone()
    })
}

/// `info` with the CA and client certificate of `tls` attached, each file named when it cannot
/// be read or holds no usable PEM.
fn with_certificates(info: ConnectionInfo, tls: &TlsSettings) -> Result<ConnectionInfo> {
    let client = redis::Client::build_with_tls(info, certificates(tls)?)
        .map_err(|error| anyhow!("the TLS files of [redis] are not usable: {error}"))?;
    Ok(client.get_connection_info().clone())
}
