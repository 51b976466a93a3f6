//! Test harness of the daemon: the testkit (a throwaway redis-server, polling, the legacy clients)
//! plus the `delayer` binary as a process and its logs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub mod browser;
pub mod history;
pub mod http_client;
// The bench's upgrade scenario runs it; no test does yet (its first build takes minutes).
#[allow(dead_code)]
pub mod previous_release;
pub mod receiver;

use delayer::Config;
pub use delayer_testkit::jobs::*;
pub use delayer_testkit::{RedisServer, free_port, legacy_client, wait_for, wait_until_sync};

/// The `delayer` binary running as a child process; killed on drop if still running.
pub struct Daemon {
    pub process: Child,
}

impl Daemon {
    pub fn start(config: &Path) -> Daemon {
        Daemon::start_as(delayer_command(), config)
    }

    /// As on a host whose clock is `offset` off ("+10s", "-10s"): see [`shift_clock`].
    pub fn start_with_clock(config: &Path, offset: &str) -> Daemon {
        let mut command = delayer_command();
        shift_clock(&mut command, offset);
        Daemon::start_as(command, config)
    }

    /// As on a host whose clock is stepped while it runs: see [`SteppedClock`].
    pub fn start_with_stepped_clock(config: &Path, clock: &SteppedClock) -> Daemon {
        let mut command = delayer_command();
        clock.apply(&mut command);
        Daemon::start_as(command, config)
    }

    /// Under the open-file limit `ulimit` sets with these flags (`-n 400`: the soft and the hard
    /// limit; `-Sn 400`: the soft one alone).
    pub fn start_with_ulimit(config: &Path, flags: &str) -> Daemon {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(format!("ulimit {flags} && exec \"$0\" \"$@\""))
            .arg(env!("CARGO_BIN_EXE_delayer"));
        Daemon::start_as(command, config)
    }

    fn start_as(mut command: Command, config: &Path) -> Daemon {
        Daemon {
            process: command
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

    /// How many files it has open (sockets included).
    pub fn open_files(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid())).map_or(0, Iterator::count)
    }

    pub fn signal(&self, name: &str) {
        send_signal(self.pid(), name);
    }

