//! Change-time subscription filters: which changes a subscription receives.
//!
//! Users post filters as JSON; the same JSON is stored with the subscription. The grammar:
//!
//! ```json
//! {"all": [
//!   {"field": "event_code", "in": ["order.created", "order.updated"]},
//!   {"field": "record.total", "gt": 100},
//!   {"not": {"field": "warehouse", "eq": "W2"}},
//!   {"changed": "status"}
//! ]}
//! ```
//!
//! * **Combinators**: `{"all": [..]}` (every condition), `{"any": [..]}` (at least one),
//!   `{"not": {..}}`. Lists must not be empty.
//! * **Field conditions**: `{"field": F, OP: operand}` with exactly one operator. `F` is
//!   `event_code`, `warehouse`, `record_type`, `record_id` or `record.<path>`, a dotted path into
//!   nested objects of the record row (arrays are leaves).
//! * **Operators**: `eq`, `ne`, `in`, `not_in` (operands: string, number, boolean or null; the four
//!   top-level fields are strings, so only string operands are accepted for them), `gt`, `gte`,
//!   `lt`, `lte` (number or string operand), `exists` (boolean operand).
//! * **Changed**: `{"changed": "status"}` holds when `status` is among the change's changed fields,
//!   or a field under it (`customer` holds when `customer.email` changed).
//! * `{}` or `null` is the empty filter, [`Filter::Always`].
//!
//! Semantics:
//! * Numbers compare numerically (`100` equals `100.0`); there is no coercion between types: the
//!   string `"100"` never equals the number `100`, and `gt` between a string and a number is false.
//! * Strings order lexicographically by Unicode code point (byte order of UTF-8), which orders
//!   ISO-8601 timestamps of one format chronologically, but not `"10" < "9"`.
//! * A **missing** field (absent key, absent warehouse, or a path through a non-object) never
//!   satisfies `eq`, `in`, `gt`, `gte`, `lt` or `lte`. `ne` is exactly `not eq` and `not_in` exactly
//!   `not in`, so a missing field **does** satisfy `ne` and `not_in`: "not from warehouse W2" holds
//!   for a change without a warehouse. Use `all` with `exists` to require presence.
//! * `exists: true` holds when the field is present and not JSON `null`; `exists: false` holds
//!   otherwise.
//! * A field holding an array or object equals no scalar operand.
//!
//! Limits: at most [`MAX_DEPTH`] levels of nesting, [`MAX_NODES`] conditions in all (combinators
//! count), [`MAX_LIST_LEN`] values in an `in`/`not_in` list. Paths are split at parse time, so
//! matching a change walks the tree without allocating.

use crate::change::Change;
use crate::projection::{FieldPath, PathError};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Number, Value};
use std::cmp::Ordering;
use thiserror::Error;

/// Deepest nesting accepted (a single condition is one level).
pub const MAX_DEPTH: usize = 8;
/// Most conditions (combinators included) in one filter.
pub const MAX_NODES: usize = 64;
/// Most values in one `in` / `not_in` list.
pub const MAX_LIST_LEN: usize = 100;

const OPERATORS: &str = "eq, ne, in, not_in, gt, gte, lt, lte, exists";
const FIELD_ROOTS: &str = "event_code, warehouse, record_type, record_id or record.<path>";

/// A parsed subscription filter.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Filter {
    /// No filter: every change matches.
    #[default]
    Always,
    /// Changes matching the condition.
    Where(Condition),
}

/// A parsed condition tree (opaque; build it with [`Filter::parse`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Condition(Node);

#[derive(Clone, Debug, PartialEq)]
enum Node {
    All(Vec<Node>),
    Any(Vec<Node>),
    Not(Box<Node>),
    Changed(String),
    Test { field: Field, op: Op },
}

#[derive(Clone, Debug, PartialEq)]
enum Field {
    EventCode,
    Warehouse,
    RecordType,
    RecordId,
    Record(FieldPath),
}

#[derive(Clone, Debug, PartialEq)]
enum Op {
    Eq(Value),
    Ne(Value),
    In(Vec<Value>),
    NotIn(Vec<Value>),
    Gt(Value),
    Gte(Value),
    Lt(Value),
    Lte(Value),
    Exists(bool),
}

