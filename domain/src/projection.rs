//! Field projection: only the fields a subscription is allowed to see ever leave the system. The
//! record row of a [`Change`] is never delivered as it is; [`delivery_payload`] builds the
//! envelope adapters receive from the projection.
//!
//! Allowed fields are names of record fields, with dots for nested objects (`customer.email`).
//! Paths are parsed once, when the projection is built, so projecting a change only walks maps.
//! Dotted paths descend through JSON objects only: an array is a leaf, so `lines.sku` never
//! matches inside an array of lines (allow `lines` to deliver the array as a whole). When one
//! allowed path contains another (`customer` and `customer.email`), the broader one wins.

use crate::change::Change;
use crate::time::Timestamp;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{json, Map, Value};
use std::cell::{Cell, OnceCell};
use std::fmt;
use thiserror::Error;

/// Deepest dotted path accepted (`a.b.c.d.e.f.g.h`).
pub const MAX_PATH_DEPTH: usize = 8;
/// Longest dotted path accepted, in bytes.
pub const MAX_PATH_LEN: usize = 256;
/// Most allowed fields in one projection.
pub const MAX_PROJECTION_FIELDS: usize = 256;

/// A dotted path into a record, split into its segments once.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FieldPath {
    segments: Vec<String>,
}

/// Why a field path is not acceptable.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PathError {
    #[error("a field path must not be empty")]
    Empty,
    #[error("field path {path:?} has an empty segment (leading, trailing or doubled '.')")]
    EmptySegment { path: String },
    #[error("field path {path:?} is {depth} levels deep; at most {max} are accepted")]
    TooDeep {
        path: String,
        depth: usize,
        max: usize,
    },
    #[error("field path {path:?} is {len} bytes long; at most {max} are accepted")]
    TooLong {
        path: String,
        len: usize,
        max: usize,
    },
    #[error("field path {path:?} contains a control character")]
    ControlCharacter { path: String },
}

impl FieldPath {
    /// Parses `a.b.c`: non-empty segments, at most [`MAX_PATH_DEPTH`] of them, no control
    /// characters, at most [`MAX_PATH_LEN`] bytes.
    pub fn parse(path: &str) -> Result<Self, PathError> {
        if path.is_empty() {
            return Err(PathError::Empty);
        }
        if path.len() > MAX_PATH_LEN {
            return Err(PathError::TooLong {
                path: path.to_owned(),
                len: path.len(),
                max: MAX_PATH_LEN,
            });
        }
        if path.chars().any(char::is_control) {
            return Err(PathError::ControlCharacter {
                path: path.to_owned(),
            });
        }
        let segments: Vec<String> = path.split('.').map(str::to_owned).collect();
        if segments.iter().any(String::is_empty) {
            return Err(PathError::EmptySegment {
                path: path.to_owned(),
            });
        }
        if segments.len() > MAX_PATH_DEPTH {
            return Err(PathError::TooDeep {
                path: path.to_owned(),
                depth: segments.len(),
                max: MAX_PATH_DEPTH,
            });
        }
        Ok(FieldPath { segments })
    }

    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// The value at this path, descending through objects only. No allocation.
    pub fn lookup<'a>(&self, record: &'a Map<String, Value>) -> Option<&'a Value> {
        let (first, rest) = self.segments.split_first()?;
        let mut value = record.get(first)?;
        for segment in rest {
            value = value.as_object()?.get(segment)?;
        }
        Some(value)
    }

    /// Whether this path is `other` or an ancestor of it (segment-wise).
    pub fn is_prefix_of(&self, other: &FieldPath) -> bool {
        other.segments.len() >= self.segments.len()
            && self
                .segments
                .iter()
                .zip(&other.segments)
                .all(|(a, b)| a == b)
    }

    /// Whether this path is the dotted name `dotted` or an ancestor of it, without allocating.
    pub fn covers_dotted(&self, dotted: &str) -> bool {
        // Segments are non-empty and hold no '.', so matching them as prefixes, one '.' apart,
        // is matching the '.'-separated parts of `dotted` one by one.
        let mut rest = dotted;
        for (i, segment) in self.segments.iter().enumerate() {
            if i > 0 {
                match rest.strip_prefix('.') {
                    Some(r) => rest = r,
                    None => return false,
                }
            }
            match rest.strip_prefix(segment.as_str()) {
                Some(r) => rest = r,
                None => return false,
            }
        }
        rest.is_empty() || rest.starts_with('.')
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.segments.join("."))
    }
}

