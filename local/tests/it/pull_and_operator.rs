//! Pull delivery and operator actions (the cursor and operator rows of
//! `docs/lifecycles.md#integration-delivery`, `#subscription` and `#replay-job`) against the
//! emulator: the adapters' cursor API, operator retry, window replay, resume, integration
//! history, cross-account refusals, and the `rhythm` CLI. The pipeline (ingest, dispatcher,
//! worker) and the API share one manual clock.

use axum::http::{Method, StatusCode};
use local::receiver::Reply;
use local::testkit::api::{OPERATOR, OPERATOR_TOKEN};
use local::testkit::id;
use local::testkit::through_api::{change_ids, ApiSubscription};
use local::testkit::World;
use serde_json::{json, Value};
use shared::delivery::worker::WorkOutcome;
use shared::domain::integration_delivery::DeliveryStatus;
use shared::domain::pull_cursor::PullCursor;
use shared::domain::replay::ReplayStatus;
use shared::domain::time::{Timestamp, DAY, HOUR, MINUTE, SECOND};
use shared::operations::recovery::replay::{
    create_job, job_pk, job_sk, run_job, Budget, ReplayRequest,
};
use shared::operations::Ops;
use shared::store::delivery::DeliveryWork;
use shared::store::keys;
use std::time::{Duration, Instant};

// ------------------------------------------------------------------------------------ harness

/// Lets the pull reads see what was just written (`domain::pull_cursor::SETTLE`).
fn settle(w: &World) {
    w.pipeline.clock.advance(3 * SECOND);
}

fn pull_path(sub: &ApiSubscription, rest: &str) -> String {
    format!("/v1/pull/subscriptions/{}/{rest}", sub.subscription_id)
}

fn op_sub_path(sub: &ApiSubscription, rest: &str) -> String {
    format!(
        "/operator/accounts/{}/subscriptions/{}{rest}",
        sub.account_id, sub.subscription_id
    )
}

// --------------------------------------------------------------------------------- pull cursor

#[tokio::test]
async fn a_stray_message_for_a_pull_delivery_is_refused_by_the_claim_and_never_pushed() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "poll", json!({})).await;
    let changes = w.write_changes(&sub.account_id, &[w.pipeline.now()]).await;
    let work = DeliveryWork {
        account_id: sub.account_id.clone(),
        change_id: changes[0].change_id.clone(),
        subscription_id: sub.subscription_id.clone(),
    };
    // The claim's condition refuses a pull delivery: no lease is written, nothing is pushed.
    let outcome = w.pipeline.worker.process(&work).await.unwrap();
    assert_eq!(outcome, WorkOutcome::Skipped("pull delivery"));
    let d = w
        .pipeline
        .delivery(&sub.account_id, &work.change_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!((d.status, d.attempts), (DeliveryStatus::Pending, 0));
    assert!(d.lease_until.is_none() && d.lease_token.is_none());
    assert_eq!(w.receiver.count(), 0);
}

