//! Who may act from a browser. With `[http] token` set, a login with the token sets a session
//! cookie (SameSite=Strict, HttpOnly) whose value is a random id and an expiry, signed with the
//! token (an HMAC): it proves the token without holding it, and a new token ends every session. A
//! logout ends its session in Redis (see `logouts`). Every form carries a token of
//! its own (the HMAC of the session), which a page of another site cannot read, so a forged POST
//! fails even where a browser would send the cookie. Without a token there is no session, but
//! forms still carry a token (from a key made at start), so no other site can act either.

use std::time::Duration;

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

use crate::text::bytes::hex;

/// The cookie's name.
pub const COOKIE: &str = "delayer_session";
/// How long a login lasts.
pub const LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// Now by this host's clock, in whole unix seconds: sessions are the console's own business.
pub fn unix_seconds() -> u64 {
    delayer_wire::time::unix_now() as u64
}

/// A session's cookie value whose signature holds: its id and expiry (unix seconds).
pub struct Signed<'a> {
    pub id: &'a str,
    pub expires: u64,
}

/// The keys sessions and forms are signed with.
pub struct Guard {
    /// From the token: sessions; `None` without a token.
    session: Option<hmac::Key>,
    /// From the token, or made at start without one: form tokens.
    forms: hmac::Key,
}

impl Guard {
    pub fn new(token: Option<&str>) -> Guard {
        let forms = match token {
            Some(token) => hmac::Key::new(hmac::HMAC_SHA256, token.as_bytes()),
            None => hmac::Key::new(hmac::HMAC_SHA256, &random::<32>()),
        };
        Guard {
            session: token.map(|token| hmac::Key::new(hmac::HMAC_SHA256, token.as_bytes())),
            forms,
        }
    }

    /// Whether a token guards the console.
    pub fn guarded(&self) -> bool {
        self.session.is_some()
    }

    /// A new session's cookie value, valid until `expires` (unix seconds): `expires.id.mac`.
    pub fn session(&self, expires: u64) -> Option<String> {
        let key = self.session.as_ref()?;
        let signed = format!("{expires}.{}", hex(&random::<16>()));
        Some(format!("{signed}.{}", hex(&sign(key, "session", &signed))))
    }

    /// The session `value` is, if this token signed it and it has not expired at `now` (unix
    /// seconds). Whether a logout ended it is Redis's to say.
    pub fn valid<'a>(&self, value: &'a str, now: u64) -> Option<Signed<'a>> {
        let key = self.session.as_ref()?;
        let (signed, mac) = value.rsplit_once('.')?;
        let (expires, id) = signed.split_once('.')?;
        let expires = expires.parse::<u64>().ok()?;
        let message = format!("session {signed}");
        let genuine = hmac::verify(key, message.as_bytes(), &unhex(mac)?).is_ok();
        (genuine && expires > now).then_some(Signed { id, expires })
    }

    /// The token of the forms of `session` (the cookie's value; "" without a token).
    pub fn form_token(&self, session: &str) -> String {
        hex(&sign(&self.forms, "form", session))
    }

    /// Whether `given` is the form token of `session`, compared in constant time.
    pub fn form_token_is(&self, session: &str, given: &str) -> bool {
        let message = format!("form {session}");
        unhex(given).is_some_and(|mac| hmac::verify(&self.forms, message.as_bytes(), &mac).is_ok())
    }
}

/// The HMAC of "`purpose` `text`": one key signs sessions and forms, which never pass for each
/// other.
fn sign(key: &hmac::Key, purpose: &str, text: &str) -> Vec<u8> {
    hmac::sign(key, format!("{purpose} {text}").as_bytes())
        .as_ref()
        .to_vec()
}

/// `N` bytes from the system's random numbers.
fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0; N];
    SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system's random numbers");
    bytes
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find_map(|(key, value)| (key == name).then_some(value))
}

#[cfg(test)]
mod tests {
    use super::{Guard, cookie};

    #[test]
    fn a_session_holds_until_it_expires_and_only_for_its_token() {
        let guard = Guard::new(Some("s3cret"));
        let session = guard.session(1_000).unwrap();
        let signed = guard.valid(&session, 999).unwrap();
        assert_eq!((signed.id.len(), signed.expires), (32, 1_000));
        assert!(guard.valid(&session, 1_000).is_none(), "expired");
        assert!(Guard::new(Some("other")).valid(&session, 999).is_none());
        let stretched = session.replacen("1000", "9000", 1);
        assert!(
            guard.valid(&stretched, 999).is_none(),
            "its expiry is signed"
        );
        let (_, mac) = session.rsplit_once('.').unwrap();
        let renamed = format!("1000.{}.{mac}", "0".repeat(32));
        assert!(guard.valid(&renamed, 999).is_none(), "its id is signed");
        for junk in ["", "1000.zz", "1000.ab.zz", "x.y.z"] {
            assert!(guard.valid(junk, 0).is_none(), "{junk}");
        }
        assert!(Guard::new(None).session(1_000).is_none());
        // Two logins in the same second are two sessions: a logout ends one of them.
        assert_ne!(guard.session(1_000), guard.session(1_000));
    }

    #[test]
    fn a_form_token_belongs_to_its_session_and_is_not_one() {
        let guard = Guard::new(Some("s3cret"));
        let session = guard.session(1_000).unwrap();
        let form = guard.form_token(&session);
        assert!(guard.form_token_is(&session, &form));
        assert!(!guard.form_token_is(&guard.session(2_000).unwrap(), &form));
        assert!(!guard.form_token_is(&session, ""));
        assert!(guard.valid(&format!("1000.ab.{form}"), 0).is_none());
        // Without a token, each start has its own key.
        let (one, two) = (Guard::new(None), Guard::new(None));
        assert!(one.form_token_is("", &one.form_token("")));
        assert!(!two.form_token_is("", &one.form_token("")));
    }

    #[test]
    fn cookies_are_found_by_name() {
        let header = "a=1; delayer_session=10.ab;b=2";
        assert_eq!(cookie(header, "delayer_session"), Some("10.ab"));
        assert_eq!(cookie(header, "c"), None);
    }
}
