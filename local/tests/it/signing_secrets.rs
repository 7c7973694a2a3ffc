//! Webhook signing secrets at rest and in rotation (`docs/glossary.md`, "Signing secret and
//! rotation grace"), against the emulator (its KMS, its tables and streams) and a real receiver on
//! loopback: items and stream images hold ciphertext only, the worker unwraps each data key once
//! per container, a tampered or moved ciphertext fails the delivery clearly, and a rotation signs
//! with both secrets for its grace.

use aws_lambda_events::event::dynamodb::Event as DynamoDbEvent;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use aws_sdk_dynamodb::types::AttributeValue;
use local::receiver::ReceivedRequest;
use local::testkit::api::ApiAccount;
use local::testkit::World;
use serde_json::{json, Value};
use shared::domain::integration_delivery::DeliveryStatus;
use shared::domain::signing::{verify, SigningSecret, DEFAULT_TOLERANCE};
use shared::domain::time::Timestamp;
use shared::ids::{AccountId, IntegrationId, SubscriptionId};
use shared::store::integration::{PREVIOUS_SECRET, SEALED_SECRET};
use shared::store::{keys, Item};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A webhook integration to the world's receiver and a catalog subscription of it, made through
/// the API: (integration id, subscription id, the secret the creation showed once).
async fn webhook_through_api(
    w: &World,
    tenant: &ApiAccount,
) -> (IntegrationId, SubscriptionId, String) {
    let created = w
        .api
        .post(
            "/v1/integrations",
            &tenant.token,
            json!({"name": "CRM", "method": "webhook", "event_access_accepted": true,
                   "webhook_url": w.receiver.url("/hooks/rhythm")}),
        )
        .await;
    let created = created.created().clone();
    let id: IntegrationId = created["id"].as_str().unwrap().parse().unwrap();
    let secret = created["signing_secret"].as_str().unwrap().to_owned();
    let sub = w
        .api
        .post(
            "/v1/subscriptions",
            &tenant.token,
            json!({"integration_id": id, "record_types": ["catalog_item"], "fields": ["sku"]}),
        )
        .await;
    let sub = sub.created()["id"].as_str().unwrap().parse().unwrap();
    (id, sub, secret)
}

/// The integration's item as DynamoDB holds it, read raw through the SDK.
async fn raw_item(w: &World, account_id: &AccountId, integration_id: &IntegrationId) -> Item {
    w.pipeline
        .stack
        .clients
        .dynamo
        .get_item()
        .table_name(&w.pipeline.stack.config.delivery_table)
        .key("pk", AttributeValue::S(keys::account_pk(account_id)))
        .key(
            "sk",
            AttributeValue::S(keys::integration_sk(integration_id)),
        )
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .expect("the integration item")
}

/// The secret's key material as text: what a leak would show (with or without its prefix).
fn material(secret: &str) -> &str {
    secret.strip_prefix("whsec_").unwrap()
}

/// Whether `secret` (`whsec_…`) verifies the Standard Webhooks signature of `got` at `now`.
pub(crate) fn verifies(secret: &str, got: &ReceivedRequest, now: Timestamp) -> bool {
    verify(
        &SigningSecret::parse(secret).unwrap(),
        got.header("webhook-id").unwrap(),
        got.header("webhook-timestamp").unwrap(),
        got.header("webhook-signature").unwrap(),
        &got.body,
        now,
        DEFAULT_TOLERANCE,
    )
    .is_ok()
}

#[tokio::test]
async fn a_stored_webhook_and_its_stream_images_hold_no_plaintext_signing_secret() {
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    let (id, _, secret) = webhook_through_api(&w, &tenant).await;
    let path = format!("/v1/integrations/{id}");
    let rotated = w
        .api
        .patch(&path, &tenant.token, json!({"rotate_signing_secret": true}))
        .await;
    let rotated = rotated.ok()["signing_secret"].as_str().unwrap().to_owned();

    let item = raw_item(&w, &tenant.account_id, &id).await;
    let everything = format!("{item:?}");
    for s in [&secret, &rotated] {
        assert!(!everything.contains(material(s)), "plaintext in the item");
    }
    for attribute in [SEALED_SECRET, PREVIOUS_SECRET] {
        let sealed = item[attribute].as_m().expect("a sealed secret map");
        assert!(sealed["key_id"]
            .as_s()
            .unwrap()
            .contains(&w.pipeline.stack.config.signing_key_id));
    }
    assert!(
        !item.contains_key("signing_secret"),
        "no plaintext attribute"
    );

    // Every image the table's stream carried of the integration (its creation and rotation).
    let images = Arc::new(Mutex::new(Vec::new()));
    let seen = images.clone();
    w.pipeline
        .stack
        .stream("DeliveryTable")
        .drain(move |event: DynamoDbEvent| {
            let seen = seen.clone();
            async move {
                for r in &event.records {
                    let text = serde_json::to_string(&r.change).unwrap();
                    if text.contains("\"integration\"") {
                        seen.lock().unwrap().push(text);
                    }
                }
                DynamoDbEventResponse::default()
            }
        })
        .await
        .unwrap();
    let images = images.lock().unwrap();
    assert!(
        images.len() >= 2,
        "creation and rotation images: {images:?}"
    );
    for image in images.iter() {
        assert!(image.contains(SEALED_SECRET), "{image}");
        for s in [&secret, &rotated] {
            assert!(!image.contains(material(s)), "plaintext in a stream image");
        }
    }
}

