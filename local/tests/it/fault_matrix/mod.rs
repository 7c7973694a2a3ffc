//! Every handler under every fault the emulator cannot make (`local::faults`), as one table: a
//! row names a handler, the request of it that meets the fault, and the fault. Every row runs the
//! same scenario on its own world — three changes for a healthy webhook subscription, a failing
//! one (every delivery dead) and a filtered one, and one Slack notice — injects its fault, steps
//! the world on the virtual clock until it is whole again, and checks the same guarantees:
//!
//! * one delivery record per subscription × change, the filtered ones never moved;
//! * every attempt number once in the table, and at the receiver once per attempt (plus one
//!   repeat only where an outcome write really failed after the attempt: the lifecycle's repeat after a
//!   lost acknowledgement);
//! * the dead count exact, the subscriptions active;
//! * the notice sent once, claimed once;
//! * batch item failures for exactly the records whose request really failed;
//! * the event roll-ups right;
//! * the time until whole within the bound `docs/recovery.md` states for the fault.

mod kinds;

use crate::sim::{
    slack_notice, Sim, DELIVERY_VISIBILITY, NOTIFICATION_VISIBILITY, ROLLUP_EVERY, SWEEP_EVERY,
};
use aws_lambda_events::event::sqs::SqsBatchResponse;
use local::faults::{Fault, Matcher};
use local::receiver::{Receiver, Reply};
use local::request_kinds::{named, RequestKind};
use local::testkit::api::OPERATOR_TOKEN;
use local::testkit::World;
use serde_json::json;
use shared::delivery::dispatch::publish::works_in;
use shared::domain::change::Change;
use shared::domain::event::EventStatus;
use shared::domain::integration_delivery::{DeliveryStatus, FIRST_DISPATCH_GRACE};
use shared::domain::notification_delivery::NotificationStatus;
use shared::domain::retry::RetryPolicy;
use shared::domain::subscription::SubscriptionStatus;
use shared::ids::NoticeId;
use shared::store::audit::{self, AuditScope};
use shared::store::delivery::Delivery;
use shared::store::subscription::Subscription;
use shared::store::{from_item, keys};
use std::time::Duration;

/// Tries the SDK makes of a request (its standard retry policy, as in production).
const SDK_TRIES: u32 = 3;
const CHANGES: usize = 3;

/// A handler, by the request of it that a row's fault meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Handler {
    /// Stream ingest's conditional put of a delivery record.
    Ingest,
    /// Stream ingest putting an account created before the `ACCOUNTS` listing on it.
    IngestListing,
    /// The dispatcher's stream path publishing new work.
    Dispatch,
    /// The delivery worker's claim of an attempt.
    DeliverClaim,
    /// The delivery worker's outcome write (a delivered attempt).
    DeliverOutcome,
    /// The delivery worker's dead outcome with its subscription's dead count (a transaction).
    DeliverDead,
    /// The notification stream's fan-out (delivery, count and work row: a transaction).
    NotifyStream,
    /// The notification worker's claim (a transaction).
    NotifyWorker,
    /// The roll-up run putting deliveries whose first dispatch was lost back on the due index.
    Reconcile,
    /// The operator's retry route (the restart and its audit entry: a transaction).
    ApiRetry,
}

impl Handler {
    pub(super) const ALL: [Handler; 10] = [
        Handler::Ingest,
        Handler::IngestListing,
        Handler::Dispatch,
        Handler::DeliverClaim,
        Handler::DeliverOutcome,
        Handler::DeliverDead,
        Handler::NotifyStream,
        Handler::NotifyWorker,
        Handler::Reconcile,
        Handler::ApiRetry,
    ];

