//! The event-type catalog's rules: what a record type's name may be, which part of JSON Schema
//! its payload schema may use, whether an example fits the schema, and whether a projected field
//! (a dotted path) is one the schema declares. Pure: the store keeps the types, the API and the
//! console ask these questions before a subscription names a type or a field.
//!
//! The supported subset of JSON Schema is small on purpose: `type` (one name or a list of them),
//! `properties`, `required`, `items`, and the annotations `title`, `description`, `format`,
//! `enum`, `examples`, `default`, `additionalProperties`, `$schema`, `$id`. The root must be an
//! object schema. A keyword outside the subset is refused rather than silently ignored, so a
//! schema never promises a check the catalog does not make.

use crate::projection::FieldPath;
use serde_json::{Map, Value};
use thiserror::Error;

/// Longest record type name.
pub const MAX_TYPE_CHARS: usize = 128;
/// Largest schema or example, in bytes of compact JSON (an item stays well below 400 KB).
pub const MAX_DOCUMENT_BYTES: usize = 64 * 1024;
/// Deepest nesting of object schemas.
pub const MAX_SCHEMA_DEPTH: usize = 8;

const TYPE_NAMES: [&str; 7] = [
    "object", "string", "number", "integer", "boolean", "array", "null",
];
const ANNOTATIONS: [&str; 9] = [
    "title",
    "description",
    "format",
    "enum",
    "examples",
    "default",
    "additionalProperties",
    "$schema",
    "$id",
];

/// Whether `name` can be a record type of the catalog: 1 to [`MAX_TYPE_CHARS`] ASCII letters,
/// digits, `_`, `-`, `.` or `:` (never `*`, which a subscription uses for "every type", nor `#`,
/// which separates the parts of storage keys).
pub fn is_type_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TYPE_CHARS
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

/// Why a schema or an example is refused; `at` is a JSON pointer-like path (`properties.total`).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SchemaError {
    #[error(
        "the schema must be an object schema ({{\"type\": \"object\", \"properties\": {{…}}}})"
    )]
    NotAnObjectSchema,
    #[error("{at}: {message}")]
    Invalid { at: String, message: String },
}

fn invalid(at: &str, message: impl Into<String>) -> SchemaError {
    SchemaError::Invalid {
        at: if at.is_empty() { "$".into() } else { at.into() },
        message: message.into(),
    }
}

fn join(at: &str, part: &str) -> String {
    if at.is_empty() {
        part.to_owned()
    } else {
        format!("{at}.{part}")
    }
}

/// The type names a (sub)schema allows; empty when it does not say.
fn types_of(schema: &Map<String, Value>) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Checks that `schema` is an object schema in the supported subset.
pub fn check_schema(schema: &Value) -> Result<(), SchemaError> {
    let Some(root) = schema.as_object() else {
        return Err(SchemaError::NotAnObjectSchema);
    };
    if types_of(root) != ["object"] || !root.get("properties").is_some_and(Value::is_object) {
        return Err(SchemaError::NotAnObjectSchema);
    }
    check_node(root, "", 0)
}

fn check_node(node: &Map<String, Value>, at: &str, depth: usize) -> Result<(), SchemaError> {
    if depth > MAX_SCHEMA_DEPTH {
        return Err(invalid(
            at,
            format!("nested more than {MAX_SCHEMA_DEPTH} levels deep"),
        ));
    }
    for (key, value) in node {
        match key.as_str() {
            "type" => check_type(value, at)?,
            "properties" => check_properties(value, at, depth)?,
            "required" => check_required(node, value, at)?,
            "items" => {
                let Some(sub) = value.as_object() else {
                    return Err(invalid(&join(at, "items"), "must be a schema object"));
                };
                check_node(sub, &join(at, "items"), depth + 1)?;
            }
            other if ANNOTATIONS.contains(&other) => {}
            other => return Err(invalid(
                &join(at, other),
                "is not a supported keyword (type, properties, required, items and annotations)",
            )),
        }
    }
    Ok(())
}

/// `type`: one supported type name or a non-empty list of them.
fn check_type(value: &Value, at: &str) -> Result<(), SchemaError> {
    let names: Vec<&Value> = match value {
        Value::Array(list) if !list.is_empty() => list.iter().collect(),
        Value::String(_) => vec![value],
        _ => {
            return Err(invalid(
                &join(at, "type"),
                "must be a type name or a list of them",
            ))
        }
    };
    for n in names {
        if !n.as_str().is_some_and(|n| TYPE_NAMES.contains(&n)) {
            return Err(invalid(
                &join(at, "type"),
                format!("{n} is not one of {}", TYPE_NAMES.join(", ")),
            ));
        }
    }
    Ok(())
}

