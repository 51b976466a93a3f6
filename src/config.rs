//! `delayer.conf` (the original Delayer's INI file) → a typed, validated [`Config`].

use std::cell::RefCell;
use std::fmt::Display;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use delayer_client::keys::Layout;
use ini::{Ini, ParseOption};

/// Where the configuration is looked for when `-c` is not given, in order.
pub const SEARCH_PATHS: [&str; 2] = ["./delayer.conf", "/etc/delayer/delayer.conf"];

// The original's shipped values; its own code fell back to zero values, which mean nothing useful.
const DEFAULT_TIMER_INTERVAL_MS: u64 = 1000;
/// Chosen with the benchmark (`cargo bench --bench bench -- batch`).
pub const DEFAULT_BATCH_SIZE: usize = 1000;
/// The largest `max_body_bytes`: Redis's own limit for one value (its proto-max-bulk-len).
pub const MAX_BODY_BYTES: usize = 512 << 20;
const DEFAULT_HOST: &str = "127.0.0.1";
const DEFAULT_PORT: u16 = 6379;
const DEFAULT_DATABASE: i64 = 0;
const DEFAULT_MAX_IDLE: usize = 2;
const DEFAULT_MAX_ACTIVE: usize = 20;
const DEFAULT_IDLE_TIMEOUT_S: u64 = 3600;
const DEFAULT_CONN_MAX_LIFETIME_S: u64 = 3600;

/// The largest batch: one script call blocks Redis while it runs (about 2 µs a job), so it must
/// stay short.
const MAX_BATCH_SIZE: usize = 10_000;

const KNOWN_KEYS: [(&str, &[&str]); 3] = [
    (
        "delayer",
        &[
            "pid",
            "timer_interval",
            "access_log",
            "error_log",
            "log_rotate",
            "log_max_files",
            "batch_size",
            "max_attempts",
            "max_body_bytes",
            "log_level",
            "log_format",
        ],
    ),
    (
        "redis",
        &[
            "host",
            "port",
            "database",
            "username",
            "password",
            "tls",
            "tls_ca_file",
            "tls_cert_file",
            "tls_key_file",
            "tls_insecure",
            "sentinels",
            "sentinel_master",
            "sentinel_username",
            "sentinel_password",
            "cluster",
            "key_layout",
            "max_idle",
            "max_active",
            "idle_timeout",
            "conn_max_lifetime",
        ],
    ),
    ("http", &["listen", "token"]),
];

/// Everything the daemon needs to know, validated; relative paths are already made absolute.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file this was read from (for messages).
    pub file: PathBuf,
    /// `[delayer] pid`: the pid file, or `None` to allow several instances.
    pub pid: Option<PathBuf>,
    /// `[delayer] timer_interval`: the longest the loop sleeps between two looks at the pool.
    pub timer_interval: Duration,
    /// `[delayer] access_log`: where info lines go (`None`: stdout).
    pub access_log: Option<PathBuf>,
    /// `[delayer] error_log`: where warnings and errors go (`None`: stdout).
    pub error_log: Option<PathBuf>,
    /// `[delayer] log_rotate`: whether log files roll over daily.
    pub log_rotate: LogRotation,
    /// `[delayer] log_max_files`: with daily rotation, how many files of each log to keep (`None`: all).
    pub log_max_files: Option<usize>,
    /// `[delayer] batch_size`: the most jobs one script call moves.
    pub batch_size: usize,
    /// `[delayer] max_attempts`: a reserved job whose time to run lapses after this many
    /// reservations goes to its topic's dead list instead of back to the pool.
    pub max_attempts: u32,
    /// `[delayer] max_body_bytes`: the largest job body the shell commands and the HTTP API push.
    pub max_body_bytes: usize,
    /// `[delayer] log_level`: the least severe lines logged.
    pub log_level: LogLevel,
    /// `[delayer] log_format`: the original's lines, or one JSON object per line.
    pub log_format: LogFormat,
    pub redis: RedisConfig,
    /// The `[http]` section: no HTTP server without it.
    pub http: Option<HttpConfig>,
    /// Unknown sections and keys (a typo, most likely): ignored with a warning, as the original
    /// did, but refused by `--check-config`.
    pub unknown: Vec<String>,
    /// Other things worth a warning (a key set twice), logged once logging is up.
    pub warnings: Vec<String>,
}

/// The `[http]` section.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// `listen`: the address and port to serve on.
    pub listen: SocketAddr,
    /// `token`: when set, the job API wants `Authorization: Bearer <token>`.
    pub token: Option<String>,
}

/// The least severe log lines written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// Everything, the "Job is ready" lines included.
    Info,
    /// Warnings and errors only.
    Warn,
    /// Errors only.
    Error,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// `[info] 2018/10/21 11:24:24 message`, as the original.
    Text,
    /// One JSON object per line: level, time, message, and the event's fields.
    Json,
}

/// When log files roll over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogRotation {
    /// One file, appended to for ever (rotate it from outside with logrotate's `copytruncate`).
    Never,
    /// A new file each day (UTC), named `<file>.YYYY-MM-DD`.
    Daily,
}

