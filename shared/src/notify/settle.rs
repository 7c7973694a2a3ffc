//! Nightly settling of notification deliveries (called by the reconcile Lambda):
//!
//! * a delivery `sending` for fifteen minutes or more is ambiguous (the send may or may not have
//!   happened) → `failed` with reason `ambiguous` (and the terminal-failure metric); an operator
//!   cannot requeue it, because that could deliver twice;
//! * a `queued` delivery past its deadline → `expired` (its work row deleted).
//!
//! The sparse, sharded `watch` index holds exactly the deliveries settling may have to act on,
//! keyed by the instant it may (`claimed_at + 15 min` for `sending`, the deadline for `queued`):
//! every delivery write refreshes it. So the index is the backlog: each settled delivery leaves
//! it in the same write that settles it, a run with a budget takes the oldest entries of every
//! shard in turn and the next run simply continues with what is left: nothing is redone and
//! nothing is skipped, however large the backlog. An entry whose delivery moved on (index lag) is
//! read, found settled and left; an entry that no longer matches its delivery's state is
//! repaired.

use super::metrics::{MetricSink, StdoutEmf, TerminalFailure};
use super::table::NotificationTable;
use super::NotifyError;
use crate::aws::Clients;
use crate::config::Config;
use crate::domain::notification_delivery::{
    is_ambiguous, FailureReason, NotificationStatus as N, NotificationTrigger as NT,
};
use crate::domain::time::Timestamp;
use crate::store::keys::SHARDS;
use crate::store::notification_delivery::{self as delivery, Effects, NotificationDelivery};
use crate::store::{read, Item};
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// Entries read per query page.
pub(crate) const PAGE: i32 = 100;

/// How much one run may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettleBudget {
    /// Index entries examined at most.
    pub max_items: usize,
    /// Wall-clock time after which no new page starts (the Lambda's own deadline, less a margin).
    pub deadline: Option<Instant>,
}

impl Default for SettleBudget {
    fn default() -> Self {
        SettleBudget {
            max_items: 5_000,
            deadline: None,
        }
    }
}

