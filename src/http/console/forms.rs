//! What the forms share: the field that proves a form came from this console, the hidden fields
//! naming a topic, an id or a place in the pool, and a dead job's buttons.

use delayer_client::inspector::Cursor;
use delayer_client::{JobId, Topic};
use maud::{Markup, html};

use super::viewer::Viewer;

/// The hidden field that proves a form came from this console.
pub(super) fn token_field(viewer: &Viewer) -> Markup {
    html! { input type="hidden" name="form_token" value=(viewer.form_token); }
}

/// Hidden fields naming a topic or an id as `links::query` does.
pub(super) fn named_field(text_name: &str, base64_name: &str, bytes: &[u8]) -> Markup {
    match crate::text::bytes::base64(bytes) {
        Some(encoded) => html! { input type="hidden" name=(base64_name) value=(encoded); },
        None => {
            html! { input type="hidden" name=(text_name) value=(String::from_utf8_lossy(bytes)); }
        }
    }
}

/// Hidden fields naming a place in the pool as `links::cursor_query` does.
pub(super) fn cursor_fields(name: &str, cursor: &Cursor) -> Markup {
    html! {
        input type="hidden" name=(name) value=(cursor.score);
        (named_field(&format!("{name}_id"), &format!("{name}_id_base64"), cursor.id.as_bytes()))
    }
}

/// A dead job's buttons: requeue it, or delete it.
pub(super) fn dead_job_forms(viewer: &Viewer, topic: &Topic, id: &JobId) -> Markup {
    html! {
        @for (action, label) in [("requeue", "Requeue"), ("delete", "Delete")] {
            form.inline method="post" action={ "/actions/" (action) } {
                (token_field(viewer))
                (named_field("topic", "topic_base64", topic.as_bytes()))
                (named_field("id", "id_base64", id.as_bytes()))
                button { (label) }
            }
            " "
        }
    }
}
