//! An account's usage item: how many integrations, subscriptions and live (unrevoked) tokens it
//! has, and the limits an operator set for it alone.
//!
//! | item          | pk                  | sk       | table    |
//! |---------------|---------------------|----------|----------|
//! | account usage | `LIMITS#{account}`  | `LIMITS` | delivery |
//!
//! The counts are exact under concurrency: every write that creates a counted item carries
//! [`take`] in its transaction (one `ADD` per count, on the condition that the count is below
//! the account's limit), and every write that deletes or revokes one carries [`give_back`].
//! Of any number of concurrent creates at the limit, exactly the room left passes. An account's
//! own limit (`max_…`, set by an operator) replaces the deployment's default; its absence means
//! the default. The item is kept out of the account's configuration partition, so the hot
//! path's configuration query never reads it; its `kind` is none the stream filters pass.

use super::expr::{n, s, Expr};
use super::keys::{account_limits_pk, ACCOUNT_LIMITS_SK};
use super::update::{conditional_update, delete_any};
use super::write::{built, put_new, Write};
use super::{from_item, read, Item, StoreError};
use crate::config::AccountLimits;
use crate::ids::AccountId;
use aws_sdk_dynamodb::types::Update;
use serde::{Deserialize, Serialize};

/// The `kind` of a usage item.
pub const KIND: &str = "account_limits";
/// The attribute of the account's own request rate (not a count: nothing is counted on this
/// item for it; see [`crate::store::rate_window::take_request`]).
pub(crate) const OWN_RATE_ATTRIBUTE: &str = "max_requests_per_second";

/// What is counted against a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Counted {
    Integrations,
    Subscriptions,
    LiveTokens,
}

impl Counted {
    pub const ALL: [Counted; 3] = [
        Counted::Integrations,
        Counted::Subscriptions,
        Counted::LiveTokens,
    ];

    /// The limit's name (in problems, the operator route's fields and the count's attribute).
    pub fn as_str(self) -> &'static str {
        match self {
            Counted::Integrations => "integrations",
            Counted::Subscriptions => "subscriptions",
            Counted::LiveTokens => "live_tokens",
        }
    }

    /// The attribute of the account's own limit.
    pub(crate) fn own_limit_attribute(self) -> &'static str {
        match self {
            Counted::Integrations => "max_integrations",
            Counted::Subscriptions => "max_subscriptions",
            Counted::LiveTokens => "max_live_tokens",
        }
    }

    /// The deployment's default limit.
    pub(crate) fn default_in(self, limits: &AccountLimits) -> u32 {
        match self {
            Counted::Integrations => limits.integrations,
            Counted::Subscriptions => limits.subscriptions,
            Counted::LiveTokens => limits.live_tokens,
        }
    }
}

/// The stored usage item. Counts may be below zero only for an account whose items were
/// created before counting began and deleted before its first count ([`count_from`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub integrations: i64,
    #[serde(default)]
    pub subscriptions: i64,
    #[serde(default)]
    pub live_tokens: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_integrations: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_subscriptions: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_live_tokens: Option<u32>,
    /// The account's own request rate ([`crate::web::account_rate`]), if an operator set one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_requests_per_second: Option<u32>,
}

impl Usage {
    pub fn used(&self, what: Counted) -> i64 {
        match what {
            Counted::Integrations => self.integrations,
            Counted::Subscriptions => self.subscriptions,
            Counted::LiveTokens => self.live_tokens,
        }
    }

    /// The account's own limit of `what`, if an operator set one.
    pub(crate) fn own_limit(&self, what: Counted) -> Option<u32> {
        match what {
            Counted::Integrations => self.max_integrations,
            Counted::Subscriptions => self.max_subscriptions,
            Counted::LiveTokens => self.max_live_tokens,
        }
    }

    /// The limit that applies: the account's own, else the deployment's.
    pub fn limit(&self, what: Counted, defaults: &AccountLimits) -> u32 {
        self.own_limit(what)
            .unwrap_or_else(|| what.default_in(defaults))
    }

