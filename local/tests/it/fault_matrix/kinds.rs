//! Every kind of request the functions make, listed from the SDK boundary (`local::request_kinds`),
//! each under a run of faults. One scenario makes every kind: webhook subscriptions that deliver
//! (the first request answered 503, so a retry is swept), that fail permanently (three dead,
//! then the endpoint recovers and a fourth change is delivered, ending the dead run), a filtered
//! one, a built-in handler (its internal status recorded on the event), one that pauses on a 410
//! with its notice, and a Slack notice. The coverage test records every kind the scenario makes
//! and holds each to a row of [`KINDS`]; each kind's row runs the scenario with that kind meeting
//! its faults one after another (throttled, 5xx, lost answer, and a conflict for a transaction)
//! and checks the end state: nothing lost, nothing doubled, every effect made once.

use super::{assert_numbered_once, deliveries, Handler};
use crate::sim::{slack_notice, Sim, ROLLUP_EVERY};
use aws_sdk_dynamodb::types::AttributeValue;
use local::faults::Fault;
use local::receiver::{Receiver, Reply};
use local::request_kinds::{named, record, RequestKind, KINDS};
use local::testkit::World;
use serde_json::json;
use shared::domain::change::Change;
use shared::domain::event::{EventStatus, InternalStatus};
use shared::domain::integration_delivery::DeliveryStatus;
use shared::domain::notification_delivery::{NotificationStatus, AMBIGUITY_TIMEOUT};
use shared::domain::subscription::SubscriptionStatus;
use shared::reconcile::RunKind;
use shared::store::event::EventRecord;
use shared::store::subscription::Subscription;
use shared::store::{from_item, keys};

/// Tries the SDK makes of a request (its standard retry policy).
const SDK_TRIES: u32 = 3;
/// The changes of the first phase (the fourth comes after the failing endpoint recovers).
const FIRST: usize = 3;

/// The scenario's world.
struct Broad {
    healthy: Subscription,
    failing: Subscription,
    filtered: Subscription,
    internal: Subscription,
    gone: Subscription,
    refusing: Receiver,
    gone_rx: Receiver,
    slack: Receiver,
    changes: Vec<Change>,
    /// A notification may be left ambiguous (its sent write failed after the send): it stays
    /// `sending` until the nightly run fails it, and is never sent again.
    ambiguous: bool,
}

impl Broad {
    async fn new(w: &World) -> Self {
        let account = w.account().await;
        let a = &account.account_id;
        let hook = w.integration(a).await;
        let refusing = Receiver::start().await;
        refusing.set_default(Reply::Status(400));
        let gone_rx = Receiver::start().await;
        gone_rx.set_default(Reply::Status(410));
        let slack = Receiver::start().await;
        slack.set_default(Reply::Status(200));
        let failing_hook = w.integration(a).to(&refusing).await;
        let gone_hook = w.integration(a).to(&gone_rx).await;
        let built_in = w.integration(a).internal().await;
        // Only the first change (price 1) reaches the subscription that pauses on gone.
        let mut gone = w
            .subscribe(&gone_hook)
            .filter(json!({"field": "record.price", "lt": 1.5}))
            .await;
        gone.pause_on_gone = true;
        w.save_subscription(&gone).await;
        Broad {
            healthy: w.subscribe(&hook).await,
            failing: w.subscribe(&failing_hook).await,
            filtered: w
                .subscribe(&hook)
                .filter(json!({"field": "record.price", "gt": 100}))
                .await,
            internal: w.subscribe(&built_in).await,
            gone,
            refusing,
            gone_rx,
            slack,
            changes: Vec::new(),
            ambiguous: false,
        }
    }

    /// The owning application's changes (its writes are not the functions').
    async fn write_changes(&mut self, w: &World, n: usize) {
        for _ in 0..n {
            let price = self.changes.len() as f64 + 1.0;
            let change = w.change(&self.healthy.account_id).price(price).await;
            self.changes.push(change);
        }
    }