/// The set of record fields a subscription may see, normalised: sorted, deduplicated, and with any
/// path already covered by a broader allowed path dropped.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Projection {
    fields: Vec<FieldPath>,
    /// The same fields as a tree, built once, for serialising without building a copy.
    tree: Tree,
}

/// Allowed fields by key: a key is taken whole, or narrowed to some of its own keys.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
struct Tree(Vec<Branch>);

#[derive(Clone, Debug, PartialEq, Eq)]
struct Branch {
    key: String,
    /// `,"key":`, the key as a JSON object key after a separator (escaped once, here).
    key_json: String,
    node: Node,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    Whole,
    Narrow(Tree),
}

impl Tree {
    fn of(fields: &[FieldPath]) -> Tree {
        let mut tree = Tree::default();
        for f in fields {
            tree.insert(f.segments());
        }
        tree
    }

    fn insert(&mut self, segments: &[String]) {
        let (first, rest) = segments.split_first().expect("paths are never empty");
        let position = self.0.iter().position(|b| b.key == *first);
        let branch = |node| {
            let mut key_json = String::from(",");
            push_json_str(&mut key_json, first);
            key_json.push(':');
            Branch {
                key: first.clone(),
                key_json,
                node,
            }
        };
        if rest.is_empty() {
            // The normalised projection never holds a path and its ancestor.
            match position {
                Some(i) => self.0[i].node = Node::Whole,
                None => self.0.push(branch(Node::Whole)),
            }
            return;
        }
        let i = position.unwrap_or_else(|| {
            self.0.push(branch(Node::Narrow(Tree::default())));
            self.0.len() - 1
        });
        if let Node::Narrow(sub) = &mut self.0[i].node {
            sub.insert(rest);
        }
    }

    /// Writes `map` seen through this tree as a JSON object: what [`Projection::project`]
    /// returns, as compact JSON, straight from the record's values (no copy of them). A narrowed
    /// key under which nothing is let through is omitted.
    fn write_json(&self, map: &Map<String, Value>, out: &mut String) {
        out.push('{');
        let mut first = true;
        for b in &self.0 {
            let Some(value) = map.get(&b.key) else {
                continue;
            };
            let key = &b.key_json[usize::from(first)..];
            match (value, &b.node) {
                (value, Node::Whole) => {
                    out.push_str(key);
                    push_json_value(out, value);
                }
                (Value::Object(inner), Node::Narrow(sub)) => {
                    let mark = out.len();
                    out.push_str(key);
                    let start = out.len();
                    sub.write_json(inner, out);
                    if out.len() == start + 2 {
                        // `{}`: nothing let through, so the key is omitted.
                        out.truncate(mark);
                        continue;
                    }
                }
                _ => continue,
            }
            first = false;
        }
        out.push('}');
    }
}

/// Appends `s` as a JSON string, escaped exactly as serde_json escapes it: `\"`, `\\`, the short
/// escapes `\b \t \n \f \r`, `\u00xx` (lower-case hex) for the other control characters, and
/// nothing else.
fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    let mut start = 0;
    for (i, byte) in s.bytes().enumerate() {
        if byte >= 0x20 && byte != b'"' && byte != b'\\' {
            continue;
        }
        // `i` is at an ASCII byte, so on a character boundary.
        out.push_str(&s[start..i]);
        start = i + 1;
        let short = match byte {
            b'"' => b'"',
            b'\\' => b'\\',
            0x08 => b'b',
            b'\t' => b't',
            b'\n' => b'n',
            0x0c => b'f',
            b'\r' => b'r',
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(byte >> 4)]));
                out.push(char::from(HEX[usize::from(byte & 0xf)]));
                continue;
            }
        };
        out.push('\\');
        out.push(char::from(short));
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Appends `value` as compact JSON, byte for byte as `serde_json::to_string` renders it.
fn push_json_value(out: &mut String, value: &Value) {
    use std::fmt::Write;
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        // `Number`'s `Display` is its JSON rendering (itoa for integers, the shortest
        // round-trip form for floats, as the serializer writes them).
        Value::Number(n) => write!(out, "{n}").expect("writing to a String cannot fail"),
        Value::String(s) => push_json_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_json_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_json_str(out, key);
                out.push(':');
                push_json_value(out, item);
            }
            out.push('}');
        }
    }
}

