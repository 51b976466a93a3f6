//! Debian's headless Chromium driven as a person drives it, through its DevTools protocol: open a
//! page, click a button with the mouse at its centre, type into a field, and wait for what the
//! page shows. Nothing is done in the page's own JavaScript (no `element.click()`, no
//! `form.submit()`): what the browser sends is what a person's click makes it send.

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tungstenite::{Message, WebSocket};

/// The flags every headless Chromium of the tests runs with (a profile of its own aside). As root
/// (CI), Chromium runs only without its sandbox; it opens test pages alone.
pub const CHROMIUM_FLAGS: [&str; 6] = [
    "--headless",
    "--disable-gpu",
    "--hide-scrollbars",
    "--no-first-run",
    "--no-sandbox",
    "--window-size=1100,760",
];

/// How long a page, a click's effect or an answer from Chromium may take.
const PATIENCE: Duration = Duration::from_secs(20);
/// Marks a document the test has acted on: the next one, after a navigation, lacks it.
const OLD: &str = "window.__delayerOld";

/// A headless Chromium with one tab; closed (and killed if need be) on drop.
pub struct Browser {
    process: Child,
    socket: WebSocket<TcpStream>,
    /// The tab's session on the browser's socket.
    session: String,
    next_id: u64,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts Chromium with a fresh profile in `dir`, on a DevTools port of its own choosing.
    pub fn start(dir: &Path) -> Browser {
        let profile = tempfile::Builder::new()
            .prefix("chromium-")
            .tempdir_in(dir)
            .unwrap();
        let process = Command::new("chromium")
            .args(CHROMIUM_FLAGS)
            .args([
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run chromium (scripts/test installs Debian's chromium)");
        // Chromium writes the port it took, then the browser's socket path, once it listens.
        let active = profile.path().join("DevToolsActivePort");
        let mut written = String::new();
        super::wait_until_sync(PATIENCE, "Chromium's DevToolsActivePort", || {
            written = super::read(&active);
            written.lines().count() >= 2
        });
        let mut lines = written.lines();
        let (port, path) = (lines.next().unwrap(), lines.next().unwrap());
        let stream = TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())).unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        let url = format!("ws://127.0.0.1:{port}{path}");
        let (socket, _) = tungstenite::client(url, stream).expect("Chromium's DevTools socket");
        let mut browser = Browser {
            process,
            socket,
            session: String::new(),
            next_id: 0,
            _profile: profile,
        };
        let tab = browser.call("Target.createTarget", json!({"url": "about:blank"}));
        let attach = json!({"targetId": tab["targetId"], "flatten": true});
        let attached = browser.call("Target.attachToTarget", attach);
        browser.session = attached["sessionId"].as_str().unwrap().to_string();
        browser
    }

    /// Sends `method` with `params` (to the tab once attached), and returns its result; panics
    /// with Chromium's error.
    fn call(&mut self, method: &str, params: Value) -> Value {
        match self.try_call(method, params.clone()) {
            Ok(result) => result,
            Err(error) => panic!("{method} {params}: {error}"),
        }
    }

    fn try_call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut call = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            call["sessionId"] = self.session.clone().into();
        }
        self.socket
            .send(Message::text(call.to_string()))
            .expect("send to Chromium");
        // Events come in between; the answer carries the call's id.
        loop {
            let message = self
                .socket
                .read()
                .unwrap_or_else(|error| panic!("no answer from Chromium to {call}: {error}"));
            let Message::Text(text) = message else {
                continue;
            };
            let mut answer: Value = serde_json::from_str(&text).unwrap();
            if answer["id"] == id {
                return match answer.get_mut("error") {
                    Some(error) => Err(error.take()),
                    None => Ok(answer["result"].take()),
                };
            }
        }
    }

    /// The value of JavaScript expression `expression` in the page; an error while the page is
    /// being replaced (no document to ask yet) or when it throws.
    fn evaluate(&mut self, expression: &str) -> Result<Value, Value> {
        let params = json!({"expression": expression, "returnByValue": true});
        let mut result = self.try_call("Runtime.evaluate", params)?;
        match result.get_mut("exceptionDetails") {
            Some(thrown) => Err(thrown.take()),
            None => Ok(result["result"]["value"].take()),
        }
    }

    /// As [`Browser::evaluate`], which must succeed.
    fn value(&mut self, expression: &str) -> Value {
        self.evaluate(expression)
            .unwrap_or_else(|error| panic!("{expression}: {error}"))
    }

    /// Opens `url` as if typed in the address bar, and waits until it has loaded.
    pub fn open(&mut self, url: &str) {
        self.mark();
        let opened = self.call("Page.navigate", json!({"url": url}));
        assert!(opened.get("errorText").is_none(), "{url}: {opened}");
        self.wait_for_page("", url);
    }

    /// Marks the document shown, so that a wait for the next one does not take it for that.
    fn mark(&mut self) {
        self.value(&format!("{OLD} = true"));
    }

    /// Waits until a new document (not the one last acted on) has loaded, at an address ending
    /// in `end`; names `after` (what was done) and shows the page if none comes.
    pub fn wait_for_page(&mut self, after: &str, end: &str) {
        let check = format!(
            "!{OLD} && document.readyState === 'complete' && location.href.endsWith({})",
            json!(end)
        );
        let deadline = Instant::now() + PATIENCE;
        while self.evaluate(&check) != Ok(Value::Bool(true)) {
            if Instant::now() > deadline {
                panic!(
                    "no page at an address ending in {end:?} came {after} within {PATIENCE:?}: at {} \
                     it says:\n{}",
                    self.location(),
                    self.text()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until JavaScript expression `condition` is true in the page (which may reload
    /// meanwhile); names `what` if it never is.
    pub fn wait_until(&mut self, what: &str, condition: &str) {
        let deadline = Instant::now() + PATIENCE;
        while self.evaluate(condition) != Ok(Value::Bool(true)) {
            assert!(
                Instant::now() < deadline,
                "timed out after {PATIENCE:?} waiting until {what}: at {} the page says:\n{}",
                self.location(),
                self.text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The page's address.
    pub fn location(&mut self) -> String {
        let value = self.evaluate("location.href");
        value
            .ok()
            .and_then(|href| href.as_str().map(String::from))
            .unwrap_or_default()
    }

    /// The text the page shows.
    pub fn text(&mut self) -> String {
        let value = self.evaluate("document.body ? document.body.innerText : ''");
        value
            .ok()
            .and_then(|text| text.as_str().map(String::from))
            .unwrap_or_default()
    }

    /// Whether the page has a button whose text is `label` in an element matching `within`.
    pub fn has_button(&mut self, within: &str, label: &str) -> bool {
        self.value(&format!("!!{}", find_button(within, label))) == Value::Bool(true)
    }

    /// Clicks the button whose text is `label` in the first element matching CSS selector
    /// `within` that has one (`body` for anywhere), then waits until the page it leads to, at an
    /// address ending in `to`, has loaded.
    pub fn click(&mut self, within: &str, label: &str, to: &str) {
        self.mark();
        self.press(
            &find_button(within, label),
            &format!("{label:?} in {within}"),
        );
        self.wait_for_page(&format!("after a click on {label:?}"), to);
    }

    /// Clicks the field matching CSS selector `field`, as a person does to type into it, and
    /// types `text` there.
    pub fn type_into(&mut self, field: &str, text: &str) {
        let element = format!("document.querySelector({})", json!(field));
        self.press(&element, field);
        let focused = format!("document.activeElement === {element}");
        assert_eq!(self.value(&focused), Value::Bool(true), "{field} focused");
        self.call("Input.insertText", json!({"text": text}));
    }

    /// A left click at the centre of the element that JavaScript expression `element` finds,
    /// scrolled into view, once the element is what is there to be clicked (nothing covers it).
    fn press(&mut self, element: &str, name: &str) {
        let centre = format!(
            "(() => {{
                const element = {element};
                if (!element) return null;
                element.scrollIntoView({{block: 'center'}});
                const box = element.getBoundingClientRect();
                const [x, y] = [box.left + box.width / 2, box.top + box.height / 2];
                const there = document.elementFromPoint(x, y);
                return there && element.contains(there) ? [x, y] : 'covered by ' + (there && there.outerHTML);
            }})()"
        );
        let at = self.value(&centre);
        let (Some(x), Some(y)) = (at[0].as_f64(), at[1].as_f64()) else {
            panic!(
                "cannot click {name}: {at} (at {}:\n{})",
                self.location(),
                self.text()
            );
        };
        let moved = json!({"type": "mouseMoved", "x": x, "y": y});
        self.call("Input.dispatchMouseEvent", moved);
        for kind in ["mousePressed", "mouseReleased"] {
            let event = json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1});
            self.call("Input.dispatchMouseEvent", event);
        }
    }
}

/// JavaScript that finds the button whose text is `label` in the first element matching
/// `within` that has one (`null` if none).
fn find_button(within: &str, label: &str) -> String {
    format!(
        "[...document.querySelectorAll({})].flatMap(e => [...e.querySelectorAll('button')])\
         .find(b => b.textContent.trim() === {}) || null",
        json!(within),
        json!(label)
    )
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Closed as a person closes it (its profile written out), not waited for: a browser that
        // does not answer is killed below.
        let close = json!({"id": 0, "method": "Browser.close"});
        let _ = self.socket.send(Message::text(close.to_string()));
        let deadline = Instant::now() + Duration::from_secs(5);
        while matches!(self.process.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.process.kill().ok();
        self.process.wait().ok();
    }
}
