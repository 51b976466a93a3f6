//! `delayer.conf` (the original Delayer's INI file) → a typed, validated [`Config`], in two steps:
//! the text as sections of keys ([`ini`]), then each key read into the settings of the part it
//! configures, as the one table of keys ([`keys`]) says, and the keys checked together ([`rules`]).
//! [`Config`] itself is in [`settings`]; how the whole file is read and rendered, in [`file`].

mod file;
mod ini;
mod keys;
mod paths;
mod rules;
mod schedules;
mod settings;
#[cfg(test)]
mod tests;
mod values;
mod webhooks;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub use file::{Problems, Reading};
pub use settings::Config;

/// Where the configuration is looked for when `-c` is not given, in order.
pub const SEARCH_PATHS: [&str; 2] = ["./delayer.conf", "/etc/delayer/delayer.conf"];

/// The configuration file to use: `explicit` if given, else the first of [`SEARCH_PATHS`] that exists.
pub fn locate(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(path) = explicit {
        return Ok(path.to_path_buf());
    }
    SEARCH_PATHS
        .iter()
        .map(PathBuf::from)
        .find(|path| path.is_file())
        .with_context(|| {
            format!(
                "no configuration file found (tried {}); name one with -c FILE",
                SEARCH_PATHS.join(", ")
            )
        })
}
