//! The daemon under exactly the ACL that docs/redis-deployments.md gives a delayer user: it moves
//! jobs, delivers lapsed reservations again, fills dead lists, claims schedules' ticks and answers
//! `--check-config`, and needs nothing more; with what the page adds for the compact layout, it
//! stages compact jobs.

use crate::support;

use std::time::Duration;

use delayer_client::redis::AsyncCommands;
use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::{Client, NewPush, Settings};
use delayer_wire::keys::{RESERVED, dead_queue, field, job_bucket};
use support::legacy_client::{self, Message};
use support::{
    DAEMON_ACL, Daemon, DaemonSetup, RedisServer, acl, delayer_succeeds, read, wait_for_ready,
    wait_until_pushers_see_a_stager,
};

/// What docs/redis-deployments.md adds to the daemon's ACL for schedules.
const SCHEDULES_ACL: &str = "+hgetall +exists +expire +hexists +del";
/// What it adds for the compact layout, for the daemon and the pushers.
const COMPACT_ACL: &str =
    "+exists +lrange +lindex +lset +expireat +del +rpush +llen +incr +set +zremrangebyscore +ltrim";

/// What it adds on servers that know `CLIENT SETINFO` (Redis 7.2 and later, Valkey), which the
/// client library sends on connecting; Redis 7.0 refuses it in an ACL.
const SETINFO_ACL: &str = "+client|setinfo";

/// docs/redis-deployments.md, its lines joined; and an admin's connection, once the daemon's
/// user (`default`) was given exactly the page's ACL and `more`.
async fn daemon_under(server: &RedisServer, more: &str) -> (String, MultiplexedConnection) {
    let mut admin = server.connect().await;
    acl(&mut admin, "admin", "on >admin ~* +@all").await;
    let documented = std::fs::read_to_string("docs/redis-deployments.md")
        .unwrap()
        .replace("\n  ", " ");
    let mut admin = server.connect_as("admin", "admin").await;
    let mut rules = format!("reset on nopass {DAEMON_ACL} {more}");
    if knows_setinfo(&mut admin).await {
        assert!(
            documented.contains(&format!(
                "`{SETINFO_ACL}` as well on Redis 7.2 and later and on Valkey"
            )),
            "the page gives what servers with CLIENT SETINFO add"
        );
        rules = format!("{rules} {SETINFO_ACL}");
    }
    acl(&mut admin, "default", &rules).await;
    (documented, admin)
}

/// Whether the server has `CLIENT SETINFO` (`COMMAND INFO` answers nil for a command it lacks).
async fn knows_setinfo(admin: &mut MultiplexedConnection) -> bool {
    let info: Vec<delayer_client::redis::Value> = delayer_client::redis::cmd("COMMAND")
        .arg("INFO")
        .arg("client|setinfo")
        .query_async(admin)
        .await
        .unwrap();
    !matches!(info[..], [delayer_client::redis::Value::Nil])
}

#[tokio::test]
async fn the_daemon_does_all_its_work_under_the_documented_acl() {
    let server = RedisServer::start();
    let (documented, mut admin) = daemon_under(&server, SCHEDULES_ACL).await;
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

#[tokio::test]
async fn the_daemon_stages_compact_jobs_under_the_documented_acl() {
    let server = RedisServer::start();
    let (documented, mut admin) = daemon_under(&server, COMPACT_ACL).await;
    assert!(
        documented.contains(&format!(
            "[The compact layout](compact.md) needs `{COMPACT_ACL}` as well"
        )),
        "the page gives what the compact layout adds"
    );
    // The pusher under what the page gives applications using the Rust client, and the same.
    acl(
        &mut admin,
        "pusher",
        &format!("on >pw ~delayer:* +@read +@write +@scripting +@connection +@transaction +time {COMPACT_ACL}"),
    )
    .await;
    let (config, logs) = server.daemon_config("daemon", "");
    let mut daemon = Daemon::start(&config);
    let settings = Settings {
        compact_after: Some(Duration::from_secs(2)),
        ..Settings::default()
    };
    let info = server.info();
    let user = info
        .redis_settings()
        .clone()
        .set_username("pusher")
        .set_password("pw");
    let client = Client::connect_with(info.set_redis_settings(user), settings)
        .await
        .unwrap();
    // The first push finds no daemon staging: it asks for one, and waits in the legacy form.
    client
        .push("t", "asks")
        .delay(Duration::from_secs(3))
        .await
        .unwrap();
    wait_until_pushers_see_a_stager(&admin).await;
    // More than one stage call takes: staged in parts.
    let jobs = (0..500).map(|n| {
        NewPush::new("t", format!("{n}"))
            .id(format!("{n}"))
            .delay(Duration::from_secs(3))
    });
    client.push_many(jobs).await.unwrap();
    let compact: usize = admin.hlen("delayer:compact:index").await.unwrap();
    assert_eq!(compact, 500, "they wait compact");

    wait_for_ready(&admin, "t", 501).await;
    daemon.signal("TERM");
    assert!(daemon.wait(Duration::from_secs(5)).success());
    let compact: usize = admin.hlen("delayer:compact:index").await.unwrap();
    assert_eq!(compact, 0);
    let error = read(&logs.error);
    assert!(
        !error.contains("NOPERM") && !error.contains("stage"),
        "{error}"
    );
}
