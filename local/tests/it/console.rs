//! The web console's HTTP behaviour (the `console` crate) on the emulator, through the test world's
//! API router: sign-in by link and by token and the session cookie's attributes, refused links
//! and cookies, CSRF, every page's audience and security headers, account isolation, an audited
//! retry through a form, the API's refusal of an eight-day replay, and the Event monitor's page
//! weight with 1,000 events. (The browser tests drive the same pages in Chromium.)

use axum::http::{Method, StatusCode};
use console::page::CSP;
use local::receiver::Reply as Answer;
use local::testkit::api::{ApiAccount, ApiClient, Reply, OPERATOR, OPERATOR_TOKEN};
use local::testkit::through_api::ApiSubscription;
use local::testkit::World;
use serde_json::json;
use shared::domain::change::Change;
use shared::domain::integration_delivery::DeliveryStatus;
use shared::domain::time::{Timestamp, DAY, MINUTE, SECOND};
use shared::web::console_session::{COOKIE, LINK_TTL, OPERATOR_SESSION_TTL, SESSION_TTL};
use std::time::Instant;

// ------------------------------------------------------------------------------------ harness

/// A signed-in browser: the session cookie and the session's CSRF token.
pub(crate) struct Browser {
    pub(crate) cookie: String,
    pub(crate) csrf: String,
}

const FORM: &str = "application/x-www-form-urlencoded";

fn form(fields: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish()
}

pub(crate) async fn get(w: &World, cookie: Option<&str>, path: &str) -> Reply {
    get_on(&w.api, cookie, path).await
}

async fn get_on(api: &ApiClient, cookie: Option<&str>, path: &str) -> Reply {
    let mut call = api.call(Method::GET, path, None, None);
    if let Some(c) = cookie {
        call = call.header("cookie", &format!("{COOKIE}={c}"));
    }
    call.await
}

/// A form POST as a browser sends it from the console's own pages (`Sec-Fetch-Site`).
pub(crate) async fn post(
    w: &World,
    cookie: Option<&str>,
    path: &str,
    fields: &[(&str, &str)],
) -> Reply {
    post_on(&w.api, cookie, path, fields).await
}

async fn post_on(
    api: &ApiClient,
    cookie: Option<&str>,
    path: &str,
    fields: &[(&str, &str)],
) -> Reply {
    let mut call = api
        .call(Method::POST, path, None, None)
        .header("sec-fetch-site", "same-origin")
        .body(Some(FORM), form(fields));
    if let Some(c) = cookie {
        call = call.header("cookie", &format!("{COOKIE}={c}"));
    }
    call.await
}

/// The value of the session cookie a sign-in set, after checking its attributes, and its
/// `Max-Age` in seconds.
fn session_cookie_and_age(reply: &Reply) -> (String, u64) {
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.text);
    let set = reply.header("set-cookie").expect("a session cookie");
    let mut parts = set.split(';').map(str::trim);
    let (name, value) = parts.next().unwrap().split_once('=').unwrap();
    assert_eq!(name, "__Host-rhythm_console");
    let attrs: Vec<&str> = parts.collect();
    for expected in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/"] {
        assert!(attrs.contains(&expected), "{expected} in {set}");
    }
    assert!(
        !set.contains("Domain"),
        "a __Host- cookie names no domain: {set}"
    );
    let age = attrs
        .iter()
        .find_map(|a| a.strip_prefix("Max-Age="))
        .and_then(|a| a.parse().ok())
        .expect("a Max-Age");
    assert!(age <= SESSION_TTL.as_secs(), "{set}");
    (value.to_owned(), age)
}

fn session_cookie(reply: &Reply) -> String {
    session_cookie_and_age(reply).0
}

/// The CSRF token a page's forms carry.
pub(crate) fn csrf_of(html: &str) -> String {
    let at = html
        .find("name=\"csrf\" value=\"")
        .expect("a form with the CSRF field");
    let rest = &html[at + "name=\"csrf\" value=\"".len()..];
    rest[..rest.find('"').unwrap()].to_owned()
}

