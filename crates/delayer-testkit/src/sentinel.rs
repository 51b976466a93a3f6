//! Redis Sentinel as users run it: a master and a replica (redis-server on free ports) watched by
//! three sentinels (`redis-server sentinel.conf --sentinel`), each in a temporary directory.

use std::process::{Child, Stdio};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tempfile::TempDir;

use crate::redis_server::{RedisServer, command, command_at, free_port};
use crate::server_programs;
use crate::wait_until_sync;

/// The name the sentinels know the master by.
pub const MASTER_NAME: &str = "mymaster";

/// A master, its replica, and three sentinels that have seen both.
pub struct SentinelSetup {
    pub master: RedisServer,
    pub master_port: u16,
    pub replica: RedisServer,
    pub replica_port: u16,
    sentinels: Vec<Sentinel>,
}

struct Sentinel {
    _dir: TempDir,
    port: u16,
    /// Its URL, with its password if it wants one.
    url: String,
    process: Child,
}

impl SentinelSetup {
    /// Starts them all and waits until the replica is in sync and every sentinel knows it.
    pub fn start() -> SentinelSetup {
        SentinelSetup::start_with_password(None)
    }

    /// [`start`](SentinelSetup::start), with sentinels that want `password` (`requirepass`; one
    /// that needs no escaping in a URL).
    pub fn start_with_password(password: Option<&str>) -> SentinelSetup {
        let master_port = free_port();
        let master =
            RedisServer::start_with(&["--port", &master_port.to_string(), "--bind", "127.0.0.1"]);
        let replica_port = free_port();
        let replica = RedisServer::start_with(&[
            "--port",
            &replica_port.to_string(),
            "--bind",
            "127.0.0.1",
            "--replicaof",
            "127.0.0.1",
            &master_port.to_string(),
        ]);
        wait_until_sync(Duration::from_secs(10), "the replica in sync", || {
            command(replica_port, &["INFO", "replication"]).contains("master_link_status:up")
        });
        let sentinels: Vec<Sentinel> = (0..3)
            .map(|_| Sentinel::start(master_port, password))
            .collect();
        for sentinel in &sentinels {
            wait_until_sync(
                Duration::from_secs(20),
                "a sentinel that knows the replica",
                || {
                    command_at(&sentinel.url, &["SENTINEL", "REPLICAS", MASTER_NAME])
                        .contains(&replica_port.to_string())
                },
            );
        }
        SentinelSetup {
            master,
            master_port,
            replica,
            replica_port,
            sentinels,
        }
    }

    /// The sentinels' addresses, as `[redis] sentinels` lists them.
    pub fn addresses(&self) -> String {
        let addresses: Vec<String> = self
            .sentinels
            .iter()
            .map(|sentinel| format!("127.0.0.1:{}", sentinel.port))
            .collect();
        addresses.join(",")
    }

    /// A command's reply from sentinel `index` (in the order [`addresses`] lists them), as text.
    ///
    /// [`addresses`]: SentinelSetup::addresses
    pub fn sentinel_command(&self, index: usize, args: &[&str]) -> String {
        command_at(&self.sentinels[index].url, args)
    }

    /// `SENTINEL FAILOVER`: the replica becomes the master (the first sentinel decides alone).
    pub fn fail_over(&self) {
        let reply = command_at(
            &self.sentinels[0].url,
            &["SENTINEL", "FAILOVER", MASTER_NAME],
        );
        assert_eq!(reply, "OK", "SENTINEL FAILOVER");
    }

    /// Waits until the replica says it is the master.
    pub fn wait_for_promotion(&self) {
        wait_until_sync(Duration::from_secs(20), "the replica promoted", || {
            command(self.replica_port, &["ROLE"]).contains("master")
        });
    }

    /// A connection to the replica (the master after a failover).
    pub async fn connect_replica(&self) -> MultiplexedConnection {
        self.replica.connect().await
    }
}

impl Sentinel {
    fn start(master_port: u16, password: Option<&str>) -> Sentinel {
        let dir = tempfile::tempdir().expect("temporary directory");
        let port = free_port();
        let config = dir.path().join("sentinel.conf");
        std::fs::write(
            &config,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\n\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} 2\n\
                 sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                 sentinel failover-timeout {MASTER_NAME} 5000\n{}",
                dir.path().display(),
                password.map_or(String::new(), |password| format!(
                    "requirepass {password}\n"
                )),
            ),
        )
        .unwrap();
        let process = server_programs::server()
            .arg(&config)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot start {} --sentinel ({error})",
                    server_programs::server_name()
                )
            });
        let url = match password {
            Some(password) => format!("redis://:{password}@127.0.0.1:{port}"),
            None => format!("redis://127.0.0.1:{port}"),
        };
        wait_until_sync(Duration::from_secs(10), "a sentinel answers PING", || {
            command_at(&url, &["PING"]) == "PONG"
        });
        Sentinel {
            _dir: dir,
            port,
            url,
            process,
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.process.kill().ok();
        self.process.wait().ok();
    }
}
