//! The daemon of an earlier commit (the release before a change), built once per commit under
//! `target/previous-release/`, to run beside the current one on one Redis as in a rolling upgrade.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The git revision taken as the previous release unless `DELAYER_PREVIOUS` names another.
pub const DEFAULT_PREVIOUS: &str = "main";

/// The previous release's `delayer` binary, and how long building it took when it was built by
/// this call (`None`: it was built before).
pub struct PreviousRelease {
    pub commit: String,
    pub binary: PathBuf,
    pub built_in: Option<Duration>,
}

impl super::Daemon {
    /// The daemon of another build, e.g. [`PreviousRelease::binary`].
    pub fn start_binary(binary: &Path, config: &Path) -> super::Daemon {
        super::Daemon::start_as(Command::new(binary), config)
    }
}

/// Builds one at a time: two tests asking at once wait for one build.
static BUILDING: Mutex<()> = Mutex::new(());

/// The daemon built from `DELAYER_PREVIOUS` (a commit, tag or branch), else from
/// [`DEFAULT_PREVIOUS`]: see [`previous_release_at`].
pub fn previous_release() -> PreviousRelease {
    let revision =
        std::env::var("DELAYER_PREVIOUS").unwrap_or_else(|_| DEFAULT_PREVIOUS.to_string());
    previous_release_at(&revision)
}

/// The daemon built from `revision` of this repository: its tree is exported (`git archive`, so
/// nothing is added to the repository's worktrees) to `target/previous-release/source/<commit>`,
/// built with `cargo build --release` into a target directory shared by every commit built so
/// (its dependencies build once), and the binary kept as `target/previous-release/bin/<commit>`.
/// The first build starts from a hard-linked copy of `target/release`, whose dependencies it
/// mostly reuses.
pub fn previous_release_at(revision: &str) -> PreviousRelease {
    let _one_build = BUILDING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let commit = git(
        root,
        &["rev-parse", "--verify", &format!("{revision}^{{commit}}")],
    );
    let cache = root.join("target").join("previous-release");
    let binary = cache.join("bin").join(&commit);
    if binary.exists() {
        return PreviousRelease {
            commit,
            binary,
            built_in: None,
        };
    }
    let started = Instant::now();
    let source = cache.join("source").join(&commit);
    if !source.exists() {
        export(root, &commit, &source);
    }
    let target = cache.join("target");
    if !target.exists() {
        seed(&root.join("target").join("release"), &target);
    }
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    // This process runs under cargo, which told it about the crate under test: the build is of
    // another tree.
    for (name, _) in std::env::vars() {
        if name.starts_with("CARGO_") && name != "CARGO_HOME" {
            cargo.env_remove(name);
        }
    }
    eprintln!(
        "building the daemon of {commit} (once) in {}",
        target.display()
    );
    let status = cargo
        .args(["build", "--release", "--locked", "--bin", "delayer"])
        .arg("--manifest-path")
        .arg(source.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .status()
        .expect("run cargo");
    assert!(status.success(), "cargo build of {commit} failed");
    std::fs::create_dir_all(binary.parent().unwrap()).unwrap();
    // Copied out: the next commit built overwrites target/release/delayer.
    std::fs::copy(target.join("release").join("delayer"), &binary).unwrap();
    PreviousRelease {
        commit,
        binary,
        built_in: Some(started.elapsed()),
    }
}

/// Writes `commit`'s tree to `source`, whole or not at all.
fn export(root: &Path, commit: &str, source: &Path) {
    let partial = source.with_extension("partial");
    std::fs::remove_dir_all(&partial).ok();
    std::fs::create_dir_all(&partial).unwrap();
    let status = Command::new("sh")
        .arg("-c")
        .arg("git -C \"$0\" archive \"$1\" | tar -x -C \"$2\"")
        .arg(root)
        .arg(commit)
        .arg(&partial)
        .status()
        .expect("run git archive");
    assert!(status.success(), "git archive of {commit} failed");
    std::fs::rename(&partial, source).unwrap();
}

/// Starts the cache's target directory as hard links to `release`'s files (no copy of the bytes),
/// less its lock: the lock file must be this directory's own, or a build here would wait for
/// every build there.
fn seed(release: &Path, target: &Path) {
    let partial = target.with_extension("partial");
    std::fs::remove_dir_all(&partial).ok();
    std::fs::create_dir_all(&partial).unwrap();
    if release.exists() {
        let status = Command::new("cp")
            .arg("-al")
            .arg(release)
            .arg(partial.join("release"))
            .status()
            .expect("run cp");
        assert!(status.success(), "cp -al {} failed", release.display());
        std::fs::remove_file(partial.join("release").join(".cargo-lock")).ok();
        // The current binary is not the previous release's.
        std::fs::remove_file(partial.join("release").join("delayer")).ok();
    }
    std::fs::rename(&partial, target).unwrap();
}

fn git(root: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .expect("run git");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_string()
}
