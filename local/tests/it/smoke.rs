//! The deployed stack's smoke test (`scripts/smoke.sh`), run against the served local stack so it
//! cannot rot: the same script CI runs after each stage's deploy, here with its default loopback
//! receiver, against the API on loopback over this test's emulator stack with the pipeline pumped
//! in the background (as `make demo` serves it), so a test event sent after the API answered is
//! delivered too.

use local::pipeline::Pipeline;
use local::served::{HttpApi, ServedStack};
use local::testkit::api::{OPERATOR, OPERATOR_TOKEN};
use local::testkit::World;
use serde_json::json;
use shared::web::{ApiState, OperatorAuth};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

async fn served() -> ServedStack {
    let p = Arc::new(Pipeline::new().await);
    let state = ApiState::new(
        p.stack.clients.clone(),
        p.stack.config.clone(),
        Arc::new(p.clock.clone()),
        OperatorAuth::static_token(OPERATOR_TOKEN, OPERATOR),
    );
    ServedStack::serve(p, state)
        .await
        .expect("the served stack")
}

/// Runs `scripts/smoke.sh --api <the served API>` with `operator_token` while the stack's
/// pipeline is pumped; its output.
async fn smoke(stack: &ServedStack, operator_token: &str) -> Output {
    smoke_with(stack, operator_token, &[]).await
}

/// [`smoke`] with more arguments.
async fn smoke_with(stack: &ServedStack, operator_token: &str, more: &[&str]) -> Output {
    let mut command = Command::new(repo().join("scripts/smoke.sh"));
    command
        .args(["--api", &stack.url(""), "--wait", "20"])
        .args(more)
        .env("RHYTHM_OPERATOR_TOKEN", operator_token)
        .env_remove("RHYTHM_API_URL");
    let run = tokio::task::spawn_blocking(move || command.output());
    stack
        .pump_until(None, run)
        .await
        .expect("the smoke test's thread")
        .expect("scripts/smoke.sh runs")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test]
async fn smoke_script_passes_against_the_served_local_stack_and_cleans_up_after_itself() {
    let stack = served().await;
    let out = smoke(&stack, OPERATOR_TOKEN).await;
    let said = text(&out);
    assert!(out.status.success(), "smoke failed:\n{said}");
    assert!(said.contains("smoke: 7 steps passed"), "{said}");
    assert!(
        said.contains("signature verified with the signing secret"),
        "{said}"
    );

    // What the script reports, read back independently: the account it made is gone, and its
    // audit history holds its creation, the test event (delivered) and the cleanup's deletion.
    let account_id = created_account(&said);
    let api = HttpApi::new(stack.url(""), false);
    assert_account_deleted(&api, &account_id).await;
    let audit = api
        .get(
            &format!("/operator/accounts/{account_id}/audit?limit=100"),
            OPERATOR_TOKEN,
        )
        .await
        .expect("the account's audit");
    let entries = audit["data"].as_array().expect("audit entries");
    let action = |a: &str| entries.iter().find(|e| e["action"] == a);
    assert!(action("create_account").is_some(), "{audit}");
    let sent = action("send_test_event").expect("the test event's audit entry");
    assert!(sent["subscription_id"].is_string(), "{sent}");
    let deleted = action("delete_account").expect("the cleanup's deletion");
    assert_eq!(deleted["reason"], "smoke test cleanup", "{deleted}");
    stack.stop();
}

/// The account `account_id` reads as 404 and its audit history ends with its deletion.
async fn assert_account_deleted(api: &HttpApi, account_id: &str) {
    let account = api
        .get(&format!("/operator/accounts/{account_id}"), OPERATOR_TOKEN)
        .await;
    let refused = account.expect_err("the account is still there").to_string();
    assert!(refused.contains("answered 404"), "{refused}");
    let audit = api
        .get(
            &format!("/operator/accounts/{account_id}/audit?limit=100"),
            OPERATOR_TOKEN,
        )
        .await
        .expect("a deleted account's audit");
    assert_eq!(audit["data"][0]["action"], "delete_account", "{audit}");
}

fn created_account(said: &str) -> String {
    said.lines()
        .find_map(|l| l.split("operator created account ").nth(1))
        .expect("the account line")
        .trim()
        .to_owned()
}

#[tokio::test]
async fn smoke_script_deletes_its_account_also_when_a_step_fails() {
    let stack = served().await;
    // A receiver URL nothing listens on: the test event is never delivered.
    let out = smoke_with(
        &stack,
        OPERATOR_TOKEN,
        &["--receiver-url", "http://127.0.0.1:9/nobody"],
    )
    .await;
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("not ok - the test event was not delivered"),
        "{said}"
    );
    assert!(
        said.contains("account deleted, the deletion audited"),
        "{said}"
    );
    let api = HttpApi::new(stack.url(""), false);
    assert_account_deleted(&api, &created_account(&said)).await;
    stack.stop();
}

#[tokio::test]
async fn smoke_script_fails_with_a_wrong_operator_credential_and_says_why() {
    let stack = served().await;
    let out = smoke(&stack, "not-the-operator-token").await;
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("ok 1 - GET /health"), "{said}");
    assert!(
        said.contains("POST /operator/accounts: 401, expected 201"),
        "{said}"
    );
    assert!(said.contains("smoke: FAILED after 1 steps"), "{said}");
    stack.stop();
}

/// The smoke test's first step in AWS: `/health` is a route of the stack's HTTP API, without the
/// JWT authorizer, and answers through the function's stage handling.
#[tokio::test]
async fn health_is_an_unauthenticated_route_of_the_deployed_api_and_answers_on_the_stage_path() {
    let template: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(repo().join("template.yaml")).unwrap())
            .expect("template.yaml parses");
    let events = &template["Resources"]["ApiFunction"]["Properties"]["Events"];
    let health = events
        .as_mapping()
        .expect("the api function's events")
        .values()
        .find(|e| e["Properties"]["Path"].as_str() == Some("/health"))
        .expect("an event for /health");
    assert_eq!(health["Type"].as_str(), Some("HttpApi"));
    assert_eq!(health["Properties"]["Method"].as_str(), Some("GET"));
    assert!(health["Properties"]["Auth"].is_null(), "{health:?}");

    let w = World::new().await;
    let event = json!({
        "version": "2.0",
        "routeKey": "GET /health",
        "rawPath": "/prod/health",
        "rawQueryString": "",
        "headers": {},
        "requestContext": {
            "routeKey": "GET /health", "accountId": "123456789012", "stage": "prod",
            "requestId": "req-1", "apiId": "api-id",
            "domainName": "id.execute-api.us-east-1.amazonaws.com", "domainPrefix": "id",
            "time": "01/Dec/2026:10:00:00 +0000", "timeEpoch": 1_796_119_200_000_i64,
            "http": {"method": "GET", "path": "/prod/health", "protocol": "HTTP/1.1",
                     "sourceIp": "192.0.2.1", "userAgent": "agent"}
        },
        "isBase64Encoded": false
    });
    let answer = w.api.gateway_event(&event).await;
    assert_eq!(answer.ok(), &json!({"status": "ok"}));
}
