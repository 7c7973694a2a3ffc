//! An endpoint's custom headers and authentication, and the trace context of every attempt
//! (`docs/glossary.md`, "Endpoint authentication" and "Trace context"), against the emulator and
//! real receivers on loopback that demand what they need: a static API-key header, HTTP basic, and
//! OAuth2 client credentials with a token endpoint on loopback that counts its token requests.
//! Credentials are sealed, never shown by the API, never in an item or a log line.

use http::{Method, StatusCode};
use local::logs::logged;
use local::receiver::{ReceivedRequest, Receiver, Reply};
use local::testkit::api::{ApiAccount, OPERATOR_TOKEN};
use local::testkit::World;
use serde_json::{json, Value};
use shared::delivery::worker::webhook::SENT_HEADERS;
use shared::domain::integration_delivery::DeliveryStatus;
use shared::domain::trace_context;
use shared::ids::{IntegrationId, SubscriptionId};
use shared::store::integration::{ENDPOINT_AUTH, PREVIOUS_ENDPOINT_AUTH};
use shared::store::keys;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Headers the HTTP client sets on its own, besides those the attempt sets ([`SENT_HEADERS`]).
const TRANSPORT_HEADERS: &[&str] = &["host", "content-length", "accept", "accept-encoding"];

/// A webhook integration to `url` with the `extra` fields (`headers`, `auth`) and a catalog
/// subscription of it, through the API.
pub(crate) async fn webhook(
    w: &World,
    tenant: &ApiAccount,
    url: &str,
    extra: Value,
) -> (IntegrationId, SubscriptionId) {
    let mut body = json!({"name": "CRM", "method": "webhook", "event_access_accepted": true,
                          "webhook_url": url});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let created = w.api.post("/v1/integrations", &tenant.token, body).await;
    let id: IntegrationId = created.created()["id"].as_str().unwrap().parse().unwrap();
    let sub = w
        .api
        .post(
            "/v1/subscriptions",
            &tenant.token,
            json!({"integration_id": id, "record_types": ["catalog_item"], "fields": ["sku"]}),
        )
        .await;
    let sub = sub.created()["id"].as_str().unwrap().parse().unwrap();
    (id, sub)
}

/// A receiver that answers 200 only when `name` is `expected()`, else 401.
pub(crate) fn demanding(receiver: &Receiver, name: &'static str, expected: Arc<Mutex<String>>) {
    receiver.set_responder(Arc::new(move |r: &ReceivedRequest| {
        if r.header(name) == Some(expected.lock().unwrap().as_str()) {
            Reply::Status(200)
        } else {
            Reply::Status(401)
        }
    }));
}

pub(crate) fn basic(user: &str, password: &str) -> String {
    use base64::Engine;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// The header names of a request that neither the transport nor the attempt itself set.
fn configured_headers(r: &ReceivedRequest) -> BTreeSet<String> {
    r.headers
        .keys()
        .filter(|k| !TRANSPORT_HEADERS.contains(&k.as_str()) && !SENT_HEADERS.contains(&k.as_str()))
        .cloned()
        .collect()
}

#[tokio::test]
async fn custom_headers_and_a_static_api_key_reach_a_receiver_that_demands_them_with_a_traceparent()
{
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    demanding(
        &w.receiver,
        "x-api-key",
        Arc::new(Mutex::new("key-7f3a9c".into())),
    );
    let (id, sub) = webhook(
        &w,
        &tenant,
        &w.receiver.url("/hooks"),
        json!({"headers": {"X-Tenant": "acme", "X-Api-Version": "2024-06"},
               "auth": {"type": "header", "name": "X-Api-Key", "value": "key-7f3a9c"}}),
    )
    .await;
    let change = w.change(&tenant.account_id).await;
    w.pipeline.pump().await.unwrap();

    let d = w
        .pipeline
        .delivery(&tenant.account_id, &change.change_id, &sub)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Delivered);
    let got = w.receiver.received();
    assert_eq!(got.len(), 1);
    let r = &got[0];
    for name in SENT_HEADERS {
        assert!(r.header(name).is_some(), "{name} missing: {:?}", r.headers);
    }
    assert_eq!(
        configured_headers(r),
        BTreeSet::from([
            "x-api-key".into(),
            "x-api-version".into(),
            "x-tenant".into()
        ]),
    );
    assert_eq!(r.header("x-tenant"), Some("acme"));
    assert_eq!(r.header("x-api-version"), Some("2024-06"));
    assert!(r.header("authorization").is_none());
    let traceparent = r.header("traceparent").unwrap();
    assert!(trace_context::is_valid(traceparent), "{traceparent}");

    // Read back: the headers as they are, the key never.
    let shown = w
        .api
        .get(&format!("/v1/integrations/{id}"), &tenant.token)
        .await;
    let shown = shown.ok();
    assert_eq!(
        shown["headers"],
        json!({"x-api-version": "2024-06", "x-tenant": "acme"})
    );
    assert_eq!(
        shown["auth"],
        json!({"type": "header", "name": "x-api-key", "value_set": true})
    );
    assert!(!shown.to_string().contains("key-7f3a9c"));

    // A test event carries the same headers and authentication.
    let test = format!("/v1/subscriptions/{sub}/test-event");
    w.api
        .call(Method::POST, &test, Some(&tenant.token), None)
        .await
        .accepted();
    w.pipeline.work_pending().await.unwrap();
    let got = w.receiver.received();
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].header("x-api-key"), Some("key-7f3a9c"));
    assert_eq!(got[1].header("x-tenant"), Some("acme"));
    assert!(trace_context::is_valid(
        got[1].header("traceparent").unwrap()
    ));
}

