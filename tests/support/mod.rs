//! Test harness: a throwaway redis-server per test, the daemon as a process, and polling helpers.
#![allow(dead_code)] // each test binary uses its own part of this module

pub mod legacy_client;

use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::collections::HashMap;

use delayer::Config;
use delayer::keys::{JOB_POOL, job_bucket, ready_queue};
use delayer::redis::aio::MultiplexedConnection;
use delayer::redis::{
    self, AsyncCommands, AsyncConnectionConfig, ConnectionAddr, IntoConnectionInfo,
};
use tempfile::TempDir;

/// A redis-server of our own on a unix socket in a temporary directory, killed on drop.
pub struct RedisServer {
    dir: TempDir,
    extra_args: Vec<String>,
    process: Option<Child>,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// Starts one with extra `redis-server` arguments, e.g. `["--requirepass", "x"]`.
    pub fn start_with(extra_args: &[&str]) -> RedisServer {
        let mut server = RedisServer {
            dir: tempfile::tempdir().expect("temporary directory"),
            extra_args: extra_args.iter().map(|arg| arg.to_string()).collect(),
            process: None,
        };
        server.launch();
        server
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("redis.sock")
    }

    /// A directory for the test's own files (configs, logs), removed with the server.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn launch(&mut self) {
        let socket = self.socket();
        let process = Command::new("redis-server")
            .args(["--port", "0", "--unixsocket"])
            .arg(&socket)
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(self.dir.path())
            .args(&self.extra_args)
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot start redis-server ({error}): install it (e.g. `apt-get install \
                     redis-server`) or run the tests with scripts/test, which does"
                )
            });
        self.process = Some(process);
        wait_until_sync(Duration::from_secs(10), "redis-server answers PING", || {
            ping(&socket)
        });
    }

    /// Stops the server, saving its data to disk first when `save` is set.
    pub fn stop(&mut self, save: bool) {
        let mut process = self.process.take().expect("server is running");
        if save {
            let mut stream = UnixStream::connect(self.socket()).expect("connect to save");
            stream.write_all(b"SHUTDOWN SAVE\r\n").unwrap();
            process.wait().unwrap();
        } else {
            process.kill().ok();
            process.wait().ok();
        }
        std::fs::remove_file(self.socket()).ok();
    }

    /// Starts the server again on the same socket, loading what `stop(true)` saved.
    pub fn restart(&mut self) {
        self.launch();
    }

    /// A connection that waits as long as a blocking command needs.
    pub async fn connect(&self) -> MultiplexedConnection {
        let info = ConnectionAddr::Unix(self.socket())
            .into_connection_info()
            .unwrap();
        redis::Client::open(info)
            .unwrap()
            .get_multiplexed_async_connection_with_config(
                &AsyncConnectionConfig::new().set_response_timeout(None),
            )
            .await
            .expect("connect to test redis")
    }

    /// The text of a `delayer.conf` for this server; `extra` lines are added to `[delayer]`.
    pub fn config_text(&self, extra: &str) -> String {
        format!(
            "[delayer]\n{extra}\n[redis]\nhost = {}\n",
            self.socket().display()
        )
    }

    /// A parsed configuration for this server (logs to stdout, no pid file).
    pub fn config(&self, extra: &str) -> Config {
        Config::parse(&self.config_text(extra), Path::new("test.conf")).expect("valid test config")
    }

    /// Writes `text` to a file in the test directory and returns its path.
    pub fn write_file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill().ok();
            process.wait().ok();
        }
    }
}

fn ping(socket: &Path) -> bool {
    let Ok(mut stream) = UnixStream::connect(socket) else {
        return false;
    };
    let mut reply = String::new();
    stream.write_all(b"PING\r\n").is_ok()
        && BufReader::new(stream).read_line(&mut reply).is_ok()
        && (reply.starts_with("+PONG") || reply.starts_with("-NOAUTH"))
}

