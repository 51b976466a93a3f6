//! Every key of `delayer.conf`, once: its section, name, default, one line of doc, how its value
//! is read into the [`Config`] and how it is shown again, one file a section. The unknown-key
//! check, parsing, `--check-config`'s printout and the comments of the shipped
//! `dist/delayer.conf` all follow from [`all`]. A key that fills in what another made
//! (`sentinel_master` in what `sentinels` made) comes after it: the keys are read in this order,
//! whatever the file's.

mod delayer;
mod http;
mod kafka;
mod qstash;
mod redis;

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::settings::Config;

/// One key of `delayer.conf`.
pub(super) struct Key {
    pub section: &'static str,
    pub name: &'static str,
    /// The value when the file gives none, as the file would say it; "" for none.
    pub default: &'static str,
    /// One line, for `--check-config`'s printout and the shipped `delayer.conf`.
    pub doc: &'static str,
    /// A password: masked wherever it would be printed or named in a message.
    pub secret: bool,
    /// Puts a value into `config`, or says what is wrong with it.
    pub set: fn(&mut Config, &str) -> Result<(), String>,
    /// The value `config` holds, as the file would say it; `None` leaves the key out of the
    /// printout (a feature that is off).
    pub show: fn(&Config) -> Option<String>,
}

/// The sections, in the order the printout and `dist/delayer.conf` list them.
const SECTIONS: [&[Key]; 5] = [
    delayer::KEYS,
    redis::KEYS,
    http::KEYS,
    kafka::KEYS,
    qstash::KEYS,
];

/// Every key, section by section.
pub(super) fn all() -> impl Iterator<Item = &'static Key> {
    SECTIONS.into_iter().flatten()
}

/// The key named so, if it is one.
pub(super) fn find(section: &str, name: &str) -> Option<&'static Key> {
    all().find(|key| key.section == section && key.name == name)
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

fn shown_path(path: &Option<PathBuf>) -> String {
    path.as_deref().map_or_else(String::new, shown)
}

/// A duration in seconds, as [`duration`] reads it back.
fn shown_duration(duration: Duration) -> String {
    duration.as_secs_f64().to_string()
}

fn shown_seconds(limit: Option<Duration>) -> String {
    limit.map_or(0, |limit| limit.as_secs()).to_string()
}