#[tokio::test]
async fn the_traceparent_keeps_one_trace_across_a_retry_and_differs_between_changes() {
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    let (_, sub) = webhook(&w, &tenant, &w.receiver.url("/hooks"), json!({})).await;
    w.receiver.script([Reply::Status(503)]);
    let first = w.change(&tenant.account_id).await;
    w.pipeline.pump().await.unwrap();
    w.pipeline.advance(Duration::from_secs(61)).await.unwrap();
    let d = w
        .pipeline
        .delivery(&tenant.account_id, &first.change_id, &sub)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Delivered, "{:?}", d.attempt_log);
    let second = w.change(&tenant.account_id).price(9.0).await;
    w.pipeline.pump().await.unwrap();

    let got = w.receiver.received();
    assert_eq!(got.len(), 3);
    let parts: Vec<Vec<String>> = got
        .iter()
        .map(|r| {
            let v = r.header("traceparent").unwrap();
            assert!(trace_context::is_valid(v), "{v}");
            v.split('-').map(str::to_owned).collect()
        })
        .collect();
    // The retry: one trace (the change's id as hex), another parent.
    assert_eq!(parts[0][1], parts[1][1]);
    assert_ne!(parts[0][2], parts[1][2]);
    let ulid = ulid::Ulid::from_string(&first.change_id.as_str().to_ascii_uppercase()).unwrap();
    assert_eq!(parts[0][1], format!("{:032x}", ulid.0));
    // Another change: another trace.
    assert_ne!(parts[2][1], parts[0][1]);
    assert!(second.change_id != first.change_id);
}

#[tokio::test]
async fn a_change_written_with_an_x_ray_trace_id_reaches_the_receiver_in_that_trace_on_every_attempt(
) {
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    let (_, sub) = webhook(&w, &tenant, &w.receiver.url("/hooks"), json!({})).await;
    // A retry on the schedule, then an answer that is dead, then an operator's retry.
    w.receiver.script([Reply::Status(503), Reply::Status(400)]);
    let traced = w
        .change(&tenant.account_id)
        .trace("1-5759e988-bd862e3fe1be46a994272793")
        .await;
    w.pipeline.pump().await.unwrap();
    w.pipeline.advance(Duration::from_secs(61)).await.unwrap();
    let d = w
        .pipeline
        .delivery(&tenant.account_id, &traced.change_id, &sub)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Dead, "{:?}", d.attempt_log);
    let retry = format!(
        "/operator/accounts/{}/subscriptions/{sub}/deliveries/{}/retry",
        tenant.account_id, traced.change_id
    );
    w.api
        .post(
            &retry,
            OPERATOR_TOKEN,
            json!({"reason": "the receiver is fixed"}),
        )
        .await
        .ok();
    w.pipeline.pump().await.unwrap();
    let d = w
        .pipeline
        .delivery(&tenant.account_id, &traced.change_id, &sub)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Delivered, "{:?}", d.attempt_log);
    let mapped = "5759e988bd862e3fe1be46a994272793";
    assert_eq!(d.trace_id.as_deref(), Some(mapped));
    // A malformed trace is ignored: the change id's trace, and nothing kept on the delivery.
    let malformed = w.change(&tenant.account_id).trace("1-5759e988-xyz").await;
    w.pipeline.pump().await.unwrap();
    let d = w
        .pipeline
        .delivery(&tenant.account_id, &malformed.change_id, &sub)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Delivered, "{:?}", d.attempt_log);
    assert_eq!(d.trace_id, None);

    let got = w.receiver.received();
    assert_eq!(got.len(), 4);
    let parts: Vec<Vec<String>> = got
        .iter()
        .map(|r| {
            let v = r.header("traceparent").unwrap();
            assert!(trace_context::is_valid(v), "{v}");
            v.split('-').map(str::to_owned).collect()
        })
        .collect();
    // Every attempt of the traced change, retries included: the application's trace.
    for p in &parts[..3] {
        assert_eq!(p[1], mapped);
    }
    assert_ne!(parts[0][2], parts[1][2]);
    let ulid = ulid::Ulid::from_string(&malformed.change_id.as_str().to_ascii_uppercase()).unwrap();
    assert_eq!(parts[3][1], format!("{:032x}", ulid.0));
}

