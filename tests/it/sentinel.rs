//! Redis Sentinel: a master, a replica and three sentinels of Debian's redis-server on free ports;
//! the daemon finds the master through them, follows a failover forced in the middle of a drain,
//! and every job reaches the new master's ready lists exactly once.

use crate::support;

use std::time::Duration;

use delayer_client::redis::{AsyncCommands, IntoConnectionInfo};
use delayer_testkit::proxy::ForgetfulProxy;
use delayer_testkit::sentinel::{MASTER_NAME, SentinelSetup};
use delayer_wire::connection::Target;
use delayer_wire::keys::{JOB_POOL, ready_queue};
use support::{Daemon, DaemonSetup, RedisServer, add_jobs, delayer_fails, delayer_succeeds, read};

const JOBS: usize = 20_000;
const TOPICS: [&str; 2] = ["a", "b"];

/// A daemon configuration that finds Redis through `sentinels`; logs go to `<name>/` under
/// `server`'s directory.
fn sentinel_config(
    server: &RedisServer,
    name: &str,
    sentinels: &str,
    master: &str,
) -> (std::path::PathBuf, support::Logs) {
    let (config, logs) = server.daemon_config(name, "timer_interval = 100");
    // Replace the harness's [redis] (a unix socket) with the sentinels.
    let text = read(&config);
    let delayer = text.split("[redis]").next().unwrap();
    let text = format!("{delayer}[redis]\nsentinels = {sentinels}\nsentinel_master = {master}\n");
    std::fs::write(&config, text).unwrap();
    (config, logs)
}

#[tokio::test]
async fn the_daemon_follows_a_failover_in_the_middle_of_a_drain_and_loses_nothing() {
    let setup = SentinelSetup::start();
    let mut master = setup.master.connect().await;
    // Due over the next five seconds: the drain is under way when the failover comes.
    let start = delayer_wire::time::unix_now();
    let jobs = (0..JOBS).map(|index| {
        let due = start + 5.0 * index as f64 / JOBS as f64;
        (format!("job-{index:05}"), TOPICS[index % 2], due)
    });
    add_jobs(&mut master, jobs).await;
    let (config, logs) = sentinel_config(&setup.master, "daemon", &setup.addresses(), MASTER_NAME);
    let mut daemon = Daemon::start(&config);
    support::wait_for(
        Duration::from_secs(10),
        "a first few thousand jobs moved",
        || {
            let mut master = master.clone();
            async move {
                let ready: usize = master.llen(ready_queue("a")).await.unwrap_or(0);
                (ready >= 2_000).then_some(())
            }
        },
    )
    .await;

    setup.fail_over();
    setup.wait_for_promotion();

    let mut new_master = setup.connect_replica().await;
    support::wait_for(
        Duration::from_secs(30),
        "every job moved on the new master",
        || {
            let mut new_master = new_master.clone();
            async move {
                let waiting: usize = new_master.zcard(JOB_POOL).await.unwrap();
                let a: usize = new_master.llen(ready_queue("a")).await.unwrap();
                let b: usize = new_master.llen(ready_queue("b")).await.unwrap();
                (waiting == 0 && a + b >= JOBS).then_some(())
            }
        },
    )
    .await;
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());

    let counts = support::delivered(&mut new_master, &TOPICS).await;
    assert_eq!(counts.len(), JOBS, "every job");
    assert!(counts.values().all(|count| *count == 1), "none twice");
    let access = read(&logs.access);
    let moved_to = format!(
        "Redis master {MASTER_NAME} is now at 127.0.0.1:{} (was 127.0.0.1:{})",
        setup.replica_port, setup.master_port
    );
    assert_eq!(access.matches(&moved_to).count(), 1, "said once:\n{access}");

    // The shell commands find the master through the same sentinels.
    delayer_succeeds(
        &config,
        &["push", "a", "after the failover", "--id", "late"],
    );
    let waiting: Option<f64> = new_master.zscore(JOB_POOL, "late").await.unwrap();
    assert!(waiting.is_some(), "pushed to the new master");
}

#[tokio::test]
async fn a_master_name_no_sentinel_knows_is_told_at_start() {
    let setup = SentinelSetup::start();
    // A first sentinel that cannot be reached must not hide what the others say.
    let sentinels = format!("127.0.0.1:{},{}", support::free_port(), setup.addresses());
    let (config, _) = sentinel_config(&setup.master, "wrong", &sentinels, "nosuchmaster");
    for args in [&["--check-config"][..], &[]] {
        let stderr = delayer_fails(&config, args);
        assert!(
            stderr.contains("knows a master named \"nosuchmaster\""),
            "{args:?}: {stderr}"
        );
    }
}

#[tokio::test]
async fn a_plain_redis_given_as_a_sentinel_is_told_at_start() {
    let (plain, port) = RedisServer::start_tcp(&[]);
    let sentinels = format!("127.0.0.1:{port}");
    let (config, _) = sentinel_config(&plain, "plain", &sentinels, MASTER_NAME);
    for args in [&["--check-config"][..], &[]] {
        let stderr = delayer_fails(&config, args);
        assert!(
            stderr.contains(&format!("{sentinels} is a plain Redis, not a sentinel")),
            "{args:?}: {stderr}"
        );
    }
}

