//! What the chaos run checks at the end of a wave, from the tables (raw reads, no fault layer)
//! and the endpoints' own logs — never from the code's counters.

use super::dead_run::{Ended, Expected};
use super::endpoint::{Answer, Logged};
use anyhow::{Context, Result};
use serde::Serialize;
use shared::delivery::worker::{ATTEMPT_LOG_LIMIT, EARLY_TOLERANCE};
use shared::domain::event::{roll_up, EventStatus, InternalStatus};
use shared::domain::integration_delivery::{
    DeliveryOutcome, DeliveryStatus, DELIVERY_LIFECYCLE, FIRST_DISPATCH_GRACE, PROCESSING_LEASE,
};
use shared::domain::retry::{RetryDecision, RetryPolicy};
use shared::domain::subscription::SubscriptionStatus;
use shared::domain::time::Timestamp;
use shared::ids::ChangeId;
use shared::store::delivery::{AttemptRecord, Delivery};
use shared::store::event::EventRecord;
use shared::store::subscription::Subscription;
use shared::store::Item;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// Every item of a table, read with the harness' own client.
pub async fn scan(dynamo: &aws_sdk_dynamodb::Client, table: &str) -> Result<Vec<Item>> {
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let page = dynamo
            .scan()
            .table_name(table)
            .set_exclusive_start_key(start)
            .send()
            .await
            .with_context(|| format!("scanning {table}"))?;
        items.extend(page.items.unwrap_or_default());
        start = page.last_evaluated_key;
        if start.is_none() {
            return Ok(items);
        }
    }
}

/// The delivery table's deliveries, events and subscriptions.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub deliveries: Vec<Delivery>,
    pub events: Vec<EventRecord>,
    pub subscriptions: Vec<Subscription>,
}

fn kind(item: &Item) -> &str {
    item.get("kind")
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
        .unwrap_or("")
}

impl Snapshot {
    pub async fn read(dynamo: &aws_sdk_dynamodb::Client, table: &str) -> Result<Self> {
        let mut s = Snapshot::default();
        for item in scan(dynamo, table).await? {
            match kind(&item) {
                shared::store::delivery::KIND => s.deliveries.push(serde_dynamo::from_item(item)?),
                shared::store::event::KIND => s.events.push(serde_dynamo::from_item(item)?),
                shared::store::subscription::KIND => {
                    s.subscriptions.push(serde_dynamo::from_item(item)?)
                }
                _ => {}
            }
        }
        Ok(s)
    }

    /// Deliveries not terminal plus events not final.
    pub fn open(&self) -> usize {
        self.deliveries
            .iter()
            .filter(|d| !d.status.is_terminal())
            .count()
            + self
                .events
                .iter()
                .filter(|e| !e.event_status.is_final())
                .count()
    }

    /// The first moment after `now` at which something open becomes due: a retry, a lapsing
    /// lease, the end of a first dispatch's grace, the sweep's next look at a delivery it
    /// published.
    pub fn next_due(&self, now: Timestamp, grace: Duration) -> Option<Timestamp> {
        self.open_deliveries()
            .flat_map(|d| {
                [
                    d.not_before,
                    d.lease_until,
                    (d.attempts == 0).then(|| d.created_at.plus(grace)),
                    d.due_at.map(Timestamp::from_millis),
                ]
            })
            .flatten()
            .filter(|t| *t > now)
            .min()
    }

    /// Whether an open delivery is overdue for the schedules: due on the `due` index at or
    /// before `now` (a sweep call that failed, a message the worker put back on the queue), or
    /// a first dispatch past its grace that nothing has attempted (a roll-up run that failed).
    /// In production the sweep and the roll-up run come again within minutes, whatever is due.
    pub fn overdue(&self, now: Timestamp, grace: Duration) -> bool {
        self.open_deliveries().any(|d| {
            d.due_at.is_some_and(|at| at <= now.millis())
                || (d.attempts == 0 && d.created_at.plus(grace) <= now)
        })
    }

    fn open_deliveries(&self) -> impl Iterator<Item = &Delivery> {
        self.deliveries.iter().filter(|d| !d.status.is_terminal())
    }
}

/// Counts of defects: each must be 0.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Defects {
    /// A change × subscription with no delivery (other than one skipped because its
    /// subscription was paused by then), a missing event, or a delivery recorded delivered that
    /// its endpoint never acknowledged.
    pub lost: u64,
    /// A request that reached an endpoint after that endpoint had acknowledged the same delivery,
    /// or an attempt number recorded twice.
    pub duplicated: u64,
    /// Deliveries not terminal, events not final at the end.
    pub stuck: u64,
    /// Attempt histories the delivery lifecycle does not allow (replayed from `pending`, they
    /// must end in the stored status), or whose count disagrees with the attempts.
    pub lifecycle: u64,
    /// Attempts whose recorded status or class is not what the endpoint answered.
    pub history: u64,
    /// Waits between attempts shorter than the retry policy's (with Retry-After), or longer
    /// than the recovery bound.
    pub off_schedule: u64,
    /// Final events whose status is not the roll-up of their deliveries.
    pub rollup: u64,
    /// Subscriptions paused that should not be, or not paused that should.
    pub pauses: u64,
    /// Administrator notices: one per paused subscription, none otherwise.
    pub notices: u64,
    /// Dead counts that are not the run of dead deliveries since the last acknowledged one.
    pub dead_counts: u64,
    /// Changes whose built-in handler's delivery is not delivered, or whose event does not
    /// record its success (internal status `done`).
    pub internal: u64,
}

