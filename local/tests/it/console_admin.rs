//! An account administrator acts on their own account from the console (the `console` crate's
//! `/console/acct/…` forms): retry a dead delivery, resume a paused subscription, replay a
//! window, recover what did not arrive (within the account's daily bound), each confirmed with a
//! reason, through the operations the API calls, audited with the
//! session's credential; another account's ids answer 404 and change nothing; the CSRF token
//! and the reason are required; refusals show the API's problem. And the pages speak in names:
//! the retry policy in words, integrations and subscriptions by name, the payload that was sent
//! beside the attempts' answers.

use super::console::{assert_page, dead_delivery, get, post, sign_in_with_token, unescape};
use axum::http::StatusCode;
use local::receiver::Reply as Answer;
use local::testkit::api::ApiAccount;
use local::testkit::through_api::ApiSubscription;
use local::testkit::World;
use serde_json::json;
use shared::domain::integration_delivery::DeliveryStatus;
use shared::domain::lifecycle::Status;
use shared::domain::time::DAY;
use shared::store::keys;

/// The actor the audit records for a session signed in with `tenant`'s token.
fn token_actor(tenant: &ApiAccount) -> String {
    format!("token {}", tenant.token.split('_').nth(2).unwrap())
}

fn delivery_path(sub: &ApiSubscription, change: &impl std::fmt::Display) -> String {
    format!(
        "/console/acct/subscriptions/{}/deliveries/{change}",
        sub.subscription_id
    )
}

fn subscription_path(sub: &ApiSubscription) -> String {
    format!("/console/acct/subscriptions/{}", sub.subscription_id)
}

/// The subscription's audit entries other than its creation, through the API.
async fn audit_actions(w: &World, sub: &ApiSubscription) -> Vec<serde_json::Value> {
    let audit = w
        .api
        .get(
            &format!(
                "/operator/accounts/{}/subscriptions/{}/audit",
                sub.account_id, sub.subscription_id
            ),
            local::testkit::api::OPERATOR_TOKEN,
        )
        .await;
    let mut entries = audit.ok()["data"].as_array().unwrap().clone();
    entries.retain(|e| e["action"] != "create_subscription");
    entries
}

/// A subscription's stored status and dead count.
async fn subscription_status(w: &World, sub: &ApiSubscription) -> (String, u32) {
    let state = w.api_state();
    let stored = state
        .ops()
        .subscription(&sub.account_id, &sub.subscription_id)
        .await
        .unwrap();
    (stored.status.as_str().to_owned(), stored.consecutive_dead)
}

/// Pauses a subscription as the worker leaves it after fifty dead deliveries in a row.
async fn pause(w: &World, sub: &ApiSubscription) {
    w.update(
        &keys::account_pk(&sub.account_id),
        &keys::subscription_sk(&sub.subscription_id),
        "SET #s = :paused, consecutive_dead = :fifty, paused_at = :now",
        &[
            (":paused", shared::store::expr::s("paused")),
            (":fifty", shared::store::expr::n(50)),
            (":now", shared::store::expr::n(w.pipeline.now().millis())),
        ],
    )
    .await;
}

