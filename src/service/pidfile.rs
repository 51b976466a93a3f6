//! The pid file: held under an flock for the life of the process, so only one instance runs.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// A pid file this process owns; removed when dropped, with the directories made for it.
#[derive(Debug)]
pub struct PidFile {
    path: PathBuf,
    // Holds the lock; closing it releases the lock.
    _file: File,
    // Dropped after the file: the directories made for it go too.
    _made: MadeDirectories,
}

impl PidFile {
    /// Takes `path` for this process, or refuses with the original's message when a live
    /// delayer holds it. Directories it had to make are removed again if it fails.
    pub fn acquire(path: &Path) -> Result<PidFile> {
        let made = match path.parent() {
            Some(directory) => MadeDirectories::make(directory)?,
            None => MadeDirectories::default(),
        };
        // A retry is needed only when the holder removes the file between our open and our lock.
        for _ in 0..3 {
            if let Some(file) = lock(path)? {
                let file = take(path, file)?;
                return Ok(PidFile {
                    path: path.to_path_buf(),
                    _file: file,
                    _made: made,
                });
            }
        }
        bail!(
            "cannot lock pid file {}: it keeps being replaced",
            path.display()
        )
    }
}

/// Refuses, with the original's message, when a running delayer holds the lock on `path`;
/// changes nothing (a missing file is not created).
pub fn check_free(path: &Path) -> Result<()> {
    let Ok(mut file) = File::open(path) else {
        return Ok(());
    };
    if let Err(TryLockError::WouldBlock) = file.try_lock() {
        let mut recorded = String::new();
        file.read_to_string(&mut recorded).ok();
        bail!("Service is being executed, PID: {}", recorded.trim());
    }
    Ok(())
}

/// The directories made for a pid file, removed again (when empty) once it is given up, so that
/// a failed start leaves nothing behind.
#[derive(Debug, Default)]
struct MadeDirectories(Vec<PathBuf>);

impl MadeDirectories {
    fn make(directory: &Path) -> Result<MadeDirectories> {
        let missing: Vec<PathBuf> = directory
            .ancestors()
            .take_while(|ancestor| !ancestor.exists())
            .map(Path::to_path_buf)
            .collect();
        let made = MadeDirectories(missing);
        fs::create_dir_all(directory)
            .with_context(|| format!("cannot create pid file directory {}", directory.display()))?;
        Ok(made)
    }
}

impl Drop for MadeDirectories {
    fn drop(&mut self) {
        // Deepest first; one that holds anything else stays, and so do those above it.
        for directory in &self.0 {
            if fs::remove_dir(directory).is_err() {
                break;
            }
        }
    }
}

/// Opens and locks `path`; `None` if the file was removed (by the instance that held it, on its
/// way out) before the lock was ours, since a lock on a file no longer at `path` protects nothing.
fn lock(path: &Path) -> Result<Option<File>> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(|| format!("cannot open pid file {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut recorded = String::new();
            file.read_to_string(&mut recorded).ok();
            bail!("Service is being executed, PID: {}", recorded.trim());
        }
        Err(TryLockError::Error(error)) => {
            return Err(error).with_context(|| format!("cannot lock pid file {}", path.display()));
        }
    }
    let locked = file
        .metadata()
        .with_context(|| format!("cannot read pid file {}", path.display()))?;
    let still_there =
        fs::metadata(path).is_ok_and(|now| (now.dev(), now.ino()) == (locked.dev(), locked.ino()));
    Ok(still_there.then_some(file))
}

/// Writes this process's pid into the locked file, unless it names another live delayer.
fn take(path: &Path, mut file: File) -> Result<File> {
    // The lock is ours, so no delayer of ours holds this file. But the Go original writes its pid
    // file without a lock: refuse if the file names one that runs.
    let mut recorded = String::new();
    file.read_to_string(&mut recorded)
        .with_context(|| format!("cannot read pid file {}", path.display()))?;
    if let Ok(pid) = recorded.trim().parse::<u32>()
        && pid != std::process::id()
        && is_running_other_delayer(pid)
    {
        bail!("Service is being executed, PID: {pid}");
    }
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write pid file {}", path.display()))?;
    Ok(file)
}

impl Drop for PidFile {
    fn drop(&mut self) {
        // Removed while still locked: a starter that opened it meanwhile finds, once the lock is
        // its own, that the file is gone, and starts over with a new one (see `lock`).
        let _ = fs::remove_file(&self.path);
    }
}

/// True when `pid` is a live process named delayer that runs another executable than ours: the Go
/// original, which never locks its pid file. A killed daemon not yet reaped (a zombie) is not
/// running, and a process of our own executable would hold the lock if the file were its own.
fn is_running_other_delayer(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "pid (comm) state ...": comm may itself hold ") ", so split at the last one.
    let Some((head, tail)) = stat.rsplit_once(") ") else {
        return false;
    };
    let name = head.split_once(" (").map_or("", |(_, name)| name);
    let dead = matches!(tail.chars().next(), Some('Z' | 'X' | 'x'));
    name.starts_with("delayer") && !dead && !runs_our_executable(pid)
}

fn runs_our_executable(pid: u32) -> bool {
    let identity = |path: String| fs::metadata(path).map(|meta| (meta.dev(), meta.ino()));
    // Another user's process cannot be looked into: it counts as not ours.
    matches!(
        (identity(format!("/proc/{pid}/exe")), identity("/proc/self/exe".to_string())),
        (Ok(theirs), Ok(ours)) if theirs == ours
    )
}
