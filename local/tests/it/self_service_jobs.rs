//! An account's own replay and recovery jobs (`/v1/subscriptions/{id}/replays`, `…/recover`,
//! their progress) against the emulator, with a real loopback receiver: what each restarts, a
//! recovery cut short and continued by reconciliation, the bounds (one running job per
//! subscription, ten a day, concurrent starts), another account's 404s, and the audit.

use axum::http::StatusCode;
use futures::future::join_all;
use local::receiver::Reply;
use local::testkit::api::{ApiAccount, OPERATOR_TOKEN};
use local::testkit::through_api::ApiSubscription;
use local::testkit::World;
use serde_json::{json, Value};
use shared::domain::change::Change;
use shared::domain::integration_delivery::DeliveryStatus;
use shared::domain::replay::{ReplayStatus, JOBS_PER_ACCOUNT_PER_DAY};
use shared::domain::time::{Timestamp, DAY, HOUR, SECOND};
use shared::operations::recovery::recover::{
    create_recovery, RecoverRequest, DEFAULT_RECOVERY_STATUSES,
};
use shared::operations::recovery::replay::{job_pk, job_sk, load_job, run_job, Budget, JOB_LEASE};
use shared::operations::Ops;
use shared::reconcile::RunKind;
use shared::store::job_bounds;
use shared::store::keys;
use std::collections::BTreeSet;
use std::future::IntoFuture;
use std::time::{Duration, Instant};

fn sub_path(sub: &ApiSubscription, rest: &str) -> String {
    format!("/v1/subscriptions/{}{rest}", sub.subscription_id)
}

fn iso(t: Timestamp) -> String {
    t.to_rfc3339()
}

fn ops(w: &World) -> Ops<'_> {
    Ops::new(
        &w.pipeline.stack.clients.dynamo,
        &w.pipeline.stack.config.delivery_table,
        &w.pipeline.clock,
    )
}

/// The account token's id (`rhy_acct_{id}_{secret}`), as the audit names the credential.
fn token_id(tenant: &ApiAccount) -> String {
    tenant.token.split('_').nth(2).unwrap().to_owned()
}

/// The delivery ids the receiver was sent (`webhook-id`), each as often as it was sent.
fn sent_ids(w: &World) -> Vec<String> {
    w.receiver
        .received()
        .iter()
        .filter_map(|r| r.header("webhook-id").map(str::to_owned))
        .collect()
}

fn times_sent(w: &World, sub: &ApiSubscription, change: &Change) -> usize {
    let id = keys::delivery_id(&change.change_id, &sub.subscription_id);
    sent_ids(w).iter().filter(|s| *s == id.as_str()).count()
}

/// The subscription's audit entries as operators see them, newest first.
async fn audit(w: &World, sub: &ApiSubscription) -> Vec<Value> {
    w.api
        .get(
            &format!(
                "/operator/accounts/{}/subscriptions/{}/audit",
                sub.account_id, sub.subscription_id
            ),
            OPERATOR_TOKEN,
        )
        .await
        .ok()["data"]
        .as_array()
        .unwrap()
        .clone()
}

/// A world with dead, failed and delivered deliveries since a day ago, and a dead one older.
struct Mixed {
    dead: Vec<Change>,
    failed: Change,
    delivered: Change,
    old_dead: Change,
}

async fn mixed(w: &World, sub: &ApiSubscription) -> Mixed {
    let now = w.pipeline.now();
    // The endpoint refuses these for good: dead after one attempt.
    w.receiver.set_default(Reply::Status(400));
    let old_dead = w
        .write_changes(&sub.account_id, &[now.minus(3 * DAY)])
        .await
        .remove(0);
    let dead = w
        .write_changes(&sub.account_id, &[now.minus(HOUR), now.minus(2 * HOUR)])
        .await;
    w.receiver.set_default(Reply::Status(200));
    let mut ok = w
        .write_changes(&sub.account_id, &[now.minus(3 * HOUR), now.minus(4 * HOUR)])
        .await;
    let delivered = ok.remove(1);
    let failed = ok.remove(0);
    // As the worker leaves a delivery whose configuration stopped allowing it.
    w.update(
        &keys::event_pk(&sub.account_id, &failed.change_id),
        &keys::delivery_sk(&sub.subscription_id),
        "SET #s = :f",
        &[(":f", shared::store::expr::s("failed"))],
    )
    .await;
    for c in &dead {
        assert_eq!(w.delivery_status(sub, c).await, DeliveryStatus::Dead);
    }
    assert_eq!(
        w.delivery_status(sub, &old_dead).await,
        DeliveryStatus::Dead
    );
    assert_eq!(
        w.delivery_status(sub, &delivered).await,
        DeliveryStatus::Delivered
    );
    assert_eq!(w.receiver.count(), 5);
    Mixed {
        dead,
        failed,
        delivered,
        old_dead,
    }
}