#[tokio::test]
async fn an_administrator_retries_a_dead_delivery_of_their_account_with_a_reason_and_the_audit_names_their_token(
) {
    let w = World::new().await;
    let (tenant, sub, dead) = dead_delivery(&w).await;
    let admin = sign_in_with_token(&w, &tenant.token).await;
    let delivery = delivery_path(&sub, &dead.change_id);
    let page = get(&w, Some(&admin.cookie), &delivery).await;
    assert_page(&page, "delivery");
    assert!(
        page.text.contains("data-testid=\"retry-link\""),
        "{}",
        page.text
    );

    let form = get(&w, Some(&admin.cookie), &format!("{delivery}/retry")).await;
    assert_page(&form, "retry form");
    assert!(form.text.contains("id=\"reason\"") && form.text.contains("required"));

    // Without the session's CSRF token: refused, nothing changes.
    let forged = post(
        &w,
        Some(&admin.cookie),
        &format!("{delivery}/retry"),
        &[("csrf", "not-the-token"), ("reason", "forged")],
    )
    .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "{}", forged.text);
    // Without a reason: the API's words, nothing changes.
    let empty = post(
        &w,
        Some(&admin.cookie),
        &format!("{delivery}/retry"),
        &[("csrf", &admin.csrf), ("reason", " ")],
    )
    .await;
    assert_eq!(empty.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        empty.text.contains("reason: must not be empty"),
        "{}",
        empty.text
    );
    assert_eq!(w.delivery_status(&sub, &dead).await, DeliveryStatus::Dead);
    assert!(audit_actions(&w, &sub).await.is_empty());

    w.receiver.set_default(Answer::Status(200));
    let done = post(
        &w,
        Some(&admin.cookie),
        &format!("{delivery}/retry"),
        &[("csrf", &admin.csrf), ("reason", "our endpoint is <back>")],
    )
    .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.text);
    assert_eq!(
        done.header("location"),
        Some(format!("{delivery}?done=retried").as_str())
    );
    let actor = token_actor(&tenant);
    let stored = w.stored_delivery(&sub, &dead).await;
    assert_eq!(stored.status, DeliveryStatus::Pending);
    assert_eq!(stored.restarted_by.as_deref(), Some(actor.as_str()));
    let entries = audit_actions(&w, &sub).await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["action"], "retry_delivery");
    assert_eq!(entries[0]["operator"], actor.as_str());
    assert_eq!(entries[0]["reason"], "our endpoint is <back>");

    // The subscription's page shows the entry, the administrator as who did it.
    let history = get(&w, Some(&admin.cookie), &subscription_path(&sub)).await;
    assert_page(&history, "subscription page");
    let row = history
        .text
        .split("data-testid=\"audit-row\"")
        .nth(1)
        .expect("an audit row");
    assert!(
        row.contains(&format!("data-testid=\"audit-operator\">{actor}<")),
        "{row}"
    );
    assert!(
        row.contains("data-testid=\"audit-role\">administrator<"),
        "{row}"
    );
    assert!(row.contains("our endpoint is &lt;back&gt;"), "{row}");

    // Delivered now: a second retry is refused with the conflict on the page.
    w.pipeline.pump().await.unwrap();
    assert_eq!(
        w.delivery_status(&sub, &dead).await,
        DeliveryStatus::Delivered
    );
    let again = post(
        &w,
        Some(&admin.cookie),
        &format!("{delivery}/retry"),
        &[("csrf", &admin.csrf), ("reason", "once more")],
    )
    .await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.text);
    assert!(again.text.contains("data-testid=\"problem\""));
    assert_eq!(audit_actions(&w, &sub).await.len(), 1);
}

#[tokio::test]
async fn another_accounts_delivery_and_subscription_answer_404_to_an_administrator_and_nothing_changes(
) {
    let w = World::new().await;
    let (_victim, sub, dead) = dead_delivery(&w).await;
    pause(&w, &sub).await;
    let other = w.api.account("Other").await;
    let admin = sign_in_with_token(&w, &other.token).await;
    let delivery = delivery_path(&sub, &dead.change_id);
    let subscription = subscription_path(&sub);
    for path in [
        delivery.clone(),
        format!("{delivery}/retry"),
        subscription.clone(),
        format!("{subscription}/resume"),
        format!("{subscription}/replay"),
        format!("{subscription}/recover"),
    ] {
        let r = get(&w, Some(&admin.cookie), &path).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "GET {path}: {}", r.text);
        assert!(!r.text.contains("id=\"reason\""), "no form for {path}");
    }
    let now = w.pipeline.now();
    let from = now.minus(DAY).to_rfc3339();
    let to = now.to_rfc3339();
    let posts: [(String, Vec<(&str, &str)>); 4] = [
        (format!("{delivery}/retry"), vec![]),
        (format!("{subscription}/resume"), vec![]),
        (
            format!("{subscription}/replay"),
            vec![("from", from.as_str()), ("to", to.as_str())],
        ),
        (
            format!("{subscription}/recover"),
            vec![("since", from.as_str()), ("statuses", "dead")],
        ),
    ];
    for (path, extra) in posts {
        let mut fields = vec![("csrf", admin.csrf.as_str()), ("reason", "not mine")];
        fields.extend(extra);
        let r = post(&w, Some(&admin.cookie), &path, &fields).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "POST {path}: {}", r.text);
    }
    assert_eq!(w.delivery_status(&sub, &dead).await, DeliveryStatus::Dead);
    assert_eq!(subscription_status(&w, &sub).await.0, "paused");
    assert!(audit_actions(&w, &sub).await.is_empty());
}