/// Undoes maud's escaping of text, to compare a page's text with the API's.
pub(crate) fn unescape(html: &str) -> String {
    html.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// A login link's path from the operator route (for the operator, or an account's administrator).
pub(crate) async fn operator_link(w: &World, body: serde_json::Value) -> String {
    let r = w
        .api
        .post("/operator/console-links", OPERATOR_TOKEN, body)
        .await;
    r.created()["url"].as_str().unwrap().to_owned()
}

/// Opens a login link, clicks Continue, and reads the session off the first page.
pub(crate) async fn sign_in_with_link(w: &World, link: &str) -> Browser {
    let page = get(w, None, link).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(page.text.contains("data-testid=\"login-continue\""));
    let token = link.split_once("link=").unwrap().1;
    let signed = post(w, None, "/console/login", &[("link", token)]).await;
    browser(w, session_cookie(&signed)).await
}

pub(crate) async fn sign_in_with_token(w: &World, token: &str) -> Browser {
    let signed = post(w, None, "/console/login", &[("token", token)]).await;
    browser(w, session_cookie(&signed)).await
}

async fn browser(w: &World, cookie: String) -> Browser {
    let home = get(w, Some(&cookie), "/console/").await;
    assert_eq!(home.status, StatusCode::SEE_OTHER);
    let to = home.header("location").unwrap().to_owned();
    let page = get(w, Some(&cookie), &to).await;
    assert_eq!(page.status, StatusCode::OK, "{to}: {}", page.text);
    Browser {
        csrf: csrf_of(&page.text),
        cookie,
    }
}

pub(crate) async fn operator(w: &World) -> Browser {
    sign_in_with_link(w, &operator_link(w, json!({})).await).await
}

/// A tenant whose one webhook delivery is dead (the receiver answered 503 twice).
pub(crate) async fn dead_delivery(w: &World) -> (ApiAccount, ApiSubscription, Change) {
    w.receiver.set_default(Answer::Status(503));
    let tenant = w.api.account("Tenant").await;
    let sub = w
        .subscribe_through_api(
            &tenant,
            "webhook",
            json!({"retry_policy": {"kind": "exponential", "max_retries": 2, "retry_delay_secs": 60}}),
        )
        .await;
    let changes = w.write_changes(&sub.account_id, &[w.pipeline.now()]).await;
    w.pipeline.advance(2 * MINUTE).await.unwrap();
    assert_eq!(
        w.delivery_status(&sub, &changes[0]).await,
        DeliveryStatus::Dead
    );
    (tenant, sub, changes[0].clone())
}

/// The integration of a subscription made through the API.
async fn integration_of(w: &World, tenant: &ApiAccount, sub: &ApiSubscription) -> String {
    let path = format!("/v1/subscriptions/{}", sub.subscription_id);
    let read = w.api.get(&path, &tenant.token).await;
    read.ok()["integration_id"].as_str().unwrap().to_owned()
}

pub(crate) fn assert_page(reply: &Reply, path: &str) {
    assert_eq!(reply.status, StatusCode::OK, "{path}: {}", reply.text);
    assert_eq!(
        reply.header("content-type"),
        Some("text/html; charset=utf-8"),
        "{path}"
    );
    assert_secure(reply, path);
    assert_eq!(reply.header("cache-control"), Some("no-store"), "{path}");
    assert!(reply.text.starts_with("<!DOCTYPE html>"), "{path}");
    assert!(!reply.text.contains("<script>"), "{path}: no inline script");
    assert!(!reply.text.contains(" style="), "{path}: no inline style");
}

fn assert_secure(reply: &Reply, path: &str) {
    assert_eq!(reply.header("content-security-policy"), Some(CSP), "{path}");
    assert_eq!(
        reply.header("x-content-type-options"),
        Some("nosniff"),
        "{path}"
    );
    assert_eq!(
        reply.header("referrer-policy"),
        Some("no-referrer"),
        "{path}"
    );
}

// ------------------------------------------------------------------------------------ sign-in

#[tokio::test]
async fn signing_in_by_link_or_by_token_sets_a_strict_secure_http_only_session_cookie() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;

    // An operator's own link: an operator session.
    let op = operator(&w).await;
    let events = get(&w, Some(&op.cookie), "/console/op").await;
    assert_page(&events, "/console/op");
    assert!(events.text.contains(OPERATOR), "{}", events.text);

    // An operator's link for an account's administrator, audited in the account's history.
    let link = operator_link(
        &w,
        json!({"account_id": tenant.account_id, "reason": "support call 42"}),
    )
    .await;
    let admin = sign_in_with_link(&w, &link).await;
    let overview = get(&w, Some(&admin.cookie), "/console/acct").await;
    assert_page(&overview, "/console/acct");
    assert!(overview.text.contains(tenant.account_id.as_str()));
    let audit = w
        .api
        .get(
            &format!("/operator/accounts/{}/audit", tenant.account_id),
            OPERATOR_TOKEN,
        )
        .await;
    let entry = audit.ok()["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == "issue_console_link")
        .cloned()
        .expect("the link's audit entry");
    assert_eq!(entry["operator"], OPERATOR);
    assert_eq!(entry["reason"], "support call 42");

    // The account's own route issues a link for the account only.
    let own = w
        .api
        .post("/v1/console-links", &tenant.token, json!({}))
        .await;
    assert_eq!(own.created()["audience"], "account");
    assert_eq!(
        own.json["account_id"].as_str(),
        Some(tenant.account_id.as_str())
    );
    assert_eq!(own.json["expires_in"], LINK_TTL.as_secs());

    // Pasting the account token, or the local operator token.
    let by_token = sign_in_with_token(&w, &tenant.token).await;
    assert_page(
        &get(&w, Some(&by_token.cookie), "/console/acct/events").await,
        "/console/acct/events",
    );
    let op_by_token = sign_in_with_token(&w, OPERATOR_TOKEN).await;
    assert_page(
        &get(&w, Some(&op_by_token.cookie), "/console/op").await,
        "/console/op",
    );

    // Sign-out clears the cookie (a CSRF-checked POST).
    let out = post(
        &w,
        Some(&op.cookie),
        "/console/logout",
        &[("csrf", &op.csrf)],
    )
    .await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
}

#[tokio::test]
async fn an_expired_or_forged_link_or_cookie_is_refused() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;

    // A forged link (its claims changed), a link of another key, a bad token.
    let link = operator_link(&w, json!({})).await;
    let token = link.split_once("link=").unwrap().1.to_owned();
    let (body, tag) = token.split_once('.').unwrap();
    let mut forged_body = body.to_owned();
    forged_body.replace_range(..2, if body.starts_with("ey") { "ez" } else { "ey" });
    for bad in [
        format!("{forged_body}.{tag}"),
        format!("{body}.AAAA"),
        "x".into(),
    ] {
        let page = get(&w, None, &format!("/console/login?link={bad}")).await;
        assert_eq!(page.status, StatusCode::UNAUTHORIZED, "{bad}");
        assert_secure(&page, "login");
        let signed = post(&w, None, "/console/login", &[("link", &bad)]).await;
        assert_eq!(signed.status, StatusCode::UNAUTHORIZED);
        assert!(signed.header("set-cookie").is_none());
    }
    for bad in ["rhy_acct_nope", "not-the-operator-token"] {
        let signed = post(&w, None, "/console/login", &[("token", bad)]).await;
        assert_eq!(signed.status, StatusCode::UNAUTHORIZED, "{bad}");
        assert!(signed.header("set-cookie").is_none());
    }

    // A forged cookie.
    let op = operator(&w).await;
    let (c_body, c_tag) = op.cookie.split_once('.').unwrap();
    let page = get(&w, Some(&format!("{c_body}x.{c_tag}")), "/console/op").await;
    assert_eq!(page.status, StatusCode::UNAUTHORIZED);
    assert!(page.text.contains("data-testid=\"session-refused\""));
    // No cookie at all: a page sends the browser to sign in.
    let anonymous = get(&w, None, "/console/op/events").await;
    assert_eq!(anonymous.status, StatusCode::SEE_OTHER);
    assert_eq!(anonymous.header("location"), Some("/console/login"));

    // A link expires after LINK_TTL, a session after SESSION_TTL.
    let admin_link = operator_link(&w, json!({"account_id": tenant.account_id})).await;
    w.pipeline.clock.advance(LINK_TTL + SECOND);
    let late = get(&w, None, &admin_link).await;
    assert_eq!(late.status, StatusCode::UNAUTHORIZED);
    assert!(late.text.contains("expired"), "{}", late.text);
    assert_page(
        &get(&w, Some(&op.cookie), "/console/op").await,
        "/console/op",
    );
    w.pipeline.clock.advance(SESSION_TTL);
    let stale = get(&w, Some(&op.cookie), "/console/op").await;
    assert_eq!(stale.status, StatusCode::UNAUTHORIZED);
    assert!(stale.text.contains("expired"), "{}", stale.text);
}

#[tokio::test]
async fn a_post_without_this_sessions_csrf_token_is_refused() {
    let w = World::new().await;
    let (_tenant, sub, dead) = dead_delivery(&w).await;
    let change = dead.change_id.to_string();
    let op = operator(&w).await;
    let other = operator(&w).await;
    let retry = format!(
        "/console/op/accounts/{}/subscriptions/{}/deliveries/{change}/retry",
        sub.account_id, sub.subscription_id
    );
    for fields in [
        vec![("reason", "no token")],
        vec![("reason", "wrong token"), ("csrf", "nope")],
        vec![
            ("reason", "another session's"),
            ("csrf", other.csrf.as_str()),
        ],
    ] {
        let r = post(&w, Some(&op.cookie), &retry, &fields).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{fields:?}: {}", r.text);
        assert!(r.text.contains("CSRF"));
    }
    assert_eq!(
        w.delivery_status(&sub, &dead).await,
        DeliveryStatus::Dead,
        "nothing was retried"
    );
    let out = post(&w, Some(&op.cookie), "/console/logout", &[]).await;
    assert_eq!(out.status, StatusCode::FORBIDDEN);
}

// ------------------------------------------------------------------------------------ pages

