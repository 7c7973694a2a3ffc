//! Lambda event filtering (an event source mapping's `FilterCriteria`), evaluated on a stream
//! record's JSON as Lambda sees it, so the harness hands a handler exactly the records its mapping
//! in template.yaml would, and a test can hold the template's patterns against the code's rule.
//!
//! The subset the template uses: nested objects (every key of the pattern must match), arrays of
//! alternatives made of literals and the `anything-but`, `prefix` and `exists` operators. Any other
//! operator is refused loudly rather than guessed at.

use serde_json::Value;

/// Whether a record passes a mapping with these filters: any one pattern matches.
pub fn passes(patterns: &[Value], record: &Value) -> bool {
    patterns.iter().any(|p| matches(p, record))
}

/// Whether `record` matches one pattern.
pub fn matches(pattern: &Value, record: &Value) -> bool {
    match pattern {
        Value::Object(fields) => fields.iter().all(|(key, wanted)| {
            let present = record.get(key);
            match wanted {
                Value::Object(_) => present.is_some_and(|v| matches(wanted, v)),
                Value::Array(alternatives) => alternatives.iter().any(|a| alternative(a, present)),
                other => panic!("a filter pattern's leaf must be an array, got {other}"),
            }
        }),
        other => panic!("a filter pattern must be an object, got {other}"),
    }
}

/// One alternative of a leaf against the record's value there (`None`: the field is absent).
fn alternative(alt: &Value, value: Option<&Value>) -> bool {
    match alt {
        Value::Object(op) => {
            let (name, arg) = op
                .iter()
                .next()
                .unwrap_or_else(|| panic!("an empty operator in a filter pattern"));
            match (name.as_str(), value) {
                ("exists", v) => arg.as_bool() == Some(v.is_some()),
                // Like EventBridge, `anything-but` and `prefix` need the field to be there.
                (_, None) => false,
                ("anything-but", Some(v)) => match arg {
                    Value::Array(excluded) => !excluded.iter().any(|x| scalar_eq(x, v)),
                    Value::Object(_) => !alternative(arg, Some(v)),
                    x => !scalar_eq(x, v),
                },
                ("prefix", Some(v)) => match (arg.as_str(), v.as_str()) {
                    (Some(p), Some(s)) => s.starts_with(p),
                    _ => false,
                },
                (other, _) => panic!("filter operator {other:?} is not supported here"),
            }
        }
        literal => value.is_some_and(|v| scalar_eq(literal, v)),
    }
}

fn scalar_eq(literal: &Value, value: &Value) -> bool {
    match value {
        // A list in the record matches when any element does.
        Value::Array(items) => items.iter().any(|i| scalar_eq(literal, i)),
        v => literal == v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(event: &str, new_status: &str, old_status: Option<&str>) -> Value {
        let mut dynamodb =
            json!({"NewImage": {"kind": {"S": "delivery"}, "status": {"S": new_status}}});
        if let Some(old) = old_status {
            dynamodb["OldImage"] = json!({"status": {"S": old}});
        }
        json!({"eventName": event, "dynamodb": dynamodb})
    }

    #[test]
    fn literals_and_nested_objects_must_all_match() {
        let p = json!({"eventName": ["INSERT"], "dynamodb": {"NewImage": {"status": {"S": ["pending", "retrying"]}}}});
        assert!(matches(&p, &record("INSERT", "pending", None)));
        assert!(matches(&p, &record("INSERT", "retrying", None)));
        assert!(!matches(&p, &record("MODIFY", "pending", None)));
        assert!(!matches(&p, &record("INSERT", "dead", None)));
        // A nested object the record does not have does not match.
        let old = json!({"dynamodb": {"OldImage": {"status": {"S": ["pending"]}}}});
        assert!(!matches(&old, &record("INSERT", "pending", None)));
    }

    #[test]
    fn anything_but_needs_the_field_and_refuses_the_listed_values() {
        let p =
            json!({"dynamodb": {"OldImage": {"status": {"S": [{"anything-but": ["pending"]}]}}}});
        assert!(matches(&p, &record("MODIFY", "pending", Some("dead"))));
        assert!(!matches(&p, &record("MODIFY", "pending", Some("pending"))));
        assert!(!matches(&p, &record("INSERT", "pending", None)));
        let single = json!({"eventName": [{"anything-but": "REMOVE"}]});
        assert!(matches(&single, &record("MODIFY", "x", None)));
        assert!(!matches(&single, &json!({"eventName": "REMOVE"})));
    }

    #[test]
    fn exists_and_prefix_work_on_presence_and_text() {
        let absent = json!({"dynamodb": {"OldImage": [{"exists": false}]}});
        assert!(matches(&absent, &record("INSERT", "pending", None)));
        assert!(!matches(
            &absent,
            &record("MODIFY", "pending", Some("dead"))
        ));
        let prefix = json!({"eventName": [{"prefix": "MOD"}]});
        assert!(matches(&prefix, &record("MODIFY", "x", None)));
        assert!(!matches(&prefix, &record("INSERT", "x", None)));
    }

    #[test]
    fn a_mapping_passes_a_record_any_of_its_patterns_matches() {
        let patterns = [
            json!({"eventName": ["INSERT"]}),
            json!({"eventName": ["REMOVE"]}),
        ];
        assert!(passes(&patterns, &json!({"eventName": "REMOVE"})));
        assert!(!passes(&patterns, &json!({"eventName": "MODIFY"})));
        assert!(!passes(&[], &json!({"eventName": "MODIFY"})));
    }

    #[test]
    #[should_panic(expected = "not supported")]
    fn an_operator_this_matcher_does_not_know_is_refused() {
        matches(&json!({"n": [{"numeric": [">", 1]}]}), &json!({"n": 2}));
    }
}