#[tokio::test]
async fn an_administrator_resumes_a_paused_subscription_and_a_second_resume_is_refused_with_the_conflict(
) {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    pause(&w, &sub).await;
    let admin = sign_in_with_token(&w, &tenant.token).await;
    let page = get(&w, Some(&admin.cookie), &subscription_path(&sub)).await;
    assert_page(&page, "subscription page");
    assert!(page.text.contains("data-testid=\"resume-link\""));
    let resume = format!("{}/resume", subscription_path(&sub));
    let form = get(&w, Some(&admin.cookie), &resume).await;
    assert_page(&form, "resume form");

    let done = post(
        &w,
        Some(&admin.cookie),
        &resume,
        &[("csrf", &admin.csrf), ("reason", "endpoint fixed")],
    )
    .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.text);
    assert_eq!(subscription_status(&w, &sub).await, ("active".into(), 0));
    let entries = audit_actions(&w, &sub).await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["operator"], token_actor(&tenant).as_str());
    assert_eq!(entries[0]["reason"], "endpoint fixed");

    let again = post(
        &w,
        Some(&admin.cookie),
        &resume,
        &[("csrf", &admin.csrf), ("reason", "again")],
    )
    .await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.text);
    assert!(again.text.contains("data-testid=\"problem-detail\""));
    assert_eq!(audit_actions(&w, &sub).await.len(), 1);
}

#[tokio::test]
async fn an_administrators_eight_day_replay_is_refused_with_the_apis_message_and_a_day_runs_as_a_job(
) {
    let w = World::new().await;
    let (tenant, sub, _dead) = dead_delivery(&w).await;
    let admin = sign_in_with_token(&w, &tenant.token).await;
    let replay = format!("{}/replay", subscription_path(&sub));
    let now = w.pipeline.now();
    let wide = post(
        &w,
        Some(&admin.cookie),
        &replay,
        &[
            ("csrf", &admin.csrf),
            ("from", &now.minus(8 * DAY).to_rfc3339()),
            ("to", &now.to_rfc3339()),
            ("reason", "too wide"),
        ],
    )
    .await;
    assert_eq!(
        wide.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        wide.text
    );
    assert!(wide.text.contains("data-testid=\"problem\""));
    assert!(audit_actions(&w, &sub).await.is_empty());

    let day = post(
        &w,
        Some(&admin.cookie),
        &replay,
        &[
            ("csrf", &admin.csrf),
            ("from", &now.minus(DAY).to_rfc3339()),
            ("to", &now.plus(shared::domain::time::MINUTE).to_rfc3339()),
            ("reason", "resend yesterday"),
        ],
    )
    .await;
    assert_eq!(day.status, StatusCode::SEE_OTHER, "{}", day.text);
    let job = day.header("location").unwrap().to_owned();
    assert!(job.starts_with("/console/acct/replays/"), "{job}");
    let page = get(&w, Some(&admin.cookie), &job).await;
    assert_page(&page, "replay job");
    assert!(page.text.contains(&token_actor(&tenant)), "{}", page.text);
    let entries = audit_actions(&w, &sub).await;
    assert_eq!(entries[0]["action"], "replay_window");
    assert_eq!(entries[0]["operator"], token_actor(&tenant).as_str());
    // Another account's administrator does not find the job.
    let other = w.api.account("Other").await;
    let stranger = sign_in_with_token(&w, &other.token).await;
    let hidden = get(&w, Some(&stranger.cookie), &job).await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_administrators_pages_name_things_and_show_the_payload_that_was_sent_beside_the_answers(
) {
    let w = World::new().await;
    let (tenant, sub, dead) = dead_delivery(&w).await;
    let admin = sign_in_with_token(&w, &tenant.token).await;

    let overview = get(&w, Some(&admin.cookie), "/console/acct").await;
    assert_page(&overview, "overview");
    // The retry policy in words (the dead_delivery tenant retries twice, a minute apart), never
    // its JSON; the account's name in the top bar.
    assert!(
        overview
            .text
            .contains("data-testid=\"retry-policy\">1 m, then dead<"),
        "{}",
        overview.text
    );
    assert!(!overview.text.contains("\"kind\""), "no raw JSON");
    assert!(
        !unescape(&overview.text).contains("{\"kind\""),
        "no raw JSON"
    );
    assert!(overview
        .text
        .contains("Administrator of <strong>Tenant</strong>"));

    let delivery = get(
        &w,
        Some(&admin.cookie),
        &delivery_path(&sub, &dead.change_id),
    )
    .await;
    assert_page(&delivery, "delivery");
    assert!(!delivery.text.contains("Log word"));
    // The payload as the receiver got it, and the attempts' answers beside it.
    let received = w.receiver.received();
    let sent = received.last().expect("the receiver was called").json();
    let shown = delivery
        .text
        .split("data-testid=\"payload\"")
        .nth(1)
        .and_then(|rest| rest.split_once('>'))
        .and_then(|(_, rest)| rest.split_once("</pre>"))
        .map(|(payload, _)| unescape(payload))
        .expect("the payload");
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown, sent);
    assert_eq!(
        delivery.text.matches("data-testid=\"attempt-row\"").count(),
        2
    );
    assert!(delivery.text.contains("data-testid=\"attempt-http\">503<"));
}

