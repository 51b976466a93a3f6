//! The HTTP server (`[http]`): go-delay-queue's job API and ours, the schedule API, QStash's API
//! (with `[qstash] token`), Prometheus
//! metrics, a health check and the console, served beside the mover on threads of its own and stopped with it
//! (requests in flight finish).

mod auth;
mod census;
mod connections;
mod console;
mod cross_site;
mod figures;
mod jobs;
mod pages;
mod qstash;
mod reply;
mod request;
mod schedules;
mod server;
mod state;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::get;
use delayer_client::{Client, Inspector};
use delayer_wire::shared_connection::SharedConnection;
use tokio_util::sync::CancellationToken;
use tower_http::timeout::TimeoutLayer;
use tracing::info;

use crate::metrics::Metrics;
use crate::qstash::QstashSettings;
use crate::service::{Stop, open_files};
pub use cross_site::HostName;
use figures::Figures;
use state::AppState;

/// A request may be this many times the largest body, plus [`REQUEST_SLACK`]: the body's JSON
/// encoding with every byte escaped (`\u00e9` for each byte of a non-ASCII character, as PHP's
/// json_encode and Python's json.dumps write by default) is at most six times as long.
const JSON_ESCAPE_FACTOR: usize = 6;
/// Room for the rest of the request (topic, id, delay) around the body.
const REQUEST_SLACK: usize = 64 << 10;
/// The longest a request may take; blocking pops and reserves wait at most `MAX_WAIT`.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest a stop waits to send the job API's last counts to the history.
const COUNTS_WAIT: Duration = Duration::from_secs(2);
/// The server's threads: its own, so that no request, however many come, keeps the mover (on the
/// daemon's main thread) from its work or from the CPU.
const THREADS: usize = 2;

/// The `[http]` section.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// `listen`: the address and port to serve on.
    pub listen: SocketAddr,
    /// `token`: when set, the job API wants `Authorization: Bearer <token>`, and the console a
    /// login with it to show bodies and act.
    pub token: Option<String>,
    /// `max_listed_topics`: the most topics `/metrics` and the console name one by one.
    pub max_listed_topics: usize,
    /// `max_listed_schedules`: the most schedules `/metrics` names one by one.
    pub max_listed_schedules: usize,
    /// `hosts`: the names a request may give as its `Host`, besides IP addresses and localhost.
    pub hosts: Vec<HostName>,
}

/// The server, bound and ready to serve.
pub struct Http {
    listener: std::net::TcpListener,
    state: Arc<AppState>,
}

impl Http {
    /// Binds `listen` now, so that a start fails at once when the address is taken. Its client
    /// (with `client_settings`) uses `redis`, which connects on the first request that needs
    /// it: the server starts while Redis is down. `/healthz` wants a look at the pool within two
    /// `timer_interval`s.
    pub async fn bind(
        settings: &HttpSettings,
        redis: Arc<SharedConnection>,
        client_settings: delayer_client::Settings,
        metrics: Arc<Metrics>,
        timer_interval: Duration,
        redis_address: String,
        qstash: Option<QstashSettings>,
    ) -> Result<Http> {
        let listener = server::listen(settings.listen)
            .with_context(|| format!("cannot listen on {} ([http] listen)", settings.listen))?;
        metrics.set_listed(settings.max_listed_topics);
        metrics.set_listed_schedules(settings.max_listed_schedules);
        let client = Client::on(redis.clone(), client_settings);
        let inspector = Inspector::new(&client);
        let settings_listen = listener.local_addr().unwrap_or(settings.listen);
        Ok(Http {
            listener,
            state: Arc::new(AppState {
                figures: Arc::new(Figures::new(inspector.clone(), metrics.clone())),
                client,
                inspector,
                redis,
                metrics,
                console: console::state::Console::new(settings.token.as_deref()),
                http_consumers: Default::default(),
                large_reads: tokio::sync::Semaphore::new(1),
                token: settings.token.clone(),
                hosts: settings.hosts.clone().into(),
                timer_interval,
                redis_address,
                stopping: CancellationToken::new(),
                qstash: qstash.map(|settings| crate::qstash::Api {
                    settings,
                    listen: settings_listen,
                }),
            }),
        })
    }

    /// Serves, on [`THREADS`] threads of its own, until a stop; then lets the requests in
    /// flight finish (for a few seconds at most).
    pub async fn serve(self, stop: &Stop) -> Result<()> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(THREADS)
            .thread_name("delayer-http")
            .enable_all()
            .build()
            .context("cannot start the HTTP server's threads")?;
        let stop = stop.clone();
        let served = runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(self.listener)?;
            let address = listener.local_addr()?;
            let open_files = open_files::limit();
            let most = connections::most(open_files);
            info!(
                "Serving HTTP on http://{address}: the job API, /metrics, /healthz, and the console \
                 at /; at most {most} connections at once (open-file limit {open_files})"
            );
            let stopping = self.state.stopping.clone();
            let client = self.state.client.clone();
            let router = router(self.state);
            let limit = connections::Limit::new(most);
            tokio::join!(server::serve(listener, router, &limit, &stop), async {
                stop.graceful.cancelled().await;
                stopping.cancel();
            });
            // The job API's pushes and acks counted since the last send (see the history).
            let _ = tokio::time::timeout(COUNTS_WAIT, client.send_counts()).await;
            anyhow::Ok(())
        });
        let served = served.await;
        // Tasks left (a census under way) end with the threads, without blocking this one.
        runtime.shutdown_background();
        served.context("the HTTP server failed")?
    }
}

fn router(state: Arc<AppState>) -> Router {
    let max_body = state.client.settings().max_body_bytes;
    // Larger requests are refused whole (413).
    let request_limit = JSON_ESCAPE_FACTOR * max_body + REQUEST_SLACK;
    let mut router = Router::new();
    if state.qstash.is_some() {
        router = router.nest("/v2", qstash::routes(&state));
    }
    router
        .nest("/delay-queue/api/jobs", jobs::routes(&state))
        .nest("/delay-queue/api/schedules", schedules::routes(&state))
        .route("/metrics", get(pages::metrics))
        .route("/healthz", get(pages::healthz))
        .merge(console::routes())
        .method_not_allowed_fallback(reply::no_such_method)
        .fallback(reply::no_such_path)
        .layer(axum::middleware::from_fn_with_state(
            state.hosts.clone(),
            cross_site::guard,
        ))
        .layer(DefaultBodyLimit::max(request_limit))
        .layer(TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ))
        .with_state(state)
}