#[tokio::test]
async fn an_administrator_replays_a_window_and_reads_its_progress_to_done() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let now = w.pipeline.now();
    let changes = w
        .write_changes(&sub.account_id, &[now.minus(HOUR), now.minus(2 * HOUR)])
        .await;
    assert_eq!(w.receiver.count(), 2);
    let started = w
        .api
        .post(
            &sub_path(&sub, "/replays"),
            &tenant.token,
            json!({"from": iso(now.minus(DAY)), "to": iso(now), "reason": "our store lost a day"}),
        )
        .await;
    let job = started.accepted().clone();
    let location = started.header("location").unwrap().to_owned();
    assert_eq!(
        location,
        sub_path(&sub, &format!("/replays/{}", job["id"].as_str().unwrap()))
    );
    assert_eq!(job["requested_by"], format!("token {}", token_id(&tenant)));
    let progress = w.api.get(&location, &tenant.token).await;
    let progress = progress.ok();
    assert_eq!(progress["status"], "completed");
    assert_eq!(progress["counts"]["in_window"], 2);
    assert_eq!(progress["counts"]["restarted"], 2);
    assert!(progress["completed_at"].is_string());
    // The receiver gets both again; the job's record is a replay, not a recovery.
    w.pipeline.pump().await.unwrap();
    assert_eq!(w.receiver.count(), 4);
    for c in &changes {
        assert_eq!(times_sent(&w, &sub, c), 2);
        assert_eq!(w.stored_delivery(&sub, c).await.restarts, 1);
    }
    let as_recovery = location.replace("/replays/", "/recoveries/");
    w.api
        .get(&as_recovery, &tenant.token)
        .await
        .problem(StatusCode::NOT_FOUND);
    // The same refusals as the operator's replay: eight days is too long.
    let eight = w
        .api
        .post(
            &sub_path(&sub, "/replays"),
            &tenant.token,
            json!({"from": iso(now.minus(8 * DAY)), "to": iso(now), "reason": "r"}),
        )
        .await;
    eight.problem(StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(eight.fields(), ["to"]);
}

#[tokio::test]
async fn a_recovery_restarts_only_the_dead_and_failed_deliveries_since_and_leaves_delivered_ones_alone(
) {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let m = mixed(&w, &sub).await;
    let now = w.pipeline.now();
    let started = w
        .api
        .post(
            &sub_path(&sub, "/recover"),
            &tenant.token,
            json!({"since": iso(now.minus(DAY)), "reason": "endpoint fixed"}),
        )
        .await;
    let job = started.accepted().clone();
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(job["statuses"], json!(["dead", "failed"]));
    assert_eq!(
        job["counts"],
        json!({"examined": 4, "restarted": 3, "skipped": 1})
    );
    assert!(job["started_at"].is_string() && job["finished_at"].is_string());
    let location = started.header("location").unwrap().to_owned();
    assert_eq!(
        w.api.get(&location, &tenant.token).await.ok()["counts"]["restarted"],
        3
    );
    w.pipeline.pump().await.unwrap();
    // Exactly the dead and failed ones since `since` were sent again.
    assert_eq!(w.receiver.count(), 8);
    for c in m.dead.iter().chain([&m.failed]) {
        let d = w.stored_delivery(&sub, c).await;
        assert_eq!((d.status, d.restarts), (DeliveryStatus::Delivered, 1));
    }
    assert_eq!(
        times_sent(&w, &sub, &m.delivered),
        1,
        "delivered: left alone"
    );
    assert_eq!(w.stored_delivery(&sub, &m.delivered).await.restarts, 0);
    assert_eq!(
        times_sent(&w, &sub, &m.old_dead),
        1,
        "before since: left alone"
    );
    assert_eq!(
        w.delivery_status(&sub, &m.old_dead).await,
        DeliveryStatus::Dead
    );
}