    /// The whole run: the first three changes and the notice until settled, then the failing
    /// endpoint recovers and a fourth change is delivered everywhere.
    async fn run(&mut self, w: &World, sim: &mut Sim<'_>, before: impl FnOnce(&Broad)) {
        // The healthy endpoint's first answer is a 503: that delivery is retried by the sweep.
        w.receiver.script([Reply::Status(503)]);
        self.write_changes(w, FIRST).await;
        before(self);
        let notice = slack_notice(&self.slack, "ops", "Kinds", &["slack"]);
        // The caller repeats a request that failed (the notice's idempotency key makes it one).
        let mut tries = 0;
        while let Err(e) = w
            .notify
            .notices
            .create(&w.notify.account, notice.clone())
            .await
        {
            tries += 1;
            assert!(tries < 10, "the notice is not created: {e}");
        }
        let limit = 6 * ROLLUP_EVERY;
        sim.until(limit, || self.settled(w)).await;
        self.refusing.set_default(Reply::Status(200));
        self.write_changes(w, 1).await;
        sim.until(limit, || self.settled(w)).await;
        // Past the next roll-up run, which walks the settled events.
        let rolled = sim.elapsed() + ROLLUP_EVERY;
        while sim.elapsed() < rolled {
            sim.tick().await;
        }
        assert!(self.settled(w).await, "settled after the roll-up run");
        // A kind a run makes once (a roll-up run's listing reads) meets its next fault on the
        // next run: the schedules run on until every fault met its request.
        let faults = &w.pipeline.stack.faults;
        for _ in 0..40 {
            if faults.pending().is_empty() {
                break;
            }
            w.pipeline.clock.advance(ROLLUP_EVERY);
            let _ = w.pipeline.dispatcher.sweep().await;
            let _ = w.pipeline.reconcile(RunKind::Rollup, 10_000).await;
            sim.run_now().await;
        }
        // The nightly run, once a send left ambiguous would be due to fail: a failed run is
        // retried (the schedule's next night).
        w.pipeline.clock.advance(AMBIGUITY_TIMEOUT);
        for night in 1.. {
            if w.pipeline.reconcile(RunKind::Nightly, 10_000).await.ok() {
                break;
            }
            assert!(night < 6, "the nightly run keeps failing");
        }
        sim.run_now().await;
        assert!(self.settled(w).await, "settled after the nightly run");
    }

    /// What each subscription's delivery of change `i` ends as (none: a change made while its
    /// subscription is paused has no record).
    fn expected(&self, s: &Subscription, i: usize) -> Option<DeliveryStatus> {
        let id = &s.subscription_id;
        if *id == self.gone.subscription_id && i >= FIRST {
            return None;
        }
        Some(
            if *id == self.filtered.subscription_id || (*id == self.gone.subscription_id && i > 0) {
                DeliveryStatus::SkippedFilter
            } else if (*id == self.failing.subscription_id && i < FIRST)
                || *id == self.gone.subscription_id
            {
                DeliveryStatus::Dead
            } else {
                DeliveryStatus::Delivered
            },
        )
    }

    fn subscriptions(&self) -> [&Subscription; 5] {
        [
            &self.healthy,
            &self.failing,
            &self.filtered,
            &self.internal,
            &self.gone,
        ]
    }

