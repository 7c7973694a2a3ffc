//! The Manage page's subscription forms read into the domain's drafts
//! ([`shared::domain::subscription_input`]): a new subscription's and an edit's (only the fields
//! filled in: an edit changes what it names). A value a field cannot take (a status that is not a
//! number, a retry kind that does not exist) is named as the API's reading names one; the rules
//! of a valid subscription are the check's, the same as the API's.

use super::page::{field, json_text};
use serde_json::Value;
use shared::domain::input::{FieldErrors, Patch};
use shared::domain::retry::RetryPolicy;
use shared::domain::subscription_input::{Given, SubscriptionDraft, SubscriptionEditDraft};
use shared::web::problem::ApiError;

type Form = [(String, String)];

/// A comma-separated list's trimmed words.
fn words(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The subscription fields of a form, typed (only those given: an edit changes what it names).
/// A value its field cannot take is named in the errors, as the API's reading names one.
#[derive(Default)]
struct SubscriptionForm {
    record_types: Option<Vec<String>>,
    fields: Option<Vec<String>>,
    /// The filter's JSON, or `Null` when "remove the filter" is checked.
    filter: Patch<Value>,
    retry_policy: Option<RetryPolicy>,
    /// The answers' fieldset: its statuses (`None`: one is not a status) and checkbox.
    answers: Option<(Option<Vec<u16>>, bool)>,
}

fn put_subscription_fields(form: &Form, errors: &mut FieldErrors) -> SubscriptionForm {
    let given = |name: &str| field(form, name).map(str::trim).filter(|v| !v.is_empty());
    let mut filter = given("filter").map_or(Patch::Absent, |v| Patch::Set(json_text(v)));
    if field(form, "remove_filter") == Some("on") {
        filter = Patch::Null;
    }
    // The answers' fieldset is on every subscription form: its statuses and checkbox are sent as
    // they stand (an unchecked box is no field at all).
    let answers = field(form, "answers_shown").map(|_| {
        let statuses = retry_statuses(given("retry_statuses").unwrap_or_default(), errors);
        (statuses, field(form, "pause_on_gone") == Some("on"))
    });
    SubscriptionForm {
        record_types: given("record_types").map(words),
        fields: given("fields").map(words),
        filter,
        retry_policy: retry_policy(form, errors),
        answers,
    }
}

/// The retry policy the form chooses: the kind, and for doubling waits the numbers as given.
fn retry_policy(form: &Form, errors: &mut FieldErrors) -> Option<RetryPolicy> {
    let given = |name: &str| field(form, name).map(str::trim).filter(|v| !v.is_empty());
    match given("retry_kind")? {
        "fixed_schedule" => Some(RetryPolicy::FixedSchedule),
        "exponential" => {
            let mut number = |name: &str| match given(name).map(str::parse::<u32>) {
                Some(Ok(n)) => Some(n),
                Some(Err(_)) => {
                    errors.add(format!("retry_policy.{name}"), "must be a whole number");
                    None
                }
                None => {
                    errors.add(
                        format!("retry_policy.{name}"),
                        "is required for doubling waits",
                    );
                    None
                }
            };
            let (max_retries, retry_delay_secs) =
                (number("max_retries"), number("retry_delay_secs"));
            Some(RetryPolicy::Exponential {
                max_retries: max_retries?,
                retry_delay_secs: retry_delay_secs?,
            })
        }
        other => {
            errors.add(
                "retry_policy",
                format!("unknown variant `{other}`, expected `fixed_schedule` or `exponential`"),
            );
            None
        }
    }
}

/// The statuses of a comma- or space-separated list; `None` (named) when one is not a status.
fn retry_statuses(text: &str, errors: &mut FieldErrors) -> Option<Vec<u16>> {
    let statuses: Result<Vec<u16>, _> = text
        .split([',', ' '])
        .filter(|s| !s.is_empty())
        .map(str::parse::<u16>)
        .collect();
    if statuses.is_err() {
        errors.add("retry_statuses", "must be HTTP statuses (whole numbers)");
    }
    statuses.ok()
}

/// A new subscription's draft from its form, and the problems reading the form found.
pub(crate) fn new_subscription_request(form: &Form) -> (SubscriptionDraft, FieldErrors) {
    let mut errors = FieldErrors::default();
    let s = put_subscription_fields(form, &mut errors);
    let required = |v: Option<Vec<String>>| v.map_or(Given::Missing, Given::Value);
    let (statuses, pause_on_gone) = s.answers.unwrap_or_default();
    let draft = SubscriptionDraft {
        integration_id: field(form, "integration_id")
            .map_or(Given::Missing, |i| Given::Value(i.to_owned())),
        record_types: required(s.record_types),
        filter: s.filter.set().cloned(),
        fields: required(s.fields),
        retry_policy: s.retry_policy,
        retry_statuses: statuses.unwrap_or_default(),
        pause_on_gone,
    };
    (draft, errors)
}

/// A subscription edit's draft from its form (what it names), and the problems reading the form
/// found.
pub(crate) fn edited_subscription_request(form: &Form) -> (SubscriptionEditDraft, FieldErrors) {
    let mut errors = FieldErrors::default();
    let s = put_subscription_fields(form, &mut errors);
    let patch = |v: Option<Vec<String>>| v.map_or(Patch::Absent, Patch::Set);
    let (statuses, pause_on_gone) = match s.answers {
        Some((statuses, gone)) => (statuses.map_or(Patch::Absent, Patch::Set), Patch::Set(gone)),
        None => (Patch::Absent, Patch::Absent),
    };
    let draft = SubscriptionEditDraft {
        record_types: patch(s.record_types),
        filter: s.filter,
        fields: patch(s.fields),
        retry_policy: s.retry_policy.map_or(Patch::Absent, Patch::Set),
        retry_statuses: statuses,
        pause_on_gone,
    };
    (draft, errors)
}

/// A form's refusal: the problems reading it found, then the check's, in one 422.
pub(crate) fn refused(read: FieldErrors, checked: Option<FieldErrors>) -> ApiError {
    let mut errors = read.into_vec();
    errors.extend(checked.map(FieldErrors::into_vec).unwrap_or_default());
    ApiError::Validation { errors }
}
