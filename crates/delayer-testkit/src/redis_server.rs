//! A throwaway redis-server on a unix socket in a temporary directory, killed on drop; with TLS
//! on a free TCP port besides, when asked.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, Value};
use tempfile::TempDir;

use crate::server_programs;
use crate::tls::Certificates;
use crate::wait_until_sync;

/// A redis-server of our own on a unix socket in a temporary directory, killed on drop.
pub struct RedisServer {
    dir: TempDir,
    extra_args: Vec<String>,
    process: Option<Child>,
    tls: Option<(u16, Certificates)>,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// Starts one that also listens on a free TCP port of 127.0.0.1, and returns that port. The
    /// port is checked to be this server's (a port found free may be taken by another test's
    /// server before this one binds it): if not, another is tried.
    pub fn start_tcp(extra_args: &[&str]) -> (RedisServer, u16) {
        for _ in 0..10 {
            let port = free_port();
            let port_text = port.to_string();
            let mut args = vec!["--port", port_text.as_str(), "--bind", "127.0.0.1"];
            args.extend(extra_args);
            let server = RedisServer::start_with(&args);
            let socket = format!("redis+unix://{}", server.socket().display());
            let run_id = |url: &str| {
                command_at(url, &["INFO", "server"])
                    .lines()
                    .find_map(|line| line.strip_prefix("run_id:").map(str::to_string))
            };
            let own = run_id(&socket);
            if own.is_some() && own == run_id(&format!("redis://127.0.0.1:{port}")) {
                return (server, port);
            }
        }
        panic!("no free TCP port for redis-server after 10 tries")
    }

    /// Starts one with extra `redis-server` arguments, e.g. `["--requirepass", "x"]`.
    pub fn start_with(extra_args: &[&str]) -> RedisServer {
        let mut server = RedisServer {
            dir: tempfile::tempdir().expect("temporary directory"),
            extra_args: extra_args.iter().map(|arg| arg.to_string()).collect(),
            process: None,
            tls: None,
        };
        server.launch();
        server
    }

    /// Starts one that also speaks TLS on a free port of 127.0.0.1, with certificates made for
    /// it (see [`Certificates`]); `mutual`: it wants a client certificate too. The unix socket
    /// stays plain, for the test's own connections.
    pub fn start_tls(mutual: bool) -> RedisServer {
        let dir = tempfile::tempdir().expect("temporary directory");
        let certificates = Certificates::make(&dir.path().join("tls"));
        let port = free_port();
        let file = |name: &str| certificates.file(name).display().to_string();
        let extra_args = vec![
            "--tls-port".to_string(),
            port.to_string(),
            "--bind".to_string(),
            "127.0.0.1".to_string(),
            "--tls-cert-file".to_string(),
            file("server.crt"),
            "--tls-key-file".to_string(),
            file("server.key"),
            "--tls-ca-cert-file".to_string(),
            file("ca.crt"),
            "--tls-auth-clients".to_string(),
            if mutual { "yes" } else { "no" }.to_string(),
        ];
        let mut server = RedisServer {
            dir,
            extra_args,
            process: None,
            tls: Some((port, certificates)),
        };
        server.launch();
        server
    }

    /// The TLS port and certificates of a server from [`start_tls`](RedisServer::start_tls).
    pub fn tls(&self) -> (u16, &Certificates) {
        let (port, certificates) = self.tls.as_ref().expect("started with start_tls");
        (*port, certificates)
    }

    /// The redis-server's process id.
    pub fn pid(&self) -> u32 {
        self.process.as_ref().expect("server is running").id()
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("redis.sock")
    }