#[tokio::test]
async fn basic_auth_is_sent_and_a_wrong_password_is_dead_as_a_401_is() {
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    demanding(
        &w.receiver,
        "authorization",
        Arc::new(Mutex::new(basic("rhythm", "s3cret-pw"))),
    );
    let url = w.receiver.url("/hooks");
    let (_, good) = webhook(
        &w,
        &tenant,
        &url,
        json!({"auth": {"type": "basic", "username": "rhythm", "password": "s3cret-pw"}}),
    )
    .await;
    let (wrong_id, wrong) = webhook(
        &w,
        &tenant,
        &url,
        json!({"auth": {"type": "basic", "username": "rhythm", "password": "not-it"}}),
    )
    .await;
    let change = w.change(&tenant.account_id).await;
    w.pipeline.pump().await.unwrap();
    let status = |sub| {
        let (w, acct, change) = (&w, &tenant.account_id, &change.change_id);
        async move { w.pipeline.delivery(acct, change, sub).await.unwrap() }
    };
    assert_eq!(status(&good).await.status, DeliveryStatus::Delivered);
    let dead = status(&wrong).await;
    assert_eq!(dead.status, DeliveryStatus::Dead);
    assert_eq!(dead.attempt_log.len(), 1);
    assert_eq!(dead.attempt_log[0].http_status, Some(401));
    assert_eq!(dead.attempt_log[0].class, "permanent");
    // Two integrations, one request each: no retry within the attempt without a fallback.
    assert_eq!(w.receiver.count(), 2);

    let shown = w
        .api
        .get(&format!("/v1/integrations/{wrong_id}"), &tenant.token)
        .await;
    assert_eq!(
        shown.ok()["auth"],
        json!({"type": "basic", "username": "rhythm", "password_set": true})
    );
}

/// A token endpoint on loopback: checks the client's credentials and the grant, and answers
/// `tok-<n>` (valid for an hour) for its n-th request.
pub(crate) fn token_endpoint(tokens: &Receiver, client_id: &str, secret: &str) {
    let expected = basic(client_id, secret);
    let issued = Arc::new(Mutex::new(0));
    tokens.set_responder(Arc::new(move |r: &ReceivedRequest| {
        let form = String::from_utf8_lossy(&r.body).into_owned();
        if r.header("authorization") != Some(expected.as_str())
            || !form.contains("grant_type=client_credentials")
            || r.header("content-type") != Some("application/x-www-form-urlencoded")
        {
            return Reply::Full {
                status: 401,
                headers: vec![],
                body: r#"{"error":"invalid_client"}"#.into(),
            };
        }
        let mut n = issued.lock().unwrap();
        *n += 1;
        Reply::Full {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: json!({"access_token": format!("tok-{n}"), "token_type": "Bearer",
                         "expires_in": 3600})
            .to_string(),
        }
    }));
}

