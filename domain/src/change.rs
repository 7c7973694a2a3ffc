//! The source change event: one item the owning application (Rhythm) writes to its changes table
//! each time one of its records changes. The stream ingest function reads these, matches them to
//! subscriptions, filters them ([`crate::filter`]) and projects them
//! ([`crate::projection`]). The full `record` row is never delivered as it is.

use crate::ids::{is_change_id_text, AccountId, ChangeId};
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use thiserror::Error;

/// Longest identifier accepted in a key part. DynamoDB allows 2048 bytes for a partition key and
/// 1024 for a sort key; composite keys join several parts, so each part stays well below that.
pub const MAX_ID_LEN: usize = 256;

/// One change of one record of the owning application.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Change {
    pub account_id: AccountId,
    /// Unique and time-sortable (ULID text).
    pub change_id: ChangeId,
    /// For example `order`, `catalog_item`.
    pub record_type: String,
    pub record_id: String,
    /// For example `order.updated`.
    pub event_code: String,
    #[serde(default)]
    pub warehouse: Option<String>,
    pub occurred_at: Timestamp,
    /// Names of the fields that changed (dotted for nested fields, e.g. `customer.email`).
    #[serde(default)]
    pub changed_fields: Vec<String>,
    /// The full row after the change. Never delivered as it is: only a projection leaves the system.
    pub record: Map<String, Value>,
    /// The trace the change was made in, when the owning application keeps one: AWS X-Ray's
    /// `1-<8 hex>-<24 hex>` or a W3C trace id (32 hex, or a whole `traceparent`). Its deliveries'
    /// attempts carry it to receivers; one that is malformed is ignored
    /// ([`crate::trace_context::parse_trace_id`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

