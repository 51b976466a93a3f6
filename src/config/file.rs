//! `delayer.conf` as a whole: the typed [`Config`], read from the file's text (every problem
//! found, not just the first) and rendered back in the file's shape.

use std::fmt::{self, Display};
use std::path::Path;

use anyhow::{Context, Result};

use super::ini::IniFile;
use super::keys;
use super::settings::Config;
use super::{paths, rules, schedules, webhooks};

/// A configuration file as read: the configuration, with the default in place of each value
/// that is wrong, and what is wrong, one problem a line, each naming the file.
pub struct Reading {
    /// The configuration as far as the file could be read.
    pub config: Config,
    /// Every problem found; more may be added (paths that cannot be written) before
    /// [`into_config`](Reading::into_config) tells them all at once.
    pub errors: Vec<String>,
}

impl Reading {
    /// The configuration, or [`Problems`] naming everything wrong with it (and the warnings that
    /// go with them: an unknown key may be the typo behind a missing value).
    pub fn into_config(self) -> Result<Config> {
        if self.errors.is_empty() {
            return Ok(self.config);
        }
        let config = self.config;
        let warnings = config.unknown.into_iter().chain(config.warnings).collect();
        Err(Problems {
            errors: self.errors,
            warnings,
        }
        .into())
    }
}

/// Everything wrong with a configuration, one problem a line.
#[derive(Debug)]
pub struct Problems {
    /// What stops the start.
    pub errors: Vec<String>,
    /// What is ignored, but said.
    pub warnings: Vec<String>,
}

impl Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.errors.join("\n"))
    }
}

impl std::error::Error for Problems {}

impl Config {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Config> {
        Config::read(path)?.into_config()
    }

    /// Validates the text of a configuration file; `file` names it in messages and nothing is read.
    pub fn parse(text: &str, file: &Path) -> Result<Config> {
        Config::read_text(text, file)?.into_config()
    }

    /// Reads `path`, and every problem with its values; fails at once only when it is no file
    /// or not INI.
    pub fn read(path: &Path) -> Result<Reading> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read configuration file {}", path.display()))?;
        Config::read_text(&text, path)
    }

    fn read_text(text: &str, file: &Path) -> Result<Reading> {
        let file = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
        let ini = IniFile::parse(text, &file)?;
        let mut config = Config::blank(file.clone());
        let mut wrong = Vec::new();
        for key in keys::all() {
            let raw = ini.get(key.section, key.name).unwrap_or(key.default);
            if raw.is_empty() {
                continue;
            }
            if let Err(why) = (key.set)(&mut config, raw) {
                wrong.push(rules::Wrong::of(&ini, key, why));
                // The default in its place, so that what is told beside it is not about a blank.
                if !key.default.is_empty() {
                    let _ = (key.set)(&mut config, key.default);
                }
            }
        }
        wrong.extend(rules::check(&config, &ini));
        let mut errors: Vec<String> = wrong
            .iter()
            .map(|wrong| format!("{}: {wrong}", file.display()))
            .collect();
        // Checked by this host's clock here (does it ever fire?); Redis's decides the ticks.
        let now = delayer_wire::schedule::unix_ms_now();
        let (definitions, problems) = schedules::read(&ini, now);
        config.schedules = definitions;
        let (hooks, hook_problems) = webhooks::read(&ini, config.mover.max_attempts);
        config.webhooks = hooks;
        errors.extend(
            problems
                .iter()
                .chain(&hook_problems)
                .chain(&rules::sinks(&config))
                .map(|problem| format!("{}: {problem}", file.display())),
        );
        (config.unknown, config.warnings) = unknown_entries(&ini, &file);
        let risky = rules::risky(&config).into_iter();
        let risky = risky.map(|warning| format!("{}: {warning}", file.display()));
        config.warnings.extend(risky);
        Ok(Reading { config, errors })
    }

    /// The pid file and logs that this process can neither create nor append to, and the Kafka
    /// CA file it cannot read, each said as a problem (for serving, and `--check-config`).
    pub fn path_problems(&self) -> Vec<String> {
        let paths = [
            ("pid", &self.pid),
            ("access_log", &self.log.access_log),
            ("error_log", &self.log.error_log),
        ];
        let mut problems: Vec<String> = paths
            .into_iter()
            .filter_map(|(key, path)| {
                let path = path.as_ref()?;
                let why = paths::can_write(path).err()?;
                Some(format!(
                    "{}: [delayer] {key} = {}: {why}",
                    self.file.display(),
                    path.display()
                ))
            })
            .collect();
        let ca_file = self
            .kafka
            .as_ref()
            .and_then(|kafka| kafka.security.ca_file.as_ref());
        if let Some(path) = ca_file
            && let Err(error) = std::fs::File::open(path)
        {
            problems.push(format!(
                "{}: [kafka] ssl_ca_file = {}: cannot be read ({error})",
                self.file.display(),
                path.display()
            ));
        }
        problems
    }

    /// Whether QStash's API is served (`[qstash] token`, with `[http]`), and its messages
    /// delivered.
    pub fn serves_qstash(&self) -> bool {
        self.qstash.token.is_some() && self.http.is_some()
    }

    /// What the CLI's and the HTTP server's clients are told: what the daemon does.
    pub fn client_settings(&self) -> delayer_client::Settings {
        delayer_client::Settings {
            max_attempts: self.mover.max_attempts,
            max_body_bytes: self.max_body_bytes,
            max_ttr: self.max_ttr,
            layout: self.redis.layout,
            // A drop-in `delayer.conf` (no console) writes no history key, as before.
            count_history: self.http.is_some(),
            compact_after: self
                .compact_pushes
                .then_some(delayer_client::DEFAULT_COMPACT_AFTER),
            ..delayer_client::Settings::default()
        }
    }
}

