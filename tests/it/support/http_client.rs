//! A daemon serving HTTP, and a minimal HTTP/1.1 client for the tests: one request a connection,
//! the status and the body back.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::{Daemon, DaemonSetup, Logs, RedisServer, read};

/// A daemon serving HTTP on a free port (`listen = 127.0.0.1:0`; the port is read from its log),
/// with `http` lines in `[http]`; its address (host:port) comes back.
pub fn serving(server: &RedisServer, name: &str, http: &str) -> (Daemon, Logs, String) {
    serving_with(server, name, "", http)
}

/// As [`serving`], with `delayer` lines in `[delayer]` too.
pub fn serving_with(
    server: &RedisServer,
    name: &str,
    delayer: &str,
    http: &str,
) -> (Daemon, Logs, String) {
    let (config, logs) = http_config(server, name, delayer, http);
    let daemon = Daemon::start(&config);
    let address = http_address(&logs);
    (daemon, logs, address)
}

/// As [`serving`], under the open-file limit that `ulimit` sets with `flags` (see
/// [`Daemon::start_with_ulimit`]).
pub fn serving_with_ulimit(
    server: &RedisServer,
    name: &str,
    flags: &str,
) -> (Daemon, Logs, String) {
    let (config, logs) = http_config(server, name, "", "");
    let daemon = Daemon::start_with_ulimit(&config, flags);
    let address = http_address(&logs);
    (daemon, logs, address)
}

/// The configuration of a daemon serving HTTP on a free port, with `delayer` lines in
/// `[delayer]` and `http` lines in `[http]`.
pub fn http_config(
    server: &RedisServer,
    name: &str,
    delayer: &str,
    http: &str,
) -> (std::path::PathBuf, Logs) {
    let (config, logs) = server.daemon_config(name, &format!("timer_interval = 100\n{delayer}"));
    let text = format!("{}\n[http]\nlisten = 127.0.0.1:0\n{http}\n", read(&config));
    std::fs::write(&config, text).unwrap();
    (config, logs)
}

/// Waits until a daemon logging to `logs` serves HTTP, and returns its address (host:port).
pub fn http_address(logs: &Logs) -> String {
    logs.wait_for_line("Serving HTTP on http://");
    // "Serving HTTP on http://127.0.0.1:40123: the job API, ..."
    read(&logs.access)
        .split("Serving HTTP on http://")
        .nth(1)
        .and_then(|rest| rest.split(": ").next())
        .expect("the address in the log")
        .to_string()
}

/// An answer: the status code, the headers (lower-cased names), the body.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|error| panic!("{error}: {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Sends `method path` with `headers` and `body` to `address` (host:port), naming `address` as
/// the `Host` unless `headers` name another.
pub fn request(
    address: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Answer {
    let mut stream = TcpStream::connect(address).expect("connect to the daemon's HTTP server");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        head.push_str(&format!("Host: {address}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).unwrap();
    let reply = String::from_utf8_lossy(&reply).into_owned();
    let (head, body) = reply.split_once("\r\n\r\n").expect("a whole HTTP answer");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|line| line.split_once(": "))
        .map(|(name, value)| (name.to_ascii_lowercase(), value.to_string()))
        .collect();
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        unchunk(body)
    } else {
        body.to_string()
    };
    Answer {
        status,
        headers,
        body,
    }
}

/// A POST of JSON to the job API.
pub fn post(address: &str, path: &str, json: &serde_json::Value) -> Answer {
    request(address, "POST", path, &[], json.to_string().as_bytes())
}

/// Prometheus's text format: `name{labels} value` lines, `#` comments, `# EOF` last in OpenMetrics.
pub fn samples(text: &str) -> HashMap<String, f64> {
    assert!(
        !text.contains("# EOF") || text.trim_end().ends_with("# EOF"),
        "{text}"
    );
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| {
            let (name, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
            (
                name.to_string(),
                value.parse().unwrap_or_else(|_| panic!("{line}")),
            )
        })
        .collect()
}

/// Has `promtool check metrics` (Debian's prometheus) read `text`, Prometheus's text format
/// 0.0.4, and fails the test unless it found it clean.
pub fn promtool_check(text: &str) {
    let mut promtool = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus; scripts/test installs it)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let checked = promtool.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&checked.stdout).into_owned()
        + &String::from_utf8_lossy(&checked.stderr);
    assert!(
        checked.status.success() && said.trim().is_empty(),
        "{said}\n{text}"
    );
}

fn unchunk(mut body: &str) -> String {
    let mut whole = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        whole.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
    whole
}
