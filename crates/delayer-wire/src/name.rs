//! Ids and topics as bytes: the legacy PHP and Go clients can write any, so nothing here assumes
//! they are text. Nearly all are, and read and print as such; strings convert into them.

use std::borrow::{Borrow, Cow};
use std::fmt::{self, Write};

use redis::{FromRedisValue, ParsingError, RedisWrite, ToRedisArgs, ToSingleRedisArg, Value};

/// Bytes as a Rust string literal prints them, quoted, with `\xNN` for each byte that is not part
/// of UTF-8 text: `"job-\xff\xfe"`. What the `Debug` of an id or topic prints, and its `Display`
/// when it is not UTF-8.
pub struct Quoted<'a>(pub &'a [u8]);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('"')?;
        for chunk in self.0.utf8_chunks() {
            // A str's own Debug escapes, less its quotes.
            let valid = format!("{:?}", chunk.valid());
            f.write_str(&valid[1..valid.len() - 1])?;
            for byte in chunk.invalid() {
                write!(f, "\\x{byte:02x}")?;
            }
        }
        f.write_char('"')
    }
}

/// Bytes as text when they are UTF-8, else [`Quoted`]: how ids, topics and key names print.
pub struct Text<'a>(pub &'a [u8]);

impl fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match std::str::from_utf8(self.0) {
            Ok(text) => f.write_str(text),
            Err(_) => Quoted(self.0).fmt(f),
        }
    }
}

/// A newtype over the bytes of a name, with the conversions and comparisons that let text stand
/// for it.
macro_rules! byte_name {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Vec<u8>);

        impl $name {
            /// The bytes, as Redis holds them.
            pub fn as_bytes(&self) -> &[u8] {
                &self.0
            }

            pub fn into_bytes(self) -> Vec<u8> {
                self.0
            }

            /// The text, when it is UTF-8 (`None` for anything else).
            pub fn to_str(&self) -> Option<&str> {
                std::str::from_utf8(&self.0).ok()
            }

            /// The text, with U+FFFD for whatever is not UTF-8: for people, never to name it by.
            pub fn to_str_lossy(&self) -> Cow<'_, str> {
                String::from_utf8_lossy(&self.0)
            }

            pub fn is_empty(&self) -> bool {
                self.0.is_empty()
            }
        }

        /// The text as it is when it is UTF-8; else quoted, with escapes (see [`Text`]).
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&Text(&self.0), f)
            }
        }

        /// Quoted, with escapes, as a `String`'s Debug (see [`Quoted`]).
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&Quoted(&self.0), f)
            }
        }

        impl From<Vec<u8>> for $name {
            fn from(bytes: Vec<u8>) -> $name {
                $name(bytes)
            }
        }

        impl From<&[u8]> for $name {
            fn from(bytes: &[u8]) -> $name {
                $name(bytes.to_vec())
            }
        }

        impl From<String> for $name {
            fn from(text: String) -> $name {
                $name(text.into_bytes())
            }
        }

        impl From<&str> for $name {
            fn from(text: &str) -> $name {
                $name(text.as_bytes().to_vec())
            }
        }

        impl From<&String> for $name {
            fn from(text: &String) -> $name {
                $name::from(text.as_str())
            }
        }

        impl From<&$name> for $name {
            fn from(name: &$name) -> $name {
                name.clone()
            }
        }

        impl AsRef<[u8]> for $name {
            fn as_ref(&self) -> &[u8] {
                &self.0
            }
        }

        impl Borrow<[u8]> for $name {
            fn borrow(&self) -> &[u8] {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, text: &str) -> bool {
                self.0 == text.as_bytes()
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, text: &&str) -> bool {
                self.0 == text.as_bytes()
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, text: &String) -> bool {
                self.0 == text.as_bytes()
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, name: &$name) -> bool {
                self.as_bytes() == name.0
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, name: &$name) -> bool {
                self.as_bytes() == name.0
            }
        }

        impl ToRedisArgs for $name {
            fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
                out.write_arg(&self.0);
            }
        }

        impl ToSingleRedisArg for $name {}

        /// Any bytes: a reply that is not UTF-8 reads whole, where a `String` would fail.
        impl FromRedisValue for $name {
            fn from_redis_value(value: Value) -> Result<$name, ParsingError> {
                Vec::<u8>::from_redis_value(value).map($name)
            }
        }
    };
}

byte_name!(
    /// A job's id: the bytes its pusher chose. `"order-42".into()`, or any bytes.
    JobId
);

byte_name!(
    /// A topic: the bytes its pushers chose. `"order.close".into()`, or any bytes.
    Topic
);

/// 32 hex digits, like the md5 ids the legacy clients' users make: the time in nanoseconds, then a
/// hash of a per-process random key, the process id and a counter, so that ids made at the same
/// nanosecond by other processes or hosts differ too.
pub fn unique_id() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::BuildHasher;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::SystemTime;

    static KEY: OnceLock<RandomState> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64);
    let salt = KEY
        .get_or_init(RandomState::new)
        .hash_one((std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
    format!("{nanos:016x}{salt:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_prints_as_it_is_and_other_bytes_quoted_with_escapes() {
        let text = JobId::from("5d41402a");
        assert_eq!(
            (text.to_string(), format!("{text:?}")),
            ("5d41402a".to_string(), "\"5d41402a\"".to_string())
        );
        let bytes = JobId::from(&b"job-\xff\xfe \"\n\xc3\xa9"[..]);
        assert_eq!(bytes.to_string(), r#""job-\xff\xfe \"\né""#);
        assert_eq!(format!("{bytes:?}"), bytes.to_string());
        assert_eq!(bytes.to_str(), None);
        assert_eq!(bytes.to_str_lossy(), "job-\u{fffd}\u{fffd} \"\né");
        let topic = Topic::from("a\nb");
        assert_eq!(
            (topic.to_string(), format!("{topic:?}")),
            ("a\nb".to_string(), r#""a\nb""#.to_string())
        );
    }

    #[test]
    fn strings_compare_with_names() {
        let id = JobId::from("abc");
        let text = String::from("abc");
        assert_eq!(id, "abc");
        assert_eq!("abc", id);
        assert_eq!(id, text);
        assert_eq!(text, id);
        assert!(JobId::from(&b"ab\xff"[..]) != "ab\u{fffd}");
        assert_eq!(id.as_bytes(), b"abc");
    }

    #[test]
    fn unique_ids_are_32_hex_digits_and_unique() {
        let ids: std::collections::HashSet<String> = (0..10_000).map(|_| unique_id()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(
            ids.iter()
                .all(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        );
    }
}
