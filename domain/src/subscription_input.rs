//! A subscription as a request gives it, whichever door it came through (the JSON API's body, the
//! console's form), and the rules of a valid one. A door reads its request into a draft
//! ([`SubscriptionDraft`] for a new subscription, [`SubscriptionEditDraft`] for an edit: typed
//! values, nothing checked yet); [`SubscriptionDraft::check`] and [`SubscriptionEditDraft::check`]
//! apply the rules and name every field at fault at once, by the request's field names
//! (`record_types[1]`, `retry_policy.max_retries`).
//!
//! What needs the store (the integration is the account's, the catalog knows the record types and
//! fields, an edit's answers beside the stored ones) is the operation's:
//! `operations::account::subscriptions`.

use crate::classify::{AnswerRules, MAX_RETRY_STATUSES};
use crate::filter::Filter;
use crate::ids::IntegrationId;
use crate::input::{FieldErrors, Patch};
use crate::projection::{Projection, ProjectionError};
use crate::retry::{RetryPolicy, RetryPolicyError};
use serde_json::Value;

/// Most record types one subscription names.
pub const MAX_RECORD_TYPES: usize = 50;
pub const MAX_RECORD_TYPE_CHARS: usize = 128;
/// The refusal of an integration id that is not one of the account's (another account's is as
/// unknown as none).
pub const NO_SUCH_INTEGRATION: &str = "no integration with this id in the account";

/// A field a new subscription requires, as a door read it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Given<T> {
    /// Left out: the check names it (`is required`).
    #[default]
    Missing,
    /// Given but unreadable (a wrong type, `null`): the door has named the problem already.
    Refused,
    Value(T),
}

/// A new subscription as a door read it.
#[derive(Debug, Clone, Default)]
pub struct SubscriptionDraft {
    /// The integration's id as given (checked to be an id here, the account's by the operation).
    pub integration_id: Given<String>,
    pub record_types: Given<Vec<String>>,
    /// The filter grammar's JSON; `None`: every change matches.
    pub filter: Option<Value>,
    pub fields: Given<Vec<String>>,
    /// `None`: the default policy.
    pub retry_policy: Option<RetryPolicy>,
    pub retry_statuses: Vec<u16>,
    pub pause_on_gone: bool,
}

/// A new subscription that keeps the rules: what a create stores.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionSpec {
    pub integration_id: IntegrationId,
    /// Trimmed, without repeats.
    pub record_types: Vec<String>,
    /// The filter's canonical JSON; `None` for the empty filter.
    pub filter: Option<String>,
    /// Without repeats.
    pub fields: Vec<String>,
    pub retry_policy: RetryPolicy,
    pub answers: AnswerRules,
}

/// Each value of a [`SubscriptionDraft`] as checked, `None` where it was refused: what the
/// operation's own checks (the integration, the catalog) look at before it builds the
/// [`SubscriptionSpec`].
#[derive(Debug, Clone, Default)]
pub struct SpecParts {
    pub integration_id: Option<IntegrationId>,
    pub record_types: Option<Vec<String>>,
    pub filter: Option<Option<String>>,
    pub fields: Option<Vec<String>>,
    pub retry_policy: Option<RetryPolicy>,
    pub answers: Option<AnswerRules>,
    /// A required field was [`Given::Refused`]: the door named its problem.
    pub refused: bool,
}

impl SpecParts {
    /// The spec, or every problem found. A field the door refused is named by the door, not
    /// again here, so the problems may be none.
    pub fn finish(self, errors: FieldErrors) -> Result<SubscriptionSpec, FieldErrors> {
        if self.refused && errors.is_empty() {
            return Err(errors);
        }
        errors.or_value(|| self.spec())
    }

    /// The spec, when every part passed.
    fn spec(self) -> Option<SubscriptionSpec> {
        Some(SubscriptionSpec {
            integration_id: self.integration_id?,
            record_types: self.record_types?,
            filter: self.filter?,
            fields: self.fields?,
            retry_policy: self.retry_policy?,
            answers: self.answers?,
        })
    }
}

impl SubscriptionDraft {
    /// The subscription the draft describes, or every field at fault.
    pub fn check(self) -> Result<SubscriptionSpec, FieldErrors> {
        let (parts, errors) = self.parts();
        parts.finish(errors)
    }

