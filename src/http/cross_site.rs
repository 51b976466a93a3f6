//! What a page of another site could make a visitor's browser send, refused: a request naming a
//! `Host` the daemon does not answer for (DNS rebinding: a name of the attacker's that resolves
//! to this server), and a request the browser says comes from another site (`Sec-Fetch-Site`,
//! else `Origin`) that would act or load a page with form tokens. Clients that are not browsers
//! (curl, Prometheus, the job API's clients) send neither header, and their bodies are read as
//! JSON whatever their `Content-Type`, as go-delay-queue's server reads them.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{HOST, ORIGIN};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use super::reply::refuse;

/// A host name the server answers for (`[http] hosts`), on any port or on one.
#[derive(Debug, Clone, PartialEq)]
pub struct HostName {
    name: String,
    port: Option<u16>,
}

impl HostName {
    /// `name` or `name:port`; what is wrong otherwise.
    pub fn parse(entry: &str) -> Result<HostName, String> {
        let (name, port) = split_port(entry);
        let port = port.map(str::parse::<u16>).transpose();
        let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
        match port {
            Ok(port) if !name.is_empty() && name.chars().all(plain) => Ok(HostName {
                name: name.to_ascii_lowercase(),
                port,
            }),
            _ => Err(format!(
                "{entry:?} is not a host name or name:port (like delayer.internal, or \
                 delayer.internal:9277)"
            )),
        }
    }

    fn matches(&self, name: &str, port: Option<u16>) -> bool {
        self.name.eq_ignore_ascii_case(name) && self.port.is_none_or(|own| Some(own) == port)
    }
}

impl fmt::Display for HostName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// `host` and `port` of `host[:port]` (an IPv6 address in brackets, as in a URL).
fn split_port(authority: &str) -> (&str, Option<&str>) {
    match authority.rsplit_once(':') {
        Some((host, port))
            if !port.contains(']') && (!host.contains(':') || host.ends_with(']')) =>
        {
            (host, Some(port))
        }
        _ => (authority, None),
    }
}

/// Whether the server answers for `authority` (a request's `Host`): an IP address, `localhost`,
/// or a name of `hosts`. A browser sends the name of the site it loaded, so a page at a name an
/// attacker points at this server's address (DNS rebinding) names it here; an IP address cannot
/// be rebound, so requests by any of the host's addresses (curl, scrapers, probes) pass.
fn answers_for(authority: &str, hosts: &[HostName]) -> bool {
    let (name, port) = split_port(authority);
    let port = port.and_then(|port| port.parse().ok());
    let address = name
        .strip_prefix('[')
        .and_then(|name| name.strip_suffix(']'));
    address.unwrap_or(name).parse::<IpAddr>().is_ok()
        || name.eq_ignore_ascii_case("localhost")
        || hosts.iter().any(|host| host.matches(name, port))
}

/// What a request does, as far as another site is concerned.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// `/healthz`, `/metrics`: nothing to take or to do.
    Open,
    /// The console's pages: they carry form tokens.
    Page,
    /// Every POST, and the job API (whose GETs of `remove` and `get` act or show a body).
    Act,
}

fn kind(method: &Method, path: &str) -> Kind {
    match path {
        "/healthz" | "/metrics" => Kind::Open,
        _ if method != Method::GET && method != Method::HEAD => Kind::Act,
        _ if path.starts_with("/delay-queue/") => Kind::Act,
        _ => Kind::Page,
    }
}

/// Why a browser's request came from another site, if it did: by `Sec-Fetch-Site`, which every
/// current browser sends; by `Origin` for one that does not (`host` is this server's, as the
/// request named it). `Sec-Fetch-Site: same-origin` is trusted whatever the `Origin`: a browser
/// sends `Origin: null` with a form of this server's own page when the page's referrer policy is
/// `no-referrer`. A link followed to one of the console's pages is let through (a top-level
/// navigation): the page then shows in this server's own window, which the other site cannot
/// read, and without the session cookie (SameSite=Strict).
fn from_another_site(headers: &HeaderMap, kind: Kind, host: Option<&str>) -> Option<String> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let link = header("sec-fetch-mode") == Some("navigate")
        && header("sec-fetch-dest") == Some("document");
    match header("sec-fetch-site") {
        // This server's own page, or the person (the address bar, a bookmark).
        Some("same-origin" | "none") => None,
        Some(_) if kind == Kind::Page && link => None,
        Some(site) => Some(format!("Sec-Fetch-Site: {site}")),
        None => {
            let origin = headers.get(ORIGIN)?.to_str().unwrap_or("(not text)");
            let own = host.is_some_and(|host| same_origin(origin, host));
            (!own).then(|| format!("Origin: {origin} is not this server's"))
        }
    }
}

/// Whether `origin` (`scheme://host[:port]`) names `host` (`host[:port]`), default ports aside.
fn same_origin(origin: &str, host: &str) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    let default = match scheme {
        "http" => "80",
        "https" => "443",
        _ => return false,
    };
    let (origin_name, origin_port) = split_port(authority);
    let (host_name, host_port) = split_port(host);
    origin_name.eq_ignore_ascii_case(host_name)
        && origin_port.unwrap_or(default) == host_port.unwrap_or(default)
}

