//! The subscription item: what an integration wants delivered, filtered and projected, with its
//! lifecycle status (docs/lifecycles.md) and the run of consecutive dead deliveries that pauses
//! it. It lives in its account's partition, beside the account and its integrations.

use super::expr::{n, s, Expr};
use super::read::{self, Consistency};
use super::write::{built, Write};
use super::{keys, Item, StoreError};
use crate::domain::retry::RetryPolicy;
use crate::domain::subscription::{
    SubscriptionStatus, SubscriptionTrigger, MAX_CONSECUTIVE_DEAD, SUBSCRIPTION_LIFECYCLE,
};
use crate::domain::time::Timestamp;
use aws_sdk_dynamodb::types::Update;
use serde::{Deserialize, Serialize};

/// The `kind` of a subscription item.
pub const KIND: &str = "subscription";

/// What an integration wants delivered, filtered and projected.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Subscription {
    pub account_id: String,
    pub subscription_id: String,
    pub integration_id: String,
    pub record_types: Vec<String>,
    /// The change-time filter as the API received it (JSON); absent means every change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// Fields of the record the deliveries carry (dotted paths).
    pub fields: Vec<String>,
    #[serde(default)]
    pub retry_policy: RetryPolicy,
    pub status: SubscriptionStatus,
    #[serde(default)]
    pub consecutive_dead: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// The key of a subscription.
pub fn key(account_id: &str, subscription_id: &str) -> (String, String) {
    (
        keys::account_pk(account_id),
        keys::subscription_sk(subscription_id),
    )
}

impl Subscription {
    pub fn key(&self) -> (String, String) {
        key(&self.account_id, &self.subscription_id)
    }

    pub fn from_item(item: Item) -> Result<Self, StoreError> {
        super::from_item(item)
    }
}

/// A consistent read of a subscription.
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &str,
    subscription_id: &str,
) -> Result<Option<Subscription>, StoreError> {
    let (pk, sk) = key(account_id, subscription_id);
    read::get(dynamo, table, &pk, &sk)
        .await?
        .map(Subscription::from_item)
        .transpose()
}

/// The subscription's run of consecutive dead deliveries (an eventually consistent read of
/// that attribute alone: a success reads it to learn whether there is a run to end).
pub async fn dead_count(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &str,
    subscription_id: &str,
) -> Result<u32, StoreError> {
    let (pk, sk) = key(account_id, subscription_id);
    Ok(read::get_with(
        dynamo,
        table,
        &pk,
        &sk,
        Consistency::Eventual,
        Some("consecutive_dead"),
    )
    .await?
    .and_then(|i| {
        i.get("consecutive_dead")
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse::<u32>().ok())
    })
    .unwrap_or(0))
}

/// Adds one dead delivery to the subscription's run. The add is atomic, so concurrent dead
/// deliveries of one subscription never lose a count; it is sent in one transaction with the
/// dead outcome, so a redelivered message can never count twice.
pub fn count_dead(
    table: &str,
    account_id: &str,
    subscription_id: &str,
    now: Timestamp,
) -> Result<Write, StoreError> {
    let (pk, sk) = key(account_id, subscription_id);
    Ok(Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression("ADD consecutive_dead :one SET updated_at = :now")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":now", n(now.millis()))
            .build(),
    )?))
}

/// Ends the run of dead deliveries a success saw: takes the `seen` count off the run,
/// atomically. A dead outcome that lands between the read and this write stays counted (a plain
/// reset to zero would lose it); when the run is already shorter than `seen` (a resume reset it,
/// or another success ended it) the condition refuses the write and the run is left alone.
pub fn end_dead_run(
    table: &str,
    account_id: &str,
    subscription_id: &str,
    seen: u32,
) -> Result<Write, StoreError> {
    let (pk, sk) = key(account_id, subscription_id);
    Ok(Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression("ADD consecutive_dead :minus")
            .condition_expression("attribute_exists(pk) AND consecutive_dead >= :seen")
            .expression_attribute_values(":minus", n(-i64::from(seen)))
            .expression_attribute_values(":seen", n(seen))
            .build(),
    )?))
}

/// Pauses the subscription once its run of dead deliveries reaches the threshold, together with
/// the administrator notice (`notice`, a put of the notice item): the pause is conditional on
/// the lifecycle's `from` states for an automatic pause and on the count, so of several workers
/// that see the run at the threshold exactly one pauses and requests the notice.
pub fn auto_pause(
    table: &str,
    sub: &Subscription,
    notice: Write,
    now: Timestamp,
) -> Result<Write, StoreError> {
    let pause = SUBSCRIPTION_LIFECYCLE.expect(
        sub.status,
        SubscriptionTrigger::AutoPause,
        SubscriptionStatus::Paused,
    )?;
    let mut e = Expr::new()
        .value(":paused", s(SubscriptionStatus::Paused.to_string()))
        .value(":now", n(now.millis()))
        .value(":threshold", n(MAX_CONSECUTIVE_DEAD));
    let status_condition = e.status(&pause);
    let (pk, sk) = sub.key();
    let update = Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression("SET #status = :paused, paused_at = :now, updated_at = :now")
            .condition_expression(format!(
                "({status_condition}) AND consecutive_dead >= :threshold"
            ))
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )?);
    Write::all([update, notice])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(w: Write) -> Update {
        match w {
            Write::Update(u) => u,
            other => panic!("not an update: {other:?}"),
        }
    }

    #[test]
    fn a_dead_delivery_adds_one_to_the_run_of_an_existing_subscription() {
        let u = update(count_dead("t", "a", "s", Timestamp(7)).unwrap());
        assert_eq!(u.key()["sk"].as_s().unwrap(), "SUB#s");
        assert!(u
            .update_expression()
            .starts_with("ADD consecutive_dead :one"));
        assert_eq!(u.condition_expression(), Some("attribute_exists(pk)"));
    }

    #[test]
    fn a_success_takes_off_only_the_run_it_saw() {
        let u = update(end_dead_run("t", "a", "s", 3).unwrap());
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":minus"].as_n().unwrap(), "-3");
        assert_eq!(values[":seen"].as_n().unwrap(), "3");
        assert!(u
            .condition_expression()
            .unwrap()
            .contains("consecutive_dead >= :seen"));
    }
}
