//! The one encoding of list cursors (`next_cursor` of every list route): base64url of the
//! position a list continues from (an id, a change id, a time sort key). Cursors are opaque to
//! callers; each list checks that a decoded position is one of its own.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

/// Longest position a cursor carries.
const MAX_POSITION: usize = 600;

/// The cursor of a list position.
pub fn encode(position: &str) -> String {
    URL_SAFE_NO_PAD.encode(position.as_bytes())
}

/// The position of a cursor, or `None` when it is not one this API issued.
pub fn decode(cursor: &str) -> Option<String> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor.trim()).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    (!text.is_empty() && text.len() <= MAX_POSITION && !text.chars().any(char::is_control))
        .then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_cursors_round_trip_and_refuse_nonsense() {
        let c = encode("000001700000000#01abc");
        assert!(!c.contains('#'));
        assert_eq!(decode(&c).as_deref(), Some("000001700000000#01abc"));
        assert_eq!(decode("!!"), None);
        assert_eq!(decode(""), None);
        assert_eq!(decode(&encode("a\nb")), None, "control characters");
        assert_eq!(decode(&encode(&"x".repeat(601))), None, "too long");
    }
}