    /// Every delivery where it ends, every notification delivered.
    async fn settled(&self, w: &World) -> bool {
        for (i, change) in self.changes.iter().enumerate() {
            let ds = deliveries(w, change).await;
            for s in self.subscriptions() {
                let status = ds
                    .iter()
                    .find(|d| d.subscription_id == s.subscription_id)
                    .map(|d| d.status);
                if status != self.expected(s, i) {
                    return false;
                }
            }
            // Rolled up: a dead delivery fails the event.
            let rolled = if i < FIRST {
                EventStatus::Failed
            } else {
                EventStatus::Sent
            };
            if event(w, change).await.status() != rolled {
                return false;
            }
        }
        // The Slack notice's one delivery; the pause notice's console entry and its email (sent:
        // SES confirms it later).
        let items = notification_items(w).await;
        let sent: Vec<String> = items
            .iter()
            .filter(|i| text(i, "kind") == "notification_delivery")
            .map(|i| text(i, "status"))
            .collect();
        let mut done = vec![NotificationStatus::Sent, NotificationStatus::Delivered];
        if self.ambiguous {
            done.extend([NotificationStatus::Sending, NotificationStatus::Failed]);
        }
        let done: Vec<String> = done.iter().map(|s| s.to_string()).collect();
        sent.len() == 3 && sent.iter().all(|s| done.contains(s))
    }

    /// The end state, whatever faults the run met: one record per subscription × change, every
    /// attempt numbered once and sent once (`repeats`: sends allowed again after an outcome write
    /// that failed for good), the dead run ended once, the pause made once with its one notice,
    /// every built-in success recorded, the Slack notice sent once.
    async fn check(&self, w: &World, what: &dyn std::fmt::Debug, repeats: usize) {
        let mut repeated = 0;
        for (i, change) in self.changes.iter().enumerate() {
            let ds = deliveries(w, change).await;
            let subscriptions = self.subscriptions();
            let records = subscriptions
                .iter()
                .filter(|s| self.expected(s, i).is_some());
            assert_eq!(
                ds.len(),
                records.count(),
                "{what:?}: one record per subscription × change"
            );
            for s in self.subscriptions() {
                let Some(d) = ds.iter().find(|d| d.subscription_id == s.subscription_id) else {
                    continue;
                };
                assert_eq!(
                    Some(d.status),
                    self.expected(s, i),
                    "{what:?}: {i} {}",
                    d.delivery_id
                );
                if d.status == DeliveryStatus::SkippedFilter {
                    assert!(
                        d.attempt_log.is_empty(),
                        "{what:?}: a filtered record moved"
                    );
                    continue;
                }
                assert_numbered_once(d, what);
                let receiver = if s.subscription_id == self.failing.subscription_id {
                    &self.refusing
                } else if s.subscription_id == self.gone.subscription_id {
                    &self.gone_rx
                } else {
                    &w.receiver
                };
                let sent = receiver
                    .received()
                    .iter()
                    .filter(|r| r.header("webhook-id") == Some(d.delivery_id.as_str()))
                    .count();
                // Attempts that reached the endpoint (one whose signing key could not be read did
                // not).
                let answered = d
                    .attempt_log
                    .iter()
                    .filter(|a| a.http_status.is_some())
                    .count();
                if s.subscription_id != self.internal.subscription_id {
                    assert!(sent >= answered, "{what:?}: {} sent {sent}", d.delivery_id);
                    repeated += sent - answered;
                }
            }
            let event = event(w, change).await;
            assert_eq!(
                event.internal_status,
                InternalStatus::Done,
                "{what:?}: the built-in handler's success is recorded on change {i}"
            );
        }
        assert!(
            repeated <= repeats,
            "{what:?}: {repeated} attempts sent again (at most {repeats})"
        );
        self.check_effects(w, what).await;
    }

    /// The subscriptions' effects: the failing one's dead run ended by the success (three dead,
    /// then none), the gone one paused once with one notice, the others untouched.
    async fn check_effects(&self, w: &World, what: &dyn std::fmt::Debug) {
        let failing = subscription(w, &self.failing).await;
        assert_eq!(
            (failing.consecutive_dead, failing.status),
            (0, SubscriptionStatus::Active),
            "{what:?}: the success ended the dead run"
        );
        let gone = subscription(w, &self.gone).await;
        assert_eq!(gone.status, SubscriptionStatus::Paused, "{what:?}");
        for s in [&self.healthy, &self.internal] {
            let s = subscription(w, s).await;
            assert_eq!(
                (s.consecutive_dead, s.status),
                (0, SubscriptionStatus::Active)
            );
        }
        let notices = notification_items(w)
            .await
            .into_iter()
            .filter(|i| text(i, "kind") == "notice")
            .count();
        assert_eq!(
            notices, 2,
            "{what:?}: the Slack notice and one pause notice"
        );
        assert_eq!(
            self.slack.count(),
            1,
            "{what:?}: the Slack notice is sent once"
        );
    }
}

