//! Authentication with `[http] token`: the job API's Bearer header, and the constant-time
//! comparison the console's login uses too.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use super::reply::refuse;
use super::state::AppState;

/// With `[http] token` set, the job API wants `Authorization: Bearer <token>`.
pub(super) async fn authorize(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    if state.token.is_some() && !bearer_ok(&state, request.headers()) {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "missing or wrong token: send Authorization: Bearer <token> ([http] token)",
        );
    }
    next.run(request).await
}

/// Whether the request carries `Authorization: Bearer <token>` with `[http] token` (false when
/// none is set).
pub(super) fn bearer_ok(state: &AppState, headers: &HeaderMap) -> bool {
    let Some(token) = &state.token else {
        return false;
    };
    headers
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(bearer)
        .is_some_and(|given| same(given.as_bytes(), token.as_bytes()))
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in any case, RFC 7235).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Compares `given` with the `secret` (never empty) in a time that depends on neither where they
/// first differ nor the secret's length, so timing tells nothing about a guess.
pub(super) fn same(given: &[u8], secret: &[u8]) -> bool {
    let differ = given
        .iter()
        .enumerate()
        .fold(given.len() ^ secret.len(), |differ, (index, byte)| {
            differ | usize::from(byte ^ secret[index % secret.len()])
        });
    differ == 0
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"s3cret", b"s3cret"));
        assert!(!same(b"s3cret", b"s3creT"));
        assert!(!same(b"s3cre", b"s3cret"));
    }
}
