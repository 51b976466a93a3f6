//! delayer: a Redis-native delayed-message daemon, wire-compatible with the Go Delayer server.
//!
//! Clients (the PHP and Go Delayer libraries, unchanged) write a job as a hash
//! `delayer:job_bucket:<id>` {topic, body} and add `<id>` to the sorted set `delayer:job_pool`
//! scored by its due time in unix seconds. This daemon moves each id, once it is due, onto the list
//! `delayer:ready_queue:<topic>` with one atomic Lua script (`move_due.lua`), so several daemons
//! can share one Redis without ever pushing a job twice. Consumers RPOP/BRPOP the list.
//!
//! The parts: [`config`] reads `delayer.conf`; `mover` is the timer loop; `deliver` the loop that
//! hands due jobs to sinks; `kafka` the Kafka link; `webhook` the HTTP sink; `redis` the pool and what Redis failures
//! mean; `schedules` claims recurring schedules' ticks; `history` writes what happened to Redis,
//! per minute; `http` the job API, metrics and the console; [`cli`] the command line;
//! [`service`] the process plumbing (daemon, pid file, signals, logs).
//!
//! # Words
//!
//! - **job**: an id, a topic and a body, pushed to fall due at a time. Its **bucket** is the hash
//!   that holds its data (`delayer:job_bucket:<id>`: topic, body, and our own fields).
//! - **pool**: the sorted set of the jobs waiting to fall due, each id scored by its due time
//!   (`delayer:job_pool`; one per topic in the cluster layout). The other pool, of connections
//!   to Redis, is a `RedisPool`.
//! - **topic**: the name consumers take jobs by; each has a **ready list**
//!   (`delayer:ready_queue:<topic>`) where its due jobs wait to be popped or reserved.
//! - **move**: one call of the move script, which takes up to `batch_size` due ids from the pool
//!   onto their ready lists at once, drops orphans (ids whose bucket is gone) and parks the jobs
//!   of a topic that cannot take them (paused, or its ready list key holds another type). A
//!   **drain** moves batch after batch until one comes back short, then releases the lapsed
//!   reservations.
//! - **poll**: one drain of the pool (in a cluster: of one topic, or a read of the registry of
//!   topics), when the next job falls due, a client pushes, or `timer_interval` has passed. Log
//!   lines, `/healthz` and the metric `delayer_last_look_timestamp_seconds` call it a look.
//! - **reservation**: a job a consumer took with `reserve` (at least once, where a pop is at most
//!   once): recorded with a deadline until it is acked or nacked, or the deadline passes. Its
//!   **receipt** (id, attempt, token) names that one reservation to ack, nack or touch, so a
//!   consumer that ran out of time cannot finish what another holds now.
//! - **lapse**: a reservation whose deadline passed: the job is delivered again (back to the
//!   pool, due now), or after `max_attempts` goes to its topic's **dead list**
//!   (`delayer:dead_queue:<topic>`), where it stays until requeued.
//! - **sink**: where the due jobs of some topics go instead of their ready lists (Kafka, a
//!   webhook). The
//!   **delivery loop** reserves them, sends each to its sink, and acks it, gives it back or
//!   dead-lists it as the sink reports (`deliver::Sink`); each sink runs a loop of its own.
//! - **layout**: what the keys are called and where a topic's keys are: `legacy` (the original's
//!   names), `jop` (its first generation's) or the cluster layout, where every key of a topic
//!   carries the topic as its `{hash tag}`, so that one script call touches one slot. A
//!   **shard** is the keys one script call works on: every topic's in the shared layouts, one
//!   topic's in the cluster layout (`delayer_wire::keys::Keys::shards`).
//! - **outage**: the time a subject's polls fail (Redis itself, or one topic of a cluster). What
//!   went wrong is a Redis **failure**, of a **failure kind**; an outage is logged once when it
//!   begins and once when it ends, however many polls fail in between.
//! - **duty**: a task that runs beside the mover until the stop (a stager, the schedules'
//!   rounds, the history, a delivery loop, Kafka in). Each sleeps with `sleep_or_stop` and has
//!   its **trouble** said once when it begins and once when it ends (`service::duty`).
//! - **stop**: the trigger that ends every loop and duty (a `CancellationToken`; `Stop` holds
//!   the graceful one and the one a second signal cancels). A script call that has started
//!   always finishes.
//! - **schedule**: a recurring job (`[schedule.NAME]`). Each of its **ticks** is **claimed**
//!   once by one daemon (one call of the claim script, in a **round** of claims); a claim that
//!   pushes the tick's job **fires** it (counted as `fired`), one the overlap policy holds back
//!   skips it.
//! - **compact layout**: where jobs our pushes write far ahead wait (`delayer_wire::compact`).
//!   A **window** is the 64 s of due times one **chunk** (a list of packed jobs) holds; a daemon
//!   **stages** a chunk a minute before its window, writing its jobs in the legacy form, in
//!   **passes** of stage calls.
//! - **page**: a part of a list read at a time, from a cursor or an offset (the waiting jobs, a
//!   topic's ready, reserved and dead lists), for the console, the shell and the HTTP API.
//! - **client** and **inspector**: an application's calls (push, reserve, ack, ...) and an
//!   operator's (stats, pages, promote, pause, dead lists, schedules), `delayer_client::Client`
//!   and `delayer_client::Inspector`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cli;
pub mod config;
mod deliver;
mod history;
mod http;
mod kafka;
mod metrics;
mod mover;
mod qstash;
mod redis;
mod schedules;
pub mod service;
pub mod text;
mod webhook;

