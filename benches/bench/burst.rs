//! A burst: thousands of jobs due in the same whole second (what the legacy clients write), from
//! that second to the last one's move, for the daemon and for the bare script started exactly then.
//! The end is Redis's own word: a keyspace notification when the emptied pool key is deleted.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::redis::{
    self, AsyncConnectionConfig, ProtocolVersion, PushInfo, PushKind, Value,
};
use delayer_wire::keys::{JOB_POOL, Layout};
use delayer_wire::scripts::move_due::MoveScript;
use delayer_wire::time::unix_now;

use super::support::{Daemon, DaemonSetup, RedisServer, add_jobs};
use super::{TOPICS, fresh, stop};

const JOBS: usize = 4_000;
/// Bursts per side: each figure is their median (and the best is shown too).
const BURSTS: usize = 7;

pub async fn burst(server: &RedisServer) {
    println!(
        "\n## Burst ({JOBS} jobs due in the same whole second, {} topics; from that second to the last move, over {BURSTS} bursts)\n",
        TOPICS.len()
    );
    println!("| | median ms | best ms | worst ms |");
    println!("|---|---:|---:|---:|");
    let mut bare = Vec::new();
    let mut daemon = Vec::new();
    for _ in 0..BURSTS {
        bare.push(one_burst(server, false).await);
        daemon.push(one_burst(server, true).await);
    }
    let median = |mut runs: Vec<f64>| {
        runs.sort_by(f64::total_cmp);
        (runs[runs.len() / 2], runs[0], runs[runs.len() - 1])
    };
    let (bare, bare_best, bare_worst) = median(bare);
    let (daemon, daemon_best, daemon_worst) = median(daemon);
    println!(
        "| bare script, started at the second | {bare:.2} | {bare_best:.2} | {bare_worst:.2} |"
    );
    println!(
        "| daemon (release build, access log on) | {daemon:.2} | {daemon_best:.2} | {daemon_worst:.2} |"
    );
    println!("| daemon / bare | {:.2} | | |", daemon / bare);
}

/// Milliseconds from the due second to the emptied pool.
async fn one_burst(server: &RedisServer, by_daemon: bool) -> f64 {
    let mut redis = fresh(server).await;
    redis::cmd("CONFIG")
        .arg(&["SET", "notify-keyspace-events", "Kg"][..])
        .query_async::<()>(&mut redis)
        .await
        .unwrap();
    // Kept for the burst: the subscription lives as long as its connection.
    let (emptied, _subscribed) = pool_emptied(server).await;
    let mut daemon = None;
    if by_daemon {
        let (config, _) = server.daemon_config("burst", "");
        daemon = Some(Daemon::start(&config));
        // Up once it has looked at the pool.
        let mut stats = redis.clone();
        while super::support::script_runs(&mut stats).await == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    // Due at a whole second at least a second ahead, as the legacy clients write them.
    let due = unix_now().floor() + 2.0;
    let jobs = (0..JOBS).map(|index| {
        (
            format!("burst-{index:05}"),
            TOPICS[index % TOPICS.len()],
            due,
        )
    });
    add_jobs(&mut redis, jobs).await;

    if !by_daemon {
        // Started exactly at the due second: slept to just before it, then spun.
        let until = Duration::from_secs_f64((due - unix_now() - 0.002).max(0.0));
        tokio::time::sleep(until).await;
        while unix_now() < due {
            std::hint::spin_loop();
        }
        let script = MoveScript::default();
        loop {
            let batch = script
                .run(
                    &mut redis,
                    &Layout::LEGACY.keys(""),
                    unix_now(),
                    1000,
                    false,
                )
                .await
                .unwrap();
            if !batch.is_full(1000) {
                break;
            }
        }
    }
    let ended = loop {
        if let Some(at) = *emptied.lock().unwrap() {
            break at;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    if let Some(daemon) = &mut daemon {
        stop(daemon);
    }
    (ended - due) * 1000.0
}

/// A subscription to the pool key's keyspace events, on the connection returned: the time of the
/// key's deletion is set when it comes.
async fn pool_emptied(server: &RedisServer) -> (Arc<Mutex<Option<f64>>>, MultiplexedConnection) {
    let emptied = Arc::new(Mutex::new(None));
    let seen = emptied.clone();
    let on_push = move |push: PushInfo| -> Result<(), std::convert::Infallible> {
        let is_del = push.kind == PushKind::Message
            && push
                .data
                .last()
                .is_some_and(|value| matches!(value, Value::BulkString(event) if event == b"del"));
        if is_del {
            seen.lock().unwrap().get_or_insert(unix_now());
        }
        Ok(())
    };
    let info = server.info();
    let settings = info
        .redis_settings()
        .clone()
        .set_protocol(ProtocolVersion::RESP3);
    let mut connection = redis::Client::open(info.set_redis_settings(settings))
        .unwrap()
        .get_multiplexed_async_connection_with_config(
            &AsyncConnectionConfig::new().set_push_sender(on_push),
        )
        .await
        .unwrap();
    connection
        .subscribe(format!("__keyspace@0__:{JOB_POOL}"))
        .await
        .unwrap();
    (emptied, connection)
}
