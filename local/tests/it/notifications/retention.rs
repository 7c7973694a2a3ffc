//! Retention of the notification table (`shared::domain::retention`, the item table in
//! `shared::store::notice`): the expiry each item of a notice gets along its life — fan-out,
//! sent and failed deliveries, withdrawal, replacement, an operator's requeue — and the readers
//! (notices API, console inbox, operator view, channel worker, supersede pointer) treating an item
//! past its expiry as gone while it is still stored (the emulator, like TTL's lag, deletes
//! nothing).

use super::*;
use axum::http::StatusCode;
use local::testkit::api::{ApiAccount, OPERATOR_TOKEN};
use shared::domain::event::RETENTION;
use shared::domain::retention::{notice_ttl_seconds, ttl_instant, NOTICE_SETTLE_BOUND};
use shared::domain::time::DAY;
use shared::ids::NoticeId;
use shared::store::notice_progress::{progress_sk, PROGRESS_SHARDS};
use shared::store::provider_ref::{provider_ref_pk, PROVIDER_REF_SK};
use shared::store::supersede_pointer;
use shared::store::Item;
use std::collections::HashMap;

fn expiry(item: &Item) -> Option<i64> {
    item.get("expires_at")
        .map(|v| v.as_n().unwrap().parse().unwrap())
}

/// The expiry of every progress shard of a partition (all eight exist once fanned out).
fn shard_expiries(p: &HashMap<String, Item>) -> Vec<Option<i64>> {
    let shards: Vec<Option<i64>> = p
        .iter()
        .filter(|(sk, _)| sk.starts_with(PROGRESS_PREFIX))
        .map(|(_, i)| expiry(i))
        .collect();
    assert_eq!(shards.len(), PROGRESS_SHARDS as usize);
    shards
}

/// What must hold whenever the partition is at rest: no delivery outlives its notice, and no
/// progress shard expires before it.
fn assert_the_notice_outlives_its_deliveries_and_its_shards_outlive_it(p: &HashMap<String, Item>) {
    let notice = expiry(&p["NOTICE"]).expect("the notice has an expiry");
    for (sk, item) in p {
        if sk.starts_with(DELIVERY_PREFIX) {
            let d = expiry(item).unwrap_or_else(|| panic!("{sk} at rest has an expiry"));
            assert!(
                d <= notice,
                "{sk} expires at {d}, after its notice ({notice})"
            );
        }
        if sk.starts_with(PROGRESS_PREFIX) {
            assert!(
                expiry(item).unwrap() >= notice,
                "{sk} expires before its notice"
            );
        }
    }
}

/// The supersede pointer of `key`, read raw: the store's reader hides an expired pointer.
async fn stored_pointer(n: &Notifications, key: &str) -> Item {
    n.store
        .get(&supersede_pointer::supersede_pk(&n.account, key), "CURRENT")
        .await
        .unwrap()
        .expect("the pointer")
}

/// How many entries a listing answers.
async fn entries(api: &local::testkit::api::ApiClient, path: &str, token: &str) -> usize {
    api.get(path, token).await.ok()["data"]
        .as_array()
        .unwrap()
        .len()
}

async fn visible_notice(n: &Notifications, id: &NoticeId) -> bool {
    n.notices.notice_of(&n.account, id).await.unwrap().is_some()
}