/// Why a posted filter is refused. `at` locates the offending part (`$`, `$.all[1].not`, …).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FilterError {
    #[error("{at}: expected a condition object, found {found}")]
    NotAnObject { at: String, found: &'static str },
    #[error("{at}: empty condition object; omit the filter to match every change")]
    EmptyCondition { at: String },
    #[error("{at}: unknown key `{key}`; a condition is {{\"all\": [..]}}, {{\"any\": [..]}}, {{\"not\": {{..}}}}, {{\"changed\": \"name\"}} or {{\"field\": \"..\", \"<operator>\": ..}}")]
    UnknownKey { at: String, key: String },
    #[error("{at}: `{key}` must be the only key of its condition object")]
    MixedKeys { at: String, key: String },
    #[error("{at}: unknown operator `{op}`; expected one of {OPERATORS}")]
    UnknownOperator { at: String, op: String },
    #[error("{at}: the condition on `{field}` has no operator; add one of {OPERATORS}")]
    MissingOperator { at: String, field: String },
    #[error("{at}: the condition has several operators ({ops}); use one per condition and combine conditions with all/any")]
    SeveralOperators { at: String, ops: String },
    #[error("{at}: unknown field `{field}`; expected {FIELD_ROOTS}")]
    UnknownField { at: String, field: String },
    #[error("{at}: invalid field path: {source}")]
    InvalidPath {
        at: String,
        #[source]
        source: PathError,
    },
    #[error("{at}: `{op}` needs {expected}, found {found}")]
    TypeMismatch {
        at: String,
        op: &'static str,
        expected: &'static str,
        found: &'static str,
    },
    #[error("{at}: `{op}` needs at least one value")]
    EmptyList { at: String, op: &'static str },
    #[error("{at}: `{op}` lists {len} values; at most {MAX_LIST_LEN} are accepted")]
    ListTooLong {
        at: String,
        op: &'static str,
        len: usize,
    },
    #[error("{at}: the filter nests deeper than {MAX_DEPTH} levels")]
    TooDeep { at: String },
    #[error("the filter has more than {MAX_NODES} conditions")]
    TooManyNodes,
}

impl Filter {
    /// Parses a posted or stored filter. `null` and `{}` give [`Filter::Always`].
    pub fn parse(value: &Value) -> Result<Filter, FilterError> {
        match value {
            Value::Null => Ok(Filter::Always),
            Value::Object(map) if map.is_empty() => Ok(Filter::Always),
            _ => {
                let mut count = 0;
                parse_node(value, "$", 1, &mut count).map(|n| Filter::Where(Condition(n)))
            }
        }
    }

    /// The canonical JSON form (what [`Filter::parse`] reads back to an equal filter).
    pub fn to_json(&self) -> Value {
        match self {
            Filter::Always => Value::Object(Map::new()),
            Filter::Where(Condition(node)) => node_to_json(node),
        }
    }

    pub fn is_always(&self) -> bool {
        matches!(self, Filter::Always)
    }

    /// Whether `change` passes the filter. Does not allocate.
    pub fn matches(&self, change: &Change) -> bool {
        match self {
            Filter::Always => true,
            Filter::Where(Condition(node)) => eval(node, change),
        }
    }
}

impl Serialize for Filter {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Filter {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Filter::parse(&value).map_err(serde::de::Error::custom)
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn parse_node(
    value: &Value,
    at: &str,
    depth: usize,
    count: &mut usize,
) -> Result<Node, FilterError> {
    let map = enter_node(value, at, depth, count)?;
    for key in ["all", "any", "not", "changed"] {
        if let Some(inner) = map.get(key) {
            if map.len() > 1 {
                return Err(FilterError::MixedKeys {
                    at: at.to_owned(),
                    key: key.to_owned(),
                });
            }
            return match key {
                "all" => parse_list_node("all", inner, at, depth, count),
                "any" => parse_list_node("any", inner, at, depth, count),
                "not" => Ok(Node::Not(Box::new(parse_node(
                    inner,
                    &format!("{at}.not"),
                    depth + 1,
                    count,
                )?))),
                _ => parse_changed(inner, at),
            };
        }
    }
    parse_test(map, at)
}

/// Counts the node against the depth and size limits and checks that it is a non-empty object.
fn enter_node<'v>(
    value: &'v Value,
    at: &str,
    depth: usize,
    count: &mut usize,
) -> Result<&'v Map<String, Value>, FilterError> {
    if depth > MAX_DEPTH {
        return Err(FilterError::TooDeep { at: at.to_owned() });
    }
    *count += 1;
    if *count > MAX_NODES {
        return Err(FilterError::TooManyNodes);
    }
    let map = match value {
        Value::Object(map) => map,
        other => {
            return Err(FilterError::NotAnObject {
                at: at.to_owned(),
                found: type_name(other),
            })
        }
    };
    if map.is_empty() {
        return Err(FilterError::EmptyCondition { at: at.to_owned() });
    }
    Ok(map)
}

/// `{"all": [...]}` or `{"any": [...]}`: a non-empty array of conditions.
fn parse_list_node(
    op: &'static str,
    inner: &Value,
    at: &str,
    depth: usize,
    count: &mut usize,
) -> Result<Node, FilterError> {
    let items = match inner {
        Value::Array(items) => items,
        other => {
            return Err(FilterError::TypeMismatch {
                at: at.to_owned(),
                op,
                expected: "an array of conditions",
                found: type_name(other),
            })
        }
    };
    if items.is_empty() {
        return Err(FilterError::EmptyList {
            at: at.to_owned(),
            op,
        });
    }
    let nodes = items
        .iter()
        .enumerate()
        .map(|(i, item)| parse_node(item, &format!("{at}.{op}[{i}]"), depth + 1, count))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(if op == "all" {
        Node::All(nodes)
    } else {
        Node::Any(nodes)
    })
}

/// `{"changed": "name"}`: a non-empty field name.
fn parse_changed(inner: &Value, at: &str) -> Result<Node, FilterError> {
    match inner {
        Value::String(name) if !name.is_empty() => Ok(Node::Changed(name.clone())),
        other => Err(FilterError::TypeMismatch {
            at: at.to_owned(),
            op: "changed",
            expected: "a non-empty field name",
            found: if other.is_string() {
                "an empty string"
            } else {
                type_name(other)
            },
        }),
    }
}

/// `{"field": "...", "<op>": operand}`: a test of one field with exactly one operator.
fn parse_test(map: &Map<String, Value>, at: &str) -> Result<Node, FilterError> {
    let Some(field_value) = map.get("field") else {
        let key = map.keys().next().expect("map is not empty");
        return Err(if is_operator(key) {
            FilterError::MissingOperator {
                at: at.to_owned(),
                field: "(no `field` key)".to_owned(),
            }
        } else {
            FilterError::UnknownKey {
                at: at.to_owned(),
                key: key.clone(),
            }
        });
    };
    let field_name = field_value
        .as_str()
        .ok_or_else(|| FilterError::TypeMismatch {
            at: at.to_owned(),
            op: "field",
            expected: "a field name string",
            found: type_name(field_value),
        })?;
    let field = parse_field(field_name, at)?;
    let (op_name, operand) = single_operator(map, field_name, at)?;
    let op = parse_op(op_name, operand, &field, at)?;
    Ok(Node::Test { field, op })
}

/// The one key beside `field`; none or several is an error.
fn single_operator<'m>(
    map: &'m Map<String, Value>,
    field_name: &str,
    at: &str,
) -> Result<(&'m str, &'m Value), FilterError> {
    let mut ops = map.iter().filter(|(k, _)| k.as_str() != "field");
    let Some((op_name, operand)) = ops.next() else {
        return Err(FilterError::MissingOperator {
            at: at.to_owned(),
            field: field_name.to_owned(),
        });
    };
    let others: Vec<&str> = ops.map(|(k, _)| k.as_str()).collect();
    if !others.is_empty() {
        let mut all = vec![op_name.as_str()];
        all.extend(others);
        if let Some(unknown) = all.iter().find(|k| !is_operator(k)) {
            return Err(FilterError::UnknownOperator {
                at: at.to_owned(),
                op: (*unknown).to_owned(),
            });
        }
        return Err(FilterError::SeveralOperators {
            at: at.to_owned(),
            ops: all.join(", "),
        });
    }
    Ok((op_name.as_str(), operand))
}

