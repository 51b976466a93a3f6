//! The webhook sink: a due job sent as one HTTP request (its body, headers naming it, QStash's
//! signature when keys are set), delivered on a 2xx reply. Anything else is a failed attempt,
//! tried again after the retry delay (or the receiver's `Retry-After`) until the retries are
//! spent, then dead-listed with the status and the start of the reply.

use std::sync::Arc;
use std::time::Duration;

use delayer_client::Job;
use delayer_wire::time::to_unix_ms;
use reqwest::Method;
use reqwest::header::{HeaderMap, HeaderValue, USER_AGENT};
use tokio_util::sync::CancellationToken;

use super::call::{self, header, percent_encoded};
use super::gate::Gate;
use super::settings::WebhookSettings;
use super::signature;
use crate::deliver::{Outcome, Sink, matches};
use crate::metrics::Webhook as Figures;

/// The headers that name the job (those of Kafka's records, and its id).
pub const ID_HEADER: &str = "delayer-id";
pub const TOPIC_HEADER: &str = "delayer-topic";
pub const DUE_HEADER: &str = "delayer-due-ms";
pub const ATTEMPT_HEADER: &str = "delayer-attempt";

/// Due jobs to one webhook.
pub struct Webhook {
    pub settings: WebhookSettings,
    /// What this webhook's log lines start with: `webhook NAME`.
    pub title: String,
    pub http: reqwest::Client,
    /// `[qstash] current_signing_key`: requests are signed with it when it is set.
    pub signing_key: Option<String>,
    pub figures: Arc<Figures>,
    /// The topics of the sinks before this one (Kafka's, earlier webhooks'): not this one's.
    pub taken: Vec<String>,
    /// Its flow control, with `parallelism` or `rate`.
    pub gate: Option<Gate>,
    /// The daemon's stop: a request not started yet is not sent.
    pub stop: CancellationToken,
}

impl Sink for Webhook {
    fn name(&self) -> &str {
        &self.title
    }

    fn address(&self) -> &str {
        &self.settings.url
    }

    fn topics(&self) -> &[String] {
        &self.settings.topics
    }

    fn takes(&self, topic: &str) -> bool {
        matches(&self.settings.topics, topic) && !matches(&self.taken, topic)
    }

    fn ttr(&self) -> Duration {
        self.settings.ttr()
    }

    fn room(&self) -> usize {
        self.settings.room()
    }

    fn keep(&self) -> Option<Duration> {
        None
    }

    /// Another try after the retry delay while retries are left.
    fn retry(&self, job: &Job) -> Option<Duration> {
        let tried = job.attempts;
        (tried <= self.settings.retries).then(|| self.settings.retry_delay.before(tried))
    }

    async fn send(&self, job: &Job) -> Outcome {
        let _pass = match &self.gate {
            Some(gate) => match gate.enter(&self.stop).await {
                Some(pass) => Some(pass),
                None => return Outcome::NotSent,
            },
            None => None,
        };
        let url = url_of(&self.settings.url, job);
        let request = match self.request(&url, job) {
            Ok(request) => request,
            Err(why) => return Outcome::Refused(why),
        };
        let follow = format!("[webhook.{}] follow_redirects = no", self.settings.name);
        let settings = &self.settings;
        let (outcome, _) = call::send(
            request,
            (&settings.method, &url),
            settings.timeout,
            &follow,
            &self.figures,
        )
        .await;
        outcome
    }
}

impl Webhook {
    /// The request that delivers `job` to `url`, or why none can.
    fn request(&self, url: &str, job: &Job) -> Result<reqwest::RequestBuilder, String> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|error| format!("the URL {url:?} made for this job is not valid: {error}"))?;
        let method = Method::from_bytes(self.settings.method.as_bytes()).expect("checked");
        let mut headers = HeaderMap::new();
        headers.insert(USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE));
        header(&mut headers, ID_HEADER, job.id.as_bytes());
        header(&mut headers, TOPIC_HEADER, job.topic.as_bytes());
        header(
            &mut headers,
            ATTEMPT_HEADER,
            job.attempts.to_string().as_bytes(),
        );
        if let Some(due) = job.due {
            header(
                &mut headers,
                DUE_HEADER,
                to_unix_ms(due).to_string().as_bytes(),
            );
        }
        if let Some(key) = &self.signing_key {
            let signature = signature::sign(key, url, &job.body);
            header(&mut headers, "upstash-signature", signature.as_bytes());
            header(&mut headers, "upstash-message-id", job.id.as_bytes());
            let retried = job.attempts.saturating_sub(1).to_string();
            header(&mut headers, "upstash-retried", retried.as_bytes());
        }
        Ok(self
            .http
            .request(method, parsed)
            .headers(headers)
            .body(job.body.clone()))
    }
}

const USER_AGENT_VALUE: &str = concat!("delayer/", env!("CARGO_PKG_VERSION"));

/// `template` with `{topic}` and `{id}` filled in from `job`, percent-encoded.
pub fn url_of(template: &str, job: &Job) -> String {
    template
        .replace("{topic}", &percent_encoded(job.topic.as_bytes()))
        .replace("{id}", &percent_encoded(job.id.as_bytes()))
}