    /// Each value checked, and every problem found, in the fields' order.
    pub fn parts(self) -> (SpecParts, FieldErrors) {
        let mut errors = FieldErrors::default();
        let refused = [
            matches!(self.integration_id, Given::Refused),
            matches!(self.record_types, Given::Refused),
            matches!(self.fields, Given::Refused),
        ]
        .contains(&true);
        let parts = SpecParts {
            integration_id: required(&mut errors, "integration_id", self.integration_id)
                .and_then(|text| integration_id(&mut errors, &text)),
            record_types: required(&mut errors, "record_types", self.record_types)
                .and_then(|types| check_record_types(&mut errors, types)),
            filter: match self.filter {
                Some(value) => check_filter(&mut errors, &value),
                None => Some(None),
            },
            fields: required(&mut errors, "fields", self.fields)
                .and_then(|fields| check_fields(&mut errors, fields)),
            retry_policy: match self.retry_policy {
                Some(policy) => check_retry_policy(&mut errors, policy),
                None => Some(RetryPolicy::default()),
            },
            answers: check_answers(&mut errors, &self.retry_statuses, self.pause_on_gone),
            refused,
        };
        (parts, errors)
    }
}

/// An edit of a subscription as a door read it: each field left as it is, `null` (remove it or
/// restore its default) or a new value.
#[derive(Debug, Clone, Default)]
pub struct SubscriptionEditDraft {
    pub record_types: Patch<Vec<String>>,
    /// `null` removes the filter.
    pub filter: Patch<Value>,
    pub fields: Patch<Vec<String>>,
    /// `null` restores the default.
    pub retry_policy: Patch<RetryPolicy>,
    /// `null` restores `[]`.
    pub retry_statuses: Patch<Vec<u16>>,
    /// `null` restores `false`.
    pub pause_on_gone: Patch<bool>,
}

/// An edit that keeps the rules: `None` (or [`Patch::Absent`]) leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SubscriptionEdit {
    pub record_types: Option<Vec<String>>,
    /// The filter's canonical JSON; [`Patch::Null`] removes it.
    pub filter: Patch<String>,
    pub fields: Option<Vec<String>>,
    pub retry_policy: Option<RetryPolicy>,
    pub retry_statuses: Option<Vec<u16>>,
    pub pause_on_gone: Option<bool>,
}

impl SubscriptionEditDraft {
    /// The edit the draft describes, or every field at fault. The answers named are checked
    /// alone here, beside the stored ones by [`SubscriptionEdit::answers`].
    pub fn check(self) -> Result<SubscriptionEdit, FieldErrors> {
        let mut errors = FieldErrors::default();
        let record_types = match self.record_types {
            Patch::Set(types) => check_record_types(&mut errors, types),
            Patch::Null => {
                errors.add("record_types", "must not be null");
                None
            }
            Patch::Absent => None,
        };
        let filter = match self.filter {
            Patch::Set(value) => match check_filter(&mut errors, &value) {
                Some(Some(text)) => Patch::Set(text),
                Some(None) => Patch::Null,
                None => Patch::Absent,
            },
            Patch::Null => Patch::Null,
            Patch::Absent => Patch::Absent,
        };
        let fields = match self.fields {
            Patch::Set(fields) => check_fields(&mut errors, fields),
            Patch::Null => {
                errors.add("fields", "must not be null; use [] for no fields");
                None
            }
            Patch::Absent => None,
        };
        let retry_policy = match self.retry_policy {
            Patch::Set(policy) => check_retry_policy(&mut errors, policy),
            Patch::Null => Some(RetryPolicy::default()),
            Patch::Absent => None,
        };
        let edit = SubscriptionEdit {
            record_types,
            filter,
            fields,
            retry_policy,
            retry_statuses: or_default(self.retry_statuses),
            pause_on_gone: or_default(self.pause_on_gone),
        };
        if edit.changes_answers() {
            let given = edit.retry_statuses.as_deref().unwrap_or_default();
            check_answers(&mut errors, given, edit.pause_on_gone.unwrap_or_default());
        }
        errors.or_value(|| Some(edit))
    }
}