/// Why a change cannot be processed. Every message names the offending field.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ChangeError {
    #[error("change field `{field}` must not be empty")]
    Empty { field: &'static str },
    #[error("change field `{field}` must not contain '#' (it becomes part of a storage key); got {value:?}")]
    ContainsHash { field: &'static str, value: String },
    #[error("change field `{field}` must not contain control characters; got {value:?}")]
    ControlCharacter { field: &'static str, value: String },
    #[error("change field `{field}` is {len} bytes long; at most {max} are accepted")]
    TooLong {
        field: &'static str,
        len: usize,
        max: usize,
    },
    #[error("change field `change_id` must be a ULID (26 Crockford base32 characters, in one case); got {value:?}")]
    NotAChangeId { value: String },
    #[error("changed_fields[{index}] must not be empty")]
    EmptyChangedField { index: usize },
}

impl Change {
    /// Checks what the rest of the pipeline relies on: the identifying fields are present, short
    /// enough, printable, and free of `#` (the separator of composite DynamoDB keys).
    pub fn validate(&self) -> Result<(), ChangeError> {
        check_key_part("account_id", self.account_id.as_str())?;
        check_key_part("change_id", self.change_id.as_str())?;
        if !is_change_id_text(self.change_id.as_str()) {
            return Err(ChangeError::NotAChangeId {
                value: self.change_id.to_string(),
            });
        }
        check_key_part("record_type", &self.record_type)?;
        check_key_part("record_id", &self.record_id)?;
        check_key_part("event_code", &self.event_code)?;
        if let Some(w) = &self.warehouse {
            check_key_part("warehouse", w)?;
        }
        if let Some(index) = self.changed_fields.iter().position(|f| f.is_empty()) {
            return Err(ChangeError::EmptyChangedField { index });
        }
        Ok(())
    }

    /// Whether `name` is listed among the changed fields.
    pub fn field_changed(&self, name: &str) -> bool {
        self.changed_fields.iter().any(|f| f == name)
    }
}

fn check_key_part(field: &'static str, value: &str) -> Result<(), ChangeError> {
    if value.is_empty() {
        return Err(ChangeError::Empty { field });
    }
    if value.len() > MAX_ID_LEN {
        return Err(ChangeError::TooLong {
            field,
            len: value.len(),
            max: MAX_ID_LEN,
        });
    }
    if value.contains('#') {
        return Err(ChangeError::ContainsHash {
            field,
            value: value.to_owned(),
        });
    }
    if value.chars().any(char::is_control) {
        return Err(ChangeError::ControlCharacter {
            field,
            value: value.to_owned(),
        });
    }
    Ok(())
}

// With the `fixtures` feature too: the store's tests build on the same sample change.
#[cfg(any(test, feature = "fixtures"))]
pub mod tests {
    use super::*;
    use serde_json::json;

    /// A valid order change used by tests across the domain (and the store's).
    pub fn sample_change() -> Change {
        Change {
            account_id: "acct-1".parse().unwrap(),
            change_id: "01HZX3Q4J8K9M0N1P2Q3R4S5T6".parse().unwrap(),
            record_type: "order".into(),
            record_id: "ord-42".into(),
            event_code: "order.updated".into(),
            warehouse: Some("W1".into()),
            occurred_at: Timestamp::from_millis(1_700_000_000_000),
            changed_fields: vec!["status".into(), "customer.email".into()],
            record: json!({
                "status": "shipped",
                "total": 250.5,
                "lines": 3,
                "customer": {"name": "Ada", "email": "ada@example.com", "address": {"city": "Oslo"}},
                "internal_notes": "do not leak",
                "gift": false,
                "coupon": null
            })
            .as_object()
            .unwrap()
            .clone(),
            trace_id: None,
        }
    }

    #[test]
    fn a_well_formed_change_is_valid() {
        assert_eq!(sample_change().validate(), Ok(()));
        let mut c = sample_change();
        c.warehouse = None;
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn every_identifying_field_must_be_present() {
        type Setter = fn(&mut Change);
        let cases: [(&str, Setter); 5] = [
            ("account_id", |c| c.account_id = AccountId::default()),
            ("change_id", |c| c.change_id = ChangeId::default()),
            ("record_type", |c| c.record_type.clear()),
            ("record_id", |c| c.record_id.clear()),
            ("event_code", |c| c.event_code.clear()),
        ];
        for (field, clear) in cases {
            let mut c = sample_change();
            clear(&mut c);
            let err = c.validate().unwrap_err();
            assert_eq!(err, ChangeError::Empty { field });
            assert_eq!(
                err.to_string(),
                format!("change field `{field}` must not be empty")
            );
        }
        let mut c = sample_change();
        c.warehouse = Some(String::new());
        assert_eq!(c.validate(), Err(ChangeError::Empty { field: "warehouse" }));
    }

    #[test]
    fn key_parts_refuse_hash_control_characters_and_excess_length() {
        let mut c = sample_change();
        c.record_id = "ord#42".into();
        let err = c.validate().unwrap_err();
        assert!(matches!(
            err,
            ChangeError::ContainsHash {
                field: "record_id",
                ..
            }
        ));
        assert!(err.to_string().contains("'#'"), "{err}");

        let mut c = sample_change();
        c.account_id = AccountId::from_stored("acct\n1");
        assert!(matches!(
            c.validate(),
            Err(ChangeError::ControlCharacter {
                field: "account_id",
                ..
            })
        ));

        let mut c = sample_change();
        c.change_id = ChangeId::from_stored("x".repeat(MAX_ID_LEN + 1));
        assert_eq!(
            c.validate(),
            Err(ChangeError::TooLong {
                field: "change_id",
                len: MAX_ID_LEN + 1,
                max: MAX_ID_LEN
            })
        );

        let mut c = sample_change();
        c.change_id = ChangeId::from_stored("chg1");
        assert_eq!(
            c.validate(),
            Err(ChangeError::NotAChangeId {
                value: "chg1".into()
            })
        );

        let mut c = sample_change();
        c.changed_fields.push(String::new());
        assert_eq!(
            c.validate(),
            Err(ChangeError::EmptyChangedField { index: 2 })
        );
    }

    #[test]
    fn deserializes_with_defaults_and_round_trips() {
        let c: Change = serde_json::from_value(json!({
            "account_id": "a", "change_id": "01H", "record_type": "order", "record_id": "1",
            "event_code": "order.created", "occurred_at": 1_700_000_000_000i64, "record": {"x": 1}
        }))
        .unwrap();
        assert_eq!(c.warehouse, None);
        assert!(c.changed_fields.is_empty());
        assert_eq!(c.occurred_at, Timestamp::from_millis(1_700_000_000_000));
        let back: Change = serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
        assert_eq!(back, c);

        let s = sample_change();
        assert!(s.field_changed("status"));
        assert!(!s.field_changed("total"));
    }
}