#[tokio::test]
async fn every_console_page_answers_html_with_the_csp_for_its_audience_only() {
    let w = World::new().await;
    let (tenant, sub, dead) = dead_delivery(&w).await;
    let change = dead.change_id.to_string();
    let (a, s) = (&sub.account_id, &sub.subscription_id);
    let op = operator(&w).await;
    let admin = sign_in_with_token(&w, &tenant.token).await;

    let operator_pages = [
        "/console/op".to_string(),
        "/console/op?q=Ten".to_string(),
        format!("/console/op/events?account={a}"),
        format!("/console/op/events?account={a}&status=failed&internal=new&code=catalog.updated"),
        format!("/console/op/accounts/{a}"),
        format!("/console/op/accounts/{a}/events/{change}"),
        format!("/console/op/accounts/{a}/subscriptions/{s}"),
        format!("/console/op/accounts/{a}/subscriptions/{s}?status=dead"),
        format!("/console/op/accounts/{a}/subscriptions/{s}/deliveries/{change}"),
        format!("/console/op/accounts/{a}/subscriptions/{s}/deliveries/{change}/retry"),
        format!("/console/op/accounts/{a}/subscriptions/{s}/resume"),
        format!("/console/op/accounts/{a}/subscriptions/{s}/replay"),
        format!("/console/op/attention?account={a}"),
        "/console/op/attention".to_string(),
        format!("/console/op/replays?account={a}"),
        "/console/op/notifications".to_string(),
    ];
    let account_pages = [
        "/console/acct".to_string(),
        "/console/acct/events".to_string(),
        "/console/acct/events?status=failed".to_string(),
        format!("/console/acct/events/{change}"),
        format!("/console/acct/subscriptions/{s}/deliveries/{change}"),
        format!("/console/acct/subscriptions/{s}"),
        format!("/console/acct/subscriptions/{s}?status=dead"),
        "/console/acct/manage".to_string(),
        "/console/acct/attention".to_string(),
    ];
    for path in &operator_pages {
        assert_page(&get(&w, Some(&op.cookie), path).await, path);
        let refused = get(&w, Some(&admin.cookie), path).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{path}");
        assert_secure(&refused, path);
    }
    for path in &account_pages {
        assert_page(&get(&w, Some(&admin.cookie), path).await, path);
        let refused = get(&w, Some(&op.cookie), path).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{path}");
    }

    // What the pages show: the event's statuses and the dead delivery's log line.
    let event = get(
        &w,
        Some(&admin.cookie),
        &format!("/console/acct/events/{change}"),
    )
    .await;
    for (testid, status) in [("event-status", "failed"), ("delivery-status", "dead")] {
        assert!(
            event.text.contains(&format!(
                "data-testid=\"{testid}\"><span class=\"badge s-{status}\""
            )),
            "{testid} {status}: {}",
            event.text
        );
    }
    assert!(event.text.contains("data-testid=\"http-code\">503<"));
    let attention = get(
        &w,
        Some(&op.cookie),
        &format!("/console/op/attention?account={a}"),
    )
    .await;
    assert!(attention.text.contains(&format!(
        "data-delivery-id=\"{}\"",
        shared::store::keys::delivery_id(&dead.change_id, s)
    )));

    // The assets the pages name: hashed names, cached for a year, with the CSP too.
    let page = get(&w, Some(&op.cookie), "/console/op").await;
    let mut assets = 0;
    for chunk in page.text.split("/console/assets/").skip(1) {
        let name = &chunk[..chunk.find('"').unwrap()];
        let asset = get(&w, None, &format!("/console/assets/{name}")).await;
        assert_eq!(asset.status, StatusCode::OK, "{name}");
        assert_eq!(
            asset.header("cache-control"),
            Some("public, max-age=31536000, immutable")
        );
        assert_secure(&asset, name);
        assets += 1;
    }
    assert_eq!(assets, 3, "the stylesheet, htmx and console.js");
    let missing = get(&w, None, "/console/assets/console.0000000000.css").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);

    // Filters refused by the API's own checks show its problem.
    let bad = get(
        &w,
        Some(&op.cookie),
        &format!("/console/op/events?account={a}&status=done"),
    )
    .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        unescape(&bad.text).contains("\"done\" is not an event status"),
        "{}",
        bad.text
    );
}

#[tokio::test]
async fn the_operator_home_lists_accounts_with_their_health_and_the_queue_links_to_the_retry_form()
{
    let w = World::new().await;
    let (tenant, sub, dead) = dead_delivery(&w).await;
    let quiet = w.api.account("Quiet Co").await;
    let op = operator(&w).await;
    let a = &tenant.account_id;

    let home = get(&w, Some(&op.cookie), "/console/op").await;
    assert_page(&home, "/console/op");
    // The account with trouble comes first, its dead delivery counted, a link to its monitor.
    let tenant_row = home
        .text
        .find(&format!("data-account-id=\"{a}\""))
        .expect("the tenant is listed");
    let quiet_row = home
        .text
        .find(&format!("data-account-id=\"{}\"", quiet.account_id))
        .expect("the quiet account is listed");
    assert!(tenant_row < quiet_row, "newest trouble first");
    let row = &home.text[tenant_row..quiet_row];
    assert!(row.contains("data-testid=\"health-dead\">1<"), "{row}");
    assert!(row.contains(&format!("href=\"/console/op/events?account={a}\"")));
    let found = get(&w, Some(&op.cookie), "/console/op?q=quiet").await;
    assert_page(&found, "/console/op?q=quiet");
    assert!(found.text.contains("Quiet Co") && !found.text.contains(a.as_str()));

    let queue = get(&w, Some(&op.cookie), "/console/op/attention").await;
    assert_page(&queue, "/console/op/attention");
    assert!(queue.text.contains("data-kind=\"dead_delivery\""));
    assert!(queue.text.contains(">Tenant<"), "the account's name");
    let retry = format!(
        "/console/op/accounts/{a}/subscriptions/{}/deliveries/{}/retry",
        sub.subscription_id, dead.change_id
    );
    assert!(
        queue.text.contains(&format!("href=\"{retry}\"")),
        "{}",
        queue.text
    );
    assert_page(&get(&w, Some(&op.cookie), &retry).await, &retry);
}

#[tokio::test]
async fn an_exhausted_notification_shows_in_the_home_figures_and_the_queue_links_to_its_requeue_form(
) {
    let w = World::new().await;
    let notices = w
        .account()
        .id(w.notify.account.as_str())
        .named("Notices Co")
        .await;
    let slack = local::receiver::Receiver::start().await;
    let (notice, _) = crate::notifications::exhaust(&w.notify, &slack, "Slack down").await;
    let op = operator(&w).await;
    let a = &notices.account_id;

    let home = get(&w, Some(&op.cookie), "/console/op").await;
    assert_page(&home, "/console/op");
    assert!(home.text.contains("Notices failed"));
    let row = home
        .text
        .find(&format!("data-account-id=\"{a}\""))
        .map(|at| &home.text[at..])
        .expect("the account is listed");
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.contains("data-testid=\"health-notices-failed\">1<"),
        "{row}"
    );

    let queue = get(&w, Some(&op.cookie), "/console/op/attention").await;
    assert_page(&queue, "/console/op/attention");
    assert!(queue.text.contains("data-kind=\"exhausted_notification\""));
    assert!(queue.text.contains(">Notices Co<"), "the account's name");
    let n = &notice.request.notice_id;
    let requeue = format!("/console/op/notifications/{n}/deliveries/slack-0/requeue");
    assert!(
        queue.text.contains(&format!("href=\"{requeue}\"")),
        "{}",
        queue.text
    );
    assert_page(&get(&w, Some(&op.cookie), &requeue).await, &requeue);

    w.api
        .post(
            &format!("/operator/notifications/{n}/deliveries/slack-0/requeue"),
            OPERATOR_TOKEN,
            json!({"reason": "Slack is back"}),
        )
        .await
        .ok();
    let queue = get(&w, Some(&op.cookie), "/console/op/attention").await;
    assert!(!queue.text.contains("data-kind=\"exhausted_notification\""));
}

#[tokio::test]
async fn unknown_console_paths_answer_the_consoles_own_404_page() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let op = operator(&w).await;
    let admin = sign_in_with_token(&w, &tenant.token).await;
    for (cookie, path, nav) in [
        (None, "/console/nothing-here", None),
        (
            Some(&op.cookie),
            "/console/op/nothing/here",
            Some("nav-accounts"),
        ),
        (
            Some(&admin.cookie),
            "/console/acct/nothing",
            Some("nav-overview"),
        ),
    ] {
        let r = get(&w, cookie.map(String::as_str), path).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
        assert_secure(&r, path);
        assert!(r.text.starts_with("<!DOCTYPE html>"), "{path}");
        assert!(r.text.contains("<html lang=\"en\">"), "{path}");
        assert!(r
            .text
            .contains("<title>Page not found · Rhythm delivery console</title>"));
        assert!(r.text.contains("data-testid=\"not-found\""), "{path}");
        if let Some(nav) = nav {
            assert!(r.text.contains(&format!("data-testid=\"{nav}\"")), "{path}");
        }
    }
}

