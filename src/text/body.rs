//! A job's body in the JSON that the shell commands and the HTTP API print. JSON holds text only,
//! and a body is bytes: it is printed as text (`body`, with U+FFFD for what is not UTF-8) and,
//! when it is not UTF-8, also as its exact bytes in base64 (`body_base64`), so that a job taken
//! by a pop loses nothing in the printing.

use std::borrow::Cow;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// The body as text.
pub fn text(body: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(body)
}

/// The body's bytes in base64 when it is not UTF-8 (`None` when `text` is exact).
pub fn base64(body: &[u8]) -> Option<String> {
    std::str::from_utf8(body)
        .is_err()
        .then(|| STANDARD.encode(body))
}
