//! A message's destination: the URL after `/v2/publish/`, as QStash's SDKs paste it raw into the
//! path, and whether the API may reach it. Loopback and link-local addresses (the cloud metadata
//! address among them) and the daemon's own address are refused unless `[qstash] allow` lists
//! them: a publisher must not make the daemon call inside its own host.

use std::net::{IpAddr, SocketAddr};

/// A destination, checked: an `http://` or `https://` URL.
#[derive(Debug, Clone, PartialEq)]
pub struct Destination {
    pub url: String,
}

/// What `[qstash] allow` lists: a host name, an address, or a range (`10.0.0.0/8`).
#[derive(Debug, Clone, PartialEq)]
pub enum Allowed {
    Name(String),
    Range(IpAddr, u8),
}

impl Allowed {
    /// `text` as an entry of `allow`, or what is wrong with it.
    pub fn parse(text: &str) -> Result<Allowed, String> {
        let text = text.trim();
        if let Some((address, bits)) = text.split_once('/') {
            let address: IpAddr = address
                .parse()
                .map_err(|_| format!("{text:?} is not a range like 10.0.0.0/8"))?;
            let most = if address.is_ipv4() { 32 } else { 128 };
            let bits: u8 = bits
                .parse()
                .ok()
                .filter(|bits| *bits <= most)
                .ok_or_else(|| format!("{text:?}: the prefix is 0 to {most} bits"))?;
            return Ok(Allowed::Range(address, bits));
        }
        if let Ok(address) = text.parse::<IpAddr>() {
            let bits = if address.is_ipv4() { 32 } else { 128 };
            return Ok(Allowed::Range(address, bits));
        }
        if text.is_empty() || text.contains(|c: char| c.is_whitespace() || c == '/') {
            return Err(format!(
                "{text:?} is not a host name, an address or a range"
            ));
        }
        Ok(Allowed::Name(text.to_ascii_lowercase()))
    }

    fn covers(&self, address: IpAddr) -> bool {
        let Allowed::Range(range, bits) = self else {
            return false;
        };
        match (range, address) {
            (IpAddr::V4(range), IpAddr::V4(address)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(*bits)).unwrap_or(0);
                u32::from(*range) & mask == u32::from(address) & mask
            }
            (IpAddr::V6(range), IpAddr::V6(address)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(*bits)).unwrap_or(0);
                u128::from(*range) & mask == u128::from(address) & mask
            }
            _ => false,
        }
    }
}

impl std::fmt::Display for Allowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Allowed::Name(name) => f.write_str(name),
            Allowed::Range(address, bits) => write!(f, "{address}/{bits}"),
        }
    }
}

/// Why a destination cannot be published to: said to the publisher (400), naming what to do.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused(pub String);

impl Destination {
    /// The destination in a request's target after the API's prefix (`raw`, not percent-decoded,
    /// with the query), checked against `allow` and the daemon's own `listen` address.
    pub async fn checked(
        raw: &str,
        allow: &[Allowed],
        listen: SocketAddr,
    ) -> Result<Destination, Refused> {
        let url = url_of(raw)?;
        let parsed = reqwest::Url::parse(&url)
            .map_err(|error| Refused(format!("the destination {url:?} is not a URL: {error}")))?;
        let host = parsed
            .host_str()
            .ok_or_else(|| Refused(format!("the destination {url:?} has no host")))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = host.to_ascii_lowercase();
        if allow
            .iter()
            .any(|allowed| *allowed == Allowed::Name(name.clone()))
        {
            return Ok(Destination { url });
        }
        let port = parsed.port_or_known_default().unwrap_or(80);
        let addresses: Vec<IpAddr> = match host.parse::<IpAddr>() {
            Ok(address) => vec![address],
            Err(_) => tokio::net::lookup_host((host, port))
                .await
                .map_err(|error| {
                    Refused(format!(
                        "the destination's host {host:?} is not found: {error}"
                    ))
                })?
                .map(|address| address.ip())
                .collect(),
        };
        for address in addresses {
            if allow.iter().any(|allowed| allowed.covers(address)) {
                continue;
            }
            if let Some(why) = refused(address, port, listen) {
                return Err(Refused(format!(
                    "the destination {url} is refused: {host} is {why}; list it in [qstash] \
                     allow to publish to it"
                )));
            }
        }
        Ok(Destination { url })
    }
}

