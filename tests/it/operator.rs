//! What an operator meets: `--check-config` as strict as `nginx -t`, start-up failures that leave
//! nothing behind and touch no other instance, and logs in one style, filtered by level, as JSON
//! lines, or with journald priorities.

use crate::support;

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use delayer_client::redis::AsyncCommands;
use delayer_wire::keys::{JOB_POOL, job_bucket};
use support::{Daemon, DaemonSetup, RedisServer, delayer_command, read};

fn run(args: &[&str], config: &Path) -> Output {
    delayer_command()
        .arg("-c")
        .arg(config)
        .args(args)
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn check_config_refuses_a_typo_that_the_daemon_only_warns_about() {
    let server = RedisServer::start();
    let (config, logs) = server.daemon_config("typo", "timer_intervall = 500");

    let checked = run(&["--check-config"], &config);

    assert!(!checked.status.success());
    let said = stderr(&checked);
    assert!(
        said.contains("unknown key [delayer] timer_intervall, ignored"),
        "{said}"
    );
    assert!(said.contains("has 1 problem"), "{said}");
    // The daemon itself reads the original's files, whatever else they hold: a warning.
    let mut daemon = Daemon::start(&config);
    logs.wait_for_line("Service started successfully");
    // Each log has its own writer thread: the warning may land after the start line.
    support::wait_until_sync(
        Duration::from_secs(5),
        "the warning in the error log",
        || read(&logs.error).contains("unknown key [delayer] timer_intervall"),
    );
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());
}

#[test]
fn check_config_names_every_problem_at_once() {
    let server = RedisServer::start();
    let dir = server.dir();
    std::fs::write(dir.join("a-file"), "").unwrap();
    let config = server.write_file(
        "bad.conf",
        &server.config_text(&format!(
            "timer_interval = soon\nbatch_size = 0\npid = {}\n",
            dir.join("a-file/delayer.pid").display()
        )),
    );

    let values = run(&["--check-config"], &config);
    let said = stderr(&values);
    assert!(!values.status.success());
    assert!(
        said.contains("[delayer] timer_interval = \"soon\""),
        "{said}"
    );
    assert!(said.contains("[delayer] batch_size = \"0\""), "{said}");

    // Values fine, paths not: each is named, and nothing is left where they pointed.
    let config = server.write_file(
        "paths.conf",
        &server.config_text(&format!(
            "pid = {}\naccess_log = {}\n",
            dir.join("a-file/delayer.pid").display(),
            dir.join("new/logs/access.log").display()
        )),
    );
    let paths = run(&["--check-config"], &config);
    let said = stderr(&paths);
    assert!(!paths.status.success());
    assert!(
        said.contains("[delayer] pid = ") && said.contains("a-file/delayer.pid: cannot be created"),
        "{said}"
    );
    assert!(
        !said.contains("access_log"),
        "a creatable log path is fine: {said}"
    );
    assert!(!dir.join("new").exists(), "the check created nothing");
}

/// The case: the shipped configuration checked by a user who may not write /var/run.
#[test]
fn check_config_as_nobody_refuses_the_shipped_pid_path() {
    if !is_root() {
        eprintln!("skipped: needs root to run a command as nobody");
        return;
    }
    let server = RedisServer::start();
    let shipped = std::fs::read_to_string("delayer.conf").unwrap();
    let config = server.write_file(
        "shipped.conf",
        &shipped.replace(
            "host = 127.0.0.1",
            &format!("host = {}", server.socket().display()),
        ),
    );
    // nobody must reach the config file and the socket.
    let open_up = |path: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    };
    open_up(server.dir());
    open_up(&config);
    let output = std::process::Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_delayer"))
        .arg("--check-config")
        .arg("-c")
        .arg(&config)
        .current_dir(server.dir())
        .output()
        .unwrap();

    let said = stderr(&output);
    assert!(!output.status.success(), "{said}");
    assert!(
        said.contains("[delayer] pid = /var/run/delayer.pid: cannot be"),
        "{said}"
    );
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|line| line.strip_prefix("Uid:"))
            .is_some_and(|uids| uids.split_whitespace().next() == Some("0"))
    })
}

#[test]
fn a_failed_start_leaves_no_pid_directory_and_no_banner() {
    let server = RedisServer::start();
    let dir = server.dir();
    std::fs::write(dir.join("a-file"), "").unwrap();
    let config = server.write_file(
        "fails.conf",
        &server.config_text(&format!(
            "pid = {}\naccess_log = {}\n",
            dir.join("run/a/delayer.pid").display(),
            dir.join("a-file/access.log").display()
        )),
    );

    let output = run(&[], &config);

    assert!(!output.status.success());
    assert!(stderr(&output).contains("a-file"), "{}", stderr(&output));
    assert!(
        !dir.join("run").exists(),
        "the pid file's directories are gone again"
    );
    assert!(
        output.stdout.is_empty(),
        "no banner for a start that failed"
    );
}

