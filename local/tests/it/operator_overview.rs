//! The operators' overview across accounts: `GET /operator/accounts` (every account with its
//! health over the last day, found by name or id, a page at a time) and `GET /operator/attention`
//! (what needs an operator in any account, oldest first), on the emulator with the real pipeline.

use axum::http::StatusCode;
use local::receiver::{Receiver, Reply};
use local::testkit::api::OPERATOR_TOKEN;
use local::testkit::World;
use serde_json::{json, Value};
use shared::domain::delivery_method::DeliveryMethod;
use shared::domain::replay::ReplayWindow;
use shared::domain::time::{DAY, HOUR, MINUTE};
use shared::ids::{AccountId, ReplayJobId};
use shared::store::replay_job::{self, ReplayJob};
use shared::store::subscription::Subscription;

fn names(body: &Value) -> Vec<String> {
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap().to_owned())
        .collect()
}

fn health<'a>(body: &'a Value, name: &str) -> &'a Value {
    &body["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("{name} is listed"))["health"]
}

/// A webhook subscription of the world's receiver, and one whose method no adapter knows (its
/// deliveries fail for good).
async fn failing_subscription(w: &World, account_id: &AccountId) -> Subscription {
    w.subscribe(
        &w.integration(account_id)
            .method(DeliveryMethod::Unknown("queue".into()))
            .await,
    )
    .await
}

