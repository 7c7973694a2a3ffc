//! How the console speaks of an account's things: by their names, in words. A retry policy reads
//! as its waits ("1 m, 5 m, 30 m, 2 h, 6 h, then dead"), a filter as its conditions, a
//! subscription by its integration's name and its record types; the ids stay beside them, small.
//! [`Names`] is the lookup a page loads once for an account (its name, its integrations' names,
//! its subscriptions' labels).

use super::account_parts::integrations_and_subscriptions;
use maud::{html, Markup};
use serde_json::Value;
use shared::api::v1::subscriptions::SubscriptionView;
use shared::domain::retry::{RetryPolicy, EXPONENTIAL_MAX_WAIT, FIXED_SCHEDULE};
use shared::ids::{AccountId, IntegrationId, SubscriptionId};
use shared::web::problem::ApiError;
use shared::web::state::ApiState;
use std::collections::HashMap;
use std::time::Duration;

/// A wait as people write it: `30 s`, `5 m`, `2 h`, `1 d`, or `1 h 30 m` when it is not round.
pub fn short_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let parts = [(86_400, "d"), (3600, "h"), (60, "m"), (1, "s")];
    let mut rest = secs;
    let mut out = Vec::new();
    for (size, unit) in parts {
        if rest >= size {
            out.push(format!("{} {unit}", rest / size));
            rest %= size;
        }
        if out.len() == 2 {
            break;
        }
    }
    if out.is_empty() {
        "0 s".into()
    } else {
        out.join(" ")
    }
}

/// What each answer of the receiver does for a subscription (its `answers`, from the domain's
/// answer table): a small table, the subscription's own choices named as such.
pub fn answers_table(sub: &SubscriptionView) -> Markup {
    html! {
        table class="answers" data-testid="answers" {
            caption { "What each answer of the endpoint does" }
            thead { tr { th { "Answer" } th { "What happens" } } }
            tbody {
                @for row in &sub.answers {
                    tr data-testid="answer-row" { td data-label="Answer" { (row.answer) } td data-label="What happens" { (row.effect) } }
                }
            }
        }
    }
}

/// The waits of a policy between its attempts, and what becomes of a delivery after the last:
/// `1 m, 5 m, 30 m, 2 h, 6 h, then dead` (the fixed schedule), or for an exponential policy of
/// four attempts starting at 30 s, `30 s, 1 m, 2 m, then dead`.
pub fn retry_policy_text(policy: &RetryPolicy) -> String {
    let waits: Vec<Duration> = match *policy {
        RetryPolicy::FixedSchedule => FIXED_SCHEDULE.to_vec(),
        RetryPolicy::Exponential {
            max_retries,
            retry_delay_secs,
        } => (0..max_retries.saturating_sub(1))
            .map(|n| {
                let secs = u64::from(retry_delay_secs)
                    .checked_shl(n)
                    .filter(|s| s >> n == u64::from(retry_delay_secs))
                    .unwrap_or(u64::MAX);
                Duration::from_secs(secs.min(EXPONENTIAL_MAX_WAIT.as_secs()))
            })
            .collect(),
    };
    if waits.is_empty() {
        return "one attempt, then dead".into();
    }
    let listed: Vec<String> = waits.into_iter().map(short_duration).collect();
    format!("{}, then dead", listed.join(", "))
}

/// The kind of a policy in a few words, beside its waits.
pub fn retry_policy_kind(policy: &RetryPolicy) -> String {
    match *policy {
        RetryPolicy::FixedSchedule => "the standard schedule (6 attempts)".into(),
        RetryPolicy::Exponential { max_retries, .. } => {
            format!("doubling waits ({max_retries} attempts)")
        }
    }
}