/// The `[redis]` section.
#[derive(Debug, Clone)]
pub struct RedisConfig {
    /// A host name or address, or the path of a unix socket (starting with `/`).
    pub host: String,
    pub port: u16,
    pub database: i64,
    /// The ACL user (Redis 6+); `None`: `default`, as with a password alone.
    pub username: Option<String>,
    pub password: Option<String>,
    /// TLS to Redis, when `tls = true`.
    pub tls: Option<TlsConfig>,
    /// Redis Sentinel: the master is where these say, not at `host` and `port`.
    pub sentinel: Option<SentinelConfig>,
    /// Redis Cluster: some of its nodes' addresses (host, port), asked in this order for the rest.
    pub cluster: Option<Vec<(String, u16)>>,
    /// The key names: `key_layout`, or the cluster layout with `cluster`.
    pub layout: Layout,
    /// The most idle connections the pool keeps.
    pub max_idle: usize,
    /// The pool size.
    pub max_active: usize,
    /// An idle connection is closed after this long (`None`: never).
    pub idle_timeout: Option<Duration>,
    /// Any connection is closed after this long (`None`: never).
    pub conn_max_lifetime: Option<Duration>,
}

/// `[redis] sentinels` and `sentinel_master`.
#[derive(Debug, Clone, PartialEq)]
pub struct SentinelConfig {
    /// The sentinels' addresses (host, port), asked in this order.
    pub addresses: Vec<(String, u16)>,
    /// The name they monitor the master by.
    pub master: String,
    /// The sentinels' own ACL user (Redis 6.2+); `None`: `default`.
    pub username: Option<String>,
    /// The sentinels' own password (their `requirepass`, or their user's), if they want one.
    pub password: Option<String>,
}

/// Addresses as `[redis] sentinels` and `cluster` list them.
pub fn address_list(addresses: &[(String, u16)]) -> String {
    let addresses: Vec<String> = addresses
        .iter()
        .map(|(host, port)| delayer_client::connection::host_port(host, *port))
        .collect();
    addresses.join(",")
}

/// `[redis] tls = true` and the files that go with it.
#[derive(Debug, Clone, PartialEq)]
pub struct TlsConfig {
    /// The CA that signed Redis's certificate (PEM); `None`: the system's trusted CAs.
    pub ca_file: Option<PathBuf>,
    /// This client's certificate and key (PEM), for a Redis that checks clients (mutual TLS).
    pub client: Option<(PathBuf, PathBuf)>,
    /// Do not check Redis's certificate at all.
    pub insecure: bool,
}

impl RedisConfig {
    /// The address as people write it, for messages.
    pub fn address(&self) -> String {
        if let Some(sentinel) = &self.sentinel {
            format!(
                "master {} (sentinels {})",
                sentinel.master,
                address_list(&sentinel.addresses)
            )
        } else if let Some(nodes) = &self.cluster {
            format!("the cluster of {}", address_list(nodes))
        } else if self.is_unix_socket() {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    pub fn is_unix_socket(&self) -> bool {
        self.host.starts_with('/')
    }
}

/// The configuration as it will be used, in `delayer.conf`'s own shape (password masked).
impl Display for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = |path: &Option<PathBuf>, empty: &str| match path {
            Some(path) => format!("{}", path.display()),
            None => format!("                ; {empty}"),
        };
        let seconds = |limit: Option<Duration>| limit.map_or(0, |limit| limit.as_secs());
        let redis = &self.redis;
        writeln!(f, "[delayer]")?;
        writeln!(
            f,
            "pid = {}",
            path(&self.pid, "none: several instances may run")
        )?;
        writeln!(f, "timer_interval = {}", self.timer_interval.as_millis())?;
        writeln!(f, "access_log = {}", path(&self.access_log, "stdout"))?;
        writeln!(f, "error_log = {}", path(&self.error_log, "stdout"))?;
        let rotate = if self.log_rotate == LogRotation::Daily {
            "daily"
        } else {
            "never"
        };
        writeln!(f, "log_rotate = {rotate}")?;
        writeln!(f, "log_max_files = {}", self.log_max_files.unwrap_or(0))?;
        writeln!(f, "batch_size = {}", self.batch_size)?;
        writeln!(f, "max_attempts = {}", self.max_attempts)?;
        writeln!(f, "max_body_bytes = {}", self.max_body_bytes)?;
        let level = match self.log_level {
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        };
        writeln!(f, "log_level = {level}")?;
        let format = match self.log_format {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        };
        writeln!(f, "log_format = {format}")?;
        writeln!(f, "\n[redis]")?;
        match &redis.sentinel {
            Some(sentinel) => {
                writeln!(f, "sentinels = {}", address_list(&sentinel.addresses))?;
                writeln!(f, "sentinel_master = {}", sentinel.master)?;
                if let Some(username) = &sentinel.username {
                    writeln!(f, "sentinel_username = {username}")?;
                }
                if sentinel.password.is_some() {
                    writeln!(f, "sentinel_password = ********")?;
                }
            }
            None => match &redis.cluster {
                Some(nodes) => writeln!(f, "cluster = {}", address_list(nodes))?,
                None => {
                    writeln!(f, "host = {}", redis.host)?;
                    writeln!(f, "port = {}", redis.port)?;
                }
            },
        }
        match redis.layout {
            Layout::Legacy | Layout::Cluster => {}
            Layout::Jop => writeln!(f, "key_layout = jop")?,
        }
        writeln!(f, "database = {}", redis.database)?;
        if let Some(username) = &redis.username {
            writeln!(f, "username = {username}")?;
        }
        let password = if redis.password.is_some() {
            "********"
        } else {
            "                ; none"
        };
        writeln!(f, "password = {password}")?;
        if let Some(tls) = &redis.tls {
            writeln!(f, "tls = true")?;
            writeln!(
                f,
                "tls_ca_file = {}",
                path(&tls.ca_file, "none: the system's CAs")
            )?;
            if let Some((cert, key)) = &tls.client {
                writeln!(f, "tls_cert_file = {}", cert.display())?;
                writeln!(f, "tls_key_file = {}", key.display())?;
            }
            if tls.insecure {
                writeln!(
                    f,
                    "tls_insecure = true   ; Redis's certificate is not checked"
                )?;
            }
        }
        writeln!(f, "max_idle = {}", redis.max_idle)?;
        writeln!(f, "max_active = {}", redis.max_active)?;
        writeln!(f, "idle_timeout = {}", seconds(redis.idle_timeout))?;
        write!(
            f,
            "conn_max_lifetime = {}",
            seconds(redis.conn_max_lifetime)
        )?;
        if let Some(http) = &self.http {
            writeln!(f, "\n\n[http]")?;
            writeln!(f, "listen = {}", http.listen)?;
            let token = if http.token.is_some() {
                "********"
            } else {
                "                ; none: the job API is open"
            };
            write!(f, "token = {token}")?;
        }
        Ok(())
    }
}

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