use std::sync::Arc;

use anyhow::Result;
use delayer_client::{Client, Inspector};
use delayer_wire::shared_connection::SharedConnection;
use tracing::{error, info, warn};

pub use config::Config;
use http::Http;
pub use mover::Mover;
pub use schedules::{Claimer, Round};
pub use service::Stop;

/// The service, checked and ready to run.
pub struct Service {
    mover: Mover,
    http: Option<Http>,
    /// Writes the configuration's schedules first, then claims schedules' ticks.
    schedules: (Inspector, Claimer),
    /// Writes what the mover counts to the history: only a daemon that serves the console does.
    history: Option<Arc<SharedConnection>>,
    from_file: Vec<delayer_wire::schedule::Definition>,
    /// The Kafka link, with `[kafka]`.
    #[cfg(feature = "kafka")]
    kafka: Option<kafka::Link>,
    /// The webhooks, with `[webhook.NAME]` sections.
    webhooks: Option<webhook::Webhooks>,
}

impl Service {
    /// Logs the configuration's warnings, refuses a Redis that rejects the configured password
    /// or database (an unreachable one is waited for), and binds the HTTP server's address if
    /// `[http]` asks for one.
    pub async fn start(config: &Config) -> Result<Service> {
        for warning in config.unknown.iter().chain(&config.warnings) {
            warn!("{warning}");
        }
        let mover = Mover::new(&config.mover, &config.redis)?;
        mover.check_redis().await?;
        let http = match &config.http {
            Some(settings) => {
                // A request reads no body longer than the HTTP API takes, whatever a legacy
                // client wrote: none can make the daemon hold more.
                let reading = delayer_client::Settings {
                    max_body_read: Some(config.max_body_bytes),
                    ..config.client_settings()
                };
                let redis = SharedConnection::lazy(mover.target());
                let (timer_interval, redis_address) =
                    (config.mover.timer_interval, config.redis.address());
                let metrics = mover.metrics();
                Some(
                    Http::bind(
                        settings,
                        redis,
                        reading,
                        metrics,
                        timer_interval,
                        redis_address,
                        config.serves_qstash().then(|| config.qstash.clone()),
                    )
                    .await?,
                )
            }
            None => None,
        };
        let schedules = {
            let redis = SharedConnection::lazy(mover.target());
            let settings = config.client_settings();
            let lifetime = settings.ready_max_lifetime;
            let claimer = Claimer::new(redis.clone(), settings.layout, lifetime);
            (Inspector::new(&Client::on(redis, settings)), claimer)
        };
        let history = http
            .is_some()
            .then(|| SharedConnection::lazy(mover.target()));
        #[cfg(feature = "kafka")]
        let kafka = match &config.kafka {
            Some(settings) => {
                let client = Client::on(
                    SharedConnection::lazy(mover.target()),
                    config.client_settings(),
                );
                let mut settings = settings.clone();
                if config.serves_qstash() {
                    settings.owned_elsewhere.push(qstash::TOPIC.into());
                }
                Some(kafka::Link::new(
                    &settings,
                    &config.file,
                    client,
                    mover.target(),
                    mover.metrics(),
                )?)
            }
            None => None,
        };
        #[cfg(not(feature = "kafka"))]
        if config.kafka.is_some() {
            anyhow::bail!(
                "{}: [kafka]: this delayer was built without Kafka (the cargo feature kafka)",
                config.file.display()
            );
        }
        let webhooks = if config.webhooks.is_empty() && !config.serves_qstash() {
            None
        } else {
            let client = Client::on(
                SharedConnection::lazy(mover.target()),
                config.client_settings(),
            );
            let kafka_topics = config.kafka.as_ref().map_or(&[][..], |kafka| &kafka.topics);
            let signing_key = config
                .qstash
                .keys
                .as_ref()
                .map(|keys| keys.current.as_str());
            let resolver = config.serves_qstash().then(|| qstash::Resolver {
                allow: config.qstash.allow.clone(),
            });
            Some(webhook::Webhooks::new(
                &config.webhooks,
                resolver,
                kafka_topics,
                signing_key,
                client,
                SharedConnection::lazy(mover.target()),
                &mover.metrics(),
            )?)
        };
        Ok(Service {
            #[cfg(feature = "kafka")]
            kafka,
            webhooks,
            mover,
            http,
            schedules,
            history,
            from_file: config.schedules.clone(),
        })
    }

