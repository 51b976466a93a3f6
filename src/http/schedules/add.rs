//! `add`: a schedule created, or changed to the definition given (the same definition changes
//! nothing).

use std::sync::Arc;

use axum::extract::State;
use delayer_client::inspector::{Definition, Saved, Source};
use delayer_wire::schedule::{Invalid, parse_duration};
use serde::Deserialize;
use serde_json::Value;

use crate::http::reply::{Answer, bad, ok, refused};
use crate::http::request::Body;
use crate::http::state::AppState;
use crate::text::schedule::{SHOWN_TICKS, to_json};

/// A schedule's definition: `name`, `cron` and `topic`; the rest as `delayer schedule add`
/// defaults them. A field of another name is refused, so that a misspelt policy is not
/// silently its default.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Add {
    name: Option<String>,
    cron: Option<String>,
    topic: Option<String>,
    body: Option<String>,
    zone: Option<String>,
    catch_up: Option<String>,
    /// Whole seconds, or a duration such as "90s", "30m", "12h", "2d".
    catch_up_window: Option<Value>,
    overlap: Option<String>,
}

impl Add {
    /// The definition given, or the field at fault and why (the client checks the rest).
    fn definition(self) -> Result<Definition, Invalid> {
        let name = self.name.unwrap_or_default();
        let invalid = |field: &'static str, why: String| Invalid {
            schedule: name.clone(),
            field,
            why,
        };
        let missing = |field| invalid(field, "is missing".into());
        if name.is_empty() {
            return Err(missing("name"));
        }
        let cron = self.cron.ok_or_else(|| missing("cron"))?;
        let topic = self.topic.ok_or_else(|| missing("topic"))?;
        let mut definition = Definition::new(&name, &cron, &topic);
        if let Some(body) = self.body {
            definition.body = body.into_bytes();
        }
        if let Some(zone) = self.zone {
            definition.zone = zone;
        }
        if let Some(policy) = self.catch_up {
            definition.catch_up = policy.parse().map_err(|why| invalid("catch_up", why))?;
        }
        if let Some(window) = self.catch_up_window.filter(|window| !window.is_null()) {
            let seconds = match &window {
                Value::Number(seconds) => seconds.as_u64().map(std::time::Duration::from_secs),
                Value::String(text) => parse_duration(text),
                _ => None,
            };
            definition.catch_up_window = seconds.ok_or_else(|| {
                invalid(
                    "catch_up_window",
                    format!(
                        "{window} is not whole seconds, nor a duration such as \"90s\", \"30m\", \
                         \"12h\" or \"2d\""
                    ),
                )
            })?;
        }
        if let Some(policy) = self.overlap {
            definition.overlap = policy.parse().map_err(|why| invalid("overlap", why))?;
        }
        Ok(definition)
    }
}

/// Creates or changes a schedule; answers it as `show` does.
pub(super) async fn add(State(state): State<Arc<AppState>>, Body(add): Body<Add>) -> Answer {
    let definition = add.definition().map_err(bad)?;
    let message = match state
        .inspector
        .save_schedule(&definition, Source::Api)
        .await
        .map_err(refused)?
    {
        Saved::Created => "created",
        Saved::Changed => "changed",
        Saved::Same | Saved::Exists => "unchanged",
    };
    // Null only if it was removed again meanwhile.
    let stored = state
        .inspector
        .schedule(&definition.name)
        .await
        .map_err(refused)?;
    Ok(ok(
        message,
        stored.map(|stored| to_json(&stored, SHOWN_TICKS)),
    ))
}