fn is_operator(key: &str) -> bool {
    matches!(
        key,
        "eq" | "ne" | "in" | "not_in" | "gt" | "gte" | "lt" | "lte" | "exists"
    )
}

fn parse_field(name: &str, at: &str) -> Result<Field, FilterError> {
    Ok(match name {
        "event_code" => Field::EventCode,
        "warehouse" => Field::Warehouse,
        "record_type" => Field::RecordType,
        "record_id" => Field::RecordId,
        "record" => {
            return Err(FilterError::InvalidPath {
                at: at.to_owned(),
                source: PathError::Empty,
            })
        }
        _ => match name.strip_prefix("record.") {
            Some(path) => Field::Record(FieldPath::parse(path).map_err(|source| {
                FilterError::InvalidPath {
                    at: at.to_owned(),
                    source,
                }
            })?),
            None => {
                return Err(FilterError::UnknownField {
                    at: at.to_owned(),
                    field: name.to_owned(),
                })
            }
        },
    })
}

fn parse_op(name: &str, operand: &Value, field: &Field, at: &str) -> Result<Op, FilterError> {
    let text = !matches!(field, Field::Record(_));
    Ok(match name {
        "eq" => Op::Eq(scalar_operand("eq", operand, text, at)?),
        "ne" => Op::Ne(scalar_operand("ne", operand, text, at)?),
        "in" => Op::In(list_operand("in", operand, text, at)?),
        "not_in" => Op::NotIn(list_operand("not_in", operand, text, at)?),
        "gt" => Op::Gt(ordered_operand("gt", operand, text, at)?),
        "gte" => Op::Gte(ordered_operand("gte", operand, text, at)?),
        "lt" => Op::Lt(ordered_operand("lt", operand, text, at)?),
        "lte" => Op::Lte(ordered_operand("lte", operand, text, at)?),
        "exists" => Op::Exists(operand.as_bool().ok_or_else(|| FilterError::TypeMismatch {
            at: at.to_owned(),
            op: "exists",
            expected: "true or false",
            found: type_name(operand),
        })?),
        other => {
            return Err(FilterError::UnknownOperator {
                at: at.to_owned(),
                op: other.to_owned(),
            })
        }
    })
}

/// An operand compared for equality: a string on text fields, any scalar on record paths.
fn scalar_operand(op: &'static str, v: &Value, text: bool, at: &str) -> Result<Value, FilterError> {
    let ok = if text {
        v.is_string()
    } else {
        !(v.is_array() || v.is_object())
    };
    if ok {
        Ok(v.clone())
    } else {
        Err(FilterError::TypeMismatch {
            at: at.to_owned(),
            op,
            expected: if text {
                "a string (this field is text)"
            } else {
                "a string, number, boolean or null"
            },
            found: type_name(v),
        })
    }
}

/// An operand compared for order: a string on text fields, a number or string on record paths.
fn ordered_operand(
    op: &'static str,
    v: &Value,
    text: bool,
    at: &str,
) -> Result<Value, FilterError> {
    let ok = if text {
        v.is_string()
    } else {
        v.is_string() || v.is_number()
    };
    if ok {
        Ok(v.clone())
    } else {
        Err(FilterError::TypeMismatch {
            at: at.to_owned(),
            op,
            expected: if text {
                "a string (this field is text)"
            } else {
                "a number or a string"
            },
            found: type_name(v),
        })
    }
}

