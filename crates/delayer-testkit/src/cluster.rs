//! Redis Cluster as users create it: masters (redis-server with `--cluster-enabled yes`, each on
//! a free port in its own temporary directory) joined by `redis-cli --cluster create`, so the
//! slots are split the way a real deployment splits them.

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

use std::collections::BTreeMap;

use delayer_wire::keys::Layout;
use redis::aio::MultiplexedConnection;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;

use crate::redis_server::{RedisServer, command_at, free_port};
use crate::server_programs;
use crate::tls::Certificates;
use crate::wait_until_sync;

/// How far above its client port a node listens for the other nodes (the cluster bus).
const BUS_OFFSET: u16 = 10000;

/// The slots of a cluster; all of them must be assigned before it says `cluster_state:ok`.
const SLOTS: &str = "16384";

/// Masters of one cluster, without replicas. Dropping it kills every node and removes its
/// directory (each node is a [`RedisServer`]).
pub struct RedisCluster {
    nodes: Vec<Node>,
    /// Replicas per master.
    replicas: usize,
    /// With TLS: the certificates every node shows (and trusts), in their own directory.
    tls: Option<(tempfile::TempDir, Certificates)>,
}

struct Node {
    server: RedisServer,
    port: u16,
}

impl RedisCluster {
    /// Starts `masters` masters, joins them with `redis-cli --cluster create`, and waits until
    /// every node knows every other, has all slots assigned and says `cluster_state:ok`: only
    /// then does a cluster client see the whole slot map on its first `CLUSTER SLOTS`.
    ///
    /// One, or at least 3 (`redis-cli --cluster create` refuses 2): a single master takes every
    /// slot itself (`CLUSTER ADDSLOTSRANGE`), as a cluster's first node does before others join.
    pub fn start(masters: usize) -> RedisCluster {
        RedisCluster::launch(masters, 0, None)
    }

    /// Like [`start`](RedisCluster::start), with a replica for each master, which takes over its
    /// slots when it fails (after the 5 s node timeout).
    pub fn start_with_replicas(masters: usize) -> RedisCluster {
        RedisCluster::launch(masters, 1, None)
    }

    /// Like [`start`](RedisCluster::start), every node speaking TLS only (to clients and on the
    /// cluster bus), with certificates made for 127.0.0.1 by one CA (see [`Certificates`]); the
    /// nodes' unix sockets stay plain, for the test's own connections.
    pub fn start_tls(masters: usize) -> RedisCluster {
        let dir = tempfile::tempdir().expect("temporary directory");
        let certificates = Certificates::make(dir.path());
        RedisCluster::launch(masters, 0, Some((dir, certificates)))
    }

    /// The certificates of a cluster from [`start_tls`](RedisCluster::start_tls).
    pub fn certificates(&self) -> &Certificates {
        &self.tls.as_ref().expect("started with start_tls").1
    }

    fn launch(
        masters: usize,
        replicas: usize,
        tls: Option<(tempfile::TempDir, Certificates)>,
    ) -> RedisCluster {
        assert!(
            masters == 1 || masters >= 3,
            "redis-cli --cluster create wants at least 3 masters, not {masters}"
        );
        // One after the other: a started node listens on its ports, so the next free ones differ.
        let nodes: Vec<Node> = (0..masters * (1 + replicas))
            .map(|_| {
                let port = free_cluster_port();
                // RedisServer runs it with `--dir` its temporary directory, so nodes.conf lands
                // there; the later `--port` wins over its `--port 0`, and the unix socket it
                // also opens serves `connect_node`.
                let mut args: Vec<String> = [
                    "--bind",
                    "127.0.0.1",
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "5000",
                    // The others go on serving their slots while one master is gone, as
                    // deployments that prefer partial service set it.
                    "--cluster-require-full-coverage",
                    "no",
                    // A replica takes over however long it was cut off from its master.
                    "--cluster-replica-validity-factor",
                    "0",
                ]
                .map(String::from)
                .into();
                match &tls {
                    Some((_, certificates)) => {
                        let file = |name: &str| certificates.file(name).display().to_string();
                        args.extend([
                            "--tls-port".into(),
                            port.to_string(),
                            "--tls-cluster".into(),
                            "yes".into(),
                            "--tls-cert-file".into(),
                            file("server.crt"),
                            "--tls-key-file".into(),
                            file("server.key"),
                            "--tls-ca-cert-file".into(),
                            file("ca.crt"),
                            "--tls-auth-clients".into(),
                            "no".into(),
                        ]);
                    }
                    None => args.extend(["--port".into(), port.to_string()]),
                }
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let server = RedisServer::start_with(&args);
                Node { server, port }
            })
            .collect();
        let cluster = RedisCluster {
            nodes,
            replicas,
            tls,
        };
        cluster.create();
        cluster
    }

