//! Operating the binary as a service: `-d`, a second start, `--check-config`, log rotation.

use crate::support;

use support::DaemonSetup;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use delayer_client::redis::AsyncCommands;
use delayer_wire::keys::{JOB_POOL, job_bucket};
use support::{Daemon, RedisServer, delayer_command, read, send_signal, wait_until_sync};

/// True while `pid` runs (a zombie waiting to be reaped has stopped running).
fn is_running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

/// Kills a detached daemon if a test fails before stopping it.
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if is_running(self.0) {
            send_signal(self.0, "KILL");
        }
    }
}

fn run(args: &[&str], config: &Path) -> Output {
    delayer_command()
        .args(args)
        .arg("-c")
        .arg(config)
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn dash_d_returns_once_the_daemon_runs_and_sigterm_stops_it() {
    let server = RedisServer::start();
    let pid_file = server.dir().join("run/delayer.pid");
    let (config, logs) = server.daemon_config("d", &format!("pid = {}", pid_file.display()));

    let started = run(&["-d"], &config);

    assert!(started.status.success(), "{}", stderr(&started));
    let pid: u32 = read(&pid_file)
        .trim()
        .parse()
        .expect("the pid file is written before -d returns");
    let _cleanup = KillOnDrop(pid);
    assert!(is_running(pid));
    assert!(String::from_utf8_lossy(&started.stdout).contains(&format!("PID: {pid}")));
    logs.wait_for_line(&format!("Service started successfully, PID: {pid}"));

    let mut redis = server.connect().await;
    let _: () = redis.hset(job_bucket("j"), "topic", "t").await.unwrap();
    let _: () = redis.zadd(JOB_POOL, "j", 1).await.unwrap();
    assert_eq!(support::wait_for_ready(&redis, "t", 1).await, ["j"]);

    send_signal(pid, "TERM");
    wait_until_sync(Duration::from_secs(2), "the daemon to exit", || {
        !is_running(pid)
    });
    assert!(!pid_file.exists(), "pid file removed");
    let access = read(&logs.access);
    assert!(
        access.contains(&format!("Service stopped successfully, PID: {pid}")),
        "{access}"
    );
    assert!(
        !access.contains("Service:\t\tdelayer"),
        "no banner: a daemon has no terminal\n{access}"
    );
}

#[test]
fn a_second_start_is_refused_naming_the_running_pid() {
    let server = RedisServer::start();
    let pid_file = server.dir().join("delayer.pid");
    let (config, _) = server.daemon_config("first", &format!("pid = {}", pid_file.display()));
    assert!(run(&["-d"], &config).status.success());
    let pid: u32 = read(&pid_file).trim().parse().unwrap();
    let _cleanup = KillOnDrop(pid);

    for args in [&["-d"][..], &[][..]] {
        let second = run(args, &config);

        assert!(!second.status.success(), "{args:?}");
        let message = stderr(&second);
        assert!(
            message.contains(&format!("ERROR: Service is being executed, PID: {pid}")),
            "{args:?}: {message}"
        );
    }
    assert!(is_running(pid), "the running one is untouched");
    assert_eq!(read(&pid_file).trim(), pid.to_string());
    send_signal(pid, "TERM");
    wait_until_sync(Duration::from_secs(2), "the daemon to exit", || {
        !is_running(pid)
    });
}

#[test]
fn dash_d_reports_why_the_daemon_could_not_start() {
    let server = RedisServer::start();
    let not_a_directory = server.write_file("plain-file", "");
    let logs = server.dir().join("logs");
    let cases = [
        (
            format!(
                "pid = {0}/d.pid\naccess_log = {1}/a.log\nerror_log = {1}/e.log",
                not_a_directory.display(),
                logs.display()
            ),
            "cannot create pid file directory",
        ),
        (
            format!(
                "access_log = {}/a.log\nerror_log = {}/e.log",
                not_a_directory.display(),
                logs.display()
            ),
            "cannot create log directory",
        ),
    ];
    for (index, (lines, expected)) in cases.iter().enumerate() {
        let config = server.write_file(&format!("bad{index}.conf"), &server.config_text(lines));

        let output = run(&["-d"], &config);

        assert!(!output.status.success(), "{lines}");
        assert!(
            stderr(&output).contains(expected),
            "{lines}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(&not_a_directory.display().to_string()),
            "names the path"
        );
    }
}

#[test]
fn dash_d_needs_log_files() {
    let server = RedisServer::start();
    let config = server.write_file("stdout.conf", &server.config_text(""));

    let output = run(&["-d"], &config);

    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("-d needs [delayer] access_log and error_log"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn check_config_prints_what_it_would_use_and_tries_redis() {
    let server = RedisServer::start_with(&["--requirepass", "hunter2"]);
    let good = server.write_file(
        "good.conf",
        &format!(
            "{}password = hunter2\nmax_active = 7\n",
            server.config_text("batch_size = 250\nbatch_size = 250")
        ),
    );

    let output = run(&["--check-config"], &good);

    assert!(output.status.success(), "{}", stderr(&output));
    let printed = String::from_utf8_lossy(&output.stdout);
    for expected in [
        "batch_size = 250",
        "max_active = 7",
        "password = ********",
        "warning: ",
        "[delayer] batch_size is set more than once",
        "answers (redis_version ",
        "is OK",
    ] {
        assert!(printed.contains(expected), "{expected:?} in {printed}");
    }
    assert!(!printed.contains("hunter2"), "the password is masked");

    let wrong = server.write_file(
        "wrong.conf",
        &format!("{}password = nope\n", server.config_text("")),
    );
    let output = run(&["--check-config"], &wrong);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("refused the password"),
        "{}",
        stderr(&output)
    );

    let mut gone = RedisServer::start();
    let unreachable = gone.write_file("unreachable.conf", &gone.config_text(""));
    gone.stop(false);
    let output = run(&["--check-config"], &unreachable);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("cannot reach Redis at"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn daily_rotation_writes_dated_files() {
    let server = RedisServer::start();
    let (config, logs) = server.daemon_config("rotating", "log_rotate = daily\nlog_max_files = 3");
    let mut daemon = Daemon::start(&config);
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let dated = logs.access.with_file_name(format!("access.log.{today}"));

    wait_until_sync(
        Duration::from_secs(5),
        "the dated access log to get the start line",
        || read(&dated).contains("Service started successfully"),
    );

    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(2)).success());
    assert!(read(&dated).contains("Service stopped successfully"));
}

/// Whether process `pid` catches `signal` (its bit in `SigCgt` of /proc/PID/status).
fn catches(pid: u32, signal: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (signal - 1)) != 0)
}

/// A SIGTERM in the first moment of a start, before the runtime exists, stops the daemon as any
/// other: its clean-up done (pid file removed, stop line logged), exit 0. The configuration is read
/// from a FIFO, so that the start waits there until the test has sent the signal.
#[test]
fn a_stop_signal_in_the_first_moment_of_a_start_is_a_graceful_stop() {
    let server = RedisServer::start();
    let pid_file = server.dir().join("run/delayer.pid");
    let (written, logs) = server.daemon_config("early", &format!("pid = {}", pid_file.display()));
    let fifo = server.dir().join("early.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let mut daemon = Daemon::start(&fifo);

    wait_until_sync(Duration::from_secs(10), "SIGTERM to be caught", || {
        catches(daemon.pid(), 15)
    });
    daemon.signal("TERM");
    std::fs::write(&fifo, std::fs::read(&written).unwrap()).unwrap();

    assert!(daemon.wait(Duration::from_secs(10)).success());
    let access = read(&logs.access);
    assert!(access.contains("Stopping (SIGTERM received)"), "{access}");
    assert!(access.contains("Service stopped successfully"), "{access}");
    assert!(!pid_file.exists(), "the pid file is removed");
}
