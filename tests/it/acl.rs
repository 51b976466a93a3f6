//! The daemon under exactly the ACL that docs/redis-deployments.md gives a delayer user: it moves
//! jobs, delivers lapsed reservations again, fills dead lists, claims schedules' ticks and answers
//! `--check-config`, and needs nothing more.

use crate::support;

use std::time::Duration;

use delayer_client::redis::AsyncCommands;
use delayer_wire::keys::{RESERVED, dead_queue, field, job_bucket};
use support::legacy_client::{self, Message};
use support::{
    DAEMON_ACL, Daemon, DaemonSetup, RedisServer, acl, delayer_succeeds, read, wait_for_ready,
};

/// What docs/redis-deployments.md adds to the daemon's ACL for schedules.
const SCHEDULES_ACL: &str = "+hgetall +exists +expire +hexists +del";

#[tokio::test]
async fn the_daemon_does_all_its_work_under_the_documented_acl() {
    let server = RedisServer::start();
    let mut admin = server.connect().await;
    acl(&mut admin, "admin", "on >admin ~* +@all").await;
    let documented = std::fs::read_to_string("docs/redis-deployments.md").unwrap();
    assert!(
        documented.contains(&format!("ACL SETUSER delayer on >secret {DAEMON_ACL}\n")),
        "the page gives the ACL this test runs the daemon under"
    );
    assert!(
        documented.contains(&format!(
            "[Schedules](schedules.md) need `{SCHEDULES_ACL}` as well"
        )),
        "and what schedules add to it"
    );
    let mut admin = server.connect_as("admin", "admin").await;
    // The daemon connects as `default`, which gets exactly the documented rules.
    acl(
        &mut admin,
        "default",
        &format!("reset on nopass {DAEMON_ACL} {SCHEDULES_ACL}"),
    )
    .await;
    let (config, logs) = server.daemon_config(
        "daemon",
        "max_attempts = 2\ntimer_interval = 50\n[schedule.tick]\ncron = every 1s\ntopic = ticks",
    );

    delayer_succeeds(&config, &["--check-config"]);

    let mut daemon = Daemon::start(&config);
    let message = Message {
        id: "due".into(),
        topic: "t".into(),
        body: "b".into(),
    };
    legacy_client::push(&mut admin, &message, 0).await.unwrap();
    // Two lapsed reservations: one to deliver again, one out of attempts.
    for (id, attempts) in [("again", "1"), ("dead", "2")] {
        let _: () = admin
            .hset_multiple(
                job_bucket(id),
                &[
                    (field::TOPIC, "t"),
                    (field::BODY, "b"),
                    (field::ATTEMPTS, attempts),
                ],
            )
            .await
            .unwrap();
        let _: () = admin.zadd(RESERVED, id, 1).await.unwrap();
    }

    let mut ready = wait_for_ready(&admin, "t", 2).await;
    wait_for_ready(&admin, "ticks", 1).await;
    logs.wait_for_line("Job is dead after 2 attempts, Topic: t, IDs: [dead]");
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());

    ready.sort();
    assert_eq!(ready, ["again", "due"]);
    let dead: Vec<String> = admin.lrange(dead_queue("t"), 0, -1).await.unwrap();
    assert_eq!(dead, ["dead"]);
    let error = read(&logs.error);
    assert!(
        !error.contains("NOPERM") && !error.contains("can't access") && !error.contains("ACL"),
        "{error}"
    );
    let commandstats: String = delayer_client::redis::cmd("INFO")
        .arg("errorstats")
        .query_async(&mut admin)
        .await
        .unwrap();
    let denied: delayer_client::redis::Value = delayer_client::redis::cmd("ACL")
        .arg("LOG")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(
        !commandstats.contains("NOPERM"),
        "{commandstats}\n{denied:?}"
    );
}
