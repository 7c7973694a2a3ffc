//! Test events, for both doors: one synthetic, clearly marked event (type [`TEST_EVENT_TYPE`], a
//! fresh `webhook-id`) for a subscription's webhook endpoint ([`send_test_event`]), and one as it
//! stands ([`test_event`]).
//!
//! The API cannot open signing secrets: the test event is recorded ([`crate::store::test_event`])
//! and queued on the delivery queue, and the delivery function sends it the way it sends a
//! delivery attempt and saves the outcome. It is no delivery: nothing is written to the
//! subscription's deliveries, its run of dead deliveries or its pause; the request is recorded in
//! the account's audit history (who, when, the test event's id).
//!
//! Refused: another account's or an unknown subscription (not found); a paused subscription, an
//! integration that is not a webhook (pull, built-in), one without accepted event access, or an
//! endpoint the SSRF guard refuses (conflict); past the account's
//! [`test_event_quota::PER_MINUTE`] test events in the current minute ([`OpsError::Bounded`],
//! until the next minute), since each sends the platform's signed request to an endpoint the
//! account chose.

use super::AccountOps;
use crate::domain::ssrf::check_url;
use crate::domain::subscription::SubscriptionStatus;
use crate::domain::target::Target;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, SubscriptionId};
use crate::operations::OpsError;
use crate::store::account;
use crate::store::audit::{self, AuditAction, AuditRecord};
use crate::store::integration::{self, Integration};
use crate::store::test_event::{self as stored, TestEvent, TestEventStatus};
use crate::store::test_event_quota;
use crate::store::write::{send, send_resolving_conflicts, Write, Written};
use serde_json::json;

/// The `type` of a test event's payload (no record's event code has this form).
pub const TEST_EVENT_TYPE: &str = "rhythm.test";
/// The `reason` of a test event's audit entry.
const AUDIT_REASON: &str = "test event to the subscription's endpoint";

/// The test event `test_event_id` of `account_id`'s subscription `subscription_id`: not found
/// for another account's, another subscription's or an unknown one.
pub async fn test_event(
    ops: &AccountOps<'_>,
    account_id: &AccountId,
    subscription_id: &SubscriptionId,
    test_event_id: &str,
) -> Result<TestEvent, OpsError> {
    let not_found = || OpsError::NotFound("test event");
    if !is_test_event_id(test_event_id) {
        return Err(not_found());
    }
    stored::get(ops.dynamo(), ops.table(), account_id, test_event_id)
        .await?
        .filter(|t| &t.subscription_id == subscription_id)
        .ok_or_else(not_found)
}

/// Whether `text` has the form of a test event id (`test_` and a lower-case ULID).
fn is_test_event_id(text: &str) -> bool {
    text.strip_prefix("test_").is_some_and(|rest| {
        rest.len() == 26
            && rest
                .bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
    })
}

/// Queues a test event to the webhook endpoint of `account_id`'s subscription `subscription_id`,
/// on behalf of `actor` (who, for the audit history): the test event, `queued`.
pub async fn send_test_event(
    ops: &AccountOps<'_>,
    account_id: &AccountId,
    subscription_id: &SubscriptionId,
    actor: &str,
) -> Result<TestEvent, OpsError> {
    let (found, url) = webhook_of(ops, account_id, subscription_id).await?;
    let now = ops.now();
    charge_test_event(ops, account_id, now).await?;
    let test_event_id = format!("test_{}", ulid::Ulid::new().to_string().to_lowercase());
    let payload = json!({
        "type": TEST_EVENT_TYPE,
        "test": true,
        "message_id": test_event_id,
        "account_id": account_id,
        "subscription_id": subscription_id,
        "integration_id": found.integration_id,
        "sent_at": now.to_rfc3339(),
        "data": {"note": "A test event from Rhythm delivery: no record changed."},
    })
    .to_string();
    let event = TestEvent {
        test_event_id: test_event_id.clone(),
        account_id: account_id.clone(),
        subscription_id: subscription_id.clone(),
        integration_id: found.integration_id.clone(),
        url,
        payload,
        status: TestEventStatus::Queued,
        requested_at: now,
        requested_by: actor.to_string(),
        sent_at: None,
        outcome: None,
        expires_at: stored::expires_at(now),
    };
    create(ops, stored::create(ops.table(), &event)?).await?;
    queue(ops, &event).await?;
    audit_sent(ops, &event, actor).await;
    tracing::info!(%account_id, %subscription_id, %test_event_id, "test event queued");
    Ok(event)
}