#[tokio::test]
async fn a_pull_read_and_cursor_write_cover_some_but_not_all_pending_records() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "poll", json!({})).await;
    let now = w.pipeline.now();
    let changes = w.write_changes(&sub.account_id, &[now; 5]).await;
    for c in &changes {
        assert_eq!(w.delivery_status(&sub, c).await, DeliveryStatus::Pending);
    }
    assert_eq!(w.receiver.count(), 0, "pull deliveries are never pushed");

    // Not yet visible to a read: the index is eventually consistent.
    let early = w
        .api
        .get(&pull_path(&sub, "changes"), &sub.integration_token)
        .await;
    assert!(early.ok()["data"].as_array().unwrap().is_empty());
    settle(&w);

    // A page of three, in change order, each with its own cursor.
    let page = w
        .api
        .get(&pull_path(&sub, "changes?limit=3"), &sub.integration_token)
        .await;
    let page = page.ok().clone();
    let expected: Vec<String> = changes.iter().map(|c| c.change_id.to_string()).collect();
    assert_eq!(change_ids(&page), expected[..3]);
    assert_eq!(page["has_more"], true);
    assert_eq!(page["acknowledged_change_id"], Value::Null);
    let first = &page["data"][0];
    assert_eq!(first["payload"]["data"]["sku"], "SKU-1");
    assert_eq!(first["payload"]["data"]["price"].as_f64(), Some(1.0));
    assert!(
        first["payload"]["data"].get("cost").is_none(),
        "only the subscription's fields"
    );
    assert!(
        !first.to_string().contains("Secret Pottery"),
        "never the row"
    );
    assert_eq!(
        first["delivery_id"],
        keys::delivery_id(&id(&expected[0]), &sub.subscription_id).as_str()
    );

    // The next page continues after the first without acknowledging it.
    let next = w
        .api
        .get(
            &pull_path(
                &sub,
                &format!("changes?cursor={}", page["next_cursor"].as_str().unwrap()),
            ),
            &sub.integration_token,
        )
        .await;
    assert_eq!(change_ids(next.ok()), expected[3..]);
    assert_eq!(next.json["has_more"], false);

    // Acknowledge the first two: they are delivered, the other three stay pending.
    let second_cursor = page["data"][1]["cursor"].as_str().unwrap().to_owned();
    let ack = w
        .api
        .put(
            &pull_path(&sub, "cursor"),
            &sub.integration_token,
            json!({"cursor": second_cursor}),
        )
        .await;
    let ack = ack.ok().clone();
    assert_eq!(ack["delivered"], 2);
    assert_eq!(ack["not_covered"], 0);
    assert_eq!(ack["acknowledged_change_id"], expected[1].as_str());
    for (i, c) in changes.iter().enumerate() {
        let want = if i < 2 {
            DeliveryStatus::Delivered
        } else {
            DeliveryStatus::Pending
        };
        assert_eq!(w.delivery_status(&sub, c).await, want, "change {i}");
    }
    let d = w.stored_delivery(&sub, &changes[0]).await;
    assert!(d.delivered_at.is_some());

    // Unread pending changes are read again from the acknowledged position.
    let again = w
        .api
        .get(&pull_path(&sub, "changes"), &sub.integration_token)
        .await;
    assert_eq!(change_ids(again.ok()), expected[2..]);
    assert_eq!(again.json["acknowledged_change_id"], expected[1].as_str());
    let cursor = w
        .api
        .get(&pull_path(&sub, "cursor"), &sub.integration_token)
        .await;
    assert_eq!(cursor.ok()["acknowledged_change_id"], expected[1].as_str());
    assert_eq!(cursor.json["epoch"], 0);

    // Writing the same cursor again (a retried request) changes nothing.
    let repeat = w
        .api
        .put(
            &pull_path(&sub, "cursor"),
            &sub.integration_token,
            json!({"cursor": second_cursor}),
        )
        .await;
    assert_eq!(repeat.ok()["delivered"], 0);

    // A cursor that goes backwards is a conflict.
    let back = w
        .api
        .put(
            &pull_path(&sub, "cursor"),
            &sub.integration_token,
            json!({"cursor": page["data"][0]["cursor"]}),
        )
        .await;
    let problem = back.problem(StatusCode::CONFLICT);
    assert!(
        problem["detail"].as_str().unwrap().contains("backwards"),
        "{problem}"
    );

    // Strings that are not cursors are refused as invalid; a cursor past the end is a position
    // of the form that does not fit the subscription (a conflict).
    for bad in [
        json!({"cursor": "not-a-cursor"}),
        json!({"cursor": 5}),
        json!({}),
    ] {
        let r = w
            .api
            .put(
                &pull_path(&sub, "cursor"),
                &sub.integration_token,
                bad.clone(),
            )
            .await;
        assert_eq!(r.fields(), ["cursor"], "{bad}");
    }
    let past_end = PullCursor {
        epoch: 0,
        read_at: w.pipeline.now(),
        change_id: Some("7ZZZZZZZZZZZZZZZZZZZZZZZZZ".parse().unwrap()),
    };
    let r = w
        .api
        .put(
            &pull_path(&sub, "cursor"),
            &sub.integration_token,
            json!({"cursor": past_end.encode()}),
        )
        .await;
    let problem = r.problem(StatusCode::CONFLICT);
    assert!(
        problem["detail"].as_str().unwrap().contains("past the end"),
        "{problem}"
    );
    let bad_read = w
        .api
        .get(
            &pull_path(&sub, &format!("changes?cursor={}", past_end.encode())),
            &sub.integration_token,
        )
        .await;
    let problem = bad_read.problem(StatusCode::CONFLICT);
    assert!(
        problem["detail"].as_str().unwrap().contains("past the end"),
        "{problem}"
    );
    let garbage_read = w
        .api
        .get(
            &pull_path(&sub, "changes?cursor=%21%21"),
            &sub.integration_token,
        )
        .await;
    assert_eq!(garbage_read.fields(), ["cursor"]);

    // The whole remaining page acknowledged: everything delivered.
    let ack = w
        .api
        .put(
            &pull_path(&sub, "cursor"),
            &sub.integration_token,
            json!({"cursor": again.json["next_cursor"]}),
        )
        .await;
    assert_eq!(ack.ok()["delivered"], 3);
    for c in &changes {
        assert_eq!(w.delivery_status(&sub, c).await, DeliveryStatus::Delivered);
    }

    // Only integration tokens may pull, and only poll integrations' subscriptions are pulled.
    let with_account_token = w.api.get(&pull_path(&sub, "changes"), &tenant.token).await;
    with_account_token.problem(StatusCode::UNAUTHORIZED);
    let anonymous = w
        .api
        .call(Method::GET, &pull_path(&sub, "changes"), None, None)
        .await;
    anonymous.problem(StatusCode::UNAUTHORIZED);
    let push = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    for (method, rest, body) in [
        (Method::GET, "changes", None),
        (Method::GET, "cursor", None),
        (
            Method::PUT,
            "cursor",
            Some(json!({"cursor": past_end.encode()})),
        ),
    ] {
        let r = w
            .api
            .call(
                method,
                &pull_path(&push, rest),
                Some(&push.integration_token),
                body,
            )
            .await;
        let problem = r.problem(StatusCode::CONFLICT);
        assert!(
            problem["detail"].as_str().unwrap().contains("not pull"),
            "{problem}"
        );
    }
    // An adapter lists its own subscriptions only.
    let mine = w
        .api
        .get("/v1/pull/subscriptions", &sub.integration_token)
        .await;
    let listed: Vec<&str> = mine.ok()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [sub.subscription_id.as_str()]);
}

