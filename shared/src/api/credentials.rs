//! Credential primitives every authenticated route uses: the bearer token of a request, hex
//! SHA-256 (tokens are stored as their hashes) and a comparison whose time does not leak where
//! two hashes differ.

use super::problem::ApiError;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use sha2::{Digest, Sha256};

/// Hex SHA-256 of `text`.
pub fn sha256_hex(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// Equality whose time does not depend on where the inputs differ (only on their lengths, which
/// are public: both sides are hex SHA-256 digests).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

pub const INVALID_TOKEN: &str = "the bearer token is not valid";

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