#[tokio::test]
async fn operators_list_accounts_with_their_health_over_the_last_day_newest_trouble_first() {
    let w = World::new().await;
    let api = &w.api;
    let zenith = w.account().named("Zenith Paused").await;
    w.subscribe(&w.integration(&zenith.account_id).await)
        .paused()
        .await;
    w.pipeline.clock.advance(MINUTE);
    let anvils = w.account().named("Acme Anvils").await;
    w.subscribe(&w.integration(&anvils.account_id).await).await;
    let rockets = w.account().named("Acme Rockets").await;
    failing_subscription(&w, &rockets.account_id).await;
    w.change(&anvils.account_id).await;
    w.change(&rockets.account_id).await;
    w.pipeline.pump().await.unwrap();
    w.pipeline.roll_up_pass().await.unwrap();

    let all = api.get("/operator/accounts", OPERATOR_TOKEN).await;
    let body = all.ok();
    // Newest trouble first (the failed delivery came after the pause), then the rest by name.
    assert_eq!(
        names(body),
        ["Acme Rockets", "Zenith Paused", "Acme Anvils"]
    );
    let anvils_health = health(body, "Acme Anvils");
    assert_eq!(
        (
            &anvils_health["delivered"],
            &anvils_health["dead"],
            &anvils_health["failed"],
            &anvils_health["paused_subscriptions"],
            &anvils_health["last_trouble_at"],
        ),
        (&json!(1), &json!(0), &json!(0), &json!(0), &Value::Null)
    );
    assert_eq!(anvils_health["window_hours"], 24);
    assert_eq!(anvils_health["complete"], true);
    let rockets_health = health(body, "Acme Rockets");
    assert_eq!(
        (&rockets_health["failed"], &rockets_health["delivered"]),
        (&json!(1), &json!(0))
    );
    assert!(rockets_health["last_trouble_at"].is_string());
    assert_eq!(health(body, "Zenith Paused")["paused_subscriptions"], 1);
    let first = &body["data"][0];
    assert_eq!(first["id"], rockets.account_id.as_str());
    assert!(first["created_at"].is_string());

    // By the start of a name (without regard to case), or by id.
    let acme = api.get("/operator/accounts?q=acme", OPERATOR_TOKEN).await;
    assert_eq!(names(acme.ok()), ["Acme Rockets", "Acme Anvils"]);
    let rockets_only = api
        .get("/operator/accounts?q=ACME%20R", OPERATOR_TOKEN)
        .await;
    assert_eq!(names(rockets_only.ok()), ["Acme Rockets"]);
    let by_id = api
        .get(
            &format!("/operator/accounts?q={}", zenith.account_id),
            OPERATOR_TOKEN,
        )
        .await;
    assert_eq!(names(by_id.ok()), ["Zenith Paused"]);
    let none = api.get("/operator/accounts?q=nobody", OPERATOR_TOKEN).await;
    assert_eq!(none.ok()["data"], json!([]));

    // A page at a time: every account once.
    let mut seen = Vec::new();
    let mut path = "/operator/accounts?limit=1".to_string();
    loop {
        let page = api.get(&path, OPERATOR_TOKEN).await;
        let body = page.ok().clone();
        assert_eq!(body["data"].as_array().unwrap().len(), 1);
        seen.extend(names(&body));
        match body["next_cursor"].as_str() {
            Some(c) => path = format!("/operator/accounts?limit=1&cursor={c}"),
            None => break,
        }
    }
    seen.sort();
    assert_eq!(seen, ["Acme Anvils", "Acme Rockets", "Zenith Paused"]);

    // A day later the delivery figures have left the window; the pause has not.
    w.pipeline.clock.advance(DAY + HOUR);
    let later = api.get("/operator/accounts", OPERATOR_TOKEN).await;
    let body = later.ok();
    assert_eq!(
        names(body),
        ["Zenith Paused", "Acme Anvils", "Acme Rockets"]
    );
    assert_eq!(health(body, "Acme Rockets")["failed"], 0);
    assert_eq!(health(body, "Acme Anvils")["delivered"], 0);
    assert_eq!(health(body, "Zenith Paused")["paused_subscriptions"], 1);

    // Bad input is a problem naming the field; an account's token is not an operator's.
    for bad in [
        "/operator/accounts?limit=0",
        "/operator/accounts?limit=51",
        "/operator/accounts?cursor=%21%21",
    ] {
        api.get(bad, OPERATOR_TOKEN)
            .await
            .problem(StatusCode::UNPROCESSABLE_ENTITY);
    }
    let token = w.account_token(&anvils.account_id).await;
    api.get("/operator/accounts", &token)
        .await
        .problem(StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn the_attention_queue_lists_every_accounts_trouble_oldest_first_with_its_account_and_the_route_that_acts(
) {
    let w = World::new().await;
    let api = &w.api;
    let (dynamo, table) = (
        &w.pipeline.stack.clients.dynamo,
        &w.pipeline.stack.config.delivery_table,
    );
    let alpha = w.account().named("Alpha").await;
    let paused = w
        .subscribe(&w.integration(&alpha.account_id).await)
        .paused()
        .await;
    w.pipeline.clock.advance(MINUTE);
    let beta = w.account().named("Beta").await;
    let failing = failing_subscription(&w, &beta.account_id).await;
    let failed_change = w.change(&beta.account_id).await;
    w.pipeline.pump().await.unwrap();
    w.pipeline.clock.advance(MINUTE);
    // A replay job of Alpha's that is running with no run holding it (its Lambda died).
    let job = ReplayJob::new(
        ReplayJobId::new(),
        alpha.account_id.clone(),
        paused.subscription_id.clone(),
        ReplayWindow {
            from: w.pipeline.now().minus(HOUR),
            to: w.pipeline.now(),
        },
        "backfill".into(),
        "op".into(),
        w.pipeline.now(),
    );
    shared::store::write::send(dynamo, replay_job::create(table, &job).unwrap())
        .await
        .unwrap();
    w.pipeline.clock.advance(MINUTE);
    // Another account with nothing to do is not in the queue.
    let quiet = w.account().named("Quiet").await;
    w.subscribe(&w.integration(&quiet.account_id).await).await;
    w.receiver.script([Reply::Status(200)]);
    w.change(&quiet.account_id).await;
    w.pipeline.pump().await.unwrap();

    let queue = api.get("/operator/attention", OPERATOR_TOKEN).await;
    let body = queue.ok().clone();
    let got: Vec<(String, String, String)> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_owned(),
                e["account_name"].as_str().unwrap().to_owned(),
                e["act"]["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let alpha_path = format!("/operator/accounts/{}", alpha.account_id);
    let beta_path = format!("/operator/accounts/{}", beta.account_id);
    assert_eq!(
        got,
        [
            (
                "paused_subscription".to_owned(),
                "Alpha".to_owned(),
                format!(
                    "{alpha_path}/subscriptions/{}/resume",
                    paused.subscription_id
                )
            ),
            (
                "failed_delivery".to_owned(),
                "Beta".to_owned(),
                format!(
                    "{beta_path}/subscriptions/{}/deliveries/{}/retry",
                    failing.subscription_id, failed_change.change_id
                )
            ),
            (
                "stalled_replay".to_owned(),
                "Alpha".to_owned(),
                format!("{alpha_path}/replays/{}/resume", job.job_id)
            ),
        ]
    );
    let entries = body["data"].as_array().unwrap();
    assert!(entries.iter().all(|e| e["act"]["method"] == "POST"));
    assert_eq!(entries[1]["last_error"], "unknown delivery method queue");
    assert_eq!(entries[1]["account_id"], beta.account_id.as_str());
    let since: Vec<&str> = entries
        .iter()
        .map(|e| e["since"].as_str().unwrap())
        .collect();
    let mut sorted = since.clone();
    sorted.sort();
    assert_eq!(since, sorted, "oldest first");

    // A page at a time, the same entries in the same order.
    let mut paged = Vec::new();
    let mut path = "/operator/attention?limit=1".to_string();
    loop {
        let page = api.get(&path, OPERATOR_TOKEN).await;
        let body = page.ok().clone();
        paged.extend(
            body["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["kind"].as_str().unwrap().to_owned()),
        );
        match body["next_cursor"].as_str() {
            Some(c) => path = format!("/operator/attention?limit=1&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(
        paged,
        ["paused_subscription", "failed_delivery", "stalled_replay"]
    );

    // Acting through the named route takes the entry off the queue.
    let (_, _, resume) = &got[0];
    api.post(resume, OPERATOR_TOKEN, json!({"reason": "receiver fixed"}))
        .await
        .ok();
    let after = api.get("/operator/attention", OPERATOR_TOKEN).await;
    let kinds: Vec<&str> = after.ok()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["failed_delivery", "stalled_replay"]);

    for bad in [
        "/operator/attention?limit=0",
        "/operator/attention?cursor=%21%21",
        // A cursor of another list (an account id) is not a position of this one.
        &format!(
            "/operator/attention?cursor={}",
            shared::store::cursor::encode(alpha.account_id.as_str())
        ),
    ] {
        api.get(bad, OPERATOR_TOKEN)
            .await
            .problem(StatusCode::UNPROCESSABLE_ENTITY);
    }
    let token = w.account_token(&alpha.account_id).await;
    api.get("/operator/attention", &token)
        .await
        .problem(StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn an_exhausted_notification_counts_in_its_accounts_health_and_waits_in_the_queue_with_its_requeue_route_until_requeued(
) {
    let w = World::new().await;
    let api = &w.api;
    // The account the notification pipeline's notices belong to, and one without trouble.
    let gamma = w
        .account()
        .id(w.notify.account.as_str())
        .named("Gamma Notices")
        .await;
    w.account().named("Quiet").await;
    let (first, second) = (Receiver::start().await, Receiver::start().await);
    let (early, _) = crate::notifications::exhaust(&w.notify, &first, "Slack down").await;
    let (late, _) = crate::notifications::exhaust(&w.notify, &second, "Still down").await;

    let accounts = api.get("/operator/accounts", OPERATOR_TOKEN).await;
    let body = accounts.ok().clone();
    assert_eq!(names(&body)[0], "Gamma Notices", "newest trouble first");
    let h = health(&body, "Gamma Notices");
    assert_eq!(h["notices_failed"], 2);
    assert_eq!(
        (h["dead"].as_u64(), h["failed"].as_u64()),
        (Some(0), Some(0))
    );
    assert!(h["last_trouble_at"].is_string());
    assert_eq!(health(&body, "Quiet")["notices_failed"], 0);

    let requeue = |notice: &shared::ids::NoticeId| {
        format!("/operator/notifications/{notice}/deliveries/slack-0/requeue")
    };
    let queue = api.get("/operator/attention", OPERATOR_TOKEN).await;
    let body = queue.ok().clone();
    let entries = body["data"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{body}");
    for (e, notice) in entries.iter().zip([&early, &late]) {
        let notice_id = &notice.request.notice_id;
        assert_eq!(e["kind"], "exhausted_notification");
        assert_eq!(e["account_id"], gamma.account_id.as_str());
        assert_eq!(e["account_name"], "Gamma Notices");
        assert_eq!(e["notice_id"], notice_id.as_str());
        assert_eq!(e["delivery_key"], "slack-0");
        assert!(e.get("subscription_id").is_none());
        assert!(e["last_error"].as_str().unwrap().contains("500"), "{e}");
        assert_eq!(
            e["act"],
            json!({"method": "POST", "path": requeue(notice_id)})
        );
    }
    // A page at a time: the cursor after a notification continues after it.
    let page = api.get("/operator/attention?limit=1", OPERATOR_TOKEN).await;
    let page = page.ok().clone();
    assert_eq!(
        page["data"][0]["notice_id"],
        early.request.notice_id.as_str()
    );
    let cursor = page["next_cursor"].as_str().expect("a second page");
    let rest = api
        .get(
            &format!("/operator/attention?limit=1&cursor={cursor}"),
            OPERATOR_TOKEN,
        )
        .await;
    let rest = rest.ok().clone();
    assert_eq!(rest["data"].as_array().unwrap().len(), 1);
    assert_eq!(
        rest["data"][0]["notice_id"],
        late.request.notice_id.as_str()
    );
    assert!(rest["next_cursor"].is_null());

    // The requeue route the entry names takes it off the queue and out of the figures.
    api.post(
        &requeue(&early.request.notice_id),
        OPERATOR_TOKEN,
        json!({"reason": "Slack is back"}),
    )
    .await
    .ok();
    let queue = api.get("/operator/attention", OPERATOR_TOKEN).await;
    let left: Vec<&str> = queue.ok()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["notice_id"].as_str().unwrap())
        .collect();
    assert_eq!(left, [late.request.notice_id.as_str()]);
    let accounts = api.get("/operator/accounts", OPERATOR_TOKEN).await;
    assert_eq!(health(accounts.ok(), "Gamma Notices")["notices_failed"], 1);

    // A day on, the failure is out of the day's figures but still waits in the queue.
    w.pipeline.clock.advance(DAY + MINUTE);
    let accounts = api.get("/operator/accounts", OPERATOR_TOKEN).await;
    assert_eq!(health(accounts.ok(), "Gamma Notices")["notices_failed"], 0);
    let queue = api.get("/operator/attention", OPERATOR_TOKEN).await;
    assert_eq!(queue.ok()["data"].as_array().unwrap().len(), 1);
}