/// The kinds each world of the matrix faults together, by function (a world per kind would
/// cost a scenario each).
const GROUPS: [&[&str]; 6] = [
    &["ingest.event", "ingest.delivery", "config.read"],
    &["dispatch.publish", "sweep.due"],
    &[
        "worker.decrypt",
        "worker.claim",
        "worker.outcome",
        "worker.dead",
        "worker.snapshot",
    ],
    &[
        "rollup.accounts",
        "rollup.events",
        "rollup.replays",
        "rollup.index",
        "rollup.partition",
        "rollup.event_batch",
        "rollup.final",
        "rollup.open",
        "rollup.expiry",
        "rollup.keep",
        "rollup.mark_read",
        "rollup.mark",
    ],
    &[
        "notify.notice",
        "notify.fan_out",
        "notify.fan_out_inbox",
        "notify.publish",
        "notify.read_notice",
        "notify.read_delivery",
        "notify.read_work",
        "notify.claim",
        "notify.status",
        "notify.email",
    ],
    &["reconcile.watch"],
];

/// The effects a worker makes after an outcome is saved, each in its own write (or read): the
/// subscription's read (the dead count a success sees, the count a pause checks), the end of a
/// dead run, a built-in handler's internal status, the pause with its notice.
const EFFECTS: [&str; 4] = [
    "worker.subscription",
    "worker.end_dead_run",
    "worker.internal_result",
    "worker.pause",
];

/// Kinds the scenario does not make (a success whose end of the dead run was refused, or met an
/// already ended run): the chaos run's fault waves meet them.
const CHAOS_ONLY: [&str; 1] = ["worker.forget_seen_run"];

/// The faults a kind meets one after another: a throttle and an internal error that outlast the
/// SDK's tries, a lost answer, and for a transaction two conflicts.
fn sequence(kind: &RequestKind) -> Vec<(Fault, u32)> {
    let mut faults = vec![
        (Fault::Throttle, SDK_TRIES),
        (Fault::InternalError, SDK_TRIES),
        (Fault::LostResponse, 1),
    ];
    if kind.transactional() {
        faults.push((Fault::TransactionConflict, 2));
    }
    faults
}

/// Runs the scenario with every kind of `kinds` meeting its sequence of faults, and checks the
/// end state. `repeats`: sends the receivers may see again (an outcome write that failed for
/// good after its attempt).
async fn run_faulted(kinds: &[&str], repeats: usize) {
    let plan: Vec<_> = kinds
        .iter()
        .flat_map(|k| sequence(named(k)).into_iter().map(|f| (*k, f)))
        .collect();
    Box::pin(run_planned(kinds, &plan, Narrow::Every, repeats)).await;
}

/// Which requests of a kind a plan's faults meet.
#[derive(Debug, Clone, Copy)]
enum Narrow {
    Every,
    /// Only those naming the subscription that pauses on gone.
    Gone,
    /// Only those naming the first change.
    FirstChange,
}

impl Narrow {
    /// The texts the requests' bodies must contain besides their kind's.
    fn texts(self, broad: &Broad) -> Vec<&str> {
        match self {
            Narrow::Every => vec![],
            Narrow::Gone => vec![broad.gone.subscription_id.as_str()],
            Narrow::FirstChange => vec![broad.changes[0].change_id.as_str()],
        }
    }
}