#[tokio::test]
async fn a_cursor_write_racing_a_worker_never_overwrites_a_moved_delivery() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "poll", json!({})).await;
    let now = w.pipeline.now();
    let changes = w.write_changes(&sub.account_id, &[now; 3]).await;
    settle(&w);
    let page = w
        .api
        .get(&pull_path(&sub, "changes"), &sub.integration_token)
        .await;
    let page = page.ok().clone();
    assert_eq!(page["data"].as_array().unwrap().len(), 3);

    // Between the read and the write: a worker leases the first delivery, and the second moves on
    // to `failed` (configuration loss), each as the worker writes it.
    w.lease(
        &changes[0],
        &sub.subscription_id,
        w.pipeline.now().plus(MINUTE),
        "worker-lease",
    )
    .await;
    w.update(
        &keys::event_pk(&sub.account_id, &changes[1].change_id),
        &keys::delivery_sk(&sub.subscription_id),
        "SET #s = :failed",
        &[(":failed", shared::store::expr::s("failed"))],
    )
    .await;
    // A change minted before the cursor's last change but ingested after the read (a late
    // arrival) was not seen by the read either.
    let mut late = w.change(&sub.account_id).price(9.0).build();
    let last_ulid = ulid::Ulid::from_string(changes[2].change_id.as_str()).unwrap();
    late.change_id = ulid::Ulid::from_parts(last_ulid.timestamp_ms() - 1, 1)
        .to_string()
        .parse()
        .unwrap();
    w.pipeline.write_change(&late).await.unwrap();
    w.pipeline.pump().await.unwrap();
    assert_eq!(
        w.delivery_status(&sub, &late).await,
        DeliveryStatus::Pending
    );

    let ack = w
        .api
        .put(
            &pull_path(&sub, "cursor"),
            &sub.integration_token,
            json!({"cursor": page["next_cursor"]}),
        )
        .await;
    let ack = ack.ok().clone();
    assert_eq!(ack["delivered"], 1, "{ack}");
    assert_eq!(
        ack["not_covered"], 2,
        "the leased one and the late one: {ack}"
    );
    let leased = w.stored_delivery(&sub, &changes[0]).await;
    assert_eq!(leased.status, DeliveryStatus::Pending, "not overwritten");
    assert_eq!(leased.lease_token.as_deref(), Some("worker-lease"));
    assert_eq!(
        w.delivery_status(&sub, &changes[1]).await,
        DeliveryStatus::Failed,
        "not overwritten"
    );
    assert_eq!(
        w.delivery_status(&sub, &changes[2]).await,
        DeliveryStatus::Delivered
    );
    assert_eq!(
        w.delivery_status(&sub, &late).await,
        DeliveryStatus::Pending,
        "never acknowledged unseen"
    );

    // The late change is shown by the next read (the look-back behind the acknowledged position)
    // once visible, and a write of the acknowledged position again acknowledges it.
    settle(&w);
    let next = w
        .api
        .get(&pull_path(&sub, "changes"), &sub.integration_token)
        .await;
    let next = next.ok().clone();
    assert!(
        change_ids(&next).contains(&late.change_id.to_string()),
        "{next}"
    );
    let ack = w
        .api
        .put(
            &pull_path(&sub, "cursor"),
            &sub.integration_token,
            json!({"cursor": next["next_cursor"]}),
        )
        .await;
    assert_eq!(
        ack.ok()["acknowledged_change_id"],
        changes[2].change_id.as_str()
    );
    assert_eq!(
        w.delivery_status(&sub, &late).await,
        DeliveryStatus::Delivered
    );
}

#[tokio::test]
async fn an_operator_restart_of_a_pull_delivery_rewinds_the_cursor_and_refuses_stale_cursors() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "poll", json!({})).await;
    let now = w.pipeline.now();
    let changes = w.write_changes(&sub.account_id, &[now; 3]).await;
    settle(&w);
    let page = w
        .api
        .get(&pull_path(&sub, "changes"), &sub.integration_token)
        .await;
    let ack = w
        .api
        .put(
            &pull_path(&sub, "cursor"),
            &sub.integration_token,
            json!({"cursor": page.json["next_cursor"]}),
        )
        .await;
    assert_eq!(ack.ok()["delivered"], 3);
    // The adapter reads again (nothing new) and holds a cursor of epoch 0.
    let held = w
        .api
        .get(&pull_path(&sub, "changes"), &sub.integration_token)
        .await;
    let held_cursor = held.ok()["next_cursor"].clone();

    // An operator retries the first (delivered) change.
    let retried = w
        .api
        .post(
            &op_sub_path(&sub, &format!("/deliveries/{}/retry", changes[0].change_id)),
            OPERATOR_TOKEN,
            json!({"reason": "the adapter lost its copy"}),
        )
        .await;
    assert_eq!(retried.ok()["previous_status"], "delivered");
    assert_eq!(retried.json["delivery"]["status"], "pending");
    let cursor = w
        .api
        .get(&pull_path(&sub, "cursor"), &sub.integration_token)
        .await;
    assert_eq!(cursor.json["epoch"], 1);
    assert_eq!(
        cursor.json["acknowledged_change_id"],
        Value::Null,
        "rewound before the first change"
    );

    // The cursor read before the restart is stale.
    let stale = w
        .api
        .put(
            &pull_path(&sub, "cursor"),
            &sub.integration_token,
            json!({"cursor": held_cursor}),
        )
        .await;
    assert!(stale.problem(StatusCode::CONFLICT)["detail"]
        .as_str()
        .unwrap()
        .contains("read again"));
    assert_eq!(
        w.delivery_status(&sub, &changes[0]).await,
        DeliveryStatus::Pending
    );

    // A fresh read shows the restarted change (flagged as a redelivery) and acknowledges it.
    settle(&w);
    let fresh = w
        .api
        .get(&pull_path(&sub, "changes"), &sub.integration_token)
        .await;
    let fresh = fresh.ok().clone();
    assert_eq!(change_ids(&fresh), [changes[0].change_id.to_string()]);
    assert_eq!(fresh["data"][0]["redelivery"], true);
    let ack = w
        .api
        .put(
            &pull_path(&sub, "cursor"),
            &sub.integration_token,
            json!({"cursor": fresh["next_cursor"]}),
        )
        .await;
    assert_eq!(ack.ok()["delivered"], 1);
    assert_eq!(
        w.delivery_status(&sub, &changes[0]).await,
        DeliveryStatus::Delivered
    );
}