/// `properties`: an object of well-named properties, each a schema checked one level deeper.
fn check_properties(value: &Value, at: &str, depth: usize) -> Result<(), SchemaError> {
    let Some(props) = value.as_object() else {
        return Err(invalid(&join(at, "properties"), "must be an object"));
    };
    for (name, sub) in props {
        let here = join(&join(at, "properties"), name);
        if name.is_empty() || name.contains('.') || name.chars().any(char::is_control) {
            return Err(invalid(
                &here,
                "a property name must be non-empty, without '.' or control characters",
            ));
        }
        let Some(sub) = sub.as_object() else {
            return Err(invalid(&here, "must be a schema object"));
        };
        check_node(sub, &here, depth + 1)?;
    }
    Ok(())
}

/// `required`: a list naming only properties this schema declares.
fn check_required(node: &Map<String, Value>, value: &Value, at: &str) -> Result<(), SchemaError> {
    let props = node.get("properties").and_then(Value::as_object);
    let Some(list) = value.as_array() else {
        return Err(invalid(
            &join(at, "required"),
            "must be a list of property names",
        ));
    };
    for name in list {
        let declared = name
            .as_str()
            .is_some_and(|n| props.is_some_and(|p| p.contains_key(n)));
        if !declared {
            return Err(invalid(
                &join(at, "required"),
                format!("{name} is not a property of this schema"),
            ));
        }
    }
    Ok(())
}

fn fits_type(value: &Value, name: &str) -> bool {
    match name {
        "object" => value.is_object(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        _ => false,
    }
}

/// Checks `example` against a schema [`check_schema`] accepted: the types it names, the required
/// properties, and no property the schema does not declare (a payload's fields are the catalog's
/// point: an example with a field the schema lacks is the typo the catalog exists to catch).
pub fn check_example(schema: &Value, example: &Value) -> Result<(), SchemaError> {
    match schema.as_object() {
        Some(node) => check_value(node, example, ""),
        None => Err(SchemaError::NotAnObjectSchema),
    }
}

fn check_value(node: &Map<String, Value>, value: &Value, at: &str) -> Result<(), SchemaError> {
    let types = types_of(node);
    if !types.is_empty() && !types.iter().any(|t| fits_type(value, t)) {
        return Err(invalid(
            at,
            format!("must be of type {}", types.join(" or ")),
        ));
    }
    if let (Some(object), Some(props)) = (
        value.as_object(),
        node.get("properties").and_then(Value::as_object),
    ) {
        for name in node
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !object.contains_key(name) {
                return Err(invalid(&join(at, name), "is required by the schema"));
            }
        }
        for (name, v) in object {
            match props.get(name).and_then(Value::as_object) {
                Some(sub) => check_value(sub, v, &join(at, name))?,
                None => {
                    return Err(invalid(
                        &join(at, name),
                        "is not a property the schema declares",
                    ))
                }
            }
        }
    }
    if let (Some(list), Some(items)) = (
        value.as_array(),
        node.get("items").and_then(Value::as_object),
    ) {
        for (i, v) in list.iter().enumerate() {
            check_value(
                items,
                v,
                &format!("{}[{i}]", if at.is_empty() { "$" } else { at }),
            )?;
        }
    }
    Ok(())
}

/// Whether the schema declares the record field `path` (dotted for nested objects, as a
/// subscription projects it). A path goes down through `properties` only (an array is a leaf, as
/// in a projection); below an object schema that declares no `properties` any path is accepted
/// (a free-form object).
pub fn declares(schema: &Value, path: &FieldPath) -> bool {
    let mut node = schema.as_object();
    for segment in path.segments() {
        let Some(n) = node else {
            return false;
        };
        match n.get("properties").and_then(Value::as_object) {
            Some(props) => node = props.get(segment.as_str()).and_then(Value::as_object),
            None => return types_of(n).contains(&"object"),
        }
    }
    node.is_some()
}

