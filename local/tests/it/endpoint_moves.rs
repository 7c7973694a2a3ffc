//! Stored credentials stay with their endpoint, against the emulator and real receivers on
//! loopback at two origins (two ports): an edit that moves a webhook to another scheme, host or
//! port drops its stored authentication (the current one, the one kept for a rotation's grace,
//! any OAuth2 token fetched for them) unless it gives one again; the new receiver never sees the
//! old API key, password or bearer, neither on a delivery attempt nor on a test event, while the
//! old receiver saw them before. A new path keeps them. The console's endpoint form goes through
//! the same edit.

use crate::endpoint_auth::{basic, demanding, token_endpoint, webhook};
use http::{Method, StatusCode};
use local::receiver::{ReceivedRequest, Receiver};
use local::testkit::api::{ApiAccount, OPERATOR_TOKEN};
use local::testkit::World;
use serde_json::{json, Value};
use shared::domain::integration_delivery::DeliveryStatus;
use shared::ids::{IntegrationId, SubscriptionId};
use shared::operations::account::integration_edit::MOVED_AWAY;
use shared::store::integration::{ENDPOINT_AUTH, PREVIOUS_ENDPOINT_AUTH};
use shared::store::keys;
use std::sync::{Arc, Mutex};

/// One change delivered and one test event sent to the subscription's endpoint, as it is
/// configured now (the worker's cached configuration, URL and credentials together, is dropped).
async fn deliver_and_test(w: &World, tenant: &ApiAccount, sub: &SubscriptionId, price: f64) {
    w.pipeline.worker.forget_config(&tenant.account_id);
    let change = w.change(&tenant.account_id).price(price).await;
    w.pipeline.pump().await.unwrap();
    let d = w
        .pipeline
        .delivery(&tenant.account_id, &change.change_id, sub)
        .await
        .unwrap();
    assert!(
        matches!(d.status, DeliveryStatus::Delivered | DeliveryStatus::Dead),
        "{:?}",
        d.status
    );
    let test = format!("/v1/subscriptions/{sub}/test-event");
    w.api
        .call(Method::POST, &test, Some(&tenant.token), None)
        .await
        .accepted();
    w.pipeline.work_pending().await.unwrap();
}

/// Whether any request carried `value` in any header.
fn carried(requests: &[ReceivedRequest], value: &str) -> bool {
    requests
        .iter()
        .any(|r| r.headers.values().any(|v| v.contains(value)))
}

async fn stored(w: &World, tenant: &ApiAccount, id: &IntegrationId) -> shared::store::Item {
    w.pipeline
        .get(
            &keys::account_pk(&tenant.account_id),
            &keys::integration_sk(id),
        )
        .await
        .unwrap()
}

