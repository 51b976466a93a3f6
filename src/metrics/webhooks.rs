//! Each webhook's figures (`delayer_webhook_*`, labelled by its name): its deliveries (see
//! [`Deliveries`]) and its failed attempts by status (an HTTP status, or `timeout`, `connect`,
//! `dns`, `tls`, `redirect`). A daemon without webhooks shows none of these series.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use super::Deliveries;

/// The webhooks' figures, in the order the configuration names them.
#[derive(Debug, Default)]
pub struct Webhooks {
    hooks: Mutex<Vec<Arc<Webhook>>>,
}

/// One webhook's figures.
#[derive(Debug, Default)]
pub struct Webhook {
    /// Its name (`[webhook.NAME]`).
    pub name: String,
    /// Its deliveries.
    pub out: Deliveries,
    /// Failed attempts, by status.
    failures: Mutex<BTreeMap<String, u64>>,
}

impl Webhook {
    /// An attempt that failed with `status` ("503", "timeout", ...).
    pub fn failed(&self, status: &str) {
        let mut failures = self.failures.lock().expect("not poisoned");
        *failures.entry(status.to_string()).or_default() += 1;
    }

    /// Failed attempts by status, for the console.
    pub fn failures(&self) -> BTreeMap<String, u64> {
        self.failures.lock().expect("not poisoned").clone()
    }
}

impl Webhooks {
    /// The figures of a webhook named `name`, added to what `/metrics` shows.
    pub fn add(&self, name: &str) -> Arc<Webhook> {
        let hook = Arc::new(Webhook {
            name: name.to_string(),
            ..Webhook::default()
        });
        self.hooks.lock().expect("not poisoned").push(hook.clone());
        hook
    }

    /// Every webhook's figures.
    pub fn all(&self) -> Vec<Arc<Webhook>> {
        self.hooks.lock().expect("not poisoned").clone()
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookLabel {
    webhook: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabel {
    webhook: String,
    status: String,
}

impl Collector for Webhooks {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let hooks = self.all();
        if hooks.is_empty() {
            return Ok(());
        }
        let label = |hook: &Webhook| HookLabel {
            webhook: hook.name.clone(),
        };
        type Count = fn(&Deliveries) -> u64;
        let counters: [(&str, &str, Count); 3] = [
            (
                "webhook_delivered_jobs",
                "Jobs whose request got a 2xx reply, acked in Redis",
                |out| out.delivered.get(),
            ),
            (
                "webhook_retried_jobs",
                "Jobs whose request failed, given back to be tried again after the retry delay",
                |out| out.retried.get(),
            ),
            (
                "webhook_dead_jobs",
                "Jobs sent to the dead list: out of retries, or refused for good (489 with Upstash-NonRetryable-Error)",
                |out| out.refused.get(),
            ),
        ];
        for (name, help, count) in counters {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for hook in &hooks {
                ConstCounter::new(count(&hook.out)).encode(family.encode_family(&label(hook))?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "webhook_failed_attempts",
            "Requests that failed, by status: the HTTP status, or timeout, connect, dns, tls, redirect",
            None,
            MetricType::Counter,
        )?;
        for hook in &hooks {
            for (status, count) in hook.failures() {
                let label = FailureLabel {
                    webhook: hook.name.clone(),
                    status,
                };
                ConstCounter::new(count).encode(family.encode_family(&label)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "webhook_in_flight_jobs",
            "Requests sent whose reply has not come yet",
            None,
            MetricType::Gauge,
        )?;
        for hook in &hooks {
            let in_flight = hook.out.in_flight.get();
            ConstGauge::new(in_flight).encode(family.encode_family(&label(hook))?)?;
        }
        let mut family = encoder.encode_descriptor(
            "webhook_due_to_acked_seconds",
            "From a job's due time to its ack in Redis after its webhook answered 2xx",
            None,
            MetricType::Histogram,
        )?;
        for hook in &hooks {
            hook.out
                .due_to_acked
                .encode(family.encode_family(&label(hook))?)?;
        }
        Ok(())
    }
}
