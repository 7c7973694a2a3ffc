//! The API's request limits.

/// Largest request body accepted (filters and field lists are small).
pub const MAX_BODY_BYTES: usize = 256 * 1024;
