//! The `delayer` binary as a user runs it: several instances, signals, pid file,
//! and bad input.

use crate::support;

use support::DaemonSetup;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::redis::{self, AsyncCommands};
use delayer_wire::keys::{JOB_POOL, job_bucket};
use support::{
    Daemon, RedisServer, delayer_command, delivered, fill_backlog, read, wait_until_sync,
};

async fn pool_size(redis: &mut MultiplexedConnection) -> usize {
    redis.zcard(JOB_POOL).await.unwrap()
}

fn assert_exactly_once(counts: &HashMap<String, usize>, ids: &[String]) {
    let duplicated: Vec<_> = counts
        .iter()
        .filter(|(_, count)| **count > 1)
        .take(5)
        .collect();
    assert!(duplicated.is_empty(), "duplicates, e.g. {duplicated:?}");
    let missing: Vec<_> = ids
        .iter()
        .filter(|id| !counts.contains_key(*id))
        .take(5)
        .collect();
    assert!(missing.is_empty(), "missing, e.g. {missing:?}");
    assert_eq!(counts.len(), ids.len(), "nothing else was delivered");
}

#[tokio::test]
async fn three_daemons_deliver_a_backlog_exactly_once() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let topics = ["a", "b", "c", "d", "e"];
    let ids = fill_backlog(&mut redis, 50_000, &topics).await;
    // Small batches make the three interleave many times over the backlog.
    let (mut daemons, logs) =
        support::start_daemons(&server, &["one", "two", "three"], "batch_size = 100");

    support::wait_for_empty_pool(&redis, Duration::from_secs(60)).await;

    assert_exactly_once(&delivered(&mut redis, &topics).await, &ids);
    let working = logs
        .iter()
        .filter(|logs| read(&logs.access).contains("Job is ready"))
        .count();
    assert!(
        working >= 2,
        "only {working} daemon moved jobs: the test proves little"
    );
    for daemon in &mut daemons {
        daemon.signal("TERM");
        assert!(daemon.wait(Duration::from_secs(5)).success());
    }
}

#[tokio::test]
async fn sigterm_mid_drain_stops_within_two_seconds_and_loses_nothing() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let topics = ["t"];
    let ids = fill_backlog(&mut redis, 300_000, &topics).await;
    let pid_file = server.dir().join("run/delayer.pid");
    let (config, logs) = server.daemon_config(
        "daemon",
        &format!("batch_size = 50\npid = {}", pid_file.display()),
    );
    let mut daemon = Daemon::start(&config);
    logs.wait_for_line("Job is ready, Topic: t, IDs: [job-0000000,");

    daemon.signal("TERM");
    let signalled = Instant::now();
    let status = daemon.wait(Duration::from_secs(2));
    let stopped_after = signalled.elapsed();

    assert!(status.success(), "exit status {status:?}");
    let left = pool_size(&mut redis).await;
    assert!(
        left > 0,
        "the backlog drained before the signal: the test proves nothing"
    );
    let counts = delivered(&mut redis, &topics).await;
    assert_eq!(
        counts.len() + left,
        ids.len(),
        "every job is either moved or still waiting"
    );
    assert!(counts.values().all(|count| *count == 1), "no duplicates");
    let waiting: Vec<String> = redis.zrange(JOB_POOL, 0, -1).await.unwrap();
    assert!(
        waiting.iter().all(|id| !counts.contains_key(id)),
        "no job is both moved and waiting"
    );
    assert!(read(&logs.access).contains(&format!(
        "Service stopped successfully, PID: {}",
        daemon.pid()
    )));
    assert!(!pid_file.exists(), "pid file removed");
    eprintln!("stopped {stopped_after:?} after SIGTERM with {left} jobs still waiting");
}

#[tokio::test]
async fn every_stop_signal_stops_gracefully() {
    let server = RedisServer::start();
    for signal in ["INT", "QUIT", "HUP", "TERM"] {
        let (config, logs) = server.daemon_config(signal, "");
        let mut daemon = Daemon::start(&config);
        logs.wait_for_line("Service started successfully");

        daemon.signal(signal);

        assert!(daemon.wait(Duration::from_secs(2)).success(), "SIG{signal}");
        assert!(
            read(&logs.access).contains("Service stopped successfully"),
            "SIG{signal}"
        );
    }
}

