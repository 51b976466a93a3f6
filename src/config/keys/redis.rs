//! The `[redis]` keys: where Redis is and how to reach it (one server, TLS, Sentinel, a cluster).

use delayer_wire::keys::{Layout, Names};

use super::super::settings::Config;
use super::super::values::{addresses, assign, boolean, choice, number, path, seconds};
use super::{Key, shown, shown_path, shown_seconds};
use crate::redis::{SentinelSettings, TlsSettings, address_list};

const NAMES: &[(&str, Names)] = &[("legacy", Names::Legacy), ("jop", Names::Jop)];

/// The section's keys, in the order the printout and `dist/delayer.conf` list them.
pub(super) const KEYS: &[Key] = &[
    Key {
        section: "redis",
        name: "host",
        default: "127.0.0.1",
        doc: "address, or the path of a unix socket",
        secret: false,
        set: |config, raw| assign(&mut config.redis.host, Ok(raw.to_string())),
        show: |config| found_by_address(config).then(|| config.redis.host.clone()),
    },
    Key {
        section: "redis",
        name: "port",
        default: "6379",
        doc: "port",
        secret: false,
        set: |config, raw| assign(&mut config.redis.port, number(raw, 1..=u16::MAX)),
        show: |config| found_by_address(config).then(|| config.redis.port.to_string()),
    },
    Key {
        section: "redis",
        name: "database",
        default: "0",
        doc: "database number",
        secret: false,
        set: |config, raw| {
            assign(
                &mut config.redis.database,
                number(raw, 0..=i64::from(i32::MAX)),
            )
        },
        show: |config| Some(config.redis.database.to_string()),
    },
    Key {
        section: "redis",
        name: "username",
        default: "",
        doc: "ACL user (Redis 6+), with a password; empty: default",
        secret: false,
        set: |config, raw| assign(&mut config.redis.username, Ok(Some(raw.to_string()))),
        show: |config| config.redis.username.clone(),
    },
    Key {
        section: "redis",
        name: "password",
        default: "",
        doc: "password; leave empty for no AUTH",
        secret: true,
        set: |config, raw| assign(&mut config.redis.password, Ok(Some(raw.to_string()))),
        show: |config| Some(config.redis.password.clone().unwrap_or_default()),
    },
    Key {
        section: "redis",
        name: "tls",
        default: "false",
        doc: "true: TLS to Redis",
        secret: false,
        set: |config, raw| {
            let on = boolean(raw).map(|on| on.then(TlsSettings::default));
            assign(&mut config.redis.tls, on)
        },
        show: |config| config.redis.tls.as_ref().map(|_| "true".into()),
    },
    Key {
        section: "redis",
        name: "tls_ca_file",
        default: "",
        doc: "the CA that signed Redis's certificate (PEM); empty: the system's CAs",
        secret: false,
        set: |config, raw| with_tls(config, |tls| assign(&mut tls.ca_file, path(raw).map(Some))),
        show: |config| tls_of(config).map(|tls| shown_path(&tls.ca_file)),
    },
    Key {
        section: "redis",
        name: "tls_cert_file",
        default: "",
        doc: "with tls_key_file: a client certificate (PEM), for mutual TLS",
        secret: false,
        set: |config, raw| {
            with_tls(config, |tls| {
                assign(&mut tls.cert_file, path(raw).map(Some))
            })
        },
        show: |config| tls_of(config)?.cert_file.as_deref().map(shown),
    },
    Key {
        section: "redis",
        name: "tls_key_file",
        default: "",
        doc: "the key of tls_cert_file (PEM)",
        secret: false,
        set: |config, raw| with_tls(config, |tls| assign(&mut tls.key_file, path(raw).map(Some))),
        show: |config| tls_of(config)?.key_file.as_deref().map(shown),
    },
    Key {
        section: "redis",
        name: "tls_insecure",
        default: "false",
        doc: "true: Redis's certificate is not checked (only to try TLS out)",
        secret: false,
        set: |config, raw| {
            let insecure = boolean(raw);
            with_tls(config, |tls| assign(&mut tls.insecure, insecure))
        },
        show: |config| tls_of(config)?.insecure.then(|| "true".into()),
    },
    Key {
        section: "redis",
        name: "sentinels",
        default: "",
        doc: "host:port,... of Redis Sentinels, instead of host and port",
        secret: false,
        set: |config, raw| {
            let addresses = addresses(raw, 26379);
            let sentinel = config.redis.sentinel.get_or_insert_default();
            assign(&mut sentinel.addresses, addresses)
        },
        show: |config| Some(address_list(&sentinel_of(config)?.addresses)),
    },
    Key {
        section: "redis",
        name: "sentinel_master",
        default: "",
        doc: "the name the sentinels know the master by",
        secret: false,
        set: |config, raw| with_sentinel(config, |sentinel| sentinel.master = raw.to_string()),
        show: |config| Some(sentinel_of(config)?.master.clone()),
    },
    Key {
        section: "redis",
        name: "sentinel_username",
        default: "",
        doc: "the sentinels' own ACL user (Redis 6.2+)",
        secret: false,
        set: |config, raw| {
            with_sentinel(config, |sentinel| sentinel.username = Some(raw.to_string()))
        },
        show: |config| sentinel_of(config)?.username.clone(),
    },
    Key {
        section: "redis",
        name: "sentinel_password",
        default: "",
        doc: "the sentinels' own password, if they want one",
        secret: true,
        set: |config, raw| {
            with_sentinel(config, |sentinel| sentinel.password = Some(raw.to_string()))
        },
        show: |config| sentinel_of(config)?.password.clone(),
    },
    Key {
        section: "redis",
        name: "key_layout",
        default: "legacy",
        doc: "legacy, or jop for the earliest Delayer generation's key names",
        secret: false,
        set: |config, raw| assign(&mut config.redis.layout.names, choice(raw, NAMES)),
        show: |config| (config.redis.layout == Layout::JOP).then(|| "jop".into()),
    },
    Key {
        section: "redis",
        name: "cluster",
        default: "",
        doc: "host:port,... of Redis Cluster nodes: the cluster layout",
        secret: false,
        set: |config, raw| {
            config.redis.cluster = Some(addresses(raw, 6379)?);
            assign(&mut config.redis.layout, Ok(Layout::CLUSTER))
        },
        show: |config| config.redis.cluster.as_deref().map(address_list),
    },
    Key {
        section: "redis",
        name: "max_idle",
        default: "2",
        doc: "most idle connections kept",
        secret: false,
        set: |config, raw| assign(&mut config.redis.max_idle, number(raw, 0..=100_000)),
        show: |config| Some(config.redis.max_idle.to_string()),
    },
    Key {
        section: "redis",
        name: "max_active",
        default: "20",
        doc: "most open connections (pool size)",
        secret: false,
        set: |config, raw| assign(&mut config.redis.max_active, number(raw, 1..=100_000)),
        show: |config| Some(config.redis.max_active.to_string()),
    },
    Key {
        section: "redis",
        name: "idle_timeout",
        default: "3600",
        doc: "s before an idle connection is closed (0: never)",
        secret: false,
        set: |config, raw| assign(&mut config.redis.idle_timeout, seconds(raw)),
        show: |config| Some(shown_seconds(config.redis.idle_timeout)),
    },
    Key {
        section: "redis",
        name: "conn_max_lifetime",
        default: "3600",
        doc: "s before any connection is recycled (0: never)",
        secret: false,
        set: |config, raw| assign(&mut config.redis.conn_max_lifetime, seconds(raw)),
        show: |config| Some(shown_seconds(config.redis.conn_max_lifetime)),
    },
];

/// Fills in the TLS settings, when `tls = true` made them (else the rules say what is amiss).
fn with_tls(
    config: &mut Config,
    fill: impl FnOnce(&mut TlsSettings) -> Result<(), String>,
) -> Result<(), String> {
    match &mut config.redis.tls {
        Some(tls) => fill(tls),
        None => Ok(()),
    }
}

/// Fills in the sentinel settings, when `sentinels` made them (else the rules say what is amiss).
fn with_sentinel(
    config: &mut Config,
    fill: impl FnOnce(&mut SentinelSettings),
) -> Result<(), String> {
    if let Some(sentinel) = &mut config.redis.sentinel {
        fill(sentinel);
    }
    Ok(())
}

fn tls_of(config: &Config) -> Option<&TlsSettings> {
    config.redis.tls.as_ref()
}

fn sentinel_of(config: &Config) -> Option<&SentinelSettings> {
    config.redis.sentinel.as_ref()
}

/// Whether `host` and `port` say where Redis is (not sentinels, nor a cluster's nodes).
fn found_by_address(config: &Config) -> bool {
    config.redis.sentinel.is_none() && config.redis.cluster.is_none()
}