#[tokio::test]
async fn an_oauth2_token_is_cached_across_deliveries_and_fetched_again_once_on_a_401() {
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    let tokens = Receiver::start().await;
    token_endpoint(&tokens, "rhythm-client", "client-s3cret");
    let accepted = Arc::new(Mutex::new("Bearer tok-1".to_owned()));
    demanding(&w.receiver, "authorization", accepted.clone());
    let (_, sub) = webhook(
        &w,
        &tenant,
        &w.receiver.url("/hooks"),
        json!({"auth": {"type": "oauth2_client_credentials", "token_url": tokens.url("/oauth/token"),
                        "client_id": "rhythm-client", "client_secret": "client-s3cret",
                        "scope": "deliveries:write"}}),
    )
    .await;

    let mut changes = Vec::new();
    for price in [1.0, 2.0] {
        changes.push(w.change(&tenant.account_id).price(price).await);
        w.pipeline.pump().await.unwrap();
    }
    // Two deliveries, one token.
    assert_eq!(tokens.count(), 1);
    assert!(
        String::from_utf8_lossy(&tokens.received()[0].body).contains("scope=deliveries%3Awrite")
    );
    assert_eq!(w.receiver.count(), 2);

    // The receiver stops accepting the cached token: the attempt fetches a new one and retries
    // once, within the same attempt.
    *accepted.lock().unwrap() = "Bearer tok-2".into();
    changes.push(w.change(&tenant.account_id).price(3.0).await);
    w.pipeline.pump().await.unwrap();
    assert_eq!(tokens.count(), 2);
    let got = w.receiver.received();
    assert_eq!(got.len(), 4);
    assert_eq!(got[2].header("authorization"), Some("Bearer tok-1"));
    assert_eq!(got[3].header("authorization"), Some("Bearer tok-2"));
    for c in &changes {
        let d = w
            .pipeline
            .delivery(&tenant.account_id, &c.change_id, &sub)
            .await
            .unwrap();
        assert_eq!(d.status, DeliveryStatus::Delivered);
        assert_eq!(d.attempt_log.len(), 1, "one attempt each");
    }

    // A fresh token refused too: the attempt ends as its 401 says, with no third token.
    *accepted.lock().unwrap() = "Bearer never".into();
    let refused = w.change(&tenant.account_id).price(4.0).await;
    w.pipeline.pump().await.unwrap();
    assert_eq!(tokens.count(), 3);
    let d = w
        .pipeline
        .delivery(&tenant.account_id, &refused.change_id, &sub)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Dead);
    assert_eq!(d.attempt_log[0].http_status, Some(401));
}

#[tokio::test]
async fn a_token_endpoint_that_fails_is_a_transient_failure_recorded_without_secrets() {
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    let tokens = Receiver::start().await;
    token_endpoint(&tokens, "rhythm-client", "the-right-s3cret");
    let (_, sub) = webhook(
        &w,
        &tenant,
        &w.receiver.url("/hooks"),
        json!({"auth": {"type": "oauth2_client_credentials", "token_url": tokens.url("/oauth/token"),
                        "client_id": "rhythm-client", "client_secret": "a-wrong-s3cret"}}),
    )
    .await;
    let change = w.change(&tenant.account_id).await;
    let (_, logs) = logged("INFO", w.pipeline.pump()).await;
    let d = w
        .pipeline
        .delivery(&tenant.account_id, &change.change_id, &sub)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Retrying);
    let attempt = &d.attempt_log[0];
    assert_eq!(attempt.class, "transient");
    assert_eq!(attempt.error.as_deref(), Some("token_endpoint"));
    let detail = attempt.detail.as_deref().unwrap();
    assert!(
        detail.contains("OAuth2 token endpoint: answered 401"),
        "{detail}"
    );
    assert_eq!(w.receiver.count(), 0, "no request without a token");
    let text = logs.text();
    assert!(
        text.contains("token_endpoint") || text.contains("OAuth2 token endpoint"),
        "{text}"
    );
    for secret in ["a-wrong-s3cret", "the-right-s3cret"] {
        assert!(!detail.contains(secret) && !text.contains(secret));
    }
}