impl SettleBudget {
    pub fn items(max_items: usize) -> Self {
        SettleBudget {
            max_items,
            deadline: None,
        }
    }
    fn out_of_time(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SettleReport {
    /// Index entries examined.
    pub examined: u32,
    /// `sending → failed (ambiguous)`.
    pub failed_ambiguous: u32,
    /// `queued → expired`.
    pub expired: u32,
    /// Entries whose index attributes were brought back in line with their delivery.
    pub repaired: u32,
    /// Entries with nothing to do (the delivery moved on; the index had not caught up).
    pub unchanged: u32,
    /// Every due entry was examined; `false` when the budget ran out first (run again).
    pub complete: bool,
}

impl SettleReport {
    /// The counts by what happened, as reconciliation reports them.
    pub fn counts(&self) -> BTreeMap<String, u64> {
        BTreeMap::from([
            ("examined".to_string(), u64::from(self.examined)),
            (
                "failed_ambiguous".to_string(),
                u64::from(self.failed_ambiguous),
            ),
            ("expired".to_string(), u64::from(self.expired)),
            ("repaired".to_string(), u64::from(self.repaired)),
            ("unchanged".to_string(), u64::from(self.unchanged)),
            ("more".to_string(), u64::from(!self.complete)),
        ])
    }
}

/// Settling as reconciliation runs it (the reconcile function and the operator route wire this
/// closure in as its notification settler): "now" from the injected clock, the run bounded by
/// the invocation's wall-clock deadline and the default item budget; the counts of
/// [`SettleReport::counts`].
pub fn reconcile_settler(
    clients: &Clients,
    config: &Config,
    clock: &Arc<dyn crate::clock::Clock>,
) -> impl Fn(Instant) -> BoxFuture<'static, Result<BTreeMap<String, u64>, NotifyError>> + Send + Sync
{
    let (clients, config, clock) = (clients.clone(), config.clone(), clock.clone());
    move |deadline: Instant| {
        let (clients, config, clock) = (clients.clone(), config.clone(), clock.clone());
        Box::pin(async move {
            let budget = SettleBudget {
                deadline: Some(deadline),
                ..SettleBudget::default()
            };
            let report = settle(&clients, &config, clock.now(), budget).await?;
            Ok(report.counts())
        })
    }
}

/// What settling does with one delivery at `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettleAction {
    FailAmbiguous,
    Expire,
    /// The index attributes do not match the state: rewrite them.
    Repair,
    Nothing,
}

/// The pure decision for one delivery.
pub fn decide(d: &NotificationDelivery, now: Timestamp) -> SettleAction {
    match d.status {
        N::Sending if d.claimed_at.is_some_and(|c| is_ambiguous(d.status, c, now)) => {
            SettleAction::FailAmbiguous
        }
        N::Queued if d.deadline.is_some_and(|deadline| deadline <= now) => SettleAction::Expire,
        _ => {
            let expected = d.watch_until();
            if d.watch_at != expected || (expected.is_some() && d.watch_shard.is_none()) {
                SettleAction::Repair
            } else {
                SettleAction::Nothing
            }
        }
    }
}

/// Settles with the deployment's table and stage, metrics on standard output.
pub async fn settle(
    clients: &Clients,
    config: &Config,
    now: Timestamp,
    budget: SettleBudget,
) -> Result<SettleReport, NotifyError> {
    settle_with(
        &NotificationTable::from_config(clients, config),
        &StdoutEmf::new(&config.metrics_namespace),
        &config.stage,
        now,
        budget,
    )
    .await
}

/// [`settle`] with an explicit store and metric sink.
pub async fn settle_with(
    store: &NotificationTable,
    metrics: &dyn MetricSink,
    stage: &str,
    now: Timestamp,
    budget: SettleBudget,
) -> Result<SettleReport, NotifyError> {
    let mut report = SettleReport::default();
    let mut cursors: Vec<(String, Option<Item>, bool)> = (0..SHARDS)
        .map(|shard| (shard.to_string(), None, false))
        .collect();
    let mut remaining = budget.max_items;
    while remaining > 0 && !budget.out_of_time() && cursors.iter().any(|(_, _, done)| !done) {
        for (shard, cursor, done) in cursors.iter_mut() {
            if *done || remaining == 0 || budget.out_of_time() {
                continue;
            }
            let limit = PAGE.min(remaining as i32);
            let q = delivery::watched_query(&store.table, shard, now, limit, cursor.take());
            let page = read::query_page(&store.dynamo, &q).await?;
            for item in page.items {
                remaining = remaining.saturating_sub(1);
                report.examined += 1;
                settle_one(store, metrics, stage, &item, now, &mut report).await?;
            }
            match page.next {
                Some(k) => *cursor = Some(k),
                None => *done = true,
            }
        }
    }
    report.complete = cursors.iter().all(|(_, _, done)| *done);
    if report.examined > 0 {
        tracing::info!(
            examined = report.examined,
            failed_ambiguous = report.failed_ambiguous,
            expired = report.expired,
            repaired = report.repaired,
            unchanged = report.unchanged,
            complete = report.complete,
            "notification settling"
        );
    }
    Ok(report)
}

async fn settle_one(
    store: &NotificationTable,
    metrics: &dyn MetricSink,
    stage: &str,
    key: &Item,
    now: Timestamp,
    report: &mut SettleReport,
) -> Result<(), NotifyError> {
    let get = |k: &str| key.get(k).and_then(|v| v.as_s().ok()).cloned();
    let (Some(pk), Some(sk)) = (get("pk"), get("sk")) else {
        return Ok(());
    };
    // Two tries: a write that loses to a concurrent one is decided again on a fresh read.
    for _ in 0..2 {
        let Some(d) = delivery::at(&store.dynamo, &store.table, &pk, &sk).await? else {
            report.unchanged += 1;
            return Ok(());
        };
        let written = match decide(&d, now) {
            SettleAction::FailAmbiguous => {
                fail_ambiguous(store, metrics, stage, &d, now, report).await?
            }
            SettleAction::Expire => expire(store, &d, now, report).await?,
            SettleAction::Repair => {
                let mut next = d.clone();
                next.updated_at = now;
                let written = store.record(&d, next).await?;
                if written.is_some() {
                    report.repaired += 1;
                }
                written.is_some()
            }
            SettleAction::Nothing => {
                report.unchanged += 1;
                true
            }
        };
        if written {
            return Ok(());
        }
    }
    report.unchanged += 1;
    Ok(())
}

/// Fails a delivery left sending past the bound without an outcome (ambiguous: it may have been
/// sent), with its terminal-failure metric. Whether the write landed.
async fn fail_ambiguous(
    store: &NotificationTable,
    metrics: &dyn MetricSink,
    stage: &str,
    d: &NotificationDelivery,
    now: Timestamp,
    report: &mut SettleReport,
) -> Result<bool, NotifyError> {
    let mut next = d.clone();
    next.updated_at = now;
    next.status = N::Failed;
    next.failure_reason = Some(FailureReason::Ambiguous);
    next.failed_at = Some(now);
    next.claim_token = None;
    next.push_history_detail(
        format!("ambiguous:{}", d.claim_token.as_deref().unwrap_or("-")),
        "failed",
        now,
        Some("sending for fifteen minutes without an outcome: ambiguous".into()),
    );
    let written = store
        .transition(d, next, NT::FailSending, Effects::delete_work())
        .await?;
    if written.is_some() {
        report.failed_ambiguous += 1;
        metrics.terminal_failure(&TerminalFailure {
            stage: stage.to_string(),
            channel: d.channel.clone(),
            reason: FailureReason::Ambiguous.code().to_string(),
            notice_id: d.notice_id.clone(),
            delivery_key: d.delivery_key.clone(),
            at: now,
        });
    }
    Ok(written.is_some())
}

/// Expires a delivery whose deadline passed. Whether the write landed.
async fn expire(
    store: &NotificationTable,
    d: &NotificationDelivery,
    now: Timestamp,
    report: &mut SettleReport,
) -> Result<bool, NotifyError> {
    let mut next = d.clone();
    next.updated_at = now;
    next.not_before = None;
    next.push_history_detail(
        "expired",
        "expired",
        now,
        d.deadline.map(|t| format!("deadline {t} passed")),
    );
    next.status = N::Expired;
    let written = store
        .transition(d, next, NT::Expire, Effects::delete_work())
        .await?;
    if written.is_some() {
        report.expired += 1;
    }
    Ok(written.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::notification_delivery::AMBIGUITY_TIMEOUT;
    use crate::domain::time::MINUTE;

    fn delivery(status: N) -> NotificationDelivery {
        serde_json::from_value(serde_json::json!({
            "notice_id": "n", "delivery_key": "email-0", "account_id": "a", "channel": "email",
            "recipient": "r", "status": status, "created_at": 0, "updated_at": 0
        }))
        .unwrap()
    }

    #[test]
    fn decides_ambiguity_expiry_and_repairs() {
        let t = Timestamp(10_000_000);
        let mut sending = delivery(N::Sending);
        sending.claimed_at = Some(t);
        sending.refresh_watch();
        assert_eq!(decide(&sending, t.plus(14 * MINUTE)), SettleAction::Nothing);
        assert_eq!(
            decide(&sending, t.plus(AMBIGUITY_TIMEOUT)),
            SettleAction::FailAmbiguous
        );

        let mut queued = delivery(N::Queued);
        queued.deadline = Some(t);
        queued.refresh_watch();
        assert_eq!(decide(&queued, t.minus(MINUTE)), SettleAction::Nothing);
        assert_eq!(decide(&queued, t), SettleAction::Expire);

        let mut sent = delivery(N::Sent);
        sent.watch_at = Some(t);
        sent.watch_shard = Some("3".into());
        assert_eq!(decide(&sent, t), SettleAction::Repair);
        sent.refresh_watch();
        assert_eq!(decide(&sent, t), SettleAction::Nothing);
    }
}