#[tokio::test]
async fn deliveries_sign_correctly_with_one_kms_decrypt_per_data_key_per_container() {
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    let mut hooks = Vec::new();
    for _ in 0..3 {
        hooks.push(webhook_through_api(&w, &tenant).await);
    }
    let meter = &w.pipeline.stack.meter;
    // One API container: one data key for every secret it seals.
    assert_eq!(meter.total("KMS", Some(&["GenerateDataKey"])), 1);
    assert_eq!(meter.total("KMS", Some(&["Decrypt"])), 0);

    for round in 1..=2 {
        w.change(&tenant.account_id).price(round as f64).await;
        w.pipeline.pump().await.unwrap();
        let got = w.receiver.received();
        assert_eq!(got.len(), 3 * round);
        for request in &got[got.len() - 3..] {
            // Each request verifies with exactly its own integration's secret.
            let matching: Vec<_> = hooks
                .iter()
                .filter(|(_, _, secret)| verifies(secret, request, w.pipeline.now()))
                .collect();
            assert_eq!(
                matching.len(),
                1,
                "{:?}",
                request.header("webhook-signature")
            );
            assert_eq!(
                request
                    .header("webhook-signature")
                    .unwrap()
                    .split(' ')
                    .count(),
                1
            );
        }
        // Six attempts over two batches, three integrations, one data key: one Decrypt.
        assert_eq!(meter.total("KMS", Some(&["Decrypt"])), 1, "round {round}");
    }
}

/// Replaces an attribute of the integration's sealed secret map, raw.
async fn overwrite_sealed(
    w: &World,
    account_id: &AccountId,
    integration_id: &IntegrationId,
    sealed: AttributeValue,
) {
    w.update(
        &keys::account_pk(account_id),
        &keys::integration_sk(integration_id),
        &format!("SET {SEALED_SECRET} = :s"),
        &[(":s", sealed)],
    )
    .await;
}

fn with_field(
    sealed: &AttributeValue,
    field: &str,
    change: impl Fn(&mut Vec<u8>),
) -> AttributeValue {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut map = sealed.as_m().unwrap().clone();
    let mut bytes = b64.decode(map[field].as_s().unwrap()).unwrap();
    change(&mut bytes);
    map.insert(field.into(), AttributeValue::S(b64.encode(bytes)));
    AttributeValue::M(map)
}

#[tokio::test]
async fn a_tampered_or_moved_sealed_secret_fails_its_delivery_as_configuration_loss_and_leaks_nothing(
) {
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    let acct = tenant.account_id.clone();
    let (from, _, from_secret) = webhook_through_api(&w, &tenant).await;
    let (moved, moved_sub, moved_secret) = webhook_through_api(&w, &tenant).await;
    let (flipped, flipped_sub, flipped_secret) = webhook_through_api(&w, &tenant).await;
    let (unwrapped, unwrapped_sub, unwrapped_secret) = webhook_through_api(&w, &tenant).await;

    let donor = raw_item(&w, &acct, &from).await[SEALED_SECRET].clone();
    // Another integration's (valid) ciphertext, copied over.
    overwrite_sealed(&w, &acct, &moved, donor).await;
    // One bit of the ciphertext changed.
    let own = raw_item(&w, &acct, &flipped).await[SEALED_SECRET].clone();
    overwrite_sealed(
        &w,
        &acct,
        &flipped,
        with_field(&own, "ciphertext", |b| b[0] ^= 1),
    )
    .await;
    // The wrapped data key changed: KMS refuses it.
    let own = raw_item(&w, &acct, &unwrapped).await[SEALED_SECRET].clone();
    overwrite_sealed(
        &w,
        &acct,
        &unwrapped,
        with_field(&own, "wrapped_key", |b| {
            let last = b.len() - 1;
            b[last] ^= 1;
        }),
    )
    .await;

    let change = w.change(&acct).await;
    let report = w.pipeline.pump().await.unwrap();
    assert_eq!(
        report.queue.failures, 0,
        "per-delivery outcomes, no batch failure"
    );
    // Only the untouched integration was called.
    let got = w.receiver.received();
    assert_eq!(got.len(), 1);
    assert!(verifies(&from_secret, &got[0], w.pipeline.now()));

    for (sub, expected) in [
        (&moved_sub, "altered or belongs to another integration"),
        (&flipped_sub, "altered or belongs to another integration"),
        (&unwrapped_sub, "KMS refused the signing secret's data key"),
    ] {
        let d = w
            .pipeline
            .delivery(&acct, &change.change_id, sub)
            .await
            .unwrap();
        assert_eq!(d.status, DeliveryStatus::Failed, "{sub}");
        let attempt = d.attempt_log.last().unwrap();
        assert_eq!(attempt.class, "configuration_loss");
        let detail = attempt.detail.as_deref().unwrap();
        assert!(detail.contains(expected), "{detail}");
        for s in [
            &from_secret,
            &moved_secret,
            &flipped_secret,
            &unwrapped_secret,
        ] {
            assert!(
                !detail.contains(material(s)),
                "a secret in the attempt record"
            );
        }
    }
}

