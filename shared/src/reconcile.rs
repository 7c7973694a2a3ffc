//! Reconciliation: the nightly Lambda (and the same service on demand, from an operator route).
//!
//! One run, in this order:
//! 1. **Overdue dispatch work** — [`Dispatcher::sweep`] republishes whatever is due on the `due`
//!    index (retries whose message was lost, deliveries whose worker died).
//! 2. **Notification settling** — the notification pipeline's nightly settling
//!    (`docs/lifecycles.md#notification-delivery`: sends ambiguous for too long fail, queued work
//!    past its deadline expires), through the [`NotificationSettler`] the reconcile function (and
//!    the operator route) pass in.
//! 3. **Roll-up stragglers** — [`RollUp::walk`] over the `rollup` index, oldest first, one pass
//!    ([`ROLLUP_BATCH`](crate::domain::event::ROLLUP_BATCH) events) at a time, within the run's
//!    [`Budget`] (events and wall-clock time).
//! 4. **Stopped replay jobs** — [`replay::resume_stalled`]: every replay job still `running`
//!    whose run ended or died (no live lease) continues from its saved position, in every run
//!    (the frequent one too), so an interrupted replay never waits for a person.
//!
//! **Large backlogs** finish across several invocations without redoing or skipping work: every
//! event the walk finalizes leaves the index, so the next invocation starts at the oldest event
//! still open — exactly where the previous one stopped, apart from events that are still
//! legitimately `partial`, which every pass looks at again (`docs/lifecycles.md#event-status`).
//! The report says `more: true` when the budget ran out first.
//!
//! The report (counts of what changed) goes to the log and, as CloudWatch embedded metric format,
//! to standard output ([`emf_document`], written with [`crate::metrics::write_line`]).
//!
//! Budgets are wall-clock (`Instant`), not the injected [`Clock`]: they bound the Lambda's own
//! execution time, whereas the clock is the domain's notion of "now".

use crate::aws::Clients;
use crate::clock::Clock;
use crate::config::Config;
use crate::delivery::dispatch::Dispatcher;
use crate::delivery::rollup::{RollUp, RollUpReport};
use crate::domain::time::Timestamp;
use crate::metrics::{self, Metric};
use crate::operations::recovery::replay::{self, StalledReport};
use crate::operations::Ops;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Events one invocation looks at, at most, unless the request says otherwise.
pub const DEFAULT_MAX_EVENTS: usize = 50_000;
/// Time kept back from the Lambda's deadline for reporting.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(15);

/// What one invocation may spend.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Events the roll-up walk looks at, at most.
    pub max_events: usize,
    /// Wall-clock time after which no new batch starts.
    pub deadline: Instant,
}

impl Budget {
    /// `remaining` of the invocation's time, less [`DEADLINE_MARGIN`] (at least a second).
    pub fn within(remaining: Duration, max_events: usize) -> Self {
        let usable = remaining
            .checked_sub(DEADLINE_MARGIN)
            .unwrap_or(Duration::from_secs(1));
        Budget {
            max_events,
            deadline: Instant::now() + usable,
        }
    }
}

/// Counts from the notification settling, by what happened (e.g. `failed_ambiguous`, `expired`).
pub(crate) type SettleCounts = BTreeMap<String, u64>;
pub(crate) type SettleError = Box<dyn std::error::Error + Send + Sync>;

/// The notification pipeline's nightly settling, as reconciliation calls it. Reconciliation does
/// not know the pipeline: whoever builds the [`Reconciler`] (the reconcile function, the operator
/// route) passes the settler in.
#[async_trait]
pub trait NotificationSettler: Send + Sync {
    /// Settles what is due, starting no new work after `deadline`.
    async fn settle(&self, deadline: Instant) -> Result<SettleCounts, SettleError>;
}

/// Any async closure `Fn(Instant) -> Future<Output = Result<SettleCounts, E>>` is a settler,
/// for any error `E` that boxes into a [`SettleError`].
#[async_trait]
impl<F, Fut, E> NotificationSettler for F
where
    F: Fn(Instant) -> Fut + Send + Sync,
    Fut: std::future::Future<Output = Result<SettleCounts, E>> + Send,
    E: Into<SettleError>,
{
    async fn settle(&self, deadline: Instant) -> Result<SettleCounts, SettleError> {
        self(deadline).await.map_err(Into::into)
    }
}

/// Which parts of reconciliation a run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    /// Everything (the nightly schedule, and the operator's default).
    #[default]
    Nightly,
    /// Only the roll-up walk (the frequent schedule: the regular roll-up pass).
    Rollup,
}