/// The subscription's integration and its webhook endpoint, when a test event may go there:
/// the subscription is not paused, its integration is a webhook that accepted event access and
/// whose endpoint the SSRF guard lets through.
async fn webhook_of(
    ops: &AccountOps<'_>,
    account_id: &AccountId,
    subscription_id: &SubscriptionId,
) -> Result<(Integration, String), OpsError> {
    let sub = ops.ops.subscription(account_id, subscription_id).await?;
    if sub.status == SubscriptionStatus::Paused {
        return Err(OpsError::Conflict(
            "the subscription is paused: it receives nothing, test events included, until an operator resumes it".into(),
        ));
    }
    let found = integration::get(ops.dynamo(), ops.table(), account_id, &sub.integration_id)
        .await?
        .ok_or_else(|| OpsError::Conflict("the subscription's integration is gone".into()))?;
    let Target::Webhook { url, .. } = &found.target else {
        return Err(OpsError::Conflict(format!(
            "test events go to webhook endpoints; this subscription's integration delivers by {}",
            found.delivery_method().as_str()
        )));
    };
    if !found.event_access_accepted {
        return Err(OpsError::Conflict(
            "the integration has not accepted event access, so nothing is sent to it".into(),
        ));
    }
    check_url(url, &ops.target_policy).map_err(|e| {
        OpsError::Conflict(format!("the endpoint is refused by the SSRF guard: {e}"))
    })?;
    let url = url.clone();
    Ok((found, url))
}

/// Sends the write that creates an item: refused, it was created or changed concurrently.
async fn create(ops: &AccountOps<'_>, write: Write) -> Result<(), OpsError> {
    match send(ops.dynamo(), write).await? {
        Written::Applied(_) => Ok(()),
        Written::Refused(_) | Written::Conflict => Err(OpsError::Conflict(
            "the resource was created or changed concurrently; retry the request".into(),
        )),
    }
}

/// Records the test event in the account's audit history. The event is on its way whatever
/// becomes of its record: a lost audit write is logged, not the caller's failure.
async fn audit_sent(ops: &AccountOps<'_>, event: &TestEvent, actor: &str) {
    let (account_id, subscription_id) = (&event.account_id, &event.subscription_id);
    let entry = AuditRecord::new(
        AuditAction::SendTestEvent,
        account_id,
        subscription_id,
        actor,
        AUDIT_REASON,
        event.requested_at,
    )
    .detail("message_id", &event.test_event_id);
    let recorded = match audit::create(ops.table(), &entry) {
        Ok(write) => create(ops, write).await,
        Err(e) => Err(e.into()),
    };
    if let Err(e) = recorded {
        tracing::warn!(%account_id, %subscription_id, error = %e, "test event not audited");
    }
}

/// Puts the message that asks the delivery function to send `event` on the delivery queue.
async fn queue(ops: &AccountOps<'_>, event: &TestEvent) -> Result<(), OpsError> {
    let message = crate::delivery::dispatch::publish::Outgoing {
        body: serde_json::to_string(&event.work())
            .map_err(|e| OpsError::Internal(format!("test event message: {e}")))?,
        group: Some(event.account_id.to_string()),
        delay: std::time::Duration::ZERO,
    };
    let failed = crate::delivery::dispatch::publish::publish_messages(
        ops.sqs,
        &ops.config.delivery_queue_url,
        std::slice::from_ref(&message),
    )
    .await;
    if failed.is_empty() {
        Ok(())
    } else {
        Err(OpsError::Unavailable(
            "the test event could not be queued; try again".into(),
        ))
    }
}

/// Counts the test event against its account's minute ([`test_event_quota`]), or refuses it
/// ([`OpsError::Bounded`], until the next minute) when the minute's are used up.
async fn charge_test_event(
    ops: &AccountOps<'_>,
    account_id: &AccountId,
    now: Timestamp,
) -> Result<(), OpsError> {
    let limit = test_event_quota::PER_MINUTE;
    let charge = test_event_quota::charge(ops.table(), account_id, now, limit)?;
    // Nothing is sent for an account that is gone or being deleted.
    let live = account::live_check(ops.table(), account_id)?;
    match send_resolving_conflicts(ops.dynamo(), Write::all([charge, live])?).await? {
        Written::Applied(_) => Ok(()),
        Written::Refused(_) if !account::is_live(ops.dynamo(), ops.table(), account_id).await? => {
            Err(OpsError::AccountGone)
        }
        Written::Refused(_) => {
            let wait = test_event_quota::until_next_minute(now)
                .as_secs_f64()
                .ceil() as u64;
            Err(OpsError::Bounded {
                detail: format!(
                    "an account may send {limit} test events a minute, and this minute's are \
                     used up; try again in {wait} s"
                ),
                retry_after_secs: wait,
            })
        }
        // Conflicts that outlasted their retries: nothing was counted or sent.
        Written::Conflict => Err(OpsError::Unavailable(
            "the test event could not be counted; try again".into(),
        )),
    }
}