impl Defects {
    pub fn total(&self) -> u64 {
        self.lost
            + self.duplicated
            + self.stuck
            + self.lifecycle
            + self.history
            + self.off_schedule
            + self.rollup
            + self.pauses
            + self.notices
            + self.dead_counts
            + self.internal
    }

    fn add(&mut self, o: &Defects) {
        self.lost += o.lost;
        self.duplicated += o.duplicated;
        self.stuck += o.stuck;
        self.lifecycle += o.lifecycle;
        self.history += o.history;
        self.off_schedule += o.off_schedule;
        self.rollup += o.rollup;
        self.pauses += o.pauses;
        self.notices += o.notices;
        self.dead_counts += o.dead_counts;
        self.internal += o.internal;
    }
}

/// What a wave did and what it found.
#[derive(Debug, Default, Clone, Serialize)]
pub struct WaveFigures {
    pub changes: u64,
    pub deliveries: u64,
    pub delivered: u64,
    pub dead: u64,
    /// Deliveries of a paused subscription's changes that were skipped (by design).
    pub skipped_paused: u64,
    pub attempts: u64,
    /// Requests the endpoints received.
    pub requests: u64,
    /// Requests answered with a fault.
    pub endpoint_faults: u64,
    pub endpoint_faults_by_kind: BTreeMap<String, u64>,
    /// Requests an endpoint received again after a lost acknowledgement or a timeout (allowed:
    /// at least once; receivers deduplicate by webhook-id).
    pub redelivered_unacknowledged: u64,
    /// Requests the endpoint answered at once but whose answer reached the worker only after
    /// its attempt timeout (on a loaded machine): the worker recorded a timeout and retried, as
    /// it must (at least once). Judged as unanswered requests, not as defects.
    pub answered_after_timeout: u64,
    /// Requests whose attempt record is missing (the worker's outcome write was lost or refused
    /// and the attempt number was run again).
    pub unrecorded_requests: u64,
    pub paused_subscriptions: u64,
    /// The longest wait past its scheduled time (seconds).
    pub max_lateness_secs: u64,
    pub virtual_secs: u64,
    /// Moves of the virtual clock after the last change was written.
    pub walk_steps: u64,
    pub defects: Defects,
    /// The first few defects, described.
    pub examples: Vec<String>,
}

impl WaveFigures {
    pub fn add(&mut self, o: &WaveFigures) {
        self.changes += o.changes;
        self.deliveries += o.deliveries;
        self.delivered += o.delivered;
        self.dead += o.dead;
        self.skipped_paused += o.skipped_paused;
        self.attempts += o.attempts;
        self.requests += o.requests;
        self.endpoint_faults += o.endpoint_faults;
        for (k, v) in &o.endpoint_faults_by_kind {
            *self.endpoint_faults_by_kind.entry(k.clone()).or_default() += v;
        }
        self.redelivered_unacknowledged += o.redelivered_unacknowledged;
        self.answered_after_timeout += o.answered_after_timeout;
        self.unrecorded_requests += o.unrecorded_requests;
        self.paused_subscriptions += o.paused_subscriptions;
        self.max_lateness_secs = self.max_lateness_secs.max(o.max_lateness_secs);
        self.virtual_secs += o.virtual_secs;
        self.walk_steps += o.walk_steps;
        self.defects.add(&o.defects);
        // Twenty of each wave's, so a late wave's defects are named too.
        for e in &o.examples {
            if self.examples.len() < 200 {
                self.examples.push(e.clone());
            }
        }
    }

    fn defect(&mut self, what: impl FnOnce(&mut Defects), example: String) {
        what(&mut self.defects);
        if self.examples.len() < 20 {
            self.examples.push(example);
        }
    }
}

pub struct Inputs<'a> {
    pub changes: &'a [ChangeId],
    /// In endpoint order: subscription i is served by endpoint i.
    pub subscriptions: &'a [Subscription],
    pub snapshot: &'a Snapshot,
    pub logs: &'a [Vec<Logged>],
    pub notices: &'a [Item],
    /// The subscription of a built-in handler (every change's success recorded on its event).
    pub internal: Option<&'a Subscription>,
    /// The worker's attempt timeout in the run.
    pub attempt_timeout: Duration,
}