#[tokio::test]
async fn logs_have_the_original_shape() {
    let server = RedisServer::start();
    let (config, logs) = server.daemon_config("daemon", "");
    let mut daemon = Daemon::start(&config);
    let mut redis = server.connect().await;
    let _: () = redis.zadd(JOB_POOL, "orphan-1", 1).await.unwrap();
    support::legacy_client::push(
        &mut redis,
        &support::legacy_client::Message {
            id: "id-1".into(),
            topic: "mail".into(),
            body: "b".into(),
        },
        0,
    )
    .await
    .unwrap();
    logs.wait_for_line("Job is ready, Topic: mail, IDs: [id-1]");
    logs.wait_for_line("orphan-1");
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(2)).success());

    let access = read(&logs.access);
    let pid = daemon.pid();
    let lines: Vec<&str> = access.lines().collect();
    assert_eq!(
        lines.first().map(|line| &line[27..]),
        Some(&*format!("Service started successfully, PID: {pid}"))
    );
    assert_eq!(
        lines.last().map(|line| &line[27..]),
        Some(&*format!("Service stopped successfully, PID: {pid}"))
    );
    for line in &lines {
        assert!(is_legacy_line(line, "info"), "{line:?}");
    }
    let error = read(&logs.error);
    assert!(
        error.lines().all(|line| is_legacy_line(line, "warning")),
        "{error}"
    );
    assert!(error.contains("IDs: [orphan-1]"), "{error}");
}

/// `[info] 2018/10/21 11:24:24 message`
fn is_legacy_line(line: &str, level: &str) -> bool {
    let Some(rest) = line.strip_prefix(&format!("[{level}] ")) else {
        return false;
    };
    let stamp = rest.as_bytes();
    stamp.len() > 20
        && stamp[..19]
            .iter()
            .enumerate()
            .all(|(index, byte)| match index {
                4 | 7 => *byte == b'/',
                10 => *byte == b' ',
                13 | 16 => *byte == b':',
                _ => byte.is_ascii_digit(),
            })
        && stamp[19] == b' '
}

#[test]
fn a_second_instance_with_the_same_pid_file_is_refused() {
    let server = RedisServer::start();
    let pid_file = server.dir().join("delayer.pid");
    let (config, logs) = server.daemon_config("first", &format!("pid = {}", pid_file.display()));
    let mut first = Daemon::start(&config);
    logs.wait_for_line("Service started successfully");
    assert_eq!(read(&pid_file).trim(), first.pid().to_string());

    let second = delayer_command().arg("-c").arg(&config).output().unwrap();

    assert!(!second.status.success());
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains(&format!(
            "ERROR: Service is being executed, PID: {}",
            first.pid()
        )),
        "{stderr}"
    );
    assert!(
        first.process.try_wait().unwrap().is_none(),
        "the first one is untouched"
    );
    assert_eq!(read(&pid_file).trim(), first.pid().to_string());
    first.signal("TERM");
    assert!(first.wait(Duration::from_secs(2)).success());
    assert!(!pid_file.exists());
}

#[test]
fn a_killed_daemon_not_yet_reaped_does_not_block_a_restart() {
    let server = RedisServer::start();
    let pid_file = server.dir().join("delayer.pid");
    let pid_line = format!("pid = {}", pid_file.display());
    let (config, logs) = server.daemon_config("killed", &pid_line);
    let mut killed = Daemon::start(&config);
    logs.wait_for_line("Service started successfully");

    // Killed, and left unreaped: a zombie still named "delayer", its lock released.
    support::send_signal(killed.pid(), "KILL");
    // Its other threads may hold the lock a moment longer than the leader takes to be a zombie.
    wait_until_sync(Duration::from_secs(5), "a zombie, its lock free", || {
        process_state(killed.pid()) == Some('Z')
            && std::fs::File::open(&pid_file).is_ok_and(|file| file.try_lock().is_ok())
    });
    let (config, logs) = server.daemon_config("restarted", &pid_line);
    let mut restarted = Daemon::start(&config);

    logs.wait_for_line("Service started successfully");
    assert_eq!(read(&pid_file).trim(), restarted.pid().to_string());
    restarted.signal("TERM");
    assert!(restarted.wait(Duration::from_secs(2)).success());
    killed.wait(Duration::from_secs(1));
}