impl SubscriptionEdit {
    /// Whether the edit leaves every field as it is.
    pub fn is_empty(&self) -> bool {
        *self == SubscriptionEdit::default()
    }

    /// Whether the edit names record types or fields (which the catalog must know).
    pub fn names_catalog(&self) -> bool {
        self.record_types.is_some() || self.fields.is_some()
    }

    pub fn changes_answers(&self) -> bool {
        self.retry_statuses.is_some() || self.pause_on_gone.is_some()
    }

    /// The answer rules to store beside the stored ones (`retry_statuses`, `pause_on_gone`):
    /// `None` when the edit leaves them as they are.
    pub fn answers(
        &self,
        stored_statuses: &[u16],
        stored_pause_on_gone: bool,
    ) -> Result<Option<AnswerRules>, FieldErrors> {
        if !self.changes_answers() {
            return Ok(None);
        }
        let mut errors = FieldErrors::default();
        let statuses = self.retry_statuses.as_deref().unwrap_or(stored_statuses);
        let pause_on_gone = self.pause_on_gone.unwrap_or(stored_pause_on_gone);
        let rules = check_answers(&mut errors, statuses, pause_on_gone);
        errors.or_value(|| rules.map(Some))
    }
}

/// A patch's value: `null` restores the default.
fn or_default<T: Default>(patch: Patch<T>) -> Option<T> {
    match patch {
        Patch::Set(v) => Some(v),
        Patch::Null => Some(T::default()),
        Patch::Absent => None,
    }
}

fn required<T>(errors: &mut FieldErrors, name: &str, given: Given<T>) -> Option<T> {
    match given {
        Given::Value(v) => Some(v),
        Given::Missing => {
            errors.add(name, "is required");
            None
        }
        Given::Refused => None,
    }
}

fn integration_id(errors: &mut FieldErrors, text: &str) -> Option<IntegrationId> {
    let id = text.parse().ok();
    if id.is_none() {
        errors.add("integration_id", NO_SUCH_INTEGRATION);
    }
    id
}

/// The answer rules to store; a wrong status is named by its index.
fn check_answers(
    errors: &mut FieldErrors,
    statuses: &[u16],
    pause_on_gone: bool,
) -> Option<AnswerRules> {
    if statuses.len() > MAX_RETRY_STATUSES {
        errors.add(
            "retry_statuses",
            format!("at most {MAX_RETRY_STATUSES} statuses are accepted"),
        );
        return None;
    }
    match AnswerRules::new(statuses, pause_on_gone) {
        Ok(rules) => Some(rules),
        Err((i, e)) => {
            errors.add(format!("retry_statuses[{i}]"), e.to_string());
            None
        }
    }
}

/// The record types to store: trimmed, without repeats, bounded.
fn check_record_types(errors: &mut FieldErrors, types: Vec<String>) -> Option<Vec<String>> {
    if types.is_empty() {
        errors.add(
            "record_types",
            "must name at least one record type (\"*\" for all)",
        );
        return None;
    }
    if types.len() > MAX_RECORD_TYPES {
        errors.add(
            "record_types",
            format!("at most {MAX_RECORD_TYPES} record types are accepted"),
        );
        return None;
    }
    let mut out: Vec<String> = Vec::with_capacity(types.len());
    let mut ok = true;
    for (i, t) in types.iter().enumerate() {
        let t = t.trim();
        if t.is_empty() {
            errors.add(format!("record_types[{i}]"), "must not be empty");
            ok = false;
        } else if t.chars().count() > MAX_RECORD_TYPE_CHARS
            || t.chars().any(|c| c.is_control() || c.is_whitespace())
        {
            errors.add(
                format!("record_types[{i}]"),
                format!(
                    "must be at most {MAX_RECORD_TYPE_CHARS} characters without spaces or control characters"
                ),
            );
            ok = false;
        } else if !out.iter().any(|o| o == t) {
            out.push(t.to_owned());
        }
    }
    ok.then_some(out)
}

/// The filter to store: `None` for the empty filter, else its canonical JSON text.
fn check_filter(errors: &mut FieldErrors, value: &Value) -> Option<Option<String>> {
    match Filter::parse(value) {
        Ok(Filter::Always) => Some(None),
        Ok(filter) => Some(Some(filter.to_json().to_string())),
        Err(e) => {
            errors.add("filter", e.to_string());
            None
        }
    }
}