impl std::fmt::Display for RunKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RunKind::Nightly => "nightly",
            RunKind::Rollup => "rollup",
        })
    }
}

/// The invocation payload: `{"run": "nightly" | "rollup", "max_events": n}` (both optional;
/// `{}` is a nightly run). Nothing else: an unknown field or run kind is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReconcileRequest {
    #[serde(default)]
    pub run: RunKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_events: Option<usize>,
}

impl ReconcileRequest {
    /// Reads a payload, refusing one it does not understand (a mistyped run kind must not start
    /// a full nightly run).
    pub fn from_payload(payload: &Value) -> Result<Self, String> {
        serde_json::from_value(payload.clone()).map_err(|e| {
            format!(
                "the reconcile function takes {{\"run\": \"nightly\" | \"rollup\", \"max_events\": n}}: {e}"
            )
        })
    }
}

/// What the notification settling did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum SettleReport {
    /// Not part of this run (roll-up only).
    NotRun,
    /// No settler was passed in.
    NotWired,
    Settled {
        counts: SettleCounts,
    },
    Failed {
        error: String,
    },
}

/// What the dispatch sweep republished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DispatchCounts {
    pub ran: bool,
    pub published: u32,
    pub failed: u32,
}

/// What one run changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReconcileReport {
    pub run: RunKind,
    pub rollup: RollUpReport,
    /// The budget ran out before the roll-up walk reached the end of the index: invoke again.
    pub more: bool,
    pub dispatch: DispatchCounts,
    pub notifications: SettleReport,
    /// Replay jobs whose run had stopped, continued.
    pub replays: StalledReport,
    /// Steps that failed (the others still ran).
    pub errors: Vec<String>,
    pub elapsed_ms: u64,
}

impl ReconcileReport {
    /// Whether every step ran without a fault.
    pub fn ok(&self) -> bool {
        self.errors.is_empty() && self.rollup.errors == 0
    }

    /// One structured log line with every count.
    pub fn log(&self) {
        let r = &self.rollup;
        let level_ok = self.ok();
        macro_rules! line {
            ($level:ident) => {
                tracing::$level!(
                    run = %self.run,
                    examined = r.examined,
                    to_partial = r.to_partial,
                    to_sent = r.to_sent,
                    to_failed = r.to_failed,
                    to_skipped = r.to_skipped,
                    unchanged = r.unchanged,
                    deferred = r.deferred,
                    contended = r.contended,
                    rollup_errors = r.errors,
                    batches = r.batches,
                    requeued_lost_dispatch = r.requeued,
                    more = self.more,
                    republished = self.dispatch.published,
                    republish_failed = self.dispatch.failed,
                    replays_resumed = self.replays.resumed,
                    notifications = ?self.notifications,
                    errors = ?self.errors,
                    elapsed_ms = self.elapsed_ms,
                    "reconciliation"
                )
            };
        }
        if level_ok {
            line!(info);
        } else {
            line!(error);
        }
    }
}

/// The report as one CloudWatch embedded-metric-format document (dimension `Stage`; the run kind
/// is a property). The notification settling's counts become `ReconcileNotifications{Count}`
/// metrics, one per count it reports (e.g. `expired` → `ReconcileNotificationsExpired`).
pub fn emf_document(
    report: &ReconcileReport,
    namespace: &str,
    stage: &str,
    at: Timestamp,
) -> Value {
    let r = &report.rollup;
    let mut metrics: Vec<Metric> = [
        ("ReconcileRollUpExamined", r.examined.into()),
        ("ReconcileRollUpToPartial", r.to_partial.into()),
        ("ReconcileRollUpToSent", r.to_sent.into()),
        ("ReconcileRollUpToFailed", r.to_failed.into()),
        ("ReconcileRollUpToSkipped", r.to_skipped.into()),
        ("ReconcileRollUpDeferred", r.deferred.into()),
        ("ReconcileRollUpContended", r.contended.into()),
        ("ReconcileRollUpErrors", r.errors.into()),
        ("ReconcileLostDispatchRequeued", r.requeued.into()),
        ("ReconcileBacklogRemaining", u64::from(report.more)),
        ("ReconcileRepublished", report.dispatch.published.into()),
        ("ReconcileRepublishFailed", report.dispatch.failed.into()),
        ("ReconcileReplaysResumed", report.replays.resumed.into()),
        ("ReconcileErrors", report.errors.len() as u64),
    ]
    .into_iter()
    .map(|(name, value)| Metric::count(name, value))
    .collect();
    metrics.push(Metric {
        name: "ReconcileDuration".into(),
        unit: "Milliseconds",
        value: report.elapsed_ms,
    });
    if let SettleReport::Settled { counts } = &report.notifications {
        for (count, value) in counts {
            metrics.push(Metric::count(
                format!("ReconcileNotifications{}", camel(count)),
                *value,
            ));
        }
    }
    let mut props = Map::new();
    props.insert("run".into(), json!(report.run));
    metrics::document(namespace, stage, at, &metrics, props)
}

