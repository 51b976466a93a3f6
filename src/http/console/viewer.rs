//! Who is looking: logged in (a session's cookie), with the job API's Bearer header, or neither;
//! and whether they may act.

use std::collections::HashMap;

use axum::http::header::COOKIE;
use axum::http::{HeaderMap, StatusCode};

use super::fields::fields;
use super::logouts;
use super::session::{self, unix_seconds};
use crate::http::auth::bearer_ok;
use crate::http::state::AppState;

/// Who is looking.
pub(super) struct Viewer {
    /// Whether `[http] token` guards the console.
    pub(super) guarded: bool,
    /// Whether they may see bodies and act (logged in, or no token).
    pub(super) authorized: bool,
    /// The token their forms carry.
    pub(super) form_token: String,
}

/// Who is asking, and their session's cookie value ("" when none, or when it ended).
pub(super) async fn viewer(state: &AppState, headers: &HeaderMap) -> (Viewer, String) {
    let guard = &state.console.guard;
    let cookie = headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find_map(|value| session::cookie(value, session::COOKIE))
        .unwrap_or_default();
    let session = match guard.valid(cookie, unix_seconds()) {
        // One that Redis cannot tell was not ended (while it does not answer) counts as ended.
        Some(signed) if matches!(logouts::ended(&state.redis, signed.id).await, Ok(false)) => {
            cookie.to_string()
        }
        _ => String::new(),
    };
    let authorized = !guard.guarded() || !session.is_empty() || bearer_ok(state, headers);
    let viewer = Viewer {
        guarded: guard.guarded(),
        authorized,
        form_token: guard.form_token(&session),
    };
    (viewer, session)
}

/// Why an action is refused: its status, what to say, where to go from there.
pub(super) type Refusal = (StatusCode, &'static str, &'static str);

/// An action's form, if `viewer` (of `session`) may act: with `[http] token` set, from a session
/// (or with the token as a Bearer header); and, unless it has the Bearer header, with its
/// session's form token.
pub(super) fn allowed(
    state: &AppState,
    headers: &HeaderMap,
    (viewer, session): (&Viewer, &str),
    body: &[u8],
) -> Result<HashMap<String, String>, Refusal> {
    let fields = fields(body);
    if !viewer.authorized {
        let message = "Log in first: with [http] token set, actions need it.";
        return Err((StatusCode::UNAUTHORIZED, message, "/login"));
    }
    let given = fields.get("form_token").map_or("", String::as_str);
    if !bearer_ok(state, headers) && !state.console.guard.form_token_is(session, given) {
        let message = "This form did not come from this console's pages (or its session ended): \
                       open the page again and retry.";
        return Err((StatusCode::FORBIDDEN, message, "/"));
    }
    Ok(fields)
}
