//! A test event: one synthetic, clearly marked event (type `rhythm.test`) an account asks to be
//! sent to a webhook subscription's endpoint (`POST /v1/subscriptions/{id}/test-event`, the
//! console's "Send test event"). The API records it `queued` and puts a [`TestEventWork`]
//! message on the delivery queue; the delivery function — the only one that may open signing
//! secrets — claims it (`queued` → `sending`), signs and sends it as it sends a delivery attempt,
//! and saves the outcome (`sent`). It is no delivery: no attempt number, no dead count, no pause.
//!
//! | item       | pk                  | sk             | table    |
//! |------------|---------------------|----------------|----------|
//! | test event | `TESTEV#{account}`  | `TEST#{id}`    | delivery |
//!
//! The item expires (TTL `expires_at`) [`RETENTION`] after it was requested; its `kind` is none
//! the delivery table's stream filters pass. A redelivered message finds the claim taken and sends
//! nothing again.

use super::attrs::{EXPIRES_AT, STATUS};
use super::expr::{n, s, Expr};
use super::keys;
use super::read::get_as;
use super::update::conditional_update;
use super::write::{put_new, Write};
use super::StoreError;
use super::{from_item, to_item};
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, IntegrationId, SubscriptionId};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The `kind` of a test-event item.
pub const KIND: &str = "test_event";
/// How long a test event's outcome can be read.
pub const RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Where a test event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestEventStatus {
    /// Recorded and on the delivery queue.
    Queued,
    /// Claimed by the delivery function, being sent.
    Sending,
    /// Sent: the outcome is recorded (whatever the endpoint answered).
    Sent,
}

impl TestEventStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TestEventStatus::Queued => "queued",
            TestEventStatus::Sending => "sending",
            TestEventStatus::Sent => "sent",
        }
    }
}

/// What the endpoint did with a sent test event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestEventOutcome {
    /// `success`, `transient`, `permanent` or `configuration_loss`, as a delivery attempt counts.
    pub classification: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    pub latency_ms: u64,
    /// The start of the answer's body, or the transport error (capped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
}

/// A test event as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestEvent {
    /// Its id, also the `webhook-id` it is sent as (`test_…`).
    pub test_event_id: String,
    pub account_id: AccountId,
    pub subscription_id: SubscriptionId,
    pub integration_id: IntegrationId,
    /// The endpoint it was requested for.
    pub url: String,
    /// The JSON body sent.
    pub payload: String,
    pub status: TestEventStatus,
    pub requested_at: Timestamp,
    /// Who asked (as in the audit history).
    pub requested_by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<TestEventOutcome>,
    /// TTL, epoch seconds.
    pub expires_at: i64,
}

/// The delivery-queue message that asks the delivery function to send a test event: an object
/// with one `test_event` member, which no delivery message has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestEventWork {
    pub test_event: TestEventRef,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestEventRef {
    pub account_id: AccountId,
    pub test_event_id: String,
}

pub fn key(account_id: &AccountId, test_event_id: &str) -> (String, String) {
    (
        keys::test_event_pk(account_id),
        keys::test_event_sk(test_event_id),
    )
}

impl TestEvent {
    /// The message that asks for it to be sent.
    pub fn work(&self) -> TestEventWork {
        TestEventWork {
            test_event: TestEventRef {
                account_id: self.account_id.clone(),
                test_event_id: self.test_event_id.clone(),
            },
        }
    }
}

/// Records a new test event (`queued`).
pub fn create(table: &str, event: &TestEvent) -> Result<Write, StoreError> {
    let (pk, sk) = key(&event.account_id, &event.test_event_id);
    put_new(table, to_item(event, &pk, &sk, KIND)?)
}

/// The expiry (epoch seconds) of a test event requested at `at`.
pub fn expires_at(at: Timestamp) -> i64 {
    at.plus(RETENTION).seconds()
}

/// Claims a `queued` test event for sending (refused, with the item as it stands, when it was
/// claimed already or is gone).
pub fn claim(table: &str, work: &TestEventRef, now: Timestamp) -> Result<Write, StoreError> {
    let e = Expr::new()
        .name("#status", STATUS)
        .name("#pk", "pk")
        .value(":queued", s(TestEventStatus::Queued.as_str()))
        .value(":sending", s(TestEventStatus::Sending.as_str()))
        .value(":now", n(now.millis()));
    let Write::Update(update) = conditional_update(
        table,
        key(&work.account_id, &work.test_event_id),
        "SET #status = :sending, sent_at = :now".into(),
        "attribute_exists(#pk) AND #status = :queued".into(),
        &e,
    )?
    else {
        unreachable!("conditional_update builds an update")
    };
    Ok(Write::UpdateReturningNew(update))
}

/// Saves a claimed test event's outcome (`sending` → `sent`).
pub fn save_outcome(
    table: &str,
    work: &TestEventRef,
    outcome: &TestEventOutcome,
) -> Result<Write, StoreError> {
    let value = serde_dynamo::to_attribute_value(outcome).map_err(|e| StoreError::Shape {
        key: format!("test event {}", work.test_event_id),
        message: e.to_string(),
    })?;
    let e = Expr::new()
        .name("#status", STATUS)
        .name("#outcome", "outcome")
        .name("#expires", EXPIRES_AT)
        .value(":sending", s(TestEventStatus::Sending.as_str()))
        .value(":sent", s(TestEventStatus::Sent.as_str()))
        .value(":outcome", value);
    conditional_update(
        table,
        key(&work.account_id, &work.test_event_id),
        "SET #status = :sent, #outcome = :outcome".into(),
        "#status = :sending AND attribute_exists(#expires)".into(),
        &e,
    )
}

/// A test event of `account_id`, if there is one.
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    test_event_id: &str,
) -> Result<Option<TestEvent>, StoreError> {
    get_as(dynamo, table, key(account_id, test_event_id)).await
}

/// The test event a write answered with.
pub fn of(item: super::Item) -> Result<TestEvent, StoreError> {
    from_item(item)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;
    use crate::store::update::expect_update;

    #[test]
    fn a_claim_takes_only_a_queued_test_event_and_the_outcome_only_a_claimed_one() {
        let work = TestEventRef {
            account_id: id("acct_a"),
            test_event_id: "test_1".into(),
        };
        let Write::UpdateReturningNew(claim) = claim("t", &work, Timestamp(5)).unwrap() else {
            panic!("a claim answers with the item")
        };
        assert_eq!(
            claim.condition_expression(),
            Some("attribute_exists(#pk) AND #status = :queued")
        );
        assert_eq!(claim.key()["pk"].as_s().unwrap(), "TESTEV#acct_a");
        assert_eq!(claim.key()["sk"].as_s().unwrap(), "TEST#test_1");
        let outcome = TestEventOutcome {
            classification: "success".into(),
            http_status: Some(204),
            latency_ms: 3,
            response: None,
        };
        let save = expect_update(save_outcome("t", &work, &outcome).unwrap());
        assert!(save
            .condition_expression()
            .unwrap()
            .starts_with("#status = :sending"));
    }
}