#[tokio::test]
async fn a_notice_its_shards_and_deliveries_take_their_expiry_from_fan_out_sending_and_withdrawal()
{
    let w = World::new().await;
    let n = &w.notify;
    let slack = Receiver::start().await;
    let notice = n
        .create(new_notice(
            vec![
                contact("ops", None, Some(slack.url("/h"))),
                contact("dev", None, Some(slack.url("/h"))),
            ],
            &["slack", "console"],
            "Retained",
        ))
        .await;
    let id = &notice.request.notice_id;
    let fanned = notice.fanned_out_at.unwrap();

    // Fan-out: the notice and all eight shards expire the settle bound plus the retention after
    // it; console entries (delivered at once) the retention after it; queued deliveries and
    // their work never.
    let p = n.partition(id).await;
    assert_eq!(expiry(&p["NOTICE"]), Some(notice_ttl_seconds(fanned)));
    assert_eq!(
        notice_ttl_seconds(fanned),
        fanned.plus(NOTICE_SETTLE_BOUND).plus(RETENTION).seconds()
    );
    assert!(shard_expiries(&p)
        .iter()
        .all(|e| *e == Some(notice_ttl_seconds(fanned))));
    for key in ["console-0", "console-1"] {
        assert_eq!(
            expiry(&p[&delivery_sk(key)]),
            Some(fanned.plus(RETENTION).seconds())
        );
    }
    for key in ["slack-0", "slack-1"] {
        assert_eq!(expiry(&p[&delivery_sk(key)]), None, "{key} is queued");
        assert_eq!(expiry(&p[&work_sk(key)]), None, "{key}'s work");
    }

    // One Slack delivery is sent (and confirmed by the post) a minute later.
    n.clock.advance(MINUTE);
    let sent_at = n.now();
    let messages = n.queue().receive().await.unwrap();
    let work: NotificationWork = messages
        .iter()
        .map(|m| serde_json::from_str::<NotificationWork>(m.body.as_deref().unwrap()).unwrap())
        .find(|w| w.delivery_key == "slack-0")
        .expect("slack-0's message");
    n.worker.process(&work, 1).await.unwrap();
    let sent = n.delivery(id, "slack-0").await;
    assert_eq!(sent.status, N::Delivered);
    let p = n.partition(id).await;
    assert_eq!(
        expiry(&p[&delivery_sk("slack-0")]),
        Some(sent_at.plus(RETENTION).seconds())
    );
    assert!(
        !p.contains_key(&work_sk("slack-0")),
        "its work went with it"
    );
    assert_eq!(
        expiry(&p[&progress_sk("slack-0")]),
        Some(notice_ttl_seconds(sent_at)),
        "the count stamps its shard from its own instant"
    );
    assert_eq!(
        expiry(&p["NOTICE"]),
        Some(notice_ttl_seconds(fanned)),
        "a delivery's move does not write the notice"
    );
    let reference = n
        .store
        .get(
            &provider_ref_pk(
                sent.provider.as_deref().unwrap(),
                sent.provider_ref.as_deref().unwrap(),
            ),
            PROVIDER_REF_SK,
        )
        .await
        .unwrap()
        .expect("the provider reference");
    assert_eq!(expiry(&reference), sent.expires_at);

    // Withdrawn a day later: the queued one is cancelled, and the notice and every shard take
    // the withdrawal's expiry.
    n.clock.advance(DAY);
    let withdrawn_at = n.now();
    let (_, cancelled) = n.notices.withdraw(&n.account, id).await.unwrap();
    assert_eq!(cancelled, 1);
    let p = n.partition(id).await;
    assert_eq!(expiry(&p["NOTICE"]), Some(notice_ttl_seconds(withdrawn_at)));
    assert!(shard_expiries(&p)
        .iter()
        .all(|e| *e == Some(notice_ttl_seconds(withdrawn_at))));
    assert_eq!(
        expiry(&p[&delivery_sk("slack-1")]),
        Some(withdrawn_at.plus(RETENTION).seconds())
    );
    assert!(!p.keys().any(|sk| sk.starts_with("WORK#")), "no work left");
    assert_the_notice_outlives_its_deliveries_and_its_shards_outlive_it(&p);

    // Readers: visible to the last second, gone at the expiry, though still stored.
    let gone_at = ttl_instant(notice_ttl_seconds(withdrawn_at));
    n.clock.set(gone_at.minus(SECOND));
    assert!(visible_notice(n, id).await);
    assert!(
        n.notices.deliveries(id).await.unwrap().is_empty(),
        "every delivery expired first"
    );
    n.clock.set(gone_at);
    assert!(!visible_notice(n, id).await);
    assert!(
        n.item(id, "NOTICE").await.is_some(),
        "TTL has not deleted it yet"
    );
}