/// The longest a wait may run past its scheduled time: the recovery bound of a worker that died
/// after its claim, or of a lost first dispatch (`docs/recovery.md`: the lease or the grace,
/// whichever is longer, then the roll-up run that requeues it, every ten minutes, then the
/// sweep, every minute), plus the one-minute step of the walk on the virtual clock.
pub const LATENESS_BOUND: Duration = Duration::from_secs(
    max_secs(FIRST_DISPATCH_GRACE, PROCESSING_LEASE) + ROLLUP_EVERY_SECS + 60 + 60,
);

/// How often the reconcile function's roll-up run goes (template.yaml's ten-minute schedule).
const ROLLUP_EVERY_SECS: u64 = 10 * 60;

const fn max_secs(a: Duration, b: Duration) -> u64 {
    if a.as_secs() > b.as_secs() {
        a.as_secs()
    } else {
        b.as_secs()
    }
}

pub fn check(i: &Inputs<'_>) -> WaveFigures {
    let mut f = WaveFigures {
        changes: i.changes.len() as u64,
        ..WaveFigures::default()
    };
    let s = i.snapshot;
    let events: HashMap<&str, &EventRecord> =
        s.events.iter().map(|e| (e.change_id.as_str(), e)).collect();
    let deliveries: HashMap<(&str, &str), &Delivery> = s
        .deliveries
        .iter()
        .map(|d| ((d.change_id.as_str(), d.subscription_id.as_str()), d))
        .collect();
    let stored_subs: HashMap<&str, &Subscription> = s
        .subscriptions
        .iter()
        .map(|x| (x.subscription_id.as_str(), x))
        .collect();
    // The endpoint log, by delivery id: that endpoint's requests in arrival order, with the
    // position of each in the endpoint's whole log.
    let mut requests: HashMap<&str, Vec<(usize, &Logged)>> = HashMap::new();
    for log in i.logs {
        for (pos, l) in log.iter().enumerate() {
            f.requests += 1;
            if l.answer.is_fault() {
                f.endpoint_faults += 1;
                let kind = serde_json::to_value(l.answer).ok();
                let kind = kind
                    .as_ref()
                    .and_then(|v| v["kind"].as_str())
                    .unwrap_or("?")
                    .to_string();
                *f.endpoint_faults_by_kind.entry(kind).or_default() += 1;
            }
            requests
                .entry(l.webhook_id.as_str())
                .or_default()
                .push((pos, l));
        }
    }

    for change in i.changes {
        let Some(event) = events.get(change.as_str()) else {
            f.defect(
                |d| d.lost += 1,
                format!("lost: no event for change {change}"),
            );
            continue;
        };
        if !event.event_status.is_final() {
            f.defect(
                |d| d.stuck += 1,
                format!("stuck: event {change} is {}", event.event_status),
            );
        }
        let mut facts = Vec::new();
        for sub in i.subscriptions {
            let Some(d) = deliveries.get(&(change.as_str(), sub.subscription_id.as_str())) else {
                let paused_before = stored_subs
                    .get(sub.subscription_id.as_str())
                    .and_then(|x| x.paused_at)
                    .is_some_and(|at| event.created_at >= at);
                if paused_before {
                    f.skipped_paused += 1;
                } else {
                    f.defect(
                        |d| d.lost += 1,
                        format!(
                            "lost: no delivery of change {change} for {}",
                            sub.subscription_id
                        ),
                    );
                }
                continue;
            };
            f.deliveries += 1;
            facts.extend(d.facts(Timestamp::from_millis(i64::MAX / 2)));
            let reqs = requests
                .get(d.delivery_id.as_str())
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            check_delivery(&mut f, d, reqs, &sub.retry_policy, i.attempt_timeout);
        }
        if let Some(sub) = i.internal {
            let d = deliveries.get(&(change.as_str(), sub.subscription_id.as_str()));
            // Rolled up with the webhooks' (its endpoint is no endpoint: not among `deliveries`).
            if let Some(d) = d {
                facts.extend(d.facts(Timestamp::from_millis(i64::MAX / 2)));
            }
            let delivered = d.is_some_and(|d| d.status == DeliveryStatus::Delivered);
            if !delivered || event.internal_status != InternalStatus::Done {
                f.defect(
                    |x| x.internal += 1,
                    format!(
                        "internal: change {change}'s built-in delivery is {:?}, its internal status {}",
                        d.map(|d| d.status),
                        event.internal_status
                    ),
                );
            }
        }
        if event.event_status.is_final() {
            let expected = roll_up(EventStatus::New, event.subscribers > 0, &facts);
            if expected != Some(event.event_status) {
                f.defect(
                    |d| d.rollup += 1,
                    format!(
                        "rollup: event {change} is {} but its deliveries make it {expected:?}",
                        event.event_status
                    ),
                );
            }
        }
    }
    for (index, sub) in i.subscriptions.iter().enumerate() {
        check_subscription(&mut f, i, index, sub, &stored_subs, &deliveries, &requests);
    }
    f
}