    /// The first of `what` whose count has reached its limit.
    pub fn reached(&self, what: &[Counted], defaults: &AccountLimits) -> Option<(Counted, u32)> {
        what.iter()
            .map(|w| (*w, self.limit(*w, defaults)))
            .find(|(w, limit)| self.used(*w) >= i64::from(*limit))
    }
}

pub fn key(account_id: &AccountId) -> (String, String) {
    (account_limits_pk(account_id), ACCOUNT_LIMITS_SK.to_string())
}

/// Deletes the account's usage item, if it has one (the account's deletion).
pub(crate) fn forget(table: &str, account_id: &AccountId) -> Result<Write, StoreError> {
    let (pk, sk) = key(account_id);
    delete_any(table, &pk, &sk)
}

/// A consistent read of the account's usage item (`None` before its first count).
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
) -> Result<Option<Usage>, StoreError> {
    let (pk, sk) = key(account_id);
    read::get(dynamo, table, &pk, &sk)
        .await?
        .map(from_item)
        .transpose()
}

fn item(account_id: &AccountId, usage: &Usage) -> Result<Item, StoreError> {
    let (pk, sk) = key(account_id);
    let mut item = super::to_item(usage, &pk, &sk, KIND)?;
    item.insert("account_id".into(), s(account_id));
    Ok(item)
}

/// The first count of an account whose items were counted by reading them: refused when the
/// item exists already (another request counted first, or a create made it).
pub(crate) fn count_from(
    table: &str,
    account_id: &AccountId,
    usage: &Usage,
) -> Result<Write, StoreError> {
    put_new(table, item(account_id, usage)?)
}

/// Adds one to each count of `what`, on the condition that each is below its limit: the
/// account's own (`max_…`) when set, else `defaults`'. For the transaction of the write that
/// creates the counted items (one update: a transaction may touch an item once).
pub fn take(
    table: &str,
    account_id: &AccountId,
    what: &[Counted],
    defaults: &AccountLimits,
) -> Result<Write, StoreError> {
    let mut e = Expr::new()
        .name("#account", "account_id")
        .name("#kind", "kind")
        .value(":one", n(1))
        .value(":zero", n(0))
        .value(":account", s(account_id))
        .value(":kind", s(KIND));
    let mut adds = Vec::new();
    let mut conditions = Vec::new();
    for (i, w) in what.iter().enumerate() {
        let (count, own, default) = (format!("#n{i}"), format!("#m{i}"), format!(":d{i}"));
        e = e
            .name(&count, w.as_str())
            .name(&own, w.own_limit_attribute())
            .value(&default, n(w.default_in(defaults)));
        adds.push(format!("{count} :one"));
        // Below the default when the account has no limit of its own, below its own when it
        // has (a missing count is zero).
        conditions.push(format!(
            "((attribute_not_exists({own}) AND (attribute_not_exists({count}) OR {count} < {default})) \
             OR (attribute_exists({own}) AND ((attribute_not_exists({count}) AND :zero < {own}) OR {count} < {own})))"
        ));
    }
    conditional_update(
        table,
        key(account_id),
        format!(
            "ADD {} SET #account = :account, #kind = :kind",
            adds.join(", ")
        ),
        conditions.join(" AND "),
        &e,
    )
}

/// Takes one from each count of `what`: for the transaction of the write that deletes or
/// revokes a counted item (whose own condition makes it happen once).
pub(crate) fn give_back(
    table: &str,
    account_id: &AccountId,
    what: &[Counted],
) -> Result<Write, StoreError> {
    let mut e = Expr::new().value(":minus", n(-1));
    let mut adds = Vec::new();
    for (i, w) in what.iter().enumerate() {
        let count = format!("#n{i}");
        e = e.name(&count, w.as_str());
        adds.push(format!("{count} :minus"));
    }
    let (pk, sk) = key(account_id);
    Ok(Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression(format!("ADD {}", adds.join(", ")))
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )?))
}

