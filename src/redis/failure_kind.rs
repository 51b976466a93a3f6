//! What kind of failure a Redis error is, for the daemon: pure functions of the error, told by the
//! redis crate's error kind and Redis's error code where they say it, by the words only where
//! nothing else does (Redis answers `ERR` for a wrong database, and Redis 6 wraps a script's errors
//! in one). The words someone running the daemon reads are [`Failure`](super::Failure)'s.

use deadpool_redis::redis::{ErrorKind, RedisError};
use delayer_wire::connection::{NO_SUCH_MASTER, NOT_A_SENTINEL};

/// How rustls words a certificate it does not trust (the cluster client keeps only the words of
/// the error it met).
pub(super) const UNTRUSTED: &str = "invalid peer certificate";

/// What kind of failure it is, as far as that changes what the daemon says and waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Redis refuses the configured password (or wants one).
    Password,
    /// Redis has no such database.
    Database,
    /// No connection could be made.
    Unreachable,
    /// An open connection broke (Redis went away, or the connection was killed).
    ConnectionLost,
    /// Redis took longer than the reply timeout: it may be alive but blocked.
    Timeout,
    /// Redis refuses writes: maxmemory reached under a `noeviction` policy.
    OutOfMemory,
    /// Redis refuses writes: it is a replica.
    ReadOnly,
    /// Redis is loading its data set after a restart.
    Loading,
    /// Redis refuses writes: it cannot save to disk (`stop-writes-on-bgsave-error`).
    CannotSave,
    /// Another client's script runs too long: Redis answers nothing else.
    Busy,
    /// The Redis user may not run a command or touch a key the daemon needs (ACL).
    NoPermission,
    /// TLS failed: Redis's certificate is not trusted, it wants ours, or it speaks no TLS there.
    Tls,
    /// No sentinel knows a master of the configured name, or one is not a sentinel at all.
    NoMaster,
    /// `[redis] cluster` names a Redis whose cluster support is off.
    NotCluster,
    /// Anything else.
    Other,
}

impl FailureKind {
    /// What `error` is.
    pub fn of(error: &RedisError) -> FailureKind {
        match error.code() {
            // Redis's own code says it all; its words may quote keys, which anyone names.
            Some(code) if code != "ERR" => return by_code(code).unwrap_or(FailureKind::Other),
            _ => {}
        }
        if error.kind() == ErrorKind::AuthenticationFailed {
            return FailureKind::Password;
        }
        if let Some(failure) = by_words(error) {
            return failure;
        }
        if tls_error(error).is_some() {
            FailureKind::Tls
        } else if error.is_timeout() {
            FailureKind::Timeout
        } else if error.is_connection_refusal() {
            FailureKind::Unreachable
        } else if error.is_io_error() || error.is_connection_dropped() {
            FailureKind::ConnectionLost
        } else {
            FailureKind::Other
        }
    }

    /// Whether retrying cannot mend it: the configured password, database, TLS files, sentinel
    /// master or cluster are wrong.
    pub fn is_config_error(self) -> bool {
        matches!(
            self,
            FailureKind::Password
                | FailureKind::Database
                | FailureKind::Tls
                | FailureKind::NoMaster
                | FailureKind::NotCluster
        )
    }