/// The URL in `raw`: `https:/host` (a proxy merged the slashes) made whole, and one that came
/// percent-encoded (`https%3A%2F%2F...`, from curl) decoded once.
fn url_of(raw: &str) -> Result<String, Refused> {
    let mut url = raw.to_string();
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("http%3a") || lower.starts_with("https%3a") {
        url = String::from_utf8_lossy(&percent_decoded(&url)).into_owned();
    }
    for scheme in ["http:", "https:"] {
        if url.len() > scheme.len() && url[..scheme.len()].eq_ignore_ascii_case(scheme) {
            let rest = &url[scheme.len()..];
            if !rest.starts_with("//") {
                url = format!("{scheme}//{}", rest.trim_start_matches('/'));
            }
            return Ok(url);
        }
    }
    let name = raw.split(['/', '?']).next().unwrap_or_default();
    Err(Refused(format!(
        "URL groups are not served: {name:?} is not an http:// or https:// URL"
    )))
}

/// `text` with each `%XX` made the byte it stands for.
pub fn percent_decoded(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                decoded.push(byte);
                i += 3;
            }
            (byte, _) => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    decoded
}

/// Resolves a destination's host for a delivery, leaving out the addresses a publish would
/// refuse (but the daemon's own, whose port it cannot see): the name may point elsewhere now than
/// when the publish checked it (DNS rebinding). With none left, the delivery fails naming why.
#[derive(Debug, Clone)]
pub struct Resolver {
    pub allow: Vec<Allowed>,
}

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow = self.allow.clone();
        let host = name.as_str().to_ascii_lowercase();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if allow.contains(&Allowed::Name(host.clone())) {
                return Ok(Box::new(found.into_iter()) as reqwest::dns::Addrs);
            }
            let (kept, refused): (Vec<SocketAddr>, Vec<SocketAddr>) =
                found.into_iter().partition(|address| {
                    let address = address.ip();
                    allow.iter().any(|allowed| allowed.covers(address)) || inner(address).is_none()
                });
            match (kept.is_empty(), refused.first()) {
                (true, Some(address)) => {
                    let why = inner(address.ip()).unwrap_or_default();
                    Err(format!(
                        "{host} now resolves to {}, {why}: refused; list it in [qstash] allow \
                         to deliver to it",
                        address.ip()
                    )
                    .into())
                }
                _ => Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs),
            }
        })
    }
}

/// Why `address` is refused by default, if it is.
fn refused(address: IpAddr, port: u16, listen: SocketAddr) -> Option<&'static str> {
    if let Some(why) = inner(address) {
        return Some(why);
    }
    if address == listen.ip() && port == listen.port() {
        return Some("this daemon's own address");
    }
    None
}