/// The projected fields to store, without repeats.
fn check_fields(errors: &mut FieldErrors, fields: Vec<String>) -> Option<Vec<String>> {
    match Projection::new(fields.iter()) {
        Ok(_) => {
            let mut out: Vec<String> = Vec::with_capacity(fields.len());
            for field in fields {
                if !out.contains(&field) {
                    out.push(field);
                }
            }
            Some(out)
        }
        Err(ProjectionError::Path { index, source }) => {
            errors.add(format!("fields[{index}]"), source.to_string());
            None
        }
        Err(e @ ProjectionError::TooManyFields { .. }) => {
            errors.add("fields", e.to_string());
            None
        }
    }
}

fn check_retry_policy(errors: &mut FieldErrors, policy: RetryPolicy) -> Option<RetryPolicy> {
    match policy.validate() {
        Ok(()) => Some(policy),
        Err(e) => {
            let field = match e {
                RetryPolicyError::MaxRetriesOutOfRange(_) => "retry_policy.max_retries",
                RetryPolicyError::RetryDelayOutOfRange(_) => "retry_policy.retry_delay_secs",
            };
            errors.add(field, e.to_string());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn draft() -> SubscriptionDraft {
        SubscriptionDraft {
            integration_id: Given::Value("int_01".into()),
            record_types: Given::Value(vec!["order".into()]),
            fields: Given::Value(vec!["status".into()]),
            ..SubscriptionDraft::default()
        }
    }

    /// The fields named by a refused check, in order.
    fn refused<T: std::fmt::Debug>(checked: Result<T, FieldErrors>) -> Vec<String> {
        checked
            .unwrap_err()
            .iter()
            .map(|e| e.field.clone())
            .collect()
    }

    fn message(checked: Result<SubscriptionSpec, FieldErrors>) -> String {
        checked.unwrap_err().to_string()
    }

    #[test]
    fn a_valid_draft_is_a_spec_with_the_defaults_filled_in() {
        let spec = draft().check().unwrap();
        assert_eq!(spec.integration_id.as_str(), "int_01");
        assert_eq!(spec.record_types, ["order"]);
        assert_eq!(spec.filter, None);
        assert_eq!(spec.retry_policy, RetryPolicy::FixedSchedule);
        assert_eq!(spec.answers, AnswerRules::default());
    }

    #[test]
    fn every_required_field_left_out_is_named_and_one_the_door_refused_is_not_named_again() {
        let missing = SubscriptionDraft::default().check();
        assert_eq!(
            refused(missing),
            ["integration_id", "record_types", "fields"]
        );
        let read_by_the_door = SubscriptionDraft {
            fields: Given::Refused,
            ..draft()
        };
        let refused = read_by_the_door.check().unwrap_err();
        assert!(refused.is_empty(), "{refused}");
    }

    #[test]
    fn an_integration_id_that_cannot_be_an_id_is_no_integration_of_the_account() {
        let bad = SubscriptionDraft {
            integration_id: Given::Value("a b".into()),
            ..draft()
        };
        assert_eq!(
            message(bad.check()),
            format!("integration_id: {NO_SUCH_INTEGRATION}")
        );
    }

    #[test]
    fn record_types_are_trimmed_and_deduplicated() {
        let spec = SubscriptionDraft {
            record_types: Given::Value(vec![" order".into(), "order".into(), "*".into()]),
            ..draft()
        }
        .check()
        .unwrap();
        assert_eq!(spec.record_types, ["order", "*"]);
    }

    #[test]
    fn record_types_must_name_at_least_one_and_at_most_fifty() {
        let types = |n: usize| SubscriptionDraft {
            record_types: Given::Value((0..n).map(|i| format!("t{i}")).collect()),
            ..draft()
        };
        assert!(message(types(0).check()).contains("at least one record type"));
        assert!(message(types(MAX_RECORD_TYPES + 1).check()).contains("at most 50"));
        assert!(types(MAX_RECORD_TYPES).check().is_ok());
    }

    #[test]
    fn each_bad_record_type_is_named_by_its_index() {
        let long = "x".repeat(MAX_RECORD_TYPE_CHARS + 1);
        let bad = SubscriptionDraft {
            record_types: Given::Value(vec![
                "order".into(),
                " ".into(),
                "a b".into(),
                long,
                "a\u{7}".into(),
            ]),
            ..draft()
        };
        let errors = bad.check().unwrap_err();
        let named: Vec<(&str, &str)> = errors
            .iter()
            .map(|e| (e.field.as_str(), e.message.as_str()))
            .collect();
        assert_eq!(named[0], ("record_types[1]", "must not be empty"));
        assert_eq!(named[1].0, "record_types[2]");
        assert!(named[1].1.contains("without spaces"));
        assert_eq!(named[2].0, "record_types[3]");
        assert_eq!(named[3].0, "record_types[4]");
        assert_eq!(named.len(), 4);
    }

    #[test]
    fn a_filter_is_stored_canonically_and_the_empty_filter_is_none() {
        let with = |filter: Value| SubscriptionDraft {
            filter: Some(filter),
            ..draft()
        };
        assert_eq!(with(json!({})).check().unwrap().filter, None);
        let stored = with(json!({"field": "warehouse", "eq": "W1"}))
            .check()
            .unwrap()
            .filter
            .unwrap();
        let parsed = Filter::parse(&serde_json::from_str(&stored).unwrap()).unwrap();
        assert_eq!(parsed.to_json().to_string(), stored);
    }

    #[test]
    fn a_filter_the_grammar_refuses_is_named_with_the_grammars_reason() {
        let bad = SubscriptionDraft {
            filter: Some(json!({"field": "nope", "eq": 1})),
            ..draft()
        };
        let errors = bad.check().unwrap_err();
        let first = errors.iter().next().unwrap();
        assert_eq!(first.field, "filter");
        assert!(first.message.contains("unknown field"), "{}", first.message);
    }

    #[test]
    fn projected_fields_are_deduplicated_and_a_bad_path_is_named_by_its_index() {
        let with = |fields: &[&str]| SubscriptionDraft {
            fields: Given::Value(fields.iter().map(|f| f.to_string()).collect()),
            ..draft()
        };
        assert_eq!(with(&["a", "b", "a"]).check().unwrap().fields, ["a", "b"]);
        assert_eq!(refused(with(&["a", "b..c"]).check()), ["fields[1]"]);
        let many: Vec<String> = (0..1000).map(|i| format!("f{i}")).collect();
        let too_many = SubscriptionDraft {
            fields: Given::Value(many),
            ..draft()
        };
        assert_eq!(refused(too_many.check()), ["fields"]);
    }

    #[test]
    fn a_retry_policy_out_of_range_names_the_setting_at_fault() {
        let with = |max_retries, retry_delay_secs| SubscriptionDraft {
            retry_policy: Some(RetryPolicy::Exponential {
                max_retries,
                retry_delay_secs,
            }),
            ..draft()
        };
        assert_eq!(refused(with(0, 5).check()), ["retry_policy.max_retries"]);
        assert_eq!(
            refused(with(5, 0).check()),
            ["retry_policy.retry_delay_secs"]
        );
        assert!(with(5, 30).check().is_ok());
    }

    #[test]
    fn retried_statuses_are_bounded_and_a_wrong_one_is_named_by_its_index() {
        let with = |statuses: Vec<u16>, pause_on_gone| SubscriptionDraft {
            retry_statuses: statuses,
            pause_on_gone,
            ..draft()
        };
        assert_eq!(
            refused(with(vec![401, 500], false).check()),
            ["retry_statuses[1]"]
        );
        assert_eq!(
            refused(with(vec![410], true).check()),
            ["retry_statuses[0]"]
        );
        let too_many = (400..400 + MAX_RETRY_STATUSES as u16 + 1).collect();
        assert_eq!(refused(with(too_many, false).check()), ["retry_statuses"]);
        let rules = with(vec![403, 401, 401], true).check().unwrap().answers;
        assert_eq!(rules.retry_statuses, [401, 403]);
        assert!(rules.pause_on_gone);
    }

    #[test]
    fn every_field_at_fault_is_named_at_once_in_the_fields_order() {
        let bad = SubscriptionDraft {
            integration_id: Given::Missing,
            record_types: Given::Value(vec![]),
            filter: Some(json!([1])),
            fields: Given::Value(vec!["a..b".into()]),
            retry_policy: Some(RetryPolicy::Exponential {
                max_retries: 0,
                retry_delay_secs: 1,
            }),
            retry_statuses: vec![200],
            pause_on_gone: false,
        };
        assert_eq!(
            refused(bad.check()),
            [
                "integration_id",
                "record_types",
                "filter",
                "fields[0]",
                "retry_policy.max_retries",
                "retry_statuses[0]"
            ]
        );
    }

    #[test]
    fn an_edit_changes_only_what_it_names() {
        let edit = SubscriptionEditDraft::default().check().unwrap();
        assert!(edit.is_empty());
        let edit = SubscriptionEditDraft {
            fields: Patch::Set(vec!["status".into()]),
            ..SubscriptionEditDraft::default()
        }
        .check()
        .unwrap();
        assert!(!edit.is_empty() && edit.names_catalog() && !edit.changes_answers());
        assert_eq!(edit.record_types, None);
        assert_eq!(edit.filter, Patch::Absent);
    }

    #[test]
    fn an_edit_may_not_null_record_types_or_fields() {
        let edit = SubscriptionEditDraft {
            record_types: Patch::Null,
            fields: Patch::Null,
            ..SubscriptionEditDraft::default()
        };
        let errors = edit.check().unwrap_err();
        assert_eq!(
            errors.to_string(),
            "record_types: must not be null; fields: must not be null; use [] for no fields"
        );
    }

    #[test]
    fn an_edit_removes_the_filter_with_null_or_an_empty_filter_and_restores_defaults_with_null() {
        let edit = |filter| {
            SubscriptionEditDraft {
                filter,
                retry_policy: Patch::Null,
                retry_statuses: Patch::Null,
                pause_on_gone: Patch::Null,
                ..SubscriptionEditDraft::default()
            }
            .check()
            .unwrap()
        };
        for removing in [Patch::Null, Patch::Set(json!({}))] {
            let e = edit(removing);
            assert_eq!(e.filter, Patch::Null);
            assert_eq!(e.retry_policy, Some(RetryPolicy::FixedSchedule));
            assert_eq!(e.retry_statuses, Some(vec![]));
            assert_eq!(e.pause_on_gone, Some(false));
        }
        let set = edit(Patch::Set(json!({"field": "warehouse", "eq": "W1"})));
        assert!(matches!(set.filter, Patch::Set(_)));
    }

    #[test]
    fn an_edit_applies_the_same_rules_to_each_field_it_names() {
        let edit = SubscriptionEditDraft {
            record_types: Patch::Set(vec![]),
            filter: Patch::Set(json!({"field": "record.x", "gt": [1]})),
            fields: Patch::Set(vec!["ok".into(), "a.b.c.d.e.f.g.h.i".into()]),
            retry_policy: Patch::Set(RetryPolicy::Exponential {
                max_retries: 5,
                retry_delay_secs: 0,
            }),
            retry_statuses: Patch::Set(vec![500]),
            pause_on_gone: Patch::Absent,
        };
        assert_eq!(
            refused(edit.check()),
            [
                "record_types",
                "filter",
                "fields[1]",
                "retry_policy.retry_delay_secs",
                "retry_statuses[0]"
            ]
        );
    }

    #[test]
    fn an_edits_answers_are_checked_beside_the_stored_ones() {
        // Pausing on a 410 alone is fine; beside a stored 410 that is retried it is not.
        let edit = SubscriptionEditDraft {
            pause_on_gone: Patch::Set(true),
            ..SubscriptionEditDraft::default()
        }
        .check()
        .unwrap();
        assert_eq!(refused(edit.answers(&[410], false)), ["retry_statuses[0]"]);
        let rules = edit.answers(&[401], false).unwrap().unwrap();
        assert_eq!(
            (rules.retry_statuses, rules.pause_on_gone),
            (vec![401], true)
        );
        let untouched = SubscriptionEditDraft::default().check().unwrap();
        assert_eq!(untouched.answers(&[410], true), Ok(None));
    }
}