/// A scalar operand as text (a string as itself, in quotes only when empty).
fn operand(v: &Value) -> String {
    match v {
        Value::String(s) if s.is_empty() => "\"\"".into(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(operand).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// A subscription's change-time filter in words: `event_code is one of order.created,
/// order.updated and record.total > 100`. `null` (or `{}`) is every change.
pub fn filter_text(filter: &Value) -> String {
    match filter {
        Value::Null => "every change".into(),
        Value::Object(m) if m.is_empty() => "every change".into(),
        other => condition_text(other),
    }
}

fn condition_text(v: &Value) -> String {
    let Value::Object(m) = v else {
        return operand(v);
    };
    let joined = |items: &Value, word: &str| match items {
        Value::Array(list) => {
            let parts: Vec<String> = list
                .iter()
                .map(|c| match c {
                    Value::Object(inner)
                        if inner.contains_key("all") || inner.contains_key("any") =>
                    {
                        format!("({})", condition_text(c))
                    }
                    _ => condition_text(c),
                })
                .collect();
            parts.join(word)
        }
        other => condition_text(other),
    };
    if let Some(items) = m.get("all") {
        return joined(items, " and ");
    }
    if let Some(items) = m.get("any") {
        return joined(items, " or ");
    }
    if let Some(inner) = m.get("not") {
        return format!("not ({})", condition_text(inner));
    }
    if let Some(f) = m.get("changed") {
        return format!("{} changed", operand(f));
    }
    let field = m.get("field").map(operand).unwrap_or_default();
    let ops = [
        ("eq", "is"),
        ("ne", "is not"),
        ("in", "is one of"),
        ("not_in", "is none of"),
        ("gt", ">"),
        ("gte", "≥"),
        ("lt", "<"),
        ("lte", "≤"),
    ];
    for (op, words) in ops {
        if let Some(x) = m.get(op) {
            return format!("{field} {words} {}", operand(x));
        }
    }
    match m.get("exists") {
        Some(Value::Bool(true)) => format!("{field} is present"),
        Some(_) => format!("{field} is absent"),
        None => v.to_string(),
    }
}

/// A subscription as people know it: its integration's name and the record types it takes
/// (`Shop · catalog_item`).
pub fn subscription_label(integration_name: Option<&str>, sub: &SubscriptionView) -> String {
    let types = sub.record_types.join(", ");
    match integration_name {
        Some(name) => format!("{name} · {types}"),
        None => format!("subscription · {types}"),
    }
}

/// Names of one account's things, read once for a page.
#[derive(Debug, Clone, Default)]
pub struct Names {
    pub account_name: Option<String>,
    integrations: HashMap<IntegrationId, String>,
    subscriptions: HashMap<SubscriptionId, String>,
}

impl Names {
    /// The account's name, its integrations' names and its subscriptions' labels.
    pub async fn load(state: &ApiState, account_id: &AccountId) -> Result<Names, ApiError> {
        let (integrations, subs) = integrations_and_subscriptions(state, account_id).await?;
        let account_name = account_name(state, account_id).await;
        Ok(Names::of(account_name, &integrations, &subs))
    }

    /// The lookup of listed integrations and subscriptions.
    pub fn of(
        account_name: Option<String>,
        integrations: &[shared::api::v1::integrations::IntegrationView],
        subs: &[SubscriptionView],
    ) -> Names {
        let integrations: HashMap<IntegrationId, String> = integrations
            .iter()
            .map(|i| (i.id.clone(), i.name.clone()))
            .collect();
        let subscriptions = subs
            .iter()
            .map(|s| {
                let name = integrations.get(&s.integration_id).map(String::as_str);
                (s.id.clone(), subscription_label(name, s))
            })
            .collect();
        Names {
            account_name,
            integrations,
            subscriptions,
        }
    }

    pub fn integration(&self, id: &IntegrationId) -> Option<&str> {
        self.integrations.get(id).map(String::as_str)
    }

    pub fn subscription(&self, id: &SubscriptionId) -> Option<&str> {
        self.subscriptions.get(id).map(String::as_str)
    }

    /// A subscription's label with its id small beside it (the id alone when it is not known).
    pub fn subscription_markup(&self, id: &SubscriptionId) -> Markup {
        named(self.subscription(id), id)
    }

    /// An integration's name with its id small beside it.
    pub fn integration_markup(&self, id: &IntegrationId) -> Markup {
        named(self.integration(id), id)
    }
}

/// A name with its id beside it as secondary text; the id alone when there is no name.
pub fn named(name: Option<&str>, id: impl std::fmt::Display) -> Markup {
    html! {
        @if let Some(n) = name { (n) " " span class="id mono" { (id) } }
        @else { span class="mono" { (id) } }
    }
}

/// The account's name (none when it cannot be read: the pages then show its id).
pub async fn account_name(state: &ApiState, account_id: &AccountId) -> Option<String> {
    shared::store::account::get(state.dynamo(), state.table(), account_id)
        .await
        .ok()
        .flatten()
        .map(|a| a.name)
}

/// Accounts an operator's account picker offers, at most this many (the rest are found by name
/// on the Accounts page, which links to their pages).
pub const PICKER_ACCOUNTS: usize = 500;

/// The accounts an operator picks from, by name (the account listing the Accounts page reads,
/// a page of a hundred at a time), sorted by name.
pub async fn account_choices(state: &ApiState) -> Vec<(AccountId, String)> {
    let mut out: Vec<(AccountId, String)> = Vec::new();
    let mut after: Option<AccountId> = None;
    while out.len() < PICKER_ACCOUNTS {
        let Ok((page, next)) =
            shared::store::account::page_after(state.dynamo(), state.table(), after.as_ref(), 100)
                .await
        else {
            break;
        };
        out.extend(page.into_iter().map(|a| (a.account_id, a.name)));
        match next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    out.sort_by(|a, b| {
        a.1.to_lowercase()
            .cmp(&b.1.to_lowercase())
            .then(a.0.cmp(&b.0))
    });
    out
}

/// A labelled select of accounts by name (`name="account"`, the account id as the value); the
/// chosen account stays chosen even when it is not among the listed.
pub fn account_select(id: &str, choices: &[(AccountId, String)], chosen: Option<&str>) -> Markup {
    let listed = chosen.is_none_or(|c| choices.iter().any(|(a, _)| a.as_str() == c));
    html! {
        label for=(id) { "Account"
            select id=(id) name="account" required {
                option value="" disabled selected[chosen.is_none()] { "Choose an account…" }
                @if !listed { @if let Some(c) = chosen { option value=(c) selected { (c) } } }
                @for (a, name) in choices {
                    option value=(a) selected[chosen == Some(a.as_str())] { (name) " (" (a) ")" }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_fixed_schedule_reads_as_its_waits_then_dead() {
        assert_eq!(
            retry_policy_text(&RetryPolicy::FixedSchedule),
            "1 m, 5 m, 30 m, 2 h, 6 h, then dead"
        );
    }

    #[test]
    fn an_exponential_policy_reads_as_its_doubling_waits_capped_at_a_day() {
        let p = RetryPolicy::Exponential {
            max_retries: 4,
            retry_delay_secs: 30,
        };
        assert_eq!(retry_policy_text(&p), "30 s, 1 m, 2 m, then dead");
        let one = RetryPolicy::Exponential {
            max_retries: 1,
            retry_delay_secs: 30,
        };
        assert_eq!(retry_policy_text(&one), "one attempt, then dead");
        let long = RetryPolicy::Exponential {
            max_retries: 20,
            retry_delay_secs: 86_400,
        };
        assert!(retry_policy_text(&long).starts_with("1 d, 1 d,"));
        assert_eq!(short_duration(Duration::from_secs(5400)), "1 h 30 m");
    }

    #[test]
    fn a_filter_reads_as_its_conditions() {
        let f = json!({"all": [
            {"field": "event_code", "in": ["order.created", "order.updated"]},
            {"field": "record.total", "gt": 100},
            {"not": {"field": "warehouse", "eq": "W2"}},
            {"changed": "status"},
            {"any": [{"field": "record.x", "exists": true}, {"field": "record_id", "ne": "A"}]}
        ]});
        assert_eq!(
            filter_text(&f),
            "event_code is one of order.created, order.updated and record.total > 100 and \
             not (warehouse is W2) and status changed and (record.x is present or record_id is not A)"
        );
        assert_eq!(filter_text(&Value::Null), "every change");
    }
}
