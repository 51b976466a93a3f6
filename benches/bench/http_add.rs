//! Jobs added over HTTP (go-delay-queue's `add`, keep-alive connections) against the client
//! library's own push, in the same run.

use std::time::{Duration, Instant};

use delayer_client::redis::AsyncCommands;
use delayer_wire::keys::JOB_POOL;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use super::consumers::{IN_FLIGHT, PUSHES, Pusher, push_run};
use super::support::RedisServer;
use super::support::http_client::serving;
use super::{RUNS, fresh, percentiles, stop};

pub async fn http_add(server: &RedisServer) {
    println!(
        "\n## HTTP add ({PUSHES} jobs over {IN_FLIGHT} keep-alive connections, against the client's push with {IN_FLIGHT} in flight; best of {RUNS})\n"
    );
    println!(
        "| client push jobs/s | HTTP add jobs/s | HTTP / client | HTTP p50 ms | p99 ms | max ms |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    let (mut daemon, _logs, address) = serving(server, "http-add", "");
    let mut client = f64::MAX;
    let mut http = (f64::MAX, Vec::new());
    for _ in 0..RUNS {
        client = client.min(push_run(server, Pusher::Client).await.seconds);
        let run = http_run(server, &address).await;
        if run.0 < http.0 {
            http = run;
        }
    }
    stop(&mut daemon);
    let (client, (seconds, latencies)) = (PUSHES as f64 / client, http);
    let rate = PUSHES as f64 / seconds;
    let (p50, p99, max) = percentiles(latencies);
    println!(
        "| {client:.0} | {rate:.0} | {:.2} | {p50:.2} | {p99:.2} | {max:.2} |",
        rate / client
    );
}

/// Seconds to add [`PUSHES`] jobs (delay 1 h) over HTTP, and each request's milliseconds.
async fn http_run(server: &RedisServer, address: &str) -> (f64, Vec<f64>) {
    let mut redis = fresh(server).await;
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for task in 0..IN_FLIGHT {
        let address = address.to_string();
        tasks.spawn(async move {
            let mut connection = KeepAlive::connect(&address).await;
            let mut latencies = Vec::new();
            for index in (task..PUSHES).step_by(IN_FLIGHT) {
                let body =
                    format!(r#"{{"id":"{index:08}","topic":"t","delay":3600,"body":"body"}}"#);
                let sent = Instant::now();
                let answer = connection.post("/delay-queue/api/jobs/add", &body).await;
                latencies.push(sent.elapsed().as_secs_f64() * 1000.0);
                assert!(answer.contains(r#""code":0"#), "{answer}");
            }
            latencies
        });
    }
    let latencies = tasks.join_all().await.concat();
    let seconds = started.elapsed().as_secs_f64();
    let added: usize = redis.zcard(JOB_POOL).await.unwrap();
    assert_eq!(added, PUSHES, "every add landed");
    (seconds, latencies)
}

/// One HTTP/1.1 connection kept open for request after request.
struct KeepAlive {
    stream: BufReader<TcpStream>,
    host: String,
}

impl KeepAlive {
    async fn connect(address: &str) -> KeepAlive {
        let stream = TcpStream::connect(address).await.unwrap();
        stream.set_nodelay(true).unwrap();
        KeepAlive {
            stream: BufReader::new(stream),
            host: address.to_string(),
        }
    }

    /// POSTs JSON and returns the answer's body (the server always gives a Content-Length).
    async fn post(&mut self, path: &str, json: &str) -> String {
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
            self.host,
            json.len()
        );
        self.stream
            .get_mut()
            .write_all(request.as_bytes())
            .await
            .unwrap();
        let mut length = None;
        let mut line = String::new();
        loop {
            line.clear();
            let read =
                tokio::time::timeout(Duration::from_secs(30), self.stream.read_line(&mut line))
                    .await
                    .expect("an answer within 30 s")
                    .unwrap();
            assert!(read > 0, "the server closed a keep-alive connection");
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse::<usize>().ok();
            }
        }
        let mut body = vec![0; length.expect("a Content-Length")];
        self.stream.read_exact(&mut body).await.unwrap();
        String::from_utf8(body).unwrap()
    }
}