/// A non-empty, bounded array of scalar operands.
fn list_operand(
    op: &'static str,
    v: &Value,
    text: bool,
    at: &str,
) -> Result<Vec<Value>, FilterError> {
    let items = v.as_array().ok_or_else(|| FilterError::TypeMismatch {
        at: at.to_owned(),
        op,
        expected: "an array of values",
        found: type_name(v),
    })?;
    if items.is_empty() {
        return Err(FilterError::EmptyList {
            at: at.to_owned(),
            op,
        });
    }
    if items.len() > MAX_LIST_LEN {
        return Err(FilterError::ListTooLong {
            at: at.to_owned(),
            op,
            len: items.len(),
        });
    }
    items
        .iter()
        .map(|item| scalar_operand(op, item, text, at))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Serialization
// ---------------------------------------------------------------------------------------------

fn node_to_json(node: &Node) -> Value {
    let mut map = Map::new();
    match node {
        Node::All(nodes) => {
            map.insert(
                "all".into(),
                Value::Array(nodes.iter().map(node_to_json).collect()),
            );
        }
        Node::Any(nodes) => {
            map.insert(
                "any".into(),
                Value::Array(nodes.iter().map(node_to_json).collect()),
            );
        }
        Node::Not(inner) => {
            map.insert("not".into(), node_to_json(inner));
        }
        Node::Changed(name) => {
            map.insert("changed".into(), Value::String(name.clone()));
        }
        Node::Test { field, op } => {
            let field_name = match field {
                Field::EventCode => "event_code".to_owned(),
                Field::Warehouse => "warehouse".to_owned(),
                Field::RecordType => "record_type".to_owned(),
                Field::RecordId => "record_id".to_owned(),
                Field::Record(path) => format!("record.{path}"),
            };
            map.insert("field".into(), Value::String(field_name));
            let (name, operand) = match op {
                Op::Eq(v) => ("eq", v.clone()),
                Op::Ne(v) => ("ne", v.clone()),
                Op::In(vs) => ("in", Value::Array(vs.clone())),
                Op::NotIn(vs) => ("not_in", Value::Array(vs.clone())),
                Op::Gt(v) => ("gt", v.clone()),
                Op::Gte(v) => ("gte", v.clone()),
                Op::Lt(v) => ("lt", v.clone()),
                Op::Lte(v) => ("lte", v.clone()),
                Op::Exists(b) => ("exists", Value::Bool(*b)),
            };
            map.insert(name.into(), operand);
        }
    }
    Value::Object(map)
}

// ---------------------------------------------------------------------------------------------
// Evaluation (no allocation)
// ---------------------------------------------------------------------------------------------

/// A field's value as found in the change.
#[derive(Clone, Copy)]
enum Found<'a> {
    Text(&'a str),
    Json(&'a Value),
}

fn eval(node: &Node, change: &Change) -> bool {
    match node {
        Node::All(nodes) => nodes.iter().all(|n| eval(n, change)),
        Node::Any(nodes) => nodes.iter().any(|n| eval(n, change)),
        Node::Not(inner) => !eval(inner, change),
        Node::Changed(name) => change.changed_fields.iter().any(|f| {
            f == name
                || f.strip_prefix(name.as_str())
                    .is_some_and(|rest| rest.starts_with('.'))
        }),
        Node::Test { field, op } => {
            let found = lookup(field, change);
            match op {
                Op::Eq(v) => found.is_some_and(|f| equals(f, v)),
                Op::Ne(v) => !found.is_some_and(|f| equals(f, v)),
                Op::In(vs) => found.is_some_and(|f| vs.iter().any(|v| equals(f, v))),
                Op::NotIn(vs) => !found.is_some_and(|f| vs.iter().any(|v| equals(f, v))),
                Op::Gt(v) => compare(found, v).is_some_and(|o| o == Ordering::Greater),
                Op::Gte(v) => compare(found, v).is_some_and(|o| o != Ordering::Less),
                Op::Lt(v) => compare(found, v).is_some_and(|o| o == Ordering::Less),
                Op::Lte(v) => compare(found, v).is_some_and(|o| o != Ordering::Greater),
                Op::Exists(want) => {
                    let present = !matches!(found, None | Some(Found::Json(Value::Null)));
                    present == *want
                }
            }
        }
    }
}

fn lookup<'a>(field: &Field, change: &'a Change) -> Option<Found<'a>> {
    match field {
        Field::EventCode => Some(Found::Text(&change.event_code)),
        Field::Warehouse => change.warehouse.as_deref().map(Found::Text),
        Field::RecordType => Some(Found::Text(&change.record_type)),
        Field::RecordId => Some(Found::Text(&change.record_id)),
        Field::Record(path) => path.lookup(&change.record).map(Found::Json),
    }
}

fn equals(found: Found<'_>, operand: &Value) -> bool {
    match (found, operand) {
        (Found::Text(s), Value::String(o)) => s == o,
        (Found::Text(_), _) => false,
        (Found::Json(Value::String(s)), Value::String(o)) => s == o,
        (Found::Json(Value::Number(a)), Value::Number(b)) => {
            number_cmp(a, b) == Some(Ordering::Equal)
        }
        (Found::Json(Value::Bool(a)), Value::Bool(b)) => a == b,
        (Found::Json(Value::Null), Value::Null) => true,
        _ => false,
    }
}