#[tokio::test]
async fn an_account_administrator_cannot_reach_another_accounts_event_by_url() {
    let w = World::new().await;
    let (_tenant, sub, dead) = dead_delivery(&w).await;
    let change = dead.change_id.to_string();
    let other = w.api.account("Other").await;
    let admin = sign_in_with_token(&w, &other.token).await;
    for path in [
        format!("/console/acct/events/{change}"),
        format!(
            "/console/acct/subscriptions/{}/deliveries/{change}",
            sub.subscription_id
        ),
    ] {
        let r = get(&w, Some(&admin.cookie), &path).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}: {}", r.text);
        assert!(r.text.contains("data-testid=\"problem\""));
        assert!(
            !r.text.contains(sub.subscription_id.as_str()),
            "nothing of it shows"
        );
    }
    let list = get(&w, Some(&admin.cookie), "/console/acct/events").await;
    assert!(!list.text.contains(&change));
    // The operator URL of it is refused to an account session outright.
    let op_url = format!("/console/op/accounts/{}/events/{change}", sub.account_id);
    assert_eq!(
        get(&w, Some(&admin.cookie), &op_url).await.status,
        StatusCode::FORBIDDEN
    );
}

// ------------------------------------------------------------------------------------ actions

#[tokio::test]
async fn a_retry_through_the_console_form_lands_in_the_audit_with_its_reason() {
    let w = World::new().await;
    let (_tenant, sub, dead) = dead_delivery(&w).await;
    let change = dead.change_id.to_string();
    let op = operator(&w).await;
    let delivery = format!(
        "/console/op/accounts/{}/subscriptions/{}/deliveries/{change}",
        sub.account_id, sub.subscription_id
    );
    let form_page = get(&w, Some(&op.cookie), &format!("{delivery}/retry")).await;
    assert_page(&form_page, "retry form");
    assert!(form_page.text.contains("id=\"reason\""));

    // The reason is required, with the API's words.
    let empty = post(
        &w,
        Some(&op.cookie),
        &format!("{delivery}/retry"),
        &[("csrf", &op.csrf), ("reason", "  ")],
    )
    .await;
    assert_eq!(empty.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        empty.text.contains("reason: must not be empty"),
        "{}",
        empty.text
    );

    w.receiver.set_default(Answer::Status(200));
    let done = post(
        &w,
        Some(&op.cookie),
        &format!("{delivery}/retry"),
        &[
            ("csrf", &op.csrf),
            ("reason", "receiver back after <maintenance>"),
        ],
    )
    .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.text);
    assert_eq!(
        done.header("location"),
        Some(format!("{delivery}?done=retried").as_str())
    );
    let stored = w.stored_delivery(&sub, &dead).await;
    assert_eq!(stored.status, DeliveryStatus::Pending);
    assert_eq!(stored.restarted_by.as_deref(), Some(OPERATOR));

    // The audit, through the API and on the Integration history page.
    let audit = w
        .api
        .get(
            &format!(
                "/operator/accounts/{}/subscriptions/{}/audit",
                sub.account_id, sub.subscription_id
            ),
            OPERATOR_TOKEN,
        )
        .await;
    let mut entries = audit.ok()["data"].as_array().unwrap().clone();
    // (The subscription's creation is audited too.)
    entries.retain(|e| e["action"] != "create_subscription");
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["action"], "retry_delivery");
    assert_eq!(entries[0]["operator"], OPERATOR);
    assert_eq!(entries[0]["reason"], "receiver back after <maintenance>");
    assert_eq!(entries[0]["change_id"].as_str(), Some(change.as_str()));
    let history = get(
        &w,
        Some(&op.cookie),
        &format!(
            "/console/op/accounts/{}/subscriptions/{}",
            sub.account_id, sub.subscription_id
        ),
    )
    .await;
    assert!(history
        .text
        .contains("data-testid=\"audit-reason\">receiver back after &lt;maintenance&gt;<"));

    // The delivery goes out again and its page stops refreshing itself.
    w.pipeline.pump().await.unwrap();
    let page = get(&w, Some(&op.cookie), &delivery).await;
    assert!(page.text.contains("data-live=\"false\""), "{}", page.text);
    assert!(page.text.contains("badge s-delivered"));
}

#[tokio::test]
async fn an_eight_day_replay_is_refused_with_the_apis_message_and_a_seven_day_one_runs() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let now = w.pipeline.now();
    w.write_changes(&sub.account_id, &[now.minus(DAY), now.minus(2 * DAY)])
        .await;
    let op = operator(&w).await;
    let replay = format!(
        "/console/op/accounts/{}/subscriptions/{}/replay",
        sub.account_id, sub.subscription_id
    );
    // datetime-local values, read as UTC.
    let local = |t: Timestamp| t.to_rfc3339()[..19].to_owned();
    let (from, to) = (local(now.minus(8 * DAY)), local(now));
    let refused = post(
        &w,
        Some(&op.cookie),
        &replay,
        &[
            ("csrf", &op.csrf),
            ("from", &from),
            ("to", &to),
            ("reason", "r"),
        ],
    )
    .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    let api = w
        .api
        .post(
            &format!(
                "/operator/accounts/{}/subscriptions/{}/replays",
                sub.account_id, sub.subscription_id
            ),
            OPERATOR_TOKEN,
            json!({"from": format!("{from}Z"), "to": format!("{to}Z"), "reason": "r"}),
        )
        .await;
    let detail = api.problem(StatusCode::UNPROCESSABLE_ENTITY)["detail"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(detail.contains("seven days"), "{detail}");
    assert!(
        unescape(&refused.text).contains(&detail),
        "{}",
        refused.text
    );
    // The form keeps what was typed.
    assert!(refused.text.contains(&format!("value=\"{from}\"")));

    let (from, to) = (local(now.minus(7 * DAY)), local(now));
    let started = post(
        &w,
        Some(&op.cookie),
        &replay,
        &[
            ("csrf", &op.csrf),
            ("from", &from),
            ("to", &to),
            ("reason", "resend the week"),
        ],
    )
    .await;
    assert_eq!(started.status, StatusCode::SEE_OTHER, "{}", started.text);
    let job = started.header("location").unwrap().to_owned();
    assert!(job.contains("/replays/"), "{job}");
    let page = get(&w, Some(&op.cookie), &job).await;
    assert_page(&page, &job);
    assert!(page.text.contains("badge s-completed"), "{}", page.text);
    assert!(page.text.contains("2 restarted"), "{}", page.text);
}

// ------------------------------------------------------------------------------------ weight