#[tokio::test]
async fn an_administrator_recovers_what_did_not_arrive_as_a_job_and_past_the_days_bound_the_page_says_429(
) {
    let w = World::new().await;
    let (tenant, sub, dead) = dead_delivery(&w).await;
    let admin = sign_in_with_token(&w, &tenant.token).await;
    let page = get(&w, Some(&admin.cookie), &subscription_path(&sub)).await;
    assert!(page.text.contains("data-testid=\"recover-link\""));
    assert!(
        page.text.contains("data-testid=\"health-chart\""),
        "{}",
        page.text
    );
    let recover = format!("{}/recover", subscription_path(&sub));
    let form = get(&w, Some(&admin.cookie), &recover).await;
    assert_page(&form, "recover form");
    assert!(form
        .text
        .contains("id=\"status-dead\" name=\"statuses\" value=\"dead\" checked"));

    let since = w.pipeline.now().minus(DAY).to_rfc3339();
    let fields = |reason: &'static str| {
        vec![
            ("csrf", admin.csrf.clone()),
            ("since", since.clone()),
            ("statuses", "dead".to_owned()),
            ("statuses", "failed".to_owned()),
            ("reason", reason.to_owned()),
        ]
    };
    let send = |f: Vec<(&'static str, String)>| {
        let path = recover.clone();
        let cookie = admin.cookie.clone();
        let w = &w;
        async move {
            let f: Vec<(&str, &str)> = f.iter().map(|(k, v)| (*k, v.as_str())).collect();
            post(w, Some(&cookie), &path, &f).await
        }
    };
    // Too far back: the operation's refusal, naming `since`.
    let mut old = fields("too old");
    old[1].1 = w.pipeline.now().minus(8 * DAY).to_rfc3339();
    let refused = send(old).await;
    assert_eq!(
        refused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        refused.text
    );
    assert!(
        refused.text.contains("<code>since</code>"),
        "{}",
        refused.text
    );

    w.receiver.set_default(Answer::Status(200));
    let started = send(fields("endpoint fixed")).await;
    assert_eq!(started.status, StatusCode::SEE_OTHER, "{}", started.text);
    let job = started.header("location").unwrap().to_owned();
    assert!(job.starts_with("/console/acct/replays/"), "{job}");
    assert_ne!(w.delivery_status(&sub, &dead).await, DeliveryStatus::Dead);
    let job_page = get(&w, Some(&admin.cookie), &job).await;
    assert_page(&job_page, "recovery job");
    assert!(job_page.text.contains("Recovery job"));
    assert!(job_page.text.contains(&token_actor(&tenant)));
    let entries = audit_actions(&w, &sub).await;
    assert_eq!(entries[0]["action"], "recover_subscription");
    assert_eq!(entries[0]["operator"], token_actor(&tenant).as_str());

    // The account's day allows ten jobs; the eleventh is refused with 429 and Retry-After, on
    // the confirmation page.
    let day = shared::domain::replay::JOBS_PER_ACCOUNT_PER_DAY;
    for _ in 1..day {
        let r = send(fields("again")).await;
        assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    }
    let bounded = send(fields("one too many")).await;
    assert_eq!(
        bounded.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        bounded.text
    );
    assert!(bounded.header("retry-after").is_some());
    assert!(bounded.text.contains("data-testid=\"problem-detail\""));
    assert!(bounded.text.contains("id=\"since\""), "the form again");
    assert_eq!(audit_actions(&w, &sub).await.len(), day as usize);
}