/// Polls `poll` every few milliseconds until it returns something; panics naming `what` after
/// `timeout`.
pub async fn wait_for<T, F, Fut>(timeout: Duration, what: &str, mut poll: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = poll().await {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Like [`wait_for`], for a condition checked outside a runtime.
pub fn wait_until_sync(timeout: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting until {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The `delayer` binary running as a child process; killed on drop if still running.
pub struct Daemon {
    pub process: Child,
}

impl Daemon {
    pub fn start(config: &Path) -> Daemon {
        Daemon {
            process: delayer_command()
                .arg("-c")
                .arg(config)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start delayer"),
        }
    }

    pub fn pid(&self) -> u32 {
        self.process.id()
    }

    pub fn signal(&self, name: &str) {
        send_signal(self.pid(), name);
    }

    /// Waits for the process to exit; panics if it takes longer than `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let mut status = None;
        wait_until_sync(timeout, "delayer to exit", || {
            status = self.process.try_wait().unwrap();
            status.is_some()
        });
        status.unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.process.kill().ok();
        self.process.wait().ok();
    }
}

/// `delayer` with no arguments yet.
pub fn delayer_command() -> Command {
    Command::new(env!("CARGO_BIN_EXE_delayer"))
}

pub fn send_signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{name} {pid} failed");
}

/// A file's text, or "" while it does not exist yet.
pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The service running in this test's runtime until the returned token is cancelled.
pub fn spawn_service(
    config: Config,
) -> (
    tokio::task::JoinHandle<anyhow::Result<()>>,
    tokio_util::sync::CancellationToken,
) {
    let stop = tokio_util::sync::CancellationToken::new();
    let token = stop.clone();
    let handle = tokio::spawn(async move { delayer::run(&config, token).await });
    (handle, stop)
}

/// Where a daemon started with [`RedisServer::daemon_config`] writes its logs.
pub struct Logs {
    pub access: PathBuf,
    pub error: PathBuf,
}

impl Logs {
    /// Polls until the access or error log contains `text`; shows both logs if it never does.
    pub fn wait_for_line(&self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(read(&self.access).contains(text) || read(&self.error).contains(text)) {
            assert!(
                Instant::now() < deadline,
                "timed out after 10 s waiting for a log line with {text:?}\naccess log:\n{}\nerror log:\n{}",
                read(&self.access),
                read(&self.error)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl RedisServer {
    /// Writes `<name>.conf` for a daemon process logging to `<name>/access.log` and
    /// `<name>/error.log`; `extra` lines go into `[delayer]`.
    pub fn daemon_config(&self, name: &str, extra: &str) -> (PathBuf, Logs) {
        let logs = Logs {
            access: self.dir().join(name).join("access.log"),
            error: self.dir().join(name).join("error.log"),
        };
        let extra = format!(
            "access_log = {}\nerror_log = {}\n{extra}",
            logs.access.display(),
            logs.error.display()
        );
        (
            self.write_file(&format!("{name}.conf"), &self.config_text(&extra)),
            logs,
        )
    }
}

/// Adds `count` jobs, already due, spread round-robin over `topics`; returns their ids.
pub async fn fill_backlog(
    redis: &mut MultiplexedConnection,
    count: usize,
    topics: &[&str],
) -> Vec<String> {
    let due = (legacy_client::now_seconds() - 10) as f64;
    let ids: Vec<String> = (0..count).map(|index| format!("job-{index:07}")).collect();
    let jobs = ids
        .iter()
        .enumerate()
        .map(|(index, id)| (id.clone(), topics[index % topics.len()], due));
    add_jobs(redis, jobs).await;
    ids
}

/// Adds (id, topic, due score) jobs with a one-byte body, pipelined in chunks.
pub async fn add_jobs<'a>(
    redis: &mut MultiplexedConnection,
    jobs: impl IntoIterator<Item = (String, &'a str, f64)>,
) {
    let mut jobs = jobs.into_iter().peekable();
    while jobs.peek().is_some() {
        let mut pipe = redis::pipe();
        for (id, topic, due) in jobs.by_ref().take(10_000) {
            pipe.hset_multiple(job_bucket(&id), &[("topic", topic), ("body", "b")])
                .ignore()
                .zadd(JOB_POOL, &id, due)
                .ignore();
        }
        pipe.query_async::<()>(redis).await.unwrap();
    }
}

/// How many times each id sits in the ready lists of `topics`.
pub async fn delivered(
    redis: &mut MultiplexedConnection,
    topics: &[&str],
) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for topic in topics {
        let ids: Vec<String> = redis.lrange(ready_queue(topic), 0, -1).await.unwrap();
        for id in ids {
            *counts.entry(id).or_default() += 1;
        }
    }
    counts
}

/// Per command, from `INFO commandstats`: (calls, failed calls).
pub async fn command_stats(redis: &mut MultiplexedConnection) -> HashMap<String, (u64, u64)> {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(redis)
        .await
        .unwrap();
    stats
        .lines()
        .filter_map(|line| {
            let (command, fields) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let field = |name: &str| -> Option<u64> {
                fields
                    .split(',')
                    .find_map(|part| part.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
            };
            Some((
                command.to_string(),
                (field("calls")?, field("failed_calls").unwrap_or(0)),
            ))
        })
        .collect()
}

/// How many move scripts Redis has run to the end (a first EVALSHA refused with NOSCRIPT is not one).
pub async fn script_runs(redis: &mut MultiplexedConnection) -> u64 {
    let stats = command_stats(redis).await;
    stats
        .get("evalsha")
        .map_or(0, |(calls, failed)| calls - failed)
}

/// How many connections have client tracking on (`t` among their `CLIENT LIST` flags).
pub async fn tracking_clients(redis: &mut MultiplexedConnection) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(redis)
        .await
        .unwrap();
    list.lines()
        .filter(|line| {
            line.split(' ')
                .find_map(|field| field.strip_prefix("flags="))
                .is_some_and(|flags| flags.contains('t'))
        })
        .count()
}

/// Polls until the job pool is empty (every job moved or dropped).
pub async fn wait_for_empty_pool(redis: &MultiplexedConnection, timeout: Duration) {
    wait_for(timeout, "the job pool to empty", || {
        let mut redis = redis.clone();
        async move {
            let left: usize = redis.zcard(JOB_POOL).await.unwrap();
            (left == 0).then_some(())
        }
    })
    .await;
}
