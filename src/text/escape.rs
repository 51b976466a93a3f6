//! Text from Redis (ids, topics) made safe to log: one event stays one line, a list stays unambiguous.
//!
//! Anyone who can write to Redis chooses ids and topics, so they must not be able to forge a log line
//! (an id holding `\n[info] ... Service stopped`) or blur a list (an id holding a comma). Plain text,
//! which is every id and topic the legacy clients are used with, prints as it is, as the original did;
//! anything else prints as a double-quoted string with Rust's escapes (`"a,b"`, `"x\n[info]"`), and
//! bytes that are not UTF-8 as `\xNN` (`"job-\xff\xfe"`), as the client's ids print.

use std::borrow::Cow;
use std::fmt::{self, Write};

use delayer_wire::name::{Quoted, Text};

/// The most bytes of one id or topic a log line carries whole: anyone who writes to Redis chooses
/// them, and a megabyte id must not be written into the log at every move.
const MAX_FIELD: usize = 256;
/// How much of a longer one is kept, before its length and a hash that tells it from others.
const KEPT_OF_LONG: usize = 64;

/// `text` as it is when it is plain (UTF-8, no control character, nothing that delimits a log
/// line's fields), else quoted and escaped; one longer than [`MAX_FIELD`] bytes is cut (see
/// [`capped`]).
pub fn field<T: AsRef<[u8]> + ?Sized>(text: &T) -> Cow<'_, str> {
    let bytes = text.as_ref();
    if bytes.len() > MAX_FIELD {
        return Cow::Owned(capped(bytes).into_owned());
    }
    match std::str::from_utf8(bytes) {
        Ok(text) if is_plain(text) => Cow::Borrowed(text),
        _ => Cow::Owned(Quoted(bytes).to_string()),
    }
}

/// `text` whole when it has at most [`MAX_FIELD`] bytes (quoted with escapes when it is not
/// UTF-8); else its first [`KEPT_OF_LONG`] bytes, quoted, then how many bytes were left out and a
/// hash of the whole (FNV-1a), as `"5d41402a..."…+1048512B#9c1d3b4a5e6f7081`: one line still tells
/// long ids apart.
pub fn capped<T: AsRef<[u8]> + ?Sized>(text: &T) -> Cow<'_, str> {
    let bytes = text.as_ref();
    if bytes.len() <= MAX_FIELD {
        return match std::str::from_utf8(bytes) {
            Ok(text) => Cow::Borrowed(text),
            Err(_) => Cow::Owned(Text(bytes).to_string()),
        };
    }
    // Cut before a character's continuation bytes (at most three), so that text stays text.
    let mut kept = KEPT_OF_LONG;
    while kept > KEPT_OF_LONG - 3 && bytes[kept] & 0xC0 == 0x80 {
        kept -= 1;
    }
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    });
    let left_out = bytes.len() - kept;
    Cow::Owned(format!(
        "{}…+{left_out}B#{hash:016x}",
        Quoted(&bytes[..kept])
    ))
}

/// `ids` joined with commas, each as [`field`] prints it.
pub fn list<T: AsRef<[u8]>>(ids: &[T]) -> String {
    let mut joined = String::with_capacity(
        ids.iter()
            .map(|id| id.as_ref().len().min(MAX_FIELD) + 1)
            .sum(),
    );
    for (index, id) in ids.iter().enumerate() {
        if index > 0 {
            joined.push(',');
        }
        joined.push_str(&field(id));
    }
    joined
}

fn is_plain(text: &str) -> bool {
    !text.is_empty()
        && !text.contains([',', '"', '\\', '[', ']'])
        && if text.is_ascii() {
            // The common case (hex digests, numbers, dotted topics): no formatting needed to tell.
            text.bytes().all(|byte| (b' '..=b'~').contains(&byte))
        } else {
            // Anything Debug would escape (controls, line separators, unprintables) is not plain.
            text.chars()
                .all(|c| c == '\'' || c.escape_debug().len() == 1)
        }
}

/// `text` with its control characters escaped, on one line (as [`OneLine`] writes it).
pub fn one_line(text: &str) -> String {
    let mut line = String::with_capacity(text.len());
    OneLine(&mut line)
        .write_str(text)
        .expect("a String takes it");
    line
}

/// Writes through to `inner`, escaping control characters, so whatever a message holds it ends up
/// on one line. The last line of defence: ids and topics are already quoted by [`field`].
pub struct OneLine<W>(pub W);