#[tokio::test]
async fn sentinels_that_want_a_password_are_asked_with_sentinel_password() {
    let setup = SentinelSetup::start_with_password(Some("s3cret-sentinel"));
    let mut master = setup.master.connect().await;
    let (config, _) = sentinel_config(&setup.master, "password", &setup.addresses(), MASTER_NAME);

    let without = read(&config);
    let stderr = delayer_fails(&config, &["--check-config"]);
    assert!(
        stderr.contains("the sentinels refused the password ([redis] sentinel_password is empty)")
            && stderr.contains("NOAUTH"),
        "{stderr}"
    );
    std::fs::write(&config, without.clone() + "sentinel_password = wrong\n").unwrap();
    let stderr = delayer_fails(&config, &[]);
    assert!(
        stderr.contains("the sentinels refused the password ([redis] sentinel_password is set)"),
        "{stderr}"
    );

    // An ACL user of the sentinels' own (Redis 6.2+).
    for index in 0..3 {
        let reply = setup.sentinel_command(
            index,
            &["ACL", "SETUSER", "watcher", "on", ">w-pw", "+@all"],
        );
        assert_eq!(reply, "OK");
    }
    let as_user = |password: &str| {
        format!("{without}sentinel_username = watcher\nsentinel_password = {password}\n")
    };
    std::fs::write(&config, as_user("wrong")).unwrap();
    let stderr = delayer_fails(&config, &["--check-config"]);
    assert!(
        stderr
            .contains("the sentinels refused the password ([redis] sentinel_username \"watcher\""),
        "{stderr}"
    );
    std::fs::write(&config, as_user("w-pw")).unwrap();
    delayer_succeeds(&config, &["--check-config"]);
    // A user the sentinels' ACL does not let ask for the master.
    for index in 0..3 {
        let reply = setup.sentinel_command(index, &["ACL", "SETUSER", "watcher", "-@all", "+ping"]);
        assert_eq!(reply, "OK");
    }
    let stderr = delayer_fails(&config, &["--check-config"]);
    assert!(
        stderr.contains(
            "the sentinels do not let [redis] sentinel_username \"watcher\" ask where the master is"
        ),
        "{stderr}"
    );

    let text = without + "sentinel_password = s3cret-sentinel\n";
    std::fs::write(&config, text).unwrap();
    delayer_succeeds(&config, &["--check-config"]);
    let mut daemon = Daemon::start(&config);
    delayer_succeeds(&config, &["push", "a", "body", "--id", "through"]);
    support::wait_for(Duration::from_secs(10), "the job moved", || {
        let mut master = master.clone();
        async move {
            let ready: Vec<String> = master.lrange(ready_queue("a"), 0, -1).await.unwrap();
            (ready == ["through"]).then_some(())
        }
    })
    .await;
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());
    let waiting: usize = master.zcard(JOB_POOL).await.unwrap();
    assert_eq!(waiting, 0);
}

#[tokio::test]
async fn the_daemon_keeps_its_connection_to_the_sentinel_it_asks_every_second() {
    let setup = SentinelSetup::start();
    let (config, logs) = sentinel_config(&setup.master, "kept", &setup.addresses(), MASTER_NAME);
    let mut daemon = Daemon::start(&config);
    logs.wait_for_line("Service started successfully");

    // A connection to the first sentinel that has asked for the master and lived through a few
    // checks (one a second); a new connection for each would never get that old.
    support::wait_for(Duration::from_secs(15), "a kept connection", || {
        let clients = setup.sentinel_command(0, &["CLIENT", "LIST"]);
        let kept = clients.lines().any(|client| {
            let field = |name: &str| {
                client
                    .split(' ')
                    .find_map(|field| field.strip_prefix(name)?.strip_prefix('='))
            };
            // (Redis 7 names the subcommand, Redis 6 only `sentinel`.)
            field("cmd").is_some_and(|cmd| cmd.starts_with("sentinel"))
                && field("age").and_then(|age| age.parse::<u64>().ok()) >= Some(3)
        });
        async move { kept.then_some(()) }
    })
    .await;
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());
}

#[tokio::test]
async fn a_kept_sentinel_connection_that_went_silent_is_replaced() {
    let setup = SentinelSetup::start();
    let first = setup.addresses().split(',').next().unwrap().to_string();
    let port: u16 = first.rsplit(':').next().unwrap().parse().unwrap();
    let proxy = ForgetfulProxy::start(port).await;
    let sentinel = proxy.url().into_connection_info().unwrap();
    let node = "redis://127.0.0.1:1".into_connection_info().unwrap();
    let target = Target::sentinel(vec![sentinel], MASTER_NAME, node);
    let master = target.resolve().await.unwrap();
    assert_eq!(
        master.addr().to_string(),
        format!("127.0.0.1:{}", setup.master_port)
    );

    proxy.forget_open_connections();

    // The only sentinel: a kept connection that never answers again must not fail the lookup.
    let master = target.resolve().await.unwrap();
    assert_eq!(
        master.addr().to_string(),
        format!("127.0.0.1:{}", setup.master_port)
    );
}