impl Config {
    /// What the CLI's and the HTTP server's clients are told: what the daemon does.
    pub fn client_settings(&self) -> delayer_client::Settings {
        delayer_client::Settings {
            max_attempts: self.max_attempts,
            max_body_bytes: self.max_body_bytes,
            layout: self.redis.layout,
            ..delayer_client::Settings::default()
        }
    }

    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read configuration file {}", path.display()))?;
        Config::parse(&text, path)
    }

    /// Validates the text of a configuration file; `file` names it in messages and nothing is read.
    pub fn parse(text: &str, file: &Path) -> Result<Config> {
        let options = ParseOption {
            enabled_escape: false,
            ..ParseOption::default()
        };
        let file = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
        let ini = Ini::load_from_str_opt(text, options).map_err(|error| {
            anyhow::anyhow!(
                "{}:{}: {}",
                file.display(),
                error.line,
                in_words(&error.msg)
            )
        })?;
        let values = Values {
            file: &file,
            ini: &ini,
            errors: RefCell::new(Vec::new()),
        };

        let redis = RedisConfig {
            host: values.string("redis", "host", DEFAULT_HOST),
            port: values.number("redis", "port", DEFAULT_PORT, 1..=u16::MAX),
            database: values.number(
                "redis",
                "database",
                DEFAULT_DATABASE,
                0..=i64::from(i32::MAX),
            ),
            username: values.username(),
            password: values.get("redis", "password").filter(|p| !p.is_empty()),
            tls: values.tls(),
            sentinel: values.sentinel(),
            cluster: values.cluster(),
            layout: values.layout(),
            max_idle: values.number("redis", "max_idle", DEFAULT_MAX_IDLE, 0..=100_000),
            max_active: values.number("redis", "max_active", DEFAULT_MAX_ACTIVE, 1..=100_000),
            idle_timeout: values.seconds("redis", "idle_timeout", DEFAULT_IDLE_TIMEOUT_S),
            conn_max_lifetime: values.seconds(
                "redis",
                "conn_max_lifetime",
                DEFAULT_CONN_MAX_LIFETIME_S,
            ),
        };
        let timer_interval_ms = values.number(
            "delayer",
            "timer_interval",
            DEFAULT_TIMER_INTERVAL_MS,
            1..=86_400_000,
        );
        let (unknown, mut warnings) = values.unknown_entries();
        if redis.tls.as_ref().is_some_and(|tls| tls.insecure) {
            warnings.push(format!(
                "{}: [redis] tls_insecure = true: Redis's certificate is not checked, so anyone on \
                 the way to Redis can pose as it and read or change every job; use it only to try \
                 TLS out",
                file.display()
            ));
        }
        let config = Config {
            pid: values.path("delayer", "pid"),
            timer_interval: Duration::from_millis(timer_interval_ms),
            access_log: values.path("delayer", "access_log"),
            error_log: values.path("delayer", "error_log"),
            log_rotate: values.choice(
                "delayer",
                "log_rotate",
                &[("never", LogRotation::Never), ("daily", LogRotation::Daily)],
            ),
            log_max_files: match values.number("delayer", "log_max_files", 0, 0..=100_000) {
                0 => None,
                count => Some(count),
            },
            batch_size: values.number(
                "delayer",
                "batch_size",
                DEFAULT_BATCH_SIZE,
                1..=MAX_BATCH_SIZE,
            ),
            max_attempts: values.number(
                "delayer",
                "max_attempts",
                delayer_client::DEFAULT_MAX_ATTEMPTS,
                1..=1_000_000,
            ),
            max_body_bytes: values.number(
                "delayer",
                "max_body_bytes",
                delayer_client::DEFAULT_MAX_BODY_BYTES,
                1..=MAX_BODY_BYTES,
            ),
            log_level: values.choice(
                "delayer",
                "log_level",
                &[
                    ("info", LogLevel::Info),
                    ("warn", LogLevel::Warn),
                    ("error", LogLevel::Error),
                ],
            ),
            log_format: values.choice(
                "delayer",
                "log_format",
                &[("text", LogFormat::Text), ("json", LogFormat::Json)],
            ),
            redis,
            http: values.http(),
            unknown,
            warnings,
            file: file.clone(),
        };
        // Every bad value at once, not one per attempt to start.
        let errors = values.errors.into_inner();
        if !errors.is_empty() {
            bail!(errors.join("\n"));
        }
        Ok(config)
    }
}

