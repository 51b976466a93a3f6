//! `[webhook.NAME]` sections: the due jobs of some topics sent by HTTP (see `docs/webhooks.md`);
//! what each key means is in [`WebhookSettings`].

use std::time::Duration;

use super::ini::IniFile;
use crate::webhook::{METHODS, MOST_IN_FLIGHT, Rate, RetryDelay, WebhookSettings};

/// What starts a webhook's section name.
pub(super) const PREFIX: &str = "webhook.";
/// The keys of a webhook's section.
pub(super) const KEYS: [&str; 9] = [
    "topics",
    "url",
    "method",
    "timeout",
    "retries",
    "retry_delay",
    "parallelism",
    "rate",
    "follow_redirects",
];

/// The longest a request may take: a day, as a job is reserved that long at most for it.
const MOST_TIMEOUT: Duration = Duration::from_secs(86_400);

/// Every webhook section of `ini`, checked; and the problems, one a line (`[webhook.NAME] key =
/// "value": why`).
pub(super) fn read(ini: &IniFile, max_attempts: u32) -> (Vec<WebhookSettings>, Vec<String>) {
    let (mut hooks, mut problems) = (Vec::new(), Vec::new());
    for section in ini.sections().into_iter().flatten() {
        let Some(name) = section.strip_prefix(PREFIX) else {
            continue;
        };
        match webhook(ini, section, name, max_attempts) {
            Ok(hook) => hooks.push(hook),
            Err(problem) => problems.push(problem),
        }
    }
    (hooks, problems)
}

fn webhook(
    ini: &IniFile,
    section: &str,
    name: &str,
    max_attempts: u32,
) -> Result<WebhookSettings, String> {
    let wrong = |key: &str, why: &str| {
        let value = ini.get(section, key).unwrap_or_default();
        format!("[{section}] {key} = {value:?}: {why}")
    };
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(format!(
            "[{section}]: a webhook's name is letters, digits, '-', '_' and '.', as in \
             [webhook.billing]"
        ));
    }
    let required = |key: &'static str, example: &str| -> Result<&str, String> {
        ini.get(section, key)
            .ok_or_else(|| format!("[{section}] {key} is missing: a webhook needs {example}"))
    };
    let topics: Vec<String> = required("topics", "topics, such as billing.*, invoice.close")?
        .split(',')
        .map(|topic| topic.trim().to_string())
        .collect();
    if topics.iter().any(String::is_empty) {
        return Err(wrong(
            "topics",
            "expected topic names or patterns, comma-separated",
        ));
    }
    let url = required(
        "url",
        "a URL, such as http://billing.internal/hooks/{topic}",
    )?;
    let example = url.replace("{topic}", "topic").replace("{id}", "id");
    match reqwest::Url::parse(&example) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.has_host() => {}
        Ok(_) => return Err(wrong("url", "expected an http:// or https:// URL")),
        Err(error) => return Err(wrong("url", &format!("not a URL ({error})"))),
    }
    let mut hook = WebhookSettings::new(name, topics, url);
    if let Some(method) = ini.get(section, "method") {
        let method = method.to_ascii_uppercase();
        if !METHODS.contains(&method.as_str()) {
            return Err(wrong(
                "method",
                &format!("expected one of {}", METHODS.join(", ")),
            ));
        }
        hook.method = method;
    }
    if let Some(timeout) = ini.get(section, "timeout") {
        hook.timeout = delayer_wire::duration::parse(timeout)
            .map_err(|why| wrong("timeout", &why))
            .and_then(|timeout| {
                if timeout < Duration::from_millis(1) || timeout > MOST_TIMEOUT {
                    Err(wrong("timeout", "expected 1ms to 1d"))
                } else {
                    Ok(timeout)
                }
            })?;
    }
    if let Some(retries) = ini.get(section, "retries") {
        // Each try is a reservation: the last must come before `max_attempts` dead-lists it.
        let most = max_attempts.saturating_sub(1);
        hook.retries = retries
            .parse()
            .ok()
            .filter(|retries| *retries <= most)
            .ok_or_else(|| {
                wrong(
                    "retries",
                    &format!(
                        "expected a whole number from 0 to {most} ([delayer] max_attempts less \
                         one: each try is a reservation)"
                    ),
                )
            })?;
    }
    if let Some(delay) = ini.get(section, "retry_delay") {
        hook.retry_delay = RetryDelay::parse(delay).map_err(|why| wrong("retry_delay", &why))?;
    }
    if let Some(parallelism) = ini.get(section, "parallelism") {
        let parallelism = parallelism
            .parse()
            .ok()
            .filter(|n| (1..=MOST_IN_FLIGHT).contains(n))
            .ok_or_else(|| {
                wrong(
                    "parallelism",
                    &format!("expected a whole number from 1 to {MOST_IN_FLIGHT}"),
                )
            })?;
        hook.parallelism = Some(parallelism);
    }
    if let Some(rate) = ini.get(section, "rate") {
        hook.rate = Some(Rate::parse(rate).map_err(|why| wrong("rate", &why))?);
    }
    if let Some(follow) = ini.get(section, "follow_redirects") {
        hook.follow_redirects =
            super::values::boolean(follow).map_err(|why| wrong("follow_redirects", &why))?;
    }
    Ok(hook)
}

/// `hook` as its section in the file: the keys that are not their default.
pub(super) fn render(hook: &WebhookSettings) -> String {
    let blank = WebhookSettings::new(&hook.name, Vec::new(), "");
    let mut text = format!(
        "\n[{PREFIX}{}]\ntopics = {}\nurl = {}\n",
        hook.name,
        hook.topics.join(", "),
        hook.url
    );
    if hook.method != blank.method {
        text += &format!("method = {}\n", hook.method);
    }
    if hook.timeout != blank.timeout {
        text += &format!("timeout = {}\n", hook.timeout.as_secs_f64());
    }
    if hook.retries != blank.retries {
        text += &format!("retries = {}\n", hook.retries);
    }
    if hook.retry_delay != blank.retry_delay {
        text += &format!("retry_delay = {}\n", hook.retry_delay);
    }
    if let Some(parallelism) = hook.parallelism {
        text += &format!("parallelism = {parallelism}\n");
    }
    if let Some(rate) = hook.rate {
        text += &format!("rate = {rate}\n");
    }
    if hook.follow_redirects {
        text += "follow_redirects = true\n";
    }
    text
}
