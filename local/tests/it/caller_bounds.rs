//! One caller cannot take the API from the others: a made-up token is refused before any store
//! read (every issued token carries a check keyed by the deployment's token-check key, read from
//! the emulator's Secrets Manager as the api function reads it in AWS), and one account's
//! requests, from all of its credentials, are capped per second while other accounts are served.
//! DynamoDB requests are counted at the SDK boundary (the stack's request meter).

use super::console::{get, sign_in_with_token};
use axum::http::StatusCode;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use local::testkit::api::{ApiAccount, ApiClient, Reply, OPERATOR_TOKEN};
use local::testkit::World;
use rand::RngCore;
use serde_json::json;
use shared::ids::{new_id, TokenId};
use shared::operations::account::token_format::{self, TokenCheckKey, RANDOM_BYTES, SECRET_BYTES};
use shared::store::write;
use shared::web::auth::{sha256_hex, TokenKind, TokenRecord};
use std::time::Duration;

/// `n` random bytes in unpadded base64url.
fn random_secret(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Stores a token record (and its reference) as the API stores an issued token.
async fn store_token(w: &World, record: &TokenRecord) {
    for item in [record.item().unwrap(), record.reference_item().unwrap()] {
        let put = write::put(&w.pipeline.stack.config.delivery_table, item).unwrap();
        write::send(&w.pipeline.stack.clients.dynamo, put)
            .await
            .expect("write the token");
    }
}

/// Requests the stack's clients made of `service` since the meter's last reset.
fn requests_to(w: &World, service: &str) -> u64 {
    w.pipeline.stack.meter.total(service, None)
}

#[track_caller]
fn assert_refused_as_invalid(r: &Reply, what: &str) {
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{what}: {}", r.text);
    r.problem_of(StatusCode::UNAUTHORIZED, "unauthorized");
    assert!(r.header("www-authenticate").is_some(), "{what}");
}

#[tokio::test]
async fn forged_well_formed_tokens_are_refused_without_a_dynamodb_request() {
    let w = World::new().await;
    let a = w.api.account("Real").await;
    // A genuine token is served (and the API has read its token-check key).
    w.api.get("/v1/whoami", &a.token).await.ok();
    let real_id = a.token.split('_').nth(2).unwrap().to_owned();

    let mut forged = Vec::new();
    for kind in ["acct", "intg", "pub"] {
        // Random ids with random secrets, of the format with the check and of the one before.
        forged.push(format!(
            "rhy_{kind}_{}_{}",
            new_id(),
            random_secret(SECRET_BYTES)
        ));
        forged.push(format!(
            "rhy_{kind}_{}_{}",
            new_id(),
            random_secret(RANDOM_BYTES)
        ));
    }
    // The real token's id with a wrong secret (either length), or as another kind.
    forged.push(format!(
        "rhy_acct_{real_id}_{}",
        random_secret(SECRET_BYTES)
    ));
    forged.push(format!(
        "rhy_acct_{real_id}_{}",
        random_secret(RANDOM_BYTES)
    ));
    forged.push(a.token.replacen("rhy_acct_", "rhy_pub_", 1));
    // The real token with one character of its secret changed.
    let mut altered = a.token.clone().into_bytes();
    let last = altered.len() - 1;
    altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
    forged.push(String::from_utf8(altered).unwrap());

    w.pipeline.stack.meter.reset();
    for token in &forged {
        let r = w.api.get("/v1/whoami", token).await;
        assert_refused_as_invalid(
            &r,
            token
                .split('_')
                .take(3)
                .collect::<Vec<_>>()
                .join("_")
                .as_str(),
        );
    }
    assert_eq!(
        w.dynamo_requests(),
        [],
        "a forged token costs the store no request"
    );
    assert_eq!(
        requests_to(&w, "SecretsManager"),
        0,
        "the key is read once per container"
    );
    // The genuine token still works, through the same API.
    assert_eq!(
        w.api.get("/v1/whoami", &a.token).await.ok()["kind"],
        "account"
    );
}

#[tokio::test]
async fn a_token_minted_under_another_key_or_before_the_check_is_refused_without_a_read() {
    let w = World::new().await;
    let a = w.api.account("Keyed").await;
    let now = w.pipeline.now();
    // Minted under a key the deployment does not hold, and stored as if the API had issued it:
    // its id and hash are in the table, its check is not this deployment's.
    let (other, record) = token_format::issue_token(
        &TokenCheckKey::random(),
        TokenKind::Acct,
        &a.account_id,
        None,
        now,
    );
    store_token(&w, &record).await;
    // A token as issued before tokens carried the check (32 random bytes), stored the same way.
    let secret = random_secret(RANDOM_BYTES);
    let old = TokenRecord::new(
        TokenId::new(),
        TokenKind::Acct,
        a.account_id.clone(),
        None,
        sha256_hex(&secret),
        now,
    );
    store_token(&w, &old).await;
    let old = format!("rhy_acct_{}_{secret}", old.token_id);
    w.api.get("/v1/whoami", &a.token).await.ok();

    w.pipeline.stack.meter.reset();
    assert_refused_as_invalid(&w.api.get("/v1/whoami", other.expose()).await, "other key");
    assert_refused_as_invalid(&w.api.get("/v1/whoami", &old).await, "issued before");
    assert_eq!(w.dynamo_requests(), []);
    // A token the test world mints with the deployment's key (read from the emulator's Secrets
    // Manager) is served.
    let minted = w.account_token(&a.account_id).await;
    assert_eq!(
        w.api.get("/v1/whoami", &minted).await.ok()["kind"],
        "account"
    );
}

#[tokio::test]
async fn genuine_tokens_of_every_kind_carry_the_check_and_are_served() {
    let w = World::new().await;
    let a = w.api.account("Every kind").await;
    let integration = w
        .api
        .post(
            "/v1/integrations",
            &a.token,
            json!({"name": "Poller", "method": "poll", "event_access_accepted": true}),
        )
        .await;
    let intg = integration.created()["token"].as_str().unwrap().to_owned();
    let publish = w
        .api
        .post("/v1/publish-tokens", &a.token, json!({"reason": "backend"}))
        .await;
    let publish = publish.created()["token"].as_str().unwrap().to_owned();
    let kinds = [
        (&a.token, "acct", "account"),
        (&intg, "intg", "integration"),
        (&publish, "pub", "publisher"),
    ];
    for (token, kind, who) in kinds {
        let parsed = shared::web::auth::parse_token(token).unwrap();
        assert_eq!(parsed.kind.as_str(), kind);
        assert_eq!(
            URL_SAFE_NO_PAD.decode(parsed.secret).unwrap().len(),
            SECRET_BYTES,
            "{kind}: random bytes and their check"
        );
        assert_eq!(w.api.get("/v1/whoami", token).await.ok()["kind"], who);
    }
}

/// The world's API with `per_second` as the deployment's request rate of every account.
fn api_at_rate(w: &World, per_second: u32) -> ApiClient {
    let mut state = w.api_state();
    state.config.account_limits.requests_per_second = per_second;
    ApiClient::new(state)
}

#[track_caller]
fn assert_rate_limited(r: &Reply) {
    let p = r.problem_of(StatusCode::TOO_MANY_REQUESTS, "rate-limited");
    assert!(p["detail"].as_str().unwrap().contains("requests"), "{p}");
    assert_eq!(r.header("retry-after"), Some("1"), "{}", r.text);
}

/// `n` requests of `token` that must be served.
async fn served(api: &ApiClient, token: &str, n: usize) {
    for i in 0..n {
        let r = api.get("/v1/whoami", token).await;
        assert_eq!(r.status, StatusCode::OK, "request {i}: {}", r.text);
    }
}

#[tokio::test]
async fn an_account_over_its_rate_is_refused_with_retry_after_while_another_is_served() {
    let w = World::new().await;
    let api = api_at_rate(&w, 3);
    let (a, b) = (api.account("Noisy").await, api.account("Quiet").await);
    // The clock stands still: every request below falls in one second. One of the account's
    // three is the integration's creation, and its integration token shares the account's rate.
    let integration = api
        .post(
            "/v1/integrations",
            &a.token,
            json!({"name": "Poller", "method": "poll", "event_access_accepted": true}),
        )
        .await;
    let intg = integration.created()["token"].as_str().unwrap().to_owned();
    served(&api, &a.token, 1).await;
    served(&api, &intg, 1).await;
    assert_rate_limited(&api.get("/v1/whoami", &a.token).await);
    assert_rate_limited(&api.get("/v1/whoami", &intg).await);
    assert_rate_limited(&api.get("/v1/integrations", &a.token).await);
    // Another account is served in the same second, and so are the operators.
    served(&api, &b.token, 3).await;
    let limits = format!("/operator/accounts/{}/limits", a.account_id);
    api.get(&limits, OPERATOR_TOKEN).await.ok();
    // The next second, the account is served again.
    w.pipeline.clock.advance(Duration::from_secs(1));
    served(&api, &a.token, 3).await;
    assert_rate_limited(&api.get("/v1/whoami", &intg).await);
}

#[tokio::test]
async fn an_operators_own_rate_for_one_account_changes_its_bound_and_is_audited() {
    let w = World::new().await;
    let api = api_at_rate(&w, 3);
    let (a, b) = (api.account("Raised").await, api.account("Default").await);
    let limits = format!("/operator/accounts/{}/limits", a.account_id);
    let set = |v: serde_json::Value| {
        api.put(
            &limits,
            OPERATOR_TOKEN,
            json!({"requests_per_second": v, "reason": "a big tenant"}),
        )
    };
    let view = api.get(&limits, OPERATOR_TOKEN).await;
    let rate = &view.ok()["requests_per_second"];
    assert_eq!(
        (rate["limit"].as_u64(), rate["default"].as_u64()),
        (Some(3), Some(3))
    );
    assert!(rate["own"].is_null(), "{rate}");
    served(&api, &a.token, 3).await;
    assert_rate_limited(&api.get("/v1/whoami", &a.token).await);

    let raised = set(json!(5)).await;
    let rate = &raised.ok()["requests_per_second"];
    assert_eq!(
        (rate["limit"].as_u64(), rate["own"].as_u64()),
        (Some(5), Some(5))
    );
    // Within the same second: the account's count (three served) now has room for two more.
    served(&api, &a.token, 2).await;
    assert_rate_limited(&api.get("/v1/whoami", &a.token).await);
    served(&api, &b.token, 3).await;
    assert_rate_limited(&api.get("/v1/whoami", &b.token).await);
    let audit = api
        .get(
            &format!("/operator/accounts/{}/audit", a.account_id),
            OPERATOR_TOKEN,
        )
        .await;
    let entry = audit.ok()["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "set_account_limits")
        .cloned()
        .expect("the change is audited");
    assert_eq!(
        entry["details"]["requests_per_second"], "default -> 5",
        "{entry}"
    );

    // Lowered to one a second, then back to the deployment's default.
    set(json!(1)).await.ok();
    w.pipeline.clock.advance(Duration::from_secs(1));
    served(&api, &a.token, 1).await;
    assert_rate_limited(&api.get("/v1/whoami", &a.token).await);
    set(serde_json::Value::Null).await.ok();
    w.pipeline.clock.advance(Duration::from_secs(1));
    served(&api, &a.token, 3).await;
    assert_rate_limited(&api.get("/v1/whoami", &a.token).await);
    // Not a rate: refused naming the field.
    let refused = set(json!(0)).await;
    refused.problem_of(StatusCode::UNPROCESSABLE_ENTITY, "validation");
    assert_eq!(refused.fields(), ["requests_per_second"]);
}

#[tokio::test]
async fn an_administrators_console_session_counts_against_the_accounts_rate() {
    let mut w = World::new().await;
    w.api = api_at_rate(&w, 4);
    let a: ApiAccount = w.api.account("Console").await;
    // Signing in opens two pages (the console's start and the account's overview).
    let admin = sign_in_with_token(&w, &a.token).await;
    assert_eq!(
        get(&w, Some(&admin.cookie), "/console/acct").await.status,
        StatusCode::OK
    );
    served(&w.api, &a.token, 1).await;
    let refused = get(&w, Some(&admin.cookie), "/console/acct").await;
    assert_rate_limited(&refused);
    w.pipeline.clock.advance(Duration::from_secs(1));
    assert_eq!(
        get(&w, Some(&admin.cookie), "/console/acct").await.status,
        StatusCode::OK
    );
}