/// The configuration as it will be used, in `delayer.conf`'s own shape (passwords masked, keys
/// of features that are off left out); an empty value says what empty means.
impl Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(false))
    }
}

impl Config {
    /// The configuration in `delayer.conf`'s shape; `documented`: every key with its line of
    /// doc, as the shipped `dist/delayer.conf` has it.
    pub(super) fn render(&self, documented: bool) -> String {
        let mut text = String::new();
        let mut section = "";
        for key in keys::all() {
            let Some(mut value) = (key.show)(self) else {
                continue;
            };
            if key.secret && !value.is_empty() {
                value = "********".into();
            }
            if key.section != section {
                let gap = if section.is_empty() { "" } else { "\n" };
                text += &format!("{gap}[{}]\n", key.section);
                section = key.section;
            }
            text += &if value.is_empty() {
                format!("{:<31} ; {}\n", format!("{} =", key.name), key.doc)
            } else if documented {
                format!("{:<31} ; {}\n", format!("{} = {value}", key.name), key.doc)
            } else {
                format!("{} = {value}\n", key.name)
            };
        }
        for definition in &self.schedules {
            text += &schedules::render(definition);
        }
        for hook in &self.webhooks {
            text += &webhooks::render(hook);
        }
        text
    }
}

/// What the file holds that is not ours (unknown sections and keys), and the keys it sets more
/// than once.
fn unknown_entries(ini: &IniFile, file: &Path) -> (Vec<String>, Vec<String>) {
    let (mut unknown, mut warnings) = (Vec::new(), Vec::new());
    // The sections named by their prefix (`[schedule.NAME]`, `[webhook.NAME]`), with their keys.
    let named = |name: &str| {
        [
            (schedules::PREFIX, &schedules::KEYS[..]),
            (webhooks::PREFIX, &webhooks::KEYS[..]),
        ]
        .into_iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|(_, keys)| keys)
    };
    let known_section =
        |name: &str| named(name).is_some() || keys::all().any(|key| key.section == name);
    for section in ini.sections() {
        if let Some(name) = section.filter(|name| !known_section(name)) {
            unknown.push(format!(
                "{}: unknown section [{name}], ignored",
                file.display()
            ));
        }
    }
    let mut outside = Vec::new();
    for (section, key, times) in ini.entries() {
        let known_key = |name: &str| match named(name) {
            Some(keys) => keys.contains(&key),
            None => keys::find(name, key).is_some(),
        };
        match section {
            None => outside.push(key),
            Some(name) if !known_section(name) => {}
            Some(name) if !known_key(name) => unknown.push(format!(
                "{}: unknown key [{name}] {key}, ignored",
                file.display()
            )),
            Some(name) if times > 1 => warnings.push(format!(
                "{}: [{name}] {key} is set more than once; the last value is used",
                file.display()
            )),
            Some(_) => {}
        }
    }
    if !outside.is_empty() {
        unknown.push(format!(
            "{}: keys outside any section, ignored: {}",
            file.display(),
            outside.join(", ")
        ));
    }
    (unknown, warnings)
}