fn outcome_of(class: &str, number: u32, policy: &RetryPolicy) -> Option<DeliveryOutcome> {
    Some(match class {
        "success" => DeliveryOutcome::Acknowledged,
        "permanent" => DeliveryOutcome::FinalFailure,
        "configuration_loss" => DeliveryOutcome::ConfigurationLoss,
        "transient" if policy.may_attempt(number) => DeliveryOutcome::RetryableFailure,
        "transient" => DeliveryOutcome::FinalFailure,
        _ => return None,
    })
}

/// Whether the worker recorded attempt `a` as timed out: transient, no HTTP status, after the
/// whole attempt timeout.
fn timed_out(a: &AttemptRecord, timeout: Duration) -> bool {
    a.class == "transient"
        && a.http_status.is_none()
        && Duration::from_millis(a.duration_ms + 1) >= timeout
}

/// Whether request `l` was answered at once by the endpoint but heard by the worker too late:
/// the attempt made at the request's moment (the virtual clock stands still within a step, and
/// one delivery has at most one attempt per moment) is recorded as timed out. Such an answer
/// did not reach the worker, whatever the endpoint's log says.
fn heard_too_late(l: &Logged, log: &[AttemptRecord], timeout: Duration) -> bool {
    !matches!(l.answer, Answer::Hang | Answer::LostAck)
        && log
            .iter()
            .any(|a| same_moment(a, l) && timed_out(a, timeout))
}

fn same_moment(a: &AttemptRecord, l: &Logged) -> bool {
    a.at.millis().abs_diff(l.at.millis()) <= 1
}

/// A delivery's requests and recorded attempts, for a defect's example.
fn trace(d: &Delivery, reqs: &[(usize, &Logged)]) -> String {
    let t0 = d.created_at;
    let requests: Vec<String> = reqs
        .iter()
        .map(|(_, l)| format!("+{}s {:?}", l.at.since(t0).as_secs(), l.answer))
        .collect();
    let attempts: Vec<String> = d
        .attempt_log
        .iter()
        .map(|a| {
            format!(
                "#{} +{}s {} {:?} {}ms",
                a.number,
                a.at.since(t0).as_secs(),
                a.class,
                a.http_status,
                a.duration_ms
            )
        })
        .collect();
    format!(
        "{} {} attempts={}; requests [{}]; recorded [{}]",
        d.delivery_id,
        d.status,
        d.attempts,
        requests.join(", "),
        attempts.join(", ")
    )
}

/// Whether an attempt sent its request: not one that failed before it (its signing secret could
/// not be unwrapped, its target was refused, its configuration is gone).
fn reached_endpoint(a: &AttemptRecord) -> bool {
    !matches!(
        a.error.as_deref(),
        Some("signing_secret" | "forbidden_target" | "configuration_loss")
    )
}