/// What a subscription names that the catalog does not know, as `(field, message)` pairs naming
/// the request's field (`record_types[1]`, `fields[0]`). `schemas` is the catalog (type → schema).
/// A named type must be in the catalog; each projected field must be declared by the schema of
/// at least one of the named types (every type of the catalog for `*`), so a subscription to
/// orders and refunds may project a field only refunds have.
pub fn refusals(
    schemas: &std::collections::BTreeMap<String, Value>,
    record_types: &[String],
    fields: &[String],
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut named: Vec<&Value> = Vec::new();
    for (i, t) in record_types.iter().enumerate() {
        if t == "*" {
            named.extend(schemas.values());
        } else if let Some(schema) = schemas.get(t) {
            named.push(schema);
        } else {
            out.push((
                format!("record_types[{i}]"),
                format!("{t:?} is not a record type of the event-type catalog (GET /v1/event-types lists them)"),
            ));
        }
    }
    if !out.is_empty() {
        return out;
    }
    let types = record_types.join(", ");
    for (i, field) in fields.iter().enumerate() {
        let Ok(path) = FieldPath::parse(field) else {
            continue;
        };
        if !named.iter().any(|schema| declares(schema, &path)) {
            out.push((
                format!("fields[{i}]"),
                format!("{field:?} is not a field of the schema of record type {types}"),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn order() -> Value {
        json!({
            "type": "object",
            "required": ["status"],
            "properties": {
                "status": {"type": "string", "enum": ["open", "shipped"]},
                "total": {"type": "number"},
                "customer": {"type": "object", "properties": {"email": {"type": "string", "format": "email"}}},
                "lines": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}}},
                "extra": {"type": "object"}
            }
        })
    }

    fn path(p: &str) -> FieldPath {
        FieldPath::parse(p).unwrap()
    }

    #[test]
    fn a_subscription_is_refused_an_unknown_type_or_a_field_no_named_schema_declares() {
        let refund = json!({"type": "object", "properties": {"reason": {"type": "string"}}});
        let catalog: std::collections::BTreeMap<String, Value> = [
            ("order".to_string(), order()),
            ("refund".to_string(), refund),
        ]
        .into();
        let types = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(refusals(
            &catalog,
            &types(&["order", "refund"]),
            &types(&["total", "reason"])
        )
        .is_empty());
        assert!(refusals(&catalog, &types(&["*"]), &types(&["reason"])).is_empty());
        assert_eq!(
            refusals(&catalog, &types(&["order", "ordr"]), &types(&["x"]))
                .iter()
                .map(|(f, _)| f.as_str())
                .collect::<Vec<_>>(),
            ["record_types[1]"]
        );
        let refused = refusals(&catalog, &types(&["order"]), &types(&["total", "reason"]));
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].0, "fields[1]");
        assert!(refused[0].1.contains("\"reason\"") && refused[0].1.contains("order"));
    }

    #[test]
    fn type_names_are_plain_words_never_the_wildcard() {
        for ok in ["order", "catalog_item", "crm.contact", "v2:invoice-line"] {
            assert!(is_type_name(ok), "{ok}");
        }
        for bad in ["", "*", "a b", "a#b", "ordér", &"x".repeat(129)] {
            assert!(!is_type_name(bad), "{bad}");
        }
    }

    #[test]
    fn only_object_schemas_of_the_supported_subset_are_accepted() {
        assert_eq!(check_schema(&order()), Ok(()));
        for bad in [
            json!([]),
            json!({"type": "string"}),
            json!({"type": "object"}),
        ] {
            assert_eq!(
                check_schema(&bad),
                Err(SchemaError::NotAnObjectSchema),
                "{bad}"
            );
        }
        let cases = [
            (
                json!({"type": "object", "properties": {"a": {"type": "text"}}}),
                "properties.a.type",
            ),
            (
                json!({"type": "object", "properties": {"a": 1}}),
                "properties.a",
            ),
            (
                json!({"type": "object", "properties": {"a.b": {}}}),
                "properties.a.b",
            ),
            (
                json!({"type": "object", "properties": {}, "required": ["x"]}),
                "required",
            ),
            (
                json!({"type": "object", "properties": {"a": {"pattern": "x"}}}),
                "properties.a.pattern",
            ),
        ];
        for (schema, at) in cases {
            let Err(SchemaError::Invalid { at: got, .. }) = check_schema(&schema) else {
                panic!("{schema} accepted")
            };
            assert_eq!(got, at, "{schema}");
        }
    }

    #[test]
    fn an_example_must_fit_the_schemas_types_required_and_declared_properties() {
        let s = order();
        let good = json!({"status": "open", "total": 3, "customer": {"email": "a@b.c"}, "lines": [{"sku": "x"}]});
        assert_eq!(check_example(&s, &good), Ok(()));
        let cases = [
            (json!({"total": 3}), "status"),
            (json!({"status": 1}), "status"),
            (json!({"status": "open", "totl": 3}), "totl"),
            (
                json!({"status": "open", "customer": {"mail": "x"}}),
                "customer.mail",
            ),
            (
                json!({"status": "open", "lines": [{"sku": 5}]}),
                "lines[0].sku",
            ),
            (json!([1]), "$"),
        ];
        for (example, at) in cases {
            let Err(SchemaError::Invalid { at: got, .. }) = check_example(&s, &example) else {
                panic!("{example} accepted")
            };
            assert_eq!(got, at, "{example}");
        }
    }

    #[test]
    fn a_projected_path_must_be_declared_down_through_object_properties() {
        let s = order();
        for ok in [
            "status",
            "customer",
            "customer.email",
            "lines",
            "extra.anything.below",
        ] {
            assert!(declares(&s, &path(ok)), "{ok}");
        }
        for bad in ["statuss", "customer.mail", "lines.sku", "status.x"] {
            assert!(!declares(&s, &path(bad)), "{bad}");
        }
    }
}
