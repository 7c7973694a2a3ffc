//! The one text form of list cursors (`next_cursor` of every list route): the position a list
//! continues from, written with URL-safe characters only. A position is made of ids (ASCII
//! letters, digits, `-`, `_`) and times (digits) joined by the key-part separator `#` (written
//! `.` in a cursor) and, in the operators' attention queue, `/` (written `~`). Each list states
//! the grammar of its own positions (next to the list, and as a pattern of `openapi.yaml`) and
//! accepts every position of that grammar, whether or not an item sits there: a list continues
//! after a position, it does not look it up.
//!
//! Cursors issued before this form (base64url of the position) are refused once (`422`, the
//! caller starts the list again), unless the old text happens to be of the new form, when the
//! list continues after that position; a cursor names only where to continue, never what may
//! be read, so either is harmless.

use crate::ids::is_id_text;

/// Longest cursor.
pub(crate) const MAX_CURSOR: usize = 600;

/// The cursor of a list position.
pub fn encode(position: &str) -> String {
    position.replace('#', ".").replace('/', "~")
}

/// The position of a cursor, or `None` when it is not of the cursor form at all (each list then
/// checks the position's grammar).
pub fn decode(cursor: &str) -> Option<String> {
    (!cursor.is_empty()
        && cursor.len() <= MAX_CURSOR
        && cursor
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~')))
    .then(|| cursor.replace('.', "#").replace('~', "/"))
}

/// A cursor of several parts (times, ids), joined by `.`.
pub fn join(parts: &[&str]) -> String {
    parts.join(".")
}

/// The parts of a cursor of `n` parts (`.`-separated), or `None`.
pub fn parts(cursor: &str, n: usize) -> Option<Vec<&str>> {
    let parts: Vec<&str> = cursor.split('.').collect();
    (parts.len() == n).then_some(parts)
}

/// Whether `text` is a cursor's time: fifteen digits (milliseconds, zero-padded).
pub(crate) fn is_time(text: &str) -> bool {
    text.len() == 15 && text.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `text` is a cursor's id ([`is_id_text`]).
pub(crate) fn is_id(text: &str) -> bool {
    is_id_text(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_cursors_round_trip_and_refuse_nonsense() {
        let c = encode("000001700000000#01abc/key_1");
        assert_eq!(c, "000001700000000.01abc~key_1");
        assert_eq!(decode(&c).as_deref(), Some("000001700000000#01abc/key_1"));
        for bad in ["", "!!", "a b", "a#b", "a/b", "é", "a\nb", "a=", "a+b"] {
            assert_eq!(decode(bad), None, "{bad:?}");
        }
        assert_eq!(decode(&"x".repeat(MAX_CURSOR + 1)), None, "too long");
        assert!(decode(&"x".repeat(MAX_CURSOR)).is_some());
    }

    #[test]
    fn times_and_ids_have_their_forms() {
        assert!(is_time("000000000000000") && is_time("999999999999999"));
        for bad in ["", "00000000000000", "0000000000000000", "00000000000000a"] {
            assert!(!is_time(bad), "{bad:?}");
        }
        assert!(is_id("01H-x_Y") && !is_id("") && !is_id("a.b") && !is_id(&"a".repeat(65)));
    }
}
