//! Whether the files a configuration names (the pid file, the logs) can be written: appended to,
//! or created with their missing directories. Tried without leaving anything behind.

use std::fs::{self, OpenOptions};
use std::path::Path;

/// Whether this process can append to `path`, or create it (and its missing directories). An
/// existing file is opened for appending, which changes nothing; a new one is tried with a probe
/// file or directory that is removed at once.
pub(super) fn can_write(path: &Path) -> Result<(), String> {
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
