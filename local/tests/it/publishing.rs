//! Publishing changes through the API, end to end: `POST /v1/changes` writes into the changes
//! table, and the same stream → ingest → dispatch → worker path delivers them to a receiver on
//! loopback. Bad changes of a batch get their own problem and the others are delivered; a repeat
//! (by change id or `Idempotency-Key`) is a no-op; a publish token publishes for its own account
//! and does nothing else; a throttled write fails its own change only.

use axum::http::{Method, StatusCode};
use local::faults::{Fault, Matcher};
use local::testkit::api::{ApiAccount, OPERATOR, OPERATOR_TOKEN};
use local::testkit::World;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// A publish token of the tenant's account (issued by its administrator).
async fn publish_token(w: &World, tenant: &ApiAccount) -> String {
    let issued = w
        .api
        .post(
            "/v1/publish-tokens",
            &tenant.token,
            json!({"reason": "the shop's backend"}),
        )
        .await;
    let issued = issued.created();
    assert_eq!(issued["kind"], "pub");
    issued["token"].as_str().unwrap().to_owned()
}

fn item(sku: &str, price: f64) -> Value {
    json!({
        "record_type": "catalog_item",
        "record_id": sku,
        "operation": "updated",
        "changed_fields": ["price"],
        "record": {"sku": sku, "name": "Cup", "price": price, "cost": 1.0}
    })
}

