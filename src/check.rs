//! `--check-config`, as strict as `nginx -t`: everything a start needs is checked (without
//! starting, and without leaving anything behind), and every problem is told, not just the first.

use std::fs::{self, OpenOptions};
use std::path::Path;

use anyhow::{Result, bail};

use crate::config::Config;

/// Prints the configuration as it would be used and every problem with it; fails if there is any.
pub async fn run(config: &Config) -> Result<()> {
    for warning in &config.warnings {
        println!("warning: {warning}");
    }
    println!(
        "; {} as delayer reads it\n{config}\n",
        config.file.display()
    );
    // Unknown keys are only warned about when serving (the original ignored them), but here a
    // typo must not pass for a setting.
    let mut problems: Vec<String> = config.unknown.clone();
    let paths = [
        ("pid", &config.pid),
        ("access_log", &config.access_log),
        ("error_log", &config.error_log),
    ];
    for (key, path) in paths {
        if let Some(path) = path
            && let Err(why) = can_write(path)
        {
            problems.push(format!("[delayer] {key} = {}: {why}", path.display()));
        }
    }
    match crate::redis_version(config).await {
        Ok(version) => println!(
            "Redis at {} answers (redis_version {version})",
            config.redis.address()
        ),
        Err(error) => problems.push(format!("{error:#}")),
    }
    if problems.is_empty() {
        println!("configuration {} is OK", config.file.display());
        return Ok(());
    }
    for problem in &problems {
        eprintln!("error: {problem}");
    }
    bail!(
        "configuration {} has {} problem{}",
        config.file.display(),
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    )
}

/// Whether this process can append to `path`, or create it (and its missing directories). An
/// existing file is opened for appending, which changes nothing; a new one is tried with a probe
/// file or directory that is removed at once.
fn can_write(path: &Path) -> Result<(), String> {
    if path.is_dir() {
        return Err("is a directory".into());
    }
    if path.exists() {
        return OpenOptions::new()
            .append(true)
            .open(path)
            .map(drop)
            .map_err(|error| format!("cannot be written ({error})"));
    }
    let parent = path.parent().ok_or("names no file")?;
    let existing = parent
        .ancestors()
        .find(|ancestor| ancestor.exists())
        .ok_or("no directory of it exists")?;
    let probe = existing.join(format!(".delayer-check-{}", std::process::id()));
    let created = if existing == parent {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe)
            .map(drop)
            .and_then(|()| fs::remove_file(&probe))
    } else {
        fs::create_dir(&probe).and_then(|()| fs::remove_dir(&probe))
    };
    created.map_err(|error| format!("cannot be created in {} ({error})", existing.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writable_paths_pass_and_leave_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let existing = dir.path().join("access.log");
        fs::write(&existing, "old line\n").unwrap();
        assert_eq!(can_write(&existing), Ok(()));
        assert_eq!(fs::read_to_string(&existing).unwrap(), "old line\n");
        assert_eq!(can_write(&dir.path().join("new.log")), Ok(()));
        assert_eq!(can_write(&dir.path().join("a/b/delayer.pid")), Ok(()));
        let left: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "only the file that was there");
    }

    #[test]
    fn unwritable_paths_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        fs::write(&file, "").unwrap();
        let under_a_file = can_write(&file.join("delayer.pid")).unwrap_err();
        assert!(under_a_file.contains("cannot be created"), "{under_a_file}");
        assert_eq!(can_write(dir.path()), Err("is a directory".into()));
    }
}
