//! Nothing waits for a person, and how long recovery takes (`docs/recovery.md`): a replay job cut
//! short by its Lambda's timeout is continued by the next roll-up reconcile run; notification
//! deliveries get the events' retention once at rest; the doc's bounds are the code's constants
//! and hold on the virtual clock.

use crate::fault_matrix::on_the_schedule;
use crate::sim::{
    slack_notice, Sim, DELIVERY_VISIBILITY, NOTIFICATION_VISIBILITY, ROLLUP_EVERY, SWEEP_EVERY,
};
use local::receiver::{Receiver, Reply};
use local::template::Template;
use local::testkit::api::OPERATOR;
use local::testkit::World;
use serde_json::json;
use shared::domain::event::RETENTION;
use shared::domain::integration_delivery::{
    DeliveryStatus, FIRST_DISPATCH_GRACE, PROCESSING_LEASE,
};
use shared::domain::replay::ReplayStatus;
use shared::domain::time::{Timestamp, DAY, HOUR};
use shared::operations::recovery::replay::{
    create_job, job_pk, job_sk, load_job, run_job, Budget, ReplayRequest, JOB_LEASE,
};
use shared::operations::Ops;
use shared::reconcile::RunKind;
use shared::store::attrs::EXPIRES_AT;
use shared::store::notification_delivery::delivery_sk;
use shared::store::provider_ref::{provider_ref_pk, PROVIDER_REF_SK};
use std::time::{Duration, Instant};

/// The bounds `docs/recovery.md` states, each from the code's constants: (row label, bound).
fn bounds() -> Vec<(&'static str, Duration)> {
    vec![
        ("Stream record failed", Duration::ZERO),
        ("Delivery message failed", DELIVERY_VISIBILITY),
        ("Notification message failed", NOTIFICATION_VISIBILITY),
        (
            "Lost first dispatch",
            FIRST_DISPATCH_GRACE + ROLLUP_EVERY + SWEEP_EVERY,
        ),
        (
            "Lost first dispatch, requeue failed",
            FIRST_DISPATCH_GRACE + 2 * ROLLUP_EVERY + SWEEP_EVERY,
        ),
        (
            "Worker died after its claim",
            FIRST_DISPATCH_GRACE.max(PROCESSING_LEASE) + ROLLUP_EVERY + SWEEP_EVERY,
        ),
        ("Replay run interrupted", JOB_LEASE + ROLLUP_EVERY),
    ]
}

#[test]
fn the_recovery_doc_states_the_bounds_the_constants_give() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/recovery.md"),
    )
    .expect("docs/recovery.md");
    for (label, bound) in bounds() {
        let row = doc
            .lines()
            .find(|l| l.starts_with(&format!("| {label} |")))
            .unwrap_or_else(|| panic!("docs/recovery.md has no row `{label}`"));
        let stated = format!("**{} s**", bound.as_secs());
        assert!(
            row.contains(&stated),
            "`{label}`: the doc must state {stated}: {row}"
        );
    }
    // The simulation's schedules and timeouts are the template's.
    let template = Template::load_project().unwrap();
    let visibility = |q: &str| {
        Duration::from_secs(
            template
                .queue(q)
                .unwrap()
                .visibility_timeout
                .unwrap()
                .into(),
        )
    };
    assert_eq!(visibility("DeliveryQueue"), DELIVERY_VISIBILITY);
    assert_eq!(visibility("NotificationQueue"), NOTIFICATION_VISIBILITY);
    let text = std::fs::read_to_string(Template::project_path()).unwrap();
    assert!(text
        .contains("ScheduleExpression: rate(1 minute)\n            Input: '{\"sweep\":\"due\"}'"));
    assert!(text.contains(
        "ScheduleExpression: rate(10 minutes)\n            Input: '{\"run\":\"rollup\"}'"
    ));
}