#[tokio::test]
async fn a_recovery_cut_short_is_continued_by_reconciliation_without_restarting_anything_twice() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let now = w.pipeline.now();
    w.receiver.set_default(Reply::Status(400));
    let occurred: Vec<Timestamp> = (1..=5).map(|h| now.minus(h * HOUR)).collect();
    let changes = w.write_changes(&sub.account_id, &occurred).await;
    w.receiver.set_default(Reply::Status(200));
    let ops = ops(&w);
    let actor = format!("token {}", token_id(&tenant));
    let job = create_recovery(
        &ops,
        RecoverRequest {
            account_id: &sub.account_id,
            subscription_id: &sub.subscription_id,
            since: now.minus(DAY),
            statuses: &DEFAULT_RECOVERY_STATUSES,
            actor: &actor,
            reason: "cut short",
        },
    )
    .await
    .unwrap();
    let small = Budget {
        chunk: 2,
        max_chunks: Some(1),
        deadline: Instant::now() + Duration::from_secs(60),
    };
    let first = run_job(&ops, &sub.account_id, &job.job_id, small)
        .await
        .unwrap();
    assert_eq!((first.status, first.restarted), (ReplayStatus::Running, 2));
    // The next run restarts the next chunk and dies before saving it, holding its lease.
    let second = run_job(&ops, &sub.account_id, &job.job_id, small)
        .await
        .unwrap();
    assert_eq!(second.restarted, 4);
    w.update(
        &job_pk(&sub.account_id),
        &job_sk(&job.job_id),
        "SET #p = :p, restarted = :two, in_window = :two, lease_until = :l, lease_token = :t",
        &[
            (":p", shared::store::expr::s(changes[1].change_id.as_str())),
            (":two", shared::store::expr::n(2)),
            (
                ":l",
                shared::store::expr::n(w.pipeline.now().plus(JOB_LEASE).millis()),
            ),
            (":t", shared::store::expr::s("dead-run")),
        ],
    )
    .await;
    let path = sub_path(&sub, &format!("/recoveries/{}", job.job_id));
    let stopped = w.api.get(&path, &tenant.token).await;
    assert_eq!(stopped.ok()["status"], "running");
    assert_eq!(stopped.json["in_progress"], true);
    // While it runs, another job on the subscription is refused.
    let busy = w
        .api
        .post(
            &sub_path(&sub, "/recover"),
            &tenant.token,
            json!({"since": iso(now.minus(DAY)), "reason": "again"}),
        )
        .await;
    busy.problem(StatusCode::TOO_MANY_REQUESTS);
    // Once the dead run's lease lapses, reconciliation continues the job to its end.
    w.pipeline.clock.advance(JOB_LEASE + SECOND);
    let run = w.pipeline.reconcile(RunKind::Rollup, 1000).await;
    assert!(run.ok(), "{run:?}");
    assert_eq!(run.replays.completed, 1, "{run:?}");
    let done = w.api.get(&path, &tenant.token).await;
    let done = done.ok().clone();
    assert_eq!(done["status"], "completed");
    assert_eq!(
        done["counts"],
        json!({"examined": 5, "restarted": 5, "skipped": 0})
    );
    w.pipeline.pump().await.unwrap();
    for c in &changes {
        let d = w.stored_delivery(&sub, c).await;
        assert_eq!((d.status, d.restarts), (DeliveryStatus::Delivered, 1));
        assert_eq!(times_sent(&w, &sub, c), 2, "sent once more, not twice");
    }
    // Completed, it gave the subscription's slot back.
    w.api
        .post(
            &sub_path(&sub, "/recover"),
            &tenant.token,
            json!({"since": iso(w.pipeline.now().minus(DAY)), "reason": "again"}),
        )
        .await
        .accepted();
}