#[tokio::test]
async fn the_event_monitor_of_a_thousand_events_stays_a_light_page() {
    let w = World::new().await;
    let tenant = w.api.account("Busy").await;
    let now = w.pipeline.now();
    let started = Instant::now();
    for i in 0..1000 {
        w.change(&tenant.account_id)
            .at(now.minus((i % 600) * SECOND))
            .price(1.0)
            .await;
    }
    w.pipeline.pump().await.unwrap();
    let written = started.elapsed();
    let op = operator(&w).await;
    let path = format!("/console/op/events?account={}", tenant.account_id);
    let t = Instant::now();
    let page = get(&w, Some(&op.cookie), &path).await;
    let first = t.elapsed();
    assert_page(&page, &path);
    let rows = page.text.matches("data-testid=\"event-row\"").count();
    assert_eq!(rows, 50, "one page of the monitor");
    assert!(page.text.contains("data-testid=\"next-page\""));
    // Walk every page with the cursors: 1,000 events, each once.
    let mut seen = rows;
    let mut html = page.text.clone();
    let mut pages = 1;
    while let Some(at) = html.find("rel=\"next\" data-testid=\"next-page\"") {
        let before = &html[..at];
        let href_at = before.rfind("href=\"").unwrap() + "href=\"".len();
        let next = unescape(&before[href_at..before[href_at..].find('"').unwrap() + href_at]);
        let r = get(&w, Some(&op.cookie), &next).await;
        assert_eq!(r.status, StatusCode::OK, "{next}");
        seen += r.text.matches("data-testid=\"event-row\"").count();
        html = r.text;
        pages += 1;
    }
    assert_eq!(seen, 1000);
    let bytes = page.text.len();
    eprintln!(
        "event monitor, 1,000 events: first page {bytes} bytes of HTML ({rows} rows), rendered in {first:?}; {pages} pages walked; events written in {written:?}"
    );
    assert!(bytes < 64 * 1024, "{bytes} bytes");
}

#[tokio::test]
async fn an_administrator_manages_subscriptions_through_the_apis_own_checks() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let admin = sign_in_with_token(&w, &tenant.token).await;
    let manage = get(&w, Some(&admin.cookie), "/console/acct/manage").await;
    assert_page(&manage, "/console/acct/manage");
    assert!(manage.text.contains(sub.subscription_id.as_str()));

    // A filter the API refuses: its problem, on the page.
    let integration = integration_of(&w, &tenant, &sub).await;
    let bad = post(
        &w,
        Some(&admin.cookie),
        "/console/acct/manage/subscriptions",
        &[
            ("csrf", &admin.csrf),
            ("integration_id", &integration),
            ("record_types", "catalog_item"),
            ("fields", "price"),
            ("filter", "{\"field\": \"record.price\", \"between\": 1}"),
        ],
    )
    .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.text);
    assert!(bad.text.contains("data-testid=\"problem\""));
    assert!(bad.text.contains("filter"), "{}", bad.text);

    // An edit of the projected fields lands through the API's PATCH.
    let edit = post(
        &w,
        Some(&admin.cookie),
        &format!("/console/acct/manage/subscriptions/{}", sub.subscription_id),
        &[("csrf", &admin.csrf), ("fields", "price, name")],
    )
    .await;
    assert_eq!(edit.status, StatusCode::OK, "{}", edit.text);
    let stored = w
        .api
        .get(
            &format!("/v1/subscriptions/{}", sub.subscription_id),
            &tenant.token,
        )
        .await;
    assert_eq!(stored.ok()["fields"], json!(["price", "name"]));

    // A rotated signing secret is shown once.
    let rotated = post(
        &w,
        Some(&admin.cookie),
        &format!("/console/acct/manage/integrations/{integration}/rotate-secret"),
        &[("csrf", &admin.csrf)],
    )
    .await;
    assert_eq!(rotated.status, StatusCode::OK, "{}", rotated.text);
    assert!(
        rotated
            .text
            .contains("data-testid=\"shown-signing_secret\">whsec_"),
        "{}",
        rotated.text
    );
    let again = get(&w, Some(&admin.cookie), "/console/acct/manage").await;
    assert!(!again.text.contains("whsec_"), "shown only once");

    // Another account's subscription is not found.
    let other = w.api.account("Other").await;
    let intruder = sign_in_with_token(&w, &other.token).await;
    let foreign = post(
        &w,
        Some(&intruder.cookie),
        &format!("/console/acct/manage/subscriptions/{}", sub.subscription_id),
        &[("csrf", &intruder.csrf), ("fields", "price")],
    )
    .await;
    assert_eq!(foreign.status, StatusCode::NOT_FOUND, "{}", foreign.text);
}

/// The `data-testid="test-event-result"` block of a page or fragment (its text up to the end).
fn test_result(html: &str) -> &str {
    let at = html
        .find("data-testid=\"test-event-result\"")
        .unwrap_or_else(|| panic!("no test event result in {html}"));
    &html[at..]
}

#[tokio::test]
async fn an_administrator_sends_a_test_event_from_the_manage_page_with_or_without_htmx() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let hook = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let pull = w.subscribe_through_api(&tenant, "poll", json!({})).await;
    let admin = sign_in_with_token(&w, &tenant.token).await;
    let manage = get(&w, Some(&admin.cookie), "/console/acct/manage").await;
    assert_page(&manage, "/console/acct/manage");
    // One button, for the webhook subscription only.
    assert_eq!(
        manage
            .text
            .matches("data-testid=\"send-test-event\"")
            .count(),
        1
    );
    assert!(manage.text.contains(&format!(
        "data-testid=\"test-event-form\" data-subscription-id=\"{}\"",
        hook.subscription_id
    )));
    let path = |s: &str| format!("/console/acct/manage/subscriptions/{s}/test-event");
    let to_hook = path(hook.subscription_id.as_str());

    // htmx asks for the fragment: the outcome alone.
    w.receiver.script([Answer::Full {
        status: 200,
        headers: vec![],
        body: "hello from the endpoint".into(),
    }]);
    let fragment = w
        .api
        .call(Method::POST, &to_hook, None, None)
        .body(Some(FORM), form(&[("csrf", &admin.csrf)]))
        .header("cookie", &format!("{COOKIE}={}", admin.cookie))
        .header("hx-request", "true")
        .await;
    assert_eq!(fragment.status, StatusCode::OK, "{}", fragment.text);
    assert!(
        !fragment.text.contains("<html"),
        "a fragment: {}",
        fragment.text
    );
    // Queued for the delivery function: the fragment asks again (htmx) until it is sent.
    let queued = test_result(&fragment.text);
    assert!(queued.contains("data-status=\"queued\""), "{queued}");
    assert_eq!(w.receiver.count(), 0, "the API sends nothing itself");
    let poll = queued
        .split("hx-get=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no polling in {queued}"))
        .replace("&amp;", "&");
    assert!(poll.contains("/test-events/test_"), "{poll}");
    w.pipeline.work_pending().await.unwrap();
    let fragment = w
        .api
        .call(Method::GET, &poll, None, None)
        .header("cookie", &format!("{COOKIE}={}", admin.cookie))
        .header("hx-request", "true")
        .await;
    assert_eq!(fragment.status, StatusCode::OK, "{}", fragment.text);
    let result = test_result(&fragment.text);
    assert!(result.contains("data-status=\"sent\""), "{result}");
    assert!(
        !result.contains("hx-get"),
        "a sent test event is not polled: {result}"
    );
    assert!(result.contains("data-delivered=\"true\""), "{result}");
    assert!(
        result.contains("data-testid=\"test-event-status\">200<"),
        "{result}"
    );
    assert!(result.contains("hello from the endpoint"), "{result}");
    let got = w.receiver.received();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].json()["type"], "rhythm.test");

    // A plain form post: the whole page, the outcome beside the subscription.
    w.receiver.script([Answer::Status(410)]);
    let page = post(&w, Some(&admin.cookie), &to_hook, &[("csrf", &admin.csrf)]).await;
    assert_page(&page, &to_hook);
    let queued = test_result(&page.text);
    let refresh = queued
        .split("data-testid=\"test-event-refresh\"")
        .next()
        .and_then(|before| before.rsplit("href=\"").next())
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no link to the outcome in {queued}"))
        .to_owned();
    w.pipeline.work_pending().await.unwrap();
    let page = get(&w, Some(&admin.cookie), &refresh).await;
    assert_page(&page, &refresh);
    let result = test_result(&page.text);
    assert!(result.contains("data-delivered=\"false\""), "{result}");
    assert!(
        result.contains("data-testid=\"test-event-status\">410<"),
        "{result}"
    );
    assert!(result.contains("s-permanent"), "{result}");

    // Refusals: no CSRF (403), a pull subscription (the API's 409), another account's (404);
    // the htmx fragment carries the refusal in a 200, so htmx swaps it in.
    let forged = post(&w, Some(&admin.cookie), &to_hook, &[("csrf", "nope")]).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    let to_pull = path(pull.subscription_id.as_str());
    let refused = post(&w, Some(&admin.cookie), &to_pull, &[("csrf", &admin.csrf)]).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text);
    assert!(refused.text.contains("data-testid=\"problem\""));
    assert!(unescape(&refused.text).contains("test events go to webhook endpoints"));
    let refused = w
        .api
        .call(Method::POST, &to_pull, None, None)
        .body(Some(FORM), form(&[("csrf", &admin.csrf)]))
        .header("cookie", &format!("{COOKIE}={}", admin.cookie))
        .header("hx-request", "true")
        .await;
    assert_eq!(refused.status, StatusCode::OK);
    assert!(refused.text.contains("data-testid=\"problem\""));
    let other = w.api.account("Other").await;
    let intruder = sign_in_with_token(&w, &other.token).await;
    let foreign = post(
        &w,
        Some(&intruder.cookie),
        &to_hook,
        &[("csrf", &intruder.csrf)],
    )
    .await;
    assert_eq!(foreign.status, StatusCode::NOT_FOUND, "{}", foreign.text);
    assert_eq!(w.receiver.count(), 2, "refused sends reach nobody");

    // Both sends are in the audit history, under the session's actor.
    let audit = w
        .api
        .get(
            &format!(
                "/operator/accounts/{}/subscriptions/{}/audit",
                tenant.account_id, hook.subscription_id
            ),
            OPERATOR_TOKEN,
        )
        .await;
    let mut entries = audit.ok()["data"].as_array().unwrap().clone();
    // (The subscription's creation is audited too.)
    entries.retain(|e| e["action"] != "create_subscription");
    assert_eq!(entries.len(), 2);
    assert!(entries.iter().all(|e| e["action"] == "send_test_event"
        && e["operator"].as_str().unwrap().starts_with("token ")));
}