    fn create(&self) {
        if let [node] = &self.nodes[..] {
            let reply = node.command(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
            assert_eq!(reply, "OK", "CLUSTER ADDSLOTSRANGE");
        } else {
            self.join();
        }
        self.wait_until_ok();
    }

    fn join(&self) {
        let output = server_programs::cli()
            .args(["--cluster", "create"])
            .args(
                self.nodes
                    .iter()
                    .map(|node| format!("127.0.0.1:{}", node.port)),
            )
            .args([
                "--cluster-replicas",
                &self.replicas.to_string(),
                "--cluster-yes",
            ])
            .args(self.tls.iter().flat_map(|(_, certificates)| {
                [
                    "--tls".into(),
                    "--cacert".into(),
                    certificates.file("ca.crt"),
                ]
            }))
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot run {} ({error}): it comes with redis-server (or redis-tools)",
                    server_programs::cli_name()
                )
            });
        assert!(
            output.status.success(),
            "redis-cli --cluster create failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    fn wait_until_ok(&self) {
        let known = self.nodes.len().to_string();
        for node in &self.nodes {
            wait_until_sync(
                Duration::from_secs(20),
                &format!("127.0.0.1:{} says cluster_state:ok", node.port),
                || {
                    let info = node.command(&["CLUSTER", "INFO"]);
                    let field = |name: &str| {
                        info.lines()
                            .find_map(|line| line.trim_end().strip_prefix(name)?.strip_prefix(':'))
                    };
                    field("cluster_state") == Some("ok")
                        && field("cluster_slots_assigned") == Some(SLOTS)
                        && field("cluster_known_nodes") == Some(known.as_str())
                },
            );
            // A replica that never synced with its master cannot stand in for it.
            wait_until_sync(
                Duration::from_secs(20),
                &format!("127.0.0.1:{} in sync, if a replica", node.port),
                || {
                    let replication = node.command(&["INFO", "replication"]);
                    replication.contains("role:master")
                        || replication.contains("master_link_status:up")
                },
            );
        }
    }

    /// The nodes' addresses, as `[redis] cluster` lists them.
    pub fn addresses(&self) -> String {
        let addresses: Vec<String> = self
            .nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port))
            .collect();
        addresses.join(",")
    }

    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|node| node.port).collect()
    }

    /// A cluster-aware connection, as the daemon makes.
    pub async fn connect(&self) -> ClusterConnection {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|node| format!("redis://127.0.0.1:{}", node.port))
            .collect();
        ClusterClient::new(nodes)
            .unwrap()
            .get_async_connection()
            .await
            .expect("connect to the test cluster")
    }

    /// A plain (not cluster-aware) connection to node `index`, to see what that master holds;
    /// a key of another master's slot gets a MOVED error on it.
    pub async fn connect_node(&self, index: usize) -> MultiplexedConnection {
        self.nodes[index].server.connect().await
    }

    /// Which node holds `key`'s slot (`CLUSTER KEYSLOT`, then the slot map of `CLUSTER SLOTS`).
    pub fn node_of(&self, key: &str) -> usize {
        let node = &self.nodes[0];
        let slot: u16 = node.command(&["CLUSTER", "KEYSLOT", key]).parse().unwrap();
        // "start end host port id [replicas...]" per range, all words in a row: read by port.
        let map = node.command(&["CLUSTER", "SLOTS"]);
        let words: Vec<&str> = map.split_whitespace().collect();
        for window in words.windows(4) {
            let (Ok(start), Ok(end)) = (window[0].parse::<u16>(), window[1].parse::<u16>()) else {
                continue;
            };
            if window[2] == "127.0.0.1" && (start..=end).contains(&slot) {
                let port: u16 = window[3].parse().unwrap();
                return self
                    .nodes
                    .iter()
                    .position(|node| node.port == port)
                    .unwrap();
            }
        }
        panic!("no node holds slot {slot}: {map}")
    }

    /// Moves `slots` slots, with their keys, from node `from` to node `to`, as an operator would
    /// (`redis-cli --cluster reshard`); returns when it is done.
    pub fn reshard(&self, from: usize, to: usize, slots: usize) {
        let id = |index: usize| self.nodes[index].command(&["CLUSTER", "MYID"]);
        let output = server_programs::cli()
            .args(["--cluster", "reshard"])
            .arg(format!("127.0.0.1:{}", self.nodes[from].port))
            .args(["--cluster-from", &id(from), "--cluster-to", &id(to)])
            .args(["--cluster-slots", &slots.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|error| panic!("cannot run {} ({error})", server_programs::cli_name()));
        assert!(
            output.status.success(),
            "redis-cli --cluster reshard failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Kills node `index` (its port refuses connections from then on).
    pub fn kill_node(&mut self, index: usize) {
        self.nodes[index].server.stop(false);
    }

    /// Stops node `index` as a hung machine would (SIGSTOP), or lets it go on (SIGCONT).
    pub fn pause(&self, index: usize, paused: bool) {
        let signal = if paused { "-STOP" } else { "-CONT" };
        let status = Command::new("kill")
            .args([signal, &self.nodes[index].server.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// How many keys node `index` holds (`DBSIZE`).
    pub fn dbsize(&self, index: usize) -> i64 {
        let reply = self.nodes[index].command(&["DBSIZE"]);
        reply
            .parse()
            .unwrap_or_else(|_| panic!("DBSIZE of node {index}: {reply:?}"))
    }
}

impl Node {
    /// `args` sent to this node over its (plain) unix socket; the reply in words.
    fn command(&self, args: &[&str]) -> String {
        let socket = self.server.socket();
        command_at(&format!("redis+unix://{}", socket.display()), args)
    }
}

/// A free port whose cluster bus port is free too (an ephemeral port may be too high for one).
fn free_cluster_port() -> u16 {
    for _ in 0..100 {
        let port = free_port();
        let Some(bus) = port.checked_add(BUS_OFFSET) else {
            continue;
        };
        if TcpListener::bind(("127.0.0.1", bus)).is_ok() {
            return port;
        }
    }
    panic!("no free port P with P + {BUS_OFFSET} free too");
}

/// Adds (id, topic, due score) jobs with a one-byte body in the cluster layout: each topic into
/// the registry first, then its jobs into its own slot, pipelined, the topics side by side.
pub async fn add_jobs(
    connection: &ClusterConnection,
    jobs: impl IntoIterator<Item = (String, String, f64)>,
) {
    let mut by_topic: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
    for (id, topic, due) in jobs {
        by_topic.entry(topic).or_default().push((id, due));
    }
    let mut adds = tokio::task::JoinSet::new();
    for (topic, jobs) in by_topic {
        let mut connection = connection.clone();
        adds.spawn(async move {
            let keys = Layout::CLUSTER.keys(&topic);
            redis::cmd("SADD")
                .arg(keys.topics())
                .arg(&topic)
                .query_async::<()>(&mut connection)
                .await
                .unwrap();
            for chunk in jobs.chunks(5_000) {
                let mut pipe = redis::pipe();
                for (id, due) in chunk {
                    pipe.hset_multiple(
                        keys.bucket(id),
                        &[("topic", topic.as_str()), ("body", "b")],
                    )
                    .ignore()
                    .zadd(keys.pool(), id, due)
                    .ignore();
                }
                pipe.query_async::<()>(&mut connection).await.unwrap();
            }
        });
    }
    // A task that panicked (a failed add) panics here.
    adds.join_all().await;
}