    /// The kind of request (`local::request_kinds`) this handler's fault meets.
    pub(super) fn kind(self) -> &'static RequestKind {
        named(match self {
            Handler::Ingest => "ingest.delivery",
            Handler::IngestListing => "ingest.listing",
            Handler::Dispatch => "dispatch.publish",
            Handler::DeliverClaim => "worker.claim",
            Handler::DeliverOutcome => "worker.outcome",
            Handler::DeliverDead => "worker.dead",
            Handler::NotifyStream => "notify.fan_out",
            Handler::NotifyWorker => "notify.claim",
            Handler::Reconcile => "reconcile.requeue",
            Handler::ApiRetry => "api.retry",
        })
    }

    /// The request this handler's fault meets.
    fn request(self) -> Matcher {
        self.kind().matcher()
    }

    /// The requests of this kind the scenario's first pass makes (run concurrently, so a fault
    /// that is to outlast the SDK's tries of each must meet all of them that many times).
    fn requests(self) -> u32 {
        let changes = CHANGES as u32;
        match self {
            // The record of each subscription (the filtered one's too) of each change.
            Handler::Ingest => 3 * changes,
            // Each change's record tries to list the account until one succeeds.
            Handler::IngestListing => changes,
            // All the new work in one publish request.
            Handler::Dispatch => 1,
            Handler::DeliverClaim => 2 * changes,
            Handler::DeliverOutcome | Handler::DeliverDead => changes,
            Handler::NotifyStream | Handler::NotifyWorker | Handler::ApiRetry => 1,
            // An event's roll-up stops at its first failed requeue: one request per event.
            Handler::Reconcile => changes,
        }
    }

    /// Whether the request is a transaction (only those can meet a `TransactionConflict`).
    fn transactional(self) -> bool {
        self.kind().transactional()
    }
}

/// One row: each of a handler's requests meets `fault`, `times` times in a row.
#[derive(Debug, Clone)]
struct Row {
    handler: Handler,
    fault: Fault,
    times: u32,
}

impl Row {
    /// Injects the row's fault: on every request of its kind when it is to outlast the SDK's
    /// tries, else on the first one (a retry of a request whose answer was lost must not meet
    /// the rule meant for another).
    fn inject(&self, w: &World) {
        let n = if self.outlasts_sdk() {
            self.times * self.handler.requests()
        } else {
            self.times
        };
        w.pipeline
            .stack
            .faults
            .inject_matching(self.handler.request(), self.fault.clone(), n);
    }
}

/// The faults every handler meets: a transaction conflict (transactions only), a throttle and an
/// internal error that outlast the SDK's tries, a lost response, and latency.
fn rows(handler: Handler) -> Vec<Row> {
    let mut faults = vec![
        (Fault::Throttle, SDK_TRIES),
        (Fault::InternalError, SDK_TRIES),
        (Fault::LostResponse, 1),
        (Fault::Latency(Duration::from_millis(1500)), 1),
    ];
    if handler.transactional() {
        faults.push((Fault::TransactionConflict, 2));
    }
    faults
        .into_iter()
        .map(|(fault, times)| Row {
            handler,
            fault,
            times,
        })
        .collect()
}

impl Row {
    /// The fault reaches the handler: every one of the SDK's tries met it.
    fn outlasts_sdk(&self) -> bool {
        matches!(self.fault, Fault::Throttle | Fault::InternalError) && self.times >= SDK_TRIES
    }

    /// Batch item failures the handler must report (queue messages and stream records): exactly
    /// the records whose request failed for good.
    fn expected_failures(&self) -> usize {
        if !self.outlasts_sdk() {
            return 0;
        }
        match self.handler {
            // A change's record fails when one of its puts does, or the account's listing.
            Handler::Ingest | Handler::IngestListing => CHANGES,
            // One publish request carries the new work of all three changes' two push deliveries.
            Handler::Dispatch => 2 * CHANGES,
            // Not batch handlers: a run reports the fault, an API client gets a 5xx.
            Handler::Reconcile | Handler::ApiRetry => 0,
            // The dispatcher packs the account's six new push deliveries in one message: a claim,
            // a delivered outcome or a dead one (the failing endpoint's answers are permanent)
            // that fails for good returns that one message.
            Handler::DeliverClaim | Handler::DeliverOutcome | Handler::DeliverDead => 1,
            other => other.requests() as usize,
        }
    }

    /// Receiver requests beyond one per recorded attempt: an attempt whose outcome write failed
    /// is made again once its lease has lapsed.
    fn repeated_sends(&self) -> usize {
        let outcome = matches!(self.handler, Handler::DeliverOutcome | Handler::DeliverDead);
        if outcome && self.outlasts_sdk() {
            self.handler.requests() as usize
        } else {
            0
        }
    }

