//! The `[qstash]` section: the API's token, the signing keys, and the destinations the API may
//! reach.

use super::destination::Allowed;

/// `[qstash]`: nothing is on unless a key is set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QstashSettings {
    /// `token`: QStash's API is served on `[http] listen`, to `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// `current_signing_key` and `next_signing_key`: every delivery is signed.
    pub keys: Option<SigningKeys>,
    /// `allow`: destinations the API may publish to that are refused by default (loopback,
    /// link-local, private ranges are not refused; see [`Allowed`]).
    pub allow: Vec<Allowed>,
}

/// The signing keys: each request is signed with the current one.
#[derive(Debug, Clone, PartialEq)]
pub struct SigningKeys {
    /// Signs every request.
    pub current: String,
    /// Signs once `current` is retired (rotation); a receiver checks with both.
    pub next: Option<String>,
}
