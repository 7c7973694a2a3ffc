//! What an account's notices may send (`shared::notify::bounds`), through the API on the
//! emulator: recipients outside the account's administrators and its operator-managed allowlist
//! are refused (403), a notice over the recipient cap or the whole quota is 422, and the daily
//! quota of outbound recipients — a conditional counter item charged in the notice's own
//! transaction — refuses with 429 and `Retry-After` until the next UTC day of the virtual clock.

use axum::http::StatusCode;
use futures::future::join_all;
use local::testkit::api::{ApiAccount, ApiClient, OPERATOR_TOKEN};
use local::testkit::id;
use local::testkit::World;
use serde_json::{json, Value};
use shared::notify::bounds::{retry_after_secs, MAX_RECIPIENTS};
use shared::notify::notice_service::notice_id_for;
use shared::store::notice_quota::{self, utc_day, DailyCount};
use std::future::IntoFuture;
use std::time::Duration;

/// The API of the world with a daily quota of `quota` recipients.
fn api_with_quota(w: &World, quota: u32) -> ApiClient {
    let mut state = w.api_state();
    state.config.notice_daily_recipient_quota = quota;
    ApiClient::new(state)
}

fn email_notice(recipients: Value) -> Value {
    json!({
        "recipients": recipients,
        "channels": ["email", "console"],
        "subject": "Planned maintenance",
        "body": "Tonight 22:00–23:00 UTC.",
    })
}

async fn counter(w: &World, account_id: &str) -> Option<DailyCount> {
    notice_quota::get(
        &w.pipeline.stack.clients.dynamo,
        &w.pipeline.stack.config.notification_table,
        &id(account_id),
        &utc_day(w.pipeline.now()),
    )
    .await
    .unwrap()
}

/// Whether the notice of `key` was written.
async fn notice_exists(api: &ApiClient, account: &ApiAccount, key: &str) -> bool {
    let id = notice_id_for(&account.account_id, key);
    let r = api.get(&format!("/v1/notices/{id}"), &account.token).await;
    match r.status {
        StatusCode::OK => true,
        StatusCode::NOT_FOUND => false,
        other => panic!("{other} {}", r.text),
    }
}

#[tokio::test]
async fn a_recipient_outside_the_administrators_and_the_allowlist_is_refused_with_403_naming_it_and_charges_nothing(
) {
    let w = World::new().await;
    let api = &w.api;
    let account = api.account("Bounds").await;
    // The account's administrator (`admin@example.com`) needs no allowlist.
    let r = api
        .post(
            "/v1/notices",
            &account.token,
            email_notice(json!([
                "admin@example.com",
                "stranger@elsewhere.test",
                {"id": "ops", "email": "ops@elsewhere.test"},
                "user-1"
            ])),
        )
        .header("idempotency-key", "refused")
        .await;
    let problem = r.problem_of(StatusCode::FORBIDDEN, "recipient-not-allowed");
    assert_eq!(
        problem["refused_recipients"],
        json!([
            {"field": "recipients[1]", "recipient": "stranger@elsewhere.test", "channel": "email"},
            {"field": "recipients[2]", "recipient": "ops", "channel": "email"},
        ])
    );
    assert!(!notice_exists(api, &account, "refused").await);
    assert_eq!(counter(&w, account.account_id.as_str()).await, None);

    // A Slack webhook of a workspace the account is not allowed: refused on that channel.
    let r = api
        .post(
            "/v1/notices",
            &account.token,
            json!({"recipients": [{"id": "ops", "slack_webhook_url": w.receiver.url("/services/T9/B/x")}],
                   "channels": ["slack"], "subject": "s", "body": "b"}),
        )
        .header("idempotency-key", "slack")
        .await;
    assert_eq!(
        r.problem_of(StatusCode::FORBIDDEN, "recipient-not-allowed")["refused_recipients"],
        json!([{"field": "recipients[0]", "recipient": "ops", "channel": "slack"}])
    );

    // The administrator alone is accepted and charged one recipient; console-only notices
    // leave the platform for no one and are neither checked nor charged.
    api.post(
        "/v1/notices",
        &account.token,
        email_notice(json!(["admin@example.com", "user-1"])),
    )
    .header("idempotency-key", "admin")
    .await
    .accepted();
    api.post(
        "/v1/notices",
        &account.token,
        json!({"recipients": ["stranger@elsewhere.test"], "channels": ["console"],
               "subject": "s", "body": "b"}),
    )
    .header("idempotency-key", "console")
    .await
    .accepted();
    let charged = counter(&w, account.account_id.as_str()).await.unwrap();
    assert_eq!(charged.recipients, 1);
    assert_eq!(charged.day, utc_day(w.pipeline.now()));
}

