//! Field projection: only the fields a subscription is allowed to see ever leave the system. The
//! record row of a [`Change`] is never delivered as it is; [`delivery_payload`] builds the
//! envelope adapters receive from the projection.
//!
//! Allowed fields are names of record fields, with dots for nested objects (`customer.email`).
//! Paths are parsed once, when the projection is built, so projecting a change only walks maps.
//! Dotted paths descend through JSON objects only: an array is a leaf, so `lines.sku` never
//! matches inside an array of lines (allow `lines` to deliver the array as a whole). When one
//! allowed path contains another (`customer` and `customer.email`), the broader one wins.

use crate::domain::change::Change;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{json, Map, Value};
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
        let mut parts = dotted.split('.');
        for segment in &self.segments {
            match parts.next() {
                Some(p) if p == segment => {}
                _ => return false,
            }
        }
        true
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
struct Tree(Vec<(String, Node)>);

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
        let position = self.0.iter().position(|(k, _)| k == first);
        if rest.is_empty() {
            // The normalised projection never holds a path and its ancestor.
            match position {
                Some(i) => self.0[i].1 = Node::Whole,
                None => self.0.push((first.clone(), Node::Whole)),
            }
            return;
        }
        let i = position.unwrap_or_else(|| {
            self.0.push((first.clone(), Node::Narrow(Tree::default())));
            self.0.len() - 1
        });
        if let Node::Narrow(sub) = &mut self.0[i].1 {
            sub.insert(rest);
        }
    }

    /// Whether `map` holds anything this tree lets through (an empty narrowing is omitted).
    fn any_present(&self, map: &Map<String, Value>) -> bool {
        self.0.iter().any(|(k, node)| match (map.get(k), node) {
            (Some(_), Node::Whole) => true,
            (Some(Value::Object(inner)), Node::Narrow(sub)) => sub.any_present(inner),
            _ => false,
        })
    }
}

/// A record seen through a projection: serialises as [`Projection::project`] would return it,
/// straight from the record's values.
struct Projected<'a> {
    tree: &'a Tree,
    record: &'a Map<String, Value>,
}

impl Serialize for Projected<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        for (key, node) in &self.tree.0 {
            match (self.record.get(key), node) {
                (Some(value), Node::Whole) => map.serialize_entry(key, value)?,
                (Some(Value::Object(inner)), Node::Narrow(sub)) if sub.any_present(inner) => map
                    .serialize_entry(
                        key,
                        &Projected {
                            tree: sub,
                            record: inner,
                        },
                    )?,
                _ => {}
            }
        }
        map.end()
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

/// The envelope of [`delivery_payload`], borrowed from the change.
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

/// [`delivery_payload`] as JSON text, written straight from the change: the hot path of ingest
/// (no intermediate `Value`, no copy of the record's values).
pub fn delivery_payload_json(change: &Change, projection: &Projection) -> String {
    let envelope = Envelope {
        event_code: &change.event_code,
        change_id: &change.change_id,
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
    };
    serde_json::to_string(&envelope).expect("a JSON value always serialises to a string")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::change::tests::sample_change;
    use proptest::prelude::*;

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
            "[a-z]{0,4}".prop_map(Value::String),
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
            let streamed: Value = serde_json::from_str(&delivery_payload_json(&change, &p)).unwrap();
            prop_assert_eq!(streamed, delivery_payload(&change, &p));
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