/// The newest `edit_integration` entry of the account's audit.
async fn last_edit(w: &World, tenant: &ApiAccount) -> Value {
    let path = format!("/operator/accounts/{}/audit?limit=50", tenant.account_id);
    let page = w.api.get(&path, OPERATOR_TOKEN).await;
    page.ok()["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "edit_integration")
        .cloned()
        .expect("an edit entry")
}

#[tokio::test]
async fn a_webhook_moved_to_another_port_with_its_credentials_kept_sends_them_nowhere_but_the_old_one(
) {
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    let elsewhere = Receiver::start().await;
    // An API key, replaced by a second one whose grace keeps the first: both are stored.
    let (id, sub) = webhook(
        &w,
        &tenant,
        &w.receiver.url("/hooks"),
        json!({"headers": {"X-Tenant": "acme"},
               "auth": {"type": "header", "name": "X-Api-Key", "value": "key-old-1"}}),
    )
    .await;
    let path = format!("/v1/integrations/{id}");
    w.api
        .patch(
            &path,
            &tenant.token,
            json!({"auth": {"type": "header", "name": "X-Api-Key", "value": "key-new-2"},
                   "rotation_grace_seconds": 3600}),
        )
        .await
        .ok();
    // The old receiver refuses the new key: the attempt falls back to the old one, so it sees
    // both.
    demanding(
        &w.receiver,
        "x-api-key",
        Arc::new(Mutex::new("key-old-1".into())),
    );
    deliver_and_test(&w, &tenant, &sub, 1.0).await;
    let before = w.receiver.received();
    assert!(carried(&before, "key-new-2") && carried(&before, "key-old-1"));

    // Another port, the credentials not given again: dropped, and the answer says so.
    demanding(
        &elsewhere,
        "x-api-key",
        Arc::new(Mutex::new("key-old-1".into())),
    );
    let moved = w
        .api
        .patch(
            &path,
            &tenant.token,
            json!({"webhook_url": elsewhere.url("/hooks")}),
        )
        .await;
    let moved = moved.ok().clone();
    assert!(moved.get("auth").is_none(), "{moved}");
    assert!(moved.get("previous_auth_expires_at").is_none(), "{moved}");
    assert_eq!(
        moved["headers"],
        json!({"x-tenant": "acme"}),
        "headers stay"
    );
    let item = stored(&w, &tenant, &id).await;
    assert!(!item.contains_key(ENDPOINT_AUTH) && !item.contains_key(PREVIOUS_ENDPOINT_AUTH));
    let entry = last_edit(&w, &tenant).await;
    assert_eq!(entry["details"]["auth"], "header -> none");
    assert_eq!(entry["details"]["auth_dropped"], MOVED_AWAY);

    // The new receiver refuses (401) what it gets: neither key is tried there.
    deliver_and_test(&w, &tenant, &sub, 2.0).await;
    let after = elsewhere.received();
    assert_eq!(after.len(), 2, "one attempt and one test event");
    assert!(!carried(&after, "key-old-1") && !carried(&after, "key-new-2"));
    assert!(after.iter().all(|r| r.header("x-api-key").is_none()));
    assert!(after.iter().all(|r| r.header("x-tenant") == Some("acme")));
    assert_eq!(
        w.receiver.count(),
        before.len(),
        "nothing more to the old one"
    );
}

#[tokio::test]
async fn a_moved_webhook_keeps_the_credentials_the_same_request_gives_and_a_new_path_keeps_them() {
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    let elsewhere = Receiver::start().await;
    let (id, sub) = webhook(
        &w,
        &tenant,
        &w.receiver.url("/hooks"),
        json!({"auth": {"type": "basic", "username": "rhythm", "password": "old-pw-1"}}),
    )
    .await;
    let path = format!("/v1/integrations/{id}");

    // A new path of the same origin: the password stays and is sent there.
    let same = w
        .api
        .patch(
            &path,
            &tenant.token,
            json!({"webhook_url": w.receiver.url("/v2/hooks")}),
        )
        .await;
    assert_eq!(same.ok()["auth"]["type"], "basic");
    deliver_and_test(&w, &tenant, &sub, 1.0).await;
    let old_basic = basic("rhythm", "old-pw-1");
    let got = w.receiver.received();
    assert_eq!(got.len(), 2);
    assert!(got
        .iter()
        .all(|r| r.path.starts_with("/v2/hooks") && r.header("authorization") == Some(&old_basic)));

    // Another port with a new password in the same request: the new one is kept, the replaced
    // one is not (its grace would send it to the new host after a 401).
    demanding(
        &elsewhere,
        "authorization",
        Arc::new(Mutex::new(basic("rhythm", "new-pw-2"))),
    );
    let moved = w
        .api
        .patch(
            &path,
            &tenant.token,
            json!({"webhook_url": elsewhere.url("/hooks"),
                   "auth": {"type": "basic", "username": "rhythm", "password": "new-pw-2"},
                   "rotation_grace_seconds": 3600}),
        )
        .await;
    let moved = moved.ok().clone();
    assert_eq!(moved["auth"]["type"], "basic", "{moved}");
    assert!(moved.get("previous_auth_expires_at").is_none(), "{moved}");
    let entry = last_edit(&w, &tenant).await;
    assert_eq!(entry["details"]["auth"], "basic -> basic");
    assert_eq!(entry["details"]["auth_grace_seconds"], "0");
    assert_eq!(entry["details"]["auth_dropped"], MOVED_AWAY);
    deliver_and_test(&w, &tenant, &sub, 2.0).await;
    let new_basic = basic("rhythm", "new-pw-2");
    let there = elsewhere.received();
    assert_eq!(there.len(), 2);
    assert!(there
        .iter()
        .all(|r| r.header("authorization") == Some(&new_basic)));

    // The new host refuses the new password: no fallback to the old one.
    demanding(
        &elsewhere,
        "authorization",
        Arc::new(Mutex::new(old_basic.clone())),
    );
    deliver_and_test(&w, &tenant, &sub, 3.0).await;
    let there = elsewhere.received();
    assert_eq!(there.len(), 4, "one try each, no previous credential");
    assert!(!carried(&there, &old_basic));
}

#[tokio::test]
async fn an_oauth2_bearer_cached_for_one_endpoint_is_not_sent_to_the_one_it_moves_to() {
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    let tokens = Receiver::start().await;
    let elsewhere = Receiver::start().await;
    token_endpoint(&tokens, "rhythm-client", "client-s3cret");
    let (id, sub) = webhook(
        &w,
        &tenant,
        &w.receiver.url("/hooks"),
        json!({"auth": {"type": "oauth2_client_credentials", "token_url": tokens.url("/oauth/token"),
                        "client_id": "rhythm-client", "client_secret": "client-s3cret"}}),
    )
    .await;
    deliver_and_test(&w, &tenant, &sub, 1.0).await;
    assert_eq!(tokens.count(), 1, "one token, cached");
    let got = w.receiver.received();
    assert!(got
        .iter()
        .all(|r| r.header("authorization") == Some("Bearer tok-1")));

    let moved = w
        .api
        .patch(
            &format!("/v1/integrations/{id}"),
            &tenant.token,
            json!({"webhook_url": elsewhere.url("/hooks")}),
        )
        .await;
    assert!(moved.ok().get("auth").is_none());
    deliver_and_test(&w, &tenant, &sub, 2.0).await;
    let there = elsewhere.received();
    assert_eq!(there.len(), 2);
    assert!(there.iter().all(|r| r.header("authorization").is_none()));
    assert!(!carried(&there, "tok-1"));
    assert_eq!(tokens.count(), 1, "no token fetched for the new host");
}

#[tokio::test]
async fn the_consoles_endpoint_form_moving_a_webhook_drops_its_authentication_and_says_so() {
    use crate::console::{post, sign_in_with_token};
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    let elsewhere = Receiver::start().await;
    let (id, sub) = webhook(
        &w,
        &tenant,
        &w.receiver.url("/hooks"),
        json!({"auth": {"type": "header", "name": "X-Api-Key", "value": "console-key-1"}}),
    )
    .await;
    let admin = sign_in_with_token(&w, &tenant.token).await;
    let endpoint = format!("/console/acct/manage/integrations/{id}/endpoint");
    let new_url = elsewhere.url("/hooks");
    let saved = post(
        &w,
        Some(&admin.cookie),
        &endpoint,
        &[
            ("csrf", &admin.csrf),
            ("webhook_url", &new_url),
            ("auth_type", "keep"),
        ],
    )
    .await;
    assert_eq!(saved.status, StatusCode::OK, "{}", saved.text);
    assert!(
        saved.text.contains("its authentication was dropped"),
        "{}",
        saved.text
    );
    let shown = w
        .api
        .get(&format!("/v1/integrations/{id}"), &tenant.token)
        .await;
    let shown = shown.ok();
    assert_eq!(shown["webhook_url"], new_url.as_str());
    assert!(shown.get("auth").is_none(), "{shown}");
    deliver_and_test(&w, &tenant, &sub, 1.0).await;
    let there = elsewhere.received();
    assert_eq!(there.len(), 2);
    assert!(!carried(&there, "console-key-1"));
    assert_eq!(w.receiver.count(), 0);
    let entry = last_edit(&w, &tenant).await;
    assert_eq!(entry["details"]["auth_dropped"], MOVED_AWAY);
}