#[tokio::test]
async fn a_replay_job_cut_short_by_its_lambdas_timeout_is_continued_by_the_next_roll_up_run() {
    let w = World::new().await;
    let tenant = w.api.account("Tenant").await;
    let sub = w.subscribe_through_api(&tenant, "webhook", json!({})).await;
    let now = w.pipeline.now();
    let occurred: Vec<Timestamp> = (1..=5).map(|h| now.minus(h * HOUR)).collect();
    let changes = w.write_changes(&sub.account_id, &occurred).await;
    assert_eq!(w.receiver.count(), 5);
    let ops = Ops::new(
        &w.pipeline.stack.clients.dynamo,
        &w.pipeline.stack.config.delivery_table,
        &w.pipeline.clock,
    );
    let job = create_job(
        &ops,
        ReplayRequest {
            account_id: &sub.account_id,
            subscription_id: &sub.subscription_id,
            from: now.minus(DAY),
            to: now,
            operator: OPERATOR,
            reason: "replay cut short",
        },
    )
    .await
    .unwrap();
    // The API's run walks one chunk, then its Lambda times out holding the lease.
    let one = Budget {
        chunk: 2,
        max_chunks: Some(1),
        deadline: Instant::now() + Duration::from_secs(60),
    };
    run_job(&ops, &sub.account_id, &job.job_id, one)
        .await
        .unwrap();
    w.update(
        &job_pk(&sub.account_id),
        &job_sk(&job.job_id),
        "SET lease_until = :l, lease_token = :t",
        &[
            (
                ":l",
                shared::store::expr::n(w.pipeline.now().plus(JOB_LEASE).millis()),
            ),
            (":t", shared::store::expr::s("timed-out-run")),
        ],
    )
    .await;

    // A run while the dead run's lease lasts leaves the job alone.
    let early = w.pipeline.reconcile(RunKind::Rollup, 1000).await;
    assert!(early.ok(), "{early:?}");
    assert_eq!(early.replays.resumed, 0);
    let mut sim = Sim::new(&w);
    let took = sim
        .until(JOB_LEASE + 2 * ROLLUP_EVERY, || async {
            load_job(&ops, &sub.account_id, &job.job_id)
                .await
                .unwrap()
                .status
                == ReplayStatus::Completed
        })
        .await;
    assert!(
        took <= on_the_schedule(JOB_LEASE + ROLLUP_EVERY),
        "continued after {took:?}"
    );
    let done = load_job(&ops, &sub.account_id, &job.job_id).await.unwrap();
    assert_eq!((done.in_window, done.restarted, done.runs), (5, 5, 2));
    // Every delivery restarted once and delivered again; a later run does nothing more.
    sim.until(ROLLUP_EVERY, || async { w.receiver.count() == 10 })
        .await;
    let again = w.pipeline.reconcile(RunKind::Rollup, 1000).await;
    assert_eq!((again.replays.found, again.replays.resumed), (0, 0));
    for change in &changes {
        let d = w
            .pipeline
            .delivery(&sub.account_id, &change.change_id, &sub.subscription_id)
            .await
            .unwrap();
        assert_eq!((d.status, d.restarts), (DeliveryStatus::Delivered, 1));
    }
}

#[tokio::test]
async fn a_worker_that_died_after_its_claim_is_recovered_within_the_stated_bound() {
    let w = World::new().await;
    let account = w.account().await;
    let hook = w.integration(&account.account_id).await;
    let sub = w.subscribe(&hook).await;
    let change = w.change(&account.account_id).await;
    w.pipeline.ingest_pending().await.unwrap();
    w.pipeline.dispatch_pending().await.unwrap();
    // The worker claims (its lease written) and dies; its message is gone too.
    w.lease(
        &change,
        &sub.subscription_id,
        w.pipeline.now().plus(PROCESSING_LEASE),
        "dead-worker",
    )
    .await;
    let mut sim = Sim::new(&w);
    let lost = sim
        .deliveries
        .drain(w.pipeline.now(), |_| async { Default::default() })
        .await;
    assert_eq!(lost, 1);
    let bound = bounds()[5].1;
    let took = sim
        .until(bound + ROLLUP_EVERY, || async {
            w.pipeline
                .delivery(&account.account_id, &change.change_id, &sub.subscription_id)
                .await
                .is_some_and(|d| d.status == DeliveryStatus::Delivered)
        })
        .await;
    assert!(
        took <= on_the_schedule(bound),
        "delivered after {took:?}, beyond {bound:?}"
    );
    assert_eq!(w.receiver.count(), 1);
}

#[tokio::test]
async fn notification_deliveries_at_rest_carry_the_events_retention_and_the_table_expires_them() {
    let template = Template::load_project().unwrap();
    assert_eq!(
        template
            .table("NotificationTable")
            .unwrap()
            .ttl_attribute
            .as_deref(),
        Some(EXPIRES_AT)
    );
    let w = World::new().await;
    let slack = Receiver::start().await;
    slack.set_default(Reply::Full {
        status: 200,
        headers: vec![("x-slack-req-id".into(), "req-7".into())],
        body: "ok".into(),
    });
    let notice = w
        .notify
        .create(slack_notice(
            &slack,
            "ops",
            "Kept thirty days",
            &["slack", "console"],
        ))
        .await;
    let expiry = |item: &shared::store::Item| {
        item.get(EXPIRES_AT)
            .map(|v| v.as_n().unwrap().parse::<i64>().unwrap())
    };
    // Queued: no expiry. The console delivery is delivered from birth: its expiry is set.
    let queued = w
        .notify
        .item(&notice.request.notice_id, &delivery_sk("slack-0"))
        .await
        .unwrap();
    assert_eq!(expiry(&queued), None, "queued work never expires");
    let console = w
        .notify
        .delivery(&notice.request.notice_id, "console-0")
        .await;
    assert_eq!(
        console.expires_at,
        Some(console.updated_at.plus(RETENTION).seconds())
    );
    w.notify.drain().await;
    let slack_0 = w
        .notify
        .delivery(&notice.request.notice_id, "slack-0")
        .await;
    assert_eq!(
        slack_0.status,
        shared::domain::notification_delivery::NotificationStatus::Delivered
    );
    let item = w
        .notify
        .item(&notice.request.notice_id, &delivery_sk("slack-0"))
        .await
        .unwrap();
    assert_eq!(
        expiry(&item),
        Some(slack_0.updated_at.plus(RETENTION).seconds())
    );
    // Its provider reference goes with it (from the time it was sent).
    let reference = w
        .notify
        .store
        .get(&provider_ref_pk("slack", "req-7"), PROVIDER_REF_SK)
        .await
        .unwrap()
        .expect("the provider reference");
    let sent_at = slack_0.sent_at.expect("sent");
    assert_eq!(expiry(&reference), Some(sent_at.plus(RETENTION).seconds()));
}
