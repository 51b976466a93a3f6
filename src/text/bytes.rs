//! Bytes in the JSON that the shell commands and the HTTP API print and take: a job's body, and its
//! id and topic, which the legacy clients may write as any bytes. JSON holds text only: each is
//! printed as text (`body`, `id`, `topic`, with U+FFFD for what is not UTF-8) and, when it is not
//! UTF-8, also as its exact bytes in base64 (`body_base64`, `id_base64`, `topic_base64`), so that
//! nothing is lost in the printing; and such an id or topic is named back in base64.

use std::borrow::Cow;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// The bytes in lower-case hex, two digits each.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The bytes as text.
pub fn text(bytes: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// The bytes in base64 when they are not UTF-8 (`None` when `text` is exact).
pub fn base64(bytes: &[u8]) -> Option<String> {
    std::str::from_utf8(bytes)
        .is_err()
        .then(|| STANDARD.encode(bytes))
}

/// Adds `<field>_base64` to `json` when the field's bytes are not UTF-8.
pub fn with_base64(json: &mut serde_json::Value, field: &str, value: Option<&[u8]>) {
    if let Some(encoded) = value.and_then(base64) {
        json[format!("{field}_base64")] = serde_json::Value::String(encoded);
    }
}

/// The bytes that `encoded` (standard base64, as [`base64`] prints) holds; what is wrong with it
/// otherwise, naming it as `name`.
pub fn from_base64(name: &str, encoded: &str) -> Result<Vec<u8>, String> {
    STANDARD
        .decode(encoded.trim())
        .map_err(|error| format!("{name} is not base64 ({error})"))
}
