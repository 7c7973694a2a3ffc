//! W3C trace context for receivers (`traceparent`, version `00`): every attempt carries
//! `00-<trace id>-<parent id>-01`, so a receiver can join our attempt to its own logs.
//!
//! The trace id is the trace of the change that caused the delivery when the change carries one
//! (its `trace_id`, see [`parse_trace_id`] for the forms accepted, AWS X-Ray's included), so a
//! receiver can join our attempt to the owning application's own trace. Otherwise it is derived
//! from the change id (a ULID is 128 bits, exactly a trace id) at no stored cost. Either way every
//! attempt of every delivery of one change shares one trace. The parent id (the "span" of one
//! attempt) is derived from the delivery id and the attempt number. Neither is ever all zeros,
//! which the specification forbids. The flags are always `01` (sampled): every attempt is
//! recorded, in its delivery's attempt log, whatever the caller's sampling decided.
//!
//! Pure: ids in, header text out.

/// The header's name.
pub const HEADER: &str = "traceparent";

/// A trace id (16 bytes) and a parent id (8 bytes), both nonzero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: [u8; 16],
    pub parent_id: [u8; 8],
}

impl TraceParent {
    /// The context of attempt `attempt` of delivery `delivery_id` of the change `change_id`,
    /// in the trace the change `carried` when it is a well-formed one.
    pub fn of_attempt(
        change_id: &str,
        carried: Option<&str>,
        delivery_id: &str,
        attempt: u32,
    ) -> Self {
        TraceParent {
            trace_id: carried
                .and_then(parse_trace_id)
                .unwrap_or_else(|| trace_id(change_id)),
            parent_id: parent_id(delivery_id, attempt),
        }
    }

    /// The header's value: `00-<32 hex>-<16 hex>-01` (version 00, sampled).
    pub fn header_value(&self) -> String {
        format!(
            "00-{}-{}-01",
            to_hex(&self.trace_id),
            to_hex(&self.parent_id)
        )
    }
}

/// The trace id of the change `change_id`: its 128 bits when it is a ULID (change ids are),
/// otherwise two 64-bit FNV-1a hashes of the text; never all zeros.
pub fn trace_id(change_id: &str) -> [u8; 16] {
    let mut id = match ulid::Ulid::from_string(&change_id.to_ascii_uppercase()) {
        Ok(u) => u.to_bytes(),
        Err(_) => {
            let mut out = [0u8; 16];
            out[..8].copy_from_slice(&fnv1a(0xcbf2_9ce4_8422_2325, change_id).to_be_bytes());
            out[8..].copy_from_slice(&fnv1a(0x8422_2325_cbf2_9ce4, change_id).to_be_bytes());
            out
        }
    };
    if id == [0; 16] {
        id[15] = 1;
    }
    id
}

/// The trace id a change carries, in any form an owning application or a publisher may give it:
/// AWS X-Ray's `1-<8 hex>-<24 hex>` (its epoch seconds then 96 random bits: together, in order,
/// the 128 bits of a W3C trace id), a whole X-Ray header (`Root=1-…;Parent=…;Sampled=…`), 32 hex
/// digits, or a whole `traceparent`. Either case of the digits. `None` when it is none of these
/// or all zeros (the change id's trace is used instead).
pub fn parse_trace_id(text: &str) -> Option<[u8; 16]> {
    let text = text.trim().to_ascii_lowercase();
    let root = text
        .split(';')
        .find_map(|part| part.trim().strip_prefix("root="))
        .unwrap_or(&text);
    let parts: Vec<&str> = root.split('-').collect();
    let digits = match parts.as_slice() {
        [hex] => (*hex).to_owned(),
        ["1", seconds, random] if seconds.len() == 8 && random.len() == 24 => {
            format!("{seconds}{random}")
        }
        [version, trace, parent, flags]
            if is_hex(version, 2)
                && *version != "ff"
                && is_hex(flags, 2)
                && is_nonzero_hex(parent, 16) =>
        {
            (*trace).to_owned()
        }
        _ => return None,
    };
    if !is_nonzero_hex(&digits, 32) {
        return None;
    }
    let mut id = [0u8; 16];
    for (i, byte) in id.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(id)
}

