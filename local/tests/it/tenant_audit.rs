//! What an account changes is audited, through the API on the emulator: integration creation,
//! webhook URL and target edits, secret rotation and deletion, integration token issue and
//! revocation, subscription creation, edits and deletion, each with the credential that acted
//! (who), the change (what, old and new) and the time, in the account's history or the
//! subscription's (the operator audit views, which the console's Integration history shows).

use axum::http::StatusCode;
use local::testkit::api::{ApiClient, OPERATOR, OPERATOR_TOKEN};
use local::testkit::World;
use serde_json::{json, Value};

/// The token id a token's text carries (`rhy_{kind}_{id}_{secret}`).
fn token_id(token: &str) -> String {
    token.split('_').nth(2).unwrap().to_owned()
}

async fn history(api: &ApiClient, path: &str) -> Vec<Value> {
    api.get(&format!("{path}?limit=100"), OPERATOR_TOKEN)
        .await
        .ok()["data"]
        .as_array()
        .unwrap()
        .clone()
}

/// The entries of `action`, newest first.
fn of(entries: &[Value], action: &str) -> Vec<Value> {
    entries
        .iter()
        .filter(|e| e["action"] == action)
        .cloned()
        .collect()
}

#[tokio::test]
async fn each_change_an_account_makes_is_audited_with_the_credential_that_made_it() {
    let w = World::new().await;
    let api = &w.api;
    let a = api.account("Audited").await;
    let account = format!("/operator/accounts/{}/audit", a.account_id);
    // A second account token, so the entries tell the two credentials apart.
    let second = api
        .post(
            &format!("/operator/accounts/{}/tokens", a.account_id),
            OPERATOR_TOKEN,
            json!({"reason": "a second administrator"}),
        )
        .await
        .created()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let (first_actor, second_actor) = (
        format!("token {}", token_id(&a.token)),
        format!("token {}", token_id(&second)),
    );

    // Create and edit a webhook integration (the URL's query, which may hold the endpoint's
    // own credentials, is not kept).
    let created = api
        .post(
            "/v1/integrations",
            &a.token,
            json!({"name": "CRM", "method": "webhook",
                   "webhook_url": "http://127.0.0.1:9/hook?key=hunter2",
                   "event_access_accepted": true}),
        )
        .await
        .created()
        .clone();
    let integration = created["id"].as_str().unwrap().to_owned();
    let first_pull_token = token_id(created["token"].as_str().unwrap());
    api.patch(
        &format!("/v1/integrations/{integration}"),
        &second,
        json!({"webhook_url": "http://127.0.0.1:9/new-hook", "name": "CRM v2"}),
    )
    .await
    .ok();
    api.patch(
        &format!("/v1/integrations/{integration}"),
        &a.token,
        json!({"rotate_signing_secret": true, "rotation_grace_seconds": 60}),
    )
    .await
    .ok();
    // A new integration token replacing the first.
    let issued = api
        .post(
            &format!("/v1/integrations/{integration}/tokens"),
            &second,
            json!({"revoke_existing": true}),
        )
        .await
        .created()
        .clone();
    let new_pull_token = issued["token_id"].as_str().unwrap().to_owned();

    let entries = history(api, &account).await;
    let create = &of(&entries, "create_integration")[0];
    assert_eq!(create["operator"], first_actor.as_str());
    assert_eq!(create["details"]["integration_id"], integration.as_str());
    assert_eq!(create["details"]["method"], "webhook");
    assert_eq!(create["details"]["webhook_url"], "http://127.0.0.1:9/hook");
    assert!(create["at"].as_str().is_some_and(|t| !t.is_empty()));
    let edits = of(&entries, "edit_integration");
    assert_eq!(edits.len(), 2);
    let (rotation, url_edit) = (&edits[0], &edits[1]);
    assert_eq!(url_edit["operator"], second_actor.as_str());
    assert_eq!(
        url_edit["details"]["webhook_url"],
        "http://127.0.0.1:9/hook -> http://127.0.0.1:9/new-hook"
    );
    assert_eq!(url_edit["details"]["name"], "CRM -> CRM v2");
    assert_eq!(rotation["operator"], first_actor.as_str());
    assert_eq!(rotation["details"]["rotate_signing_secret"], "true");
    assert_eq!(rotation["details"]["rotation_grace_seconds"], "60");
    assert!(!serde_json::to_string(&entries).unwrap().contains("hunter2"));
    let issue = &of(&entries, "issue_integration_token")[0];
    assert_eq!(issue["operator"], second_actor.as_str());
    assert_eq!(issue["details"]["token_id"], new_pull_token.as_str());
    assert_eq!(issue["details"]["revoke_existing"], "true");
    let revoked = of(&entries, "revoke_token");
    assert_eq!(revoked.len(), 1);
    assert_eq!(revoked[0]["operator"], second_actor.as_str());
    assert_eq!(revoked[0]["details"]["token_id"], first_pull_token.as_str());
    assert!(revoked[0]["reason"]
        .as_str()
        .unwrap()
        .contains(&new_pull_token));

    // Subscriptions: in the subscription's own history.
    let sub = api
        .post(
            "/v1/subscriptions",
            &a.token,
            json!({"integration_id": integration, "record_types": ["order"],
                   "fields": ["status", "total"]}),
        )
        .await
        .created()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    api.patch(
        &format!("/v1/subscriptions/{sub}"),
        &second,
        json!({"fields": ["status"], "filter": {"field": "event_code", "in": ["order.created"]}}),
    )
    .await
    .ok();
    // An edit of a subscription that is not the account's changes and records nothing.
    let other = api.account("Other").await;
    api.patch(
        &format!("/v1/subscriptions/{sub}"),
        &other.token,
        json!({"fields": ["total"]}),
    )
    .await
    .problem_of(StatusCode::NOT_FOUND, "not-found");
    let sub_history = history(
        api,
        &format!(
            "/operator/accounts/{}/subscriptions/{sub}/audit",
            a.account_id
        ),
    )
    .await;
    let created = &of(&sub_history, "create_subscription")[0];
    assert_eq!(created["operator"], first_actor.as_str());
    assert_eq!(created["details"]["fields"], "status,total");
    let edits = of(&sub_history, "edit_subscription");
    assert_eq!(edits.len(), 1, "{sub_history:?}");
    assert_eq!(edits[0]["operator"], second_actor.as_str());
    assert_eq!(edits[0]["details"]["fields"], "status,total -> status");
    assert!(edits[0]["details"]["filter"]
        .as_str()
        .unwrap()
        .starts_with("(none) -> "));

    // Deletions, and the revocation of the deleted integration's token.
    api.delete(&format!("/v1/subscriptions/{sub}"), &a.token)
        .await
        .expect(StatusCode::NO_CONTENT);
    api.delete(&format!("/v1/integrations/{integration}"), &second)
        .await
        .expect(StatusCode::NO_CONTENT);
    let entries = history(api, &account).await;
    let deleted = &of(&entries, "delete_integration")[0];
    assert_eq!(deleted["operator"], second_actor.as_str());
    assert_eq!(deleted["details"]["integration_id"], integration.as_str());
    let revoked = of(&entries, "revoke_token");
    assert_eq!(revoked.len(), 2);
    assert_eq!(revoked[0]["details"]["token_id"], new_pull_token.as_str());
    assert_eq!(revoked[0]["reason"], "the integration was deleted");
    // (A deleted subscription's history stays in the account's.)
    let deleted = &of(&entries, "delete_subscription")[0];
    assert_eq!(deleted["operator"], first_actor.as_str());
    assert_eq!(deleted["subscription_id"], sub.as_str());

    // The operator's own changes keep the operator as who: the second token's issue, and an
    // allowlist change.
    api.allow_recipients(
        a.account_id.as_str(),
        json!({"domains": ["acme.test"], "reason": "their team"}),
    )
    .await;
    let entries = history(api, &account).await;
    assert_eq!(of(&entries, "issue_account_token")[0]["operator"], OPERATOR);
    let allowlist = &of(&entries, "set_notice_allowlist")[0];
    assert_eq!(allowlist["operator"], OPERATOR);
    assert_eq!(allowlist["details"]["domains"], "1");
}