/// rust-ini's parse errors, said as an operator would (the file and line are told by the caller).
fn in_words(message: &str) -> String {
    if message.contains("expecting \"[Some(']')]\"") {
        "a section name is not closed with ']'".to_string()
    } else {
        format!("not valid INI ({})", message.trim_end_matches('.'))
    }
}

/// Typed lookups in the parsed file, each error naming file, section, key and value.
struct Values<'a> {
    file: &'a Path,
    ini: &'a Ini,
    /// What was wrong so far: each lookup that fails says why here and returns its default.
    errors: RefCell<Vec<String>>,
}

impl Values<'_> {
    /// The trimmed value, `None` when the key is absent or empty.
    fn get(&self, section: &str, key: &str) -> Option<String> {
        // The last one wins, as in the original (go-ini); duplicates are warned about.
        let value = self.ini.section(Some(section))?.get_all(key).last()?.trim();
        // rust-ini reads `password =   ; comment` as "; comment": an empty value with a comment.
        if value.is_empty() || value.starts_with(';') || value.starts_with('#') {
            None
        } else {
            Some(value.to_string())
        }
    }

    fn string(&self, section: &str, key: &str, default: &str) -> String {
        self.get(section, key)
            .unwrap_or_else(|| default.to_string())
    }

    /// Records that `[section] key = raw` is wrong, and why.
    fn wrong(&self, section: &str, key: &str, raw: &str, why: impl Display) {
        self.errors.borrow_mut().push(format!(
            "{}: [{section}] {key} = {raw:?}: {why}",
            self.file.display()
        ));
    }

    fn number<T>(&self, section: &str, key: &str, default: T, range: RangeInclusive<T>) -> T
    where
        T: FromStr + PartialOrd + Display,
    {
        let Some(raw) = self.get(section, key) else {
            return default;
        };
        match raw.parse::<T>() {
            Ok(value) if range.contains(&value) => value,
            _ => {
                let why = format!(
                    "expected a whole number from {} to {}",
                    range.start(),
                    range.end()
                );
                self.wrong(section, key, &raw, why);
                default
            }
        }
    }

    /// One of `choices` (by name, case-insensitive); the first is the default.
    fn choice<T: Copy>(&self, section: &str, key: &str, choices: &[(&str, T)]) -> T {
        let Some(raw) = self.get(section, key) else {
            return choices[0].1;
        };
        match choices
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(&raw))
        {
            Some((_, value)) => *value,
            None => {
                let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
                self.wrong(
                    section,
                    key,
                    &raw,
                    format!("expected one of {}", names.join(", ")),
                );
                choices[0].1
            }
        }
    }

    /// `[redis] username`, which wants a password: redis-rs sends no AUTH without one, so the
    /// daemon would be `default` unnoticed (a `nopass` user takes any password).
    fn username(&self) -> Option<String> {
        let username = self.get("redis", "username")?;
        if self.get("redis", "password").is_none() {
            self.wrong(
                "redis",
                "username",
                &username,
                "given without a password, which Redis needs to log in as that user (any \
                 password for a nopass user)",
            );
        }
        Some(username)
    }

    /// `[redis] sentinels` and `sentinel_master`: both or neither, and then no `host` or `port`
    /// (the sentinels say where the master is).
    fn sentinel(&self) -> Option<SentinelConfig> {
        let master = self.get("redis", "sentinel_master");
        let password = self
            .get("redis", "sentinel_password")
            .filter(|password| !password.is_empty());
        let username = self.get("redis", "sentinel_username");
        if let Some(username) = &username
            && password.is_none()
        {
            self.wrong(
                "redis",
                "sentinel_username",
                username,
                "given without sentinel_password, which the sentinels need to log in as that user",
            );
        }
        let Some(raw) = self.get("redis", "sentinels") else {
            if let Some(master) = master {
                self.wrong(
                    "redis",
                    "sentinel_master",
                    &master,
                    "given without sentinels",
                );
            }
            if password.is_some() {
                self.wrong(
                    "redis",
                    "sentinel_password",
                    "********",
                    "given without sentinels",
                );
            }
            if let Some(username) = &username {
                self.wrong(
                    "redis",
                    "sentinel_username",
                    username,
                    "given without sentinels",
                );
            }
            return None;
        };
        let addresses = self.addresses("sentinels", &raw, 26379)?;
        for key in ["host", "port"] {
            if let Some(value) = self.get("redis", key) {
                self.wrong(
                    "redis",
                    key,
                    &value,
                    "set with sentinels, which say where Redis is",
                );
            }
        }
        let Some(master) = master else {
            self.wrong(
                "redis",
                "sentinel_master",
                "",
                "missing: sentinels want the name they know the master by",
            );
            return None;
        };
        Some(SentinelConfig {
            addresses,
            master,
            username,
            password,
        })
    }

    /// `[redis] cluster`: no `host`, `port` or sentinels with it (the nodes say where the rest
    /// are), and database 0, the only one a cluster has.
    fn cluster(&self) -> Option<Vec<(String, u16)>> {
        let raw = self.get("redis", "cluster")?;
        let addresses = self.addresses("cluster", &raw, 6379)?;
        for key in ["host", "port", "sentinels"] {
            if let Some(value) = self.get("redis", key) {
                self.wrong(
                    "redis",
                    key,
                    &value,
                    "set with cluster, whose nodes say where Redis is",
                );
            }
        }
        if let Some(database) = self
            .get("redis", "database")
            .filter(|database| database != "0")
        {
            self.wrong(
                "redis",
                "database",
                &database,
                "set with cluster: a Redis Cluster has database 0 only",
            );
        }
        Some(addresses)
    }

    /// `[redis] key_layout`: which key names the jobs are under; with `cluster`, the cluster's.
    fn layout(&self) -> Layout {
        let layout = self.choice(
            "redis",
            "key_layout",
            &[("legacy", Layout::Legacy), ("jop", Layout::Jop)],
        );
        if self.get("redis", "cluster").is_none() {
            return layout;
        }
        if let Some(value) = self.get("redis", "key_layout") {
            self.wrong(
                "redis",
                "key_layout",
                &value,
                "set with cluster, which has a layout of its own (topics as hash tags)",
            );
        }
        Layout::Cluster
    }

    /// A comma-separated list of `host:port` (`example_port` for the message).
    fn addresses(&self, key: &str, raw: &str, example_port: u16) -> Option<Vec<(String, u16)>> {
        let mut addresses = Vec::new();
        for address in raw.split(',').map(str::trim) {
            // An IPv6 address in brackets, as in a URL: `[::1]:26379`.
            let (host, port) = match address.strip_prefix('[') {
                Some(rest) => rest.split_once("]:").unwrap_or_default(),
                None => address
                    .rsplit_once(':')
                    .filter(|(host, _)| !host.contains(':'))
                    .unwrap_or_default(),
            };
            match port.parse::<u16>() {
                Ok(port) if !host.is_empty() && port > 0 => {
                    addresses.push((host.to_string(), port));
                }
                _ => {
                    let why = format!(
                        "{address:?} is not host:port (like 10.0.0.5:{example_port}, or [::1]:{example_port})"
                    );
                    self.wrong("redis", key, raw, why);
                    return None;
                }
            }
        }
        Some(addresses)
    }

    /// `[redis] tls` and its files: checked together, since one without the other is a mistake
    /// that would otherwise show only at the first connection.
    fn tls(&self) -> Option<TlsConfig> {
        let on = self.choice(
            "redis",
            "tls",
            &[
                ("false", false),
                ("true", true),
                ("no", false),
                ("yes", true),
            ],
        );
        let insecure = self.choice(
            "redis",
            "tls_insecure",
            &[
                ("false", false),
                ("true", true),
                ("no", false),
                ("yes", true),
            ],
        );
        let ca_file = self.path("redis", "tls_ca_file");
        let cert_file = self.path("redis", "tls_cert_file");
        let key_file = self.path("redis", "tls_key_file");
        if !on {
            for key in [
                "tls_ca_file",
                "tls_cert_file",
                "tls_key_file",
                "tls_insecure",
            ] {
                if let Some(raw) = self.get("redis", key) {
                    self.wrong("redis", key, &raw, "set, but tls is not true");
                }
            }
            return None;
        }
        if self
            .get("redis", "host")
            .is_some_and(|host| host.starts_with('/'))
        {
            self.wrong(
                "redis",
                "tls",
                "true",
                "Redis on a unix socket speaks no TLS",
            );
        }
        let client = match (cert_file, key_file) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            (Some(cert), None) => {
                let cert = cert.display().to_string();
                self.wrong(
                    "redis",
                    "tls_cert_file",
                    &cert,
                    "given without tls_key_file",
                );
                None
            }
            (None, Some(key)) => {
                let key = key.display().to_string();
                self.wrong("redis", "tls_key_file", &key, "given without tls_cert_file");
                None
            }
        };
        Some(TlsConfig {
            ca_file,
            client,
            insecure,
        })
    }

    /// `[http]`, when the file has the section: it must name an address to listen on, and a
    /// token key must not be empty (that would leave the job API open unnoticed).
    fn http(&self) -> Option<HttpConfig> {
        let section = self.ini.section(Some("http"))?;
        let token = self.get("http", "token");
        if token.is_none() && section.contains_key("token") {
            self.wrong(
                "http",
                "token",
                "",
                "empty, which would leave the job API open: give a token, or remove the key",
            );
        }
        let raw = self.get("http", "listen").unwrap_or_default();
        match raw.parse() {
            Ok(listen) => Some(HttpConfig { listen, token }),
            Err(_) => {
                self.wrong(
                    "http",
                    "listen",
                    &raw,
                    "expected an address and port, like 127.0.0.1:9277 (the [http] section turns \
                     HTTP on: remove it to serve nothing)",
                );
                None
            }
        }
    }

    /// A number of seconds where 0 means "never".
    fn seconds(&self, section: &str, key: &str, default: u64) -> Option<Duration> {
        let seconds = self.number(section, key, default, 0..=u64::from(u32::MAX));
        (seconds > 0).then(|| Duration::from_secs(seconds))
    }

    /// A path made absolute against the working directory, as the original resolved it.
    fn path(&self, section: &str, key: &str) -> Option<PathBuf> {
        let raw = self.get(section, key)?;
        match std::path::absolute(&raw) {
            Ok(path) => Some(path),
            Err(error) => {
                self.wrong(section, key, &raw, format!("not a usable path ({error})"));
                None
            }
        }
    }

    /// What the file holds that is not ours (unknown sections and keys), and other warnings.
    fn unknown_entries(&self) -> (Vec<String>, Vec<String>) {
        let (mut unknown, mut warnings) = (Vec::new(), Vec::new());
        for (section, properties) in self.ini.iter() {
            let known = KNOWN_KEYS.iter().find(|(name, _)| Some(*name) == section);
            match (section, known) {
                (Some(name), Some((_, keys))) => {
                    for (key, _) in properties.iter().filter(|(key, _)| !keys.contains(key)) {
                        unknown.push(format!(
                            "{}: unknown key [{name}] {key}, ignored",
                            self.file.display()
                        ));
                    }
                    for key in keys
                        .iter()
                        .filter(|key| properties.get_all(key).count() > 1)
                    {
                        warnings.push(format!(
                            "{}: [{name}] {key} is set more than once; the last value is used",
                            self.file.display()
                        ));
                    }
                }
                (None, _) if properties.is_empty() => {}
                (None, _) => unknown.push(format!(
                    "{}: keys outside any section, ignored: {}",
                    self.file.display(),
                    properties
                        .iter()
                        .map(|(key, _)| key)
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                (Some(name), None) => unknown.push(format!(
                    "{}: unknown section [{name}], ignored",
                    self.file.display()
                )),
            }
        }
        (unknown, warnings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORIGINAL: &str = include_str!("../delayer.conf");

    fn parse(text: &str) -> Result<Config> {
        Config::parse(text, Path::new("test.conf"))
    }

    fn error_of(text: &str) -> String {
        format!("{:#}", parse(text).expect_err("should be rejected"))
    }

    #[test]
    fn reads_the_original_file_verbatim() {
        let config = parse(ORIGINAL).unwrap();
        assert_eq!(config.pid, Some(PathBuf::from("/var/run/delayer.pid")));
        assert_eq!(config.timer_interval, Duration::from_millis(1000));
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(config.access_log, Some(cwd.join("logs/access.log")));
        assert_eq!(config.error_log, Some(cwd.join("logs/error.log")));
        assert_eq!(config.batch_size, DEFAULT_BATCH_SIZE);
        let redis = &config.redis;
        assert_eq!(redis.host, "127.0.0.1");
        assert_eq!(redis.port, 6379);
        assert_eq!(redis.database, 0);
        assert_eq!(
            redis.password, None,
            "an empty value followed by a comment is empty"
        );
        assert_eq!((redis.max_idle, redis.max_active), (2, 20));
        assert_eq!(redis.idle_timeout, Some(Duration::from_secs(3600)));
        assert_eq!(redis.conn_max_lifetime, Some(Duration::from_secs(3600)));
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    }

    #[test]
    fn the_packaged_config_suits_systemd() {
        let config = parse(include_str!("../dist/delayer.conf")).unwrap();
        assert_eq!(config.pid, None, "systemd tracks the process");
        assert_eq!(
            (config.access_log, config.error_log),
            (None, None),
            "logs go to the journal"
        );
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);
        assert!(config.unknown.is_empty(), "{:?}", config.unknown);
    }

    #[test]
    fn the_compose_config_names_the_redis_service() {
        let config = parse(include_str!("../dist/docker/delayer.conf")).unwrap();
        assert_eq!(config.redis.host, "redis");
        assert_eq!((config.pid, config.access_log), (None, None));
        assert!(config.unknown.is_empty() && config.warnings.is_empty());
    }

    #[test]
    fn the_original_chinese_comments_parse_too() {
        let text = "[delayer]\ntimer_interval = 250           ; 计算间隔时间, 单位毫秒\n\
                    [redis]\npassword =                      ; 密码, 无需密码留空\n";
        let config = parse(text).unwrap();
        assert_eq!(config.timer_interval, Duration::from_millis(250));
        assert_eq!(config.redis.password, None);
    }

    #[test]
    fn missing_keys_take_the_defaults() {
        let config = parse("").unwrap();
        assert_eq!(config.pid, None);
        assert_eq!(config.access_log, None);
        assert_eq!(
            config.timer_interval,
            Duration::from_millis(DEFAULT_TIMER_INTERVAL_MS)
        );
        assert_eq!(config.redis.address(), "127.0.0.1:6379");
        assert_eq!(config.redis.max_active, DEFAULT_MAX_ACTIVE);
    }

    #[test]
    fn values_keep_what_is_not_a_comment() {
        let text = "[redis]\npassword = se;cret#1   ; the comment\nhost = /run/redis.sock\n\
                    [delayer]\naccess_log = C:\\temp\\a.log\n";
        let config = parse(text).unwrap();
        assert_eq!(config.redis.password.as_deref(), Some("se;cret#1"));
        assert!(config.redis.is_unix_socket());
        assert_eq!(config.redis.address(), "/run/redis.sock");
        let log = config.access_log.unwrap();
        assert!(log.ends_with("C:\\temp\\a.log"), "no escapes: {log:?}");
    }

    #[test]
    fn log_rotation() {
        let config = parse("[delayer]\nlog_rotate = Daily ; roll\nlog_max_files = 7\n").unwrap();
        assert_eq!(
            (config.log_rotate, config.log_max_files),
            (LogRotation::Daily, Some(7))
        );
        let config = parse("").unwrap();
        assert_eq!(
            (config.log_rotate, config.log_max_files),
            (LogRotation::Never, None)
        );
    }

    #[test]
    fn printing_masks_the_password_and_reads_back_the_same() {
        let text = "[delayer]\nbatch_size = 7\nlog_rotate = daily\n[redis]\npassword = hunter2\nidle_timeout = 0\n";
        let config = parse(text).unwrap();
        let printed = config.to_string();
        assert!(!printed.contains("hunter2"), "{printed}");
        assert!(printed.contains("password = ********"), "{printed}");
        let again = parse(&printed.replace("********", "hunter2")).unwrap();
        assert_eq!(again.to_string(), printed);
        assert_eq!((again.batch_size, again.redis.idle_timeout), (7, None));
    }

    #[test]
    fn a_repeated_key_takes_the_last_value_with_a_warning() {
        let config = parse("[redis]\nport = 1\nport = 2\n").unwrap();
        assert_eq!(config.redis.port, 2);
        assert!(
            config
                .warnings
                .join("\n")
                .contains("[redis] port is set more than once"),
            "{:?}",
            config.warnings
        );
    }

    #[test]
    fn zero_timeouts_mean_never() {
        let config = parse("[redis]\nidle_timeout = 0\nconn_max_lifetime = 0\n").unwrap();
        assert_eq!(config.redis.idle_timeout, None);
        assert_eq!(config.redis.conn_max_lifetime, None);
    }

    #[test]
    fn bad_numbers_name_file_section_key_and_value() {
        let cases = [
            ("[redis]\nport = 6379x\n", "[redis] port = \"6379x\""),
            ("[redis]\nport = 0\n", "from 1 to 65535"),
            ("[redis]\nport = 70000\n", "[redis] port = \"70000\""),
            ("[redis]\ndatabase = -1\n", "[redis] database = \"-1\""),
            ("[redis]\nmax_active = 0\n", "[redis] max_active = \"0\""),
            ("[redis]\nmax_idle = two\n", "[redis] max_idle = \"two\""),
            (
                "[redis]\nidle_timeout = 1.5\n",
                "[redis] idle_timeout = \"1.5\"",
            ),
            (
                "[redis]\nconn_max_lifetime = -3\n",
                "[redis] conn_max_lifetime",
            ),
            (
                "[delayer]\ntimer_interval = 0  ; ms\n",
                "[delayer] timer_interval = \"0\"",
            ),
            (
                "[delayer]\ntimer_interval = 1s\n",
                "[delayer] timer_interval = \"1s\"",
            ),
            (
                "[delayer]\nbatch_size = 1000000\n",
                "[delayer] batch_size = \"1000000\"",
            ),
            (
                "[delayer]\nmax_body_bytes = 1g\n",
                "[delayer] max_body_bytes = \"1g\"",
            ),
            ("[delayer]\nmax_body_bytes = 0\n", "from 1 to 536870912"),
        ];
        for (text, expected) in cases {
            let message = error_of(text);
            assert!(
                message.starts_with("test.conf: ") || message.contains("/test.conf: "),
                "{message}"
            );
            assert!(message.contains(expected), "{text:?} gave {message}");
        }
    }

    #[test]
    fn unknown_sections_and_keys_are_told_apart() {
        let text = "stray = 1\n[delayer]\ntimer_intervall = 5\n[redsi]\nhost = x\n";
        let config = parse(text).unwrap();
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);
        let warnings = config.unknown.join("\n");
        assert!(
            warnings.contains("unknown key [delayer] timer_intervall"),
            "{warnings}"
        );
        assert!(warnings.contains("unknown section [redsi]"), "{warnings}");
        assert!(
            warnings.contains("keys outside any section, ignored: stray"),
            "{warnings}"
        );
    }

    #[test]
    fn every_bad_value_is_told_at_once() {
        let message = error_of(
            "[delayer]\ntimer_interval = abc\nbatch_size = 0\nlog_level = loud\n[redis]\nport = 99999\n",
        );
        let lines: Vec<&str> = message.lines().collect();
        assert_eq!(lines.len(), 4, "{message}");
        for key in ["timer_interval", "batch_size", "log_level", "port"] {
            assert!(message.contains(&format!("] {key} = ")), "{key}: {message}");
        }
    }

    #[test]
    fn a_broken_file_is_told_in_words_with_its_absolute_path_and_line() {
        let message = error_of("[delayer]\ntimer_interval = 5\n[redis\nhost = x\n");
        let cwd = std::env::current_dir().unwrap();
        let expected = format!(
            "{}:5: a section name is not closed with ']'",
            cwd.join("test.conf").display()
        );
        assert_eq!(message, expected);
    }

    #[test]
    fn the_http_section_is_optional_and_checked() {
        assert!(parse("").unwrap().http.is_none());
        let config =
            parse("[http]\nlisten = 127.0.0.1:9277   ; go-delay-queue's port\ntoken = s3cret\n")
                .unwrap();
        let http = config.http.unwrap();
        assert_eq!(http.listen.to_string(), "127.0.0.1:9277");
        assert_eq!(http.token.as_deref(), Some("s3cret"));
        assert!(error_of("[http]\nlisten = somewhere\n").contains("[http] listen = \"somewhere\""));
        assert!(error_of("[http]\ntoken = s3cret\n").contains("[http] listen = \"\": expected"));
        assert!(
            error_of("[http]\nlisten = 127.0.0.1:0\ntoken =   ; none yet\n")
                .contains("[http] token = \"\": empty")
        );
    }

    #[test]
    fn tls_keys_go_together() {
        let config = parse(
            "[redis]\nusername = delayer\npassword = s3cret\ntls = true\ntls_insecure = yes\n",
        )
        .unwrap();
        assert_eq!(config.redis.username.as_deref(), Some("delayer"));
        let tls = config.redis.tls.unwrap();
        assert!(tls.insecure && tls.ca_file.is_none() && tls.client.is_none());
        assert!(
            config
                .warnings
                .iter()
                .any(|warning| warning.contains("tls_insecure = true"))
        );
        assert!(
            error_of("[redis]\nhost = /run/redis.sock\ntls = true\n")
                .contains("a unix socket speaks no TLS")
        );
        assert!(error_of("[redis]\ntls = maybe\n").contains("[redis] tls = \"maybe\""));
        assert!(parse("[redis]\ntls = false\n").unwrap().redis.tls.is_none());
        assert!(error_of("[redis]\nusername = delayer\n").contains("without a password"));
    }

    #[test]
    fn sentinels_with_their_master_name_and_ipv6_in_brackets() {
        let config =
            parse("[redis]\nsentinels = 10.0.0.5:26379, [::1]:26380\nsentinel_master = mymaster\n")
                .unwrap();
        let sentinel = config.redis.sentinel.unwrap();
        assert_eq!(
            sentinel.addresses,
            [("10.0.0.5".to_string(), 26379), ("::1".to_string(), 26380)]
        );
        assert_eq!(
            address_list(&sentinel.addresses),
            "10.0.0.5:26379,[::1]:26380"
        );
        assert!(
            error_of("[redis]\nsentinels = ::1:26379\nsentinel_master = m\n")
                .contains("is not host:port")
        );
        assert!(error_of("[redis]\nsentinels = h:26379\n").contains("sentinel_master"));
        assert!(
            error_of("[redis]\nsentinels = h:26379\nsentinel_master = m\nhost = x\n")
                .contains("set with sentinels")
        );
        assert_eq!(sentinel.password, None);
        let text =
            "[redis]\nsentinels = h:26379\nsentinel_master = m\nsentinel_password = s;3 ; hers\n";
        let config = parse(text).unwrap();
        let sentinel = config.redis.sentinel.as_ref().unwrap();
        assert_eq!(sentinel.password.as_deref(), Some("s;3"));
        let printed = config.to_string();
        assert!(
            printed.contains("sentinel_password = ********") && !printed.contains("s;3"),
            "{printed}"
        );
        assert!(
            error_of("[redis]\nsentinel_password = x\n")
                .contains("sentinel_password = \"********\": given without sentinels")
        );
        let text = "[redis]\nsentinels = h:26379\nsentinel_master = m\nsentinel_username = watcher\n\
                    sentinel_password = pw\n";
        let config = parse(text).unwrap();
        let sentinel = config.redis.sentinel.as_ref().unwrap();
        assert_eq!(sentinel.username.as_deref(), Some("watcher"));
        assert!(config.to_string().contains("sentinel_username = watcher\n"));
        assert!(
            error_of("[redis]\nsentinels = h:26379\nsentinel_master = m\nsentinel_username = w\n")
                .contains("given without sentinel_password")
        );
    }

    #[test]
    fn cluster_and_key_layouts() {
        let config = parse("[redis]\ncluster = 10.0.0.5:6379,[::1]:7000\n").unwrap();
        assert_eq!(
            (
                config.redis.layout,
                address_list(config.redis.cluster.as_ref().unwrap())
            ),
            (Layout::Cluster, "10.0.0.5:6379,[::1]:7000".to_string())
        );
        assert_eq!(parse("").unwrap().redis.layout, Layout::Legacy);
        assert_eq!(
            parse("[redis]\nkey_layout = jop\n").unwrap().redis.layout,
            Layout::Jop
        );
        assert!(error_of("[redis]\nkey_layout = jsp\n").contains("expected one of legacy, jop"));
        let mixed =
            error_of("[redis]\ncluster = h:6379\nhost = x\ndatabase = 2\nkey_layout = jop\n");
        for said in [
            "host = \"x\": set with cluster",
            "database = \"2\": set with cluster",
            "key_layout = \"jop\": set with cluster",
        ] {
            assert!(mixed.contains(said), "{said}: {mixed}");
        }
        assert!(error_of("[redis]\ncluster = h\n").contains("is not host:port"));
    }

    #[test]
    fn log_level_and_format() {
        let config = parse("[delayer]\nlog_level = warn\nlog_format = JSON\n").unwrap();
        assert_eq!(
            (config.log_level, config.log_format),
            (LogLevel::Warn, LogFormat::Json)
        );
        let config = parse("").unwrap();
        assert_eq!(
            (config.log_level, config.log_format),
            (LogLevel::Info, LogFormat::Text)
        );
    }

    #[test]
    fn a_missing_file_is_named() {
        let message = format!(
            "{:#}",
            Config::load(Path::new("/nonexistent/d.conf")).unwrap_err()
        );
        assert!(message.contains("/nonexistent/d.conf"), "{message}");
    }
}