    /// The virtual time until the system is whole again (docs/recovery.md).
    fn bound(&self) -> Duration {
        let sdk = self.outlasts_sdk();
        match self.handler {
            // The stream hands a failed record over again at once.
            Handler::Ingest
            | Handler::IngestListing
            | Handler::Dispatch
            | Handler::NotifyStream => Duration::ZERO,
            // The queue returns the failed message after its visibility timeout.
            Handler::DeliverClaim | Handler::DeliverOutcome | Handler::DeliverDead if sdk => {
                DELIVERY_VISIBILITY
            }
            Handler::NotifyWorker if sdk => NOTIFICATION_VISIBILITY,
            // A lost first dispatch: the grace, the next roll-up run, the next sweep; a failed
            // requeue waits for one more roll-up run.
            Handler::Reconcile => {
                FIRST_DISPATCH_GRACE
                    + ROLLUP_EVERY
                    + SWEEP_EVERY
                    + if sdk { ROLLUP_EVERY } else { Duration::ZERO }
            }
            // The operator's client repeats a request answered with a 5xx.
            _ => Duration::ZERO,
        }
    }
}

/// What a row's world holds.
struct Scenario {
    healthy: Subscription,
    failing: Subscription,
    filtered: Subscription,
    changes: Vec<Change>,
    /// The receiver of the failing subscription (every delivery is refused with a 400).
    refusing: Receiver,
    slack: Receiver,
    notice_id: NoticeId,
}

impl Scenario {
    async fn new(w: &World) -> Self {
        let account = w.account().await;
        let healthy_hook = w.integration(&account.account_id).await;
        let refusing = Receiver::start().await;
        refusing.set_default(Reply::Status(400));
        let failing_hook = w.integration(&account.account_id).to(&refusing).await;
        let healthy = w.subscribe(&healthy_hook).await;
        let failing = w.subscribe(&failing_hook).await;
        let filtered = w
            .subscribe(&healthy_hook)
            .filter(json!({"field": "record.price", "gt": 100}))
            .await;
        let slack = Receiver::start().await;
        slack.set_default(Reply::Status(200));
        Scenario {
            healthy,
            failing,
            filtered,
            changes: Vec::new(),
            refusing,
            slack,
            notice_id: NoticeId::default(),
        }
    }

    /// The owning application's changes and the notice.
    async fn start(&mut self, w: &World) {
        for i in 0..CHANGES {
            self.changes.push(
                w.change(&self.healthy.account_id)
                    .price(i as f64 + 1.0)
                    .await,
            );
        }
        let notice = slack_notice(&self.slack, "ops", "Faults", &["slack"]);
        let (n, _) = w
            .notify
            .notices
            .create(&w.notify.account, notice)
            .await
            .unwrap();
        self.notice_id = n.request.notice_id.clone();
    }

    fn subscriptions(&self) -> [&Subscription; 3] {
        [&self.healthy, &self.failing, &self.filtered]
    }

    async fn deliveries(&self, w: &World, change: &Change) -> Vec<Delivery> {
        deliveries(w, change).await
    }

    /// Whether every delivery and the notice reached where the scenario ends.
    async fn whole(&self, w: &World) -> bool {
        for change in &self.changes {
            let ds = self.deliveries(w, change).await;
            let status = |s: &Subscription| {
                ds.iter()
                    .find(|d| d.subscription_id == s.subscription_id)
                    .map(|d| d.status)
            };
            if status(&self.healthy) != Some(DeliveryStatus::Delivered)
                || status(&self.failing) != Some(DeliveryStatus::Dead)
            {
                return false;
            }
            let event = w
                .pipeline
                .event(&change.account_id, &change.change_id)
                .await;
            if event.map(|e| e.status()) != Some(EventStatus::Failed) {
                return false;
            }
        }
        w.notify
            .store
            .delivery(&self.notice_id, "slack-0")
            .await
            .unwrap()
            .is_some_and(|d| d.status == NotificationStatus::Delivered)
    }