    /// Stops it as systemd would (SIGTERM); it must exit cleanly within 10 s.
    pub fn stop(mut self) {
        self.signal("TERM");
        assert!(self.wait(Duration::from_secs(10)).success());
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

/// Makes `command`'s wall clock run `offset` off ("+10s", "-10s"), as on a host whose clock is
/// wrong, through Debian's libfaketime (package `faketime`, which `scripts/test` installs). Its
/// monotonic clock is left alone: only the wall clock of a host is ever off.
pub fn shift_clock(command: &mut Command, offset: &str) {
    fake_wall_clock(command);
    command.env("FAKETIME", offset);
}

/// A wall clock that a test steps while its processes run, as NTP, a VM resumed from a snapshot
/// or `date -s` step a host's: libfaketime reads the offset from a file, again at most a second
/// after it changed. The monotonic clock is left alone, as a real step leaves it.
pub struct SteppedClock {
    file: PathBuf,
}

impl SteppedClock {
    /// A clock of `dir`, right to begin with.
    pub fn new(dir: &Path) -> SteppedClock {
        let clock = SteppedClock {
            file: dir.join("faketime.rc"),
        };
        clock.step_to("+0");
        clock
    }

    /// Sets the offset from the true time ("-30s", "-1h"); processes see it within a second.
    pub fn step_to(&self, offset: &str) {
        std::fs::write(&self.file, format!("{offset}\n")).expect("write the faketime file");
    }

    /// Makes `command` follow this clock.
    pub fn apply(&self, command: &mut Command) {
        fake_wall_clock(command);
        command
            .env_remove("FAKETIME")
            .env("FAKETIME_TIMESTAMP_FILE", &self.file)
            .env("FAKETIME_CACHE_DURATION", "1");
    }
}

/// Preloads libfaketime into `command`, leaving its monotonic clock alone.
fn fake_wall_clock(command: &mut Command) {
    let library = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib",
    ]
    .iter()
    .map(|dir| Path::new(dir).join("faketime/libfaketime.so.1"))
    .find(|path| path.exists())
    .expect("libfaketime: install Debian's faketime package (scripts/test does)");
    command
        .env("LD_PRELOAD", library)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
}

/// The full name of test `name` of the module whose `module_path!()` is `module`, as this test
/// binary's `--exact` filter takes it: the module path within the binary, then the name.
pub fn test_name(module: &str, name: &str) -> String {
    let within = module.split_once("::").map_or("", |(_, within)| within);
    format!("{within}::{name}")
}

/// `delayer` with no arguments yet.
pub fn delayer_command() -> Command {
    Command::new(env!("CARGO_BIN_EXE_delayer"))
}

/// Runs `delayer -c <config> <args>`, which must exit 1 within 20 s (else it is killed and the
/// test fails: a start that should be refused must not hang the tests by retrying); its stderr.
pub fn delayer_fails(config: &Path, args: &[&str]) -> String {
    let mut run = Daemon {
        process: delayer_command()
            .arg("-c")
            .arg(config)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run delayer"),
    };
    let status = run.wait(Duration::from_secs(20));
    let mut stderr = String::new();
    std::io::Read::read_to_string(run.process.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "delayer {args:?}: {stderr}");
    stderr
}

/// Runs `delayer -c <config> <args>`, which must succeed (its stderr shows if not); its stdout.
pub fn delayer_succeeds(config: &Path, args: &[&str]) -> String {
    let output = delayer_command()
        .arg("-c")
        .arg(config)
        .args(args)
        .output()
        .expect("run delayer");
    assert!(
        output.status.success(),
        "delayer {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
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

/// What Redis still holds of jobs of `topics` in the legacy layout: waiting, ready, reserved.
pub async fn left_in_redis(
    redis: &mut delayer_client::redis::aio::MultiplexedConnection,
    topics: &[&str],
) -> usize {
    use delayer_client::redis::AsyncCommands;
    use delayer_wire::keys::{JOB_POOL, RESERVED, ready_queue};
    let mut left: usize = redis.zcard(JOB_POOL).await.unwrap();
    left += redis.zcard::<_, usize>(RESERVED).await.unwrap();
    for topic in topics {
        left += redis.llen::<_, usize>(ready_queue(topic)).await.unwrap();
    }
    left
}

/// Where `scripts/ensure-node-packages` installs the npm packages the tests use.
pub const NODE_MODULES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/target/npm/node_modules");

/// Runs the tests' program `script` (in `tests/it/support/`: Python for `.py`, Node.js for `.cjs`,
/// with the packages `scripts/test` installs) with `args` and `input` on its standard input; what
/// it printed.
pub fn run_script(script: &str, args: &[&str], input: &[u8]) -> String {
    use std::io::Write;
    let path = format!("{}/tests/it/support/{script}", env!("CARGO_MANIFEST_DIR"));
    let mut command = if script.ends_with(".cjs") {
        let mut node = Command::new("node");
        node.env("NODE_PATH", NODE_MODULES);
        node
    } else {
        Command::new("python3")
    };
    let mut child = command
        .arg(path)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 and node (scripts/test installs them)");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input).unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{script} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The service running in this test's runtime until the returned token is cancelled.
pub fn spawn_service(
    config: Config,
) -> (
    tokio::task::JoinHandle<anyhow::Result<()>>,
    tokio_util::sync::CancellationToken,
) {
    let stop = delayer::Stop::default();
    let graceful = stop.graceful.clone();
    let handle = tokio::spawn(async move { delayer::run(&config, stop).await });
    (handle, graceful)
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

/// Configurations of the daemon for a test's redis-server.
pub trait DaemonSetup {
    /// A parsed configuration (logs to stdout, no pid file); `extra` lines go into `[delayer]`.
    fn config(&self, extra: &str) -> Config;

    /// Writes `<name>.conf` for a daemon process logging to `<name>/access.log` and
    /// `<name>/error.log`; `extra` lines go into `[delayer]`.
    fn daemon_config(&self, name: &str, extra: &str) -> (PathBuf, Logs);
}

impl DaemonSetup for RedisServer {
    fn config(&self, extra: &str) -> Config {
        Config::parse(&self.config_text(extra), Path::new("test.conf")).expect("valid test config")
    }

    fn daemon_config(&self, name: &str, extra: &str) -> (PathBuf, Logs) {
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

/// Starts a daemon process per name, each with its own logs and the same `extra` lines.
pub fn start_daemons(
    server: &RedisServer,
    names: &[&str],
    extra: &str,
) -> (Vec<Daemon>, Vec<Logs>) {
    names
        .iter()
        .map(|name| {
            let (config, logs) = server.daemon_config(name, extra);
            (Daemon::start(&config), logs)
        })
        .unzip()
}

/// The ACL a delayer user needs, as docs/redis-deployments.md gives it, word for word (less the
/// password; `tests/it/acl.rs` holds the page to it).
pub const DAEMON_ACL: &str = "~delayer:* +ping +unwatch +select +hello +info +client|tracking \
     +evalsha +script|load +type +zrangebyscore +zrevrangebyscore +zrange +zscore +zadd +zrem \
     +hget +hmget +hset +hdel +hincrby +lpush +sadd +time";

/// `ACL SETUSER user rules...`.
pub async fn acl(
    redis: &mut delayer_client::redis::aio::MultiplexedConnection,
    user: &str,
    rules: &str,
) {
    delayer_client::redis::cmd("ACL")
        .arg("SETUSER")
        .arg(user)
        .arg(rules.split_whitespace().collect::<Vec<_>>())
        .query_async::<()>(redis)
        .await
        .unwrap();
}

/// Waits until `count` jobs of the pool `pool` (a key on `redis`'s node) are parked: scored more
/// than 30 s past now by Redis's clock, as the move parks a paused topic's due jobs (a minute on).
pub async fn wait_parked(
    redis: &delayer_client::redis::aio::MultiplexedConnection,
    pool: &str,
    count: usize,
) {
    let what = format!("{count} jobs of {pool} parked");
    wait_for(Duration::from_secs(20), &what, || {
        let mut redis = redis.clone();
        async move {
            let (seconds, _): (f64, f64) = delayer_client::redis::cmd("TIME")
                .query_async(&mut redis)
                .await
                .unwrap();
            let parked: usize = delayer_client::redis::AsyncCommands::zcount(
                &mut redis,
                pool,
                seconds + 30.0,
                "+inf",
            )
            .await
            .unwrap();
            (parked >= count).then_some(())
        }
    })
    .await;
}

/// How many of `moved` came ahead of a job due before them, `due_order` being all of them in due
/// order: 0 when they moved in due order.
pub fn ahead_of_earlier(moved: &[String], due_order: &[String]) -> usize {
    let rank: std::collections::HashMap<&String, usize> = due_order
        .iter()
        .enumerate()
        .map(|(rank, id)| (id, rank))
        .collect();
    let mut earliest_after = usize::MAX;
    let mut ahead = 0;
    for id in moved.iter().rev() {
        let rank = rank[id];
        ahead += usize::from(rank > earliest_after);
        earliest_after = earliest_after.min(rank);
    }
    ahead
}
