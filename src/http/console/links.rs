//! Links to a topic's page, a job's, a consumer's row and the login page, naming a topic or an id
//! by text when it is UTF-8, else by the base64 of its bytes; and places in the pool, for the
//! waiting jobs' pages.

use delayer_client::inspector::Cursor;
use delayer_client::{JobId, Topic};
use maud::{Markup, html};

use crate::text::escape::capped;

/// A topic's or id's query: by text when it is UTF-8, else by the base64 of its bytes.
pub(super) fn query(text_name: &str, base64_name: &str, bytes: &[u8]) -> String {
    let (name, value) = match crate::text::bytes::base64(bytes) {
        Some(encoded) => (base64_name, encoded),
        None => (text_name, String::from_utf8_lossy(bytes).into_owned()),
    };
    let value: String = form_urlencoded::byte_serialize(value.as_bytes()).collect();
    format!("{name}={value}")
}

/// A place in the pool's query: `name` the score (in the shortest form that reads back exactly),
/// `name_id` (or `name_id_base64`) the job.
pub(super) fn cursor_query(name: &str, cursor: &Cursor) -> String {
    let id = query(
        &format!("{name}_id"),
        &format!("{name}_id_base64"),
        cursor.id.as_bytes(),
    );
    format!("{name}={}&{id}", cursor.score)
}

/// The login page's address, going on to `path` after.
pub(super) fn login_then(path: &str) -> String {
    let path: String = form_urlencoded::byte_serialize(path.as_bytes()).collect();
    format!("/login?next={path}")
}

pub(super) fn topic_link(topic: &Topic) -> Markup {
    html! { a href={ "/topic?" (query("name", "base64", topic.as_bytes())) } { (capped(topic)) } }
}

pub(super) fn job_link(id: &JobId) -> Markup {
    html! { a href={ "/job?" (query("id", "id_base64", id.as_bytes())) } { (capped(id)) } }
}

/// The `id` of consumer `id`'s row on the consumers' page: percent-encoded, as its links name it
/// (a browser matches a link's fragment to an `id` as it is written).
pub(super) fn consumer_anchor(id: &str) -> String {
    let id: String = form_urlencoded::byte_serialize(id.as_bytes()).collect();
    format!("consumer-{id}")
}

/// A link to consumer `id`'s row on the consumers' page.
pub(super) fn consumer_link(id: &str) -> Markup {
    html! { a href={ "/consumers#" (consumer_anchor(id)) } { (capped(id)) } }
}