#[tokio::test]
async fn a_rotation_with_a_chosen_grace_shows_until_when_the_previous_secret_stays_valid() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let hook = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let integration = integration_of(&w, &tenant, &hook).await;
    let admin = sign_in_with_token(&w, &tenant.token).await;
    let manage = get(&w, Some(&admin.cookie), "/console/acct/manage").await;
    assert!(manage.text.contains("name=\"rotation_grace_seconds\""));
    assert!(!manage.text.contains("data-testid=\"secret-overlap\""));
    let rotate = format!("/console/acct/manage/integrations/{integration}/rotate-secret");

    // Out of range: the API's refusal, with its words.
    let refused = post(
        &w,
        Some(&admin.cookie),
        &rotate,
        &[("csrf", &admin.csrf), ("rotation_grace_seconds", "700000")],
    )
    .await;
    assert_eq!(
        refused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        refused.text
    );
    assert!(refused.text.contains("rotation_grace_seconds"));
    assert!(
        refused.text.contains("must be 0 to 604800 seconds"),
        "{}",
        refused.text
    );

    // An hour's grace: the page says until when, after the rotation and on every later visit.
    let until = w
        .pipeline
        .now()
        .plus(std::time::Duration::from_secs(3600))
        .to_rfc3339();
    let rotated = post(
        &w,
        Some(&admin.cookie),
        &rotate,
        &[("csrf", &admin.csrf), ("rotation_grace_seconds", "3600")],
    )
    .await;
    assert_eq!(rotated.status, StatusCode::OK, "{}", rotated.text);
    assert!(rotated
        .text
        .contains("data-testid=\"shown-signing_secret\">whsec_"));
    for html in [
        &rotated.text,
        &get(&w, Some(&admin.cookie), "/console/acct/manage")
            .await
            .text,
    ] {
        let at = html
            .find("data-testid=\"secret-overlap\"")
            .unwrap_or_else(|| panic!("no overlap in {html}"));
        let overlap = &html[at..at + html[at..].find("</p>").unwrap()];
        // Relative (console.js) and absolute, both from the instant.
        assert_eq!(
            overlap.matches(&format!("datetime=\"{until}\"")).count(),
            2,
            "{overlap}"
        );
        assert!(overlap.contains("data-absolute"), "{overlap}");
    }
    let stored = w
        .api
        .get(&format!("/v1/integrations/{integration}"), &tenant.token)
        .await;
    assert_eq!(stored.ok()["previous_secret_expires_at"], until.as_str());

    // Grace 0 retires the previous secret at once: no overlap shown.
    let at_once = post(
        &w,
        Some(&admin.cookie),
        &rotate,
        &[("csrf", &admin.csrf), ("rotation_grace_seconds", "0")],
    )
    .await;
    assert_eq!(at_once.status, StatusCode::OK, "{}", at_once.text);
    assert!(
        !at_once.text.contains("data-testid=\"secret-overlap\""),
        "{}",
        at_once.text
    );
}

#[tokio::test]
async fn an_administrator_reads_a_subscriptions_delivery_log_from_the_overview() {
    let w = World::new().await;
    let (tenant, sub, dead) = dead_delivery(&w).await;
    let s = sub.subscription_id.as_str();
    let admin = sign_in_with_token(&w, &tenant.token).await;
    let log_path = format!("/console/acct/subscriptions/{s}");
    let overview = get(&w, Some(&admin.cookie), "/console/acct").await;
    assert!(
        overview.text.contains(&format!("href=\"{log_path}\"")),
        "{}",
        overview.text
    );

    let log = get(&w, Some(&admin.cookie), &log_path).await;
    assert_page(&log, &log_path);
    assert!(log.text.contains("id=\"deliveries\""));
    let row = &log.text[log
        .text
        .find("data-testid=\"delivery-row\"")
        .expect("a row")..];
    assert!(
        row.contains("data-testid=\"delivery-status\"><span class=\"badge s-dead\""),
        "{row}"
    );
    assert!(row.contains("data-testid=\"http-code\">503<"), "{row}");
    assert!(row.contains(&format!(
        "href=\"/console/acct/subscriptions/{s}/deliveries/{}\"",
        dead.change_id
    )));
    assert!(log.text.contains("data-testid=\"last-page\""));
    // Filtered by status with the API's checks.
    let delivered = get(
        &w,
        Some(&admin.cookie),
        &format!("{log_path}?status=delivered"),
    )
    .await;
    assert_eq!(delivered.status, StatusCode::OK);
    assert!(!delivered.text.contains("data-testid=\"delivery-row\""));
    let bad = get(&w, Some(&admin.cookie), &format!("{log_path}?status=lost")).await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.text);
    let bad = get(&w, Some(&admin.cookie), &format!("{log_path}?cursor=no.pe")).await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.text);

    // Another account's subscription is not found.
    let other = w.api.account("Other").await;
    let intruder = sign_in_with_token(&w, &other.token).await;
    let foreign = get(&w, Some(&intruder.cookie), &log_path).await;
    assert_eq!(foreign.status, StatusCode::NOT_FOUND, "{}", foreign.text);
}

// ----------------------------------------------------------------- sessions against stored state

/// A new account token from the operator route, revoking the account's others.
async fn rotate_account_token(w: &World, tenant: &ApiAccount) -> String {
    let r = w
        .api
        .post(
            &format!("/operator/accounts/{}/tokens", tenant.account_id),
            OPERATOR_TOKEN,
            json!({"revoke_existing": true}),
        )
        .await;
    r.created()["token"].as_str().unwrap().to_owned()
}