// ----------------------------------------------------------------------------------- retries

#[tokio::test]
async fn retries_a_dead_delivery_an_operator_asks_for_from_its_first_attempt() {
    let w = World::new().await;
    w.receiver.set_default(Reply::Status(503));
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant,
        "webhook",
        json!({"retry_policy": {"kind": "exponential", "max_retries": 2, "retry_delay_secs": 60}}),
    )
    .await;
    let now = w.pipeline.now();
    let changes = w.write_changes(&sub.account_id, &[now]).await;
    let change = &changes[0];
    w.pipeline.advance(2 * MINUTE).await.unwrap();
    let dead = w.stored_delivery(&sub, change).await;
    assert_eq!(dead.status, DeliveryStatus::Dead);
    assert_eq!(dead.attempts, 2);
    assert_eq!(w.receiver.count(), 2);
    let s = w
        .pipeline
        .subscription(&sub.account_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(s.consecutive_dead, 1);

    // It shows in the history of dead deliveries.
    let listed = w
        .api
        .get(
            &op_sub_path(&sub, "/deliveries?status=dead,failed"),
            OPERATOR_TOKEN,
        )
        .await;
    assert_eq!(change_ids(listed.ok()), [change.change_id.as_str()]);
    assert_eq!(listed.json["data"][0]["transmit_status"], "failed");

    // The operator asks for a retry; a reason is required.
    let path = op_sub_path(&sub, &format!("/deliveries/{}/retry", change.change_id));
    let no_reason = w.api.post(&path, OPERATOR_TOKEN, json!({})).await;
    assert_eq!(no_reason.fields(), ["reason"]);
    let unauthenticated = w
        .api
        .post(&path, &tenant.token, json!({"reason": "x"}))
        .await;
    unauthenticated.problem(StatusCode::UNAUTHORIZED);
    w.receiver.set_default(Reply::Status(200));
    let retried = w
        .api
        .post(
            &path,
            OPERATOR_TOKEN,
            json!({"reason": "the receiver was down for maintenance"}),
        )
        .await;
    let retried = retried.ok().clone();
    assert_eq!(retried["previous_status"], "dead");
    assert_eq!(retried["delivery"]["status"], "pending");
    assert_eq!(retried["delivery"]["attempts"], 0);
    assert_eq!(retried["delivery"]["restarts"], 1);
    assert_eq!(retried["delivery"]["restarted_by"], OPERATOR);
    assert!(
        retried["delivery"].get("last_error").is_none(),
        "errors reset"
    );
    assert!(
        matches!(retried["event"].as_str(), Some("reopened" | "already_open")),
        "{retried}"
    );
    let restarted = w.stored_delivery(&sub, change).await;
    assert_eq!(restarted.attempt_log.len(), 2, "history kept");
    let item = w
        .pipeline
        .get(
            &keys::event_pk(&sub.account_id, &change.change_id),
            &keys::delivery_sk(&sub.subscription_id),
        )
        .await
        .unwrap();
    assert!(
        item.contains_key("due_at"),
        "back on the due index for the sweep"
    );
    assert!(!item.contains_key("list_key"), "no longer needs attention");

    // Dispatch is nudged by the status change: the receiver is called again, from attempt 1.
    w.pipeline.pump().await.unwrap();
    assert_eq!(w.receiver.count(), 3);
    let delivered = w.stored_delivery(&sub, change).await;
    assert_eq!(delivered.status, DeliveryStatus::Delivered);
    assert_eq!(delivered.attempts, 1);
    let attempts = w
        .api
        .get(
            &op_sub_path(&sub, &format!("/deliveries/{}/attempts", change.change_id)),
            OPERATOR_TOKEN,
        )
        .await;
    let runs: Vec<(u64, u64, String)> = attempts.ok()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["run"].as_u64().unwrap(),
                a["number"].as_u64().unwrap(),
                a["class"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        runs,
        [
            (1, 1, "transient".to_string()),
            (1, 2, "transient".to_string()),
            (2, 1, "success".to_string())
        ]
    );
    let s = w
        .pipeline
        .subscription(&sub.account_id, &sub.subscription_id)
        .await
        .unwrap();
    assert_eq!(s.consecutive_dead, 0, "a delivery ends the dead run");

    // The audit history says who, what, when and why.
    let audit = w
        .api
        .get(&op_sub_path(&sub, "/audit"), OPERATOR_TOKEN)
        .await;
    let entry = audit.ok()["data"][0].clone();
    assert_eq!(entry["action"], "retry_delivery");
    assert_eq!(entry["operator"], OPERATOR);
    assert_eq!(entry["reason"], "the receiver was down for maintenance");
    assert_eq!(entry["change_id"], change.change_id.as_str());
    assert_eq!(entry["details"]["from_status"], "dead");
    assert!(entry["at"].is_string());
    let account_audit = w
        .api
        .get(
            &format!("/operator/accounts/{}/audit", sub.account_id),
            OPERATOR_TOKEN,
        )
        .await;
    assert_eq!(account_audit.ok()["data"][0]["id"], entry["id"]);

    // A pending delivery is a conflict; so is a skipped_filter one, with the lifecycle's why.
    w.receiver.set_default(Reply::Status(503));
    let waiting = w.write_changes(&sub.account_id, &[w.pipeline.now()]).await;
    assert_eq!(
        w.delivery_status(&sub, &waiting[0]).await,
        DeliveryStatus::Retrying
    );
    w.update(
        &keys::event_pk(&sub.account_id, &waiting[0].change_id),
        &keys::delivery_sk(&sub.subscription_id),
        "SET #s = :p",
        &[(":p", shared::store::expr::s("pending"))],
    )
    .await;
    let pending = w
        .api
        .post(
            &op_sub_path(&sub, &format!("/deliveries/{}/retry", waiting[0].change_id)),
            OPERATOR_TOKEN,
            json!({"reason": "impatient"}),
        )
        .await;
    assert!(pending.problem(StatusCode::CONFLICT)["detail"]
        .as_str()
        .unwrap()
        .contains("already pending"));
    let filtered_sub = w
        .subscribe_through_api(
            &tenant,
            "webhook",
            json!({"filter": {"field": "record.price", "gt": 1000}}),
        )
        .await;
    let filtered = w.write_changes(&sub.account_id, &[w.pipeline.now()]).await;
    assert_eq!(
        w.delivery_status(&filtered_sub, &filtered[0]).await,
        DeliveryStatus::SkippedFilter
    );
    let skipped = w
        .api
        .post(
            &op_sub_path(
                &filtered_sub,
                &format!("/deliveries/{}/retry", filtered[0].change_id),
            ),
            OPERATOR_TOKEN,
            json!({"reason": "the filter changed"}),
        )
        .await;
    let detail = skipped.problem(StatusCode::CONFLICT)["detail"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(detail.contains("filtered out"), "{detail}");
    let missing = w
        .api
        .post(
            &op_sub_path(&sub, "/deliveries/NOPE/retry"),
            OPERATOR_TOKEN,
            json!({"reason": "x"}),
        )
        .await;
    missing.problem(StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn an_operator_retry_racing_a_worker_attempt_wins_and_the_stale_outcome_is_dropped() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    w.receiver
        .script([Reply::Status(503), Reply::Hang(Duration::from_millis(1500))]);
    let changes = w.write_changes(&sub.account_id, &[w.pipeline.now()]).await;
    let change = &changes[0];
    assert_eq!(
        w.delivery_status(&sub, change).await,
        DeliveryStatus::Retrying
    );
    w.pipeline.clock.advance(MINUTE + SECOND);
    let work = DeliveryWork {
        account_id: sub.account_id.as_str().parse().unwrap(),
        change_id: change.change_id.as_str().parse().unwrap(),
        subscription_id: sub.subscription_id.as_str().parse().unwrap(),
    };
    let path = op_sub_path(&sub, &format!("/deliveries/{}/retry", change.change_id));
    let operator = async {
        // Wait until the worker's second attempt is at the receiver (its lease is held).
        let started = Instant::now();
        while w.receiver.count() < 2 {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the worker never called"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let leased = w.stored_delivery(&sub, change).await;
        assert!(leased.lease_token.is_some());
        w.api
            .post(
                &path,
                OPERATOR_TOKEN,
                json!({"reason": "restart while it hangs"}),
            )
            .await
    };
    let (outcome, retried) = tokio::join!(w.pipeline.worker.process(&work), operator);
    assert_eq!(retried.ok()["previous_status"], "retrying");
    assert_eq!(
        outcome.unwrap(),
        WorkOutcome::Skipped("lease taken over before the outcome was saved"),
        "the worker's outcome write with a stale lease fails"
    );
    let d = w.stored_delivery(&sub, change).await;
    assert_eq!(d.status, DeliveryStatus::Pending, "no double status");
    assert_eq!(d.attempts, 0);
    assert_eq!(
        d.attempt_log.len(),
        1,
        "the dropped outcome is not recorded"
    );
    assert!(d.lease_token.is_none());

    w.pipeline.pump().await.unwrap();
    let d = w.stored_delivery(&sub, change).await;
    assert_eq!(d.status, DeliveryStatus::Delivered);
    assert_eq!(d.attempts, 1);
    assert_eq!(w.receiver.count(), 3);
}

// ------------------------------------------------------------------------------------ replay

#[tokio::test]
async fn replays_a_seven_day_window_and_refuses_an_eight_day_one() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let sub = w
        .subscribe_through_api(
            &tenant,
            "webhook",
            json!({"filter": {"field": "record.price", "lt": 100}}),
        )
        .await;
    let now = w.pipeline.now();
    let occurred = [
        now.minus(DAY),
        now.minus(3 * DAY),
        now.minus(6 * DAY + 12 * HOUR),
        now.minus(7 * DAY + 12 * HOUR),
        now.minus(9 * DAY),
    ];
    let changes = w.write_changes(&sub.account_id, &occurred).await;
    // One more in the window that the filter left out.
    let expensive = w
        .change(&sub.account_id)
        .at(now.minus(2 * DAY))
        .price(500.0)
        .await;
    w.pipeline.pump().await.unwrap();
    assert_eq!(
        w.delivery_status(&sub, &expensive).await,
        DeliveryStatus::SkippedFilter
    );
    assert_eq!(w.receiver.count(), 5);
    for c in &changes {
        assert_eq!(w.delivery_status(&sub, c).await, DeliveryStatus::Delivered);
    }

    let replays = op_sub_path(&sub, "/replays");
    let iso = |t: Timestamp| t.to_rfc3339();
    // Eight days is too long; reversed, future, unretained and malformed windows are refused.
    let eight = w
        .api
        .post(
            &replays,
            OPERATOR_TOKEN,
            json!({"from": iso(now.minus(8 * DAY)), "to": iso(now), "reason": "r"}),
        )
        .await;
    assert_eq!(eight.fields(), ["to"]);
    assert!(
        eight.json["detail"]
            .as_str()
            .unwrap()
            .contains("seven days"),
        "{}",
        eight.text
    );
    for (body, fields) in [
        (
            json!({"from": iso(now), "to": iso(now.minus(DAY)), "reason": "r"}),
            vec!["to"],
        ),
        (
            json!({"from": iso(now.minus(HOUR)), "to": iso(now.plus(DAY)), "reason": "r"}),
            vec!["to"],
        ),
        (
            json!({"from": iso(now.minus(40 * DAY)), "to": iso(now.minus(39 * DAY)), "reason": "r"}),
            vec!["from"],
        ),
        (
            json!({"from": "yesterday", "to": iso(now), "reason": "r"}),
            vec!["from"],
        ),
        (
            json!({"from": iso(now.minus(DAY)), "to": iso(now)}),
            vec!["reason"],
        ),
    ] {
        let r = w.api.post(&replays, OPERATOR_TOKEN, body.clone()).await;
        assert_eq!(r.fields(), fields, "{body}");
    }
    assert_eq!(w.receiver.count(), 5, "refused windows replay nothing");

    // Exactly seven days is accepted: the three delivered records in it go back to pending.
    let job = w
        .api.post(
            &replays,
            OPERATOR_TOKEN,
            json!({"from": iso(now.minus(7 * DAY)), "to": iso(now), "reason": "the adapter restored a backup"}),
        )
        .await;
    let job = job.accepted().clone();
    let job_id = job["id"].as_str().unwrap().to_owned();
    assert_eq!(
        w.api
            .get(
                &format!("/operator/accounts/{}/replays/{job_id}", sub.account_id),
                OPERATOR_TOKEN
            )
            .await
            .ok()["status"],
        "completed"
    );
    assert_eq!(job["status"], "completed");
    assert_eq!(job["in_progress"], false);
    assert_eq!(
        job["counts"],
        json!({"in_window": 4, "restarted": 3, "already_pending": 0, "skipped_filter": 1, "conflicts": 0})
    );
    for (i, c) in changes.iter().enumerate() {
        let want = if i < 3 {
            DeliveryStatus::Pending
        } else {
            DeliveryStatus::Delivered
        };
        assert_eq!(
            w.delivery_status(&sub, c).await,
            want,
            "change {i} at {}",
            occurred[i]
        );
    }
    assert_eq!(
        w.delivery_status(&sub, &expensive).await,
        DeliveryStatus::SkippedFilter,
        "never replayed"
    );

    // Dispatch picks the restarted ones up; the adapter gets them again.
    w.pipeline.pump().await.unwrap();
    assert_eq!(w.receiver.count(), 8);
    for c in &changes[..3] {
        let d = w.stored_delivery(&sub, c).await;
        assert_eq!(d.status, DeliveryStatus::Delivered);
        assert_eq!(d.restarts, 1);
        assert_eq!(
            d.replay_job.as_ref().map(|j| j.as_str()),
            Some(job_id.as_str())
        );
    }
    for c in &changes[3..] {
        assert_eq!(w.stored_delivery(&sub, c).await.restarts, 0);
    }

    // The job and its audit entry are listed.
    let jobs = w
        .api
        .get(
            &format!(
                "/operator/accounts/{}/replays?subscription_id={}",
                sub.account_id, sub.subscription_id
            ),
            OPERATOR_TOKEN,
        )
        .await;
    assert_eq!(jobs.ok()["data"][0]["id"], job_id.as_str());
    let audit = w
        .api
        .get(&op_sub_path(&sub, "/audit"), OPERATOR_TOKEN)
        .await;
    let entry = audit.ok()["data"][0].clone();
    assert_eq!(entry["action"], "replay_window");
    assert_eq!(entry["job_id"], job_id.as_str());
    assert_eq!(entry["reason"], "the adapter restored a backup");
    // Resuming a completed job is a conflict.
    let again = w
        .api
        .post(
            &format!(
                "/operator/accounts/{}/replays/{job_id}/resume",
                sub.account_id
            ),
            OPERATOR_TOKEN,
            json!({"reason": "again"}),
        )
        .await;
    again.problem(StatusCode::CONFLICT);
}

#[tokio::test]
async fn a_replay_cut_short_resumes_from_its_saved_position_without_restarting_anything_twice() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let now = w.pipeline.now();
    let occurred: Vec<Timestamp> = (1..=6).map(|h| now.minus(h * HOUR)).collect();
    let changes = w.write_changes(&sub.account_id, &occurred).await;
    assert_eq!(w.receiver.count(), 6);
    let ops = Ops::new(
        &w.pipeline.stack.clients.dynamo,
        &w.pipeline.stack.config.delivery_table,
        &w.pipeline.clock,
    );
    let job = create_job(
        &ops,
        ReplayRequest {
            account_id: &sub.account_id,
            subscription_id: &sub.subscription_id,
            from: now.minus(DAY),
            to: now,
            operator: OPERATOR,
            reason: "replay in small chunks",
        },
    )
    .await
    .unwrap();
    let small = |chunks: u32| Budget {
        chunk: 2,
        max_chunks: Some(chunks),
        deadline: Instant::now() + Duration::from_secs(60),
    };
    // One chunk, then the run stops (as a Lambda that times out would, but politely).
    let after_one = run_job(&ops, &sub.account_id, &job.job_id, small(1))
        .await
        .unwrap();
    assert_eq!(after_one.status, ReplayStatus::Running);
    assert_eq!(after_one.restarted, 2);
    assert_eq!(
        after_one.position.as_ref().map(|p| p.as_str()),
        Some(changes[1].change_id.as_str())
    );
    let status = w
        .api
        .get(
            &format!(
                "/operator/accounts/{}/replays/{}",
                sub.account_id, job.job_id
            ),
            OPERATOR_TOKEN,
        )
        .await;
    assert_eq!(status.ok()["status"], "running");
    assert_eq!(status.json["in_progress"], false, "stopped: resume it");

    // The next run dies midway: it restarted the next chunk's deliveries but never saved its
    // position, and left its lease behind.
    let run2 = run_job(&ops, &sub.account_id, &job.job_id, small(1))
        .await
        .unwrap();
    assert_eq!(run2.restarted, 4);
    let (pk, sk) = (job_pk(&sub.account_id), job_sk(&job.job_id));
    w.update(
        &pk,
        &sk,
        "SET #p = :p, restarted = :two, in_window = :two, lease_until = :l, lease_token = :t",
        &[
            (":p", shared::store::expr::s(changes[1].change_id.as_str())),
            (":two", shared::store::expr::n(2)),
            (
                ":l",
                shared::store::expr::n(w.pipeline.now().plus(30 * SECOND).millis()),
            ),
            (":t", shared::store::expr::s("dead-run")),
        ],
    )
    .await;

    // While the dead run's lease lasts, a resume is refused; after it, the job resumes.
    let resume = format!(
        "/operator/accounts/{}/replays/{}/resume",
        sub.account_id, job.job_id
    );
    let busy = w
        .api
        .post(&resume, OPERATOR_TOKEN, json!({"reason": "it stopped"}))
        .await;
    assert!(busy.problem(StatusCode::CONFLICT)["detail"]
        .as_str()
        .unwrap()
        .contains("being processed"));
    w.pipeline.clock.advance(31 * SECOND);
    let done = w
        .api
        .post(&resume, OPERATOR_TOKEN, json!({"reason": "it stopped"}))
        .await;
    let done = done.ok().clone();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["counts"]["restarted"], 6, "{done}");
    assert_eq!(done["counts"]["in_window"], 6);
    for c in &changes {
        assert_eq!(
            w.stored_delivery(&sub, c).await.restarts,
            1,
            "restarted exactly once"
        );
    }
    w.pipeline.pump().await.unwrap();
    assert_eq!(w.receiver.count(), 12, "each change pushed once more");
    let audit = w
        .api
        .get(&op_sub_path(&sub, "/audit"), OPERATOR_TOKEN)
        .await;
    let actions: Vec<&str> = audit.ok()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    // (After the subscription's creation, which is audited too.)
    assert_eq!(
        actions,
        ["resume_replay", "replay_window", "create_subscription"]
    );
}