/// Refuses a request for a host the server does not answer for (421), and a browser's request
/// from another site (403) that would act or load one of the console's pages.
pub(super) async fn guard(
    State(hosts): State<Arc<[HostName]>>,
    request: Request,
    next: Next,
) -> Response {
    let host = match request.uri().authority() {
        Some(authority) => Some(authority.as_str()),
        None => request
            .headers()
            .get(HOST)
            .map(|host| host.to_str().unwrap_or("(not text)")),
    };
    // A request without a Host (HTTP/1.0) comes from no browser.
    if let Some(host) = host
        && !answers_for(host, &hosts)
    {
        return refuse(
            StatusCode::MISDIRECTED_REQUEST,
            format!(
                "this server does not answer for {host:?}: use its IP address, or name the \
                 host in [http] hosts"
            ),
        );
    }
    let kind = kind(request.method(), request.uri().path());
    if kind != Kind::Open
        && let Some(why) = from_another_site(request.headers(), kind, host)
    {
        let what = match kind {
            Kind::Page => "load this page",
            _ => "act here",
        };
        return refuse(
            StatusCode::FORBIDDEN,
            format!(
                "refused: a page of another site cannot {what} ({why}); open the console at \
                 this server's address, or use a client that is not a browser"
            ),
        );
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::{HostName, Kind, answers_for, from_another_site, same_origin};
    use axum::http::HeaderMap;

    #[test]
    fn ip_addresses_and_localhost_are_answered_and_names_only_when_listed() {
        let hosts = [
            HostName::parse("Delayer.internal").unwrap(),
            HostName::parse("queue.example:9277").unwrap(),
        ];
        for host in [
            "127.0.0.1:9277",
            "10.0.0.5",
            "[::1]:9277",
            "[fe80::1]",
            "localhost:9277",
            "LOCALHOST",
            "delayer.internal:8080",
            "DELAYER.internal",
            "queue.example:9277",
        ] {
            assert!(answers_for(host, &hosts), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:9277",
            "queue.example:80",
            "queue.example",
            "127.0.0.1.nip.io",
            "localhost.evil.example",
            "",
        ] {
            assert!(!answers_for(host, &hosts), "{host}");
        }
        assert!(!answers_for("delayer.internal", &[]));
        for bad in ["", "a b", "http://x", "x:port", "x:70000", "x/y"] {
            assert!(HostName::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(hosts[1].to_string(), "queue.example:9277");
    }

    #[test]
    fn a_browser_request_from_another_site_is_told_apart_by_its_headers() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, value.parse().unwrap());
            }
            map
        };
        let host = Some("127.0.0.1:9277");
        let from = |pairs: &[(&'static str, &'static str)], kind| {
            from_another_site(&headers(pairs), kind, host).is_some()
        };
        // curl and the like send neither header.
        assert!(!from(&[], Kind::Act));
        assert!(!from(&[("sec-fetch-site", "same-origin")], Kind::Act));
        assert!(!from(&[("sec-fetch-site", "none")], Kind::Act));
        assert!(!from(&[("origin", "http://127.0.0.1:9277")], Kind::Act));
        // A form of this server's page under `Referrer-Policy: no-referrer`, as Chromium posts it.
        let own_form = [("sec-fetch-site", "same-origin"), ("origin", "null")];
        assert!(!from(&own_form, Kind::Act));
        // Origin counts only without Sec-Fetch-Site: no browser says same-origin for another
        // site's request, and a client that is not a browser may send whatever it likes.
        let both = [
            ("sec-fetch-site", "same-origin"),
            ("origin", "http://evil.example"),
        ];
        assert!(!from(&both, Kind::Act));
        assert!(from(&[("sec-fetch-site", "cross-site")], Kind::Act));
        let null_elsewhere = [("sec-fetch-site", "cross-site"), ("origin", "null")];
        assert!(from(&null_elsewhere, Kind::Act));
        // Another port of the same host is the same site, but not this server.
        assert!(from(&[("sec-fetch-site", "same-site")], Kind::Act));
        // Without Sec-Fetch-Site (an older browser), by Origin.
        assert!(from(&[("origin", "http://127.0.0.1:8000")], Kind::Act));
        assert!(from(&[("origin", "null")], Kind::Act));
        let link = [
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "navigate"),
            ("sec-fetch-dest", "document"),
        ];
        assert!(!from(&link, Kind::Page), "a link to a page");
        assert!(from(&link, Kind::Act), "a link that would act");
        let frame = [
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "navigate"),
            ("sec-fetch-dest", "iframe"),
        ];
        assert!(from(&frame, Kind::Page));
        let image = [
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "no-cors"),
        ];
        assert!(from(&image, Kind::Page));
    }

    #[test]
    fn origins_compare_with_their_default_ports() {
        assert!(same_origin("http://127.0.0.1:9277", "127.0.0.1:9277"));
        assert!(same_origin(
            "http://Delayer.internal",
            "delayer.internal:80"
        ));
        assert!(same_origin("https://delayer.internal", "delayer.internal"));
        assert!(same_origin("http://[::1]:9277", "[::1]:9277"));
        assert!(!same_origin("http://127.0.0.1:8000", "127.0.0.1:9277"));
        assert!(!same_origin(
            "https://delayer.internal",
            "delayer.internal:80"
        ));
        assert!(!same_origin("null", "127.0.0.1:9277"));
    }
}