#[tokio::test]
async fn a_recovery_since_more_than_seven_days_back_or_of_delivered_deliveries_is_refused() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let now = w.pipeline.now();
    w.write_changes(&sub.account_id, &[now.minus(HOUR)]).await;
    let recover = sub_path(&sub, "/recover");
    for (body, fields) in [
        (
            json!({"since": iso(now.minus(7 * DAY + HOUR)), "reason": "r"}),
            vec!["since"],
        ),
        (
            json!({"since": iso(now.minus(DAY)), "statuses": ["delivered"], "reason": "r"}),
            vec!["statuses"],
        ),
        (
            json!({"since": iso(now.minus(DAY)), "statuses": ["gone"], "reason": "r"}),
            vec!["statuses[0]"],
        ),
        (json!({"since": "last week", "reason": "r"}), vec!["since"]),
        (json!({"since": iso(now.minus(DAY))}), vec!["reason"]),
    ] {
        let r = w.api.post(&recover, &tenant.token, body.clone()).await;
        r.problem(StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(r.fields(), fields, "{body}");
    }
    w.pipeline.pump().await.unwrap();
    assert_eq!(w.receiver.count(), 1, "nothing restarted");
    // Seven days exactly is accepted.
    w.api
        .post(
            &recover,
            &tenant.token,
            json!({"since": iso(now.minus(7 * DAY)), "reason": "r"}),
        )
        .await
        .accepted();
}

#[tokio::test]
async fn another_accounts_token_gets_404_on_every_route_and_nothing_changes() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let other = w.api.account("Other").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let theirs = w.subscribe_through_api(&other, "webhook", json!({})).await;
    let m = mixed(&w, &sub).await;
    let now = w.pipeline.now();
    let replay = w
        .api
        .post(
            &sub_path(&sub, "/replays"),
            &tenant.token,
            json!({"from": iso(now.minus(DAY)), "to": iso(now), "reason": "mine"}),
        )
        .await;
    let replay_id = replay.accepted()["id"].as_str().unwrap().to_owned();
    let recovery = w
        .api
        .post(
            &sub_path(&sub, "/recover"),
            &tenant.token,
            json!({"since": iso(now.minus(DAY)), "reason": "mine"}),
        )
        .await;
    let recovery_id = recovery.accepted()["id"].as_str().unwrap().to_owned();
    w.pipeline.pump().await.unwrap();
    let sent_before = w.receiver.count();
    let audit_before = audit(&w, &sub).await.len();
    let delivered_before = w.stored_delivery(&sub, &m.delivered).await.restarts;

    let starts = [
        (
            sub_path(&sub, "/replays"),
            json!({"from": iso(now.minus(DAY)), "to": iso(now), "reason": "theirs"}),
        ),
        (
            sub_path(&sub, "/recover"),
            json!({"since": iso(now.minus(DAY)), "reason": "theirs"}),
        ),
    ];
    for (path, body) in starts {
        w.api
            .post(&path, &other.token, body)
            .await
            .problem(StatusCode::NOT_FOUND);
    }
    for path in [
        sub_path(&sub, &format!("/replays/{replay_id}")),
        sub_path(&sub, &format!("/recoveries/{recovery_id}")),
        // Under their own subscription, the tenant's job ids are as unknown.
        sub_path(&theirs, &format!("/replays/{replay_id}")),
        sub_path(&theirs, &format!("/recoveries/{recovery_id}")),
    ] {
        w.api
            .get(&path, &other.token)
            .await
            .problem(StatusCode::NOT_FOUND);
    }
    w.pipeline.pump().await.unwrap();
    assert_eq!(w.receiver.count(), sent_before, "nothing was sent again");
    assert_eq!(audit(&w, &sub).await.len(), audit_before, "nothing audited");
    assert_eq!(
        w.stored_delivery(&sub, &m.delivered).await.restarts,
        delivered_before
    );
    let ops = ops(&w);
    assert_eq!(
        job_bounds::started_on(ops.dynamo, ops.table, &other.account_id, now)
            .await
            .unwrap(),
        0,
        "the other account started nothing"
    );
}

