//! Which answers retry, per subscription: a subscription's `retry_statuses` make listed 4xx answers
//! retried on its backoff schedule, and `pause_on_gone` makes a 410 pause it at once; set through
//! the API, against the emulator and a real receiver on loopback.

use axum::http::StatusCode;
use local::receiver::Reply;
use local::testkit::through_api::ApiSubscription;
use local::testkit::World;
use serde_json::{json, Value};
use shared::domain::integration_delivery::DeliveryStatus;
use shared::domain::retry::FIXED_SCHEDULE;
use shared::domain::subscription::SubscriptionStatus;

async fn subscribed(w: &World, extra: Value) -> ApiSubscription {
    let tenant = w.api.account("Answers").await;
    w.subscribe_through_api(&tenant, "webhook", extra).await
}

async fn notices(w: &World) -> usize {
    w.notification_items().await.len()
}

#[tokio::test]
async fn a_401_the_subscription_lists_is_retried_on_the_schedule_and_delivered_once_the_receiver_recovers(
) {
    let w = World::new().await;
    let r = &w.receiver;
    r.script([Reply::Status(401), Reply::Status(401)]);
    let sub = subscribed(&w, json!({"retry_statuses": [401]})).await;
    let now = w.pipeline.now();
    let change = &w.write_changes(&sub.account_id, &[now]).await[0];
    let d = w.stored_delivery(&sub, change).await;
    assert_eq!(d.status, DeliveryStatus::Retrying);
    assert_eq!(d.attempt_log[0].http_status, Some(401));
    assert_eq!(d.attempt_log[0].class, "transient");
    assert_eq!(
        d.not_before,
        Some(d.attempt_log[0].at.plus(FIXED_SCHEDULE[0]))
    );

    // Not before its time: the schedule, not the answer, sets the next attempt.
    w.pipeline
        .advance(FIXED_SCHEDULE[0] - std::time::Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(r.count(), 1);
    w.pipeline
        .advance(std::time::Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(r.count(), 2);
    assert_eq!(
        w.delivery_status(&sub, change).await,
        DeliveryStatus::Retrying
    );
    w.pipeline.advance(FIXED_SCHEDULE[1]).await.unwrap();
    assert_eq!(r.count(), 3);
    let d = w.stored_delivery(&sub, change).await;
    assert_eq!(d.status, DeliveryStatus::Delivered);
    assert_eq!(d.attempts, 3);
}

#[tokio::test]
async fn without_the_choice_a_401_is_dead_at_once() {
    let w = World::new().await;
    let r = &w.receiver;
    r.set_default(Reply::Status(401));
    let sub = subscribed(&w, json!({})).await;
    let now = w.pipeline.now();
    let change = &w.write_changes(&sub.account_id, &[now]).await[0];
    let d = w.stored_delivery(&sub, change).await;
    assert_eq!(d.status, DeliveryStatus::Dead);
    assert_eq!(d.attempts, 1);
    assert_eq!(d.attempt_log[0].class, "permanent");
    w.pipeline.advance(FIXED_SCHEDULE[0]).await.unwrap();
    assert_eq!(r.count(), 1, "never tried again");
}

#[tokio::test]
async fn a_410_pauses_a_subscription_that_pauses_on_gone_at_once_with_one_notice() {
    let w = World::new().await;
    let r = &w.receiver;
    r.set_default(Reply::Status(410));
    let sub = subscribed(&w, json!({"pause_on_gone": true})).await;
    let now = w.pipeline.now();
    let changes = w.write_changes(&sub.account_id, &[now, now]).await;
    for change in &changes {
        assert_eq!(w.delivery_status(&sub, change).await, DeliveryStatus::Dead);
    }
    let s = w
        .pipeline
        .subscription(&sub.account_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(s.status, SubscriptionStatus::Paused);
    assert!(s.consecutive_dead < 50);
    assert_eq!(notices(&w).await, 1, "one administrator notice");

    // While paused, new changes are skipped: nothing more is sent.
    let calls = r.count();
    let later = w.pipeline.now();
    w.write_changes(&sub.account_id, &[later]).await;
    assert_eq!(r.count(), calls);
    assert_eq!(notices(&w).await, 1);
}

#[tokio::test]
async fn without_pause_on_gone_a_410_is_dead_and_the_subscription_stays_active() {
    let w = World::new().await;
    w.receiver.set_default(Reply::Status(410));
    let sub = subscribed(&w, json!({})).await;
    let now = w.pipeline.now();
    let change = &w.write_changes(&sub.account_id, &[now]).await[0];
    assert_eq!(w.delivery_status(&sub, change).await, DeliveryStatus::Dead);
    let s = w
        .pipeline
        .subscription(&sub.account_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(s.status, SubscriptionStatus::Active);
    assert_eq!(notices(&w).await, 0);
}

#[tokio::test]
async fn statuses_that_are_not_client_errors_or_are_retried_already_are_refused_by_name() {
    let w = World::new().await;
    let tenant = w.api.account("Answers").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let integration = w
        .api
        .get(
            &format!("/v1/subscriptions/{}", sub.subscription_id),
            &tenant.token,
        )
        .await
        .ok()["integration_id"]
        .clone();
    let create = |extra: Value| {
        let mut body = json!({
            "integration_id": integration,
            "record_types": ["catalog_item"],
            "fields": ["sku"],
        });
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        w.api.post("/v1/subscriptions", &tenant.token, body)
    };
    for (extra, field) in [
        (json!({"retry_statuses": [401, 500]}), "retry_statuses[1]"),
        (json!({"retry_statuses": [204]}), "retry_statuses[0]"),
        (json!({"retry_statuses": [429]}), "retry_statuses[0]"),
        (
            json!({"retry_statuses": [410], "pause_on_gone": true}),
            "retry_statuses[0]",
        ),
        (json!({"retry_statuses": ["401"]}), "retry_statuses"),
        (json!({"pause_on_gone": "yes"}), "pause_on_gone"),
    ] {
        let r = create(extra.clone()).await;
        r.problem(StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(r.fields(), vec![field.to_string()], "{extra}");
    }

    // An edit is checked with the setting it leaves as stored.
    let path = format!("/v1/subscriptions/{}", sub.subscription_id);
    let edited = w
        .api
        .patch(
            &path,
            &tenant.token,
            json!({"retry_statuses": [410, 401, 401]}),
        )
        .await;
    let edited = edited.ok();
    assert_eq!(edited["retry_statuses"], json!([401, 410]));
    let answers = edited["answers"].as_array().unwrap();
    let effect = |answer: &str| {
        answers
            .iter()
            .find(|a| a["answer"] == answer)
            .map(|a| a["effect"].as_str().unwrap().to_owned())
    };
    assert_eq!(
        effect("401").as_deref(),
        Some("retried on the schedule (this subscription's choice)")
    );
    let r = w
        .api
        .patch(&path, &tenant.token, json!({"pause_on_gone": true}))
        .await;
    r.problem(StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(r.fields(), vec!["retry_statuses[1]".to_string()]);
    let cleared = w
        .api
        .patch(
            &path,
            &tenant.token,
            json!({"retry_statuses": null, "pause_on_gone": true}),
        )
        .await;
    let cleared = cleared.ok();
    assert_eq!(cleared["retry_statuses"], json!([]));
    assert_eq!(cleared["pause_on_gone"], json!(true));
}

#[tokio::test]
async fn the_console_form_sets_which_answers_retry_and_the_subscription_page_shows_what_each_answer_does(
) {
    use crate::console::{get, post, sign_in_with_token};
    let w = World::new().await;
    let tenant = w.api.account("Answers").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let admin = sign_in_with_token(&w, &tenant.token).await;
    let path = format!("/console/acct/manage/subscriptions/{}", sub.subscription_id);
    let edit = |statuses: &'static str, gone: bool| {
        let mut fields = vec![
            ("csrf", admin.csrf.as_str()),
            ("answers_shown", "1"),
            ("retry_statuses", statuses),
        ];
        if gone {
            fields.push(("pause_on_gone", "on"));
        }
        let (w, cookie, path) = (&w, admin.cookie.clone(), path.clone());
        async move { post(w, Some(&cookie), &path, &fields).await }
    };
    let saved = edit("401, 403", true).await;
    assert_eq!(saved.status, StatusCode::OK, "{}", saved.text);
    let stored = w
        .api
        .get(
            &format!("/v1/subscriptions/{}", sub.subscription_id),
            &tenant.token,
        )
        .await;
    assert_eq!(stored.ok()["retry_statuses"], json!([401, 403]));
    assert_eq!(stored.ok()["pause_on_gone"], json!(true));

    let page = get(
        &w,
        Some(&admin.cookie),
        &format!("/console/acct/subscriptions/{}", sub.subscription_id),
    )
    .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.text.contains("data-testid=\"answers\""),
        "{}",
        page.text
    );
    for (answer, effect) in [
        (
            "401",
            "retried on the schedule (this subscription&#39;s choice)",
        ),
        ("410 Gone", "dead at once, and the subscription pauses"),
        ("other 4xx", "dead at once: not retried"),
    ] {
        let row = format!(
            "<td data-label=\"Answer\">{answer}</td><td data-label=\"What happens\">{effect}"
        );
        assert!(
            page.text.contains(&row) || page.text.contains(&row.replace("&#39;", "'")),
            "{answer}: {}",
            page.text
        );
    }

    // An unchecked box and an empty list restore the defaults; a 5xx is refused by name.
    let bad = edit("500", false).await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.text);
    assert!(bad.text.contains("retry_statuses[0]"), "{}", bad.text);
    let cleared = edit("", false).await;
    assert_eq!(cleared.status, StatusCode::OK, "{}", cleared.text);
    let stored = w
        .api
        .get(
            &format!("/v1/subscriptions/{}", sub.subscription_id),
            &tenant.token,
        )
        .await;
    assert_eq!(stored.ok()["retry_statuses"], json!([]));
    assert_eq!(stored.ok()["pause_on_gone"], json!(false));
}
