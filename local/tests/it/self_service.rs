//! An account's administrators recover their own subscriptions through the API (account token),
//! with the operators' operations: the deliveries by status and record id, a delivery and its
//! attempts, the retry of a dead delivery, the resume of a paused subscription, the endpoint's
//! health, the event monitor's filters and the account's audit history. Another account's token
//! finds none of it (404) and changes nothing.

use axum::http::StatusCode;
use local::receiver::Reply;
use local::testkit::api::{ApiAccount, OPERATOR_TOKEN};
use local::testkit::through_api::{change_ids, ApiSubscription};
use local::testkit::World;
use serde_json::{json, Value};
use shared::domain::integration_delivery::DeliveryStatus;
use shared::store::keys;
use std::time::Duration;

fn sub_path(sub: &ApiSubscription, rest: &str) -> String {
    format!("/v1/subscriptions/{}{rest}", sub.subscription_id)
}

/// The token id a token's text carries (`rhy_{kind}_{id}_{secret}`).
fn token_id(token: &str) -> String {
    token.split('_').nth(2).unwrap().to_owned()
}

fn of_action(entries: &Value, action: &str) -> Vec<Value> {
    entries["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == action)
        .cloned()
        .collect()
}

async fn outsider(w: &World) -> ApiAccount {
    w.api.account("Outsider").await
}

#[tokio::test]
async fn an_administrator_finds_reads_and_retries_a_dead_delivery_and_the_retry_is_audited_with_the_token(
) {
    let w = World::new().await;
    w.receiver.set_default(Reply::Full {
        status: 400,
        headers: Vec::new(),
        body: "sku rejected".into(),
    });
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let mut other_record = w.change(&sub.account_id).build();
    other_record.record_id = "SKU-2".into();
    w.pipeline.write_change(&other_record).await.unwrap();
    let changes = w.write_changes(&sub.account_id, &[w.pipeline.now()]).await;
    let change = &changes[0];
    assert_eq!(w.delivery_status(&sub, change).await, DeliveryStatus::Dead);
    assert_eq!(w.receiver.count(), 2);

    // Listed by status and by record id (the filter is the delivery's own record id).
    let dead = w
        .api
        .get(
            &sub_path(&sub, "/deliveries?status=dead&record_id=SKU-1"),
            &tenant.token,
        )
        .await;
    assert_eq!(change_ids(dead.ok()), [change.change_id.as_str()]);
    let both = w
        .api
        .get(&sub_path(&sub, "/deliveries?status=dead"), &tenant.token)
        .await;
    assert_eq!(both.ok()["data"].as_array().unwrap().len(), 2);
    let none = w
        .api
        .get(
            &sub_path(&sub, "/deliveries?record_id=SKU-404"),
            &tenant.token,
        )
        .await;
    assert!(change_ids(none.ok()).is_empty());
    let bad = w
        .api
        .get(&sub_path(&sub, "/deliveries?status=lost"), &tenant.token)
        .await;
    assert_eq!(bad.fields(), ["status[0]"]);

    // The delivery and its attempts: time, HTTP status, duration, the answer, the class.
    let one = format!("/deliveries/{}", change.change_id);
    let read = w.api.get(&sub_path(&sub, &one), &tenant.token).await;
    let read = read.ok().clone();
    assert_eq!(read["status"], "dead");
    assert!(read["payload"].is_object(), "{read}");
    let attempts = w
        .api
        .get(&sub_path(&sub, &format!("{one}/attempts")), &tenant.token)
        .await;
    let attempt = attempts.ok()["data"][0].clone();
    assert_eq!(attempt["http_status"], 400);
    assert_eq!(attempt["class"], "permanent");
    assert_eq!(attempt["response_snippet"], "sku rejected");
    assert!(attempt["at"].is_string() && attempt["duration_ms"].is_u64());
    assert!(
        attempt.get("error").is_none(),
        "an answer is no transport error"
    );

    // Another account's token finds nothing and changes nothing.
    let stranger = outsider(&w).await;
    let retry = sub_path(&sub, &format!("{one}/retry"));
    for path in [
        sub_path(&sub, "/deliveries"),
        sub_path(&sub, &one),
        sub_path(&sub, &format!("{one}/attempts")),
        sub_path(&sub, "/health"),
    ] {
        w.api
            .get(&path, &stranger.token)
            .await
            .problem(StatusCode::NOT_FOUND);
    }
    w.api
        .post(&retry, &stranger.token, json!({"reason": "not mine"}))
        .await
        .problem(StatusCode::NOT_FOUND);
    assert_eq!(w.delivery_status(&sub, change).await, DeliveryStatus::Dead);
    assert_eq!(w.receiver.count(), 2);

    // A reason is required; then the retry reaches the receiver from attempt 1.
    assert_eq!(
        w.api.post(&retry, &tenant.token, json!({})).await.fields(),
        ["reason"]
    );
    w.receiver.set_default(Reply::Status(200));
    let retried = w
        .api
        .post(
            &retry,
            &tenant.token,
            json!({"reason": "fixed the SKU mapping"}),
        )
        .await;
    let retried = retried.ok().clone();
    assert_eq!(retried["previous_status"], "dead");
    assert_eq!(retried["delivery"]["status"], "pending");
    let actor = format!("token {}", token_id(&tenant.token));
    assert_eq!(retried["delivery"]["restarted_by"], actor.as_str());
    w.pipeline.pump().await.unwrap();
    assert_eq!(w.receiver.count(), 3);
    assert_eq!(
        w.delivery_status(&sub, change).await,
        DeliveryStatus::Delivered
    );
    // A delivered one is not the administrator's to restart.
    let again = w
        .api
        .post(&retry, &tenant.token, json!({"reason": "once more"}))
        .await;
    assert!(again.problem(StatusCode::CONFLICT)["detail"]
        .as_str()
        .unwrap()
        .contains("only a dead or failed"));

    // Audited with the token and the reason, in the account's history and the subscription's
    // (the operators' integration history).
    let history = w.api.get("/v1/audit?limit=100", &tenant.token).await;
    let entries = of_action(history.ok(), "retry_delivery");
    assert_eq!(entries.len(), 1, "{}", history.json);
    assert_eq!(entries[0]["operator"], actor.as_str());
    assert_eq!(entries[0]["reason"], "fixed the SKU mapping");
    assert_eq!(entries[0]["change_id"], change.change_id.as_str());
    let operators_view = w
        .api
        .get(
            &format!(
                "/operator/accounts/{}/subscriptions/{}/audit",
                sub.account_id, sub.subscription_id
            ),
            OPERATOR_TOKEN,
        )
        .await;
    assert_eq!(
        of_action(operators_view.ok(), "retry_delivery")[0]["operator"],
        actor.as_str()
    );
    // The stranger's history has none of it.
    let theirs = w.api.get("/v1/audit", &stranger.token).await;
    assert!(of_action(theirs.ok(), "retry_delivery").is_empty());
}

#[tokio::test]
async fn an_administrator_resumes_their_paused_subscription_and_another_account_cannot() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    // Paused after fifty dead deliveries (as the worker leaves it).
    w.update(
        &keys::account_pk(&sub.account_id),
        &keys::subscription_sk(&sub.subscription_id),
        "SET #s = :paused, consecutive_dead = :fifty, paused_at = :now",
        &[
            (":paused", shared::store::expr::s("paused")),
            (":fifty", shared::store::expr::n(50)),
            (":now", shared::store::expr::n(w.pipeline.now().millis())),
        ],
    )
    .await;
    let skipped = w.write_changes(&sub.account_id, &[w.pipeline.now()]).await;
    let health = w.api.get(&sub_path(&sub, "/health"), &tenant.token).await;
    let health = health.ok().clone();
    assert_eq!(health["status"], "paused");
    assert_eq!(health["dead_in_a_row"], 50);
    assert_eq!(health["pause_threshold"], 50);
    assert!(health["paused_since"].is_string(), "{health}");

    let path = sub_path(&sub, "/resume");
    let stranger = outsider(&w).await;
    w.api
        .post(&path, &stranger.token, json!({"reason": "not mine"}))
        .await
        .problem(StatusCode::NOT_FOUND);
    let still = w
        .pipeline
        .subscription(&sub.account_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(still.consecutive_dead, 50);
    assert_eq!(still.status.to_string(), "paused");

    let resumed = w
        .api
        .post(
            &path,
            &tenant.token,
            json!({"reason": "endpoint redeployed"}),
        )
        .await;
    let resumed = resumed.ok().clone();
    assert_eq!(resumed["dead_count_before"], 50);
    assert_eq!(resumed["subscription"]["status"], "active");
    assert_eq!(resumed["subscription"]["consecutive_dead"], 0);
    // The change skipped while paused stays skipped.
    assert!(w
        .pipeline
        .delivery(&sub.account_id, &skipped[0].change_id, &sub.subscription_id)
        .await
        .is_none());
    let again = w
        .api
        .post(&path, &tenant.token, json!({"reason": "twice"}))
        .await;
    again.problem(StatusCode::CONFLICT);
    let history = w.api.get("/v1/audit", &tenant.token).await;
    let entries = of_action(history.ok(), "resume_subscription");
    assert_eq!(entries.len(), 1);
    assert_eq!(
        entries[0]["operator"],
        format!("token {}", token_id(&tenant.token)).as_str()
    );
    assert_eq!(entries[0]["reason"], "endpoint redeployed");
}

#[tokio::test]
async fn health_shows_three_delivered_and_one_dead_as_75_percent_with_the_receivers_latency() {
    let w = World::new().await;
    let slow = Duration::from_millis(150);
    // Three slow acknowledgements, then a refusal.
    w.receiver.script([
        Reply::Hang(slow),
        Reply::Hang(slow),
        Reply::Hang(slow),
        Reply::Full {
            status: 400,
            headers: Vec::new(),
            body: "no".into(),
        },
    ]);
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let now = w.pipeline.now();
    let changes = w
        .write_changes(&sub.account_id, &[now, now, now, now])
        .await;
    let mut statuses = Vec::new();
    for c in &changes {
        statuses.push(w.delivery_status(&sub, c).await);
    }
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == DeliveryStatus::Delivered)
            .count(),
        3,
        "{statuses:?}"
    );
    let h = w.api.get(&sub_path(&sub, "/health"), &tenant.token).await;
    let h = h.ok().clone();
    for window in ["last_100", "last_24h"] {
        assert_eq!(h[window]["finished"], 4, "{h}");
        assert_eq!(h[window]["delivered"], 3, "{h}");
        assert_eq!(h[window]["rate"], 0.75, "{h}");
    }
    assert_eq!(h["latency_attempts"], 4);
    let p50 = h["latency_p50_ms"].as_u64().unwrap();
    let p95 = h["latency_p95_ms"].as_u64().unwrap();
    assert!((150..5_000).contains(&p50), "{h}");
    assert!(p95 >= p50 && p95 < 5_000, "{h}");
    assert_eq!(h["last_failure"]["http_status"], 400);
    assert_eq!(h["last_failure"]["class"], "permanent");
    // The run of dead deliveries is the subscription's (a delivered one after the dead one
    // ends it, so it depends on the order the four settled).
    let stored = w
        .pipeline
        .subscription(&sub.account_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(h["dead_in_a_row"], stored.consecutive_dead);
    assert_eq!(h["pause_threshold"], 50);
    assert!(h["paused_since"].is_null());
    assert_eq!(h["complete"], true);
    let hourly = h["hourly"].as_array().unwrap();
    assert_eq!(hourly.len(), 24);
    assert_eq!(hourly[23]["delivered"], 3, "{h}");
    assert_eq!(hourly[23]["failed"], 1, "{h}");
}