#[tokio::test]
async fn a_second_job_while_one_runs_is_429_with_retry_after() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let now = w.pipeline.now();
    w.write_changes(&sub.account_id, &[now.minus(HOUR)]).await;
    let ops = ops(&w);
    // A recovery recorded and not yet run (its request died): it is running.
    let job = create_recovery(
        &ops,
        RecoverRequest {
            account_id: &sub.account_id,
            subscription_id: &sub.subscription_id,
            since: now.minus(DAY),
            statuses: &DEFAULT_RECOVERY_STATUSES,
            actor: "token x",
            reason: "first",
        },
    )
    .await
    .unwrap();
    for (path, body) in [
        (
            sub_path(&sub, "/replays"),
            json!({"from": iso(now.minus(DAY)), "to": iso(now), "reason": "second"}),
        ),
        (
            sub_path(&sub, "/recover"),
            json!({"since": iso(now.minus(DAY)), "reason": "second"}),
        ),
    ] {
        let r = w.api.post(&path, &tenant.token, body).await;
        let problem = r.problem(StatusCode::TOO_MANY_REQUESTS);
        assert!(
            problem["detail"]
                .as_str()
                .unwrap()
                .contains(job.job_id.as_str()),
            "{}",
            r.text
        );
        let wait: u64 = r.header("retry-after").unwrap().parse().unwrap();
        assert!((1..=60).contains(&wait), "{wait}");
    }
    // The operator's door is not bound.
    w.api
        .post(
            &format!(
                "/operator/accounts/{}/subscriptions/{}/replays",
                sub.account_id, sub.subscription_id
            ),
            OPERATOR_TOKEN,
            json!({"from": iso(now.minus(DAY)), "to": iso(now), "reason": "operator"}),
        )
        .await
        .accepted();
    // Once the first completes, a second may start.
    let done = run_job(&ops, &sub.account_id, &job.job_id, Budget::api())
        .await
        .unwrap();
    assert_eq!(done.status, ReplayStatus::Completed);
    w.api
        .post(
            &sub_path(&sub, "/recover"),
            &tenant.token,
            json!({"since": iso(now.minus(DAY)), "reason": "second"}),
        )
        .await
        .accepted();
    assert_eq!(
        load_job(&ops, &sub.account_id, &job.job_id)
            .await
            .unwrap()
            .status,
        ReplayStatus::Completed
    );
}

#[tokio::test]
async fn the_eleventh_job_of_a_day_is_429_until_the_next_utc_day() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let other = w.api.account("Other").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let theirs = w.subscribe_through_api(&other, "webhook", json!({})).await;
    let now = w.pipeline.now();
    for i in 0..JOBS_PER_ACCOUNT_PER_DAY {
        let (path, body) = if i % 2 == 0 {
            (
                "/recover",
                json!({"since": iso(now.minus(DAY)), "reason": format!("job {i}")}),
            )
        } else {
            (
                "/replays",
                json!({"from": iso(now.minus(DAY)), "to": iso(now), "reason": format!("job {i}")}),
            )
        };
        w.api
            .post(&sub_path(&sub, path), &tenant.token, body)
            .await
            .accepted();
    }
    let eleventh = w
        .api
        .post(
            &sub_path(&sub, "/recover"),
            &tenant.token,
            json!({"since": iso(now.minus(DAY)), "reason": "eleventh"}),
        )
        .await;
    let problem = eleventh.problem(StatusCode::TOO_MANY_REQUESTS);
    assert!(problem["detail"].as_str().unwrap().contains("today"));
    let wait: u64 = eleventh.header("retry-after").unwrap().parse().unwrap();
    let until_midnight = job_bounds::next_utc_day(now).since(now).as_secs();
    assert!(
        wait <= until_midnight.max(1) && wait + 5 >= until_midnight,
        "{wait} vs {until_midnight}"
    );
    // Another account's allowance is its own.
    w.api
        .post(
            &sub_path(&theirs, "/recover"),
            &other.token,
            json!({"since": iso(now.minus(DAY)), "reason": "mine"}),
        )
        .await
        .accepted();
    // The next UTC day has room again.
    w.pipeline
        .clock
        .advance(job_bounds::next_utc_day(now).since(now) + SECOND);
    w.api
        .post(
            &sub_path(&sub, "/recover"),
            &tenant.token,
            json!({"since": iso(w.pipeline.now().minus(DAY)), "reason": "tomorrow"}),
        )
        .await
        .accepted();
}