impl<W: Write> Write for OneLine<W> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let mut rest = text;
        while let Some(at) = find_control(rest) {
            self.0.write_str(&rest[..at])?;
            let control = rest[at..].chars().next().expect("found a char at `at`");
            write!(self.0, "{}", control.escape_default())?;
            rest = &rest[at + control.len_utf8()..];
        }
        self.0.write_str(rest)
    }
}

/// Where the first control character (C0, DEL or C1) is. A byte scan on a simple test the compiler
/// can vectorise: "Job is ready" lines run to tens of kilobytes, and this is on every one of them.
fn find_control(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(found) = bytes[from..]
        .iter()
        .position(|&byte| byte < 0x20 || byte == 0x7F || byte == 0xC2)
    {
        let at = from + found;
        // 0xC2 starts every U+0080..U+00FF; only U+0080..U+009F (C1) are controls.
        if bytes[at] != 0xC2
            || bytes
                .get(at + 1)
                .is_some_and(|next| (0x80..=0x9F).contains(next))
        {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_ids_and_topics_print_as_they_are() {
        for text in [
            "5d41402abc4b2a76b9719d911017c592",
            "order.close",
            "with space",
            "a:b/c-d_e",
            "ünïcødé 话题",
        ] {
            assert_eq!(field(text), text);
        }
    }

    #[test]
    fn line_breaks_and_delimiters_are_quoted_and_escaped() {
        assert_eq!(
            field("x\n[info] 2026/01/01 00:00:00 Service stopped successfully, PID: 1"),
            r#""x\n[info] 2026/01/01 00:00:00 Service stopped successfully, PID: 1""#
        );
        assert_eq!(field("a,b"), r#""a,b""#);
        assert_eq!(field("say \"hi\""), r#""say \"hi\"""#);
        assert_eq!(field("back\\slash"), r#""back\\slash""#);
        assert_eq!(field("cr\rtab\t"), r#""cr\rtab\t""#);
        assert_eq!(field(""), r#""""#);
        // Unicode line and paragraph separators break lines in some viewers.
        assert_eq!(field("a\u{2028}b"), r#""a\u{2028}b""#);
    }

    #[test]
    fn a_long_id_is_cut_to_a_prefix_its_length_and_a_hash() {
        let long = "a".repeat(1 << 20);
        let shown = field(&long);
        assert!(shown.len() < 120, "{shown}");
        assert!(
            shown.starts_with(&format!("{:?}…+", "a".repeat(64))),
            "{shown}"
        );
        assert!(shown.contains(&format!("+{}B#", (1 << 20) - 64)), "{shown}");
        assert_eq!(field(&long), shown, "the same id, the same text");
        let other = format!("{}b", "a".repeat((1 << 20) - 1));
        assert_ne!(field(&other), shown, "told apart by the hash");
        let wide = "é".repeat(200);
        assert!(field(&wide).starts_with(&format!("{:?}…+", "é".repeat(32))));
        assert_eq!(
            field(&"x".repeat(256)),
            "x".repeat(256),
            "up to the limit, whole"
        );
    }

    #[test]
    fn bytes_that_are_not_utf8_are_quoted_with_escapes() {
        assert_eq!(field(b"job-\xff\xfe".as_slice()), r#""job-\xff\xfe""#);
        assert_eq!(capped(b"t\xff".as_slice()), r#""t\xff""#);
        let long = [b'a'; 300]
            .iter()
            .chain(b"\xff")
            .copied()
            .collect::<Vec<u8>>();
        assert!(field(&long).starts_with(&format!("{:?}…+237B#", "a".repeat(64))));
        assert_eq!(list(&[b"a".to_vec(), b"\xc3".to_vec()]), r#"a,"\xc3""#);
    }

    #[test]
    fn a_list_stays_unambiguous() {
        let ids = ["a".to_string(), "b,c".to_string(), "d]".to_string()];
        assert_eq!(list(&ids), r#"a,"b,c","d]""#);
    }

    #[test]
    fn one_line_escapes_every_control_character() {
        let mut out = String::new();
        write!(OneLine(&mut out), "a\nb\r\u{1b}[31mc\u{85}d é\u{a0}").unwrap();
        assert_eq!(
            out, "a\\nb\\r\\u{1b}[31mc\\u{85}d é\u{a0}",
            "é and no-break space are text"
        );
        assert!(!out.contains('\n'));
    }
}