fn check_delivery(
    f: &mut WaveFigures,
    d: &Delivery,
    reqs: &[(usize, &Logged)],
    policy: &RetryPolicy,
    timeout: Duration,
) {
    let id = d.delivery_id.as_str();
    f.attempts += u64::from(d.attempts);
    match d.status {
        DeliveryStatus::Delivered => f.delivered += 1,
        DeliveryStatus::Dead => f.dead += 1,
        _ => {}
    }
    if !d.status.is_terminal() {
        f.defect(
            |x| x.stuck += 1,
            format!("stuck: delivery {id} is {}", d.status),
        );
    }
    let log = &d.attempt_log;
    let late: Vec<bool> = reqs
        .iter()
        .map(|(_, l)| heard_too_late(l, log, timeout))
        .collect();
    f.answered_after_timeout += late.iter().filter(|x| **x).count() as u64;
    // Duplicates at the endpoint: anything after an acknowledgement the worker heard and
    // saved (an attempt recorded at that request's moment). One it could not save (its outcome
    // write failed beyond the SDK's tries; the message came back and the same attempt number
    // was made again) is the repeat at least once allows, and shows as an unrecorded request.
    let complete = log.len() == d.attempts as usize;
    let saved = |l: &Logged| !complete || log.iter().any(|a| same_moment(a, l));
    if let Some(acked) = reqs
        .iter()
        .zip(&late)
        .position(|((_, l), late)| l.answer.acknowledged() && !late && saved(l))
    {
        let after = reqs.len() - acked - 1;
        if after > 0 {
            f.defect(
                |x| x.duplicated += after as u64,
                format!(
                    "duplicated: {after} request(s) of {id} after it was acknowledged: {}",
                    trace(d, reqs)
                ),
            );
        }
    } else if d.status == DeliveryStatus::Delivered {
        f.defect(
            |x| x.lost += 1,
            format!("lost: {id} is recorded delivered but its endpoint never acknowledged it"),
        );
    }
    f.redelivered_unacknowledged += reqs
        .windows(2)
        .zip(&late)
        .filter(|(w, late)| matches!(w[0].1.answer, Answer::Hang | Answer::LostAck) || **late)
        .count() as u64;
    // The history, replayed through the lifecycle table.
    let numbers_ok = log
        .iter()
        .enumerate()
        .all(|(k, a)| a.number as usize == k + 1 + (d.attempts as usize).saturating_sub(log.len()));
    if !numbers_ok {
        let repeated = log.windows(2).any(|w| w[0].number == w[1].number);
        f.defect(
            |x| {
                if repeated {
                    x.duplicated += 1
                } else {
                    x.lifecycle += 1
                }
            },
            format!(
                "attempt numbers of {id} are not 1..n: {:?}",
                log.iter().map(|a| a.number).collect::<Vec<_>>()
            ),
        );
    }
    let full = log.len() == d.attempts as usize && d.attempts as usize <= ATTEMPT_LOG_LIMIT;
    if full {
        let mut status = DeliveryStatus::Pending;
        for a in log {
            let moved = outcome_of(&a.class, a.number, policy)
                .and_then(|o| DELIVERY_LIFECYCLE.on(status, o).ok())
                .map(|row| row.movement().1);
            match moved {
                Some(to) => status = to,
                None => {
                    f.defect(
                        |x| x.lifecycle += 1,
                        format!(
                            "lifecycle: {id} attempt {} ({}) from {status} has no row",
                            a.number, a.class
                        ),
                    );
                    return;
                }
            }
        }
        if status != d.status {
            f.defect(
                |x| x.lifecycle += 1,
                format!(
                    "lifecycle: {id}'s history ends {status} but it is stored {}",
                    d.status
                ),
            );
        }
    } else if log.len() != (d.attempts as usize).min(ATTEMPT_LOG_LIMIT) {
        f.defect(
            |x| x.lifecycle += 1,
            format!(
                "lifecycle: {id} has {} attempts but {} recorded",
                d.attempts,
                log.len()
            ),
        );
    }
    // The attempts that sent a request (one whose signing key could not be unwrapped did not).
    let sent: Vec<&AttemptRecord> = log.iter().filter(|a| reached_endpoint(a)).collect();
    if reqs.len() < sent.len() {
        f.defect(
            |x| x.lost += 1,
            format!(
                "lost: {id} records {} attempts but its endpoint saw {} requests",
                sent.len(),
                reqs.len()
            ),
        );
        return;
    }
    f.unrecorded_requests += (reqs.len() - sent.len()) as u64;
    // Attempts match the endpoint's answers one to one when no request went unrecorded.
    if reqs.len() == sent.len() {
        for ((a, (_, l)), late) in sent.into_iter().zip(reqs).zip(&late) {
            let heard = !late;
            if heard && (a.class != l.answer.class() || a.http_status != l.answer.status()) {
                f.defect(
                    |x| x.history += 1,
                    format!(
                        "history: {id} attempt {} recorded {} {:?} after {} ms ({}), the \
                         endpoint answered {:?}",
                        a.number,
                        a.class,
                        a.http_status,
                        a.duration_ms,
                        a.detail.as_deref().unwrap_or("no detail"),
                        l.answer
                    ) + &format!(": {}", trace(d, reqs)),
                );
            }
        }
    }
    // Waits: each retry no earlier than the policy (and Retry-After) allows, and no later than
    // the recovery bound. The request of an attempt is the last one that arrived at or before
    // the attempt's time with that rank; with unrecorded requests, the Retry-After is the
    // answer of the latest request before the next attempt.
    for pair in log.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.class != "transient" {
            continue;
        }
        let answer = reqs
            .iter()
            .rev()
            .find(|(_, l)| l.at <= a.at.plus(Duration::from_millis(1)) || l.at < b.at)
            .map(|(_, l)| l.answer);
        // A Retry-After the worker did not hear (its attempt timed out) does not hold it back.
        let retry_after = answer
            .filter(|_| !timed_out(a, timeout))
            .and_then(Answer::retry_after);
        let RetryDecision::RetryAfter(expected) =
            policy.after_failed_attempt(a.number, retry_after)
        else {
            continue;
        };
        let waited = b.at.since(a.at);
        if waited + EARLY_TOLERANCE < expected {
            f.defect(
                |x| x.off_schedule += 1,
                format!("off schedule: {id} attempt {} came {waited:?} after {}, the policy says {expected:?}", b.number, a.number),
            );
        }
        let late = waited.saturating_sub(expected);
        f.max_lateness_secs = f.max_lateness_secs.max(late.as_secs());
        if late > LATENESS_BOUND {
            f.defect(
                |x| x.off_schedule += 1,
                format!(
                    "off schedule: {id} attempt {} came {late:?} late: {}",
                    b.number,
                    trace(d, reqs)
                ),
            );
        }
    }
}

