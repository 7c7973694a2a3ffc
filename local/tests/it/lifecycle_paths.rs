//! The delivery lifecycle's less travelled rows end to end (`docs/lifecycles.md#integration-delivery`),
//! through the emulator and the loopback receiver: a retrying delivery fails once its subscription
//! or its account is gone, without calling the endpoint again; the claim of an attempt refuses a
//! delivery whose attempts have reached its subscription's Max Retries, so lowering Max Retries
//! ends it dead without one more attempt; a delivery whose retries run out ends dead (the
//! Delivery log's *failed*); and a failed delivery goes back to pending by a retry and is then
//! delivered.

use local::receiver::Reply;
use local::testkit::api::OPERATOR_TOKEN;
use local::testkit::{work, World};
use serde_json::json;
use shared::delivery::worker::WorkOutcome;
use shared::domain::change::Change;
use shared::domain::integration_delivery::{DeliveryStatus, TransmitStatus};
use shared::domain::retry::{RetryPolicy, FIXED_SCHEDULE};
use shared::domain::time::{DAY, SECOND};
use shared::store::delivery::Delivery;
use shared::store::keys;
use shared::store::subscription::Subscription;

async fn delivery(w: &World, c: &Change, sub: &Subscription) -> Delivery {
    w.pipeline
        .delivery(&c.account_id, &c.change_id, &sub.subscription_id)
        .await
        .expect("the delivery")
}

/// Whether the stored delivery is on the `due` index (a retry waiting for the sweep).
async fn on_due_index(w: &World, c: &Change, sub: &Subscription) -> bool {
    w.pipeline
        .get(
            &keys::event_pk(&c.account_id, &c.change_id),
            &keys::delivery_sk(&sub.subscription_id),
        )
        .await
        .expect("the delivery item")
        .contains_key("due_at")
}