#[test]
fn an_unlocked_pid_file_counts_only_for_a_delayer_that_does_not_lock() {
    let server = RedisServer::start();
    let pid_file = server.dir().join("legacy.pid");
    let (config, logs) = server.daemon_config("second", &format!("pid = {}", pid_file.display()));

    // The Go original writes its pid file without a lock: a running one must still count. `sleep`
    // run as "delayer" stands in for it (a link, not a copy: a copy being written while another
    // test forks cannot be run, ETXTBSY).
    let go_original = server.dir().join("delayer");
    std::os::unix::fs::symlink("/bin/sleep", &go_original).unwrap();
    let mut original = std::process::Command::new(&go_original)
        .arg("60")
        .spawn()
        .unwrap();
    std::fs::write(&pid_file, format!("{}\n", original.id())).unwrap();
    let refused = delayer_command().arg("-c").arg(&config).output().unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains(&format!(
            "Service is being executed, PID: {}",
            original.id()
        )),
        "{stderr}"
    );
    original.kill().unwrap();
    original.wait().unwrap();

    // One of ours would hold the lock if the file were its own: one that runs without it (another
    // instance, or a pid reused) does not block.
    let (other_config, other_logs) = server.daemon_config("other", "");
    let mut other = Daemon::start(&other_config);
    other_logs.wait_for_line("Service started successfully");
    std::fs::write(&pid_file, format!("{}\n", other.pid())).unwrap();
    let mut taker = Daemon::start(&config);
    logs.wait_for_line("Service started successfully");
    assert_eq!(read(&pid_file).trim(), taker.pid().to_string());
    for daemon in [&mut taker, &mut other] {
        daemon.signal("TERM");
        assert!(daemon.wait(Duration::from_secs(2)).success());
    }

    // And a pid that no longer runs is stale.
    std::fs::write(&pid_file, format!("{}\n", other.pid())).unwrap();
    let mut after_stale = Daemon::start(&config);
    logs.wait_for_line(&format!(
        "Service started successfully, PID: {}",
        after_stale.pid()
    ));
    after_stale.signal("TERM");
    assert!(after_stale.wait(Duration::from_secs(2)).success());
}

/// The state letter of `pid` in /proc (R, S, Z, ...), `None` once it is gone.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

fn failed_start(args: &[&std::ffi::OsStr], cwd: &std::path::Path) -> String {
    let output = delayer_command()
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap();
    assert!(!output.status.success(), "should fail: {args:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn bad_config_values_are_refused_naming_file_section_key_and_value() {
    let server = RedisServer::start();
    let config = server.write_file(
        "bad.conf",
        "[delayer]\ntimer_interval = 1000\n[redis]\nport = 63 79   ; typo\n",
    );

    let stderr = failed_start(&["-c".as_ref(), config.as_os_str()], server.dir());

    assert!(stderr.contains(&config.display().to_string()), "{stderr}");
    assert!(stderr.contains("[redis] port = \"63 79\""), "{stderr}");
}

#[test]
fn a_configurations_problems_are_told_one_a_line_with_those_a_bad_value_used_to_hide() {
    let server = RedisServer::start();
    let blocker = server.write_file("not-a-directory", "");
    let config = server.write_file(
        "many.conf",
        &format!(
            "[delayer]\ntimer_intervall = 5\nbatch_size = 0\npid = {}/d.pid\n[redis]\nport = 70000\n\
             [redsi]\nhost = x\n",
            blocker.display()
        ),
    );

    let stderr = failed_start(&["-c".as_ref(), config.as_os_str()], server.dir());

    let lines: Vec<&str> = stderr.lines().collect();
    let errors = lines
        .iter()
        .filter(|line| line.starts_with("ERROR: "))
        .count();
    let warnings = lines
        .iter()
        .filter(|line| line.starts_with("warning: "))
        .count();
    assert_eq!((errors, warnings), (3, 2), "{stderr}");
    assert!(!stderr.contains("\\n"), "no escaped line breaks: {stderr}");
    for expected in [
        "[delayer] batch_size = \"0\"",
        "[redis] port = \"70000\"",
        "[delayer] pid = ",
        "unknown key [delayer] timer_intervall",
        "unknown section [redsi]",
    ] {
        assert!(stderr.contains(expected), "{expected:?} in {stderr}");
    }
}

#[test]
fn a_missing_config_file_is_named() {
    let server = RedisServer::start();
    let missing = server.dir().join("nope.conf");

    let stderr = failed_start(&["-c".as_ref(), missing.as_os_str()], server.dir());

    assert!(
        stderr.contains("cannot read configuration file"),
        "{stderr}"
    );
    assert!(stderr.contains(&missing.display().to_string()), "{stderr}");
}

#[test]
fn without_c_the_search_paths_are_tried_and_named() {
    let empty = tempfile::tempdir().unwrap();
    if std::path::Path::new(delayer::config::SEARCH_PATHS[1]).exists() {
        return; // this machine has a system-wide config: the search would succeed
    }

    let stderr = failed_start(&[], empty.path());

    for path in delayer::config::SEARCH_PATHS {
        assert!(stderr.contains(path), "{stderr}");
    }
    let help = delayer_command().arg("-h").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("./delayer.conf") && help.contains("/etc/delayer/delayer.conf"),
        "{help}"
    );
}