#[tokio::test]
async fn a_refused_second_daemon_leaves_the_first_ones_files_alone() {
    let server = RedisServer::start();
    let pid_file = server.dir().join("delayer.pid");
    let (config, logs) = server.daemon_config("d", &format!("pid = {}", pid_file.display()));
    let started = run(&["-d"], &config);
    assert!(started.status.success(), "{}", stderr(&started));
    logs.wait_for_line("Service started successfully");
    let pid: u32 = read(&pid_file).trim().parse().unwrap();
    let (access, error) = (read(&logs.access), read(&logs.error));

    let second = run(&["-d"], &config);

    assert!(!second.status.success());
    assert!(
        stderr(&second).contains(&format!("ERROR: Service is being executed, PID: {pid}")),
        "{}",
        stderr(&second)
    );
    assert_eq!(
        read(&logs.error),
        error,
        "the running instance's error log is untouched"
    );
    assert_eq!(read(&logs.access), access);
    support::send_signal(pid, "TERM");
    support::wait_until_sync(Duration::from_secs(5), "the daemon to stop", || {
        !pid_file.exists()
    });
}

/// Pushes a job due now and an orphan, and waits until the daemon dealt with both.
async fn a_move_and_an_orphan(server: &RedisServer) {
    let mut redis = server.connect().await;
    let _: () = redis.hset(job_bucket("j1"), "topic", "t").await.unwrap();
    let _: () = redis.zadd(JOB_POOL, "j1", 1).await.unwrap();
    let _: () = redis.zadd(JOB_POOL, "orphan", 1).await.unwrap();
    support::wait_for_empty_pool(&redis, Duration::from_secs(5)).await;
}

#[tokio::test]
async fn log_level_warn_silences_the_job_lines_but_not_the_warnings() {
    let server = RedisServer::start();
    let (config, logs) = server.daemon_config("quiet", "log_level = warn");
    let mut daemon = Daemon::start(&config);
    a_move_and_an_orphan(&server).await;
    logs.wait_for_line("Dropped orphan jobs");
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());

    assert_eq!(read(&logs.access), "", "no info lines at all");
    assert!(read(&logs.error).contains("IDs: [orphan]"));
}

#[tokio::test]
async fn json_lines_parse_and_carry_the_fields() {
    let server = RedisServer::start();
    let (config, logs) = server.daemon_config("json", "log_format = json");
    let mut daemon = Daemon::start(&config);
    a_move_and_an_orphan(&server).await;
    logs.wait_for_line("Dropped orphan jobs");
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());

    let lines: Vec<serde_json::Value> = read(&logs.access)
        .lines()
        .chain(read(&logs.error).lines())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    for line in &lines {
        assert!(
            line["level"].is_string() && line["time"].is_string() && line["message"].is_string()
        );
    }
    let moved = lines
        .iter()
        .find(|line| {
            line["message"]
                .as_str()
                .unwrap()
                .starts_with("Job is ready")
        })
        .expect("a move line");
    assert_eq!(moved["topic"], "t");
    assert_eq!(moved["ids"], serde_json::json!(["j1"]));
    assert_eq!(moved["count"], 1);
    assert_eq!(moved["level"], "info");
    let orphan = lines
        .iter()
        .find(|line| line["level"] == "warning")
        .expect("the orphan line");
    assert_eq!(orphan["ids"], serde_json::json!(["orphan"]));
}

#[tokio::test]
async fn lines_to_journald_carry_its_priorities() {
    let server = RedisServer::start();
    let config = server.write_file("journal.conf", &server.config_text(""));
    let stdout_path = server.dir().join("journal");
    let stdout = std::fs::File::create(&stdout_path).unwrap();
    // What systemd sets when stdout is its journal stream: that stream's device and inode.
    let journal = {
        use std::os::unix::fs::MetadataExt;
        let meta = stdout.metadata().unwrap();
        format!("{}:{}", meta.dev(), meta.ino())
    };
    let mut daemon = Daemon {
        process: delayer_command()
            .arg("-c")
            .arg(&config)
            .env("JOURNAL_STREAM", journal)
            .stdout(stdout)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    };
    a_move_and_an_orphan(&server).await;
    support::wait_until_sync(Duration::from_secs(5), "the orphan line", || {
        read(&stdout_path).contains("Dropped orphan")
    });
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());

    let journal = read(&stdout_path);
    let priority = |text: &str| {
        journal
            .lines()
            .find(|line| line.contains(text))
            .and_then(|line| line.get(..3))
            .unwrap_or("none")
            .to_string()
    };
    assert_eq!(priority("Service started successfully"), "<6>", "{journal}");
    assert_eq!(priority("Job is ready"), "<6>");
    assert_eq!(priority("Dropped orphan jobs"), "<4>");
}
