//! The management API against the emulator: operator accounts, integrations, subscriptions, token
//! authentication and rotation, account scoping, and problem+json for every failure.

use crate::signing_secrets::verifies;
use axum::http::{header, Method, StatusCode};
use local::receiver::Reply;
use local::testkit::api::{ApiAccount, ApiClient, OPERATOR_TOKEN, PROBLEM_JSON};
use local::testkit::World;
use serde_json::{json, Value};
use shared::store::keys;

/// A webhook integration on a loopback URL; returns its creation response.
async fn webhook(api: &ApiClient, token: &str) -> Value {
    api.post(
        "/v1/integrations",
        token,
        json!({"name": "CRM", "method": "webhook",
               "webhook_url": "http://127.0.0.1:9/hook", "event_access_accepted": true}),
    )
    .await
    .created()
    .clone()
}

async fn subscription(api: &ApiClient, token: &str, integration_id: &str) -> Value {
    api.post(
        "/v1/subscriptions",
        token,
        json!({"integration_id": integration_id, "record_types": ["order"],
               "fields": ["status", "total"]}),
    )
    .await
    .created()
    .clone()
}

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn operators_create_accounts_that_manage_integrations_and_subscriptions() {
    let w = World::new().await;
    let api = &w.api;
    let health = api.call(Method::GET, "/health", None, None).await;
    assert_eq!(health.status, StatusCode::OK);

    let created = api
        .post(
            "/operator/accounts",
            OPERATOR_TOKEN,
            json!({"name": "  Acme  ", "admin_emails": ["a@acme.test", "A@acme.test", "b@acme.test"]}),
        )
        .await;
    let body = created.created().clone();
    let account_id = body["account"]["id"].as_str().unwrap().to_owned();
    let token = body["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("rhy_acct_"));
    assert_eq!(body["account"]["name"], "Acme");
    assert_eq!(
        body["account"]["admin_emails"],
        json!(["a@acme.test", "b@acme.test"])
    );
    assert_eq!(
        created.headers[header::LOCATION],
        format!("/operator/accounts/{account_id}").as_str()
    );
    let fetched = api
        .get(&format!("/operator/accounts/{account_id}"), OPERATOR_TOKEN)
        .await;
    assert_eq!(fetched.ok()["name"], "Acme");
    assert!(!fetched.text.contains(&token));
    let who = api.get("/v1/whoami", &token).await;
    assert_eq!(who.ok()["account_id"], account_id.as_str());
    assert_eq!(who.json["kind"], "account");

    // One integration of each method.
    let webhook = webhook(api, &token).await;
    assert_eq!(webhook["method"], "webhook");
    assert!(webhook["signing_secret"]
        .as_str()
        .unwrap()
        .starts_with("whsec_"));
    assert!(webhook["token"].as_str().unwrap().starts_with("rhy_intg_"));
    let given_secret = shared::domain::signing::SigningSecret::from_bytes(&[9u8; 32])
        .unwrap()
        .expose_whsec();
    let with_secret = api
        .post(
            "/v1/integrations",
            &token,
            json!({"name": "ERP", "method": "webhook", "webhook_url": "http://127.0.0.1:9/erp",
                   "signing_secret": given_secret, "event_access_accepted": false}),
        )
        .await;
    assert_eq!(
        with_secret.created()["signing_secret"],
        given_secret.as_str()
    );
    let internal = api
        .post(
            "/v1/integrations",
            &token,
            json!({"name": "Snapshots", "method": "internal", "handler": "record_snapshot",
                   "event_access_accepted": true}),
        )
        .await;
    let internal = internal.created().clone();
    assert_eq!(internal["handler"], "record_snapshot");
    assert!(internal.get("signing_secret").is_none());
    let poll = api
        .post(
            "/v1/integrations",
            &token,
            json!({"name": "Puller", "method": "poll", "event_access_accepted": true}),
        )
        .await;
    let poll = poll.created().clone();
    assert_eq!(poll["method"], "poll");
    let unknown_handler = api
        .post(
            "/v1/integrations",
            &token,
            json!({"name": "X", "method": "internal", "handler": "nope", "event_access_accepted": true}),
        )
        .await;
    assert_eq!(unknown_handler.fields(), ["handler"]);
    let listed = api.get("/v1/integrations", &token).await;
    assert_eq!(listed.ok()["data"].as_array().unwrap().len(), 4);

    // A subscription with a filter, fields and its own retry policy.
    let sub = api
        .post(
            "/v1/subscriptions",
            &token,
            json!({
                "integration_id": id(&webhook),
                "record_types": ["order", "*"],
                "filter": {"all": [{"field": "event_code", "in": ["order.created"]},
                                   {"field": "record.total", "gt": 100}]},
                "fields": ["status", "customer.email", "total"],
                "retry_policy": {"kind": "exponential", "max_retries": 5, "retry_delay_secs": 30}
            }),
        )
        .await;
    let sub = sub.created().clone();
    assert_eq!(sub["status"], "active");
    assert_eq!(sub["consecutive_dead"], 0);
    assert_eq!(sub["retry_policy"]["kind"], "exponential");
    assert_eq!(sub["filter"]["all"][1]["gt"], 100);
    let plain = subscription(api, &token, &id(&poll)).await;
    assert_eq!(plain["retry_policy"], json!({"kind": "fixed_schedule"}));
    assert_eq!(plain["filter"], Value::Null);

    // Ingest's loader compiles what the API stored.
    let config = shared::store::account_config::load(
        &w.pipeline.stack.clients.dynamo,
        &w.pipeline.stack.config.delivery_table,
        &local::testkit::id(&account_id),
    )
    .await
    .unwrap();
    assert_eq!(config.integrations.len(), 4);
    assert_eq!(config.subscriptions.len(), 2);
    assert!(config.broken.is_empty());
    let compiled = config.subscription(&local::testkit::id(&id(&sub))).unwrap();
    assert!(!compiled.filter.is_always());
    assert_eq!(
        config.integrations[&local::testkit::id::<shared::ids::IntegrationId>(&id(&webhook))]
            .delivery_method(),
        shared::domain::delivery_method::DeliveryMethod::Webhook
    );

    let by_integration = api
        .get(
            &format!("/v1/subscriptions?integration_id={}", id(&webhook)),
            &token,
        )
        .await;
    let data = by_integration.ok()["data"].as_array().unwrap().clone();
    assert_eq!(data.len(), 1);
    assert_eq!(data[0]["id"], sub["id"]);

    // PATCH edits only what it names; status is not the API's to move.
    let path = format!("/v1/subscriptions/{}", id(&sub));
    let patched = api
        .patch(
            &path,
            &token,
            json!({"filter": null, "fields": ["status"], "retry_policy": null}),
        )
        .await;
    let patched = patched.ok().clone();
    assert_eq!(patched["filter"], Value::Null);
    assert_eq!(patched["fields"], json!(["status"]));
    assert_eq!(patched["retry_policy"], json!({"kind": "fixed_schedule"}));
    assert_eq!(patched["record_types"], sub["record_types"]);
    assert_eq!(patched["status"], "active");
    let status = api.patch(&path, &token, json!({"status": "active"})).await;
    assert_eq!(status.fields(), ["status"]);
    let unchanged = api.patch(&path, &token, json!({})).await;
    assert_eq!(unchanged.ok()["fields"], json!(["status"]));

    // Integration edits; the rotated secret is shown once.
    let ipath = format!("/v1/integrations/{}", id(&webhook));
    let renamed = api
        .patch(
            &ipath,
            &token,
            json!({"name": "CRM 2", "event_access_accepted": false, "rotate_signing_secret": true}),
        )
        .await;
    let renamed = renamed.ok().clone();
    assert_eq!(renamed["name"], "CRM 2");
    assert_eq!(renamed["event_access_accepted"], false);
    let rotated = renamed["signing_secret"].as_str().unwrap();
    assert_ne!(rotated, webhook["signing_secret"].as_str().unwrap());
    let method = api.patch(&ipath, &token, json!({"method": "poll"})).await;
    assert_eq!(method.fields(), ["method"]);
    let handler_on_webhook = api
        .patch(&ipath, &token, json!({"handler": "record_snapshot"}))
        .await;
    assert_eq!(handler_on_webhook.fields(), ["handler"]);

    // Deletes.
    assert_eq!(
        api.delete(&path, &token).await.status,
        StatusCode::NO_CONTENT
    );
    api.get(&path, &token).await.problem(StatusCode::NOT_FOUND);
    api.delete(&path, &token)
        .await
        .problem(StatusCode::NOT_FOUND);
    let intg_token = webhook["token"].as_str().unwrap();
    api.get("/v1/whoami", intg_token).await.ok();
    assert_eq!(
        api.delete(&ipath, &token).await.status,
        StatusCode::NO_CONTENT
    );
    api.get(&ipath, &token).await.problem(StatusCode::NOT_FOUND);
    // Deleting an integration revokes its tokens.
    api.get("/v1/whoami", intg_token)
        .await
        .problem(StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn missing_invalid_revoked_and_wrong_kind_tokens_are_401_problems() {
    let w = World::new().await;
    let api = &w.api;
    let ApiAccount { account_id, token } = api.account("Acme").await;
    let integration = webhook(api, &token).await;
    let intg_token = integration["token"].as_str().unwrap().to_owned();

    let (prefix, secret) = token.rsplit_once('_').unwrap();
    let wrong_secret = format!("{prefix}_{}", "A".repeat(secret.len()));
    let unknown_id = format!(
        "rhy_acct_{}_{secret}",
        ulid::Ulid::new().to_string().to_lowercase()
    );
    let as_intg = token.replacen("rhy_acct_", "rhy_intg_", 1);
    for presented in [
        None,
        Some("garbage"),
        Some(""),
        Some(wrong_secret.as_str()),
        Some(unknown_id.as_str()),
        Some(as_intg.as_str()),
        Some(intg_token.as_str()), // an integration token on an account route
    ] {
        let r = api
            .call(Method::GET, "/v1/integrations", presented, None)
            .await;
        r.problem(StatusCode::UNAUTHORIZED);
        assert_eq!(
            r.headers[header::WWW_AUTHENTICATE],
            "Bearer realm=\"rhythm-delivery\""
        );
    }
    api.call(Method::GET, "/v1/integrations", None, None)
        .header(header::AUTHORIZATION.as_str(), "Basic dXNlcjpwYXNz")
        .await
        .problem(StatusCode::UNAUTHORIZED);

    // Operator routes refuse account tokens, integration tokens and no token.
    for presented in [Some(token.as_str()), Some(intg_token.as_str()), None] {
        api.call(
            Method::POST,
            "/operator/accounts",
            presented,
            Some(json!({"name": "x"})),
        )
        .await
        .problem(StatusCode::UNAUTHORIZED);
        api.call(
            Method::GET,
            &format!("/operator/accounts/{account_id}"),
            presented,
            None,
        )
        .await
        .problem(StatusCode::UNAUTHORIZED);
    }

    // An operator issues a second account token and revokes the first.
    let second = api
        .post(
            &format!("/operator/accounts/{account_id}/tokens"),
            OPERATOR_TOKEN,
            json!({"revoke_existing": true}),
        )
        .await;
    let second = second.created().clone();
    assert_eq!(second["revoked"], 1);
    assert_eq!(second["kind"], "acct");
    let second = second["token"].as_str().unwrap();
    api.get("/v1/integrations", &token)
        .await
        .problem(StatusCode::UNAUTHORIZED);
    api.get("/v1/integrations", second).await.ok();
    // The integration's token is untouched by an account-token rotation.
    api.get("/v1/whoami", &intg_token).await.ok();
    // Tokens of an unknown account cannot be issued.
    api.post(
        &format!(
            "/operator/accounts/{}/tokens",
            ulid::Ulid::new().to_string().to_lowercase()
        ),
        OPERATOR_TOKEN,
        json!({}),
    )
    .await
    .problem(StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn another_accounts_resources_are_not_found_on_every_route() {
    let w = World::new().await;
    let api = &w.api;
    let ApiAccount { token: owner, .. } = api.account("Owner").await;
    let ApiAccount { token: other, .. } = api.account("Other").await;
    let integration = id(&webhook(api, &owner).await);
    let subscription = id(&subscription(api, &owner, &integration).await);

    let ipath = format!("/v1/integrations/{integration}");
    let spath = format!("/v1/subscriptions/{subscription}");
    let routes: Vec<(Method, String, Option<Value>)> = vec![
        (Method::GET, ipath.clone(), None),
        (
            Method::PATCH,
            ipath.clone(),
            Some(json!({"name": "mine now"})),
        ),
        (Method::PATCH, ipath.clone(), Some(json!({}))),
        (Method::DELETE, ipath.clone(), None),
        (
            Method::POST,
            format!("{ipath}/tokens"),
            Some(json!({"revoke_existing": true})),
        ),
        (Method::GET, spath.clone(), None),
        (
            Method::PATCH,
            spath.clone(),
            Some(json!({"fields": ["secret"]})),
        ),
        (Method::PATCH, spath.clone(), Some(json!({}))),
        (Method::DELETE, spath.clone(), None),
    ];
    for (method, path, body) in &routes {
        let r = api
            .call(method.clone(), path, Some(&other), body.clone())
            .await;
        r.problem(StatusCode::NOT_FOUND);
        assert!(!r.text.contains("mine now"));
    }
    // Nor can the other account subscribe to the owner's integration.
    let steal = api
        .post(
            "/v1/subscriptions",
            &other,
            json!({"integration_id": integration, "record_types": ["*"], "fields": []}),
        )
        .await;
    assert_eq!(steal.fields(), ["integration_id"]);
    // Lists are per account.
    for path in ["/v1/integrations", "/v1/subscriptions"] {
        let r = api.get(path, &other).await;
        assert_eq!(r.ok()["data"], json!([]));
        let mine = api.get(path, &owner).await;
        assert_eq!(mine.ok()["data"].as_array().unwrap().len(), 1);
    }
    // Nothing the other account tried changed the owner's resources.
    let i = api.get(&ipath, &owner).await;
    assert_eq!(i.ok()["name"], "CRM");
    let s = api.get(&spath, &owner).await;
    assert_eq!(s.ok()["fields"], json!(["status", "total"]));
    // Ids that are not ids at all are not found either.
    for path in [
        "/v1/integrations/a%20b",
        "/v1/subscriptions/..%2F..",
        &format!("/v1/integrations/{}", "x".repeat(300)),
    ] {
        api.get(path, &owner).await.problem(StatusCode::NOT_FOUND);
    }
}

#[tokio::test]
async fn invalid_fields_are_422_problems_that_name_them() {
    let w = World::new().await;
    let api = &w.api;
    let ApiAccount { token, .. } = api.account("Acme").await;
    let integration = id(&webhook(api, &token).await);
    let sub = |extra: Value| {
        let mut body =
            json!({"integration_id": integration, "record_types": ["order"], "fields": ["status"]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let cases: Vec<(Value, Vec<&str>, &str)> = vec![
        (
            sub(json!({"filter": {"field": "price", "eq": 1}})),
            vec!["filter"],
            "unknown field",
        ),
        (sub(json!({"filter": {"all": []}})), vec!["filter"], "$"),
        (
            sub(json!({"filter": [1]})),
            vec!["filter"],
            "condition object",
        ),
        (
            sub(json!({"fields": ["status", "customer..email"]})),
            vec!["fields[1]"],
            "empty segment",
        ),
        (sub(json!({"fields": "status"})), vec!["fields"], "sequence"),
        (
            sub(json!({"record_types": []})),
            vec!["record_types"],
            "at least one",
        ),
        (
            sub(
                json!({"retry_policy": {"kind": "exponential", "max_retries": 50, "retry_delay_secs": 30}}),
            ),
            vec!["retry_policy.max_retries"],
            "between 1 and 20",
        ),
        (
            sub(
                json!({"retry_policy": {"kind": "exponential", "max_retries": 5, "retry_delay_secs": 0}}),
            ),
            vec!["retry_policy.retry_delay_secs"],
            "between 1",
        ),
        (
            sub(json!({"retry_policy": {"kind": "forever"}})),
            vec!["retry_policy"],
            "unknown variant",
        ),
        (
            sub(json!({"integration_id": "nope"})),
            vec!["integration_id"],
            "no integration",
        ),
        (sub(json!({"status": "paused"})), vec!["status"], "operator"),
        (sub(json!({"filters": {}})), vec!["filters"], "not a field"),
        (
            json!({"record_types": ["order"], "fields": ["a", ""]}),
            vec!["integration_id", "fields[1]"],
            "required",
        ),
    ];
    for (body, fields, message) in cases {
        let r = api.post("/v1/subscriptions", &token, body.clone()).await;
        let named = r.fields();
        assert_eq!(named, fields, "{body}: {}", r.text);
        assert!(
            r.text.contains(message),
            "{body}: {message:?} not in {}",
            r.text
        );
    }
    // The same checks on PATCH.
    let spath = format!(
        "/v1/subscriptions/{}",
        id(&subscription(api, &token, &integration).await)
    );
    let r = api
        .patch(
            &spath,
            &token,
            json!({"filter": {"field": "record.x", "gt": [1]}}),
        )
        .await;
    assert_eq!(r.fields(), ["filter"]);
    let r = api
        .patch(
            &spath,
            &token,
            json!({"fields": ["ok", "a.b.c.d.e.f.g.h.i"]}),
        )
        .await;
    assert_eq!(r.fields(), ["fields[1]"]);
    let r = api
        .patch(
            &spath,
            &token,
            json!({"record_types": null, "integration_id": integration}),
        )
        .await;
    assert_eq!(r.fields(), ["record_types", "integration_id"]);

    // Webhook targets: the SSRF guard. The metadata service is refused even where private
    // targets are allowed; under the production policy plain http and private hosts are too.
    let hook = |url: &str| json!({"name": "h", "method": "webhook", "webhook_url": url, "event_access_accepted": true});
    for url in [
        "http://169.254.169.254/latest/meta-data",
        "https://[fd00:ec2::254]/",
        "ftp://example.com/x",
        "https://user:pw@example.com/",
    ] {
        let r = api.post("/v1/integrations", &token, hook(url)).await;
        assert_eq!(r.fields(), ["webhook_url"], "{url}");
    }
    let production = w.production_api();
    for url in [
        "http://example.com/hook",
        "https://127.0.0.1/hook",
        "https://10.1.2.3/hook",
        "https://localhost/hook",
        "http://169.254.169.254/",
    ] {
        let r = production.post("/v1/integrations", &token, hook(url)).await;
        assert_eq!(r.fields(), ["webhook_url"], "{url}");
    }
    let public = production
        .post("/v1/integrations", &token, hook("https://example.com/hook"))
        .await;
    public.created();
    let ipath = format!("/v1/integrations/{}", id(&public.json));
    let r = production
        .patch(
            &ipath,
            &token,
            json!({"webhook_url": "http://example.com/"}),
        )
        .await;
    assert_eq!(r.fields(), ["webhook_url"]);

    // Integration shapes, all errors at once.
    let r = api
        .post(
            "/v1/integrations",
            &token,
            json!({"name": "", "method": "webhook", "signing_secret": "nope", "handler": "record_snapshot"}),
        )
        .await;
    assert_eq!(
        r.fields(),
        [
            "name",
            "event_access_accepted",
            "webhook_url",
            "signing_secret",
            "handler"
        ]
    );
    let r = api
        .post(
            "/v1/integrations",
            &token,
            json!({"name": "q", "method": "queue", "event_access_accepted": "yes"}),
        )
        .await;
    assert_eq!(r.fields(), ["method", "event_access_accepted"]);
    let r = api
        .post(
            "/v1/integrations",
            &token,
            json!({"name": "p", "method": "poll", "webhook_url": "https://example.com/", "event_access_accepted": true}),
        )
        .await;
    assert_eq!(r.fields(), ["webhook_url"]);
    let r = api
        .post(
            "/operator/accounts",
            OPERATOR_TOKEN,
            json!({"name": "x", "admin_emails": ["ok@x.y", "not-an-email"]}),
        )
        .await;
    assert_eq!(r.fields(), ["admin_emails[1]"]);
    let r = api.get("/v1/integrations?limit=0", &token).await;
    assert_eq!(r.fields(), ["limit"]);
}

#[tokio::test]
async fn malformed_requests_are_problems_too() {
    let w = World::new().await;
    let api = &w.api;
    let ApiAccount { token, .. } = api.account("Acme").await;
    let raw = |method: Method, path: &str, content_type: Option<&str>, body: &'static str| {
        api.call(method, path, Some(&token), None)
            .body(content_type, body)
    };
    let json_ct = Some("application/json");
    for body in [
        "{\"name\": ",
        "not json",
        "[1, 2]",
        "\"text\"",
        "{\"a\":1} trailing",
    ] {
        let r = raw(Method::POST, "/v1/integrations", json_ct, body).await;
        r.problem(StatusCode::BAD_REQUEST);
    }
    let r = raw(Method::POST, "/v1/integrations", Some("text/plain"), "{}").await;
    r.problem(StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let r = raw(Method::POST, "/v1/integrations", None, "{}").await;
    r.problem(StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let big: &'static str =
        Box::leak(format!("{{\"name\": \"{}\"}}", "x".repeat(300 * 1024)).into_boxed_str());
    let r = raw(Method::POST, "/v1/integrations", json_ct, big).await;
    r.problem(StatusCode::PAYLOAD_TOO_LARGE);
    // An empty body reads as {}: every required field is named.
    let r = raw(Method::POST, "/v1/integrations", None, "").await;
    assert_eq!(r.fields(), ["name", "method", "event_access_accepted"]);
    api.get("/v1/integrations?limit=abc", &token)
        .await
        .problem(StatusCode::BAD_REQUEST);
    api.get("/v1/integrations?color=red", &token)
        .await
        .problem(StatusCode::BAD_REQUEST);
    api.get("/v1/nothing-here", &token)
        .await
        .problem(StatusCode::NOT_FOUND);
    api.call(Method::GET, "/nowhere", None, None)
        .await
        .problem(StatusCode::NOT_FOUND);
    api.call(
        Method::PUT,
        "/v1/integrations",
        Some(&token),
        Some(json!({})),
    )
    .await
    .problem(StatusCode::METHOD_NOT_ALLOWED);
    let r = raw(Method::POST, "/operator/accounts", json_ct, "{oops").await;
    // Authentication comes first: an account token on an operator route is 401 whatever the body.
    r.problem(StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn secrets_appear_only_in_the_response_that_creates_them() {
    let w = World::new().await;
    let api = &w.api;
    let ApiAccount { account_id, token } = api.account("Acme").await;
    let created = webhook(api, &token).await;
    let secret = created["signing_secret"].as_str().unwrap().to_owned();
    let intg_token = created["token"].as_str().unwrap().to_owned();
    let path = format!("/v1/integrations/{}", id(&created));
    let rotated = api
        .patch(&path, &token, json!({"rotate_signing_secret": true}))
        .await;
    let rotated_secret = rotated.ok()["signing_secret"].as_str().unwrap().to_owned();
    let new_token = api
        .post(&format!("{path}/tokens"), &token, json!({}))
        .await
        .created()["token"]
        .as_str()
        .unwrap()
        .to_owned();

    let reads = [
        api.get(&path, &token).await,
        api.get("/v1/integrations", &token).await,
        api.patch(&path, &token, json!({"name": "renamed"})).await,
        api.patch(&path, &token, json!({})).await,
        api.get(&format!("/operator/accounts/{account_id}"), OPERATOR_TOKEN)
            .await,
        api.get("/v1/whoami", &intg_token).await,
    ];
    for r in &reads {
        assert!(r.status.is_success(), "{}", r.text);
        for s in [&secret, &rotated_secret, &intg_token, &new_token, &token] {
            assert!(
                !r.text.contains(s.as_str()),
                "a secret leaked into {}",
                r.text
            );
        }
        assert!(!r.text.contains("whsec_"));
        assert!(!r.text.contains("signing_secret"));
    }
    // The table holds token hashes, never a token.
    let items = w
        .pipeline
        .stack
        .clients
        .dynamo
        .scan()
        .table_name(&w.pipeline.stack.config.delivery_table)
        .send()
        .await
        .unwrap()
        .items
        .unwrap_or_default();
    let dump = format!("{items:?}");
    for t in [&token, &intg_token, &new_token] {
        // `rhy_{kind}_{id}_{secret}`: the secret is base64url and may itself contain `_`.
        let token_secret = t.splitn(4, '_').nth(3).unwrap();
        assert!(token_secret.len() >= 40, "{t}");
        assert!(!dump.contains(token_secret), "a token secret is stored");
    }
    let token_id = new_token.split('_').nth(2).unwrap();
    let stored = w
        .pipeline
        .stack
        .clients
        .dynamo
        .get_item()
        .table_name(&w.pipeline.stack.config.delivery_table)
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S(keys::token_pk(&local::testkit::id(
                token_id,
            ))),
        )
        .key(
            "sk",
            aws_sdk_dynamodb::types::AttributeValue::S(keys::TOKEN_SK.into()),
        )
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    assert_eq!(stored["kind"].as_s().unwrap(), "token");
    assert_eq!(stored["token_kind"].as_s().unwrap(), "intg");
    assert_eq!(stored["secret_sha256"].as_s().unwrap().len(), 64);
}

#[tokio::test]
async fn integration_token_rotation_with_revoke_existing_retires_the_old_tokens() {
    let w = World::new().await;
    let api = &w.api;
    let ApiAccount { account_id, token } = api.account("Acme").await;
    let created = webhook(api, &token).await;
    let integration_id = id(&created);
    let first = created["token"].as_str().unwrap().to_owned();
    let who = api.get("/v1/whoami", &first).await;
    let who = who.ok();
    assert_eq!(who["kind"], "integration");
    assert_eq!(who["integration_id"], integration_id.as_str());
    assert_eq!(who["account_id"], account_id.as_str());

    // A second integration's token must survive the first's rotation.
    let bystander = webhook(api, &token).await["token"]
        .as_str()
        .unwrap()
        .to_owned();

    let path = format!("/v1/integrations/{integration_id}/tokens");
    let second = api
        .post(&path, &token, json!({"revoke_existing": false}))
        .await;
    let second = second.created().clone();
    assert_eq!(second["revoked"], 0);
    assert_eq!(second["kind"], "intg");
    assert_eq!(second["integration_id"], integration_id.as_str());
    let second = second["token"].as_str().unwrap().to_owned();
    api.get("/v1/whoami", &first).await.ok();
    api.get("/v1/whoami", &second).await.ok();

    let third = api
        .post(&path, &token, json!({"revoke_existing": true}))
        .await;
    let third = third.created().clone();
    assert_eq!(third["revoked"], 2);
    let third = third["token"].as_str().unwrap().to_owned();
    api.get("/v1/whoami", &first)
        .await
        .problem(StatusCode::UNAUTHORIZED);
    api.get("/v1/whoami", &second)
        .await
        .problem(StatusCode::UNAUTHORIZED);
    api.get("/v1/whoami", &third).await.ok();
    api.get("/v1/whoami", &bystander).await.ok();
    api.get("/v1/whoami", &token).await.ok();
    // Repeating the rotation is harmless.
    let again = api
        .post(&path, &token, json!({"revoke_existing": true}))
        .await;
    assert_eq!(again.created()["revoked"], 1);
    // Integration tokens never manage the account.
    api.post(&path, &third, json!({}))
        .await
        .problem(StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn lists_page_with_a_cursor() {
    let w = World::new().await;
    let api = &w.api;
    let ApiAccount { token, .. } = api.account("Acme").await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(id(&webhook(api, &token).await));
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/integrations?limit=2&cursor={c}"),
            None => "/v1/integrations?limit=2".to_string(),
        };
        let r = api.get(&path, &token).await;
        let body = r.ok();
        let data = body["data"].as_array().unwrap();
        assert!(data.len() <= 2);
        seen.extend(data.iter().map(id));
        pages += 1;
        match body["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
        assert!(pages < 10);
    }
    ids.sort();
    assert_eq!(seen, ids);
}

#[tokio::test]
async fn the_local_server_serves_the_api_over_http() {
    let w = World::new().await;
    let (addr, handle) = local::api_server::serve_loopback(w.api_state())
        .await
        .unwrap();
    let client = reqwest::Client::new();
    let health = client
        .get(format!("http://{addr}/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let created = client
        .post(format!("http://{addr}/operator/accounts"))
        .bearer_auth(OPERATOR_TOKEN)
        .json(&json!({"name": "Over HTTP"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let body: Value = created.json().await.unwrap();
    let token = body["token"].as_str().unwrap();
    let unauthorized = client
        .get(format!("http://{addr}/v1/integrations"))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorized.status(), 401);
    assert_eq!(unauthorized.headers()["content-type"], PROBLEM_JSON);
    let listed = client
        .get(format!("http://{addr}/v1/integrations"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 200);
    assert!(
        local::api_server::serve(w.api_state(), "0.0.0.0:0".parse().unwrap())
            .await
            .is_err()
    );
    handle.abort();
}

/// An HTTP API event for `/operator/…` on stage `prod`, as API Gateway sends it after its JWT
/// authorizer accepted the token: `claims` and `scopes` are the authorizer's.
pub(crate) fn operator_event(
    method: &str,
    path: &str,
    claims: Value,
    scopes: Value,
    body: Option<Value>,
) -> Value {
    json!({
        "version": "2.0",
        "routeKey": "ANY /operator/{proxy+}",
        "rawPath": format!("/prod{path}"),
        "rawQueryString": "",
        "headers": {"authorization": "Bearer eyJ.jwt.sig", "content-type": "application/json"},
        "requestContext": {
            "routeKey": "ANY /operator/{proxy+}",
            "accountId": "123456789012",
            "stage": "prod",
            "requestId": "req-1",
            "authorizer": {"jwt": {"claims": claims, "scopes": scopes}},
            "apiId": "api-id",
            "domainName": "id.execute-api.us-east-1.amazonaws.com",
            "domainPrefix": "id",
            "time": "01/Dec/2026:10:00:00 +0000",
            "timeEpoch": 1_796_119_200_000_i64,
            "http": {"method": method, "path": format!("/prod{path}"), "protocol": "HTTP/1.1",
                     "sourceIp": "192.0.2.1", "userAgent": "agent"}
        },
        "body": body.map(|b| b.to_string()),
        "isBase64Encoded": false
    })
}

#[tokio::test]
async fn an_operator_jwt_without_the_operator_scope_is_forbidden_and_with_it_is_served() {
    let w = World::new().await;
    let api = w.gateway_api("rhythm/operator");
    let account = w.api.account("Scoped").await;
    let path = format!("/operator/accounts/{}", account.account_id);

    // A valid token of the identity provider, but not an operator's: 403 on every operator route.
    for (claims, scopes) in [
        (json!({"sub": "someone"}), Value::Null),
        (
            json!({"sub": "someone"}),
            json!(["openid", "rhythm/reader"]),
        ),
        (
            json!({"sub": "someone", "scope": "openid rhythm/operators"}),
            Value::Null,
        ),
    ] {
        let r = api
            .gateway_event(&operator_event(
                "GET",
                &path,
                claims.clone(),
                scopes.clone(),
                None,
            ))
            .await;
        let problem = r.problem_of(StatusCode::FORBIDDEN, "forbidden");
        assert!(
            problem["detail"]
                .as_str()
                .unwrap()
                .contains("rhythm/operator"),
            "{problem}"
        );
        let r = api
            .gateway_event(&operator_event(
                "POST",
                "/operator/accounts",
                claims,
                scopes,
                Some(json!({"name": "Nope", "admin_emails": ["a@example.com"]})),
            ))
            .await;
        r.problem_of(StatusCode::FORBIDDEN, "forbidden");
    }

    // With the scope (in the authorizer's list or the token's `scope` claim): served.
    for (claims, scopes) in [
        (json!({"sub": "op-1"}), json!(["rhythm/operator"])),
        (
            json!({"sub": "op-1", "scope": "openid rhythm/operator"}),
            Value::Null,
        ),
    ] {
        let r = api
            .gateway_event(&operator_event("GET", &path, claims, scopes, None))
            .await;
        assert_eq!(r.ok()["id"], account.account_id.as_str(), "{}", r.text);
    }

    // No JWT context at all (not from the gateway's authorizer): 401, as before.
    api.get(&path, "eyJ.jwt.sig")
        .await
        .problem_of(StatusCode::UNAUTHORIZED, "unauthorized");
}

#[tokio::test]
async fn account_creation_and_token_issuance_are_written_to_the_audit_history() {
    use std::time::Duration;
    let w = World::new().await;
    let created_at = w.pipeline.now();
    let created = w
        .api
        .post(
            "/operator/accounts",
            OPERATOR_TOKEN,
            json!({"name": "Audited", "admin_emails": ["a@example.com"], "reason": "onboarding ticket 42"}),
        )
        .await;
    let account_id = created.created()["account"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let first_token_id = created.json["token"]
        .as_str()
        .unwrap()
        .split('_')
        .nth(2)
        .unwrap()
        .to_owned();

    w.pipeline.clock.advance(Duration::from_secs(60));
    let issued_at = w.pipeline.now();
    let issued = w
        .api
        .post(
            &format!("/operator/accounts/{account_id}/tokens"),
            OPERATOR_TOKEN,
            json!({"revoke_existing": true, "reason": "token leaked in a log"}),
        )
        .await;
    let second_token_id = issued.created()["token_id"].as_str().unwrap().to_owned();

    // An operator behind the gateway, without a reason: its `sub` is who.
    w.pipeline.clock.advance(Duration::from_secs(60));
    let third_at = w.pipeline.now();
    let gateway = w.gateway_api("rhythm/operator");
    let path = format!("/operator/accounts/{account_id}/tokens");
    let third = gateway
        .gateway_event(&operator_event(
            "POST",
            &path,
            json!({"sub": "op-9"}),
            json!(["rhythm/operator"]),
            Some(json!({})),
        ))
        .await;
    let third_token_id = third.created()["token_id"].as_str().unwrap().to_owned();

    // A refused request (a reason that is not text) writes neither a token nor an entry.
    w.api
        .post(&path, OPERATOR_TOKEN, json!({"reason": 7}))
        .await
        .problem(StatusCode::UNPROCESSABLE_ENTITY);

    let audit = w
        .api
        .get(
            &format!("/operator/accounts/{account_id}/audit"),
            OPERATOR_TOKEN,
        )
        .await;
    let entries = audit.ok()["data"].as_array().unwrap().clone();
    let summary: Vec<(String, String, String, String, String)> = entries
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_owned(),
                e["operator"].as_str().unwrap().to_owned(),
                e["at"].as_str().unwrap().to_owned(),
                e["reason"].as_str().unwrap().to_owned(),
                e["details"]["token_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let s = |v: &str| v.to_owned();
    assert_eq!(
        summary,
        vec![
            (
                s("issue_account_token"),
                s("op-9"),
                third_at.to_rfc3339(),
                s(""),
                third_token_id
            ),
            // The rotation revoked the first token: its own entry, by the same operator.
            (
                s("revoke_token"),
                s(local::testkit::api::OPERATOR),
                issued_at.to_rfc3339(),
                format!("replaced by token {second_token_id} (revoke_existing)"),
                first_token_id.clone()
            ),
            (
                s("issue_account_token"),
                s(local::testkit::api::OPERATOR),
                issued_at.to_rfc3339(),
                s("token leaked in a log"),
                second_token_id
            ),
            (
                s("create_account"),
                s(local::testkit::api::OPERATOR),
                created_at.to_rfc3339(),
                s("onboarding ticket 42"),
                first_token_id
            ),
        ]
    );
    assert_eq!(entries[2]["details"]["revoke_existing"], "true");
    assert_eq!(entries[0]["details"]["revoke_existing"], "false");
    assert_eq!(entries[3]["details"]["name"], "Audited");
    for e in &entries {
        assert_eq!(e["account_id"], account_id.as_str());
        assert!(e.get("subscription_id").is_none(), "{e}");
    }
}

// ------------------------------------------------------------------------------- test events

/// Asks for a test event on `path` (`POST …/test-event`): `202` with the test event `queued` and
/// its `Location`, which shows it `queued` until the delivery function has worked the delivery
/// queue, then `sent` with the outcome (returned).
async fn test_event_sent(w: &World, path: &str, token: &str) -> Value {
    let reply = w.api.call(Method::POST, path, Some(token), None).await;
    let queued = reply.accepted().clone();
    assert_eq!(queued["status"], "queued", "{queued}");
    assert_eq!(queued["delivered"], false);
    assert_eq!(queued["classification"], Value::Null);
    let location = reply.header("location").unwrap().to_owned();
    assert_eq!(
        location,
        format!(
            "/v1/subscriptions/{}/test-events/{}",
            queued["subscription_id"].as_str().unwrap(),
            queued["test_event_id"].as_str().unwrap()
        )
    );
    assert_eq!(w.api.get(&location, token).await.ok()["status"], "queued");
    w.pipeline.work_pending().await.unwrap();
    let sent = w.api.get(&location, token).await.ok().clone();
    assert_eq!(sent["status"], "sent", "{sent}");
    assert_eq!(sent["message_id"], queued["message_id"]);
    assert!(sent["sent_at"].is_string(), "{sent}");
    sent
}

#[tokio::test]
async fn a_test_event_reaches_the_endpoint_signed_and_marked_and_is_audited_but_never_a_delivery() {
    let w = World::new().await;
    let api = &w.api;
    let tenant = api.account("Tester").await;
    let created = api
        .post(
            "/v1/integrations",
            &tenant.token,
            json!({"name": "CRM", "method": "webhook", "webhook_url": w.receiver.url("/hooks"),
                   "event_access_accepted": true}),
        )
        .await
        .created()
        .clone();
    let secret = created["signing_secret"].as_str().unwrap().to_owned();
    let sub = id(&subscription(api, &tenant.token, &id(&created)).await);
    let path = format!("/v1/subscriptions/{sub}/test-event");

    w.receiver.script([Reply::Full {
        status: 202,
        headers: vec![],
        body: "queued by the receiver".into(),
    }]);
    let outcome = test_event_sent(&w, &path, &tenant.token).await;
    assert_eq!(outcome["delivered"], true, "{outcome}");
    assert_eq!(outcome["http_status"], 202);
    assert_eq!(outcome["classification"], "success");
    assert_eq!(outcome["response"], "queued by the receiver");
    assert_eq!(outcome["event_type"], "rhythm.test");
    assert_eq!(outcome["subscription_id"], sub.as_str());
    assert_eq!(outcome["url"], w.receiver.url("/hooks"));
    assert!(outcome["latency_ms"].is_u64(), "{outcome}");

    // The receiver got one request, signed with the integration's secret, marked as a test.
    let got = w.receiver.received();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].path, "/hooks");
    assert!(verifies(&secret, &got[0], w.pipeline.now()));
    assert_eq!(got[0].header("webhook-id"), outcome["message_id"].as_str());
    assert!(outcome["message_id"].as_str().unwrap().starts_with("test_"));
    let body = got[0].json();
    assert_eq!(body["type"], "rhythm.test");
    assert_eq!(body["test"], true);
    assert_eq!(body["subscription_id"], sub.as_str());

    // A failing endpoint is the outcome, not an error; each send has a fresh message id.
    w.receiver.script([Reply::Status(500)]);
    let failed = test_event_sent(&w, &path, &tenant.token).await;
    assert_eq!(failed["delivered"], false);
    assert_eq!(failed["http_status"], 500);
    assert_eq!(failed["classification"], "transient");
    assert_ne!(failed["message_id"], outcome["message_id"]);

    // During a rotation's grace it is signed with the new secret and the previous one.
    let rotated = api
        .patch(
            &format!("/v1/integrations/{}", id(&created)),
            &tenant.token,
            json!({"rotate_signing_secret": true, "rotation_grace_seconds": 3600}),
        )
        .await
        .ok()
        .clone();
    let new_secret = rotated["signing_secret"].as_str().unwrap().to_owned();
    test_event_sent(&w, &path, &tenant.token).await;
    let last = w.receiver.received().pop().unwrap();
    assert_eq!(
        last.header("webhook-signature").unwrap().split(' ').count(),
        2
    );
    assert!(
        verifies(&new_secret, &last, w.pipeline.now())
            && verifies(&secret, &last, w.pipeline.now())
    );

    // No delivery record, no dead count: the subscription is as it was.
    let deliveries = api
        .get(
            &format!(
                "/operator/accounts/{}/subscriptions/{sub}/deliveries",
                tenant.account_id
            ),
            OPERATOR_TOKEN,
        )
        .await;
    assert_eq!(deliveries.ok()["data"], json!([]));
    let read = api
        .get(&format!("/v1/subscriptions/{sub}"), &tenant.token)
        .await;
    assert_eq!(read.ok()["consecutive_dead"], 0);
    assert_eq!(read.ok()["status"], "active");

    // Another account, or another subscription's path, does not see the test event.
    let other = api.account("Other").await;
    let shown = format!(
        "/v1/subscriptions/{sub}/test-events/{}",
        outcome["test_event_id"].as_str().unwrap()
    );
    api.get(&shown, &other.token)
        .await
        .problem_of(StatusCode::NOT_FOUND, "not-found");
    api.get(
        &format!("/v1/subscriptions/{sub}/test-events/test_nope"),
        &tenant.token,
    )
    .await
    .problem_of(StatusCode::NOT_FOUND, "not-found");
    // A redelivered message sends nothing again.
    let before = w.receiver.count();
    let again = json!({"test_event": {"account_id": tenant.account_id,
                                       "test_event_id": outcome["test_event_id"]}});
    let queue = w.pipeline.stack.queue("DeliveryQueue");
    let message: aws_sdk_sqs::types::Message = aws_sdk_sqs::types::Message::builder()
        .message_id("redelivered")
        .body(again.to_string())
        .build();
    let response = w
        .pipeline
        .worker
        .handle(queue.event(&[message]).unwrap())
        .await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(w.receiver.count(), before);

    // The audit history keeps who asked for each one and when (newest first).
    let audit = api
        .get(
            &format!(
                "/operator/accounts/{}/subscriptions/{sub}/audit",
                tenant.account_id
            ),
            OPERATOR_TOKEN,
        )
        .await;
    let mut entries = audit.ok()["data"].as_array().unwrap().clone();
    // (The subscription's creation is audited too.)
    entries.retain(|e| e["action"] != "create_subscription");
    assert_eq!(entries.len(), 3, "{entries:?}");
    assert!(entries.iter().all(|e| e["action"] == "send_test_event"));
    assert!(entries
        .iter()
        .all(|e| e["operator"].as_str().unwrap().starts_with("token ")));
    assert_eq!(
        entries[1]["details"]["message_id"],
        failed["message_id"].clone()
    );
    assert_eq!(
        entries[2]["details"]["message_id"],
        outcome["message_id"].clone()
    );
}

#[tokio::test]
async fn an_account_sends_ten_test_events_a_minute_and_the_rest_wait_for_the_next_while_another_account_still_sends(
) {
    let w = World::new().await;
    let api = &w.api;
    // At the start of a minute of the virtual clock.
    let into_minute = w.pipeline.now().millis().rem_euclid(60_000) as u64;
    w.pipeline
        .clock
        .advance(std::time::Duration::from_millis(60_000 - into_minute));
    let busy = api.account("Busy").await;
    let quiet = api.account("Quiet").await;
    let busy_sub = w.subscribe_through_api(&busy, "webhook", json!({})).await;
    let quiet_sub = w.subscribe_through_api(&quiet, "webhook", json!({})).await;
    let send = |account: &ApiAccount, sub: &str| {
        let path = format!("/v1/subscriptions/{sub}/test-event");
        let token = account.token.clone();
        async move { api.call(Method::POST, &path, Some(&token), None).await }
    };
    let busy_id = busy_sub.subscription_id.to_string();

    // Twelve at once: exactly ten are queued (and sent), whichever they are; the other two send
    // nothing.
    let replies = futures::future::join_all((0..12).map(|_| send(&busy, &busy_id))).await;
    w.pipeline.work_pending().await.unwrap();
    let sent = replies
        .iter()
        .filter(|r| r.status == StatusCode::ACCEPTED)
        .count();
    assert_eq!(
        sent,
        10,
        "{:?}",
        replies.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    for refused in replies.iter().filter(|r| r.status != StatusCode::ACCEPTED) {
        let problem = refused.problem_of(StatusCode::TOO_MANY_REQUESTS, "quota-exceeded");
        assert!(problem["detail"]
            .as_str()
            .unwrap()
            .contains("10 test events a minute"));
        assert_eq!(refused.header("retry-after"), Some("60"));
    }
    assert_eq!(w.receiver.count(), 10);

    // Twenty seconds on, the account still waits, forty seconds now; another account sends.
    w.pipeline.clock.advance(std::time::Duration::from_secs(20));
    let refused = send(&busy, &busy_id).await;
    refused.problem_of(StatusCode::TOO_MANY_REQUESTS, "quota-exceeded");
    assert_eq!(refused.header("retry-after"), Some("40"));
    send(&quiet, quiet_sub.subscription_id.as_str())
        .await
        .accepted();
    w.pipeline.work_pending().await.unwrap();
    assert_eq!(w.receiver.count(), 11, "only the other account's was sent");

    // The next minute the account sends again.
    w.pipeline.clock.advance(std::time::Duration::from_secs(40));
    let path = format!("/v1/subscriptions/{busy_id}/test-event");
    assert_eq!(
        test_event_sent(&w, &path, &busy.token).await["delivered"],
        true
    );
    assert_eq!(w.receiver.count(), 12);
}

#[tokio::test]
async fn test_events_are_refused_for_another_accounts_a_pull_or_a_paused_subscription_and_a_forbidden_target(
) {
    let w = World::new().await;
    let api = &w.api;
    let tenant = api.account("Tester").await;
    let other = api.account("Other").await;
    let send = |api: &ApiClient, sub: &str, token: &str| {
        api.call(
            Method::POST,
            &format!("/v1/subscriptions/{sub}/test-event"),
            Some(token),
            None,
        )
    };

    // Another account's subscription is not found, as on every route.
    let hook = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let sub = hook.subscription_id.to_string();
    send(api, &sub, &other.token)
        .await
        .problem_of(StatusCode::NOT_FOUND, "not-found");
    send(api, "not-an-id", &tenant.token)
        .await
        .problem_of(StatusCode::NOT_FOUND, "not-found");

    // A pull subscription has no endpoint.
    let pull = w.subscribe_through_api(&tenant, "poll", json!({})).await;
    let refused = send(api, &pull.subscription_id.to_string(), &tenant.token).await;
    let detail = refused.problem_of(StatusCode::CONFLICT, "conflict")["detail"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        detail.contains("webhook") && detail.contains("poll"),
        "{detail}"
    );

    // A paused subscription receives nothing, test events included.
    let integration = w.integration(&tenant.account_id).await;
    let paused = w.subscribe(&integration).paused().await;
    let refused = send(api, paused.subscription_id.as_str(), &tenant.token).await;
    let detail = refused.problem_of(StatusCode::CONFLICT, "conflict")["detail"].clone();
    assert!(detail.as_str().unwrap().contains("paused"), "{detail}");

    // The SSRF guard of a production deployment refuses a loopback endpoint before any send.
    let loopback = api
        .post(
            "/v1/integrations",
            &tenant.token,
            json!({"name": "Loopback", "method": "webhook",
                   "webhook_url": "https://127.0.0.1:9/hooks",
                   "event_access_accepted": true}),
        )
        .await
        .created()
        .clone();
    let guarded = id(&subscription(api, &tenant.token, &id(&loopback)).await);
    let refused = send(&w.production_api(), &guarded, &tenant.token).await;
    let detail = refused.problem_of(StatusCode::CONFLICT, "conflict")["detail"].clone();
    assert!(detail.as_str().unwrap().contains("SSRF"), "{detail}");

    w.pipeline.work_pending().await.unwrap();
    assert_eq!(w.receiver.count(), 0, "nothing was sent");
    // A refusal is not audited (nothing was sent).
    let audit = api
        .get(
            &format!("/operator/accounts/{}/audit", tenant.account_id),
            OPERATOR_TOKEN,
        )
        .await;
    assert!(!audit.ok()["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["action"] == "send_test_event"));
}

#[tokio::test]
async fn a_token_issued_with_an_expiry_works_until_then_and_is_refused_after() {
    let w = World::new().await;
    let api = &w.api;
    let account = api.account("Expiring").await;
    let a = account.account_id.to_string();
    let issued_at = w.pipeline.now();

    // An account token for an hour, an integration token for ten minutes: the answer says until when.
    let acct = api
        .post(
            &format!("/operator/accounts/{a}/tokens"),
            OPERATOR_TOKEN,
            json!({"expires_in": 3600}),
        )
        .await;
    let acct = acct.created().clone();
    assert_eq!(
        acct["expires_at"],
        issued_at
            .plus(std::time::Duration::from_secs(3600))
            .to_rfc3339()
    );
    let acct_token = acct["token"].as_str().unwrap().to_owned();
    let integration = webhook(api, &account.token).await;
    let intg = api
        .post(
            &format!("/v1/integrations/{}/tokens", id(&integration)),
            &account.token,
            json!({"expires_in": 600}),
        )
        .await;
    let intg = intg.created().clone();
    assert_eq!(
        intg["expires_at"],
        issued_at
            .plus(std::time::Duration::from_secs(600))
            .to_rfc3339()
    );
    let intg_token = intg["token"].as_str().unwrap().to_owned();
    // Without `expires_in` a token has no expiry (and the answer no `expires_at`).
    let lasting = api
        .post(
            &format!("/operator/accounts/{a}/tokens"),
            OPERATOR_TOKEN,
            json!({}),
        )
        .await;
    assert!(lasting.created().get("expires_at").is_none());

    api.get("/v1/integrations", &acct_token).await.ok();
    api.get("/v1/whoami", &intg_token).await.ok();
    w.pipeline
        .clock
        .advance(std::time::Duration::from_secs(600));
    api.get("/v1/whoami", &intg_token)
        .await
        .problem(StatusCode::UNAUTHORIZED);
    api.get("/v1/integrations", &acct_token).await.ok();
    w.pipeline
        .clock
        .advance(std::time::Duration::from_secs(3000));
    api.get("/v1/integrations", &acct_token)
        .await
        .problem(StatusCode::UNAUTHORIZED);
    api.get("/v1/integrations", &account.token).await.ok();

    // An expiry out of range, or not a whole number of seconds, is the field's 422; nothing is issued.
    for bad in [
        json!(59),
        json!(31_622_401),
        json!(-1),
        json!(60.5),
        json!("3600"),
        json!(null),
    ] {
        for path in [
            format!("/operator/accounts/{a}/tokens"),
            format!("/v1/integrations/{}/tokens", id(&integration)),
        ] {
            let token = if path.starts_with("/operator") {
                OPERATOR_TOKEN
            } else {
                account.token.as_str()
            };
            let refused = api
                .post(
                    &path,
                    token,
                    json!({"expires_in": bad, "revoke_existing": true}),
                )
                .await;
            let problem = refused.problem(StatusCode::UNPROCESSABLE_ENTITY);
            assert!(
                problem.to_string().contains("expires_in"),
                "{bad}: {problem}"
            );
        }
    }
    api.get("/v1/integrations", &account.token).await.ok();
}