#[tokio::test]
async fn a_requeue_keeps_the_notice_and_its_shards_past_the_expiry_they_had_until_the_delivery_rests_again(
) {
    let w = World::new().await;
    let n = &w.notify;
    let slack = Receiver::start().await;
    let (notice, _) = exhaust(n, &slack, "Requeue keeps").await;
    let id = &notice.request.notice_id;
    let fanned = notice.fanned_out_at.unwrap();
    let failed = n.delivery(id, "slack-0").await;
    assert_eq!(
        failed.expires_at,
        Some(failed.updated_at.plus(RETENTION).seconds()),
        "an exhausted failure rests"
    );
    let p = n.partition(id).await;
    let before = expiry(&p["NOTICE"]).unwrap();
    assert_eq!(before, notice_ttl_seconds(fanned));
    assert_the_notice_outlives_its_deliveries_and_its_shards_outlive_it(&p);

    // Past the delivery's expiry it is gone to the operator too.
    let last_day = failed.updated_at.plus(RETENTION).minus(HOUR);
    n.clock.set(failed.updated_at.plus(RETENTION));
    assert!(matches!(
        requeue(&n.store, id, "slack-0", "op", "late", n.now()).await,
        Err(RequeueError::NotFound)
    ));

    // An hour before it, the operator requeues it: the delivery loses its expiry, the notice and
    // every shard take the requeue's.
    n.clock.set(last_day);
    requeue_now(n, id, "slack-0").await;
    let p = n.partition(id).await;
    assert_eq!(expiry(&p[&delivery_sk("slack-0")]), None);
    assert_eq!(
        expiry(&p[&work_sk("slack-0")]),
        None,
        "fresh work never expires"
    );
    assert_eq!(expiry(&p["NOTICE"]), Some(notice_ttl_seconds(last_day)));
    assert!(shard_expiries(&p)
        .iter()
        .all(|e| *e == Some(notice_ttl_seconds(last_day))));

    // Within the settle bound of the requeue, yet past the expiry the notice had before: the
    // notice still applies, so the worker sends instead of cancelling.
    n.clock.advance(NOTICE_SETTLE_BOUND - HOUR);
    assert!(n.now() > ttl_instant(before));
    assert!(visible_notice(n, id).await);
    slack.set_default(Reply::Status(200));
    n.pump().await;
    let d = n.delivery(id, "slack-0").await;
    assert_eq!(d.status, N::Delivered);
    assert_eq!(slack.count(), MAX_RECEIVES as usize + 1);
    assert_eq!(d.expires_at, Some(n.now().plus(RETENTION).seconds()));
    assert_the_notice_outlives_its_deliveries_and_its_shards_outlive_it(&n.partition(id).await);
}

#[tokio::test]
async fn a_requeue_keeps_its_notices_supersede_pointer_so_a_later_notice_with_the_key_still_replaces_it(
) {
    let w = World::new().await;
    let n = &w.notify;
    let slack = Receiver::start().await;
    let (old, _) = exhaust_keyed(n, &slack, "Week 1", Some("weekly")).await;
    let id = &old.request.notice_id;
    let pointer = || stored_pointer(n, "weekly");
    let first_expiry = notice_ttl_seconds(old.fanned_out_at.unwrap());
    assert_eq!(expiry(&pointer().await), Some(first_expiry));

    // Requeued on the last day it can be: the pointer is kept as long as the notice.
    let failed = n.delivery(id, "slack-0").await;
    let last_day = failed.updated_at.plus(RETENTION).minus(HOUR);
    n.clock.set(last_day);
    requeue_now(n, id, "slack-0").await;
    let kept = pointer().await;
    assert_eq!(expiry(&kept), Some(notice_ttl_seconds(last_day)));
    assert_eq!(kept["notice_id"].as_s().unwrap(), id.as_str());

    // Past the expiry the pointer had, with the requeued delivery still queued: a later notice
    // with the key replaces this one, and the requeued delivery is cancelled, not sent.
    n.clock.set(ttl_instant(first_expiry));
    let mut week_2 = new_notice(
        vec![contact("ops", None, Some(slack.url("/services/T/B/x")))],
        &["slack"],
        "Week 2",
    );
    week_2.supersede_key = Some("weekly".into());
    let later = n.create(week_2).await;
    assert_eq!(
        pointer().await["notice_id"].as_s().unwrap(),
        later.request.notice_id.as_str()
    );
    let old_now = n.store.notice(id).await.unwrap().unwrap();
    assert_eq!(old_now.status, NoticeStatus::Superseded);
    slack.set_default(Reply::Status(200));
    let sent_before = slack.count();
    n.pump().await;
    assert_eq!(n.delivery(id, "slack-0").await.status, N::Cancelled);
    assert_eq!(
        n.delivery(&later.request.notice_id, "slack-0").await.status,
        N::Delivered
    );
    assert_eq!(
        slack.count(),
        sent_before + 1,
        "only the later notice is sent"
    );

    // A requeue that finds a later notice holding the key leaves its pointer alone.
    let unkeyed =
        supersede_pointer::retain(&n.store.table, &n.account, "weekly", id, n.now()).unwrap();
    assert!(!n.store.send(unkeyed).await.unwrap().applied());
}