/// Why an allowed-field list is not acceptable.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ProjectionError {
    #[error("allowed field #{index}: {source}")]
    Path {
        index: usize,
        #[source]
        source: PathError,
    },
    #[error("{count} allowed fields given; at most {max} are accepted")]
    TooManyFields { count: usize, max: usize },
}

impl Projection {
    /// Builds a projection from allowed field names (dotted paths allowed).
    pub fn new<I, S>(allowed: I) -> Result<Self, ProjectionError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut fields = Vec::new();
        for (index, name) in allowed.into_iter().enumerate() {
            if index >= MAX_PROJECTION_FIELDS {
                return Err(ProjectionError::TooManyFields {
                    count: index + 1,
                    max: MAX_PROJECTION_FIELDS,
                });
            }
            fields.push(
                FieldPath::parse(name.as_ref())
                    .map_err(|source| ProjectionError::Path { index, source })?,
            );
        }
        // Sorted order puts every ancestor directly before its descendants.
        fields.sort();
        fields.dedup();
        let mut kept: Vec<FieldPath> = Vec::with_capacity(fields.len());
        for f in fields {
            if !kept.last().is_some_and(|k| k.is_prefix_of(&f)) {
                kept.push(f);
            }
        }
        let tree = Tree::of(&kept);
        Ok(Projection { fields: kept, tree })
    }

    /// The normalised allowed paths.
    pub fn fields(&self) -> &[FieldPath] {
        &self.fields
    }

    /// Whether the dotted field name is inside the allowed set (it or an ancestor is allowed).
    pub fn allows(&self, dotted: &str) -> bool {
        self.fields.iter().any(|f| f.covers_dotted(dotted))
    }

    /// The allowed fields of `record`, nested structure preserved; missing fields are omitted.
    pub fn project(&self, record: &Map<String, Value>) -> Map<String, Value> {
        let mut out = Map::new();
        for path in &self.fields {
            if let Some(value) = path.lookup(record) {
                insert_at(&mut out, path.segments(), value.clone());
            }
        }
        out
    }
}

/// Inserts `value` at `segments`, creating intermediate objects. The normalised projection never
/// holds a path and its ancestor, so an intermediate is always an object created here.
fn insert_at(out: &mut Map<String, Value>, segments: &[String], value: Value) {
    let (last, parents) = segments.split_last().expect("paths are never empty");
    let mut map = out;
    for segment in parents {
        let entry = map
            .entry(segment.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        map = entry.as_object_mut().expect("just made an object");
    }
    map.insert(last.clone(), value);
}

impl Serialize for Projection {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.fields.iter().map(|f| f.to_string()))
    }
}

impl<'de> Deserialize<'de> for Projection {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let names = Vec::<String>::deserialize(deserializer)?;
        Projection::new(names).map_err(serde::de::Error::custom)
    }
}

/// The envelope delivered to adapters for one change:
///
/// ```json
/// {"type": "order.updated", "change_id": "01H…", "record_type": "order", "record_id": "ord-42",
///  "occurred_at": "2023-11-14T22:13:20.000Z", "warehouse": "W1" | null,
///  "changed_fields": ["status"], "data": {…projected fields…}}
/// ```
///
/// `changed_fields` lists only changed fields inside the allowed set, so even the names of hidden
/// fields do not leak.
pub fn delivery_payload(change: &Change, projection: &Projection) -> Value {
    let changed: Vec<&str> = change
        .changed_fields
        .iter()
        .map(String::as_str)
        .filter(|name| projection.allows(name))
        .collect();
    json!({
        "type": change.event_code,
        "change_id": change.change_id,
        "record_type": change.record_type,
        "record_id": change.record_id,
        "occurred_at": change.occurred_at.to_rfc3339(),
        "warehouse": change.warehouse,
        "changed_fields": changed,
        "data": projection.project(&change.record),
    })
}