/// Pause, notice and dead count of one subscription. The order in which deliveries ended is
/// the order of their last request at the endpoint; deliveries that end within one batch's
/// concurrency of each other may have been counted in either order, so a run within that
/// margin of the threshold is not judged.
fn check_subscription(
    f: &mut WaveFigures,
    i: &Inputs<'_>,
    index: usize,
    sub: &Subscription,
    stored: &HashMap<&str, &Subscription>,
    deliveries: &HashMap<(&str, &str), &Delivery>,
    requests: &HashMap<&str, Vec<(usize, &Logged)>>,
) {
    let id = sub.subscription_id.as_str();
    let Some(now) = stored.get(id) else {
        f.defect(|x| x.lost += 1, format!("lost: subscription {id} is gone"));
        return;
    };
    let paused = now.status == SubscriptionStatus::Paused;
    f.paused_subscriptions += u64::from(paused);
    // Terminal deliveries of this subscription, by their last requests' arrival.
    let ended: Vec<Ended> = i
        .changes
        .iter()
        .filter_map(|c| deliveries.get(&(c.as_str(), id)))
        .filter(|d| matches!(d.status, DeliveryStatus::Delivered | DeliveryStatus::Dead))
        .filter_map(|d| {
            Some(Ended {
                arrival: requests.get(d.delivery_id.as_str())?.last()?.0,
                dead: d.status == DeliveryStatus::Dead,
                saved: d.updated_at,
                claimed: d.attempt_log.last()?.at,
            })
        })
        .collect();
    let expected = Expected::of(ended);
    if let Some(should_pause) = expected.pause().filter(|&s| s != paused) {
        let longest = expected.longest;
        f.defect(
            |x| x.pauses += 1,
            format!(
                "pause: subscription {index} paused={paused} (should be {should_pause}) after a longest dead run of {longest}"
            ),
        );
    }
    let notices = i
        .notices
        .iter()
        .filter(|n| {
            n.get("notice_id")
                .and_then(|v| v.as_s().ok())
                .is_some_and(|v| v.starts_with(&format!("pause_{id}_")))
                && n.get("reason")
                    .and_then(|v| v.as_s().ok())
                    .map(String::as_str)
                    == Some("subscription_paused")
        })
        .count();
    if notices != usize::from(paused) {
        f.defect(
            |x| x.notices += 1,
            format!("notices: subscription {index} paused={paused} has {notices} pause notice(s)"),
        );
    }
    if !expected.agrees_with(now.consecutive_dead) {
        let (run, beside) = (expected.run, expected.beside_last_success);
        f.defect(
            |x| x.dead_counts += 1,
            format!("dead count: subscription {index} counts {} but {run} ended dead since its last acknowledged delivery ({beside} in flight beside it)", now.consecutive_dead),
        );
    }
}

