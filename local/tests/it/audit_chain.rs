//! Audit entries cannot be replaced unseen, against the emulator: every write of one is
//! conditional on its key (a second write of the same key is refused and the first stays), and
//! each history is a hash chain that `GET /operator/accounts/{account}/audit/verify` (the CLI's
//! `rhythm audit verify`) walks: an untouched history verifies, an entry overwritten directly in
//! the table (as a principal allowed to put items on the prefix could) is named at that entry,
//! and concurrent audited actions on one account all land, chained one after the other.

use futures::future::join_all;
use local::faults::{Fault, Matcher};
use local::testkit::api::{ApiAccount, OPERATOR_TOKEN};
use local::testkit::World;
use serde_json::{json, Value};
use shared::domain::time::Timestamp;
use shared::store::audit::{self, AuditAction, AuditRecord};
use shared::store::write::{self, Written};
use shared::store::{keys, read};

fn verify_path(account: &str) -> String {
    format!("/operator/accounts/{account}/audit/verify")
}

/// An integration created through the API by the account's administrator (an audited action).
async fn create_integration(w: &World, tenant: &ApiAccount, name: &str) -> Value {
    w.api
        .post(
            "/v1/integrations",
            &tenant.token,
            json!({"name": name, "method": "webhook", "event_access_accepted": true,
                   "webhook_url": w.receiver.url("/hooks/rhythm")}),
        )
        .await
        .created()
        .clone()
}

#[tokio::test]
async fn a_second_audit_write_of_the_same_key_is_refused_and_the_first_entry_stays() {
    let w = World::new().await;
    let (dynamo, table) = (
        &w.pipeline.stack.clients.dynamo,
        w.pipeline.stack.config.delivery_table.as_str(),
    );
    let account = local::testkit::id("acct_refused_twice");
    let first = AuditRecord::for_account(
        AuditAction::SetAccountLimits,
        &account,
        "ops",
        "the first",
        Timestamp(1_700_000_000_000),
    );
    let sent = write::send(dynamo, audit::create(table, &first).unwrap()).await;
    assert!(sent.unwrap().applied());
    // The same key (id and time) with other contents: refused, in a transaction or alone.
    let second = AuditRecord {
        reason: "the second".into(),
        ..first.clone()
    };
    let alone = write::send(dynamo, audit::create(table, &second).unwrap()).await;
    assert_eq!(alone.unwrap(), Written::Refused(None));
    let other = AuditRecord::for_account(
        AuditAction::SetAccountLimits,
        &account,
        "ops",
        "alongside",
        Timestamp(1_700_000_000_001),
    );
    let together = write::Write::all([
        audit::create(table, &other).unwrap(),
        audit::create(table, &second).unwrap(),
    ])
    .unwrap();
    assert_eq!(
        write::send(dynamo, together).await.unwrap(),
        Written::Refused(None)
    );
    let stored = read::get(
        dynamo,
        table,
        &keys::audit_pk(&account),
        &keys::audit_sk(first.at, &first.audit_id),
    )
    .await
    .unwrap()
    .expect("the first entry");
    assert_eq!(stored["reason"].as_s().unwrap(), "the first");
    // Nothing of the refused transaction landed: its other entry neither.
    let verdict = audit::verify(dynamo, table, &account, None).await.unwrap();
    assert_eq!((verdict.chained, verdict.broken), (1, None));

    // A lone entry meeting concurrent transactions on its head (as in AWS) still lands, chained:
    // a chained write never answers a conflict to its caller.
    let faults = &w.pipeline.stack.faults;
    faults.inject_matching(
        Matcher::operation("TransactWriteItems").on("CHAIN_HEAD"),
        Fault::TransactionConflict,
        2,
    );
    let sent = write::send(dynamo, audit::create(table, &other).unwrap()).await;
    assert!(sent.unwrap().applied());
    assert_eq!(faults.injected().len(), 2);
    let verdict = audit::verify(dynamo, table, &account, None).await.unwrap();
    assert_eq!((verdict.chained, verdict.broken), (2, None));
}

