//! Resource ids: lowercase ULIDs (time-sortable), generated here for the API and the operator
//! actions alike.

/// A new resource id: a ULID in lowercase.
pub fn new_id() -> String {
    ulid::Ulid::new().to_string().to_ascii_lowercase()
}

/// The canonical (lowercase) form of a ULID, or `None` when the text is not one. Case is
/// ignored; anything that does not round-trip exactly is refused.
pub fn canonical_id(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let parsed = ulid::Ulid::from_string(&lower).ok()?;
    let canonical = parsed.to_string().to_ascii_lowercase();
    (canonical == lower).then_some(canonical)
}