/// The SKUs of the deliveries the receiver got, sorted (deliveries arrive in any order).
fn delivered_skus(w: &World) -> Vec<String> {
    let mut skus: Vec<String> = w
        .receiver
        .received()
        .iter()
        .map(|r| {
            r.json()["data"]["sku"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    skus.sort();
    skus
}

#[tokio::test]
async fn a_published_change_is_delivered_through_the_stream_like_the_applications_own() {
    let w = World::new().await;
    let tenant = w.api.account("Shop").await;
    w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let token = publish_token(&w, &tenant).await;
    let r = w.api.post("/v1/changes", &token, item("SKU-9", 12.5)).await;
    let answer = r.accepted();
    let change_id = answer["changes"][0]["change_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(answer["changes"][0]["result"], "published");
    w.pipeline.pump().await.unwrap();
    let got = w.receiver.received();
    assert_eq!(got.len(), 1);
    let body = got[0].json();
    assert_eq!(body["change_id"], change_id.as_str());
    assert_eq!(body["record_type"], "catalog_item");
    assert_eq!(body["type"], "catalog_item.updated");
    // Projected like any change: the cost is not a subscribed field.
    assert_eq!(
        body["data"],
        json!({"sku": "SKU-9", "name": "Cup", "price": 12.5})
    );
}

/// The trace ids of the `traceparent`s the receiver got, by the SKU delivered.
fn delivered_traces(w: &World) -> BTreeMap<String, String> {
    w.receiver
        .received()
        .iter()
        .map(|r| {
            let traceparent = r.header("traceparent").unwrap();
            let sku = r.json()["data"]["sku"].as_str().unwrap().to_owned();
            (sku, traceparent.split('-').nth(1).unwrap().to_owned())
        })
        .collect()
}

#[tokio::test]
async fn a_published_change_carries_the_trace_of_its_request_or_its_own_to_the_receiver() {
    let w = World::new().await;
    let tenant = w.api.account("Shop").await;
    w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let token = publish_token(&w, &tenant).await;
    let w3c = "4bf92f3577b34da6a3ce929d0e0e4736";
    w.api
        .post("/v1/changes", &token, item("SKU-1", 1.0))
        .header("traceparent", &format!("00-{w3c}-00f067aa0ba902b7-01"))
        .await
        .accepted();
    // A batch in an X-Ray trace: its changes take it, unless one names its own; a malformed
    // `trace_id` of a change is that change's problem.
    let mut own = item("SKU-2", 2.0);
    own["trace_id"] = json!("1-5759e988-bd862e3fe1be46a994272793");
    let mut bad = item("SKU-3", 3.0);
    bad["trace_id"] = json!("1-0-0");
    let r = w
        .api
        .post(
            "/v1/changes",
            &token,
            json!({"changes": [own, bad, item("SKU-4", 4.0)]}),
        )
        .header(
            "X-Amzn-Trace-Id",
            "Root=1-67891233-abcdef012345678912345678;Parent=53995c3f42cd8ad8;Sampled=1",
        )
        .await;
    let results = r.accepted()["changes"].as_array().unwrap().clone();
    assert_eq!(results[1]["problem"]["errors"][0]["field"], "trace_id");
    assert_eq!(results[2]["result"], "published");
    // A malformed header is ignored (the change id's trace), as W3C trace context asks.
    let plain = w
        .api
        .post("/v1/changes", &token, item("SKU-5", 5.0))
        .header("traceparent", "00-not-a-trace-01")
        .await;
    let plain_id = plain.accepted()["changes"][0]["change_id"]
        .as_str()
        .unwrap()
        .to_ascii_uppercase();
    w.pipeline.pump().await.unwrap();
    let ulid = ulid::Ulid::from_string(&plain_id).unwrap();
    assert_eq!(
        delivered_traces(&w),
        BTreeMap::from([
            ("SKU-1".to_owned(), w3c.to_owned()),
            (
                "SKU-2".to_owned(),
                "5759e988bd862e3fe1be46a994272793".to_owned()
            ),
            (
                "SKU-4".to_owned(),
                "67891233abcdef012345678912345678".to_owned()
            ),
            ("SKU-5".to_owned(), format!("{:032x}", ulid.0)),
        ])
    );
}

#[tokio::test]
async fn a_batch_with_bad_changes_gets_a_problem_for_each_and_the_good_ones_are_delivered_once() {
    let w = World::new().await;
    let tenant = w.api.account("Shop").await;
    w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let token = publish_token(&w, &tenant).await;
    let mut unknown = item("SKU-2", 2.0);
    unknown["record_type"] = json!("catalog_itme");
    let mut no_id = item("SKU-3", 3.0);
    no_id.as_object_mut().unwrap().remove("record_id");
    let mut large = item("SKU-4", 4.0);
    large["record"]["name"] = json!("x".repeat(70 * 1024));
    let given = "01JD5ZQ3M4N5P6Q7R8S9T0V1W2";
    let mut with_id = item("SKU-5", 5.0);
    with_id["change_id"] = json!(given);
    let batch = json!({"changes": [item("SKU-1", 1.0), unknown, no_id, large, with_id]});
    let r = w.api.post("/v1/changes", &token, batch.clone()).await;
    let results = r.accepted()["changes"].as_array().unwrap().clone();
    assert_eq!(results.len(), 5);
    assert_eq!(results[0]["result"], "published");
    assert_eq!(results[1]["problem"]["errors"][0]["field"], "record_type");
    assert!(results[1]["problem"]["errors"][0]["message"]
        .as_str()
        .unwrap()
        .contains("catalog_itme"));
    assert_eq!(results[2]["problem"]["errors"][0]["field"], "record_id");
    assert_eq!(results[3]["problem"]["status"], 413);
    assert_eq!(results[4]["change_id"], given);
    for bad in &results[1..4] {
        assert!(bad.get("change_id").is_none(), "{bad}");
        assert_eq!(
            bad["problem"]["type"].as_str().unwrap().split('/').count(),
            5
        );
    }
    w.pipeline.pump().await.unwrap();
    assert_eq!(delivered_skus(&w), ["SKU-1", "SKU-5"]);

    // The same change id again is a no-op: answered with its id, not delivered twice.
    let again = w
        .api
        .post(
            "/v1/changes",
            &token,
            json!({"changes": [batch["changes"][4]]}),
        )
        .await;
    assert_eq!(again.accepted()["changes"][0]["result"], "repeated");
    assert_eq!(again.accepted()["changes"][0]["change_id"], given);
    // A single bad change is the problem itself.
    let mut bad = item("SKU-6", 6.0);
    bad["operation"] = json!("renamed");
    let r = w.api.post("/v1/changes", &token, bad).await;
    assert_eq!(r.fields(), ["operation"]);
    // More than a hundred changes, or a body past 256 KiB, is refused whole.
    let many: Vec<Value> = (0..101).map(|i| item(&format!("S{i}"), 1.0)).collect();
    let r = w
        .api
        .post("/v1/changes", &token, json!({"changes": many}))
        .await;
    assert_eq!(r.fields(), ["changes"]);
    let huge = json!({"changes": [item("SKU-7", 1.0)], "padding": "x".repeat(300 * 1024)});
    w.api
        .post("/v1/changes", &token, huge)
        .await
        .problem(StatusCode::PAYLOAD_TOO_LARGE);
    w.pipeline.pump().await.unwrap();
    assert_eq!(delivered_skus(&w), ["SKU-1", "SKU-5"]);
}

#[tokio::test]
async fn a_repeat_with_the_same_idempotency_key_answers_the_first_change_id_and_delivers_once() {
    let w = World::new().await;
    let tenant = w.api.account("Shop").await;
    w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let token = publish_token(&w, &tenant).await;
    let send = |price: f64| {
        w.api
            .post("/v1/changes", &token, item("SKU-1", price))
            .header("Idempotency-Key", "order-7-paid")
    };
    let first = send(1.0).await;
    let first_id = first.accepted()["changes"][0]["change_id"].clone();
    assert_eq!(first.accepted()["changes"][0]["result"], "published");
    let repeat = send(1.0).await;
    assert_eq!(repeat.accepted()["changes"][0]["change_id"], first_id);
    assert_eq!(repeat.accepted()["changes"][0]["result"], "repeated");
    // Another key is another change.
    let other = w
        .api
        .post("/v1/changes", &token, item("SKU-1", 2.0))
        .header("Idempotency-Key", "order-7-shipped")
        .await;
    assert_ne!(other.accepted()["changes"][0]["change_id"], first_id);
    // A key with a batch is refused: a batch's changes carry their own ids.
    let r = w
        .api
        .post(
            "/v1/changes",
            &token,
            json!({"changes": [item("SKU-2", 1.0)]}),
        )
        .header("Idempotency-Key", "batch-1")
        .await;
    assert_eq!(r.fields(), ["changes"]);
    w.pipeline.pump().await.unwrap();
    assert_eq!(w.receiver.count(), 2);
}

#[tokio::test]
async fn a_publish_token_publishes_for_its_own_account_only_and_calls_no_other_route() {
    let w = World::new().await;
    let (shop, other) = (w.api.account("Shop").await, w.api.account("Other").await);
    w.subscribe_through_api(&other, "webhook", json!({})).await;
    let token = publish_token(&w, &shop).await;
    // Naming another account is forbidden, and nothing reaches that account's subscribers.
    let mut change = item("SKU-1", 1.0);
    change["account_id"] = json!(other.account_id.as_str());
    w.api
        .post("/v1/changes", &token, change.clone())
        .await
        .problem(StatusCode::FORBIDDEN);
    // In a batch, that change alone is refused (and the batch naming another account whole).
    let r = w
        .api
        .post("/v1/changes", &token, json!({"changes": [change.clone()]}))
        .await;
    assert_eq!(r.accepted()["changes"][0]["problem"]["status"], 403);
    let mut mine = item("SKU-0", 1.0);
    mine["account_id"] = json!(shop.account_id.as_str());
    let r = w
        .api
        .post(
            "/v1/changes",
            &token,
            json!({"account_id": other.account_id.as_str(), "changes": [mine.clone()]}),
        )
        .await;
    r.problem(StatusCode::FORBIDDEN);
    let r = w
        .api
        .post("/v1/changes", &token, json!({"changes": [mine]}))
        .await;
    assert_eq!(r.accepted()["changes"][0]["result"], "published");
    // It says what it is, and reads the catalog it publishes against.
    let who = w.api.get("/v1/whoami", &token).await;
    assert_eq!(who.ok()["kind"], "publisher");
    assert_eq!(who.ok()["account_id"], shop.account_id.as_str());
    assert!(w.api.get("/v1/event-types/catalog_item", &token).await.ok()["schema"].is_object());
    // No management, adapter or operator route takes it.
    for (method, path) in [
        (Method::GET, "/v1/subscriptions".to_string()),
        (Method::GET, "/v1/integrations".to_string()),
        (Method::GET, "/v1/audit".to_string()),
        (Method::POST, "/v1/publish-tokens".to_string()),
        (Method::GET, "/v1/pull/subscriptions/x/changes".to_string()),
        (Method::GET, "/operator/accounts".to_string()),
    ] {
        let r = w.api.call(method.clone(), &path, Some(&token), None).await;
        assert_eq!(
            r.status,
            StatusCode::UNAUTHORIZED,
            "{method} {path}: {}",
            r.text
        );
    }
    // An account token cannot publish (publishing is the owning application's credential).
    let r = w
        .api
        .post("/v1/changes", &other.token, item("SKU-1", 1.0))
        .await;
    assert!(r.problem(StatusCode::UNAUTHORIZED)["detail"]
        .as_str()
        .unwrap()
        .contains("publish token"));
    // An operator publishes for the account it names, through its own door.
    let path = format!("/operator/accounts/{}/changes", other.account_id);
    let r = w.api.post(&path, OPERATOR_TOKEN, item("SKU-2", 2.0)).await;
    assert_eq!(r.accepted()["changes"][0]["result"], "published");
    w.api
        .post(
            "/operator/accounts/nope/changes",
            OPERATOR_TOKEN,
            item("SKU-2", 2.0),
        )
        .await
        .problem(StatusCode::NOT_FOUND);
    // The tokens' issuance is audited in the account's history.
    let history = w.api.get("/v1/audit", &shop.token).await;
    assert!(history.ok()["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["action"] == "issue_publish_token"));
    w.pipeline.pump().await.unwrap();
    assert_eq!(delivered_skus(&w), ["SKU-2"]);
}

#[tokio::test]
async fn a_throttled_write_fails_its_own_change_and_the_rest_of_the_batch_is_delivered() {
    let w = World::new().await;
    let tenant = w.api.account("Shop").await;
    w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let token = publish_token(&w, &tenant).await;
    // Every one of the SDK's tries of that one change's put is throttled.
    w.pipeline.stack.faults.inject_matching(
        Matcher::operation("PutItem").on("SKU-THROTTLED"),
        Fault::Throttle,
        3,
    );
    let batch =
        json!({"changes": [item("SKU-1", 1.0), item("SKU-THROTTLED", 2.0), item("SKU-3", 3.0)]});
    let r = w.api.post("/v1/changes", &token, batch).await;
    let results = r.accepted()["changes"].as_array().unwrap().clone();
    assert_eq!(w.pipeline.stack.faults.injected().len(), 3);
    assert_eq!(results[1]["problem"]["status"], 503);
    assert_eq!(results[0]["result"], "published");
    assert_eq!(results[2]["result"], "published");
    w.pipeline.pump().await.unwrap();
    assert_eq!(delivered_skus(&w), ["SKU-1", "SKU-3"]);
    // Published again, it goes through.
    let again = w
        .api
        .post("/v1/changes", &token, item("SKU-THROTTLED", 2.0))
        .await;
    assert_eq!(again.accepted()["changes"][0]["result"], "published");
    w.pipeline.pump().await.unwrap();
    assert_eq!(w.receiver.count(), 3);
}

#[tokio::test]
async fn published_change_ids_are_upper_case_ulids_like_the_feeds_so_they_sort_in_time_order() {
    let w = World::new().await;
    let tenant = w.api.account("Shop").await;
    w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let token = publish_token(&w, &tenant).await;
    let minted = w.api.post("/v1/changes", &token, item("SKU-1", 1.0)).await;
    let minted = minted.accepted()["changes"][0]["change_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        !minted.bytes().any(|b| b.is_ascii_lowercase()),
        "a minted change id is in upper case: {minted}"
    );
    // A change the application's own feed mints a moment later (an upper-case ULID) sorts after
    // it, as the pull cursor and the stored keys need.
    tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    let later = w.change(&tenant.account_id).await;
    assert!(
        later.change_id.as_str() > minted.as_str(),
        "{} sorts before {minted}",
        later.change_id
    );

    // A given id in lower case is kept in upper case; a repeat in either case is the same change.
    let given = "01jd5zq3m4n5p6q7r8s9t0v1w2";
    let mut with_id = item("SKU-2", 2.0);
    with_id["change_id"] = json!(given);
    let first = w.api.post("/v1/changes", &token, with_id.clone()).await;
    assert_eq!(
        first.accepted()["changes"][0]["change_id"],
        given.to_ascii_uppercase()
    );
    with_id["change_id"] = json!(given.to_ascii_uppercase());
    let again = w.api.post("/v1/changes", &token, with_id).await;
    assert_eq!(again.accepted()["changes"][0]["result"], "repeated");
    w.pipeline.pump().await.unwrap();
    // The feed's own change is SKU-1 too.
    assert_eq!(delivered_skus(&w), ["SKU-1", "SKU-1", "SKU-2"]);
}

/// The stored item of a published change (the changes table, a consistent read).
async fn change_item(w: &World, account_id: &str, change_id: &str) -> shared::store::Item {
    w.pipeline
        .stack
        .clients
        .dynamo
        .get_item()
        .table_name(&w.pipeline.stack.config.changes_table)
        .key("account_id", shared::store::expr::s(account_id))
        .key("change_id", shared::store::expr::s(change_id))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .expect("the change item")
}

#[tokio::test]
async fn each_published_change_records_its_publisher_and_an_operators_publish_is_audited() {
    let w = World::new().await;
    let tenant = w.api.account("Shop").await;
    w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let token = publish_token(&w, &tenant).await;
    let token_id = token.split('_').nth(2).unwrap().to_owned();
    let by_token = w.api.post("/v1/changes", &token, item("SKU-1", 1.0)).await;
    let by_token = by_token.accepted()["changes"][0]["change_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/operator/accounts/{}/changes", tenant.account_id);
    let batch =
        json!({"changes": [item("SKU-2", 2.0), item("SKU-3", 3.0), {"record_type": "nope"}]});
    let by_operator = w.api.post(&path, OPERATOR_TOKEN, batch).await;
    let by_operator: Vec<String> = by_operator.accepted()["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["change_id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(by_operator.len(), 2);

    let account = tenant.account_id.to_string();
    let publisher = |item: &shared::store::Item| item["published_by"].as_s().unwrap().clone();
    let stored = change_item(&w, &account, &by_token).await;
    assert_eq!(publisher(&stored), format!("token {token_id}"));
    for id in &by_operator {
        let stored = change_item(&w, &account, id).await;
        assert_eq!(publisher(&stored), format!("operator {OPERATOR}"));
    }

    // The operator's publish is in the account's audit, the operator as its actor; the token's
    // is not an audited action (its publisher is on each change).
    let audit = w
        .api
        .get(
            &format!("/operator/accounts/{account}/audit?limit=50"),
            OPERATOR_TOKEN,
        )
        .await;
    let entries: Vec<Value> = audit.ok()["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "publish_changes")
        .cloned()
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];
    assert_eq!(entry["operator"], OPERATOR);
    assert_eq!(entry["details"]["changes"], "3");
    assert_eq!(entry["details"]["published"], "2");
    assert_eq!(entry["details"]["refused"], "1");
    assert_eq!(entry["details"]["change_ids"], by_operator.join(","));

    // The deliveries are as before: the publisher is not part of the payload.
    w.pipeline.pump().await.unwrap();
    assert_eq!(delivered_skus(&w), ["SKU-1", "SKU-2", "SKU-3"]);
    assert!(w
        .receiver
        .received()
        .iter()
        .all(|r| !String::from_utf8_lossy(&r.body).contains("published_by")));
}