/// [`delivery_payload`] as JSON text, written straight from the change: byte for byte what
/// `serde_json::to_string` makes of the envelope. For one change and several subscriptions,
/// prepare the change once with [`PreparedChange`], as ingest does.
pub fn delivery_payload_json(change: &Change, projection: &Projection) -> String {
    PreparedChange::new(change).payload_json(projection)
}

/// A change ready to be written as the envelope of [`delivery_payload`] for any number of
/// subscriptions: the hot path of ingest. What does not depend on the subscription (the escaped
/// identifiers, the RFC 3339 `occurred_at`, the warehouse) is written once, on first use, and
/// copied into each subscription's payload; only `changed_fields` and `data` are written per
/// projection, straight from the change (no intermediate `Value`, no copy of the record's values).
#[derive(Debug)]
pub struct PreparedChange<'a> {
    change: &'a Change,
    /// The envelope up to and including `"changed_fields":[`.
    head: OnceCell<String>,
    /// The capacity to give the next payload: the longest one written so far, to begin with an
    /// estimate, so a payload is allocated once.
    capacity: Cell<usize>,
}

/// Room for the record's projected fields in the first payload of a change.
const DATA_CAPACITY_GUESS: usize = 160;

impl<'a> PreparedChange<'a> {
    pub fn new(change: &'a Change) -> Self {
        PreparedChange {
            change,
            head: OnceCell::new(),
            capacity: Cell::new(0),
        }
    }

    /// The change prepared.
    pub fn change(&self) -> &'a Change {
        self.change
    }

    fn head(&self) -> &str {
        self.head.get_or_init(|| {
            let c = self.change;
            let mut head = String::with_capacity(
                128 + c.event_code.len()
                    + c.change_id.as_str().len()
                    + c.record_type.len()
                    + c.record_id.len()
                    + c.warehouse.as_ref().map_or(0, String::len),
            );
            head.push_str("{\"type\":");
            push_json_str(&mut head, &c.event_code);
            head.push_str(",\"change_id\":");
            push_json_str(&mut head, c.change_id.as_str());
            head.push_str(",\"record_type\":");
            push_json_str(&mut head, &c.record_type);
            head.push_str(",\"record_id\":");
            push_json_str(&mut head, &c.record_id);
            head.push_str(",\"occurred_at\":\"");
            push_rfc3339(&mut head, c.occurred_at);
            head.push_str("\",\"warehouse\":");
            match &c.warehouse {
                Some(w) => push_json_str(&mut head, w),
                None => head.push_str("null"),
            }
            head.push_str(",\"changed_fields\":[");
            let changed: usize = c.changed_fields.iter().map(|f| f.len() + 3).sum();
            self.capacity
                .set(head.len() + changed + DATA_CAPACITY_GUESS);
            head
        })
    }

    /// [`delivery_payload_json`] of the change for `projection`.
    pub fn payload_json(&self, projection: &Projection) -> String {
        let head = self.head();
        let mut out = String::with_capacity(self.capacity.get());
        out.push_str(head);
        let mut first = true;
        for name in &self.change.changed_fields {
            if projection.allows(name) {
                if !std::mem::take(&mut first) {
                    out.push(',');
                }
                push_json_str(&mut out, name);
            }
        }
        out.push_str("],\"data\":");
        projection.tree.write_json(&self.change.record, &mut out);
        out.push('}');
        self.capacity.set(self.capacity.get().max(out.len()));
        out
    }
}

