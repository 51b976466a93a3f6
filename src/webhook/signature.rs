//! QStash's `Upstash-Signature`: a JWT signed with HS256 by the current signing key, so that a
//! receiver checks a request with QStash's own `Receiver` (any of its SDKs).
//!
//! HS256 is one HMAC-SHA256, done here with `ring`, which the TLS stack already brings, rather
//! than a JWT crate and a second crypto library for it.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::digest::{SHA256, digest};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use serde_json::json;

use crate::text::bytes::hex;

/// How long a signature is good for, as QStash's: 5 minutes from its making.
const LIFETIME_SECONDS: u64 = 300;

/// The signature of a request to `url` with `body`, by `key` (the key's text is the HMAC key),
/// made now: a fresh one for each attempt.
pub fn sign(key: &str, url: &str, body: &[u8]) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let mut nonce = [0u8; 16];
    // The id only tells two signatures apart; a failure of the system's random source leaves
    // zeros, which verifies all the same.
    let _ = SystemRandom::new().fill(&mut nonce);
    let claims = json!({
        "iss": "Upstash",
        "sub": url,
        "exp": now + LIFETIME_SECONDS,
        // QStash's since 2024: 0, so a receiver's clock a little behind accepts it.
        "nbf": 0,
        "iat": now,
        "jti": format!("jwt_{}", hex(&nonce)),
        "body": URL_SAFE_NO_PAD.encode(digest(&SHA256, body)),
    });
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
    let signed = format!("{header}.{payload}");
    let key = hmac::Key::new(hmac::HMAC_SHA256, key.as_bytes());
    let tag = hmac::sign(&key, signed.as_bytes());
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use ring::hmac;

    use super::sign;

    #[test]
    fn a_signature_is_an_hs256_jwt_of_qstash_s_claims() {
        let token = sign("sig_key", "http://example.test/hook?a=1", b"hello");
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3);
        let header: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header["alg"], "HS256");
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["iss"], "Upstash");
        assert_eq!(claims["sub"], "http://example.test/hook?a=1");
        assert_eq!(claims["nbf"], 0);
        assert_eq!(
            claims["exp"].as_u64().unwrap(),
            claims["iat"].as_u64().unwrap() + 300
        );
        assert!(claims["jti"].as_str().unwrap().starts_with("jwt_"));
        // sha256("hello"), base64url without padding.
        assert_eq!(
            claims["body"],
            "LPJNul-wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ"
        );
        let key = hmac::Key::new(hmac::HMAC_SHA256, b"sig_key");
        let signed = format!("{}.{}", parts[0], parts[1]);
        let tag = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        hmac::verify(&key, signed.as_bytes(), &tag).expect("signed by the key");
    }
}