#[tokio::test]
async fn the_event_monitor_filters_by_record_type_record_id_and_event_code() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    w.subscribe_through_api(&tenant, "poll", json!({})).await;
    let mut other = w.change(&tenant.account_id).build();
    other.record_id = "SKU-2".into();
    w.pipeline.write_change(&other).await.unwrap();
    let first = w
        .write_changes(&tenant.account_id, &[w.pipeline.now()])
        .await;
    let ids = |page: &Value| -> Vec<String> {
        let mut v: Vec<String> = page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect();
        v.sort();
        v
    };
    let mut all = vec![first[0].change_id.to_string(), other.change_id.to_string()];
    all.sort();
    let get = |q: &'static str| {
        let token = tenant.token.clone();
        let api = &w.api;
        async move { api.get(&format!("/v1/events?{q}"), &token).await }
    };
    assert_eq!(
        ids(get("record_id=SKU-2").await.ok()),
        [other.change_id.as_str()]
    );
    assert_eq!(ids(get("record_type=catalog_item").await.ok()), all);
    assert!(ids(get("record_type=order").await.ok()).is_empty());
    assert_eq!(ids(get("event_code=catalog_item.updated").await.ok()), all);
    assert_eq!(
        ids(get("event_code=catalog_item.updated&record_id=SKU-1")
            .await
            .ok()),
        [first[0].change_id.as_str()]
    );
    assert!(ids(get("event_code=catalog_item.deleted").await.ok()).is_empty());
    let long = "x".repeat(257);
    let refused = w
        .api
        .get(&format!("/v1/events?record_id={long}"), &tenant.token)
        .await;
    assert_eq!(refused.fields(), ["record_id"]);
    // Another account's token lists none of them.
    let stranger = outsider(&w).await;
    let theirs = w
        .api
        .get("/v1/events?record_id=SKU-2", &stranger.token)
        .await;
    assert!(ids(theirs.ok()).is_empty());
}