    /// The guarantees, once whole.
    async fn check(&self, w: &World, row: &Row, sim: &Sim<'_>) {
        let mut repeats = 0;
        for change in &self.changes {
            let ds = self.deliveries(w, change).await;
            assert_eq!(ds.len(), 3, "{row:?}: one record per subscription × change");
            for s in self.subscriptions() {
                let d = ds
                    .iter()
                    .find(|d| d.subscription_id == s.subscription_id)
                    .unwrap_or_else(|| panic!("{row:?}: no delivery for {}", s.subscription_id));
                if s.subscription_id == self.filtered.subscription_id {
                    assert_eq!(d.status, DeliveryStatus::SkippedFilter, "{row:?}");
                    assert!(d.attempt_log.is_empty(), "{row:?}: a filtered record moved");
                    continue;
                }
                assert_numbered_once(d, row);
                let receiver = if s.subscription_id == self.failing.subscription_id {
                    &self.refusing
                } else {
                    &w.receiver
                };
                let sent = receiver
                    .received()
                    .iter()
                    .filter(|r| r.header("webhook-id") == Some(d.delivery_id.as_str()))
                    .count();
                let recorded = d.attempt_log.len();
                assert!(
                    sent >= recorded,
                    "{row:?}: {recorded} attempts recorded, {sent} received"
                );
                repeats += sent - recorded;
            }
        }
        assert_eq!(
            repeats,
            row.repeated_sends(),
            "{row:?}: attempts repeated at the receiver"
        );
        let dead = |s: &Subscription| {
            let (a, id) = (s.account_id.clone(), s.subscription_id.clone());
            async move { w.pipeline.subscription(&a, &id).await.unwrap() }
        };
        let failing = dead(&self.failing).await;
        assert_eq!(
            failing.consecutive_dead, CHANGES as u32,
            "{row:?}: the dead count is exact"
        );
        assert_eq!(failing.status, SubscriptionStatus::Active, "{row:?}");
        assert_eq!(dead(&self.healthy).await.consecutive_dead, 0, "{row:?}");

        let n = w
            .notify
            .store
            .delivery(&self.notice_id, "slack-0")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(self.slack.count(), 1, "{row:?}: the notice is sent once");
        let claims = n.history.iter().filter(|h| h.kind == "claimed").count();
        assert_eq!(claims, 1, "{row:?}: one claim");

        let failures = sim.deliveries.failed + sim.notifications.failed + sim.stream_failures;
        assert_eq!(
            failures,
            row.expected_failures(),
            "{row:?}: batch item failures"
        );
    }
}

/// Every delivery item of a change's partition (read without faults).
pub(super) async fn deliveries(w: &World, change: &Change) -> Vec<Delivery> {
    let dynamo = aws_sdk_dynamodb::Client::new(&w.pipeline.stack.sdk);
    shared::store::event::partition_items(
        &dynamo,
        &w.pipeline.stack.config.delivery_table,
        &keys::event_pk(&change.account_id, &change.change_id),
    )
    .await
    .unwrap()
    .into_iter()
    .filter(|i| {
        i.get("kind")
            .and_then(|k| k.as_s().ok())
            .map(String::as_str)
            == Some("delivery")
    })
    .map(|i| from_item(i).unwrap())
    .collect()
}

/// Every attempt number once per run in the table: each run (the first, and one per operator
/// restart) counts 1, 2, … and the last run's count is the delivery's attempts.
pub(super) fn assert_numbered_once(d: &Delivery, row: &dyn std::fmt::Debug) {
    let numbers: Vec<u32> = d.attempt_log.iter().map(|a| a.number).collect();
    let runs = numbers.iter().filter(|n| **n == 1).count();
    let in_order = numbers
        .iter()
        .zip(numbers.iter().skip(1))
        .all(|(a, b)| *b == a + 1 || *b == 1);
    let last_run =
        numbers.iter().rev().take_while(|n| **n != 1).count() + usize::from(!numbers.is_empty());
    assert!(
        numbers.first().is_none_or(|n| *n == 1)
            && in_order
            && runs == d.restarts as usize + 1
            && last_run == d.attempts as usize,
        "{row:?}: attempt numbers {numbers:?} with {} restarts and {} attempts",
        d.restarts,
        d.attempts
    );
}

