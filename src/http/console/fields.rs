//! The fields of a page's query or an action's form, and a topic or an id named in them.

use std::collections::HashMap;

use crate::http::request::named;

/// The fields of a query or a form.
pub(super) fn fields(encoded: &[u8]) -> HashMap<String, String> {
    form_urlencoded::parse(encoded).into_owned().collect()
}

/// A topic or an id named by `text_name` or `base64_name` among `fields`.
pub(super) fn name_in(
    fields: &mut HashMap<String, String>,
    text_name: &str,
    base64_name: &str,
) -> Result<Vec<u8>, String> {
    let text = fields.remove(text_name);
    let encoded = fields.remove(base64_name);
    named((text_name, text), (base64_name, encoded))?
        .filter(|name| !name.is_empty())
        .ok_or_else(|| format!("give {text_name} (or {base64_name})"))
}