/// `failed_ambiguous` → `FailedAmbiguous`.
fn camel(snake: &str) -> String {
    snake
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// What continuing stopped replay jobs needs: the delivery table and the clock.
struct Replays {
    dynamo: aws_sdk_dynamodb::Client,
    table: String,
    clock: Arc<dyn Clock>,
}

/// The reconciliation service.
pub struct Reconciler {
    rollup: RollUp,
    dispatcher: Dispatcher,
    settler: Option<Arc<dyn NotificationSettler>>,
    replays: Option<Replays>,
}

impl Reconciler {
    /// The service as a function builds it, with the notification settler it wires in (`None`:
    /// nightly runs report settling as `not_wired`).
    pub fn new(
        clients: Clients,
        config: Config,
        clock: Arc<dyn Clock>,
        settler: Option<Arc<dyn NotificationSettler>>,
    ) -> Self {
        let rollup = RollUp::new(
            clients.dynamo.clone(),
            config.delivery_table.clone(),
            clock.clone(),
        );
        let replays = Replays {
            dynamo: clients.dynamo.clone(),
            table: config.delivery_table.clone(),
            clock: clock.clone(),
        };
        let dispatcher = Dispatcher::new(clients, config, clock);
        Reconciler {
            rollup,
            dispatcher,
            settler,
            replays: Some(replays),
        }
    }

    /// The service from its parts (the local harness passes a dispatcher without look-ahead).
    pub fn from_parts(rollup: RollUp, dispatcher: Dispatcher) -> Self {
        Reconciler {
            rollup,
            dispatcher,
            settler: None,
            replays: None,
        }
    }

    /// Continues stopped replay jobs of `table` in every run (as [`Self::new`] wires it).
    pub fn with_replays(
        mut self,
        dynamo: aws_sdk_dynamodb::Client,
        table: impl Into<String>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        self.replays = Some(Replays {
            dynamo,
            table: table.into(),
            clock,
        });
        self
    }

    /// Replaces the notification settler.
    pub fn with_notification_settler(mut self, settler: Arc<dyn NotificationSettler>) -> Self {
        self.settler = Some(settler);
        self
    }

    pub fn rollup(&self) -> &RollUp {
        &self.rollup
    }

    /// One run. Never fails as a whole: a step that fails is reported in `errors` and the others
    /// still run.
    pub async fn run(&self, kind: RunKind, budget: Budget) -> ReconcileReport {
        let started = Instant::now();
        let mut errors = Vec::new();
        let mut dispatch = DispatchCounts::default();
        let mut notifications = SettleReport::NotRun;
        // The walk first: it puts push deliveries whose first dispatch was lost back on the
        // `due` index, and the sweep after it publishes them in the same run.
        let (rollup, more) = match self.rollup.walk(budget.max_events, budget.deadline).await {
            Ok(w) => (w.rollup, w.more),
            Err(e) => {
                errors.push(format!("roll-up walk: {e}"));
                (RollUpReport::default(), true)
            }
        };
        if kind == RunKind::Nightly {
            match self.dispatcher.sweep().await {
                Ok(r) => {
                    dispatch = DispatchCounts {
                        ran: true,
                        published: r.published,
                        failed: r.failed,
                    }
                }
                Err(e) => errors.push(format!("dispatch sweep: {e}")),
            }
            notifications = match &self.settler {
                None => SettleReport::NotWired,
                Some(settler) => match settler.settle(budget.deadline).await {
                    Ok(counts) => SettleReport::Settled { counts },
                    Err(e) => {
                        errors.push(format!("notification settling: {e}"));
                        SettleReport::Failed {
                            error: e.to_string(),
                        }
                    }
                },
            };
        }
        let mut replays = StalledReport::default();
        if let Some(r) = &self.replays {
            let ops = Ops::new(&r.dynamo, &r.table, r.clock.as_ref());
            let run = replay::Budget {
                deadline: budget.deadline,
                ..replay::Budget::api()
            };
            match replay::resume_stalled(&ops, run).await {
                Ok(report) => replays = report,
                Err(e) => errors.push(format!("stopped replay jobs: {e}")),
            }
        }
        ReconcileReport {
            run: kind,
            rollup,
            more,
            dispatch,
            notifications,
            replays,
            errors,
            elapsed_ms: started.elapsed().as_millis() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> ReconcileReport {
        ReconcileReport {
            run: RunKind::Nightly,
            rollup: RollUpReport {
                examined: 7,
                to_sent: 3,
                to_failed: 1,
                to_skipped: 2,
                to_partial: 1,
                batches: 1,
                requeued: 5,
                ..RollUpReport::default()
            },
            more: true,
            dispatch: DispatchCounts {
                ran: true,
                published: 4,
                failed: 0,
            },
            notifications: SettleReport::Settled {
                counts: BTreeMap::from([("expired".to_string(), 2), ("failed".to_string(), 1)]),
            },
            replays: StalledReport {
                ran: true,
                found: 2,
                resumed: 2,
                completed: 1,
            },
            errors: vec![],
            elapsed_ms: 12,
        }
    }

    #[test]
    fn the_emf_document_declares_every_metric_it_carries() {
        let doc = emf_document(
            &report(),
            crate::metrics::DEFAULT_NAMESPACE,
            "prod",
            Timestamp(1_700_000_000_000),
        );
        let aws = &doc["_aws"];
        assert_eq!(aws["Timestamp"], 1_700_000_000_000i64);
        let directive = &aws["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "RhythmDelivery");
        assert_eq!(directive["Dimensions"], json!([["Stage"]]));
        assert_eq!(doc["Stage"], "prod");
        let metrics = directive["Metrics"].as_array().unwrap();
        assert_eq!(metrics.len(), 15 + 2);
        for m in metrics {
            let name = m["Name"].as_str().unwrap();
            assert!(doc[name].is_u64(), "{name} has a value");
        }
        assert_eq!(doc["ReconcileRollUpToSent"], 3);
        assert_eq!(doc["ReconcileBacklogRemaining"], 1);
        assert_eq!(doc["ReconcileRepublished"], 4);
        assert_eq!(doc["ReconcileLostDispatchRequeued"], 5);
        assert_eq!(doc["ReconcileReplaysResumed"], 2);
        assert_eq!(doc["ReconcileNotificationsExpired"], 2);
        assert_eq!(doc["ReconcileNotificationsFailed"], 1);
        assert_eq!(camel("failed_ambiguous"), "FailedAmbiguous");
        assert_eq!(doc["run"], "nightly");
    }

    #[test]
    fn requests_default_to_a_nightly_run() {
        assert_eq!(
            ReconcileRequest::from_payload(&json!({"run": "nightly"})),
            Ok(ReconcileRequest::default())
        );
        assert_eq!(
            ReconcileRequest::from_payload(&json!({})),
            Ok(ReconcileRequest::default())
        );
        assert_eq!(
            ReconcileRequest::from_payload(&json!({"run": "rollup", "max_events": 5})),
            Ok(ReconcileRequest {
                run: RunKind::Rollup,
                max_events: Some(5)
            })
        );
    }

    #[test]
    fn the_reconcile_function_refuses_a_payload_it_does_not_understand() {
        for payload in [
            json!({"run": "Rollup"}),
            json!({"run": "full"}),
            json!({"detail-type": "Scheduled Event"}),
            json!({"run": "rollup", "max_events": -1}),
            json!("nightly"),
            Value::Null,
        ] {
            let e = ReconcileRequest::from_payload(&payload).unwrap_err();
            assert!(
                e.contains("\"run\": \"nightly\" | \"rollup\""),
                "{payload}: {e}"
            );
        }
    }

    #[test]
    fn budgets_keep_a_margin() {
        let b = Budget::within(Duration::from_secs(300), 10);
        let left = b.deadline.saturating_duration_since(Instant::now());
        assert!(left <= Duration::from_secs(285) && left > Duration::from_secs(280));
        let tiny = Budget::within(Duration::from_secs(3), 10);
        assert!(tiny.deadline > Instant::now());
    }

    #[test]
    fn closures_are_settlers() {
        let settler: Arc<dyn NotificationSettler> = Arc::new(|_deadline: Instant| async {
            Ok::<_, SettleError>(BTreeMap::from([("expired".to_string(), 1u64)]))
        });
        let counts = futures::executor::block_on(settler.settle(Instant::now())).unwrap();
        assert_eq!(counts["expired"], 1);
    }
}