fn compare(found: Option<Found<'_>>, operand: &Value) -> Option<Ordering> {
    match (found?, operand) {
        (Found::Text(s), Value::String(o)) => Some(s.cmp(o.as_str())),
        (Found::Json(Value::String(s)), Value::String(o)) => Some(s.as_str().cmp(o.as_str())),
        (Found::Json(Value::Number(a)), Value::Number(b)) => number_cmp(a, b),
        _ => None,
    }
}

/// Numeric order: exact for integers (i64 and u64 alike), IEEE order otherwise.
fn number_cmp(a: &Number, b: &Number) -> Option<Ordering> {
    fn int(n: &Number) -> Option<i128> {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    }
    match (int(a), int(b)) {
        (Some(x), Some(y)) => Some(x.cmp(&y)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::tests::sample_change;
    use proptest::prelude::*;
    use serde_json::json;

    fn f(v: Value) -> Filter {
        Filter::parse(&v).unwrap_or_else(|e| panic!("{v}: {e}"))
    }

    fn holds(v: Value) -> bool {
        f(v).matches(&sample_change())
    }

    fn err(v: Value) -> FilterError {
        Filter::parse(&v).expect_err(&v.to_string())
    }

    #[test]
    fn the_documented_example_matches() {
        let example = json!({"all": [
            {"field": "event_code", "in": ["order.created", "order.updated"]},
            {"field": "record.total", "gt": 100},
            {"not": {"field": "warehouse", "eq": "W2"}},
            {"changed": "status"}
        ]});
        assert!(holds(example.clone()));
        let mut c = sample_change();
        c.warehouse = Some("W2".into());
        assert!(!f(example).matches(&c));
    }

    #[test]
    fn always() {
        for v in [Value::Null, json!({})] {
            let filter = Filter::parse(&v).unwrap();
            assert_eq!(filter, Filter::Always);
            assert!(filter.is_always());
            assert!(filter.matches(&sample_change()));
        }
        assert_eq!(Filter::default(), Filter::Always);
        assert_eq!(Filter::Always.to_json(), json!({}));
    }

    #[test]
    fn eq_and_ne() {
        assert!(holds(json!({"field": "event_code", "eq": "order.updated"})));
        assert!(!holds(
            json!({"field": "event_code", "eq": "order.created"})
        ));
        assert!(holds(json!({"field": "record_type", "eq": "order"})));
        assert!(holds(json!({"field": "record_id", "eq": "ord-42"})));
        assert!(holds(json!({"field": "warehouse", "eq": "W1"})));
        assert!(holds(json!({"field": "record.status", "eq": "shipped"})));
        assert!(holds(
            json!({"field": "record.customer.address.city", "eq": "Oslo"})
        ));
        assert!(holds(json!({"field": "record.total", "eq": 250.5})));
        assert!(
            holds(json!({"field": "record.lines", "eq": 3.0})),
            "numbers compare numerically"
        );
        assert!(
            !holds(json!({"field": "record.lines", "eq": "3"})),
            "no coercion"
        );
        assert!(holds(json!({"field": "record.gift", "eq": false})));
        assert!(holds(json!({"field": "record.coupon", "eq": null})));
        assert!(
            !holds(json!({"field": "record.customer", "eq": "Ada"})),
            "objects equal no scalar"
        );
        assert!(
            !holds(json!({"field": "record.missing", "eq": null})),
            "missing is not null"
        );

        assert!(holds(json!({"field": "warehouse", "ne": "W2"})));
        assert!(!holds(json!({"field": "warehouse", "ne": "W1"})));
        assert!(holds(json!({"field": "record.lines", "ne": "3"})));
        // A missing field satisfies ne (ne is exactly not eq).
        assert!(holds(json!({"field": "record.missing", "ne": "x"})));
        let mut c = sample_change();
        c.warehouse = None;
        assert!(f(json!({"field": "warehouse", "ne": "W2"})).matches(&c));
        assert!(!f(json!({"field": "warehouse", "eq": "W2"})).matches(&c));
    }

    #[test]
    fn in_and_not_in() {
        assert!(holds(
            json!({"field": "event_code", "in": ["order.created", "order.updated"]})
        ));
        assert!(!holds(
            json!({"field": "event_code", "in": ["order.created"]})
        ));
        assert!(holds(json!({"field": "record.lines", "in": [1, 2, 3]})));
        assert!(holds(json!({"field": "record.coupon", "in": ["X", null]})));
        assert!(!holds(json!({"field": "record.missing", "in": ["x"]})));
        assert!(holds(json!({"field": "warehouse", "not_in": ["W2", "W3"]})));
        assert!(!holds(json!({"field": "warehouse", "not_in": ["W1"]})));
        assert!(holds(json!({"field": "record.missing", "not_in": ["x"]})));
    }

    #[test]
    fn ordering_operators_on_numbers_and_strings() {
        assert!(holds(json!({"field": "record.total", "gt": 100})));
        assert!(!holds(json!({"field": "record.total", "gt": 250.5})));
        assert!(holds(json!({"field": "record.total", "gte": 250.5})));
        assert!(holds(json!({"field": "record.total", "lt": 251})));
        assert!(!holds(json!({"field": "record.total", "lt": 250.5})));
        assert!(holds(json!({"field": "record.total", "lte": 250.5})));
        assert!(!holds(json!({"field": "record.total", "lte": 250})));
        assert!(holds(json!({"field": "record.lines", "gt": -1})));
        assert!(
            holds(json!({"field": "record.lines", "lt": u64::MAX})),
            "u64 compares exactly"
        );
        // Strings order lexicographically.
        assert!(holds(json!({"field": "record.status", "gt": "pending"})));
        assert!(holds(json!({"field": "record.status", "lt": "u"})));
        assert!(holds(json!({"field": "event_code", "gte": "order."})));
        assert!(holds(json!({"field": "record_id", "lte": "ord-42"})));
        // Mismatched types and missing fields never satisfy an ordering.
        assert!(!holds(json!({"field": "record.status", "gt": 1})));
        assert!(!holds(json!({"field": "record.total", "lt": "zzz"})));
        assert!(!holds(json!({"field": "record.missing", "gt": 1})));
        assert!(!holds(json!({"field": "record.missing", "lte": 1})));
        assert!(!holds(json!({"field": "record.gift", "gte": 0})));
        let mut c = sample_change();
        c.warehouse = None;
        assert!(!f(json!({"field": "warehouse", "lt": "Z"})).matches(&c));
    }

    #[test]
    fn exists() {
        assert!(holds(json!({"field": "record.status", "exists": true})));
        assert!(
            holds(json!({"field": "record.gift", "exists": true})),
            "false is present"
        );
        assert!(
            !holds(json!({"field": "record.coupon", "exists": true})),
            "null is absent"
        );
        assert!(holds(json!({"field": "record.coupon", "exists": false})));
        assert!(holds(json!({"field": "record.missing", "exists": false})));
        assert!(!holds(
            json!({"field": "record.status.deeper", "exists": true})
        ));
        assert!(holds(json!({"field": "warehouse", "exists": true})));
        let mut c = sample_change();
        c.warehouse = None;
        assert!(f(json!({"field": "warehouse", "exists": false})).matches(&c));
    }

    #[test]
    fn changed() {
        assert!(holds(json!({"changed": "status"})));
        assert!(holds(json!({"changed": "customer.email"})));
        assert!(
            holds(json!({"changed": "customer"})),
            "a nested field changed"
        );
        assert!(
            !holds(json!({"changed": "cust"})),
            "prefixes stop at segment boundaries"
        );
        assert!(!holds(json!({"changed": "total"})));
        assert!(!holds(json!({"changed": "customer.email.x"})));
    }

    #[test]
    fn combinators() {
        let yes = json!({"field": "record_type", "eq": "order"});
        let no = json!({"field": "record_type", "eq": "catalog_item"});
        assert!(holds(json!({"all": [yes, yes]})));
        assert!(!holds(json!({"all": [yes, no]})));
        assert!(holds(json!({"any": [no, yes]})));
        assert!(!holds(json!({"any": [no, no]})));
        assert!(holds(json!({"not": no})));
        assert!(!holds(json!({"not": yes})));
        assert!(holds(json!({"not": {"not": yes}})));
    }

    #[test]
    fn malformed_structure_is_refused_with_a_location() {
        let e = err(json!([1]));
        assert_eq!(
            e,
            FilterError::NotAnObject {
                at: "$".into(),
                found: "an array"
            }
        );
        assert_eq!(
            e.to_string(),
            "$: expected a condition object, found an array"
        );
        assert!(matches!(err(json!("x")), FilterError::NotAnObject { .. }));
        assert_eq!(
            err(json!({"all": [{}]})),
            FilterError::EmptyCondition {
                at: "$.all[0]".into()
            }
        );
        assert!(
            matches!(err(json!({"whatever": 1})), FilterError::UnknownKey { key, .. } if key == "whatever")
        );
        assert!(matches!(
            err(json!({"all": [], "any": []})),
            FilterError::MixedKeys { .. }
        ));
        assert!(matches!(
            err(json!({"field": "warehouse", "eq": "W1", "not": {}})),
            FilterError::MixedKeys { .. }
        ));
        assert_eq!(
            err(json!({"all": []})),
            FilterError::EmptyList {
                at: "$".into(),
                op: "all"
            }
        );
        assert_eq!(
            err(json!({"any": []})),
            FilterError::EmptyList {
                at: "$".into(),
                op: "any"
            }
        );
        assert!(matches!(
            err(json!({"all": {}})),
            FilterError::TypeMismatch { op: "all", .. }
        ));
        assert!(
            matches!(err(json!({"not": [1]})), FilterError::NotAnObject { at, .. } if at == "$.not")
        );
        assert!(matches!(
            err(json!({"changed": ""})),
            FilterError::TypeMismatch { op: "changed", .. }
        ));
        assert!(matches!(
            err(json!({"changed": 1})),
            FilterError::TypeMismatch { op: "changed", .. }
        ));
        let e = err(
            json!({"any": [{"field": "warehouse", "eq": "W1"}, {"not": {"field": "x", "eq": 1}}]}),
        );
        assert_eq!(
            e,
            FilterError::UnknownField {
                at: "$.any[1].not".into(),
                field: "x".into()
            }
        );
        assert!(
            e.to_string().contains("expected event_code, warehouse"),
            "{e}"
        );
    }

    #[test]
    fn operators_are_checked() {
        let e = err(json!({"field": "warehouse", "like": "W%"}));
        assert_eq!(
            e,
            FilterError::UnknownOperator {
                at: "$".into(),
                op: "like".into()
            }
        );
        assert!(e.to_string().contains("expected one of eq, ne, in"), "{e}");
        assert!(
            matches!(err(json!({"field": "warehouse"})), FilterError::MissingOperator { field, .. } if field == "warehouse")
        );
        assert!(matches!(
            err(json!({"eq": "W1"})),
            FilterError::MissingOperator { .. }
        ));
        let e = err(json!({"field": "record.total", "gt": 1, "lt": 5}));
        assert!(
            matches!(&e, FilterError::SeveralOperators { ops, .. } if ops.contains("gt") && ops.contains("lt")),
            "{e}"
        );
        assert!(matches!(
            err(json!({"field": "record.total", "gt": 1, "near": 5})),
            FilterError::UnknownOperator { .. }
        ));
        assert!(matches!(
            err(json!({"field": 5, "eq": 1})),
            FilterError::TypeMismatch { op: "field", .. }
        ));
    }

    #[test]
    fn fields_are_checked() {
        assert!(matches!(
            err(json!({"field": "account_id", "eq": "a"})),
            FilterError::UnknownField { .. }
        ));
        assert!(matches!(
            err(json!({"field": "record", "eq": "a"})),
            FilterError::InvalidPath {
                source: PathError::Empty,
                ..
            }
        ));
        assert!(matches!(
            err(json!({"field": "record.", "eq": "a"})),
            FilterError::InvalidPath { .. }
        ));
        assert!(matches!(
            err(json!({"field": "record.a..b", "eq": "a"})),
            FilterError::InvalidPath {
                source: PathError::EmptySegment { .. },
                ..
            }
        ));
        assert!(matches!(
            err(json!({"field": "record.a.b.c.d.e.f.g.h.i", "eq": 1})),
            FilterError::InvalidPath {
                source: PathError::TooDeep { .. },
                ..
            }
        ));
    }

    #[test]
    fn operand_types_are_checked() {
        let mismatch = |v: Value, want_op: &str| match err(v.clone()) {
            FilterError::TypeMismatch { op, .. } => assert_eq!(op, want_op, "{v}"),
            other => panic!("{v}: {other:?}"),
        };
        mismatch(json!({"field": "record.total", "gt": true}), "gt");
        mismatch(json!({"field": "record.total", "gte": null}), "gte");
        mismatch(json!({"field": "record.total", "lt": [1]}), "lt");
        mismatch(json!({"field": "record.total", "lte": {"a": 1}}), "lte");
        mismatch(json!({"field": "record.total", "eq": [1]}), "eq");
        mismatch(json!({"field": "record.total", "ne": {}}), "ne");
        mismatch(json!({"field": "event_code", "eq": 1}), "eq");
        mismatch(json!({"field": "warehouse", "gt": 1}), "gt");
        mismatch(json!({"field": "warehouse", "in": ["W1", 2]}), "in");
        mismatch(json!({"field": "record.x", "in": "W1"}), "in");
        mismatch(json!({"field": "record.x", "not_in": [[1]]}), "not_in");
        mismatch(json!({"field": "record.x", "exists": "yes"}), "exists");
        let e = err(json!({"field": "record.total", "gt": true}));
        assert_eq!(
            e.to_string(),
            "$: `gt` needs a number or a string, found a boolean"
        );
        assert_eq!(
            err(json!({"field": "warehouse", "in": []})),
            FilterError::EmptyList {
                at: "$".into(),
                op: "in"
            }
        );
        assert_eq!(
            err(json!({"field": "warehouse", "not_in": []})),
            FilterError::EmptyList {
                at: "$".into(),
                op: "not_in"
            }
        );
        let long: Vec<u32> = (0..=MAX_LIST_LEN as u32).collect();
        assert!(matches!(
            err(json!({"field": "record.x", "in": long})),
            FilterError::ListTooLong { len: 101, .. }
        ));
    }

    #[test]
    fn depth_and_size_limits() {
        let leaf = json!({"field": "record_type", "eq": "order"});
        let mut v = leaf.clone();
        for _ in 0..MAX_DEPTH - 1 {
            v = json!({"not": v});
        }
        assert!(Filter::parse(&v).is_ok(), "eight levels are fine");
        let e = err(json!({"not": v}));
        assert!(matches!(e, FilterError::TooDeep { .. }), "{e:?}");
        assert!(e.to_string().contains("deeper than 8"));

        let ok: Vec<Value> = (0..MAX_NODES - 1).map(|_| leaf.clone()).collect();
        assert!(
            Filter::parse(&json!({"any": ok})).is_ok(),
            "64 nodes are fine"
        );
        let too_many: Vec<Value> = (0..MAX_NODES).map(|_| leaf.clone()).collect();
        assert_eq!(err(json!({"any": too_many})), FilterError::TooManyNodes);
    }

    #[test]
    fn serde_round_trip() {
        let v = json!({"all": [
            {"field": "event_code", "in": ["order.created", "order.updated"]},
            {"field": "record.customer.address.city", "ne": "Oslo"},
            {"any": [{"field": "record.total", "gte": 10}, {"field": "record.gift", "exists": true}]},
            {"not": {"field": "warehouse", "eq": "W2"}},
            {"changed": "status"},
            {"field": "record.coupon", "not_in": [null, "X", 1.5, false]},
            {"field": "record_id", "lt": "z"}, {"field": "record_type", "lte": "p"},
            {"field": "record.lines", "gt": 1}
        ]});
        let filter = f(v.clone());
        assert_eq!(filter.to_json(), v);
        let text = serde_json::to_string(&filter).unwrap();
        let back: Filter = serde_json::from_str(&text).unwrap();
        assert_eq!(back, filter);
        assert_eq!(
            serde_json::from_str::<Filter>("{}").unwrap(),
            Filter::Always
        );
        assert_eq!(serde_json::to_string(&Filter::Always).unwrap(), "{}");
        let bad = serde_json::from_str::<Filter>(r#"{"field":"nope","eq":1}"#).unwrap_err();
        assert!(bad.to_string().contains("unknown field `nope`"), "{bad}");
    }

    // --- property tests -------------------------------------------------------------------

    fn arb_scalar() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-3i64..400).prop_map(|n| json!(n)),
            Just(json!(250.5)),
            prop::sample::select(vec![
                "shipped",
                "Ada",
                "W1",
                "W2",
                "order",
                "order.updated",
                ""
            ])
            .prop_map(|s| json!(s)),
        ]
    }

    fn arb_leaf() -> impl Strategy<Value = Value> {
        let record_field = prop::sample::select(vec![
            "record.status",
            "record.total",
            "record.lines",
            "record.gift",
            "record.coupon",
            "record.customer.name",
            "record.missing",
        ]);
        let text_field =
            prop::sample::select(vec!["event_code", "warehouse", "record_type", "record_id"]);
        let text = prop::sample::select(vec!["order", "order.updated", "W1", "W2", "ord-42", "a"]);
        let op = prop::sample::select(vec!["eq", "ne", "gt", "gte", "lt", "lte"]);
        let list_op = prop::sample::select(vec!["in", "not_in"]);
        prop_oneof![
            (record_field.clone(), op.clone(), arb_scalar()).prop_filter_map(
                "ordered needs number or string",
                |(fl, op, v)| {
                    let ordered = !matches!(op, "eq" | "ne");
                    (!ordered || v.is_number() || v.is_string())
                        .then(|| json!({"field": fl, op: v}))
                }
            ),
            (
                record_field.clone(),
                list_op.clone(),
                prop::collection::vec(arb_scalar(), 1..4)
            )
                .prop_map(|(fl, op, vs)| json!({"field": fl, op: vs})),
            (text_field.clone(), op, text.clone())
                .prop_map(|(fl, op, v)| json!({"field": fl, op: v})),
            (text_field, list_op, prop::collection::vec(text, 1..3))
                .prop_map(|(fl, op, vs)| json!({"field": fl, op: vs})),
            (record_field, any::<bool>()).prop_map(|(fl, b)| json!({"field": fl, "exists": b})),
            prop::sample::select(vec!["status", "customer", "total"])
                .prop_map(|n| json!({"changed": n})),
        ]
    }

    fn arb_filter_json() -> impl Strategy<Value = Value> {
        arb_leaf().prop_recursive(3, 20, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({"all": v})),
                prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({"any": v})),
                inner.prop_map(|v| json!({"not": v})),
            ]
        })
    }

    proptest! {
        #[test]
        fn parse_serialize_round_trip(v in arb_filter_json()) {
            let filter = Filter::parse(&v).unwrap();
            prop_assert_eq!(filter.to_json(), v.clone());
            let back: Filter = serde_json::from_value(serde_json::to_value(&filter).unwrap()).unwrap();
            prop_assert_eq!(back.matches(&sample_change()), filter.matches(&sample_change()));
            prop_assert_eq!(back, filter);
        }

        #[test]
        fn ne_is_not_eq_and_not_in_is_not_in(
            field in prop::sample::select(vec!["record.status", "record.total", "record.coupon", "record.missing", "record.gift"]),
            operand in arb_scalar(),
            warehouse in prop::option::of(prop::sample::select(vec!["W1", "W2"])),
        ) {
            let mut c = sample_change();
            c.warehouse = warehouse.map(str::to_owned);
            let eq = f(json!({"field": field, "eq": operand})).matches(&c);
            prop_assert_eq!(f(json!({"field": field, "ne": operand})).matches(&c), !eq);
            prop_assert_eq!(f(json!({"not": {"field": field, "eq": operand}})).matches(&c), !eq);
            let inn = f(json!({"field": field, "in": [operand]})).matches(&c);
            prop_assert_eq!(inn, eq);
            prop_assert_eq!(f(json!({"field": field, "not_in": [operand]})).matches(&c), !inn);
            let w_eq = f(json!({"field": "warehouse", "eq": "W2"})).matches(&c);
            prop_assert_eq!(f(json!({"field": "warehouse", "ne": "W2"})).matches(&c), !w_eq);
        }
    }
}