#[tokio::test]
async fn a_replaced_credential_is_tried_after_a_401_during_its_grace_and_not_after() {
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    // The receiver still expects the old password (its side is not yet deployed).
    demanding(
        &w.receiver,
        "authorization",
        Arc::new(Mutex::new(basic("rhythm", "old-pw-1"))),
    );
    let (id, sub) = webhook(
        &w,
        &tenant,
        &w.receiver.url("/hooks"),
        json!({"auth": {"type": "basic", "username": "rhythm", "password": "old-pw-1"}}),
    )
    .await;
    let path = format!("/v1/integrations/{id}");
    let rotated = w
        .api
        .patch(
            &path,
            &tenant.token,
            json!({"auth": {"type": "basic", "username": "rhythm", "password": "new-pw-2"},
                   "rotation_grace_seconds": 3600}),
        )
        .await;
    let rotated = rotated.ok().clone();
    assert!(rotated["previous_auth_expires_at"].is_string(), "{rotated}");
    assert!(!rotated.to_string().contains("new-pw-2") && !rotated.to_string().contains("old-pw-1"));

    let during = w.change(&tenant.account_id).await;
    w.pipeline.pump().await.unwrap();
    let got = w.receiver.received();
    assert_eq!(got.len(), 2, "the new credential, then the previous one");
    assert_eq!(
        got[0].header("authorization"),
        Some(basic("rhythm", "new-pw-2").as_str())
    );
    assert_eq!(
        got[1].header("authorization"),
        Some(basic("rhythm", "old-pw-1").as_str())
    );
    let d = w
        .pipeline
        .delivery(&tenant.account_id, &during.change_id, &sub)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Delivered);

    // Past the grace only the new one is tried.
    w.pipeline.clock.advance(Duration::from_secs(3601));
    let after = w.change(&tenant.account_id).price(8.0).await;
    w.pipeline.pump().await.unwrap();
    assert_eq!(w.receiver.count(), 3);
    let d = w
        .pipeline
        .delivery(&tenant.account_id, &after.change_id, &sub)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Dead);

    // The change is audited (the modes, never a credential), and `auth: null` removes both.
    let removed = w
        .api
        .patch(&path, &tenant.token, json!({"auth": null}))
        .await;
    assert!(removed.ok().get("auth").is_none());
    let item = w
        .pipeline
        .get(
            &keys::account_pk(&tenant.account_id),
            &keys::integration_sk(&id),
        )
        .await
        .unwrap();
    assert!(!item.contains_key(ENDPOINT_AUTH) && !item.contains_key(PREVIOUS_ENDPOINT_AUTH));
}