#[tokio::test]
async fn a_rotation_signs_with_both_secrets_during_its_grace_and_with_the_new_one_after() {
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    let (id, _, old) = webhook_through_api(&w, &tenant).await;
    let path = format!("/v1/integrations/{id}");

    // The grace is bounded; it needs a rotation.
    let refused = w
        .api
        .patch(
            &path,
            &tenant.token,
            json!({"rotate_signing_secret": true, "rotation_grace_seconds": 604_801}),
        )
        .await;
    assert_eq!(
        refused.problem(http::StatusCode::UNPROCESSABLE_ENTITY)["errors"][0]["field"],
        "rotation_grace_seconds"
    );
    let refused = w
        .api
        .patch(&path, &tenant.token, json!({"rotation_grace_seconds": 60}))
        .await;
    refused.problem(http::StatusCode::UNPROCESSABLE_ENTITY);

    let rotated_at = w.pipeline.now();
    let rotation = w
        .api
        .patch(
            &path,
            &tenant.token,
            json!({"rotate_signing_secret": true, "rotation_grace_seconds": 3600}),
        )
        .await;
    let rotation: Value = rotation.ok().clone();
    let new = rotation["signing_secret"].as_str().unwrap().to_owned();
    let expires_at = rotated_at.plus(Duration::from_secs(3600));
    assert_eq!(
        rotation["previous_secret_expires_at"],
        expires_at.to_rfc3339()
    );
    // Reads show the expiry too, never a secret.
    let read = w.api.get(&path, &tenant.token).await;
    assert_eq!(
        read.ok()["previous_secret_expires_at"],
        expires_at.to_rfc3339()
    );

    // Within the grace: two signatures, the new secret's first; either secret verifies.
    w.pipeline.clock.advance(Duration::from_secs(3599));
    w.change(&tenant.account_id).await;
    w.pipeline.pump().await.unwrap();
    let got = w.receiver.received();
    assert_eq!(got.len(), 1);
    let header = got[0].header("webhook-signature").unwrap();
    let entries: Vec<&str> = header.split(' ').collect();
    assert_eq!(entries.len(), 2, "{header}");
    assert!(verifies(&old, &got[0], w.pipeline.now()) && verifies(&new, &got[0], w.pipeline.now()));
    let only_first = ReceivedRequest {
        headers: [("webhook-signature".to_string(), entries[0].to_string())]
            .into_iter()
            .chain(
                got[0]
                    .headers
                    .clone()
                    .into_iter()
                    .filter(|(k, _)| k != "webhook-signature"),
            )
            .collect(),
        ..got[0].clone()
    };
    assert!(
        verifies(&new, &only_first, w.pipeline.now()),
        "the new secret's entry comes first"
    );

    // At the expiry and after: the new secret alone.
    w.pipeline.clock.advance(Duration::from_secs(1));
    w.change(&tenant.account_id).await;
    w.pipeline.pump().await.unwrap();
    let got = w.receiver.received();
    assert_eq!(got.len(), 2);
    assert_eq!(
        got[1]
            .header("webhook-signature")
            .unwrap()
            .split(' ')
            .count(),
        1
    );
    assert!(verifies(&new, &got[1], w.pipeline.now()));
    assert!(
        !verifies(&old, &got[1], w.pipeline.now()),
        "the old secret still verifies"
    );

    // A rotation with no grace retires the previous secret at once.
    let again = w
        .api
        .patch(
            &path,
            &tenant.token,
            json!({"rotate_signing_secret": true, "rotation_grace_seconds": 0}),
        )
        .await;
    let newest = again.ok()["signing_secret"].as_str().unwrap().to_owned();
    assert!(again.ok().get("previous_secret_expires_at").is_none());
    assert!(!raw_item(&w, &tenant.account_id, &id)
        .await
        .contains_key(PREVIOUS_SECRET));
    w.pipeline.worker.forget_config(&tenant.account_id);
    w.change(&tenant.account_id).await;
    w.pipeline.pump().await.unwrap();
    let got = w.receiver.received();
    assert_eq!(got.len(), 3);
    assert!(verifies(&newest, &got[2], w.pipeline.now()));
    assert!(!verifies(&new, &got[2], w.pipeline.now()));
}