#[tokio::test]
async fn an_untouched_history_verifies_and_an_entry_replaced_in_the_table_is_named_by_the_verifier()
{
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    for name in ["Books", "Shop", "Mail"] {
        w.pipeline.clock.advance(std::time::Duration::from_secs(1));
        create_integration(&w, &tenant, name).await;
    }
    let account = tenant.account_id.as_str();
    let verified = w.api.get(&verify_path(account), OPERATOR_TOKEN).await;
    let v = verified.ok();
    assert_eq!(v["intact"], true, "{v}");
    assert_eq!(
        v["entries"], 4,
        "the account's creation and three integrations"
    );
    assert_eq!(v["head"]["seq"], 4);
    assert!(v["broken"].is_null());
    // The head printed now is an anchor for later runs; a malformed one is refused.
    let anchor = format!("4:{}", v["head"]["hash"].as_str().unwrap());
    let anchored = format!("{}?anchor={anchor}", verify_path(account));
    assert_eq!(
        w.api.get(&anchored, OPERATOR_TOKEN).await.ok()["intact"],
        true
    );
    let bad = format!("{}?anchor=4:xyz", verify_path(account));
    assert_eq!(w.api.get(&bad, OPERATOR_TOKEN).await.fields(), ["anchor"]);

    // An attacker with PutItem on the prefix rewrites the second entry (the first integration's
    // creation) in place: same key, another reason.
    let history = w
        .api
        .get(
            &format!("/operator/accounts/{account}/audit"),
            OPERATOR_TOKEN,
        )
        .await;
    let entries = history.ok()["data"].as_array().unwrap().clone();
    let target = &entries[entries.len() - 2];
    assert_eq!(target["action"], "create_integration");
    let (dynamo, table) = (
        &w.pipeline.stack.clients.dynamo,
        w.pipeline.stack.config.delivery_table.as_str(),
    );
    let at = Timestamp::parse_rfc3339(target["at"].as_str().unwrap()).unwrap();
    let (pk, sk) = (
        keys::audit_pk(&tenant.account_id),
        keys::audit_sk(at, &target["id"].as_str().unwrap().parse().unwrap()),
    );
    let mut item = read::get(dynamo, table, &pk, &sk).await.unwrap().unwrap();
    item.insert(
        "reason".into(),
        aws_sdk_dynamodb::types::AttributeValue::S("nothing to see".into()),
    );
    let replaced = write::send(dynamo, write::put(table, item).unwrap()).await;
    assert!(replaced.unwrap().applied());

    let verified = w.api.get(&verify_path(account), OPERATOR_TOKEN).await;
    let v = verified.ok();
    assert_eq!(v["intact"], false, "{v}");
    assert_eq!(v["broken"]["id"], target["id"]);
    assert_eq!(v["broken"]["seq"], 2);
    assert!(
        v["broken"]["reason"].as_str().unwrap().contains("hash"),
        "{v}"
    );
    // Other histories are untouched; one that never existed is a 404.
    let other = w.api.account("Other").await;
    assert_eq!(
        w.api
            .get(&verify_path(other.account_id.as_str()), OPERATOR_TOKEN)
            .await
            .ok()["intact"],
        true
    );
    w.api
        .get(&verify_path("acct_none"), OPERATOR_TOKEN)
        .await
        .problem(axum::http::StatusCode::NOT_FOUND);
    // Tenants cannot call it.
    w.api
        .get(&verify_path(account), &tenant.token)
        .await
        .problem(axum::http::StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn concurrent_audited_actions_on_one_account_all_land_and_chain_one_after_the_other() {
    let w = World::new().await;
    let tenant = w.api.account("Busy").await;
    let names: Vec<String> = (0..6).map(|i| format!("Integration {i}")).collect();
    // Every try of an audited write moves the head (CHAIN_HEAD) in its transaction.
    let tries =
        w.pipeline.stack.faults.count_matching(
            local::faults::Matcher::operation("TransactWriteItems").on("CHAIN_HEAD"),
        );
    let created = join_all(names.iter().map(|n| create_integration(&w, &tenant, n))).await;
    assert_eq!(created.len(), 6);
    let account = tenant.account_id.as_str();
    let history = w
        .api
        .get(
            &format!("/operator/accounts/{account}/audit?limit=50"),
            OPERATOR_TOKEN,
        )
        .await;
    let entries = history.ok()["data"].as_array().unwrap().clone();
    let integrations = entries
        .iter()
        .filter(|e| e["action"] == "create_integration")
        .count();
    assert_eq!(integrations, 6, "every action is in the history");
    assert!(
        tries.get() > 6,
        "the writers met (tries {}): some were linked again",
        tries.get()
    );
    let v = w.api.get(&verify_path(account), OPERATOR_TOKEN).await;
    let v = v.ok();
    assert_eq!(v["intact"], true, "{v}");
    assert_eq!(v["entries"], 7);
    assert_eq!(v["head"]["seq"], 7);
}
