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

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use crate::config::Config;
    use crate::webhook::{Rate, RetryDelay};

    fn parse(text: &str) -> Result<Config, String> {
        Config::parse(text, Path::new("test.conf")).map_err(|error| format!("{error:#}"))
    }

    fn hook(lines: &str) -> String {
        format!("[webhook.billing]\ntopics = billing.*\nurl = http://b.internal/{{topic}}\n{lines}")
    }

    #[test]
    fn a_section_is_read_with_its_defaults_and_shown_again() {
        let config = parse(&format!(
            "{}\n[qstash]\ncurrent_signing_key = sig_a\nnext_signing_key = sig_b\n",
            hook(
                "method = put\ntimeout = 2s\nretries = 5\nretry_delay = pow(2, retried) * 1000\n\
                 parallelism = 10\nrate = 100/1m ; a comment\nfollow_redirects = true\n"
            )
        ))
        .unwrap();
        let hook = &config.webhooks[0];
        assert_eq!(hook.name, "billing");
        assert_eq!(hook.topics, ["billing.*"]);
        assert_eq!(hook.url, "http://b.internal/{topic}");
        assert_eq!(hook.method, "PUT");
        assert_eq!(hook.timeout, Duration::from_secs(2));
        assert_eq!(hook.retries, 5);
        assert_eq!(hook.retry_delay.before(3), Duration::from_secs(4));
        assert_eq!(hook.parallelism, Some(10));
        let rate = Rate {
            count: 100,
            period: Duration::from_secs(60),
        };
        assert_eq!(hook.rate, Some(rate));
        assert!(hook.follow_redirects);
        let keys = config.qstash.keys.as_ref().unwrap();
        assert_eq!(
            (keys.current.as_str(), keys.next.as_deref()),
            ("sig_a", Some("sig_b"))
        );
        assert!(config.unknown.is_empty(), "{:?}", config.unknown);
        let shown = config.to_string();
        assert!(
            shown.contains(
                "[webhook.billing]\ntopics = billing.*\nurl = http://b.internal/{topic}\n\
                 method = PUT\ntimeout = 2\nretries = 5\nretry_delay = pow(2, retried) * 1000\n\
                 parallelism = 10\nrate = 100/60s\nfollow_redirects = true\n"
            ),
            "{shown}"
        );
        assert!(shown.contains("current_signing_key = ********"), "{shown}");
        assert_eq!(
            parse(&shown).unwrap().webhooks,
            config.webhooks,
            "read back alike"
        );

        let plain = parse(&self::hook("")).unwrap();
        let plain = &plain.webhooks[0];
        assert_eq!(
            (plain.method.as_str(), plain.timeout, plain.retries),
            ("POST", Duration::from_secs(30), 3)
        );
        assert_eq!(plain.retry_delay, RetryDelay::Backoff);
        assert_eq!((plain.parallelism, plain.rate), (None, None));
        assert!(!plain.follow_redirects);
    }

    #[test]
    fn a_wrong_value_is_named_with_its_key() {
        for (lines, said) in [
            (
                "method = FETCH",
                "[webhook.billing] method = \"FETCH\": expected one of POST",
            ),
            (
                "timeout = 2x",
                "[webhook.billing] timeout = \"2x\": \"2x\": unknown unit \"x\"",
            ),
            (
                "timeout = 2d",
                "[webhook.billing] timeout = \"2d\": expected 1ms to 1d",
            ),
            (
                "retries = 25",
                "retries = \"25\": expected a whole number from 0 to 24 ([delayer] max_attempts less one",
            ),
            (
                "retry_delay = 10s",
                "retry_delay = \"10s\": \"10s\" is not a number at character 1",
            ),
            (
                "parallelism = 0",
                "parallelism = \"0\": expected a whole number from 1 to 1000",
            ),
            (
                "rate = fast",
                "rate = \"fast\": \"fast\" is not a rate like 500/s",
            ),
            (
                "rate = 0/s",
                "rate = \"0/s\": \"0/s\": a rate needs a count and a period above 0",
            ),
            ("follow_redirects = maybe", "follow_redirects = \"maybe\""),
        ] {
            let error = parse(&hook(lines)).unwrap_err();
            assert!(error.contains(said), "{lines}: {error}");
        }
        let error = parse("[webhook.x]\nurl = http://x/\n").unwrap_err();
        assert!(error.contains("[webhook.x] topics is missing"), "{error}");
        let error = parse("[webhook.x]\ntopics = a\n").unwrap_err();
        assert!(error.contains("[webhook.x] url is missing"), "{error}");
        let error = parse("[webhook.x]\ntopics = a\nurl = ftp://x/\n").unwrap_err();
        assert!(
            error.contains("url = \"ftp://x/\": expected an http:// or https:// URL"),
            "{error}"
        );
        let error = parse("[webhook.x]\ntopics = a,\nurl = http://x/\n").unwrap_err();
        assert!(
            error.contains("topics = \"a,\": expected topic names"),
            "{error}"
        );
        let error = parse("[webhook.x y]\ntopics = a\nurl = http://x/\n").unwrap_err();
        assert!(
            error.contains("[webhook.x y]: a webhook's name is letters"),
            "{error}"
        );
        let error = parse("[qstash]\nnext_signing_key = k\n").unwrap_err();
        assert!(
            error.contains("[qstash] current_signing_key = \"\": missing"),
            "{error}"
        );
        // More reservations allow more retries.
        let config = parse(&format!(
            "[delayer]\nmax_attempts = 50\n{}",
            hook("retries = 40")
        ))
        .unwrap();
        assert_eq!(config.webhooks[0].retries, 40);
    }

    #[test]
    fn a_topic_goes_to_one_place_and_unknown_keys_are_told() {
        let two = format!(
            "{}\n[webhook.other]\ntopics = billing.*, mail\nurl = http://o/\n",
            hook("")
        );
        let error = parse(&two).unwrap_err();
        assert!(
            error.contains(
                "[webhook.other] topics: \"billing.*\" is delivered by [webhook.billing] already"
            ),
            "{error}"
        );
        let kafka = format!(
            "[kafka]\nbrokers = k:9092\ntopics = billing.*\n{}",
            hook("")
        );
        let error = parse(&kafka).unwrap_err();
        assert!(error.contains("is delivered by [kafka] already"), "{error}");
        let config = parse(&hook("retry = 3\nretries = 1\nretries = 2")).unwrap();
        assert_eq!(config.webhooks[0].retries, 2);
        let told = format!("{:?} {:?}", config.unknown, config.warnings);
        assert!(
            told.contains("unknown key [webhook.billing] retry, ignored"),
            "{told}"
        );
        assert!(
            told.contains("[webhook.billing] retries is set more than once"),
            "{told}"
        );
    }
}
