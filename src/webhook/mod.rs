//! Webhooks (`docs/webhooks.md`): the due jobs of the topics a `[webhook.NAME]` section names,
//! each sent by HTTP to its URL by the delivery loop, signed as QStash signs when `[qstash]` has
//! signing keys, within its flow control over every daemon. Each webhook has a loop and a
//! connection pool of its own, so that one whose receiver hangs delays no other.

mod call;
mod failure;
mod gate;
mod lines;
mod messages;
mod retry_delay;
mod settings;
mod signature;
mod sink;

use std::sync::Arc;

use anyhow::{Context, Result};
use delayer_client::Client;
use delayer_wire::scripts::webhook_gate::Limits;
use delayer_wire::shared_connection::SharedConnection;
use futures_util::future::join_all;
use tokio_util::sync::CancellationToken;

use crate::deliver;
use crate::metrics::Metrics;
use crate::qstash;
use messages::Messages;
pub use retry_delay::RetryDelay;
pub use settings::{METHODS, MOST_IN_FLIGHT, Rate, WebhookSettings};
use sink::Webhook;

/// The configured webhooks, each with its HTTP client made, and QStash's messages.
pub struct Webhooks {
    client: Client,
    /// For the flow control's leases.
    redis: Arc<SharedConnection>,
    hooks: Vec<Webhook>,
    /// QStash's messages, with its API on.
    messages: Option<Messages>,
}

impl Webhooks {
    /// The webhooks of `settings`, and with `messages` QStash's messages (resolving their hosts
    /// with `messages`' resolver, which leaves out refused addresses), for the jobs `client`
    /// reaches (and `redis`, for their flow control), signed with `signing_key` if set, counted
    /// in `metrics`. A topic goes to one sink only: a webhook leaves out QStash's topic, and the
    /// topics that `taken` (Kafka's) or an earlier webhook matches.
    pub fn new(
        settings: &[WebhookSettings],
        messages: Option<qstash::Resolver>,
        taken: &[String],
        signing_key: Option<&str>,
        client: Client,
        redis: Arc<SharedConnection>,
        metrics: &Metrics,
    ) -> Result<Webhooks> {
        // reqwest's TLS takes the process's crypto provider: ring, as the Redis link's.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut hooks = Vec::with_capacity(settings.len());
        let mut earlier = taken.to_vec();
        let messages = messages.map(|resolver| {
            earlier.insert(0, qstash::TOPIC.to_string());
            let http = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .dns_resolver(resolver)
                .tcp_nodelay(true)
                .build();
            http.map(|http| {
                let figures = metrics.webhooks.add(qstash::TOPIC);
                let key = signing_key.map(str::to_string);
                Messages::new(http, key, figures, redis.clone(), client.clone())
            })
        });
        let messages = messages
            .transpose()
            .context("QStash's messages: cannot make their HTTP client")?;
        for settings in settings {
            let redirects = if settings.follow_redirects {
                reqwest::redirect::Policy::limited(10)
            } else {
                reqwest::redirect::Policy::none()
            };
            let http = reqwest::Client::builder()
                .timeout(settings.timeout)
                .redirect(redirects)
                .tcp_nodelay(true)
                .build()
                .with_context(|| {
                    format!("[webhook.{}]: cannot make its HTTP client", settings.name)
                })?;
            hooks.push(Webhook {
                title: format!("webhook {}", settings.name),
                settings: settings.clone(),
                http,
                signing_key: signing_key.map(str::to_string),
                figures: metrics.webhooks.add(&settings.name),
                taken: earlier.clone(),
                gate: None,
                stop: CancellationToken::new(),
            });
            earlier.extend(settings.topics.iter().cloned());
        }
        Ok(Webhooks {
            client,
            redis,
            hooks,
            messages,
        })
    }

    /// Delivers each webhook's due jobs until `stop`; at the stop, the requests in flight finish
    /// and are settled first, and the jobs still waiting for their turn are given back.
    pub async fn run(mut self, stop: &CancellationToken) {
        let ended = CancellationToken::new();
        if let Some(messages) = &mut self.messages {
            messages.stop = stop.clone();
            messages.ended = ended.clone();
        }
        let mut gates = Vec::new();
        for hook in &mut self.hooks {
            hook.stop = stop.clone();
            let settings = &hook.settings;
            if settings.parallelism.is_none() && settings.rate.is_none() {
                continue;
            }
            let limits = Limits {
                most: settings.parallelism,
                spacing: settings.rate.map(|rate| rate.spacing()),
                lease: settings.ttr(),
            };
            let (gate, serving) =
                gate::new(&settings.name, limits, self.redis.clone(), ended.clone());
            hook.gate = Some(gate);
            gates.push(serving);
        }
        let client = &self.client;
        let delivering = async {
            let hooks = join_all(
                self.hooks
                    .iter()
                    .map(|hook| deliver::run(client, hook, &hook.figures.out, stop)),
            );
            let messages = async {
                if let Some(messages) = &self.messages {
                    deliver::run(client, messages, &messages.figures.out, stop).await;
                }
            };
            tokio::join!(hooks, messages);
            ended.cancel();
        };
        tokio::join!(delivering, join_all(gates));
    }
}