    /// A directory for the test's own files (configs, logs), removed with the server.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn launch(&mut self) {
        let socket = self.socket();
        let process = server_programs::server()
            .args(["--port", "0", "--unixsocket"])
            .arg(&socket)
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(self.dir.path())
            .args(&self.extra_args)
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot start {} ({error}): install it (e.g. `apt-get install \
                     redis-server`) or run the tests with scripts/test, which does",
                    server_programs::server_name()
                )
            });
        self.process = Some(process);
        wait_until_sync(Duration::from_secs(10), "redis-server answers PING", || {
            ping(&socket)
        });
    }

    /// Stops the server, saving its data to disk first when `save` is set.
    pub fn stop(&mut self, save: bool) {
        let mut process = self.process.take().expect("server is running");
        if save {
            let mut stream = UnixStream::connect(self.socket()).expect("connect to save");
            stream.write_all(b"SHUTDOWN SAVE\r\n").unwrap();
            process.wait().unwrap();
        } else {
            process.kill().ok();
            process.wait().ok();
        }
        std::fs::remove_file(self.socket()).ok();
    }

    /// Starts the server again on the same socket, loading what `stop(true)` saved.
    pub fn restart(&mut self) {
        self.launch();
    }

    /// A connection that waits as long as a blocking command needs.
    pub async fn connect(&self) -> MultiplexedConnection {
        self.open(self.info()).await
    }

    /// Like [`connect`](RedisServer::connect), as an ACL user.
    pub async fn connect_as(&self, user: &str, password: &str) -> MultiplexedConnection {
        let info = self.info();
        let settings = info
            .redis_settings()
            .clone()
            .set_username(user)
            .set_password(password);
        self.open(info.set_redis_settings(settings)).await
    }

    /// Where this server is, for a client of the library under test.
    pub fn info(&self) -> ConnectionInfo {
        ConnectionAddr::Unix(self.socket())
            .into_connection_info()
            .unwrap()
    }

    async fn open(&self, info: ConnectionInfo) -> MultiplexedConnection {
        redis::Client::open(info)
            .unwrap()
            .get_multiplexed_async_connection_with_config(
                &AsyncConnectionConfig::new().set_response_timeout(None),
            )
            .await
            .expect("connect to test redis")
    }

    /// The text of a `delayer.conf` for this server; `extra` lines are added to `[delayer]`.
    pub fn config_text(&self, extra: &str) -> String {
        format!(
            "[delayer]\n{extra}\n[redis]\nhost = {}\n",
            self.socket().display()
        )
    }

    /// Writes `text` to a file in the test directory and returns its path.
    pub fn write_file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill().ok();
            process.wait().ok();
        }
    }
}

fn ping(socket: &Path) -> bool {
    let Ok(mut stream) = UnixStream::connect(socket) else {
        return false;
    };
    let mut reply = String::new();
    stream.write_all(b"PING\r\n").is_ok()
        && BufReader::new(stream).read_line(&mut reply).is_ok()
        && (reply.starts_with("+PONG") || reply.starts_with("-NOAUTH"))
}

/// A TCP port of 127.0.0.1 that nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// Sends one command to 127.0.0.1:`port` and returns every string in the reply, space-separated
/// ("" when nothing answers): enough to look for a word in INFO, CLUSTER INFO, ROLE or a
/// SENTINEL reply.
pub(crate) fn command(port: u16, args: &[&str]) -> String {
    command_at(&format!("redis://127.0.0.1:{port}"), args)
}

/// [`command`] to the server at `url`.
pub(crate) fn command_at(url: &str, args: &[&str]) -> String {
    let Ok(client) = redis::Client::open(url) else {
        return String::new();
    };
    let Ok(mut connection) = client.get_connection_with_timeout(Duration::from_millis(500)) else {
        return String::new();
    };
    match redis::cmd(args[0])
        .arg(&args[1..])
        .query::<Value>(&mut connection)
    {
        Ok(value) => words(&value),
        Err(error) => format!("ERR {error}"),
    }
}

fn words(value: &Value) -> String {
    match value {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(text) => text.clone(),
        Value::Okay => "OK".to_string(),
        Value::Int(number) => number.to_string(),
        Value::Array(values) | Value::Set(values) => {
            values.iter().map(words).collect::<Vec<_>>().join(" ")
        }
        Value::Map(pairs) => pairs
            .iter()
            .map(|(key, value)| format!("{} {}", words(key), words(value)))
            .collect::<Vec<_>>()
            .join(" "),
        other => format!("{other:?}"),
    }
}