/// The stored form of a carried trace id (32 lowercase hex digits), or `None` when `text` is not
/// one ([`parse_trace_id`]).
pub fn normalized_trace_id(text: &str) -> Option<String> {
    parse_trace_id(text).map(|id| to_hex(&id))
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn is_nonzero_hex(s: &str, len: usize) -> bool {
    is_hex(s, len) && s.bytes().any(|b| b != b'0')
}

/// The parent id of attempt `attempt` of `delivery_id`: a 64-bit FNV-1a hash, never zero.
pub fn parent_id(delivery_id: &str, attempt: u32) -> [u8; 8] {
    let hash = fnv1a(0xcbf2_9ce4_8422_2325, &format!("{delivery_id}/{attempt}"));
    (if hash == 0 { 1 } else { hash }).to_be_bytes()
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// FNV-1a: stable across builds and platforms, unlike the standard library's hasher.
fn fnv1a(seed: u64, text: &str) -> u64 {
    text.bytes().fold(seed, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Whether `value` is a well-formed version-00 `traceparent` with nonzero ids.
pub fn is_valid(value: &str) -> bool {
    let parts: Vec<&str> = value.split('-').collect();
    parts.len() == 4
        && parts[0] == "00"
        && is_nonzero_hex(parts[1], 32)
        && is_nonzero_hex(parts[2], 16)
        && is_hex(parts[3], 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHANGE: &str = "01JD5Z8KQ4V8X9W6T3R2N1M0PA";

    #[test]
    fn the_trace_id_is_the_change_ids_128_bits_in_hex() {
        let ulid = ulid::Ulid::from_string(CHANGE).unwrap();
        let t = TraceParent::of_attempt(CHANGE, None, "dlv_x", 1);
        assert_eq!(to_hex(&t.trace_id), format!("{:032x}", ulid.0));
        // Either case of the same change is the same trace.
        assert_eq!(trace_id(&CHANGE.to_ascii_lowercase()), t.trace_id);
    }

    #[test]
    fn attempts_of_one_change_share_the_trace_and_differ_in_parent() {
        let a = TraceParent::of_attempt(CHANGE, None, "dlv_a", 1);
        let b = TraceParent::of_attempt(CHANGE, None, "dlv_a", 2);
        let c = TraceParent::of_attempt(CHANGE, None, "dlv_b", 1);
        assert_eq!(a.trace_id, b.trace_id);
        assert_eq!(a.trace_id, c.trace_id);
        assert_ne!(a.parent_id, b.parent_id);
        assert_ne!(a.parent_id, c.parent_id);
        // The same attempt always has the same context.
        assert_eq!(a, TraceParent::of_attempt(CHANGE, None, "dlv_a", 1));
        let other = TraceParent::of_attempt("01JD5Z8KQ4V8X9W6T3R2N1M0PB", None, "dlv_a", 1);
        assert_ne!(a.trace_id, other.trace_id);
    }

    #[test]
    fn the_header_is_version_00_sampled_with_nonzero_ids() {
        let value = TraceParent::of_attempt(CHANGE, None, "dlv_a", 3).header_value();
        assert!(is_valid(&value), "{value}");
        assert_eq!(value.len(), 55);
        assert!(value.starts_with("00-") && value.ends_with("-01"));
        // The all-zero ULID and a text that is no ULID still give valid, nonzero ids.
        for id in ["00000000000000000000000000", "test_event_1"] {
            let v = TraceParent::of_attempt(id, None, "d", 0).header_value();
            assert!(is_valid(&v), "{v}");
        }
        assert!(!is_valid(&format!(
            "00-{}-{}-01",
            "0".repeat(32),
            "1".repeat(16)
        )));
        assert!(!is_valid("00-abc-def-01"));
    }

    #[test]
    fn an_x_ray_trace_id_maps_to_the_same_128_bits() {
        let mapped = "5759e988bd862e3fe1be46a994272793";
        for form in [
            "1-5759e988-bd862e3fe1be46a994272793",
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
            "Self=1-67891233-abcdef012345678912345678; Root=1-5759E988-BD862E3FE1BE46A994272793",
            "5759e988bd862e3fe1be46a994272793",
            "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01",
            " 00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-00 ",
        ] {
            assert_eq!(normalized_trace_id(form).as_deref(), Some(mapped), "{form}");
        }
        let carried = Some("1-5759e988-bd862e3fe1be46a994272793");
        let t = TraceParent::of_attempt(CHANGE, carried, "dlv_a", 2);
        assert_eq!(to_hex(&t.trace_id), mapped);
        assert_eq!(t.parent_id, parent_id("dlv_a", 2));
        let value = t.header_value();
        assert!(is_valid(&value), "{value}");
        assert!(value.starts_with(&format!("00-{mapped}-")));
    }

    #[test]
    fn a_malformed_or_all_zero_trace_id_is_ignored_for_the_change_ids() {
        for bad in [
            "",
            "1-00000000-000000000000000000000000",
            &"0".repeat(32),
            "1-5759e988-bd862e3fe1be46a99427279",
            "2-5759e988-bd862e3fe1be46a994272793",
            "5759e988bd862e3fe1be46a99427279g",
            "Root=;Sampled=1",
            "00-5759e988bd862e3fe1be46a994272793-0000000000000000-01",
            "ff-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01",
            "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8",
        ] {
            assert_eq!(parse_trace_id(bad), None, "{bad:?}");
            let t = TraceParent::of_attempt(CHANGE, Some(bad), "dlv_a", 1);
            assert_eq!(t, TraceParent::of_attempt(CHANGE, None, "dlv_a", 1));
        }
    }
}