/// As [`run_faulted`], with the faults each kind meets listed.
async fn run_planned(
    kinds: &[&str],
    plan: &[(&str, (Fault, u32))],
    narrow: Narrow,
    repeats: usize,
) {
    let w = World::new().await;
    let mut broad = Broad::new(&w).await;
    broad.ambiguous = kinds.contains(&"notify.sent");
    let mut sim = Sim::new(&w);
    let faults = w.pipeline.stack.faults.clone();
    Box::pin(broad.run(&w, &mut sim, |broad| {
        for (kind, (fault, times)) in plan {
            let (matcher, also) = (named(kind).matcher(), narrow.texts(broad));
            faults.inject_narrowed(matcher, &also, fault.clone(), *times);
        }
    }))
    .await;
    assert_eq!(
        faults.pending(),
        Vec::<String>::new(),
        "{kinds:?}: faults that never met their request"
    );
    broad.check(&w, &kinds, repeats).await;
}

#[tokio::test]
async fn ingest_reads_and_writes_each_meet_every_fault_with_nothing_lost_or_doubled() {
    run_faulted(GROUPS[0], 0).await;
}

#[tokio::test]
async fn dispatch_and_sweep_reads_and_writes_each_meet_every_fault_with_nothing_lost_or_doubled() {
    run_faulted(GROUPS[1], 0).await;
}

#[tokio::test]
async fn the_nightly_runs_reads_meet_every_fault_with_nothing_lost_or_doubled() {
    run_faulted(GROUPS[5], 0).await;
}

/// The sweep moves a published retry's due time once: each fault on a world of its own.
#[tokio::test]
async fn the_sweeps_move_of_a_published_retry_meets_every_fault_with_nothing_lost_or_doubled() {
    for fault in sequence(named("sweep.move")) {
        let plan = [("sweep.move", fault)];
        Box::pin(run_planned(&["sweep.move"], &plan, Narrow::Every, 0)).await;
    }
}

/// A notification's sent write that fails for good after the send leaves it ambiguous: never sent
/// again, failed by the nightly run; each fault on a world of its own.
#[tokio::test]
async fn a_notifications_sent_write_meets_every_fault_and_the_notice_is_sent_once() {
    for fault in sequence(named("notify.sent")) {
        let plan = [("notify.sent", fault)];
        Box::pin(run_planned(&["notify.sent"], &plan, Narrow::Every, 0)).await;
    }
}

#[tokio::test]
async fn worker_reads_and_writes_each_meet_every_fault_with_nothing_lost_or_doubled() {
    // The outcome writes (a delivered one, a dead one) that fail for good: their attempts are
    // made again once the lease lapses.
    run_faulted(GROUPS[2], 2 * 2).await;
}

#[tokio::test]
async fn roll_up_reads_and_writes_each_meet_every_fault_with_nothing_lost_or_doubled() {
    run_faulted(GROUPS[3], 0).await;
}

#[tokio::test]
async fn notification_reads_and_writes_each_meet_every_fault_with_nothing_lost_or_doubled() {
    run_faulted(GROUPS[4], 0).await;
}

/// An effect after an outcome meeting each fault on a world of its own, on one request: of the
/// subscription that pauses on gone, or of the first change.
async fn run_effect(kind: &'static str, narrow: Narrow) {
    for fault in sequence(named(kind)) {
        Box::pin(run_planned(&[kind], &[(kind, fault)], narrow, 0)).await;
    }
}

/// The read of the subscription the pause checks after a 410 fails: the pause is still made,
/// once.
#[tokio::test]
async fn after_an_outcome_the_subscriptions_read_meets_every_fault_and_every_effect_is_made_once() {
    run_effect(EFFECTS[0], Narrow::Gone).await;
}

/// The write that ends the dead run after a success fails: the run still ends, once.
#[tokio::test]
async fn after_a_success_the_dead_runs_end_meets_every_fault_and_is_made_once() {
    run_effect(EFFECTS[1], Narrow::Every).await;
}

