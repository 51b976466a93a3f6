//! The fields of a page's query or an action's form, and a topic, an id or a place in the pool
//! named in them.

use std::collections::HashMap;

use delayer_client::inspector::Cursor;

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
    name_if_in(fields, text_name, base64_name)?
        .ok_or_else(|| format!("give {text_name} (or {base64_name})"))
}

/// As [`name_in`], for a name that may be left out (or empty).
pub(super) fn name_if_in(
    fields: &mut HashMap<String, String>,
    text_name: &str,
    base64_name: &str,
) -> Result<Option<Vec<u8>>, String> {
    let text = fields.remove(text_name);
    let encoded = fields.remove(base64_name);
    Ok(named((text_name, text), (base64_name, encoded))?.filter(|name| !name.is_empty()))
}

/// A place in the pool named by `name` (the score) and `name_id` (or `name_id_base64`), as
/// `links::cursor_query` writes it; none when `name` is not given.
pub(super) fn cursor_in(
    fields: &mut HashMap<String, String>,
    name: &str,
) -> Result<Option<Cursor>, String> {
    let Some(text) = fields.remove(name) else {
        return Ok(None);
    };
    let score: f64 = match text.parse() {
        Ok(score) if !f64::is_nan(score) => score,
        _ => return Err(format!("{name} {text:?} is not a score of the pool")),
    };
    let id = name_in(fields, &format!("{name}_id"), &format!("{name}_id_base64"))?;
    Ok(Some(Cursor {
        score,
        id: id.into(),
    }))
}