/// The id part of a token's text (`rhy_acct_{id}_{secret}`).
fn token_id_of(token: &str) -> String {
    token.split('_').nth(2).unwrap().to_owned()
}

fn assert_refused(reply: &Reply, why: &str) {
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.text);
    assert!(
        reply.text.contains("data-testid=\"session-refused\""),
        "{}",
        reply.text
    );
    assert!(reply.text.contains(why), "{why} in {}", reply.text);
}

const ENDED: &str = "the session has ended";

#[tokio::test]
async fn a_session_whose_token_is_revoked_is_refused_on_the_next_request() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    // Sessions opened with the account token: pasted, and by a link the token asked for; and
    // one an operator's link opened, which the token does not ground.
    let pasted = sign_in_with_token(&w, &tenant.token).await;
    let own = w
        .api
        .post("/v1/console-links", &tenant.token, json!({}))
        .await;
    let linked = sign_in_with_link(&w, own.created()["url"].as_str().unwrap()).await;
    let link = operator_link(&w, json!({"account_id": tenant.account_id})).await;
    let by_operator = sign_in_with_link(&w, &link).await;
    for s in [&pasted, &linked, &by_operator] {
        assert_page(&get(&w, Some(&s.cookie), "/console/acct").await, "acct");
    }

    let new_token = rotate_account_token(&w, &tenant).await;
    for s in [&pasted, &linked] {
        assert_refused(&get(&w, Some(&s.cookie), "/console/acct").await, ENDED);
        // Nor can a form of the session add an integration any more.
        let create = post(
            &w,
            Some(&s.cookie),
            "/console/acct/manage/integrations",
            &[
                ("csrf", &s.csrf),
                ("name", "exfiltrate"),
                ("method", "webhook"),
                ("url", "https://attacker.example/hook"),
            ],
        )
        .await;
        assert_refused(&create, ENDED);
    }
    let listed = w.api.get("/v1/integrations", &new_token).await;
    assert_eq!(listed.ok()["data"].as_array().unwrap().len(), 0);
    assert_page(
        &get(&w, Some(&by_operator.cookie), "/console/acct").await,
        "acct",
    );
    // The new token signs in.
    let fresh = sign_in_with_token(&w, &new_token).await;
    assert_page(&get(&w, Some(&fresh.cookie), "/console/acct").await, "acct");
}

#[tokio::test]
async fn an_operator_sessions_expiry_is_bounded_by_the_jwts_exp_and_by_an_hour() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let gateway = w.gateway_api("rhythm/operator");
    // A link from the operator route behind the JWT authorizer, for a JWT expiring at `exp`.
    let link_for = |exp: Timestamp, body: serde_json::Value| {
        let event = crate::management_api::operator_event(
            "POST",
            "/operator/console-links",
            json!({"sub": "op-9", "exp": exp.seconds().to_string()}),
            json!(["rhythm/operator"]),
            Some(body),
        );
        let gateway = &gateway;
        async move {
            let r = gateway.gateway_event(&event).await;
            let view = r.created().clone();
            (
                view["url"].as_str().unwrap().to_owned(),
                view["expires_in"].as_u64().unwrap(),
            )
        }
    };
    let sign_in = |url: String| {
        let gateway = &gateway;
        async move {
            let token = url.split_once("link=").unwrap().1.to_owned();
            let signed = post_on(gateway, None, "/console/login", &[("link", &token)]).await;
            session_cookie_and_age(&signed)
        }
    };
    let whole = |secs: u64, of: std::time::Duration| {
        assert!(
            (of.as_secs() - 1..=of.as_secs()).contains(&secs),
            "{secs} s, expected {of:?}"
        )
    };

    // A JWT that expires in 20 minutes: the link and its session end with it.
    let exp = w.pipeline.now().plus(20 * MINUTE);
    let (url, link_ttl) = link_for(exp, json!({})).await;
    whole(link_ttl, LINK_TTL);
    let (cookie, age) = sign_in(url).await;
    whole(age, 20 * MINUTE);
    let (admin_url, _) = link_for(exp, json!({"account_id": tenant.account_id})).await;
    let (admin, admin_age) = sign_in(admin_url).await;
    whole(admin_age, 20 * MINUTE);
    w.pipeline.clock.advance(19 * MINUTE);
    assert_page(&get_on(&gateway, Some(&cookie), "/console/op").await, "op");
    assert_page(
        &get_on(&gateway, Some(&admin), "/console/acct").await,
        "acct",
    );
    w.pipeline.clock.advance(MINUTE);
    assert_refused(
        &get_on(&gateway, Some(&cookie), "/console/op").await,
        "expired",
    );
    assert_refused(
        &get_on(&gateway, Some(&admin), "/console/acct").await,
        "expired",
    );

    // A JWT valid five hours more: the session lasts an hour.
    let exp = w.pipeline.now().plus(5 * 60 * MINUTE);
    let (url, _) = link_for(exp, json!({})).await;
    let (cookie, age) = sign_in(url).await;
    whole(age, OPERATOR_SESSION_TTL);
    w.pipeline.clock.advance(OPERATOR_SESSION_TTL - SECOND);
    assert_page(&get_on(&gateway, Some(&cookie), "/console/op").await, "op");
    w.pipeline.clock.advance(SECOND);
    assert_refused(
        &get_on(&gateway, Some(&cookie), "/console/op").await,
        "expired",
    );

    // A JWT about to expire yields a link no longer than it.
    let exp = w.pipeline.now().plus(2 * MINUTE);
    let (_, link_ttl) = link_for(exp, json!({})).await;
    whole(link_ttl, 2 * MINUTE);
}

#[tokio::test]
async fn after_sign_out_the_old_cookie_is_refused() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let op = operator(&w).await;
    let admin = sign_in_with_token(&w, &tenant.token).await;
    let out = post(
        &w,
        Some(&op.cookie),
        "/console/logout",
        &[("csrf", &op.csrf)],
    )
    .await;
    assert_eq!(out.status, StatusCode::SEE_OTHER, "{}", out.text);
    let cleared = out.header("set-cookie").unwrap();
    assert!(cleared.starts_with("__Host-rhythm_console=;"), "{cleared}");
    assert!(cleared.contains("Max-Age=0") && cleared.contains("Path=/"));
    // The copied cookie is refused server-side, on pages and forms alike.
    assert_refused(&get(&w, Some(&op.cookie), "/console/op").await, ENDED);
    let again = post(
        &w,
        Some(&op.cookie),
        "/console/logout",
        &[("csrf", &op.csrf)],
    )
    .await;
    assert_refused(&again, ENDED);
    // Other sessions go on.
    assert_page(&get(&w, Some(&admin.cookie), "/console/acct").await, "acct");
}

#[tokio::test]
async fn a_login_link_signs_in_once_and_a_second_use_is_refused_with_a_page_that_says_so() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let link = operator_link(&w, json!({"account_id": tenant.account_id})).await;
    let token = link.split_once("link=").unwrap().1.to_owned();
    let first = sign_in_with_link(&w, &link).await;

    let again = post(&w, None, "/console/login", &[("link", &token)]).await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.text);
    assert!(again.header("set-cookie").is_none());
    assert!(again.text.contains("data-testid=\"problem\""));
    assert!(again.text.contains("used already"), "{}", again.text);
    let page = get(&w, None, &link).await;
    assert_eq!(page.status, StatusCode::CONFLICT);
    assert_secure(&page, "login");
    assert!(page.text.contains("used already"), "{}", page.text);
    assert!(!page.text.contains("login-continue"));
    assert_page(&get(&w, Some(&first.cookie), "/console/acct").await, "acct");

    // Two sign-ins racing with one fresh link: exactly one session.
    let link = operator_link(&w, json!({})).await;
    let token = link.split_once("link=").unwrap().1.to_owned();
    let fields = [("link", token.as_str())];
    let (a, b) = tokio::join!(
        post(&w, None, "/console/login", &fields),
        post(&w, None, "/console/login", &fields),
    );
    let mut statuses = [a.status, b.status];
    statuses.sort();
    assert_eq!(statuses, [StatusCode::SEE_OTHER, StatusCode::CONFLICT]);
}