    /// What the daemon does about it, said after the failure itself.
    pub fn waiting_for(self) -> &'static str {
        match self {
            FailureKind::Password | FailureKind::Database => "retrying until Redis accepts them",
            FailureKind::Tls
            | FailureKind::NoMaster
            | FailureKind::NotCluster
            | FailureKind::Other => "retrying",
            FailureKind::Unreachable | FailureKind::ConnectionLost | FailureKind::Timeout => {
                "retrying until it answers"
            }
            FailureKind::OutOfMemory => {
                "no job can move until Redis has memory to spare (maxmemory, eviction policy); retrying"
            }
            FailureKind::ReadOnly => {
                "no job can move until it is promoted or [redis] names the master; retrying"
            }
            FailureKind::Loading => "waiting until it has loaded",
            FailureKind::CannotSave => "no job can move until it can save again; retrying",
            FailureKind::Busy => "waiting until the script ends (SCRIPT KILL ends it)",
            FailureKind::NoPermission => {
                "no job can move until the user may (see the ACL a delayer user needs in \
                 docs/redis-deployments.md); retrying"
            }
        }
    }

    /// The line that ends an outage of this kind.
    pub fn recovered(self, address: &str) -> String {
        match self {
            FailureKind::OutOfMemory | FailureKind::ReadOnly | FailureKind::CannotSave => {
                format!("Redis at {address} accepts writes again")
            }
            FailureKind::Loading => format!("Redis at {address} has loaded its data"),
            FailureKind::Password
            | FailureKind::Database
            | FailureKind::NoPermission
            | FailureKind::Tls
            | FailureKind::NoMaster
            | FailureKind::NotCluster
            | FailureKind::Other => format!("Redis at {address} works again"),
            FailureKind::Unreachable
            | FailureKind::ConnectionLost
            | FailureKind::Timeout
            | FailureKind::Busy => {
                format!("Redis at {address} answers again")
            }
        }
    }
}

/// Whether a script call of the daemon that failed with `error` may have run all the same: the
/// client's rule ([`delayer_wire::unanswered`]), but a cluster error is Redis's answer on the
/// daemon's own connection to a master, which sends a call once. What is left are the errors that
/// carry no code of Redis's: no reply came (a timeout, a connection that broke), or the reply
/// could not be read (the script ran).
pub fn reply_may_be_lost(error: &RedisError) -> bool {
    delayer_wire::unanswered(error) && !error.is_cluster_error()
}

/// Whether `error` says the keys' slot is moving between masters (a resharding): MOVED, ASK,
/// TRYAGAIN, or a script that met a key already moved. Redis refused the call before any write.
pub fn slot_moving(error: &RedisError) -> bool {
    matches!(error.code(), Some("MOVED" | "ASK" | "TRYAGAIN"))
        || error.to_string().contains("non local key")
}

/// What Redis's error code says, where it says enough.
fn by_code(code: &str) -> Option<FailureKind> {
    Some(match code {
        "NOAUTH" | "WRONGPASS" => FailureKind::Password,
        "OOM" => FailureKind::OutOfMemory,
        "READONLY" => FailureKind::ReadOnly,
        "LOADING" => FailureKind::Loading,
        "MISCONF" => FailureKind::CannotSave,
        "BUSY" => FailureKind::Busy,
        "NOPERM" => FailureKind::NoPermission,
        _ => return None,
    })
}

/// What the words say, for the errors that carry no telling kind or code: a generic `ERR`, a
/// script's error wrapped in one (Redis 6), our own resolution errors, and the cluster client,
/// which keeps only the words of the errors it met.
fn by_words(error: &RedisError) -> Option<FailureKind> {
    let text = error.to_string();
    let has = |markers: &[&str]| markers.iter().any(|marker| text.contains(marker));
    Some(if has(&["WRONGTYPE"]) {
        // A script's own check (Redis 6 wraps it in ERR): it names a key, whatever that holds.
        FailureKind::Other
    } else if has(&["invalid password", "without any password"]) {
        FailureKind::Password
    } else if error.kind() == ErrorKind::InvalidClientConfig
        && has(&[NO_SUCH_MASTER, NOT_A_SENTINEL])
    {
        FailureKind::NoMaster
    } else if has(&["cluster support disabled"]) {
        FailureKind::NotCluster
    } else if has(&["DB index"]) {
        FailureKind::Database
    } else if has(&["OOM command not allowed"]) {
        FailureKind::OutOfMemory
    } else if has(&["READONLY"]) {
        FailureKind::ReadOnly
    } else if has(&[
        "NOPERM",
        "can't access",
        "has no permissions",
        "ACL failure in script",
    ]) {
        FailureKind::NoPermission
    } else if has(&[UNTRUSTED]) {
        FailureKind::Tls
    } else {
        return None;
    })
}

