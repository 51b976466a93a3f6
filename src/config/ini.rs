//! The text of a configuration file as sections of keys: the original's INI, inline `; comments`
//! included. What is not INI is named by its line, in words.

use std::path::Path;

use anyhow::{Result, bail};
use ini::{Ini, ParseOption};

/// A parsed configuration file.
pub(super) struct IniFile {
    ini: Ini,
}

impl IniFile {
    /// Parses `text`; `file` names it in messages.
    pub(super) fn parse(text: &str, file: &Path) -> Result<IniFile> {
        if let Some((line, why)) = not_ini(text) {
            bail!("{}:{line}: {why}", file.display());
        }
        let options = ParseOption {
            enabled_escape: false,
            ..ParseOption::default()
        };
        match Ini::load_from_str_opt(text, options) {
            Ok(ini) => Ok(IniFile { ini }),
            // Lines that rust-ini refuses are found above; this says what it said, in case.
            Err(error) => bail!(
                "{}:{}: not valid INI ({})",
                file.display(),
                error.line.min(text.lines().count().max(1)),
                error.msg.trim_end_matches('.')
            ),
        }
    }

    /// The trimmed value of `[section] key`, `None` when the key is absent or empty. When a key
    /// is set more than once the last value counts, as in the original (go-ini).
    pub(super) fn get(&self, section: &str, key: &str) -> Option<&str> {
        let value = self.ini.section(Some(section))?.get_all(key).last()?.trim();
        // rust-ini reads `password =   ; comment` as "; comment": an empty value with a comment.
        let empty = value.is_empty() || value.starts_with(';') || value.starts_with('#');
        (!empty).then_some(value)
    }

    /// Whether the file has `[section]`.
    pub(super) fn has_section(&self, section: &str) -> bool {
        self.ini.section(Some(section)).is_some()
    }

    /// Whether the file names `[section] key`, even with an empty value.
    pub(super) fn has_key(&self, section: &str, key: &str) -> bool {
        self.ini
            .section(Some(section))
            .is_some_and(|properties| properties.contains_key(key))
    }

    /// Every (section, key) the file names, in its order (`None`: before any section), and how
    /// many times.
    pub(super) fn entries(&self) -> Vec<(Option<&str>, &str, usize)> {
        let mut entries = Vec::new();
        for (section, properties) in self.ini.iter() {
            for (key, _) in properties.iter() {
                if !entries
                    .iter()
                    .any(|(known, named, _)| *known == section && *named == key)
                {
                    entries.push((section, key, properties.get_all(key).count()));
                }
            }
        }
        entries
    }

    /// The sections the file has (`None` for keys before any).
    pub(super) fn sections(&self) -> Vec<Option<&str>> {
        self.ini.sections().collect()
    }
}

/// The first line that is neither blank, a comment, a `[section]` nor `key = value`, and why.
/// rust-ini would read such a line as the start of a key running on to the next `=`, and at the
/// end of the file fail naming a line after the last one.
fn not_ini(text: &str) -> Option<(usize, &'static str)> {
    text.lines().enumerate().find_map(|(index, line)| {
        let line = line.trim();
        let why = if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            return None;
        } else if line.starts_with('[') {
            if line.contains(']') {
                return None;
            }
            "a section name is not closed with ']'"
        } else if line.contains('=') || line.contains(':') {
            return None;
        } else {
            "expected key = value, a [section] or a ; comment"
        };
        Some((index + 1, why))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_not_ini_is_named_by_its_own_line() {
        assert_eq!(not_ini("[a]\nb = 1\n; c\n\n# d\ne: 2\n"), None);
        assert_eq!(
            not_ini("[delayer]\ntimer_interval = 5\n[redis\nhost = x\n"),
            Some((3, "a section name is not closed with ']'"))
        );
        assert_eq!(
            not_ini("[delayer]\nhello world\nport = 1"),
            Some((2, "expected key = value, a [section] or a ; comment"))
        );
    }
}