#[tokio::test]
async fn a_replaced_notice_takes_the_replacement_s_expiry_and_an_expired_pointer_is_claimed_again()
{
    let w = World::new().await;
    let n = &w.notify;
    let slack = Receiver::start().await;
    let ops = || vec![contact("ops", None, Some(slack.url("/h")))];
    let keyed = |subject: &str| {
        let mut new = new_notice(ops(), &["slack"], subject);
        new.supersede_key = Some("weekly".into());
        new
    };
    let pointer = || stored_pointer(n, "weekly");

    let a = n.create(keyed("Week 1")).await;
    let a_at = a.fanned_out_at.unwrap();
    assert_eq!(expiry(&pointer().await), Some(notice_ttl_seconds(a_at)));

    n.clock.advance(DAY);
    let replaced_at = n.now();
    let b = n.create(keyed("Week 2")).await;
    let a_now = n.partition(&a.request.notice_id).await;
    assert_eq!(
        a_now["NOTICE"]["status"],
        AttributeValue::S("superseded".into())
    );
    assert_eq!(
        expiry(&a_now["NOTICE"]),
        Some(notice_ttl_seconds(replaced_at))
    );
    assert!(shard_expiries(&a_now)
        .iter()
        .all(|e| *e == Some(notice_ttl_seconds(replaced_at))));
    assert_eq!(
        expiry(&a_now[&delivery_sk("slack-0")]),
        Some(replaced_at.plus(RETENTION).seconds()),
        "its queued delivery was cancelled"
    );
    assert_the_notice_outlives_its_deliveries_and_its_shards_outlive_it(&a_now);
    let held = pointer().await;
    assert_eq!(
        held["notice_id"].as_s().unwrap(),
        b.request.notice_id.as_str()
    );
    let b_expiry = expiry(&held).unwrap();
    assert_eq!(b_expiry, notice_ttl_seconds(b.fanned_out_at.unwrap()));

    // Past its expiry the pointer reads as none (though still stored) and a new notice claims
    // it: the expired notice it named is not touched.
    n.clock.set(ttl_instant(b_expiry));
    let now = n.now();
    assert!(
        supersede_pointer::get(&n.store.dynamo, &n.store.table, &n.account, "weekly", now)
            .await
            .unwrap()
            .is_none()
    );
    let c = n.create(keyed("Week 40")).await;
    assert_eq!(c.status, NoticeStatus::Active);
    assert_eq!(
        pointer().await["notice_id"].as_s().unwrap(),
        c.request.notice_id.as_str()
    );
    let b_now = n.store.notice(&b.request.notice_id).await.unwrap().unwrap();
    assert_eq!(b_now.status, NoticeStatus::Active);
}