/// Why `address` is inside this host or its network's edge (loopback, unspecified, link-local),
/// if it is.
fn inner(address: IpAddr) -> Option<&'static str> {
    let address = match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    };
    if address.is_loopback() {
        return Some("a loopback address");
    }
    if address.is_unspecified() {
        return Some("an unspecified address (this host)");
    }
    let link_local = match address {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    };
    if link_local {
        return Some("a link-local address (the cloud metadata address is one)");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listen() -> SocketAddr {
        "10.1.2.3:9277".parse().unwrap()
    }

    async fn check(raw: &str, allow: &[&str]) -> Result<String, String> {
        let allow: Vec<Allowed> = allow.iter().map(|a| Allowed::parse(a).unwrap()).collect();
        Destination::checked(raw, &allow, listen())
            .await
            .map(|destination| destination.url)
            .map_err(|refused| refused.0)
    }

    #[tokio::test]
    async fn a_destination_is_the_raw_url_and_inner_addresses_are_refused_unless_allowed() {
        assert_eq!(
            check("https://192.0.2.1/a%2Fb//c?x=%41", &[])
                .await
                .unwrap(),
            "https://192.0.2.1/a%2Fb//c?x=%41"
        );
        assert_eq!(
            check("https:/192.0.2.1/x", &[]).await.unwrap(),
            "https://192.0.2.1/x"
        );
        assert_eq!(
            check("https%3A%2F%2F192.0.2.1%2Fx", &[]).await.unwrap(),
            "https://192.0.2.1/x"
        );
        let group = check("mygroup", &[]).await.unwrap_err();
        assert!(
            group.contains("URL groups are not served: \"mygroup\""),
            "{group}"
        );
        for (raw, why) in [
            ("http://127.0.0.1:8080/x", "127.0.0.1 is a loopback address"),
            ("http://localhost/x", "localhost is a loopback address"),
            ("http://169.254.169.254/latest", "a link-local address"),
            ("http://[::1]/x", "a loopback address"),
            ("http://0.0.0.0/x", "an unspecified address"),
            ("http://10.1.2.3:9277/x", "this daemon's own address"),
        ] {
            let refused = check(raw, &[]).await.unwrap_err();
            assert!(refused.contains(why), "{raw}: {refused}");
            assert!(refused.contains("list it in [qstash] allow"), "{refused}");
        }
        assert!(
            check("http://10.1.2.3:80/x", &[]).await.is_ok(),
            "another port"
        );
        assert!(
            check("http://127.0.0.1:8080/x", &["127.0.0.0/8"])
                .await
                .is_ok()
        );
        assert!(
            check("http://127.0.0.1:8080/x", &["127.0.0.1"])
                .await
                .is_ok()
        );
        assert!(check("http://localhost/x", &["localhost"]).await.is_ok());
        assert!(check("http://[::1]/x", &["::1/128"]).await.is_ok());
        assert!(check("http://127.0.0.2/x", &["127.0.0.1"]).await.is_err());
        let unknown = check("http://no-such-host.invalid/x", &[])
            .await
            .unwrap_err();
        assert!(
            unknown.contains("host \"no-such-host.invalid\" is not found"),
            "{unknown}"
        );
    }

    #[tokio::test]
    async fn a_delivery_resolves_only_to_addresses_a_publish_takes() {
        use reqwest::dns::Resolve;
        let resolve = |allow: &[&str]| {
            let allow = allow.iter().map(|a| Allowed::parse(a).unwrap()).collect();
            Resolver { allow }.resolve("localhost".parse().unwrap())
        };
        let refused = resolve(&[]).await.err().unwrap().to_string();
        assert!(
            refused.starts_with("localhost now resolves to ") && refused.contains("loopback"),
            "{refused}"
        );
        let by_name: Vec<SocketAddr> = resolve(&["localhost"]).await.unwrap().collect();
        assert!(by_name.iter().any(|address| address.ip().is_loopback()));
        let by_range: Vec<SocketAddr> = resolve(&["127.0.0.0/8", "::1"]).await.unwrap().collect();
        assert!(!by_range.is_empty());
    }

    #[test]
    fn allow_entries_are_names_addresses_or_ranges() {
        assert_eq!(
            Allowed::parse("Hooks.Internal").unwrap(),
            Allowed::Name("hooks.internal".into())
        );
        assert!(
            Allowed::parse("10.0.0.0/33")
                .unwrap_err()
                .contains("0 to 32 bits")
        );
        assert!(Allowed::parse("x/8").unwrap_err().contains("not a range"));
        assert_eq!(
            Allowed::parse("10.0.0.0/8").unwrap().to_string(),
            "10.0.0.0/8"
        );
    }
}
