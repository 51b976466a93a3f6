//! A webhook receiver for the tests: an HTTP server on a free loopback port that records every
//! request (with when it came, by this host's clock, which is Redis's here) and answers as the
//! test says, counting the requests in flight at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use futures_util::stream;
use tokio::sync::Notify;

/// A request as it came.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    /// The path and the query.
    pub path: String,
    /// By lower-case name.
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
    /// When it came, unix ms.
    pub at_ms: i64,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", String::as_str)
    }
}

/// How to answer a request.
pub enum Reply {
    /// This status, headers and body.
    Status(u16, Vec<(&'static str, String)>, String),
    /// 200 after this long.
    After(Duration),
    /// No answer until the test releases it ([`Receiver::release`]), then 200.
    Hang,
    /// This status, and a body that never ends.
    Endless(u16),
}

impl Reply {
    pub fn ok() -> Reply {
        Reply::Status(200, Vec::new(), "ok".into())
    }
}

/// How the receiver answers: from the request and how many came before it to its path.
pub type Answer = dyn Fn(&Received, usize) -> Reply + Send + Sync;

struct Shared {
    answer: Box<Answer>,
    received: Mutex<Vec<Received>>,
    /// By path: the requests so far, in flight now, and the most in flight at once.
    paths: Mutex<HashMap<String, [usize; 3]>>,
    released: Notify,
    /// Bytes of endless bodies sent.
    streamed: Arc<AtomicU64>,
}

/// The receiver, serving until dropped.
pub struct Receiver {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    /// Serves on a free port, answering as `answer` says.
    pub async fn start(
        answer: impl Fn(&Received, usize) -> Reply + Send + Sync + 'static,
    ) -> Receiver {
        Receiver::start_on(0, answer).await
    }

    /// Serves on loopback port `port` (0: a free one), answering as `answer` says.
    pub async fn start_on(
        port: u16,
        answer: impl Fn(&Received, usize) -> Reply + Send + Sync + 'static,
    ) -> Receiver {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let shared = Arc::new(Shared {
            answer: Box::new(answer),
            received: Mutex::default(),
            paths: Mutex::default(),
            released: Notify::new(),
            streamed: Arc::default(),
        });
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Receiver { url, shared, task }
    }

    /// Every request so far, in the order they came.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }

    /// When each request to `path` came, unix ms, earliest first.
    pub fn arrivals(&self, path: &str) -> Vec<i64> {
        let received = self.shared.received.lock().unwrap();
        let mut at: Vec<i64> = received
            .iter()
            .filter(|request| request.path == path)
            .map(|request| request.at_ms)
            .collect();
        at.sort_unstable();
        at
    }

    /// The most requests to `path` that were in flight at once.
    pub fn most_in_flight(&self, path: &str) -> usize {
        let paths = self.shared.paths.lock().unwrap();
        paths.get(path).map_or(0, |[_, _, most]| *most)
    }

    /// Bytes sent of endless bodies.
    pub fn streamed(&self) -> u64 {
        self.shared.streamed.load(Ordering::SeqCst)
    }

    /// Answers every request that hangs, and those that come later to hang, at once.
    pub fn release(&self) {
        self.shared.released.notify_waiters();
    }

    /// Waits until `count` requests came (within `timeout`), and returns them all.
    pub async fn wait_for(&self, count: usize, timeout: Duration) -> Vec<Received> {
        super::wait_for(
            timeout,
            &format!("{count} requests at the receiver"),
            || async {
                let received = self.received();
                (received.len() >= count).then_some(received)
            },
        )
        .await
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.release();
        self.task.abort();
    }
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let received = Received {
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map_or_else(String::new, ToString::to_string),
        headers: parts
            .headers
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_string(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: body.to_vec(),
        at_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64,
    };
    let before = {
        let mut paths = shared.paths.lock().unwrap();
        let [so_far, now, most] = paths.entry(received.path.clone()).or_default();
        let before = *so_far;
        *so_far += 1;
        *now += 1;
        *most = (*most).max(*now);
        before
    };
    let reply = (shared.answer)(&received, before);
    let path = received.path.clone();
    shared.received.lock().unwrap().push(received);
    let response = match reply {
        Reply::Status(status, headers, body) => {
            let mut response = Response::builder().status(status);
            for (name, value) in headers {
                response = response.header(name, value);
            }
            response.body(Body::from(body)).unwrap()
        }
        Reply::After(wait) => {
            tokio::time::sleep(wait).await;
            Response::new(Body::from("ok"))
        }
        Reply::Hang => {
            shared.released.notified().await;
            Response::new(Body::from("released"))
        }
        Reply::Endless(status) => {
            let streamed = shared.streamed.clone();
            let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
            let endless = stream::repeat_with(move || {
                streamed.fetch_add(chunk.len() as u64, Ordering::SeqCst);
                Ok::<_, std::io::Error>(chunk.clone())
            });
            Response::builder()
                .status(StatusCode::from_u16(status).unwrap())
                .body(Body::from_stream(endless))
                .unwrap()
        }
    };
    shared
        .paths
        .lock()
        .unwrap()
        .get_mut(&path)
        .expect("counted")[1] -= 1;
    response
}

/// Checks each request's `Upstash-Signature` with QStash's own Python SDK (`qstash.Receiver`,
/// with `current` and `next`), against the URL `url_of` gives for it: the requests whose
/// signature it refused, with its reason.
pub fn refused_signatures(
    requests: &[Received],
    current: &str,
    next: &str,
    url_of: impl Fn(&Received) -> String,
) -> Vec<String> {
    let lines: String = requests
        .iter()
        .map(|request| {
            let line = serde_json::json!({
                "signature": request.header("upstash-signature"),
                "body": String::from_utf8_lossy(&request.body),
                "url": url_of(request),
            });
            format!("{line}\n")
        })
        .collect();
    super::run_script("qstash_verify.py", &[current, next], lines.as_bytes())
        .lines()
        .filter(|line| *line != "ok")
        .map(str::to_string)
        .collect()
}
