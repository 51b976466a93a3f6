//! The `[http]` keys: the job API, metrics and the console.

use std::net::SocketAddr;

use super::super::values::{assign, number};
use super::Key;
use crate::http::{HostName, HttpSettings};
use crate::metrics::{DEFAULT_LISTED_SCHEDULES, DEFAULT_LISTED_TOPICS};

/// The section's keys, in the order the printout and `dist/delayer.conf` list them.
pub(super) const KEYS: &[Key] = &[
    Key {
        section: "http",
        name: "listen",
        default: "",
        doc: "address and port of the job API, /metrics, /healthz and the console",
        secret: false,
        set: |config, raw| {
            let listen: SocketAddr = raw.parse().map_err(|_| {
                "expected an address and port, like 127.0.0.1:9277 (the [http] section turns \
                 HTTP on: remove it to serve nothing)"
            })?;
            assign(
                &mut config.http,
                Ok(Some(HttpSettings {
                    listen,
                    token: None,
                    max_listed_topics: DEFAULT_LISTED_TOPICS,
                    max_listed_schedules: DEFAULT_LISTED_SCHEDULES,
                    hosts: Vec::new(),
                })),
            )
        },
        show: |config| Some(config.http.as_ref()?.listen.to_string()),
    },
    Key {
        section: "http",
        name: "token",
        default: "",
        doc: "the job API wants Authorization: Bearer <token>, the console a login; leave out for open access",
        secret: true,
        set: |config, raw| match &mut config.http {
            Some(http) => assign(&mut http.token, Ok(Some(raw.to_string()))),
            // The rules say that listen is missing.
            None => Ok(()),
        },
        show: |config| config.http.as_ref()?.token.clone(),
    },
    Key {
        section: "http",
        name: "max_listed_topics",
        default: "500",
        doc: "most topics /metrics and the console name one by one; the others are summed",
        secret: false,
        set: |config, raw| match &mut config.http {
            Some(http) => assign(&mut http.max_listed_topics, number(raw, 0..=100_000)),
            None => Ok(()),
        },
        show: |config| Some(config.http.as_ref()?.max_listed_topics.to_string()),
    },
    Key {
        section: "http",
        name: "max_listed_schedules",
        default: "500",
        doc: "most schedules /metrics names one by one (the first by name); the others are counted",
        secret: false,
        set: |config, raw| match &mut config.http {
            Some(http) => assign(&mut http.max_listed_schedules, number(raw, 0..=100_000)),
            None => Ok(()),
        },
        show: |config| Some(config.http.as_ref()?.max_listed_schedules.to_string()),
    },
    Key {
        section: "http",
        name: "hosts",
        default: "",
        doc: "names (or name:port) that requests may give as their Host, besides IP addresses and localhost",
        secret: false,
        set: |config, raw| match &mut config.http {
            Some(http) => {
                let hosts = raw.split(',').map(|entry| HostName::parse(entry.trim()));
                assign(&mut http.hosts, hosts.collect())
            }
            None => Ok(()),
        },
        show: |config| {
            let hosts = &config.http.as_ref()?.hosts;
            let hosts: Vec<String> = hosts.iter().map(HostName::to_string).collect();
            (!hosts.is_empty()).then(|| hosts.join(", "))
        },
    },
];