/// One received request, as the signature check needs it.
#[derive(Debug, Clone, Serialize)]
pub struct SignedRequest {
    pub secret: String,
    /// The virtual time it arrived at (epoch seconds): the receiver's clock.
    pub received_at: f64,
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

pub fn signed_requests(logs: &[Vec<Logged>]) -> Vec<SignedRequest> {
    let secret = crate::fixtures::test_secret();
    logs.iter()
        .flatten()
        .map(|l| SignedRequest {
            secret: secret.clone(),
            received_at: l.at.millis() as f64 / 1000.0,
            headers: l.request.headers.clone(),
            body: String::from_utf8_lossy(&l.request.body).into_owned(),
        })
        .collect()
}

#[derive(Debug, Default, serde::Deserialize)]
pub struct Verified {
    pub checked: u64,
    pub failed: u64,
    #[serde(default)]
    pub failures: Vec<serde_json::Value>,
}

/// Verifies every request's Standard Webhooks signature with the reference package (PyPI
/// `standardwebhooks`, pinned in scripts/requirements.txt) through
/// `scripts/verify_signatures.py`, run by the project's virtualenv.
pub fn verify_signatures(requests: &[SignedRequest]) -> Result<Verified> {
    let root = crate::template::Template::project_path()
        .parent()
        .map(std::path::Path::to_path_buf)
        .context("the project root")?;
    let dir = std::env::temp_dir().join(format!("chaos-{}", ulid::Ulid::new()));
    std::fs::create_dir_all(&dir)?;
    let input = dir.join("received.jsonl");
    let mut text = String::new();
    for r in requests {
        text.push_str(&serde_json::to_string(r)?);
        text.push('\n');
    }
    std::fs::write(&input, text)?;
    let python = root.join(".venv/bin/python");
    let output = std::process::Command::new(&python)
        .arg(root.join("scripts/verify_signatures.py"))
        .arg(&input)
        .output()
        .with_context(|| format!("running {} (make venv installs it)", python.display()))?;
    let _ = std::fs::remove_dir_all(&dir);
    anyhow::ensure!(
        output.status.success(),
        "verify_signatures.py failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let verified: Verified = serde_json::from_slice(&output.stdout)?;
    for failure in verified.failures.iter().take(5) {
        tracing::error!(%failure, "signature check failed");
    }
    Ok(verified)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receiver::ReceivedRequest;
    use shared::store::delivery::AttemptRecord;

    const T0: i64 = 1_800_000_000_000;

    fn delivery(status: &str, attempts: &[(&str, Option<u16>, i64)]) -> Delivery {
        let mut d: Delivery = serde_json::from_value(serde_json::json!({
            "delivery_id": "dlv1", "account_id": "acct1", "change_id": "chg1",
            "subscription_id": "sub1", "integration_id": "int1", "method": "webhook",
            "status": status, "created_at": T0, "updated_at": T0, "occurred_at": T0,
        }))
        .expect("a delivery");
        d.attempt_log = attempts
            .iter()
            .enumerate()
            .map(|(i, (class, http_status, at))| AttemptRecord {
                number: i as u32 + 1,
                at: Timestamp::from_millis(*at),
                class: class.to_string(),
                http_status: *http_status,
                duration_ms: 1,
                detail: None,
                error: None,
            })
            .collect();
        d.attempts = attempts.len() as u32;
        d
    }

    fn logged(answer: Answer, nth: u32, at: i64) -> Logged {
        Logged {
            webhook_id: "dlv1".into(),
            nth,
            at: Timestamp::from_millis(at),
            answer,
            request: ReceivedRequest {
                method: "POST".into(),
                path: "/".into(),
                headers: BTreeMap::new(),
                body: Vec::new(),
            },
        }
    }

    const TIMEOUT: Duration = Duration::from_millis(300);

    fn figures(d: &Delivery, log: &[Logged]) -> WaveFigures {
        let mut f = WaveFigures::default();
        let reqs: Vec<(usize, &Logged)> = log.iter().enumerate().collect();
        check_delivery(&mut f, d, &reqs, &RetryPolicy::FixedSchedule, TIMEOUT);
        f
    }

    fn checked(d: &Delivery, log: &[Logged]) -> Defects {
        figures(d, log).defects
    }

    /// A 429 asking for 900 s, then a 200 a minute later.
    fn asked_for_900_s_then_acknowledged() -> [Logged; 2] {
        let too_many = Answer::TooMany {
            retry_after: Some(900),
        };
        [logged(too_many, 0, T0), logged(Answer::Ok, 1, T0 + 60_000)]
    }

    /// Two 200s at the endpoint, the second `later` ms after the first.
    fn acknowledged_twice(later: i64) -> [Logged; 2] {
        [logged(Answer::Ok, 0, T0), logged(Answer::Ok, 1, T0 + later)]
    }

    /// A delivery whose first attempt the worker recorded as a transport failure after
    /// `duration_ms`, then delivered a minute later.
    fn failed_in_transport_then_delivered(duration_ms: u64) -> Delivery {
        let mut d = delivery(
            "delivered",
            &[("transient", None, T0), ("success", Some(200), T0 + 60_000)],
        );
        d.attempt_log[0].duration_ms = duration_ms;
        d.attempt_log[0].detail = Some("operation timed out".into());
        d
    }

    #[test]
    fn a_retried_then_acknowledged_delivery_on_schedule_has_no_defect() {
        let minute = 60_000;
        let d = delivery(
            "delivered",
            &[
                ("transient", Some(503), T0),
                ("success", Some(200), T0 + minute),
            ],
        );
        let log = [
            logged(Answer::ServerError { status: 503 }, 0, T0),
            logged(Answer::Ok, 1, T0 + minute),
        ];
        assert_eq!(checked(&d, &log).total(), 0);
    }

    #[test]
    fn a_retry_earlier_than_the_schedule_or_its_retry_after_is_off_schedule() {
        let d = delivery(
            "delivered",
            &[
                ("transient", Some(429), T0),
                ("success", Some(200), T0 + 60_000),
            ],
        );
        // The endpoint asked for 900 s; the worker came back after the schedule's 60 s.
        let log = asked_for_900_s_then_acknowledged();
        assert_eq!(checked(&d, &log).off_schedule, 1);
    }

    #[test]
    fn a_delivery_recorded_delivered_that_was_never_acknowledged_is_lost() {
        let d = delivery("delivered", &[("success", Some(200), T0)]);
        let defects = checked(&d, &[logged(Answer::LostAck, 0, T0)]);
        assert_eq!(defects.lost, 1);
        assert_eq!(
            defects.history, 1,
            "the attempt records a 200 the endpoint never sent"
        );
    }

    #[test]
    fn a_request_after_the_acknowledgement_is_a_duplicate() {
        let d = delivery("delivered", &[("success", Some(200), T0)]);
        let log = [logged(Answer::Ok, 0, T0), logged(Answer::Ok, 1, T0 + 1)];
        assert_eq!(checked(&d, &log).duplicated, 1);
    }

    #[test]
    fn a_history_that_ends_elsewhere_than_the_stored_status_breaks_the_lifecycle() {
        // One transient failure leaves it retrying, not dead.
        let d = delivery("dead", &[("transient", Some(500), T0)]);
        let defects = checked(&d, &[logged(Answer::ServerError { status: 500 }, 0, T0)]);
        assert_eq!(defects.lifecycle, 1);
        // An attempt after delivery has no row at all.
        let d = delivery(
            "delivered",
            &[("success", Some(200), T0), ("success", Some(200), T0)],
        );
        let log = [logged(Answer::Ok, 0, T0), logged(Answer::Ok, 1, T0)];
        assert!(checked(&d, &log).lifecycle >= 1);
    }

    #[test]
    fn an_answer_heard_only_after_the_timeout_counts_as_unanswered_not_as_a_defect() {
        // The endpoint answered 200 at once; the worker's attempt timed out before it heard it
        // (a loaded machine), so its retry is at least once, not a duplicate.
        let d = failed_in_transport_then_delivered(300);
        let f = figures(&d, &acknowledged_twice(60_000));
        assert_eq!(f.defects.total(), 0, "{:?}", f.examples);
        assert_eq!(f.answered_after_timeout, 1);
        assert_eq!(f.redelivered_unacknowledged, 1);
        // Its Retry-After never reached the worker either: the schedule's minute is on time.
        let log = asked_for_900_s_then_acknowledged();
        assert_eq!(figures(&d, &log).defects.total(), 0);
    }

    #[test]
    fn a_request_repeated_after_an_acknowledgement_the_worker_could_not_save_is_no_duplicate() {
        // Attempt 1 was answered 200 but its outcome write failed for good; the message came
        // back after its visibility timeout and attempt 1 was made again, and saved.
        let d = delivery("delivered", &[("success", Some(200), T0 + 370_000)]);
        let f = figures(&d, &acknowledged_twice(370_000));
        assert_eq!(f.defects.total(), 0, "{:?}", f.examples);
        assert_eq!(f.unrecorded_requests, 1);
        // A third request after the saved one is a duplicate.
        let log = [
            logged(Answer::Ok, 0, T0),
            logged(Answer::Ok, 1, T0 + 370_000),
            logged(Answer::Ok, 2, T0 + 740_000),
        ];
        assert_eq!(checked(&d, &log).duplicated, 1);
    }

    #[test]
    fn a_transport_failure_recorded_before_the_timeout_against_an_answer_is_a_defect() {
        // The same history, but the failure came after 40 ms: no timeout explains missing the
        // 200, so the record is wrong and the retry a duplicate.
        let d = failed_in_transport_then_delivered(40);
        let f = figures(&d, &acknowledged_twice(60_000));
        assert_eq!(f.defects.history, 1);
        assert_eq!(f.defects.duplicated, 1);
        assert_eq!(f.answered_after_timeout, 0);
    }

    #[test]
    fn the_walk_knows_the_next_due_moment_and_whether_a_delivery_is_overdue() {
        let now = Timestamp::from_millis(T0 + 3_600_000);
        let later = now.plus(Duration::from_secs(6 * 3600));
        let mut retrying = delivery("retrying", &[("transient", Some(500), T0)]);
        retrying.not_before = Some(later);
        retrying.due_at = Some(later.millis());
        let mut snapshot = Snapshot {
            deliveries: vec![retrying.clone()],
            ..Snapshot::default()
        };
        let grace = FIRST_DISPATCH_GRACE;
        assert_eq!(snapshot.next_due(now, grace), Some(later));
        assert!(!snapshot.overdue(now, grace));
        // Published by the sweep, its next look comes first.
        let look = now.plus(Duration::from_secs(300));
        snapshot.deliveries[0].due_at = Some(look.millis());
        assert_eq!(snapshot.next_due(now, grace), Some(look));
        // Overdue on the due index (the sweep's call failed).
        let mut overdue = retrying.clone();
        overdue.not_before = Some(now);
        overdue.due_at = Some(now.millis());
        snapshot.deliveries.push(overdue);
        assert!(snapshot.overdue(now, grace));
        assert_eq!(snapshot.next_due(now, grace), Some(look));
        // A first dispatch past its grace with no attempt (the roll-up run failed).
        let mut lost = delivery("pending", &[]);
        lost.created_at = now.minus(grace);
        snapshot.deliveries = vec![retrying, lost];
        assert!(snapshot.overdue(now, grace));
        // Terminal deliveries are never due.
        for d in &mut snapshot.deliveries {
            d.status = DeliveryStatus::Delivered;
        }
        assert!(!snapshot.overdue(now, grace));
        assert_eq!(snapshot.next_due(now, grace), None);
    }

    #[test]
    fn an_open_delivery_is_stuck() {
        let d = delivery("retrying", &[("transient", Some(500), T0)]);
        let defects = checked(&d, &[logged(Answer::ServerError { status: 500 }, 0, T0)]);
        assert_eq!(defects.stuck, 1);
    }
}