/// The TLS error under `error`, if TLS is what failed.
pub(super) fn tls_error(error: &RedisError) -> Option<&rustls::Error> {
    type Shared = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = cause {
        if let Some(tls) = error.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        cause = if let Some(shared) = error.downcast_ref::<Shared>() {
            // redis-rs keeps the error it wraps behind an Arc.
            Some(shared.as_ref())
        } else if let Some(io) = error.downcast_ref::<std::io::Error>() {
            // An io::Error's source() skips the error it wraps: look at that one itself.
            io.get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static))
        } else {
            error.source()
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use std::io;

    use deadpool_redis::redis::{self, ErrorKind, RedisError};

    use super::*;

    /// The error Redis answers with `line` (an error reply, without its `-`).
    fn reply(line: &str) -> RedisError {
        let value = redis::parse_redis_value(format!("-{line}\r\n").as_bytes()).unwrap();
        value.extract_error().unwrap_err()
    }

    fn io(kind: io::ErrorKind) -> RedisError {
        RedisError::from(io::Error::new(kind, "test"))
    }

    #[test]
    fn each_reply_redis_gives_is_recognised() {
        let cases = [
            ("NOAUTH Authentication required.", FailureKind::Password),
            (
                "WRONGPASS invalid username-password pair or user is disabled.",
                FailureKind::Password,
            ),
            ("ERR invalid password", FailureKind::Password),
            (
                "ERR AUTH <password> called without any password configured for the default \
                 user. Are you sure your configuration is correct?",
                FailureKind::Password,
            ),
            ("ERR DB index is out of range", FailureKind::Database),
            (
                "ERR This instance has cluster support disabled",
                FailureKind::NotCluster,
            ),
            (
                "OOM command not allowed when used memory > 'maxmemory'.",
                FailureKind::OutOfMemory,
            ),
            (
                "ERR Error running script (call to f_1): @user_script:1: @user_script: 1: -OOM \
                 command not allowed when used memory > 'maxmemory'.",
                FailureKind::OutOfMemory,
            ),
            (
                "READONLY You can't write against a read only replica.",
                FailureKind::ReadOnly,
            ),
            (
                "ERR Error running script (call to f_1): @user_script:1: -READONLY You can't \
                 write against a read only replica.",
                FailureKind::ReadOnly,
            ),
            (
                "LOADING Redis is loading the dataset in memory",
                FailureKind::Loading,
            ),
            (
                "MISCONF Redis is configured to save RDB snapshots, but it's currently unable \
                 to persist to disk.",
                FailureKind::CannotSave,
            ),
            (
                "BUSY Redis is busy running a script. You can only call SCRIPT KILL or \
                 SHUTDOWN NOSAVE.",
                FailureKind::Busy,
            ),
            (
                "NOPERM User delayer has no permissions to run the 'evalsha' command",
                FailureKind::NoPermission,
            ),
            (
                "ERR Error running script (call to f_1): @user_script:12: The user executing \
                 the script can't access at least one of the keys mentioned in the command",
                FailureKind::NoPermission,
            ),
            // Valkey 8 words a script's refused key and command so.
            (
                "ERR ACL failure in script: No permissions to access a key script: \
                 4b07cae3f44a6c0e9373aed4a3afc9cec25a66cf, on @user_script:98.",
                FailureKind::NoPermission,
            ),
            (
                "ERR ACL failure in script: User delayer has no permissions to run the 'lpush' \
                 command script: 4b07cae3f44a6c0e9373aed4a3afc9cec25a66cf, on @user_script:98.",
                FailureKind::NoPermission,
            ),
            (
                "OOM command not allowed when used memory > 'maxmemory'. script: \
                 2f4ef1e4e19b0a4a3f4bd1b5e7b0a5fd2c3d4e5f, on @user_script:12.",
                FailureKind::OutOfMemory,
            ),
            (
                "WRONGTYPE delayer:ready_queue:x-READONLY holds a string, not a list",
                FailureKind::Other,
            ),
            (
                "ERR Error running script (call to f_1): @user_script:9: @user_script: 9: \
                 WRONGTYPE delayer:ready_queue:DB index holds a string, not a list",
                FailureKind::Other,
            ),
            (
                "NOPERM this Redis user may not run LPUSH on delayer:ready_queue:READONLY",
                FailureKind::NoPermission,
            ),
            ("ERR unknown command 'FOO'", FailureKind::Other),
            (
                "WRONGTYPE Operation against a key holding the wrong kind of value",
                FailureKind::Other,
            ),
        ];
        for (line, failure) in cases {
            assert_eq!(FailureKind::of(&reply(line)), failure, "{line}");
        }
    }

    #[test]
    fn the_clients_own_errors_by_their_kind() {
        let cases = [
            (
                RedisError::from((
                    ErrorKind::AuthenticationFailed,
                    "Password authentication failed",
                )),
                FailureKind::Password,
            ),
            (
                RedisError::from((ErrorKind::InvalidClientConfig, NO_SUCH_MASTER, "m".into())),
                FailureKind::NoMaster,
            ),
            (
                RedisError::from((ErrorKind::InvalidClientConfig, NOT_A_SENTINEL, "x".into())),
                FailureKind::NoMaster,
            ),
            (io(io::ErrorKind::TimedOut), FailureKind::Timeout),
            (
                io(io::ErrorKind::ConnectionRefused),
                FailureKind::Unreachable,
            ),
            (
                io(io::ErrorKind::ConnectionReset),
                FailureKind::ConnectionLost,
            ),
            (io(io::ErrorKind::BrokenPipe), FailureKind::ConnectionLost),
            (
                io(io::ErrorKind::UnexpectedEof),
                FailureKind::ConnectionLost,
            ),
            (
                RedisError::from((
                    ErrorKind::Io,
                    "tls",
                    "invalid peer certificate: UnknownIssuer".into(),
                )),
                FailureKind::Tls,
            ),
            (
                RedisError::from(io::Error::other(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::UnknownIssuer,
                ))),
                FailureKind::Tls,
            ),
        ];
        for (error, failure) in cases {
            assert_eq!(FailureKind::of(&error), failure, "{error}");
        }
    }

    #[test]
    fn only_what_no_answer_came_to_may_have_run() {
        assert!(reply_may_be_lost(&io(io::ErrorKind::TimedOut)));
        assert!(reply_may_be_lost(&io(io::ErrorKind::ConnectionReset)));
        let unreadable = RedisError::from((ErrorKind::UnexpectedReturnType, "malformed"));
        assert!(
            reply_may_be_lost(&unreadable),
            "it ran: its reply is what is wrong"
        );
        assert!(!reply_may_be_lost(&reply("OOM command not allowed")));
        assert!(!reply_may_be_lost(&reply("MOVED 3999 127.0.0.1:6381")));
        assert!(!reply_may_be_lost(&reply(
            "CLUSTERDOWN The cluster is down"
        )));
        assert!(delayer_wire::unanswered(&reply(
            "MOVED 3999 127.0.0.1:6381"
        )));
    }

    #[test]
    fn a_slot_on_the_move_is_told_by_its_code_or_a_scripts_words() {
        assert!(slot_moving(&reply("MOVED 3999 127.0.0.1:6381")));
        assert!(slot_moving(&reply("ASK 3999 127.0.0.1:6381")));
        assert!(slot_moving(&reply(
            "TRYAGAIN Multiple keys request during rehashing of slot"
        )));
        assert!(slot_moving(&reply(
            "ERR Error running script (call to f_1): @user_script:3: Script attempted to access \
             a non local key in a cluster node"
        )));
        assert!(!slot_moving(&reply("CLUSTERDOWN The cluster is down")));
        assert!(!slot_moving(&reply("OOM command not allowed")));
    }

    #[test]
    fn only_what_waiting_cannot_mend_stops_a_start() {
        assert!(FailureKind::of(&reply("WRONGPASS x")).is_config_error());
        assert!(FailureKind::of(&reply("ERR DB index is out of range")).is_config_error());
        assert!(!FailureKind::of(&reply("LOADING x")).is_config_error());
        assert!(!FailureKind::of(&io(io::ErrorKind::ConnectionRefused)).is_config_error());
    }
}