/// The operator's retry of the healthy subscription's first delivery, as a client that repeats
/// a request answered with a 5xx does; then the same request again, which the lifecycle refuses
/// (the delivery is pending now).
async fn operator_retry(w: &World, s: &Scenario, row: &Row) {
    let path = format!(
        "/operator/accounts/{}/subscriptions/{}/deliveries/{}/retry",
        s.healthy.account_id, s.healthy.subscription_id, s.changes[0].change_id
    );
    let body = json!({"reason": "retry_delivery under faults"});
    let mut tries = 0;
    let first = loop {
        tries += 1;
        let reply = w.api.post(&path, OPERATOR_TOKEN, body.clone()).await;
        if !reply.status.is_server_error() || tries > 3 {
            break reply;
        }
    };
    assert!(
        first.status.is_success() || first.status.as_u16() == 409,
        "{row:?}: {} {}",
        first.status,
        first.json
    );
    let again = w.api.post(&path, OPERATOR_TOKEN, body).await;
    assert_eq!(
        again.status.as_u16(),
        409,
        "{row:?}: a pending delivery is not retried"
    );
    let (entries, _) = audit::list(
        &aws_sdk_dynamodb::Client::new(&w.pipeline.stack.sdk),
        &w.pipeline.stack.config.delivery_table,
        AuditScope::Subscription {
            account_id: &s.healthy.account_id,
            subscription_id: &s.healthy.subscription_id,
        },
        50,
        None,
    )
    .await
    .unwrap();
    assert_eq!(entries.len(), 1, "{row:?}: the retry is audited once");
    let d = w
        .pipeline
        .delivery(
            &s.healthy.account_id,
            &s.changes[0].change_id,
            &s.healthy.subscription_id,
        )
        .await
        .unwrap();
    assert_eq!(d.restarts, 1, "{row:?}: restarted once");
}

/// Loses every message on the delivery queue (as if the first dispatch went missing).
async fn lose_first_dispatch(sim: &mut Sim<'_>) {
    let w = sim.w;
    w.pipeline.ingest_pending().await.unwrap();
    w.pipeline.dispatch_pending().await.unwrap();
    let now = w.pipeline.now();
    let lost = std::cell::Cell::new(0);
    sim.deliveries
        .drain(now, |event| {
            let works = event
                .records
                .iter()
                .filter_map(|m| works_in(m.body.as_deref().unwrap_or_default()))
                .map(|works| works.len());
            lost.set(lost.get() + works.sum::<usize>());
            async { SqsBatchResponse::default() }
        })
        .await;
    assert_eq!(
        lost.get(),
        2 * CHANGES,
        "the first dispatch of every push delivery"
    );
    sim.deliveries.handled = 0;
}

async fn run(row: Row) {
    let w = World::new().await;
    let mut scenario = Scenario::new(&w).await;
    if row.handler == Handler::IngestListing {
        w.unlist_account(&scenario.healthy.account_id).await;
    }
    let mut sim = Sim::new(&w);
    let prepared = matches!(row.handler, Handler::ApiRetry);
    if !prepared {
        row.inject(&w);
    }
    scenario.start(&w).await;
    if row.handler == Handler::Reconcile {
        lose_first_dispatch(&mut sim).await;
    }
    let limit = row.bound() + 3 * ROLLUP_EVERY;
    let took = sim.until(limit, || scenario.whole(&w)).await;
    if prepared {
        row.inject(&w);
        operator_retry(&w, &scenario, &row).await;
        sim.until(limit, || scenario.whole(&w)).await;
        assert_eq!(
            w.receiver
                .received()
                .iter()
                .filter(|r| r.header("webhook-id")
                    == Some(
                        keys::delivery_id(
                            &scenario.changes[0].change_id,
                            &scenario.healthy.subscription_id
                        )
                        .as_str()
                    ))
                .count(),
            2,
            "{row:?}: delivered again after the retry, once"
        );
    }
    assert!(
        !w.pipeline.stack.faults.injected().is_empty(),
        "{row:?}: the fault never met its request"
    );
    scenario.check(&w, &row, &sim).await;
    if row.handler == Handler::IngestListing {
        let (accounts, _) = shared::store::account::ids_page(
            &w.pipeline.stack.clients.dynamo,
            &w.pipeline.stack.config.delivery_table,
            None,
        )
        .await
        .unwrap();
        assert_eq!(
            accounts,
            [scenario.healthy.account_id.clone()],
            "{row:?}: the account is listed"
        );
    }
    assert!(
        took <= on_the_schedule(row.bound()),
        "{row:?}: whole again after {took:?}, beyond the bound of {:?}",
        row.bound()
    );
}