#[tokio::test]
async fn concurrent_starts_never_overshoot_the_days_bound() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let first = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let integration_id =
        w.api.get(&sub_path(&first, ""), &tenant.token).await.ok()["integration_id"].clone();
    let mut subs = vec![first.subscription_id.to_string()];
    for _ in 0..13 {
        let s = w
            .api
            .post(
                "/v1/subscriptions",
                &tenant.token,
                json!({"integration_id": integration_id, "record_types": ["catalog_item"], "fields": ["sku"]}),
            )
            .await;
        subs.push(s.created()["id"].as_str().unwrap().to_owned());
    }
    let now = w.pipeline.now();
    // Fourteen starts at once, each on its own subscription (no slot refuses any), and two more
    // on the first subscription (its slot refuses all but one of its three while it runs).
    let mut paths: Vec<String> = subs
        .iter()
        .map(|s| format!("/v1/subscriptions/{s}/recover"))
        .collect();
    paths.push(paths[0].clone());
    paths.push(paths[0].clone());
    let answers = join_all(paths.iter().map(|p| {
        w.api
            .post(
                p,
                &tenant.token,
                json!({"since": iso(now.minus(DAY)), "reason": "all at once"}),
            )
            .into_future()
    }))
    .await;
    let statuses: Vec<u16> = answers.iter().map(|a| a.status.as_u16()).collect();
    let accepted = statuses.iter().filter(|s| **s == 202).count();
    assert_eq!(accepted, JOBS_PER_ACCOUNT_PER_DAY as usize, "{statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 202 || *s == 429),
        "{statuses:?}"
    );
    for a in answers.iter().filter(|a| a.status.as_u16() == 429) {
        assert!(a.header("retry-after").is_some());
    }
    let ops = ops(&w);
    assert_eq!(
        job_bounds::started_on(ops.dynamo, ops.table, &tenant.account_id, now)
            .await
            .unwrap(),
        JOBS_PER_ACCOUNT_PER_DAY
    );
    let jobs = w
        .api
        .get(
            &format!("/operator/accounts/{}/replays?limit=100", tenant.account_id),
            OPERATOR_TOKEN,
        )
        .await;
    let listed = jobs.ok()["data"].as_array().unwrap();
    // Operators see the account's recoveries beside their replays, as recoveries.
    assert!(
        listed
            .iter()
            .all(|j| j["kind"] == "recovery" && j["statuses"] == json!(["dead", "failed"])),
        "{listed:?}"
    );
    let ids: BTreeSet<&str> = listed.iter().map(|j| j["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), JOBS_PER_ACCOUNT_PER_DAY as usize);
}

#[tokio::test]
async fn the_audit_shows_the_token_credential_and_the_reason_beside_operators_actions() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let now = w.pipeline.now();
    w.write_changes(&sub.account_id, &[now.minus(HOUR)]).await;
    let replay = w
        .api
        .post(
            &sub_path(&sub, "/replays"),
            &tenant.token,
            json!({"from": iso(now.minus(DAY)), "to": iso(now), "reason": "resend yesterday"}),
        )
        .await;
    let replay_id = replay.accepted()["id"].as_str().unwrap().to_owned();
    let recovery = w
        .api
        .post(
            &sub_path(&sub, "/recover"),
            &tenant.token,
            json!({"since": iso(now.minus(DAY)), "statuses": ["dead"], "reason": "endpoint back"}),
        )
        .await;
    let recovery_id = recovery.accepted()["id"].as_str().unwrap().to_owned();
    w.api
        .post(
            &format!(
                "/operator/accounts/{}/subscriptions/{}/replays",
                sub.account_id, sub.subscription_id
            ),
            OPERATOR_TOKEN,
            json!({"from": iso(now.minus(DAY)), "to": iso(now), "reason": "operator's replay"}),
        )
        .await
        .accepted();
    let entries = audit(&w, &sub).await;
    let actions: Vec<&str> = entries
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "replay_window",
            "recover_subscription",
            "replay_window",
            "create_subscription"
        ]
    );
    let credential = format!("token {}", token_id(&tenant));
    assert_eq!(entries[1]["operator"], credential.as_str());
    assert_eq!(entries[1]["reason"], "endpoint back");
    assert_eq!(entries[1]["job_id"], recovery_id.as_str());
    assert_eq!(entries[1]["details"]["statuses"], "dead");
    assert_eq!(entries[2]["operator"], credential.as_str());
    assert_eq!(entries[2]["reason"], "resend yesterday");
    assert_eq!(entries[2]["job_id"], replay_id.as_str());
    assert_ne!(entries[0]["operator"], credential.as_str());
}