    /// Logs the start line, moves jobs as they fall due (and serves HTTP) until a stop is asked
    /// for, then logs the stop line once the last script call and the requests in flight have
    /// finished.
    pub async fn run(self, stop: Stop) {
        info!("Service started successfully, PID: {}", std::process::id());
        let serving = async {
            if let Some(http) = self.http
                && let Err(error) = http.serve(&stop).await
            {
                error!("{error:#}");
            }
        };
        let (inspector, claimer) = self.schedules;
        let schedules = schedules::run(inspector, claimer, &self.from_file, &stop.graceful);
        // The history's last write comes once the mover's last move is counted.
        let moved = tokio_util::sync::CancellationToken::new();
        let moving = async {
            self.mover.run(&stop.graceful).await;
            moved.cancel();
        };
        let history = async {
            if let Some(redis) = self.history {
                history::run(redis, self.mover.metrics().history(), &moved).await;
            }
        };
        let delivering = async {
            #[cfg(feature = "kafka")]
            if let Some(kafka) = self.kafka {
                kafka.run(&stop.graceful).await;
            }
        };
        let calling = async {
            if let Some(webhooks) = self.webhooks {
                webhooks.run(&stop.graceful).await;
            }
        };
        tokio::join!(moving, serving, schedules, history, delivering, calling);
        info!("Service stopped successfully, PID: {}", std::process::id());
    }
}

/// Starts the service and runs it until a stop is asked for.
pub async fn run(config: &Config, stop: Stop) -> Result<()> {
    Service::start(config).await?.run(stop).await;
    Ok(())
}

/// For `--check-config` and the bench: connects to the configured Redis once and returns its
/// version.
pub async fn redis_version(config: &Config) -> Result<String> {
    redis::server_version(&config.redis).await
}