/// Sets (`Some`) or clears (`None`: back to the default) the account's own limits named in
/// `limits` (by their attributes: [`Counted::own_limit_attribute`], [`OWN_RATE_ATTRIBUTE`]); the
/// other limits stay as they are.
pub(crate) fn set_own_limits(
    table: &str,
    account_id: &AccountId,
    limits: &[(&str, Option<u32>)],
) -> Result<Write, StoreError> {
    let mut e = Expr::new()
        .name("#account", "account_id")
        .name("#kind", "kind")
        .value(":account", s(account_id))
        .value(":kind", s(KIND));
    let mut sets = vec![
        "#account = :account".to_string(),
        "#kind = :kind".to_string(),
    ];
    let mut removes = Vec::new();
    for (i, (w, limit)) in limits.iter().enumerate() {
        let own = format!("#m{i}");
        e = e.name(&own, w);
        match limit {
            Some(v) => {
                let value = format!(":m{i}");
                e = e.value(&value, n(*v));
                sets.push(format!("{own} = {value}"));
            }
            None => removes.push(own),
        }
    }
    let mut expression = format!("SET {}", sets.join(", "));
    if !removes.is_empty() {
        expression.push_str(&format!(" REMOVE {}", removes.join(", ")));
    }
    let (pk, sk) = key(account_id);
    Ok(Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression(expression)
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DEFAULT_ACCOUNT_LIMITS;
    use crate::ids::id;
    use crate::store::update::expect_update;

    #[test]
    fn a_take_adds_one_to_each_count_only_below_its_limit_in_one_update() {
        let w = take(
            "t",
            &id("a1"),
            &[Counted::Integrations, Counted::LiveTokens],
            &DEFAULT_ACCOUNT_LIMITS,
        )
        .unwrap();
        let u = expect_update(w);
        assert_eq!(u.key()["pk"].as_s().unwrap(), "LIMITS#a1");
        assert_eq!(u.key()["sk"].as_s().unwrap(), "LIMITS");
        assert!(u.update_expression().starts_with("ADD #n0 :one, #n1 :one"));
        let names = u.expression_attribute_names().unwrap();
        assert_eq!(names["#n0"], "integrations");
        assert_eq!(names["#m1"], "max_live_tokens");
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":d0"].as_n().unwrap(), "50");
        assert_eq!(values[":d1"].as_n().unwrap(), "50");
        let condition = u.condition_expression().unwrap();
        assert!(condition.contains("#n0 < :d0") && condition.contains("#n1 < #m1"));
        assert!(
            condition.contains(") AND (("),
            "both limits hold: {condition}"
        );
    }

    #[test]
    fn a_give_back_takes_one_and_own_limits_are_set_or_cleared() {
        let u = expect_update(give_back("t", &id("a1"), &[Counted::Subscriptions]).unwrap());
        assert_eq!(u.update_expression(), "ADD #n0 :minus");
        assert!(u.condition_expression().is_none());
        let u = expect_update(
            set_own_limits(
                "t",
                &id("a1"),
                &[
                    (Counted::Integrations.own_limit_attribute(), Some(80)),
                    (Counted::LiveTokens.own_limit_attribute(), None),
                ],
            )
            .unwrap(),
        );
        assert_eq!(
            u.update_expression(),
            "SET #account = :account, #kind = :kind, #m0 = :m0 REMOVE #m1"
        );
        assert_eq!(
            u.expression_attribute_values().unwrap()[":m0"]
                .as_n()
                .unwrap(),
            "80"
        );
    }

    #[test]
    fn the_limit_is_the_accounts_own_else_the_default() {
        let usage = Usage {
            integrations: 50,
            subscriptions: 3,
            max_subscriptions: Some(3),
            max_live_tokens: Some(500),
            live_tokens: 60,
            ..Usage::default()
        };
        let d = DEFAULT_ACCOUNT_LIMITS;
        assert_eq!(usage.limit(Counted::Integrations, &d), 50);
        assert_eq!(usage.limit(Counted::LiveTokens, &d), 500);
        assert_eq!(
            usage.reached(&[Counted::LiveTokens, Counted::Subscriptions], &d),
            Some((Counted::Subscriptions, 3))
        );
        assert_eq!(usage.reached(&[Counted::LiveTokens], &d), None);
    }
}