#[tokio::test]
async fn an_operator_allowlist_admits_its_addresses_domains_and_slack_workspaces_and_is_audited() {
    let w = World::new().await;
    let api = &w.api;
    let account = api.account("Allowed").await;
    let other = api.account("Other").await;
    let path = format!("/operator/accounts/{}/notice-allowlist", account.account_id);
    assert_eq!(
        api.get(&path, OPERATOR_TOKEN).await.ok()["addresses"],
        json!([])
    );
    let set = api
        .put(
            &path,
            OPERATOR_TOKEN,
            json!({"addresses": ["Pager@Partner.test", "pager@partner.test"],
                   "domains": ["ACME.test"], "slack_workspaces": ["T024"],
                   "reason": "their own domain, verified by support"}),
        )
        .await;
    let expected = json!({
        "account_id": account.account_id,
        "addresses": ["Pager@Partner.test"],
        "domains": ["acme.test"],
        "slack_workspaces": ["T024"],
    });
    assert_eq!(set.ok(), &expected);
    assert_eq!(api.get(&path, OPERATOR_TOKEN).await.ok(), &expected);
    // Audited like the other operator actions.
    let audit = api
        .get(
            &format!("/operator/accounts/{}/audit", account.account_id),
            OPERATOR_TOKEN,
        )
        .await;
    let entry = audit.ok()["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "set_notice_allowlist")
        .cloned()
        .expect("an audit entry");
    assert_eq!(entry["reason"], "their own domain, verified by support");
    assert_eq!(entry["details"]["domains"], "1");
    // Bad entries are 422, each named; an unknown account is 404; the account routes need an
    // operator.
    let r = api
        .put(
            &path,
            OPERATOR_TOKEN,
            json!({"addresses": ["nope"], "domains": ["@acme.test"], "slack_workspaces": ["T/1"]}),
        )
        .await;
    assert_eq!(
        r.fields(),
        ["addresses[0]", "domains[0]", "slack_workspaces[0]"]
    );
    api.put(
        "/operator/accounts/acctmissing/notice-allowlist",
        OPERATOR_TOKEN,
        json!({}),
    )
    .await
    .problem_of(StatusCode::NOT_FOUND, "not-found");
    let status = api.get(&path, &account.token).await.status;
    assert!(
        status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN,
        "{status}"
    );

    let allowed = json!({
        "recipients": ["pager@partner.test", "anyone@acme.test",
                       {"id": "ops", "slack_webhook_url": w.receiver.url("/services/T024/B/x")}],
        "channels": ["email", "slack"], "subject": "s", "body": "b",
    });
    api.post("/v1/notices", &account.token, allowed.clone())
        .header("idempotency-key", "allowed")
        .await
        .accepted();
    assert_eq!(
        counter(&w, account.account_id.as_str())
            .await
            .unwrap()
            .recipients,
        3
    );
    // Subdomains are not included.
    let r = api
        .post(
            "/v1/notices",
            &account.token,
            email_notice(json!(["someone@mail.acme.test"])),
        )
        .header("idempotency-key", "subdomain")
        .await;
    r.problem_of(StatusCode::FORBIDDEN, "recipient-not-allowed");
    // One account's allowlist allows nothing for another, and the refusal says nothing of it.
    let r = api
        .post("/v1/notices", &other.token, allowed)
        .header("idempotency-key", "allowed")
        .await;
    let problem = r.problem_of(StatusCode::FORBIDDEN, "recipient-not-allowed");
    assert_eq!(problem["refused_recipients"].as_array().unwrap().len(), 3);
    assert!(!r.text.contains(account.account_id.as_str()));
    assert_eq!(counter(&w, other.account_id.as_str()).await, None);
}

#[tokio::test]
async fn a_notice_over_the_recipient_cap_or_the_whole_daily_quota_is_422_and_charges_nothing() {
    let w = World::new().await;
    let account = w.api.account("Cap").await;
    w.api
        .allow_recipients(
            account.account_id.as_str(),
            json!({"domains": ["acme.test"]}),
        )
        .await;
    let many: Vec<String> = (0..=MAX_RECIPIENTS)
        .map(|i| format!("r{i}@acme.test"))
        .collect();
    let r = w
        .api
        .post("/v1/notices", &account.token, email_notice(json!(many)))
        .header("idempotency-key", "cap")
        .await;
    assert_eq!(r.fields(), ["recipients"]);
    // Within the cap but more than the whole day's quota: it could never be sent.
    let small = api_with_quota(&w, 3);
    let r = small
        .post(
            "/v1/notices",
            &account.token,
            email_notice(json!([
                "a@acme.test",
                "b@acme.test",
                "c@acme.test",
                "d@acme.test"
            ])),
        )
        .header("idempotency-key", "over-quota")
        .await;
    assert_eq!(r.fields(), ["recipients"]);
    assert!(r.text.contains("daily quota of 3"), "{}", r.text);
    assert_eq!(counter(&w, account.account_id.as_str()).await, None);
}

#[tokio::test]
async fn the_daily_quota_refuses_with_429_and_retry_after_until_the_next_utc_day_and_charges_a_repeated_request_once(
) {
    let w = World::new().await;
    let api = api_with_quota(&w, 3);
    let account = w.api.account("Quota").await;
    w.api
        .allow_recipients(
            account.account_id.as_str(),
            json!({"domains": ["acme.test"]}),
        )
        .await;
    let two = email_notice(json!(["a@acme.test", "b@acme.test"]));
    let first = api
        .post("/v1/notices", &account.token, two.clone())
        .header("idempotency-key", "first")
        .await;
    let id = first.accepted()["id"].clone();
    // The same request again: the same notice, not charged again.
    let again = api
        .post("/v1/notices", &account.token, two.clone())
        .header("idempotency-key", "first")
        .await;
    assert_eq!(again.ok()["id"], id);
    assert_eq!(
        counter(&w, account.account_id.as_str())
            .await
            .unwrap()
            .recipients,
        2
    );
    // Another request under the same key: 409, not charged.
    api.post(
        "/v1/notices",
        &account.token,
        email_notice(json!(["c@acme.test"])),
    )
    .header("idempotency-key", "first")
    .await
    .problem_of(StatusCode::CONFLICT, "conflict");
    assert_eq!(
        counter(&w, account.account_id.as_str())
            .await
            .unwrap()
            .recipients,
        2
    );

    // Two more do not fit the three of the day: 429, and no notice is written.
    let r = api
        .post("/v1/notices", &account.token, two.clone())
        .header("idempotency-key", "second")
        .await;
    let problem = r.problem_of(StatusCode::TOO_MANY_REQUESTS, "quota-exceeded");
    assert!(problem["detail"].as_str().unwrap().contains("3 recipients"));
    let expected = retry_after_secs(w.pipeline.now());
    assert!((1..=86_400).contains(&expected));
    assert_eq!(r.header("retry-after"), Some(&*expected.to_string()));
    assert!(!notice_exists(&api, &account, "second").await);
    assert_eq!(
        counter(&w, account.account_id.as_str())
            .await
            .unwrap()
            .recipients,
        2
    );
    // One more fits exactly; then the day is full even for one.
    api.post(
        "/v1/notices",
        &account.token,
        email_notice(json!(["c@acme.test"])),
    )
    .header("idempotency-key", "third")
    .await
    .accepted();
    api.post(
        "/v1/notices",
        &account.token,
        email_notice(json!(["d@acme.test"])),
    )
    .header("idempotency-key", "fourth")
    .await
    .problem_of(StatusCode::TOO_MANY_REQUESTS, "quota-exceeded");
    // A full day still answers a repeated request with its notice.
    api.post("/v1/notices", &account.token, two)
        .header("idempotency-key", "first")
        .await
        .ok();
    assert_eq!(
        counter(&w, account.account_id.as_str())
            .await
            .unwrap()
            .recipients,
        3
    );
    // Another account has its own quota.
    let other = w.api.account("Other").await;
    api.post(
        "/v1/notices",
        &other.token,
        email_notice(json!(["admin@example.com"])),
    )
    .header("idempotency-key", "first")
    .await
    .accepted();
}

#[tokio::test]
async fn concurrent_notices_never_pass_the_quota_and_the_counter_is_exactly_what_was_accepted() {
    let w = World::new().await;
    let api = api_with_quota(&w, 10);
    let account = w.api.account("Race").await;
    w.api
        .allow_recipients(
            account.account_id.as_str(),
            json!({"domains": ["acme.test"]}),
        )
        .await;
    // Eight notices of three recipients at once against a quota of ten.
    let replies = join_all((0..8).map(|i| {
        api.post(
            "/v1/notices",
            &account.token,
            email_notice(json!([
                format!("a{i}@acme.test"),
                format!("b{i}@acme.test"),
                format!("c{i}@acme.test")
            ])),
        )
        .header("idempotency-key", &format!("race-{i}"))
        .into_future()
    }))
    .await;
    let accepted = replies
        .iter()
        .filter(|r| r.status == StatusCode::ACCEPTED)
        .count();
    for r in replies.iter().filter(|r| r.status != StatusCode::ACCEPTED) {
        r.problem_of(StatusCode::TOO_MANY_REQUESTS, "quota-exceeded");
    }
    // 3 × 3 = 9 fits; a fourth would make 12.
    assert_eq!(accepted, 3);
    assert_eq!(
        counter(&w, account.account_id.as_str())
            .await
            .unwrap()
            .recipients,
        9
    );
    let mut written = 0;
    for i in 0..8 {
        written += notice_exists(&api, &account, &format!("race-{i}")).await as usize;
    }
    assert_eq!(written, accepted);
}

#[tokio::test]
async fn the_quota_counter_rolls_over_at_utc_midnight_on_the_virtual_clock() {
    let w = World::new().await;
    let api = api_with_quota(&w, 1);
    let account = w.api.account("Midnight").await;
    // Thirty seconds before the next UTC midnight.
    let to_midnight = retry_after_secs(w.pipeline.now());
    w.pipeline
        .clock
        .advance(Duration::from_secs(to_midnight).saturating_sub(Duration::from_secs(30)));
    let before = utc_day(w.pipeline.now());
    let one = || email_notice(json!(["admin@example.com"]));
    api.post("/v1/notices", &account.token, one())
        .header("idempotency-key", "late")
        .await
        .accepted();
    let r = api
        .post("/v1/notices", &account.token, one())
        .header("idempotency-key", "too-late")
        .await;
    r.problem_of(StatusCode::TOO_MANY_REQUESTS, "quota-exceeded");
    let wait: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((29..=30).contains(&wait), "{wait}");
    let old = counter(&w, account.account_id.as_str()).await.unwrap();

    w.pipeline.clock.advance(Duration::from_secs(wait));
    assert_ne!(utc_day(w.pipeline.now()), before);
    api.post("/v1/notices", &account.token, one())
        .header("idempotency-key", "too-late")
        .await
        .accepted();
    let new = counter(&w, account.account_id.as_str()).await.unwrap();
    assert_eq!(
        (new.recipients, new.day.clone()),
        (1, utc_day(w.pipeline.now()))
    );
    // Each day's counter expires (TTL) the day after its own ends.
    assert_eq!(old.day, before);
    assert_eq!(new.expires_at - old.expires_at, 86_400);
    assert!(new.expires_at > w.pipeline.now().seconds() + 86_400);
}

/// A subject is one line (an email's Subject header, a Slack message's first line): one with a
/// line break or another control character is a 422 naming `subject`, and nothing is written
/// or charged.
#[tokio::test]
async fn a_notice_subject_with_a_control_character_is_422_and_nothing_is_written() {
    let w = World::new().await;
    let account = w.api.account("Subjects").await;
    for (key, subject) in [
        ("crlf", "Maintenance\r\nBcc: everyone@example.com"),
        ("tab", "Main\ttenance"),
        ("nul", "Maint\u{0}enance"),
    ] {
        let mut notice = email_notice(json!(["admin@example.com"]));
        notice["subject"] = json!(subject);
        let r = w
            .api
            .post("/v1/notices", &account.token, notice)
            .header("idempotency-key", key)
            .await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
        assert_eq!(r.fields(), ["subject"], "{subject:?}");
        assert!(r.text.contains("control characters"), "{}", r.text);
        assert!(!notice_exists(&w.api, &account, key).await);
    }
    assert_eq!(counter(&w, account.account_id.as_str()).await, None);
}
