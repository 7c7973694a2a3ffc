//! Each account's caps on integrations, subscriptions and live tokens, through the API on the
//! emulator: a create past a cap is `409 limit-reached` naming the limit and its value, deleting
//! or revoking makes room again, concurrent creates at the cap never overshoot (the count is a
//! conditional counter in each create's own transaction), an operator sets one account's own
//! limits (audited) and the other accounts keep the deployment's.

use axum::http::StatusCode;
use futures::future::join_all;
use local::testkit::api::{ApiAccount, ApiClient, OPERATOR_TOKEN};
use local::testkit::World;
use serde_json::{json, Value};
use shared::config::AccountLimits;
use shared::store::account_limits;
use std::future::IntoFuture;

/// The API of the world with these default caps.
fn api_with(w: &World, integrations: u32, subscriptions: u32, live_tokens: u32) -> ApiClient {
    let mut state = w.api_state();
    state.config.account_limits = AccountLimits {
        integrations,
        subscriptions,
        live_tokens,
        ..state.config.account_limits
    };
    ApiClient::new(state)
}

fn poll_integration(name: &str) -> Value {
    json!({"name": name, "method": "poll", "event_access_accepted": true})
}

async fn integration(api: &ApiClient, a: &ApiAccount, name: &str) -> String {
    api.post("/v1/integrations", &a.token, poll_integration(name))
        .await
        .created()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn subscription_body(integration_id: &str) -> Value {
    json!({"integration_id": integration_id, "record_types": ["order"], "fields": ["status"]})
}

/// Asserts the reply is the refusal of `limit` at `value`, and gives its detail.
#[track_caller]
fn refused_at(reply: &local::testkit::api::Reply, limit: &str, value: u32) -> String {
    let p = reply.problem_of(StatusCode::CONFLICT, "limit-reached");
    assert_eq!(p["limit"], limit, "{p}");
    assert_eq!(p["limit_value"], value, "{p}");
    p["detail"].as_str().unwrap().to_owned()
}

async fn usage(w: &World, a: &ApiAccount) -> account_limits::Usage {
    account_limits::get(
        &w.pipeline.stack.clients.dynamo,
        &w.pipeline.stack.config.delivery_table,
        &a.account_id,
    )
    .await
    .unwrap()
    .expect("the account is counted")
}

#[tokio::test]
async fn creating_past_each_cap_is_refused_naming_the_limit_until_one_is_deleted_or_revoked() {
    let w = World::new().await;
    let api = api_with(&w, 2, 2, 50);
    let a = api.account("Capped").await;

    // Integrations: two, then the third is refused; deleting one makes room.
    let first = integration(&api, &a, "one").await;
    integration(&api, &a, "two").await;
    let third = api
        .post("/v1/integrations", &a.token, poll_integration("three"))
        .await;
    let detail = refused_at(&third, "integrations", 2);
    assert!(detail.contains("limit of 2 integrations"), "{detail}");
    let listed = api.get("/v1/integrations", &a.token).await;
    assert_eq!(
        listed.ok()["data"].as_array().unwrap().len(),
        2,
        "nothing was created"
    );
    api.delete(&format!("/v1/integrations/{first}"), &a.token)
        .await
        .expect(StatusCode::NO_CONTENT);
    let third = integration(&api, &a, "three").await;

    // Subscriptions: the same.
    let s1 = api
        .post("/v1/subscriptions", &a.token, subscription_body(&third))
        .await
        .created()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    api.post("/v1/subscriptions", &a.token, subscription_body(&third))
        .await
        .created();
    let past = api
        .post("/v1/subscriptions", &a.token, subscription_body(&third))
        .await;
    refused_at(&past, "subscriptions", 2);
    api.delete(&format!("/v1/subscriptions/{s1}"), &a.token)
        .await
        .expect(StatusCode::NO_CONTENT);
    api.post("/v1/subscriptions", &a.token, subscription_body(&third))
        .await
        .created();
    let counted = usage(&w, &a).await;
    assert_eq!((counted.integrations, counted.subscriptions), (2, 2));

    // Live tokens: the account token and one per integration count; revoked ones do not.
    let api = api_with(&w, 50, 50, 3);
    let b = api.account("Few tokens").await;
    let i = integration(&api, &b, "puller").await; // tokens: account 1 + integration 1
    let tokens = format!("/v1/integrations/{i}/tokens");
    api.post(&tokens, &b.token, json!({})).await.created(); // 3
    refused_at(
        &api.post(&tokens, &b.token, json!({})).await,
        "live_tokens",
        3,
    );
    // An integration needs a token too: refused for the token limit.
    refused_at(
        &api.post("/v1/integrations", &b.token, poll_integration("x"))
            .await,
        "live_tokens",
        3,
    );
    // An operator's account token as well.
    refused_at(
        &api.post(
            &format!("/operator/accounts/{}/tokens", b.account_id),
            OPERATOR_TOKEN,
            json!({}),
        )
        .await,
        "live_tokens",
        3,
    );
    assert_eq!(usage(&w, &b).await.live_tokens, 3);
    // Deleting the integration revokes its two tokens: room for two again.
    api.delete(&format!("/v1/integrations/{i}"), &b.token)
        .await
        .expect(StatusCode::NO_CONTENT);
    assert_eq!(usage(&w, &b).await.live_tokens, 1);
    let j = integration(&api, &b, "again").await;
    // Rotation with revoke_existing at the cap: the new token is counted, the revoked one given
    // back (3 → refused would be wrong only past the cap: 2 live now, so it passes).
    let rotated = api
        .post(
            &format!("/v1/integrations/{j}/tokens"),
            &b.token,
            json!({"revoke_existing": true}),
        )
        .await;
    assert_eq!(rotated.created()["revoked"], 1);
    assert_eq!(usage(&w, &b).await.live_tokens, 2);
}

#[tokio::test]
async fn concurrent_creates_at_the_cap_never_overshoot_it() {
    let w = World::new().await;
    let api = api_with(&w, 5, 4, 500);
    let a = api.account("Racing").await;
    integration(&api, &a, "already").await;

    // Twelve creates at once for the four integrations left.
    let creates = (0..12).map(|n| {
        api.post(
            "/v1/integrations",
            &a.token,
            poll_integration(&format!("racer {n}")),
        )
        .into_future()
    });
    let replies = join_all(creates).await;
    let created = replies
        .iter()
        .filter(|r| r.status == StatusCode::CREATED)
        .count();
    assert_eq!(created, 4, "exactly the room left");
    for r in replies.iter().filter(|r| r.status != StatusCode::CREATED) {
        refused_at(r, "integrations", 5);
    }
    let listed = api.get("/v1/integrations?limit=100", &a.token).await;
    assert_eq!(listed.ok()["data"].as_array().unwrap().len(), 5);
    let counted = usage(&w, &a).await;
    assert_eq!(counted.integrations, 5);
    assert_eq!(
        counted.live_tokens,
        1 + 5,
        "each integration's token, counted exactly"
    );

    // And subscriptions: ten at once for a cap of four.
    let target = listed.json["data"][0]["id"].as_str().unwrap().to_owned();
    let creates = (0..10).map(|_| {
        api.post("/v1/subscriptions", &a.token, subscription_body(&target))
            .into_future()
    });
    let replies = join_all(creates).await;
    let created = replies
        .iter()
        .filter(|r| r.status == StatusCode::CREATED)
        .count();
    assert_eq!(created, 4);
    let listed = api.get("/v1/subscriptions?limit=100", &a.token).await;
    assert_eq!(listed.ok()["data"].as_array().unwrap().len(), 4);
    assert_eq!(usage(&w, &a).await.subscriptions, 4);
}

#[tokio::test]
async fn an_operator_sets_one_accounts_own_limits_audited_and_other_accounts_keep_the_default() {
    let w = World::new().await;
    let api = api_with(&w, 1, 200, 50);
    let raised = api.account("Big customer").await;
    let other = api.account("Everyone else").await;
    integration(&api, &raised, "first").await;
    integration(&api, &other, "first").await;
    let limits = format!("/operator/accounts/{}/limits", raised.account_id);

    let before = api.get(&limits, OPERATOR_TOKEN).await;
    assert_eq!(
        before.ok()["integrations"],
        json!({"used": 1, "limit": 1, "default": 1})
    );
    assert_eq!(before.json["live_tokens"]["used"], 2);

    let set = api
        .put(
            &limits,
            OPERATOR_TOKEN,
            json!({"integrations": 3, "reason": "contract tier 2"}),
        )
        .await;
    assert_eq!(
        set.ok()["integrations"],
        json!({"used": 1, "limit": 3, "default": 1, "own": 3})
    );
    assert_eq!(set.json["subscriptions"]["limit"], 200, "left as it was");
    integration(&api, &raised, "second").await;
    integration(&api, &raised, "third").await;
    refused_at(
        &api.post(
            "/v1/integrations",
            &raised.token,
            poll_integration("fourth"),
        )
        .await,
        "integrations",
        3,
    );
    // The other account is unaffected.
    refused_at(
        &api.post("/v1/integrations", &other.token, poll_integration("second"))
            .await,
        "integrations",
        1,
    );
    let other_limits = api
        .get(
            &format!("/operator/accounts/{}/limits", other.account_id),
            OPERATOR_TOKEN,
        )
        .await;
    assert!(other_limits.ok()["integrations"].get("own").is_none());

    // Audited: who, what (old and new), why.
    let history = api
        .get(
            &format!("/operator/accounts/{}/audit", raised.account_id),
            OPERATOR_TOKEN,
        )
        .await;
    let entry = history.ok()["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "set_account_limits")
        .expect("the change is in the account's history")
        .clone();
    assert_eq!(entry["operator"], local::testkit::api::OPERATOR);
    assert_eq!(entry["reason"], "contract tier 2");
    assert_eq!(entry["details"]["integrations"], "default -> 3");

    // `null` puts the default back; lowering below the count refuses only new items.
    let reset = api
        .put(&limits, OPERATOR_TOKEN, json!({"integrations": null}))
        .await;
    assert_eq!(reset.ok()["integrations"]["limit"], 1);
    assert_eq!(reset.json["integrations"]["used"], 3);
    refused_at(
        &api.post("/v1/integrations", &raised.token, poll_integration("fifth"))
            .await,
        "integrations",
        1,
    );
    assert_eq!(
        api.get("/v1/integrations", &raised.token).await.ok()["data"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    // Bad input, and callers that are not operators.
    let bad = api
        .put(&limits, OPERATOR_TOKEN, json!({"integrations": -1}))
        .await;
    assert_eq!(bad.fields(), ["integrations"]);
    assert_eq!(
        api.put(&limits, OPERATOR_TOKEN, json!({"reason": "nothing"}))
            .await
            .fields(),
        ["integrations"]
    );
    assert_eq!(
        api.put(&limits, OPERATOR_TOKEN, json!({"subscriptions": 100001}))
            .await
            .fields(),
        ["subscriptions"]
    );
    api.put(
        "/operator/accounts/01jzzzzzzzzzzzzzzzzzzzzzzz/limits",
        OPERATOR_TOKEN,
        json!({"integrations": 2}),
    )
    .await
    .problem_of(StatusCode::NOT_FOUND, "not-found");
    api.put(&limits, &raised.token, json!({"integrations": 100}))
        .await
        .problem(StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn an_account_whose_items_predate_counting_is_counted_from_them_first() {
    let w = World::new().await;
    let api = api_with(&w, 3, 200, 50);
    // An account, its token and two integrations stored before counting began (not through
    // the API: no usage item yet).
    let account = w.account().await;
    let a = ApiAccount {
        token: w.account_token(&account.account_id).await,
        account_id: account.account_id.clone(),
    };
    for name in ["legacy 1", "legacy 2"] {
        w.integration(&a.account_id).poll().named(name).await;
    }
    let store = &w.pipeline.stack;
    let before = account_limits::get(
        &store.clients.dynamo,
        &store.config.delivery_table,
        &a.account_id,
    )
    .await
    .unwrap();
    assert!(before.is_none());
    integration(&api, &a, "new").await;
    refused_at(
        &api.post(
            "/v1/integrations",
            &a.token,
            poll_integration("one too many"),
        )
        .await,
        "integrations",
        3,
    );
    let counted = usage(&w, &a).await;
    assert_eq!(counted.integrations, 3);
    assert_eq!(
        counted.live_tokens, 2,
        "the stored account token and the new integration's"
    );
}