#[tokio::test]
async fn the_worker_cancels_instead_of_sending_a_delivery_whose_notice_expired() {
    let w = World::new().await;
    let n = &w.notify;
    let slack = Receiver::start().await;
    let notice = n.create(ops_on_slack(&slack, "Stuck")).await;
    let id = &notice.request.notice_id;
    // The pipeline stood still past the settle bound and the retention: the notice is gone to
    // readers, so its still-queued delivery does not apply any more.
    n.clock.set(ttl_instant(
        notice.expires_at.expect("fanned out with an expiry"),
    ));
    n.drain().await;
    assert_eq!(slack.count(), 0);
    let d = n.delivery(id, "slack-0").await;
    assert_eq!(d.status, N::Cancelled);
    assert!(d.expires_at.is_some());
}

#[tokio::test]
async fn the_notices_api_console_inbox_and_operator_view_hide_what_expired_and_its_key_does_not_answer_with_it(
) {
    let w = World::new().await;
    let n = &w.notify;
    let api = &w.api;
    let ApiAccount { token, .. } = api.account("Retention").await;
    let request = || {
        api.post(
            "/v1/notices",
            &token,
            json!({
                "recipients": ["admin@example.com", "user-1"],
                "channels": ["email", "console"],
                "subject": "Kept a while",
                "body": "Then gone.",
            }),
        )
        .header("idempotency-key", "retention-1")
    };
    let created = request().await;
    let id = created.accepted()["id"].as_str().unwrap().to_string();
    n.pump().await;
    let notice_id: NoticeId = id.parse().unwrap();
    let stored = n.store.notice(&notice_id).await.unwrap().unwrap();
    let fanned = stored.fanned_out_at.unwrap();
    let sent = n.delivery(&notice_id, "email-0").await;
    assert_eq!(
        sent.status,
        N::Sent,
        "sent, awaiting the provider's confirmation"
    );
    assert_eq!(
        sent.expires_at,
        Some(sent.updated_at.plus(RETENTION).seconds())
    );

    let inbox = "/v1/console/notices?recipient=user-1";
    let listed = format!("/v1/notices/{id}/deliveries");
    assert_eq!(entries(api, inbox, &token).await, 1);
    // Email and console for each: the account id has no email address (skipped at once).
    assert_eq!(entries(api, &listed, &token).await, 4);
    assert_eq!(n.delivery(&notice_id, "email-1").await.status, N::Skipped);

    // The retention after the fan-out: the deliveries (the console entry too) are gone, the
    // notice is still shown.
    n.clock
        .set(fanned.plus(RETENTION).max(sent.updated_at.plus(RETENTION)));
    assert_eq!(
        entries(api, inbox, &token).await,
        0,
        "the console entry expired"
    );
    assert_eq!(entries(api, &listed, &token).await, 0);
    let notice_path = format!("/v1/notices/{id}");
    assert_eq!(api.get(&notice_path, &token).await.status, StatusCode::OK);

    // The notice's own expiry: gone everywhere, though every item is still stored.
    n.clock.set(ttl_instant(stored.expires_at.unwrap()));
    for (path, token) in [
        (notice_path.as_str(), token.as_str()),
        (listed.as_str(), token.as_str()),
        (&format!("/operator/notifications/{id}"), OPERATOR_TOKEN),
    ] {
        assert_eq!(
            api.get(path, token).await.status,
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
    let withdraw = api
        .post(&format!("/v1/notices/{id}/withdraw"), &token, json!({}))
        .await;
    assert_eq!(withdraw.status, StatusCode::NOT_FOUND);
    // The same request again, with its key: not the expired notice, and no new one (its
    // partition is still stored), but a conflict that says to use a new key.
    let again = request().await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.json);
    assert!(
        again.json["detail"]
            .as_str()
            .unwrap()
            .contains("expired; send the notice with a new idempotency key"),
        "{}",
        again.json
    );
    assert_eq!(
        api.get(&notice_path, &token).await.status,
        StatusCode::NOT_FOUND
    );
    assert!(n.partition(&notice_id).await.contains_key("NOTICE"));
}