#[test]
fn an_unwritable_log_path_is_a_start_up_error() {
    let server = RedisServer::start();
    let blocker = server.write_file("not-a-directory", "");
    let config = server.write_file(
        "log.conf",
        &server.config_text(&format!("access_log = {}/access.log", blocker.display())),
    );

    let stderr = failed_start(&["-c".as_ref(), config.as_os_str()], server.dir());

    assert!(stderr.contains("cannot create log directory"), "{stderr}");
    assert!(stderr.contains(&blocker.display().to_string()), "{stderr}");
}

#[test]
fn a_wrong_password_or_database_is_told_in_plain_words() {
    let server = RedisServer::start_with(&["--requirepass", "right", "--databases", "4"]);
    let cases = [
        (
            "password = wrong\n",
            // Redis's own words, not the client library's ("Password authentication failed").
            "refused the password ([redis] password is set): WRONGPASS invalid username-password pair",
        ),
        ("", "refused the password ([redis] password is empty)"),
        (
            "password = right\ndatabase = 9\n",
            "has no database 9 ([redis] database)",
        ),
    ];
    for (index, (redis_lines, expected)) in cases.iter().enumerate() {
        let text = format!("{}{redis_lines}", server.config_text(""));
        let config = server.write_file(&format!("auth{index}.conf"), &text);

        let stderr = failed_start(&["-c".as_ref(), config.as_os_str()], server.dir());

        assert!(stderr.contains(expected), "{redis_lines:?}: {stderr}");
        assert!(
            stderr.contains(&server.socket().display().to_string()),
            "names the address: {stderr}"
        );
    }
}

#[test]
fn version_and_help() {
    let version = delayer_command().arg("-v").output().unwrap();
    assert!(version.status.success());
    assert!(String::from_utf8_lossy(&version.stdout).contains(env!("CARGO_PKG_VERSION")));
    let help = delayer_command().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "-c, --configuration",
        "-d, --daemon",
        "-h, --help",
        "-v, --version",
    ] {
        assert!(help.contains(flag), "{flag} in {help}");
    }
}

#[tokio::test]
async fn without_client_tracking_jobs_still_move_every_timer_interval() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "default", "-client|tracking"][..])
        .query_async(&mut redis)
        .await
        .unwrap();
    let (config, logs) = server.daemon_config("daemon", "timer_interval = 200");
    let mut daemon = Daemon::start(&config);
    logs.wait_for_line("cannot report writes to delayer:job_pool");

    let _: () = redis.hset(job_bucket("j"), "topic", "t").await.unwrap();
    let _: () = redis.zadd(JOB_POOL, "j", 1).await.unwrap();
    support::wait_for_empty_pool(&redis, Duration::from_secs(5)).await;

    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(2)).success());
}