/// A built-in handler's internal status write fails: the status is still recorded.
#[tokio::test]
async fn after_a_built_in_success_the_internal_status_meets_every_fault_and_is_recorded() {
    run_effect(EFFECTS[2], Narrow::FirstChange).await;
}

/// The pause after a 410 fails: the subscription still pauses, with one notice.
#[tokio::test]
async fn after_a_gone_answer_the_pause_meets_every_fault_and_is_made_once_with_one_notice() {
    run_effect(EFFECTS[3], Narrow::Every).await;
}

/// Every kind of [`KINDS`] has its row: a world of [`GROUPS`], of [`EFFECTS`], or a row of the
/// handler matrix (which makes the kinds this scenario does not: a lost first dispatch, an
/// account made before the listing, the operator's retry).
#[test]
fn every_kind_of_request_has_a_row_of_the_matrix() {
    let mut rows: Vec<&str> = GROUPS.iter().flat_map(|g| g.iter().copied()).collect();
    rows.extend(["sweep.move", "notify.sent"]);
    rows.extend(CHAOS_ONLY);
    rows.extend(EFFECTS);
    rows.extend(Handler::ALL.iter().map(|h| h.kind().name));
    for kind in KINDS {
        assert!(rows.contains(&kind.name), "{} has no row", kind.name);
    }
}

#[tokio::test]
async fn every_request_the_functions_make_is_a_kind_the_fault_matrix_faults() {
    let w = World::new().await;
    let mut broad = Broad::new(&w).await;
    let mut sim = Sim::new(&w);
    let faults = w.pipeline.stack.faults.clone();
    broad.run(&w, &mut sim, |_| record(&faults)).await;
    broad.check(&w, &"no faults", 0).await;
    let seen = faults.kinds.seen();
    let mut uncovered = Vec::new();
    for (kind, (operation, body)) in &seen {
        let rows: Vec<_> = KINDS
            .iter()
            .filter(|k| k.covers(operation, body))
            .map(|k| k.name)
            .collect();
        println!("{rows:?}: {kind}");
        // The owning application's writes into its changes table are the test's, not a function's.
        if kind.starts_with("PutItem ChangesTable") {
            continue;
        }
        if !KINDS.iter().any(|k| k.covers(operation, body)) {
            uncovered.push(format!("{kind}\n  {}", String::from_utf8_lossy(body)));
        }
    }
    assert!(
        uncovered.is_empty(),
        "requests no row of the fault matrix faults:\n{}",
        uncovered.join("\n")
    );
}

/// A text attribute of a raw item ("" when absent).
fn text(item: &std::collections::HashMap<String, AttributeValue>, name: &str) -> String {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_default()
}

/// The harness' own reads: without faults, and not among the kinds the functions make.
fn raw(w: &World) -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::new(&w.pipeline.stack.sdk)
}

async fn event(w: &World, change: &Change) -> EventRecord {
    let pk = keys::event_pk(&change.account_id, &change.change_id);
    let table = &w.pipeline.stack.config.delivery_table;
    let items = shared::store::event::partition_items(&raw(w), table, &pk)
        .await
        .unwrap();
    let item = items
        .into_iter()
        .find(|i| text(i, "kind") == "event")
        .expect("the event");
    from_item(item).unwrap()
}

async fn subscription(w: &World, s: &Subscription) -> Subscription {
    let table = &w.pipeline.stack.config.delivery_table;
    shared::store::subscription::get(&raw(w), table, &s.account_id, &s.subscription_id)
        .await
        .unwrap()
        .expect("the subscription")
}

async fn notification_items(w: &World) -> Vec<std::collections::HashMap<String, AttributeValue>> {
    let table = &w.pipeline.stack.config.notification_table;
    let scan = raw(w).scan().table_name(table).send().await.unwrap();
    scan.items.unwrap_or_default()
}