// ------------------------------------------------------------------------------------ resume

#[tokio::test]
async fn resuming_a_paused_subscription_resets_its_dead_count_and_skipped_changes_stay_skipped() {
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
    assert!(w
        .pipeline
        .delivery(&sub.account_id, &skipped[0].change_id, &sub.subscription_id)
        .await
        .is_none());

    let path = op_sub_path(&sub, "/resume");
    let resumed = w
        .api
        .post(
            &path,
            OPERATOR_TOKEN,
            json!({"reason": "the receiver is fixed"}),
        )
        .await;
    let resumed = resumed.ok().clone();
    assert_eq!(resumed["subscription"]["status"], "active");
    assert_eq!(resumed["subscription"]["consecutive_dead"], 0);
    assert_eq!(resumed["dead_count_before"], 50);
    assert_eq!(resumed["subscription"]["resumed_by"], OPERATOR);
    assert!(resumed["subscription"].get("paused_at").is_none());
    let again = w
        .api
        .post(&path, OPERATOR_TOKEN, json!({"reason": "twice"}))
        .await;
    assert!(again.problem(StatusCode::CONFLICT)["detail"]
        .as_str()
        .unwrap()
        .contains("only a paused"));

    // The skipped change stays skipped, even through a replay of its window.
    w.pipeline.pump().await.unwrap();
    assert_eq!(w.receiver.count(), 0);
    let job = w
        .api.post(
            &op_sub_path(&sub, "/replays"),
            OPERATOR_TOKEN,
            json!({"from": w.pipeline.now().minus(HOUR).to_rfc3339(), "to": w.pipeline.now().to_rfc3339(), "reason": "catch up"}),
        )
        .await;
    assert_eq!(job.accepted()["counts"]["in_window"], 0);
    assert!(w
        .pipeline
        .delivery(&sub.account_id, &skipped[0].change_id, &sub.subscription_id)
        .await
        .is_none());
    // New changes are delivered again.
    let fresh = w.write_changes(&sub.account_id, &[w.pipeline.now()]).await;
    assert_eq!(
        w.delivery_status(&sub, &fresh[0]).await,
        DeliveryStatus::Delivered
    );
    let fetched = w.api.get(&op_sub_path(&sub, ""), OPERATOR_TOKEN).await;
    assert_eq!(fetched.ok()["status"], "active");
    let audit = w
        .api
        .get(&op_sub_path(&sub, "/audit"), OPERATOR_TOKEN)
        .await;
    let resume_entry = audit.ok()["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "resume_subscription")
        .cloned()
        .unwrap();
    assert_eq!(resume_entry["details"]["dead_count_before"], "50");
    assert_eq!(resume_entry["reason"], "the receiver is fixed");
}

// ----------------------------------------------------------------------------- cross-account

#[tokio::test]
async fn every_pull_and_operator_route_refuses_another_accounts_resources() {
    let w = World::new().await;
    let a = w.api.account("Tenant").await;
    let b = w.api.account("Tenant").await;
    let sub_a = w.subscribe_through_api(&a, "poll", json!({})).await;
    let other_integration_a = w.subscribe_through_api(&a, "poll", json!({})).await;
    let sub_b = w.subscribe_through_api(&b, "poll", json!({})).await;
    let changes = w
        .write_changes(&sub_a.account_id, &[w.pipeline.now()])
        .await;
    settle(&w);
    let job = w
        .api.post(
            &op_sub_path(&sub_a, "/replays"),
            OPERATOR_TOKEN,
            json!({"from": w.pipeline.now().minus(HOUR).to_rfc3339(), "to": w.pipeline.now().to_rfc3339(), "reason": "r"}),
        )
        .await;
    let job_id = job.accepted()["id"].as_str().unwrap().to_owned();
    let cursor = PullCursor {
        epoch: 0,
        read_at: w.pipeline.now(),
        change_id: Some(changes[0].change_id.clone()),
    }
    .encode();
    let bodies = |method: &Method, path: &str| -> Option<Value> {
        match (method.as_str(), path) {
            ("PUT", p) if p.ends_with("/cursor") => Some(json!({"cursor": cursor})),
            // A PUT replaces with its body (an empty allowlist); without one it is a 400.
            ("PUT", p) if p.ends_with("/notice-allowlist") => Some(json!({})),
            // B's own limits (its answer names B only).
            ("PUT", p) if p.ends_with("/limits") => Some(json!({"integrations": 60})),
            ("POST", p) if p.ends_with("/replays") => Some(json!({
                "from": w.pipeline.now().minus(HOUR).to_rfc3339(), "to": w.pipeline.now().to_rfc3339(), "reason": "r"})),
            // A change published for B (202).
            ("POST", p) if p.ends_with("/changes") => Some(json!({
                "record_type": "catalog_item", "record_id": "SKU-B", "operation": "updated", "record": {}})),
            ("POST", _) => Some(json!({"reason": "r"})),
            _ => None,
        }
    };

    // Every route of the route table this test covers; a new one must be added here.
    let table = shared::api::routes::routes(w.api.router()).unwrap();
    let ours: Vec<(Method, String)> = table
        .into_iter()
        .filter(|(_, p)| {
            p.starts_with("/v1/pull/")
                || p.starts_with("/operator/accounts/{account_id}/") && !p.ends_with("/tokens")
        })
        .collect();
    assert!(ours.len() >= 16, "{ours:?}");
    let mut checked = 0;
    for (method, template) in &ours {
        let expected_not_found = template.contains("{subscription_id}")
            || template.contains("{job_id}")
            || template.contains("{change_id}");
        if template.starts_with("/v1/pull/") {
            let path = template.replace("{subscription_id}", sub_a.subscription_id.as_str());
            if !expected_not_found {
                // The listing: B's adapter sees only B's subscriptions.
                let r = w
                    .api
                    .call(method.clone(), &path, Some(&sub_b.integration_token), None)
                    .await;
                let body = r.ok().to_string();
                assert!(!body.contains(sub_a.subscription_id.as_str()), "{body}");
                checked += 1;
                continue;
            }
            // Another account's adapter, and another integration of the same account: both get
            // the same 404 as a subscription that does not exist.
            let missing_path = template.replace("{subscription_id}", "01ABSENTABSENTABSENTABSENT");
            let missing = w
                .api
                .call(
                    method.clone(),
                    &missing_path,
                    Some(&sub_b.integration_token),
                    bodies(method, template),
                )
                .await;
            let missing_detail = missing.problem(StatusCode::NOT_FOUND)["detail"].clone();
            for token in [
                &sub_b.integration_token,
                &other_integration_a.integration_token,
            ] {
                let r = w
                    .api
                    .call(method.clone(), &path, Some(token), bodies(method, template))
                    .await;
                assert_eq!(
                    r.problem(StatusCode::NOT_FOUND)["detail"],
                    missing_detail,
                    "{method} {path}"
                );
            }
            // Account tokens are not adapters.
            let r = w
                .api
                .call(
                    method.clone(),
                    &path,
                    Some(&a.token),
                    bodies(method, template),
                )
                .await;
            r.problem(StatusCode::UNAUTHORIZED);
            checked += 1;
            continue;
        }
        // Operator routes: account B in the path with A's subscription, change and job.
        let path = template
            .replace("{account_id}", b.account_id.as_str())
            .replace("{subscription_id}", sub_a.subscription_id.as_str())
            .replace("{change_id}", changes[0].change_id.as_str())
            .replace("{job_id}", &job_id);
        let r = w
            .api
            .call(
                method.clone(),
                &path,
                Some(OPERATOR_TOKEN),
                bodies(method, template),
            )
            .await;
        if expected_not_found {
            r.problem(StatusCode::NOT_FOUND);
        } else {
            // Account-wide listings of B name nothing of A.
            let body = r.success().to_string();
            assert!(
                !body.contains(sub_a.subscription_id.as_str()),
                "{method} {path}: {body}"
            );
        }
        // And the route needs an operator.
        let r = w
            .api
            .call(
                method.clone(),
                &path,
                Some(&b.token),
                bodies(method, template),
            )
            .await;
        r.problem(StatusCode::UNAUTHORIZED);
        checked += 1;
    }
    assert_eq!(checked, ours.len());
    // Nothing of A moved.
    assert_eq!(
        w.delivery_status(&sub_a, &changes[0]).await,
        DeliveryStatus::Pending
    );
    let cursor_a = w
        .api
        .get(&pull_path(&sub_a, "cursor"), &sub_a.integration_token)
        .await;
    assert_eq!(cursor_a.ok()["acknowledged_change_id"], Value::Null);
}

// --------------------------------------------------------------------------------------- CLI