#[tokio::test]
async fn reserved_or_malformed_headers_and_auth_are_refused_naming_them() {
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    let url = w.receiver.url("/hooks");
    let create = |extra: Value| {
        let mut body = json!({"name": "CRM", "method": "webhook", "event_access_accepted": true,
                              "webhook_url": url});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        w.api.post("/v1/integrations", &tenant.token, body)
    };
    for (extra, field, names) in [
        (
            json!({"headers": {"Webhook-Id": "x"}}),
            "headers",
            "webhook-id",
        ),
        (
            json!({"headers": {"Content-Type": "text/plain"}}),
            "headers",
            "content-type",
        ),
        (json!({"headers": {"Host": "evil.test"}}), "headers", "host"),
        (
            json!({"headers": {"Authorization": "Bearer x"}}),
            "headers",
            "authorization",
        ),
        (
            json!({"headers": {"traceparent": "00-x"}}),
            "headers",
            "traceparent",
        ),
        (
            json!({"headers": {"Transfer-Encoding": "chunked"}}),
            "headers",
            "transfer-encoding",
        ),
        (json!({"headers": {"bad name": "v"}}), "headers", "bad name"),
        (
            json!({"headers": {"x-ok": "line\nbreak"}}),
            "headers",
            "x-ok",
        ),
        (
            json!({"auth": {"type": "header", "name": "webhook-signature", "value": "v"}}),
            "auth.name",
            "webhook-signature",
        ),
        (
            json!({"auth": {"type": "basic", "username": "a:b", "password": "p"}}),
            "auth.username",
            ":",
        ),
        (
            json!({"auth": {"type": "basic", "username": "u"}}),
            "auth.password",
            "required",
        ),
        (
            json!({"auth": {"type": "digest"}}),
            "auth.type",
            "oauth2_client_credentials",
        ),
        (
            json!({"auth": {"type": "oauth2_client_credentials", "token_url": "http://169.254.169.254/latest",
                         "client_id": "c", "client_secret": "s"}}),
            "auth.token_url",
            "",
        ),
        (
            json!({"headers": {"X-Key": "v"}, "auth": {"type": "header", "name": "X-Key", "value": "s"}}),
            "headers",
            "x-key",
        ),
    ] {
        let refused = create(extra.clone()).await;
        let problem = refused.problem(StatusCode::UNPROCESSABLE_ENTITY);
        let errors = problem["errors"].as_array().unwrap();
        assert!(
            errors.iter().any(|e| e["field"] == field
                && e["message"]
                    .as_str()
                    .unwrap()
                    .to_ascii_lowercase()
                    .contains(names)),
            "{extra}: {problem}"
        );
        assert!(!problem.to_string().contains("\"s\""), "{problem}");
    }
    // The SSRF guard of the token URL is the webhook URL's own (the production policy).
    let refused = w
        .production_api()
        .post(
            "/v1/integrations",
            &tenant.token,
            json!({"name": "CRM", "method": "webhook", "event_access_accepted": true,
                   "webhook_url": "https://hooks.example.com/in",
                   "auth": {"type": "oauth2_client_credentials", "token_url": "https://127.0.0.1/token",
                            "client_id": "c", "client_secret": "s"}}),
        )
        .await;
    let problem = refused.problem(StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(problem["errors"][0]["field"], "auth.token_url", "{problem}");
    // Only webhooks have them.
    let refused = w
        .api
        .post(
            "/v1/integrations",
            &tenant.token,
            json!({"name": "Pull", "method": "poll", "event_access_accepted": true,
                   "headers": {"x-a": "b"}, "auth": {"type": "basic", "username": "u", "password": "p"}}),
        )
        .await;
    let fields = refused.fields();
    assert!(
        fields.contains(&"headers".to_owned()) && fields.contains(&"auth".to_owned()),
        "{fields:?}"
    );
}

#[tokio::test]
async fn credentials_are_never_in_api_answers_items_or_log_lines() {
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    let tokens = Receiver::start().await;
    token_endpoint(&tokens, "cid", "oauth-s3cret-zz");
    w.receiver.set_default(Reply::Status(401));
    let secrets = [
        "apikey-s3cret-xx",
        "basic-s3cret-yy",
        "oauth-s3cret-zz",
        "tok-1",
    ];
    let url = w.receiver.url("/hooks");
    let mut ids = Vec::new();
    for auth in [
        json!({"type": "header", "name": "x-api-key", "value": secrets[0]}),
        json!({"type": "basic", "username": "u", "password": secrets[1]}),
        json!({"type": "oauth2_client_credentials", "token_url": tokens.url("/t"),
               "client_id": "cid", "client_secret": secrets[2]}),
    ] {
        let (logs_out, logs) =
            logged("DEBUG", webhook(&w, &tenant, &url, json!({"auth": auth}))).await;
        ids.push(logs_out.0);
        for s in secrets {
            assert!(!logs.text().contains(s), "the API logged a credential");
        }
    }
    let listed = w.api.get("/v1/integrations", &tenant.token).await;
    let listed = listed.ok().to_string();
    for id in &ids {
        let item = w
            .pipeline
            .get(
                &keys::account_pk(&tenant.account_id),
                &keys::integration_sk(id),
            )
            .await
            .unwrap();
        let item = format!("{item:?}");
        for s in secrets {
            assert!(
                !item.contains(s) && !listed.contains(s),
                "{s} stored or shown"
            );
        }
    }
    // Every attempt refused (401), logged at the most verbose level: no credential, no token.
    w.change(&tenant.account_id).await;
    let (_, logs) = logged("DEBUG", w.pipeline.pump()).await;
    // One request each: a token fetched just now is not fetched again on a 401.
    assert_eq!(w.receiver.count(), 3);
    let text = logs.text();
    assert!(text.contains("delivery attempt"), "{text}");
    for s in secrets {
        assert!(!text.contains(s), "{s} logged");
    }
}

#[tokio::test]
async fn the_console_sets_headers_and_authentication_and_never_shows_the_secret() {
    use crate::console::{get, post, sign_in_with_token};
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    let admin = sign_in_with_token(&w, &tenant.token).await;
    let url = w.receiver.url("/hooks");
    let created = post(
        &w,
        Some(&admin.cookie),
        "/console/acct/manage/integrations",
        &[
            ("csrf", &admin.csrf),
            ("name", "CRM"),
            ("method", "webhook"),
            ("webhook_url", &url),
            ("event_access_accepted", "on"),
            ("headers", "X-Tenant: acme\nX-Region: eu"),
            ("auth_type", "basic"),
            ("auth_username", "rhythm"),
            ("auth_password", "console-pw-9"),
        ],
    )
    .await;
    assert_eq!(created.status, StatusCode::OK, "{}", created.text);
    let listed = w.api.get("/v1/integrations", &tenant.token).await;
    let view = listed.ok()["data"][0].clone();
    assert_eq!(
        view["headers"],
        json!({"x-region": "eu", "x-tenant": "acme"})
    );
    assert_eq!(view["auth"]["username"], "rhythm");
    let id = view["id"].as_str().unwrap().to_owned();

    let page = get(&w, Some(&admin.cookie), "/console/acct/manage").await;
    assert!(
        page.text.contains("data-testid=\"endpoint-auth\""),
        "{}",
        page.text
    );
    assert!(page
        .text
        .contains("HTTP basic as <code>rhythm</code> (password set)"));
    assert!(page.text.contains("x-tenant: acme"));
    assert!(!page.text.contains("console-pw-9"));

    // A reserved header is the API's refusal, in its words; the headers stay as they were.
    let endpoint = format!("/console/acct/manage/integrations/{id}/endpoint");
    let refused = post(
        &w,
        Some(&admin.cookie),
        &endpoint,
        &[
            ("csrf", &admin.csrf),
            ("headers", "Host: evil.test"),
            ("auth_type", "keep"),
        ],
    )
    .await;
    assert_eq!(
        refused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        refused.text
    );
    assert!(refused.text.contains("reserved"), "{}", refused.text);

    // A new secret header, the old password kept for an hour, and no headers.
    let saved = post(
        &w,
        Some(&admin.cookie),
        &endpoint,
        &[
            ("csrf", &admin.csrf),
            ("headers", ""),
            ("auth_type", "header"),
            ("auth_name", "X-Api-Key"),
            ("auth_value", "console-key-8"),
            ("rotation_grace_seconds", "3600"),
        ],
    )
    .await;
    assert_eq!(saved.status, StatusCode::OK, "{}", saved.text);
    assert!(!saved.text.contains("console-key-8"));
    let shown = w
        .api
        .get(&format!("/v1/integrations/{id}"), &tenant.token)
        .await;
    let shown = shown.ok();
    assert!(shown.get("headers").is_none(), "{shown}");
    assert_eq!(
        shown["auth"],
        json!({"type": "header", "name": "x-api-key", "value_set": true})
    );
    assert!(shown["previous_auth_expires_at"].is_string(), "{shown}");
}

#[tokio::test]
async fn a_hanging_token_endpoint_ends_the_attempt_within_its_timeout_as_a_transient_failure() {
    use shared::delivery::worker::internal::InternalRegistry;
    use shared::delivery::worker::webhook::WebhookAdapter;
    use shared::domain::ssrf::TargetPolicy;
    use shared::store::delivery::DeliveryWork;
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    let tokens = Receiver::start().await;
    tokens.set_default(Reply::Hang(Duration::from_secs(5)));
    let (_, sub) = webhook(
        &w,
        &tenant,
        &w.receiver.url("/hooks"),
        json!({"auth": {"type": "oauth2_client_credentials", "token_url": tokens.url("/t"),
                        "client_id": "c", "client_secret": "s"}}),
    )
    .await;
    let timeout = Duration::from_millis(800);
    let worker = w.worker_with(
        WebhookAdapter::new(TargetPolicy::LOCAL_DEMO, timeout),
        InternalRegistry::default(),
    );
    let change = w.change(&tenant.account_id).await;
    w.pipeline.ingest_pending().await.unwrap();
    let started = std::time::Instant::now();
    worker
        .process(&DeliveryWork {
            account_id: tenant.account_id.clone(),
            change_id: change.change_id.clone(),
            subscription_id: sub.clone(),
        })
        .await
        .unwrap();
    // The token request alone had the whole timeout; nothing was sent to the endpoint.
    assert!(started.elapsed() < timeout * 3, "{:?}", started.elapsed());
    assert_eq!(tokens.count(), 1);
    assert_eq!(w.receiver.count(), 0);
    let d = w
        .pipeline
        .delivery(&tenant.account_id, &change.change_id, &sub)
        .await
        .unwrap();
    assert_eq!(d.status, DeliveryStatus::Retrying);
    assert_eq!(d.attempt_log[0].class, "transient");
    // The token request's own timeout or the attempt's, whichever fires first.
    let error = d.attempt_log[0].error.as_deref();
    assert!(
        matches!(error, Some("timeout" | "token_endpoint")),
        "{error:?}"
    );
}
