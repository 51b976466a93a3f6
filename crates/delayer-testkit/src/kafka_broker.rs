//! A throwaway Kafka-protocol broker (tansu 0.6.0, with its sqlite storage) on a free port of
//! 127.0.0.1, its data in a temporary directory, killed on drop. `scripts/test` installs tansu
//! when it is missing; a test that finds none fails saying so.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::free_port;

/// How long a broker may take to answer after its start.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A tansu broker of our own, killed on drop.
pub struct KafkaBroker {
    dir: TempDir,
    port: u16,
    process: Option<Child>,
}

impl KafkaBroker {
    /// Starts one and waits until it answers.
    pub fn start() -> KafkaBroker {
        let mut broker = KafkaBroker {
            dir: tempfile::tempdir().expect("temporary directory"),
            port: free_port(),
            process: None,
        };
        broker.launch();
        broker
    }

    /// `host:port`, as `[kafka] brokers` and clients take it.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn url(&self) -> String {
        format!("tcp://127.0.0.1:{}", self.port)
    }

    /// Creates `topic` with `partitions` (tansu 0.6.0 creates none by itself), waiting until the
    /// broker takes the command.
    pub fn create_topic(&self, topic: &str, partitions: u32) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let output = Command::new(tansu())
                .args(["topic", "create", topic, "--partitions"])
                .arg(partitions.to_string())
                .args(["--broker", &self.url()])
                .current_dir(self.dir.path())
                .output()
                .expect("run tansu topic create");
            if output.status.success() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "tansu topic create {topic} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills the broker at once (SIGKILL), its data kept for [`restart`](KafkaBroker::restart).
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill().ok();
            process.wait().ok();
        }
    }

    /// Starts the broker again on the same port and data, and waits until it answers.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }

    fn launch(&mut self) {
        let log = std::fs::File::create(self.dir.path().join("tansu.log")).expect("broker log");
        let process = Command::new(tansu())
            .args(["broker", "--storage-engine", "sqlite://k.db"])
            .args(["--listener-url", &self.url()])
            .args(["--advertised-listener-url", &self.url()])
            .current_dir(self.dir.path())
            .stdout(Stdio::from(log.try_clone().expect("broker log")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start tansu");
        self.process = Some(process);
        let deadline = Instant::now() + START_TIMEOUT;
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            let exited = self
                .process
                .as_mut()
                .and_then(|p| p.try_wait().ok().flatten());
            assert!(
                exited.is_none() && Instant::now() < deadline,
                "tansu did not start on port {} ({exited:?}); its log:\n{}",
                self.port,
                std::fs::read_to_string(self.dir.path().join("tansu.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for KafkaBroker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The tansu command: on the PATH, or where `cargo install` puts it.
fn tansu() -> PathBuf {
    let installed = std::env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(".cargo/bin/tansu"))
        .filter(|path| path.is_file());
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("tansu"))
            .find(|path| path.is_file())
    });
    on_path.or(installed).unwrap_or_else(|| {
        panic!(
            "tansu (a Kafka-protocol broker) is not installed: scripts/test installs it, or run \
             cargo install tansu --version 0.6.0 --locked --features libsql"
        )
    })
}
