//! An operator deletes an account (`DELETE /operator/accounts/{account_id}`) against the
//! emulator: its tokens stop working, its integrations and subscriptions go (more than one page of
//! each), nothing is routed to it afterwards and what was already queued fails as the account
//! gone, its audit history stays and ends with the deletion, and other accounts are untouched.

use crate::console::Browser;
use axum::http::{Method, StatusCode};
use local::testkit::api::{ApiAccount, OPERATOR, OPERATOR_TOKEN};
use local::testkit::World;
use serde_json::{json, Value};
use shared::domain::integration_delivery::DeliveryStatus;
use shared::ids::AccountId;
use shared::operations::account::accounts::DELETION_PAGE;
use shared::store::{account, account_limits, keys, write};

fn account_path(account_id: &AccountId) -> String {
    format!("/operator/accounts/{account_id}")
}

async fn delete(w: &World, account_id: &AccountId, token: &str, body: Option<Value>) -> StatusCode {
    w.api
        .call(Method::DELETE, &account_path(account_id), Some(token), body)
        .await
        .status
}

/// The items of a partition of the delivery table.
async fn partition(w: &World, pk: &str) -> Vec<shared::store::Item> {
    w.pipeline
        .stack
        .clients
        .dynamo
        .query()
        .table_name(&w.pipeline.stack.config.delivery_table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", shared::store::expr::s(pk))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .items
        .unwrap_or_default()
}

/// Every account id on the `ACCOUNTS` listing.
async fn listed(w: &World) -> Vec<AccountId> {
    let (dynamo, table) = (
        &w.pipeline.stack.clients.dynamo,
        &w.pipeline.stack.config.delivery_table,
    );
    let (mut ids, mut start) = (Vec::new(), None);
    loop {
        let (page, next) = account::ids_page(dynamo, table, start).await.unwrap();
        ids.extend(page);
        match next {
            Some(n) => start = Some(n),
            None => return ids,
        }
    }
}

async fn audit(w: &World, account_id: &AccountId) -> Vec<Value> {
    w.api
        .get(
            &format!("{}/audit?limit=100", account_path(account_id)),
            OPERATOR_TOKEN,
        )
        .await
        .ok()["data"]
        .as_array()
        .unwrap()
        .clone()
}

async fn live(w: &World, tenant: &ApiAccount) -> bool {
    let status = w.api.get("/v1/whoami", &tenant.token).await.status;
    assert!(
        status == StatusCode::OK || status == StatusCode::UNAUTHORIZED,
        "{status}"
    );
    status == StatusCode::OK
}

#[tokio::test]
async fn deleting_an_account_revokes_its_tokens_deletes_its_integrations_and_subscriptions_and_keeps_its_audit_history(
) {
    let w = World::new().await;
    let tenant = w.api.account("Leaving").await;
    let other = w.api.account("Staying").await;
    w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let pull = w.subscribe_through_api(&tenant, "poll", json!({})).await;
    let others = w.subscribe_through_api(&other, "poll", json!({})).await;
    // More than a page of each beyond those two: the deletion pages through them.
    let extra = DELETION_PAGE as usize + 1;
    let base = w.integration(&tenant.account_id).poll().await;
    for _ in 0..extra - 1 {
        w.integration(&tenant.account_id).poll().await;
    }
    for _ in 0..extra {
        w.subscribe(&base).await;
    }
    let account_pk = keys::account_pk(&tenant.account_id);
    assert_eq!(partition(&w, &account_pk).await.len(), 1 + 2 * (2 + extra));
    let usage_pk = keys::account_limits_pk(&tenant.account_id);
    assert_eq!(
        partition(&w, &usage_pk).await.len(),
        1,
        "the account's counts"
    );
    assert!(live(&w, &tenant).await);
    w.api
        .get(
            &format!("/v1/pull/subscriptions/{}/changes", pull.subscription_id),
            &pull.integration_token,
        )
        .await
        .ok();

    // An account token (its own account's or another's) cannot delete an account.
    for token in [&tenant.token, &other.token] {
        let refused = delete(&w, &tenant.account_id, token, None).await;
        assert_eq!(refused, StatusCode::UNAUTHORIZED);
    }
    assert!(
        live(&w, &tenant).await,
        "a refused deletion changes nothing"
    );

    let status = delete(
        &w,
        &tenant.account_id,
        OPERATOR_TOKEN,
        Some(json!({"reason": "customer left"})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    // Its tokens are revoked: the account's and its integrations'.
    assert!(!live(&w, &tenant).await);
    w.api
        .get(
            &format!("/v1/pull/subscriptions/{}/changes", pull.subscription_id),
            &pull.integration_token,
        )
        .await
        .problem(StatusCode::UNAUTHORIZED);
    assert!(partition(&w, &keys::token_ref_pk(&tenant.account_id))
        .await
        .is_empty());
    // The account, its integrations and subscriptions are gone, and so are its counts and its
    // listing entry.
    assert!(partition(&w, &account_pk).await.is_empty());
    assert!(
        partition(&w, &usage_pk).await.is_empty(),
        "its counts go too"
    );
    w.api
        .get(&account_path(&tenant.account_id), OPERATOR_TOKEN)
        .await
        .problem(StatusCode::NOT_FOUND);
    let accounts = listed(&w).await;
    assert!(!accounts.contains(&tenant.account_id), "{accounts:?}");
    assert!(accounts.contains(&other.account_id), "{accounts:?}");

    // The audit history stays, and ends with the deletion: who, why, what went.
    let entries = audit(&w, &tenant.account_id).await;
    assert!(entries.iter().any(|e| e["action"] == "create_account"));
    let deletion = entries
        .iter()
        .find(|e| e["action"] == "delete_account")
        .expect("the deletion's audit entry");
    assert_eq!(deletion, &entries[0], "the newest entry");
    assert_eq!(deletion["operator"], OPERATOR);
    assert_eq!(deletion["reason"], "customer left");
    // Details are text: every subscription and integration, the account token and the two
    // integrations' tokens.
    let details = &deletion["details"];
    let total = (2 + extra).to_string();
    assert_eq!(
        details["subscriptions_deleted"],
        total.as_str(),
        "{deletion}"
    );
    assert_eq!(
        details["integrations_deleted"],
        total.as_str(),
        "{deletion}"
    );
    assert_eq!(details["tokens_revoked"], "3", "{deletion}");

    // A second deletion is a 404 and writes nothing more.
    w.api
        .call(
            Method::DELETE,
            &account_path(&tenant.account_id),
            Some(OPERATOR_TOKEN),
            None,
        )
        .await
        .problem(StatusCode::NOT_FOUND);
    assert_eq!(audit(&w, &tenant.account_id).await.len(), entries.len());
    // An account that never existed has no history to show.
    w.api
        .get(
            "/operator/accounts/01jnoaccount0000000000000/audit",
            OPERATOR_TOKEN,
        )
        .await
        .problem(StatusCode::NOT_FOUND);

    // The other account is untouched.
    assert!(live(&w, &other).await);
    w.api
        .get(&account_path(&other.account_id), OPERATOR_TOKEN)
        .await
        .ok();
    let subs = w.api.get("/v1/subscriptions", &other.token).await;
    assert_eq!(
        subs.ok()["data"][0]["id"],
        others.subscription_id.as_str(),
        "{}",
        subs.text
    );
    w.api
        .get(
            &format!("/v1/pull/subscriptions/{}/changes", others.subscription_id),
            &others.integration_token,
        )
        .await
        .ok();
}

#[tokio::test]
async fn after_an_account_is_deleted_a_queued_delivery_fails_as_the_account_gone_and_a_new_change_is_routed_nowhere(
) {
    let w = World::new().await;
    let tenant = w.api.account("Leaving").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    // A change ingested and its delivery queued, not yet attempted.
    let queued = w.change(&tenant.account_id).price(1.0).await;
    w.pipeline.ingest_pending().await.unwrap();
    w.pipeline.dispatch_pending().await.unwrap();
    assert_eq!(
        w.delivery_status(&sub, &queued).await,
        DeliveryStatus::Pending
    );

    let status = delete(&w, &tenant.account_id, OPERATOR_TOKEN, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // The worker's configuration cache has expired (as it does within its lease).
    w.pipeline.worker.forget_config(&tenant.account_id);
    w.pipeline.pump().await.unwrap();
    let failed = w.stored_delivery(&sub, &queued).await;
    assert_eq!(failed.status, DeliveryStatus::Failed);
    assert_eq!(failed.last_error.as_deref(), Some("the account is gone"));

    // A change written after the deletion makes no delivery at all.
    let later = w.change(&tenant.account_id).price(2.0).await;
    w.pipeline.pump().await.unwrap();
    assert!(w
        .pipeline
        .delivery(&tenant.account_id, &later.change_id, &sub.subscription_id)
        .await
        .is_none());
    assert_eq!(w.receiver.count(), 0, "nothing reached the endpoint");
}

/// A console page refused because the session's account was deleted.
fn refused_for_deletion(reply: &local::testkit::api::Reply) {
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.text);
    assert!(
        reply.text.contains("data-testid=\"session-refused\"")
            && reply.text.contains("its account was deleted"),
        "{}",
        reply.text
    );
}

/// The console form that creates a pull integration, posted by `session`.
async fn console_create(w: &World, session: &Browser) -> local::testkit::api::Reply {
    crate::console::post(
        w,
        Some(&session.cookie),
        "/console/acct/manage/integrations",
        &[
            ("csrf", &session.csrf),
            ("name", "after the deletion"),
            ("method", "poll"),
            ("event_access_accepted", "on"),
        ],
    )
    .await
}

#[tokio::test]
async fn deleting_an_account_ends_its_console_sessions_those_an_operators_link_opened_included() {
    use crate::console::{get, operator_link, post, sign_in_with_link, sign_in_with_token};
    let w = World::new().await;
    let tenant = w.api.account("Leaving").await;
    let pasted = sign_in_with_token(&w, &tenant.token).await;
    let for_admin = json!({"account_id": tenant.account_id});
    let by_operator = sign_in_with_link(&w, &operator_link(&w, for_admin.clone()).await).await;
    let unused = operator_link(&w, for_admin.clone()).await;
    for s in [&pasted, &by_operator] {
        let page = get(&w, Some(&s.cookie), "/console/acct").await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    }

    let status = delete(&w, &tenant.account_id, OPERATOR_TOKEN, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    // Both sessions end, the one the operator's link opened too (no token grounds it): no page,
    // and no form creates anything.
    for s in [&pasted, &by_operator] {
        refused_for_deletion(&get(&w, Some(&s.cookie), "/console/acct").await);
        refused_for_deletion(&console_create(&w, s).await);
    }
    // A link issued before the deletion opens no session, and none is issued after it.
    let token = unused.split_once("link=").unwrap().1;
    let signed = post(&w, None, "/console/login", &[("link", token)]).await;
    assert_eq!(signed.status, StatusCode::UNAUTHORIZED, "{}", signed.text);
    assert!(signed.header("set-cookie").is_none());
    assert!(
        signed.text.contains("its account was deleted"),
        "{}",
        signed.text
    );
    w.api
        .post("/operator/console-links", OPERATOR_TOKEN, for_admin)
        .await
        .problem(StatusCode::NOT_FOUND);
    // Nothing came back: no integration, no token, no usage item.
    let account_pk = keys::account_pk(&tenant.account_id);
    assert!(partition(&w, &account_pk).await.is_empty());
    assert!(partition(&w, &keys::token_ref_pk(&tenant.account_id))
        .await
        .is_empty());
    assert!(partition(&w, &keys::account_limits_pk(&tenant.account_id))
        .await
        .is_empty());
}

#[tokio::test]
async fn nothing_is_created_in_an_account_being_deleted_or_deleted_and_its_usage_item_stays_gone() {
    use crate::console::{get, sign_in_with_link};
    let w = World::new().await;
    let tenant = w.api.account("Leaving").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let listed = w.api.get("/v1/integrations", &tenant.token).await;
    let integration_id = listed.ok()["data"][0]["id"].as_str().unwrap().to_owned();
    let for_admin = json!({"account_id": tenant.account_id});
    let link = w
        .api
        .post("/operator/console-links", OPERATOR_TOKEN, for_admin.clone())
        .await;
    let admin = sign_in_with_link(&w, link.created()["url"].as_str().unwrap()).await;
    let (dynamo, table) = (
        &w.pipeline.stack.clients.dynamo,
        &w.pipeline.stack.config.delivery_table,
    );
    let account_id = &tenant.account_id;
    let count = || async move {
        let usage = account_limits::get(dynamo, table, account_id)
            .await
            .unwrap();
        usage.map(|u| (u.integrations, u.subscriptions, u.live_tokens))
    };
    let counted = count().await;
    assert!(counted.is_some());

    // A deletion under way (its first step done, the rest cut short): the account's token still
    // verifies, and every create is refused by its own write, as is every console session.
    let now = shared::clock::Clock::now(&w.pipeline.clock);
    let marked = account::begin_deletion(table, &tenant.account_id, now).unwrap();
    assert!(write::send(dynamo, marked).await.unwrap().applied());
    let gone = |r: &local::testkit::api::Reply| {
        let p = r.problem_of(StatusCode::NOT_FOUND, "not-found");
        assert!(p["detail"].as_str().unwrap().contains("account"), "{p}");
    };
    let token = &tenant.token;
    let integration = json!({"name": "late", "method": "poll", "event_access_accepted": true});
    gone(&w.api.post("/v1/integrations", token, integration).await);
    let subscription = json!({"integration_id": integration_id, "record_types": ["catalog_item"], "fields": ["sku"]});
    gone(&w.api.post("/v1/subscriptions", token, subscription).await);
    let tokens_path = format!("/v1/integrations/{integration_id}/tokens");
    gone(&w.api.post(&tokens_path, token, json!({})).await);
    gone(&w.api.post("/v1/publish-tokens", token, json!({})).await);
    let test_event = format!("/v1/subscriptions/{}/test-event", sub.subscription_id);
    gone(
        &w.api
            .call(Method::POST, &test_event, Some(token), None)
            .await,
    );
    let notice = json!({"recipients": ["ops@example.com"], "channels": ["email"],
                        "subject": "late", "body": "late", "idempotency_key": "k1"});
    gone(&w.api.post("/v1/notices", token, notice).await);
    let operator = |path: &str| format!("{}{path}", account_path(&tenant.account_id));
    for path in ["/tokens", "/publish-tokens"] {
        gone(&w.api.post(&operator(path), OPERATOR_TOKEN, json!({})).await);
    }
    let limits = json!({"integrations": 80, "reason": "late"});
    gone(
        &w.api
            .put(&operator("/limits"), OPERATOR_TOKEN, limits)
            .await,
    );
    let change = json!({"record_type": "catalog_item", "record_id": "SKU-1",
                        "operation": "updated", "record": {"sku": "SKU-1"}});
    gone(
        &w.api
            .post(&operator("/changes"), OPERATOR_TOKEN, change)
            .await,
    );
    gone(
        &w.api
            .post("/operator/console-links", OPERATOR_TOKEN, for_admin)
            .await,
    );
    refused_for_deletion(&get(&w, Some(&admin.cookie), "/console/acct").await);
    // The operation the console's form calls, as a request already past its session check.
    let state = w.api_state();
    let poll = shared::domain::integration_input::NewIntegration {
        name: "in flight".into(),
        event_access_accepted: true,
        target: shared::domain::integration_input::NewTarget::Poll,
        rate_limit_per_second: None,
    };
    let ops = state.account_ops();
    let in_flight = shared::operations::account::integrations::create_integration(
        &ops,
        &tenant.account_id,
        "x",
        poll,
    )
    .await;
    assert!(
        matches!(in_flight, Err(shared::operations::OpsError::AccountGone)),
        "{:?}",
        in_flight.err()
    );
    assert_eq!(count().await, counted, "nothing counted");

    // Asking again finishes the deletion; afterwards the usage item stays gone whatever is tried.
    assert_eq!(
        delete(&w, &tenant.account_id, OPERATOR_TOKEN, None).await,
        StatusCode::NO_CONTENT
    );
    let poll = shared::domain::integration_input::NewIntegration {
        name: "after".into(),
        event_access_accepted: true,
        target: shared::domain::integration_input::NewTarget::Poll,
        rate_limit_per_second: None,
    };
    let ops = state.account_ops();
    let after = shared::operations::account::integrations::create_integration(
        &ops,
        &tenant.account_id,
        "x",
        poll,
    )
    .await;
    assert!(
        matches!(after, Err(shared::operations::OpsError::AccountGone)),
        "{:?}",
        after.err()
    );
    assert!(
        shared::operations::account::limits::usage(&state.account_ops(), &tenant.account_id)
            .await
            .is_err()
    );
    assert!(partition(&w, &keys::account_limits_pk(&tenant.account_id))
        .await
        .is_empty());
    assert!(partition(&w, &keys::account_pk(&tenant.account_id))
        .await
        .is_empty());
}
