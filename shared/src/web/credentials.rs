//! Credential primitives every authenticated route uses: the bearer token of a request, hex
//! SHA-256 (tokens are stored as their hashes) and a comparison whose time does not leak where
//! two hashes differ.

use super::problem::ApiError;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

pub use crate::operations::account::token_format::{constant_time_eq, sha256_hex};

pub(crate) const INVALID_TOKEN: &str = "the bearer token is not valid";

/// The bearer token of a request (scheme case-insensitive), or a 401.
pub fn bearer(parts: &Parts) -> Result<&str, ApiError> {
    let mut values = parts.headers.get_all(AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return Err(ApiError::unauthorized(
            "this route needs `Authorization: Bearer <token>`",
        ));
    };
    let text = value
        .to_str()
        .map_err(|_| ApiError::unauthorized(INVALID_TOKEN))?;
    let (scheme, token) = text.trim().split_once(' ').ok_or_else(|| {
        ApiError::unauthorized("the Authorization header must be `Bearer <token>`")
    })?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(ApiError::unauthorized(
            "the Authorization header must be `Bearer <token>`",
        ));
    }
    Ok(token.trim())
}
