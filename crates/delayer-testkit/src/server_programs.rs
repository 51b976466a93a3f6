//! Which server the tests run: `redis-server` and `redis-cli` on PATH, or the server that
//! [`SERVER_VARIABLE`] names (Valkey, a Redis built from source) with the cli beside it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The environment variable naming another server binary for the tests, e.g.
/// `/tmp/valkey/bin/valkey-server`: an absolute path, or a command name on PATH.
const SERVER_VARIABLE: &str = "DELAYER_TEST_REDIS_SERVER";

/// The server and its cli, found once per test process.
struct Programs {
    server: PathBuf,
    cli: PathBuf,
    /// Whether [`SERVER_VARIABLE`] chose them, for messages.
    from_variable: bool,
}

/// A command that runs the server (`--sentinel` makes it a sentinel, as `redis-sentinel` and
/// `valkey-sentinel` are the same binary under another name).
pub(crate) fn server() -> Command {
    Command::new(&programs().server)
}

/// A command that runs the server's cli (`redis-cli --cluster ...`).
pub(crate) fn cli() -> Command {
    Command::new(&programs().cli)
}

/// The server as a message names it: `redis-server`, or its path and where that came from.
pub(crate) fn server_name() -> String {
    programs().name(&programs().server)
}

/// The cli as a message names it.
pub(crate) fn cli_name() -> String {
    programs().name(&programs().cli)
}

fn programs() -> &'static Programs {
    static PROGRAMS: OnceLock<Programs> = OnceLock::new();
    PROGRAMS.get_or_init(|| match std::env::var_os(SERVER_VARIABLE) {
        Some(server) if !server.is_empty() => Programs::named(PathBuf::from(server)),
        _ => Programs {
            server: "redis-server".into(),
            cli: "redis-cli".into(),
            from_variable: false,
        },
    })
}

impl Programs {
    /// The server at `server` and the cli in its directory (Valkey's `make install` puts
    /// `redis-server` and `redis-cli` links beside `valkey-server` and `valkey-cli`).
    fn named(server: PathBuf) -> Programs {
        let file_name = server.file_name().and_then(OsStr::to_str).unwrap_or("");
        let directory = match server.parent() {
            Some(parent) if parent.is_absolute() => parent.to_path_buf(),
            Some(parent) if parent.as_os_str().is_empty() => {
                find_on_path(&server).unwrap_or_else(|| {
                    panic!(
                        "{SERVER_VARIABLE}={}: no such command on PATH",
                        server.display()
                    )
                })
            }
            _ => panic!(
                "{SERVER_VARIABLE}={}: give an absolute path (the tests of each crate run in \
                 its own directory) or a command name on PATH",
                server.display()
            ),
        };
        let server = directory.join(file_name);
        assert!(
            server.is_file(),
            "{SERVER_VARIABLE}={}: no such file",
            server.display()
        );
        let names = cli_names(file_name);
        let cli = names
            .iter()
            .map(|name| directory.join(name))
            .find(|cli| cli.is_file())
            .unwrap_or_else(|| {
                panic!(
                    "{SERVER_VARIABLE}={}: no {} beside it",
                    server.display(),
                    names.join(" or ")
                )
            });
        Programs {
            server,
            cli,
            from_variable: true,
        }
    }

    fn name(&self, program: &Path) -> String {
        if self.from_variable {
            format!("{} (from {SERVER_VARIABLE})", program.display())
        } else {
            program.display().to_string()
        }
    }
}

/// The names the cli of server `file_name` may have, the likeliest first: beside valkey-server
/// its valkey-cli, beside redis-server its redis-cli; then either.
fn cli_names(file_name: &str) -> Vec<String> {
    let mut names: Vec<String> = (file_name.strip_suffix("-server"))
        .map(|prefix| format!("{prefix}-cli"))
        .into_iter()
        .collect();
    for name in ["valkey-cli", "redis-cli"] {
        if !names.iter().any(|known| known == name) {
            names.push(name.to_string());
        }
    }
    names
}

/// The directory of PATH that holds `name`.
fn find_on_path(name: &Path) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .find(|directory| directory.is_absolute() && directory.join(name).is_file())
}

#[cfg(test)]
mod tests {
    use super::cli_names;

    #[test]
    fn the_cli_of_a_server_is_looked_for_under_its_own_name_first() {
        assert_eq!(cli_names("valkey-server"), ["valkey-cli", "redis-cli"]);
        assert_eq!(cli_names("redis-server"), ["redis-cli", "valkey-cli"]);
        assert_eq!(
            cli_names("keydb-server"),
            ["keydb-cli", "valkey-cli", "redis-cli"]
        );
        // Never the server itself.
        assert_eq!(cli_names("server"), ["valkey-cli", "redis-cli"]);
    }
}