async fn stored_subscription(w: &World, sub: &Subscription) -> Option<Subscription> {
    shared::store::subscription::get(
        &w.pipeline.stack.clients.dynamo,
        &w.pipeline.stack.config.delivery_table,
        &sub.account_id,
        &sub.subscription_id,
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn a_retrying_delivery_fails_without_another_call_once_its_subscription_is_deleted() {
    let w = World::new().await;
    w.receiver.set_default(Reply::Status(503));
    let tenant = w.api.account("Leaving subscription").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let c = w.change(&tenant.account_id).price(1.0).await;
    w.pipeline.pump().await.unwrap();
    assert_eq!(w.delivery_status(&sub, &c).await, DeliveryStatus::Retrying);
    assert_eq!(w.receiver.count(), 1);

    w.api
        .delete(
            &format!("/v1/subscriptions/{}", sub.subscription_id),
            &tenant.token,
        )
        .await
        .expect(axum::http::StatusCode::NO_CONTENT);
    // The worker's configuration cache has expired (as it does within its lease).
    w.pipeline.worker.forget_config(&tenant.account_id);
    w.pipeline
        .advance(FIXED_SCHEDULE[0] + SECOND)
        .await
        .unwrap();

    let d = w.stored_delivery(&sub, &c).await;
    assert_eq!(d.status, DeliveryStatus::Failed, "retrying → failed");
    assert_eq!(d.last_error.as_deref(), Some("the subscription is gone"));
    assert_eq!(d.attempts, 2, "the refused attempt is recorded");
    assert_eq!(d.attempt_log[1].class, "configuration_loss");
    assert_eq!(
        d.transmit_status(w.pipeline.now()),
        Some(TransmitStatus::Failed)
    );
    w.pipeline.advance(DAY).await.unwrap();
    assert_eq!(w.receiver.count(), 1, "the endpoint is not called again");
}

#[tokio::test]
async fn a_retrying_delivery_fails_without_another_call_once_its_account_is_deleted() {
    let w = World::new().await;
    w.receiver.set_default(Reply::Status(503));
    let tenant = w.api.account("Leaving account").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let c = w.change(&tenant.account_id).price(1.0).await;
    w.pipeline.pump().await.unwrap();
    assert_eq!(w.delivery_status(&sub, &c).await, DeliveryStatus::Retrying);

    w.api
        .delete(
            &format!("/operator/accounts/{}", tenant.account_id),
            OPERATOR_TOKEN,
        )
        .await
        .expect(axum::http::StatusCode::NO_CONTENT);
    w.pipeline.worker.forget_config(&tenant.account_id);
    w.pipeline
        .advance(FIXED_SCHEDULE[0] + SECOND)
        .await
        .unwrap();

    let d = w.stored_delivery(&sub, &c).await;
    assert_eq!(d.status, DeliveryStatus::Failed, "retrying → failed");
    assert_eq!(d.last_error.as_deref(), Some("the account is gone"));
    w.pipeline.advance(DAY).await.unwrap();
    assert_eq!(w.receiver.count(), 1, "the endpoint is not called again");
}

#[tokio::test]
async fn lowering_max_retries_below_the_attempts_made_ends_the_delivery_dead_without_another_attempt(
) {
    let w = World::new().await;
    w.receiver.set_default(Reply::Status(503));
    let acct = w.account().await.account_id;
    let sub = w
        .subscribe(&w.integration(&acct).await)
        .policy(RetryPolicy::Exponential {
            max_retries: 5,
            retry_delay_secs: 10,
        })
        .await;
    let c = w.change(&acct).await;
    w.pipeline.pump().await.unwrap();
    w.pipeline.advance(10 * SECOND).await.unwrap();
    let d = delivery(&w, &c, &sub).await;
    assert_eq!((d.status, d.attempts), (DeliveryStatus::Retrying, 2));
    assert_eq!(w.receiver.count(), 2);

    // Max Retries lowered to the two attempts already made, while the third waits.
    let mut lowered = stored_subscription(&w, &sub).await.unwrap();
    lowered.retry_policy = RetryPolicy::Exponential {
        max_retries: 2,
        retry_delay_secs: 10,
    };
    w.save_subscription(&lowered).await;
    w.pipeline.worker.forget_config(&acct);
    w.pipeline.advance(20 * SECOND).await.unwrap();

    // The claim was refused by storage: no third call, and the delivery ended dead.
    assert_eq!(w.receiver.count(), 2, "no attempt beyond Max Retries");
    let d = delivery(&w, &c, &sub).await;
    assert_eq!(d.status, DeliveryStatus::Dead);
    assert_eq!(d.attempts, 2);
    assert_eq!(
        d.attempt_log.len(),
        2,
        "no attempt was added to the history"
    );
    assert_eq!(
        d.last_error.as_deref(),
        Some("attempts reached Max Retries (2); no further attempt")
    );
    assert!(d.lease_until.is_none() && d.lease_token.is_none());
    assert!(!on_due_index(&w, &c, &sub).await, "off the due index");
    assert_eq!(
        d.transmit_status(w.pipeline.now()),
        Some(TransmitStatus::Failed)
    );
    // Counted toward the pause like any dead delivery.
    let counted = stored_subscription(&w, &sub).await.unwrap();
    assert_eq!(counted.consecutive_dead, 1);
    // A stray copy of its message is refused as settled; nothing is called later either.
    assert_eq!(
        w.pipeline.worker.process(&work(&c, &sub)).await.unwrap(),
        WorkOutcome::Skipped("already settled")
    );
    w.pipeline.advance(DAY).await.unwrap();
    assert_eq!(w.receiver.count(), 2);
}

#[tokio::test]
async fn a_delivery_whose_retries_run_out_ends_dead_and_the_delivery_log_says_failed() {
    let w = World::new().await;
    w.receiver.set_default(Reply::Status(503));
    let acct = w.account().await.account_id;
    let sub = w
        .subscribe(&w.integration(&acct).await)
        .policy(RetryPolicy::Exponential {
            max_retries: 3,
            retry_delay_secs: 10,
        })
        .await;
    let c = w.change(&acct).await;
    w.pipeline.pump().await.unwrap();
    assert_eq!(
        delivery(&w, &c, &sub).await.status,
        DeliveryStatus::Retrying
    );
    w.pipeline.advance(10 * SECOND).await.unwrap();
    let d = delivery(&w, &c, &sub).await;
    assert_eq!((d.status, d.attempts), (DeliveryStatus::Retrying, 2));
    w.pipeline.advance(20 * SECOND).await.unwrap();

    let d = delivery(&w, &c, &sub).await;
    assert_eq!(d.status, DeliveryStatus::Dead, "retrying → dead");
    assert_eq!(d.attempts, 3);
    assert_eq!(d.last_http_status, Some(503));
    assert_eq!(
        d.transmit_status(w.pipeline.now()),
        Some(TransmitStatus::Failed)
    );
    assert!(!on_due_index(&w, &c, &sub).await);
    w.pipeline.advance(DAY).await.unwrap();
    assert_eq!(w.receiver.count(), 3, "no attempt after the last one");
}

#[tokio::test]
async fn a_failed_delivery_goes_back_to_pending_by_a_retry_and_is_then_delivered() {
    let w = World::new().await;
    let acct = w.account().await.account_id;
    let integration = w.integration(&acct).await;
    let sub = w.subscribe(&integration).await;
    // Consent withdrawn: the delivery fails without a call.
    let mut withdrawn = integration.clone();
    withdrawn.event_access_accepted = false;
    w.save_integration(&withdrawn).await;
    let c = w.change(&acct).await;
    w.pipeline.pump().await.unwrap();
    let d = delivery(&w, &c, &sub).await;
    assert_eq!(d.status, DeliveryStatus::Failed);
    assert_eq!(w.receiver.count(), 0);

    // Consent given again, then a retry with a reason.
    w.save_integration(&integration).await;
    w.pipeline.worker.forget_config(&acct);
    let retried = w
        .api
        .post(
            &format!(
                "/operator/accounts/{acct}/subscriptions/{}/deliveries/{}/retry",
                sub.subscription_id, c.change_id
            ),
            OPERATOR_TOKEN,
            json!({"reason": "consent restored"}),
        )
        .await;
    let body = retried.ok();
    assert_eq!(body["previous_status"], "failed");
    assert_eq!(body["delivery"]["status"], "pending", "failed → pending");
    assert!(!body["audit_id"].as_str().unwrap().is_empty());
    let d = delivery(&w, &c, &sub).await;
    assert_eq!((d.status, d.attempts), (DeliveryStatus::Pending, 0));
    assert!(d.last_error.is_none());

    w.pipeline.pump().await.unwrap();
    let d = delivery(&w, &c, &sub).await;
    assert_eq!(d.status, DeliveryStatus::Delivered);
    assert_eq!(d.attempts, 1, "from its first attempt again");
    assert_eq!(d.attempt_log.len(), 2, "the history is kept");
    assert_eq!(w.receiver.count(), 1);
}