/// A bound as the simulation can see it: it steps a sweep interval at a time, so a message that
/// comes back after 370 s is handled on the step at 420 s.
pub fn on_the_schedule(bound: Duration) -> Duration {
    let step = SWEEP_EVERY.as_secs();
    Duration::from_secs(bound.as_secs().div_ceil(step) * step)
}

async fn run_all(handler: Handler) {
    for row in rows(handler) {
        run(row).await;
    }
}

#[tokio::test]
async fn ingest_keeps_every_guarantee_under_every_fault() {
    run_all(Handler::Ingest).await;
}

#[tokio::test]
async fn ingest_lists_an_account_made_before_the_accounts_listing_under_every_fault() {
    run_all(Handler::IngestListing).await;
}

#[tokio::test]
async fn the_dispatcher_keeps_every_guarantee_under_every_fault() {
    run_all(Handler::Dispatch).await;
}

#[tokio::test]
async fn the_delivery_workers_claim_keeps_every_guarantee_under_every_fault() {
    run_all(Handler::DeliverClaim).await;
}

#[tokio::test]
async fn the_delivery_workers_outcome_keeps_every_guarantee_under_every_fault() {
    run_all(Handler::DeliverOutcome).await;
}

#[tokio::test]
async fn the_dead_outcome_and_its_count_keep_every_guarantee_under_every_fault() {
    run_all(Handler::DeliverDead).await;
}

#[tokio::test]
async fn the_notification_fan_out_keeps_every_guarantee_under_every_fault() {
    run_all(Handler::NotifyStream).await;
}

#[tokio::test]
async fn the_notification_worker_keeps_every_guarantee_under_every_fault() {
    run_all(Handler::NotifyWorker).await;
}

#[tokio::test]
async fn the_roll_up_run_recovers_lost_first_dispatches_under_every_fault() {
    run_all(Handler::Reconcile).await;
}

#[tokio::test]
async fn the_operator_retry_route_keeps_every_guarantee_under_every_fault() {
    run_all(Handler::ApiRetry).await;
}

#[tokio::test]
async fn a_sweep_whose_read_of_one_shard_fails_still_publishes_every_other_shards_due_work() {
    let w = World::new().await;
    let account = w.account().await;
    let hook = w.integration(&account.account_id).await;
    let sub = w.subscribe(&hook).policy(RetryPolicy::FixedSchedule).await;
    // Every first attempt fails; the retries are due a minute later, spread over the shards.
    let changes = 16;
    w.receiver.script((0..changes).map(|_| Reply::Status(503)));
    let mut written = Vec::new();
    for i in 0..changes {
        written.push(w.change(&account.account_id).price(i as f64).await);
    }
    let mut sim = Sim::new(&w);
    sim.run_now().await;
    let mut in_first_shard = 0;
    for change in &written {
        let d = w
            .pipeline
            .delivery(&account.account_id, &change.change_id, &sub.subscription_id)
            .await
            .unwrap();
        assert_eq!(d.status, DeliveryStatus::Retrying);
        in_first_shard += usize::from(d.due_shard.as_deref() == Some("0"));
    }
    assert!(
        in_first_shard < changes,
        "some retries are due in other shards"
    );
    w.pipeline
        .clock
        .advance(SWEEP_EVERY + Duration::from_secs(1));
    // The first shard's due-index read fails on every try the SDK makes.
    w.pipeline.stack.faults.inject_matching(
        Matcher::operation("Query").on("\"IndexName\":\"due\""),
        Fault::InternalError,
        SDK_TRIES,
    );
    assert!(
        w.pipeline.dispatcher.sweep().await.is_err(),
        "the run reports the failed shard"
    );
    let mut published = Vec::new();
    loop {
        let batch = sim.deliveries.receive().await;
        if batch.is_empty() {
            break;
        }
        published.extend(batch);
    }
    assert_eq!(
        published.len(),
        changes - in_first_shard,
        "the other shards were swept"
    );
    // The next run, a minute later, publishes the failed shard's retries.
    w.pipeline.clock.advance(SWEEP_EVERY);
    let report = w.pipeline.dispatcher.sweep().await.unwrap();
    assert_eq!(report.published as usize, in_first_shard);
}