/// `t` as [`Timestamp::to_rfc3339`] renders it (`2023-11-14T22:13:20.000Z`), without going through
/// chrono and `fmt` for the years 0000 to 9999 (chrono's rendering for the others).
fn push_rfc3339(out: &mut String, t: Timestamp) {
    const FIRST: i64 = -62_167_219_200_000; // 0000-01-01T00:00:00.000Z
    const LAST: i64 = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z
    const DAY_MS: u64 = 86_400_000;
    /// "00" to "99": the shipped build (optimised for size) divides rather than multiplies, so
    /// digits are looked up in pairs.
    const PAIRS: [[u8; 2]; 100] = {
        let mut pairs = [[0; 2]; 100];
        let mut i = 0;
        while i < 100 {
            pairs[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
            i += 1;
        }
        pairs
    };
    let ms = t.millis();
    if !(FIRST..=LAST).contains(&ms) {
        out.push_str(&t.to_rfc3339());
        return;
    }
    // Unsigned from here: milliseconds since 0000-01-01.
    let since_year_0 = (ms - FIRST) as u64;
    let days = (since_year_0 / DAY_MS) as u32;
    let in_day = (since_year_0 % DAY_MS) as u32;
    // The civil date of a day count (Howard Hinnant's `civil_from_days`): eras of 400 years that
    // start on 1 March, so that the leap day ends a year. Day 0 is 0000-01-01, 60 days after the
    // era that starts on 0000-03-01 would; counting from -0400-03-01 keeps everything unsigned.
    let z = days + 146_097 - 60;
    let era = z / 146_097;
    let doe = z % 146_097; // day of era, 0..=146_096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // year of era, 0..=399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of year from 1 March, 0..=365
    let mp = (5 * doy + 2) / 153; // month from March, 0..=11
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = era * 400 + yoe + u32::from(month <= 2) - 400; // 0..=9999 here
    let (secs, millis) = (in_day / 1000, in_day % 1000);
    let (minutes, millis_hundreds) = (secs / 60, millis / 100);
    let mut text = *b"0000-00-00T00:00:00.000Z";
    for (at, value) in [
        (0, year / 100),
        (2, year % 100),
        (5, month),
        (8, day),
        (11, minutes / 60),
        (14, minutes % 60),
        (17, secs % 60),
        (21, millis % 100),
    ] {
        text[at..at + 2].copy_from_slice(&PAIRS[value as usize]);
    }
    text[20] = b'0' + millis_hundreds as u8;
    out.push_str(std::str::from_utf8(&text).expect("ASCII digits"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::tests::sample_change;
    use proptest::prelude::*;

    /// The envelope as `delivery_payload_json` wrote it before [`PreparedChange`]: serde's
    /// rendering of a borrowed envelope. The reference for the byte-for-byte tests.
    fn reference_payload_json(change: &Change, projection: &Projection) -> String {
        #[derive(Serialize)]
        struct Envelope<'a> {
            #[serde(rename = "type")]
            event_code: &'a str,
            change_id: &'a str,
            record_type: &'a str,
            record_id: &'a str,
            occurred_at: String,
            warehouse: &'a Option<String>,
            changed_fields: Vec<&'a str>,
            data: Projected<'a>,
        }
        /// Whether `map` holds anything `tree` lets through (an empty narrowing is omitted).
        fn any_present(tree: &Tree, map: &Map<String, Value>) -> bool {
            tree.0.iter().any(|b| match (map.get(&b.key), &b.node) {
                (Some(_), Node::Whole) => true,
                (Some(Value::Object(inner)), Node::Narrow(sub)) => any_present(sub, inner),
                _ => false,
            })
        }
        struct Projected<'a> {
            tree: &'a Tree,
            record: &'a Map<String, Value>,
        }
        impl Serialize for Projected<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut map = serializer.serialize_map(None)?;
                for b in &self.tree.0 {
                    match (self.record.get(&b.key), &b.node) {
                        (Some(value), Node::Whole) => map.serialize_entry(&b.key, value)?,
                        (Some(Value::Object(inner)), Node::Narrow(sub))
                            if any_present(sub, inner) =>
                        {
                            map.serialize_entry(
                                &b.key,
                                &Projected {
                                    tree: sub,
                                    record: inner,
                                },
                            )?
                        }
                        _ => {}
                    }
                }
                map.end()
            }
        }
        serde_json::to_string(&Envelope {
            event_code: &change.event_code,
            change_id: change.change_id.as_str(),
            record_type: &change.record_type,
            record_id: &change.record_id,
            occurred_at: change.occurred_at.to_rfc3339(),
            warehouse: &change.warehouse,
            changed_fields: change
                .changed_fields
                .iter()
                .map(String::as_str)
                .filter(|name| projection.allows(name))
                .collect(),
            data: Projected {
                tree: &projection.tree,
                record: &change.record,
            },
        })
        .unwrap()
    }

    #[test]
    fn escaped_keys_and_values_and_numbers_are_written_as_serde_writes_them() {
        let mut c = sample_change();
        c.event_code = "q\"b\\n\n\u{1}\u{1f}\u{7f}é😀".into();
        c.warehouse = None;
        c.changed_fields = vec!["a\"b".into(), "é.x\\y".into(), "sp ace".into()];
        c.record = json!({
            "a\"b": [1, -2, 3.5, 1e16, 1.5e-7, -0.0, 0.1, u64::MAX, i64::MIN, null, true, "\u{8}\u{c}\r"],
            "é": {"x\\y": {"nested\u{0}": "\u{2028}"}, "other": 1},
            "sp ace": {},
            "gone": {"z": 1}
        })
        .as_object()
        .unwrap()
        .clone();
        let p = Projection::new(["a\"b", "é.x\\y", "sp ace", "gone.y"]).unwrap();
        let prepared = PreparedChange::new(&c);
        let text = prepared.payload_json(&p);
        assert_eq!(text, reference_payload_json(&c, &p));
        assert_eq!(prepared.payload_json(&p), text);
        assert_eq!(parsed(&text), parsed(&delivery_payload(&c, &p).to_string()));
        assert!(!text.contains("gone"), "{text}");
    }

    /// JSON text read back, to compare with the reference envelope as values. (Both sides are
    /// read: parsing a float's shortest form is not always exact without `float_roundtrip`.)
    fn parsed(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    fn rfc3339(ms: i64) -> String {
        let mut out = String::new();
        push_rfc3339(&mut out, Timestamp(ms));
        out
    }

    #[test]
    fn rfc3339_is_chronos_rendering_at_the_edges() {
        for ms in [
            0,
            -1,
            1_700_000_000_000,
            951_782_400_000,     // 2000-02-29
            -2_203_891_200_000,  // 1900-03-01
            -62_167_219_200_000, // 0000-01-01T00:00:00.000Z
            -62_167_219_200_001, // -0001-12-31T23:59:59.999Z
            253_402_300_799_999, // 9999-12-31T23:59:59.999Z
            253_402_300_800_000, // +10000-01-01
            i64::MIN,
            i64::MAX,
        ] {
            assert_eq!(rfc3339(ms), Timestamp(ms).to_rfc3339(), "{ms}");
        }
        assert_eq!(rfc3339(1_700_000_000_000), "2023-11-14T22:13:20.000Z");
        assert_eq!(rfc3339(-62_167_219_200_000), "0000-01-01T00:00:00.000Z");
    }

    #[test]
    fn paths_are_validated() {
        assert_eq!(
            FieldPath::parse("a.b.c").unwrap().segments(),
            ["a", "b", "c"]
        );
        assert_eq!(FieldPath::parse(""), Err(PathError::Empty));
        for bad in [".a", "a.", "a..b", "."] {
            assert!(
                matches!(FieldPath::parse(bad), Err(PathError::EmptySegment { .. })),
                "{bad}"
            );
        }
        assert!(FieldPath::parse("a.b.c.d.e.f.g.h").is_ok());
        let err = FieldPath::parse("a.b.c.d.e.f.g.h.i").unwrap_err();
        assert_eq!(
            err,
            PathError::TooDeep {
                path: "a.b.c.d.e.f.g.h.i".into(),
                depth: 9,
                max: 8
            }
        );
        assert!(err.to_string().contains("at most 8"));
        assert!(matches!(
            FieldPath::parse(&"x".repeat(257)),
            Err(PathError::TooLong { .. })
        ));
        assert!(matches!(
            FieldPath::parse("a\tb"),
            Err(PathError::ControlCharacter { .. })
        ));
        assert_eq!(
            FieldPath::parse("customer.email").unwrap().to_string(),
            "customer.email"
        );
    }

    #[test]
    fn projection_keeps_only_allowed_fields_and_nesting() {
        let c = sample_change();
        let p = Projection::new([
            "status",
            "customer.email",
            "customer.address.city",
            "missing",
            "total.x",
        ])
        .unwrap();
        let out = p.project(&c.record);
        assert_eq!(
            Value::Object(out),
            json!({"status": "shipped", "customer": {"email": "ada@example.com", "address": {"city": "Oslo"}}})
        );
    }

    #[test]
    fn broader_paths_win_and_duplicates_collapse() {
        let p = Projection::new(["customer.email", "customer", "status", "status"]).unwrap();
        assert_eq!(p.fields().len(), 2);
        let out = p.project(&sample_change().record);
        assert_eq!(out["customer"], sample_change().record["customer"]);
        // "customer" must not swallow "customerX".
        let p = Projection::new(["customer", "customerX.a"]).unwrap();
        assert_eq!(p.fields().len(), 2);
    }

    #[test]
    fn null_and_false_values_are_present_and_an_empty_projection_delivers_nothing() {
        let p = Projection::new(["coupon", "gift"]).unwrap();
        assert_eq!(
            Value::Object(p.project(&sample_change().record)),
            json!({"coupon": null, "gift": false})
        );
        let none = Projection::new(Vec::<String>::new()).unwrap();
        assert!(none.project(&sample_change().record).is_empty());
    }

    #[test]
    fn projection_errors_name_the_field() {
        let err = Projection::new(["ok", "bad..path"]).unwrap_err();
        assert!(matches!(err, ProjectionError::Path { index: 1, .. }));
        assert!(err.to_string().starts_with("allowed field #1:"), "{err}");
        let many: Vec<String> = (0..=MAX_PROJECTION_FIELDS)
            .map(|i| format!("f{i}"))
            .collect();
        assert!(matches!(
            Projection::new(many),
            Err(ProjectionError::TooManyFields { .. })
        ));
    }

    #[test]
    fn projection_serializes_as_a_list_of_names() {
        let p = Projection::new(["status", "customer.email"]).unwrap();
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v, json!(["customer.email", "status"]));
        assert_eq!(serde_json::from_value::<Projection>(v).unwrap(), p);
        assert!(serde_json::from_value::<Projection>(json!(["a..b"])).is_err());
    }

    #[test]
    fn payload_is_the_envelope_never_the_row() {
        let c = sample_change();
        let p = Projection::new(["status", "customer.name"]).unwrap();
        let v = delivery_payload(&c, &p);
        assert_eq!(
            v,
            json!({
                "type": "order.updated",
                "change_id": "01HZX3Q4J8K9M0N1P2Q3R4S5T6",
                "record_type": "order",
                "record_id": "ord-42",
                "occurred_at": "2023-11-14T22:13:20.000Z",
                "warehouse": "W1",
                "changed_fields": ["status"],
                "data": {"status": "shipped", "customer": {"name": "Ada"}}
            })
        );
        let text = v.to_string();
        assert!(!text.contains("do not leak"));
        assert!(!text.contains("ada@example.com"));
        assert!(
            !text.contains("customer.email"),
            "hidden changed field names do not leak"
        );

        let mut c = c;
        c.warehouse = None;
        let p = Projection::new(["customer"]).unwrap();
        let v = delivery_payload(&c, &p);
        assert_eq!(v["warehouse"], Value::Null);
        assert_eq!(v["changed_fields"], json!(["customer.email"]));
    }

    fn arb_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(|n| json!(n)),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            any::<f64>().prop_filter_map("JSON numbers are finite", |f| {
                serde_json::Number::from_f64(f).map(Value::Number)
            }),
            "[a-z]{0,4}".prop_map(Value::String),
            arb_text().prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                prop::collection::btree_map("[a-d]", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn arb_record() -> impl Strategy<Value = Map<String, Value>> {
        prop::collection::btree_map("[a-d]", arb_value(), 0..5)
            .prop_map(|m| m.into_iter().collect())
    }

    fn arb_allowed() -> impl Strategy<Value = Vec<String>> {
        prop::collection::vec(
            prop::collection::vec("[a-d]", 1..4).prop_map(|s| s.join(".")),
            0..5,
        )
    }

    /// Every leaf path of the output, as segments. Empty objects count as leaves.
    fn leaf_paths(map: &Map<String, Value>, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        for (k, v) in map {
            prefix.push(k.clone());
            match v {
                Value::Object(inner) if !inner.is_empty() => leaf_paths(inner, prefix, out),
                _ => out.push(prefix.clone()),
            }
            prefix.pop();
        }
    }

    /// Text that needs JSON escaping often: quotes, backslashes, control characters, non-ASCII.
    fn arb_text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9._-]{1,8}",
            "[a-z\"\\\\\\x00-\\x1f\\x7f\u{e9}\u{2028}\u{1F600}]{0,6}",
        ]
    }

    fn arb_millis() -> impl Strategy<Value = i64> {
        prop_oneof![
            any::<i64>(),
            -62_167_219_200_010i64..=253_402_300_800_010,
            -86_400_000i64 * 800..=86_400_000 * 800,
        ]
    }

    proptest! {
        /// The streaming payload is exactly the reference envelope, for any record and fields.
        #[test]
        fn the_streamed_payload_equals_the_reference_envelope(
            record in arb_record(), allowed in arb_allowed()
        ) {
            let p = Projection::new(&allowed).unwrap();
            let mut change = sample_change();
            change.record = record;
            change.changed_fields = allowed.clone();
            let text = delivery_payload_json(&change, &p);
            prop_assert_eq!(&text, &reference_payload_json(&change, &p));
            prop_assert_eq!(parsed(&text), parsed(&delivery_payload(&change, &p).to_string()));
        }

        /// One prepared change serves every subscription: each payload is byte for byte the
        /// reference envelope, whatever the identifiers, time, warehouse and changed fields hold.
        #[test]
        fn a_prepared_change_writes_the_reference_envelope_for_every_projection(
            record in arb_record(),
            allowed in prop::collection::vec(arb_allowed(), 1..5),
            ids in prop::collection::vec(arb_text(), 4),
            warehouse in prop::option::of(arb_text()),
            millis in arb_millis(),
            extra_changed in prop::collection::vec(arb_text(), 0..3),
        ) {
            let mut change = sample_change();
            change.record = record;
            change.event_code = ids[0].clone();
            change.change_id = crate::ids::ChangeId::from_stored(ids[1].clone());
            change.record_type = ids[2].clone();
            change.record_id = ids[3].clone();
            change.warehouse = warehouse;
            change.occurred_at = Timestamp(millis);
            change.changed_fields = allowed.concat();
            change.changed_fields.extend(extra_changed);
            let prepared = PreparedChange::new(&change);
            for fields in &allowed {
                let p = Projection::new(fields).unwrap();
                let text = prepared.payload_json(&p);
                prop_assert_eq!(&text, &reference_payload_json(&change, &p));
                prop_assert_eq!(&text, &delivery_payload_json(&change, &p));
                prop_assert_eq!(parsed(&text), parsed(&delivery_payload(&change, &p).to_string()));
            }
        }

        #[test]
        fn rfc3339_is_chronos_rendering(millis in arb_millis()) {
            prop_assert_eq!(rfc3339(millis), Timestamp(millis).to_rfc3339());
        }

        /// `covers_dotted` is the segment-wise comparison with the '.'-separated parts.
        #[test]
        fn covers_dotted_compares_dotted_parts(path in "[ab]{1,2}(\\.[ab]{1,2}){0,2}", dotted in "[ab.]{0,8}") {
            let f = FieldPath::parse(&path).unwrap();
            let mut parts = dotted.split('.');
            let expected = f.segments().iter().all(|s| parts.next() == Some(s.as_str()));
            prop_assert_eq!(f.covers_dotted(&dotted), expected, "{} {}", path, dotted);
        }

        #[test]
        fn projection_never_leaks_a_field_outside_the_allowed_set(
            record in arb_record(), allowed in arb_allowed()
        ) {
            let p = Projection::new(&allowed).unwrap();
            let out = p.project(&record);
            let mut paths = Vec::new();
            leaf_paths(&out, &mut Vec::new(), &mut paths);
            for path in paths {
                let dotted = path.join(".");
                // The output leaf is allowed itself or lies inside an allowed subtree…
                prop_assert!(
                    p.fields().iter().any(|f| f.covers_dotted(&dotted)),
                    "{dotted} leaked; allowed {allowed:?}"
                );
                // …and holds exactly the record's value there.
                let fp = FieldPath::parse(&dotted).unwrap();
                prop_assert_eq!(fp.lookup(&out), fp.lookup(&record));
            }
            // Every allowed path present in the record is delivered.
            for f in p.fields() {
                prop_assert_eq!(f.lookup(&out), f.lookup(&record));
            }
        }
    }
}
