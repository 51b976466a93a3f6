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
        // Editors on Windows start a UTF-8 file with a byte order mark; go-ini skips it too.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
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
    /// is set more than once (in one section, or in a section given twice) the last value
    /// counts, as in the original (go-ini).
    pub(super) fn get<'a>(&'a self, section: &str, key: &'a str) -> Option<&'a str> {
        let value = self.values(section, key).last()?.trim();
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
        self.values(section, key).next().is_some()
    }

    /// Every value given to `[section] key`, in the file's order.
    fn values<'a>(&'a self, section: &str, key: &'a str) -> impl Iterator<Item = &'a str> {
        self.ini
            .section_all(Some(section))
            .flat_map(move |properties| properties.get_all(key))
    }

    /// Every (section, key) the file names, in its order (`None`: before any section), and how
    /// many times.
    pub(super) fn entries(&self) -> Vec<(Option<&str>, &str, usize)> {
        let mut entries: Vec<(Option<&str>, &str, usize)> = Vec::new();
        for (section, properties) in self.ini.iter() {
            for (key, _) in properties.iter() {
                match entries
                    .iter_mut()
                    .find(|(known, named, _)| *known == section && *named == key)
                {
                    Some((_, _, times)) => *times += 1,
                    None => entries.push((section, key, 1)),
                }
            }
        }
        entries
    }

    /// The sections the file has, each once (`None` for keys before any).
    pub(super) fn sections(&self) -> Vec<Option<&str>> {
        let mut sections: Vec<Option<&str>> = Vec::new();
        for section in self.ini.sections() {
            if !sections.contains(&section) {
                sections.push(section);
            }
        }
        sections
    }
}

/// The first line that is neither blank, a comment, a `[section]` nor `key = value`, and why.
/// rust-ini would read such a line as the start of a key running on to the next `=`, and at the
/// end of the file fail naming a line after the last one.
fn not_ini(text: &str) -> Option<(usize, &'static str)> {
    let mut continued = false;
    text.lines().enumerate().find_map(|(index, line)| {
        let line = line.trim();
        // A value may go on over the next line after a backslash, as in go-ini.
        let continuation = std::mem::replace(&mut continued, line.ends_with('\\'));
        let why =
            if continuation || line.is_empty() || line.starts_with(';') || line.starts_with('#') {
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
        assert_eq!(
            not_ini("[a]\npath = /a/long/\\\n  path/on/two/lines\n"),
            None
        );
    }
}