#[tokio::test]
async fn a_sign_in_post_without_sec_fetch_site_needs_this_consoles_origin() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let sign_in = |headers: &[(&str, &str)]| {
        let mut call = w
            .api
            .call(Method::POST, "/console/login", None, None)
            .header("host", "rhythm.example")
            .body(Some(FORM), form(&[("token", &tenant.token)]));
        for (k, v) in headers {
            call = call.header(k, v);
        }
        call
    };
    for headers in [
        &[][..],
        &[("origin", "null")][..],
        &[("origin", "https://attacker.example")][..],
        &[("origin", "https://rhythm.example.attacker.example")][..],
        &[
            ("sec-fetch-site", "cross-site"),
            ("origin", "https://rhythm.example"),
        ][..],
        &[("sec-fetch-site", "same-site")][..],
    ] {
        let refused = sign_in(headers).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{headers:?}");
        assert!(refused.header("set-cookie").is_none(), "{headers:?}");
    }
    for headers in [
        &[("origin", "https://rhythm.example")][..],
        &[("sec-fetch-site", "same-origin")][..],
    ] {
        let signed = sign_in(headers).await;
        session_cookie(&signed);
    }
}

#[tokio::test]
async fn console_sign_ins_are_audited_in_the_accounts_history_and_its_console_page() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let token_id = token_id_of(&tenant.token);
    let at = w.pipeline.now();
    sign_in_with_token(&w, &tenant.token).await;
    let own = w
        .api
        .post("/v1/console-links", &tenant.token, json!({}))
        .await;
    sign_in_with_link(&w, own.created()["url"].as_str().unwrap()).await;
    let link = operator_link(&w, json!({"account_id": tenant.account_id})).await;
    sign_in_with_link(&w, &link).await;
    // An operator's own sign-in is no account's.
    let op = operator(&w).await;

    let audit = w
        .api
        .get(
            &format!("/operator/accounts/{}/audit", tenant.account_id),
            OPERATOR_TOKEN,
        )
        .await;
    let mut sign_ins: Vec<(String, String, String)> = audit.ok()["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "console_sign_in")
        .map(|e| {
            assert_eq!(e["at"], at.to_rfc3339());
            assert!(e["details"]["session_expires"].is_string(), "{e}");
            (
                e["operator"].as_str().unwrap().to_owned(),
                e["details"]["credential"].as_str().unwrap().to_owned(),
                e["account_id"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    sign_ins.sort();
    let a = tenant.account_id.to_string();
    assert_eq!(
        sign_ins,
        vec![
            (
                OPERATOR.to_string(),
                format!("console link issued by operator {OPERATOR}"),
                a.clone()
            ),
            (
                format!("token {token_id}"),
                format!("account token {token_id}"),
                a.clone()
            ),
            (
                format!("token {token_id}"),
                format!("console link issued with account token {token_id}"),
                a.clone()
            ),
        ]
    );
    // The account's page in the operator console lists them.
    let page = get(&w, Some(&op.cookie), &format!("/console/op/accounts/{a}")).await;
    assert_page(&page, "account page");
    assert!(page.text.contains("console_sign_in"), "{}", page.text);
    assert!(
        unescape(&page.text).contains(&format!("credential=account token {token_id}")),
        "{}",
        page.text
    );
}

#[tokio::test]
async fn a_console_key_rotated_in_secrets_manager_takes_effect_within_the_refresh_interval() {
    use shared::web::console_key::{ConsoleKeys, REFRESH};
    let w = World::new().await;
    let secrets = aws_sdk_secretsmanager::Client::new(&w.pipeline.stack.sdk);
    let name = format!("console-key-{}", ulid::Ulid::new());
    let arn = secrets
        .create_secret()
        .name(&name)
        .secret_string("a".repeat(64))
        .send()
        .await
        .unwrap()
        .arn
        .unwrap();
    // The api function's loading, on the world's clock.
    let keys = ConsoleKeys::load(
        &secrets,
        |n| (n == "CONSOLE_SIGNING_KEY_ARN").then(|| arn.clone()),
        w.pipeline.now(),
    )
    .await
    .unwrap();
    let api = ApiClient::new(w.api_state().with_console_keys(keys));
    let signed = post_on(&api, None, "/console/login", &[("token", OPERATOR_TOKEN)]).await;
    let cookie = session_cookie(&signed);

    secrets
        .put_secret_value()
        .secret_id(&arn)
        .secret_string("b".repeat(64))
        .send()
        .await
        .unwrap();
    w.pipeline.clock.advance(REFRESH - SECOND);
    assert_page(&get_on(&api, Some(&cookie), "/console/op").await, "op");
    w.pipeline.clock.advance(SECOND);
    assert_refused(
        &get_on(&api, Some(&cookie), "/console/op").await,
        "not one this console signed",
    );
    let again = post_on(&api, None, "/console/login", &[("token", OPERATOR_TOKEN)]).await;
    let cookie = session_cookie(&again);
    assert_page(&get_on(&api, Some(&cookie), "/console/op").await, "op");
}

#[tokio::test]
async fn an_administrators_changes_from_the_manage_page_show_in_the_operators_history_with_the_session_credential(
) {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let integration = integration_of(&w, &tenant, &sub).await;
    let admin = sign_in_with_token(&w, &tenant.token).await;
    let actor = format!("token {}", tenant.token.split('_').nth(2).unwrap());

    let edit = post(
        &w,
        Some(&admin.cookie),
        &format!("/console/acct/manage/subscriptions/{}", sub.subscription_id),
        &[("csrf", &admin.csrf), ("fields", "price")],
    )
    .await;
    assert_eq!(edit.status, StatusCode::OK, "{}", edit.text);
    let rotated = post(
        &w,
        Some(&admin.cookie),
        &format!("/console/acct/manage/integrations/{integration}/rotate-secret"),
        &[("csrf", &admin.csrf)],
    )
    .await;
    assert_eq!(rotated.status, StatusCode::OK, "{}", rotated.text);

    // The operator's Integration history of the subscription, and the account's page.
    let op = operator(&w).await;
    let row = |page: &str, action: &str| {
        page.split("data-testid=\"audit-row\"")
            .skip(1)
            .find(|r| r.contains(&format!("data-testid=\"audit-action\">{action}")))
            .map(str::to_owned)
    };
    let history = get(
        &w,
        Some(&op.cookie),
        &format!(
            "/console/op/accounts/{}/subscriptions/{}",
            tenant.account_id, sub.subscription_id
        ),
    )
    .await;
    let edited = row(&history.text, "edit_subscription").expect("the edit is in the history");
    assert!(
        edited.contains(&format!("data-testid=\"audit-operator\">{actor}<")),
        "{edited}"
    );
    assert!(edited.contains("price"), "{edited}");
    let account = get(
        &w,
        Some(&op.cookie),
        &format!("/console/op/accounts/{}", tenant.account_id),
    )
    .await;
    let rotation = row(&account.text, "edit_integration").expect("the rotation is in the history");
    assert!(rotation.contains(&format!("data-testid=\"audit-operator\">{actor}<")));
    assert!(
        rotation.contains("rotate_signing_secret=true"),
        "{rotation}"
    );
}
