//! TLS and ACL users against Debian's redis-server with TLS on a free port, its certificates made
//! by openssl in the test: the daemon under exactly the documented ACL, the CLI, mutual TLS, and
//! each mistake told at start and by --check-config.

use crate::support;

use std::path::PathBuf;
use std::time::Duration;

use delayer_client::redis::AsyncCommands;
use support::legacy_client::{self, Message};
use support::{
    DAEMON_ACL, Daemon, Logs, RedisServer, acl, delayer_fails, delayer_succeeds, read,
    wait_for_ready,
};

/// A daemon configuration for the server's TLS port: `[redis]` gets `redis` lines after host and
/// port; logs go to `<name>/`.
fn tls_config(server: &RedisServer, name: &str, redis: &str) -> (PathBuf, Logs) {
    let (port, _) = server.tls();
    let logs = Logs {
        access: server.dir().join(name).join("access.log"),
        error: server.dir().join(name).join("error.log"),
    };
    let text = format!(
        "[delayer]\ntimer_interval = 100\naccess_log = {}\nerror_log = {}\n\
         [redis]\nhost = 127.0.0.1\nport = {port}\n{redis}\n",
        logs.access.display(),
        logs.error.display()
    );
    (server.write_file(&format!("{name}.conf"), &text), logs)
}

/// `tls = true` with the test CA.
fn trusted(server: &RedisServer) -> String {
    let (_, certificates) = server.tls();
    format!(
        "tls = true\ntls_ca_file = {}",
        certificates.file("ca.crt").display()
    )
}

async fn push_due(server: &RedisServer, ids: &[&str]) {
    let mut redis = server.connect().await;
    for id in ids {
        let message = Message {
            id: id.to_string(),
            topic: "t".into(),
            body: "b".into(),
        };
        legacy_client::push(&mut redis, &message, 0).await.unwrap();
    }
}

fn stop(mut daemon: Daemon) {
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());
}

#[tokio::test]
async fn the_daemon_and_the_cli_work_over_tls_the_daemon_as_the_documented_acl_user() {
    let server = RedisServer::start_tls(false);
    let mut admin = server.connect().await;
    acl(&mut admin, "delayer", &format!("on >s3cret {DAEMON_ACL}")).await;
    let (config, logs) = tls_config(
        &server,
        "daemon",
        &format!(
            "{}\nusername = delayer\npassword = s3cret",
            trusted(&server)
        ),
    );
    let said = delayer_succeeds(&config, &["--check-config"]);
    assert!(
        said.contains("username = delayer") && said.contains("tls = true"),
        "{said}"
    );

    let daemon = Daemon::start(&config);
    push_due(&server, &["one", "two", "three"]).await;
    wait_for_ready(&admin, "t", 3).await;
    // The only TCP port is the TLS one: every connection of the daemon's is TLS, as that user.
    let clients: String = delayer_client::redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(clients.contains("user=delayer"), "{clients}");

    // The CLI, over TLS too (as `default`: the daemon's ACL does not cover pushing).
    let (cli, _) = tls_config(&server, "cli", &trusted(&server));
    delayer_succeeds(&cli, &["push", "t", "from the cli"]);
    wait_for_ready(&admin, "t", 4).await;
    stop(daemon);
    assert!(
        !read(&logs.error).contains("[error]"),
        "{}",
        read(&logs.error)
    );
}

#[tokio::test]
async fn mutual_tls_wants_the_client_certificate_and_works_with_it() {
    let server = RedisServer::start_tls(true);
    let (without, _) = tls_config(&server, "without", &trusted(&server));
    let refused = delayer_fails(&without, &[]);
    assert!(
        refused.contains("refused delayer's TLS client certificate"),
        "{refused}"
    );

    let (_, certificates) = server.tls();
    let (with, _) = tls_config(
        &server,
        "with",
        &format!(
            "{}\ntls_cert_file = {}\ntls_key_file = {}",
            trusted(&server),
            certificates.file("client.crt").display(),
            certificates.file("client.key").display()
        ),
    );
    let daemon = Daemon::start(&with);
    push_due(&server, &["mutual"]).await;
    wait_for_ready(&server.connect().await, "t", 1).await;
    stop(daemon);
}

#[tokio::test]
async fn tls_and_acl_mistakes_are_told_at_start_and_by_check_config() {
    let server = RedisServer::start_tls(false);
    let mut admin = server.connect().await;
    acl(&mut admin, "delayer", &format!("on >s3cret {DAEMON_ACL}")).await;
    let (_, certificates) = server.tls();
    let ca = certificates.file("ca.crt").display().to_string();
    let cases = [
        (
            "tls = true".to_string(),
            "shows a TLS certificate delayer does not trust (UnknownIssuer)",
        ),
        (
            format!(
                "tls = true\ntls_ca_file = {}",
                certificates.file("other-ca.crt").display()
            ),
            "shows a TLS certificate delayer does not trust",
        ),
        (
            "tls = true\ntls_ca_file = /nonexistent/ca.crt".to_string(),
            "cannot read [redis] tls_ca_file /nonexistent/ca.crt",
        ),
        (
            format!(
                "tls = true\ntls_ca_file = {}",
                certificates.file("server.key").display()
            ),
            "holds no PEM certificate",
        ),
        (
            format!("tls = true\ntls_ca_file = {ca}\nusername = nobody\npassword = s3cret"),
            "refused user \"nobody\" with the password given",
        ),
        (
            format!("tls = true\ntls_ca_file = {ca}\ntls_cert_file = {ca}"),
            "given without tls_key_file",
        ),
        (format!("tls_ca_file = {ca}"), "set, but tls is not true"),
        (
            format!(
                "tls = true\ntls_ca_file = {ca}\ntls_cert_file = {}\ntls_key_file = {}",
                certificates.file("client.crt").display(),
                certificates.file("server.key").display()
            ),
            "do not belong together",
        ),
    ];
    for (index, (redis, says)) in cases.iter().enumerate() {
        let (config, _) = tls_config(&server, &format!("case{index}"), redis);
        for args in [&["--check-config"][..], &[]] {
            let stderr = delayer_fails(&config, args);
            assert!(stderr.contains(says), "{args:?} {redis}: {stderr}");
        }
    }
    // The wrong kind of port, told by --check-config (a start waits for it as for any Redis it
    // cannot reach).
    let (tls_port, _) = server.tls();
    let (_plain, plain_port) = RedisServer::start_tcp(&[]);
    for (port, redis, says) in [
        (tls_port, "", "(a TLS port? then set [redis] tls = true)"),
        (
            plain_port,
            &trusted(&server)[..],
            "(with tls = true: is this its tls-port?)",
        ),
    ] {
        let text = format!("[redis]\nhost = 127.0.0.1\nport = {port}\n{redis}\n");
        let config = server.write_file(&format!("port{port}.conf"), &text);
        let stderr = delayer_fails(&config, &["--check-config"]);
        assert!(stderr.contains(says), "{redis}: {stderr}");
    }
    let keys: Vec<String> = admin.keys("delayer:*").await.unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

#[tokio::test]
async fn tls_insecure_works_without_a_ca_and_says_loudly_what_it_gives_up() {
    let server = RedisServer::start_tls(false);
    let (config, logs) = tls_config(&server, "insecure", "tls = true\ntls_insecure = true");
    let daemon = Daemon::start(&config);
    push_due(&server, &["insecure"]).await;
    wait_for_ready(&server.connect().await, "t", 1).await;
    stop(daemon);
    assert!(
        read(&logs.error).contains("tls_insecure = true: Redis's certificate is not checked"),
        "{}",
        read(&logs.error)
    );
}
