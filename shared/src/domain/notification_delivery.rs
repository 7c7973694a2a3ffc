//! Notification delivery: seed STATE-PFM-NOT-005 (`001_…`), one record per notice × channel.
//!
//! The queue's receive count is the retry budget ([`MAX_RECEIVES`]); there is no database attempt
//! counter. Expected-state updates decide which consumer owns a send (`NOTIFICATION_LIFECYCLE.expect`).
//! Operator requeue is a separate conditional update ([`requeue_condition`]). Provider-event
//! identities deduplicate the retained history, capped at [`MAX_HISTORY_EVENTS`].
//!
//! `deferred` and `bounced` are in the seed's vocabulary but no row writes them: `deferred` is
//! reserved for quiet hours and digests, `bounced` for provider bounce feedback no adapter reports
//! yet. Console deliveries are created directly in `delivered`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

use super::lifecycle::{
    InvalidMove, Lifecycle, Status, StatusCondition, Transition, TransitionError, Trigger,
};
use super::time::{Timestamp, MINUTE};

/// The queue receive count budget: a retryable failure on the eighth receive fails the delivery
/// (`attempts_exhausted`) and hands the message to the dead-letter queue.
pub const MAX_RECEIVES: u32 = 8;
/// A delivery still `sending` this long after its claim is ambiguous; nightly reconciliation
/// settles it as failed (`ambiguous`).
pub const AMBIGUITY_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// The retained provider history is capped at this many events (newest kept).
pub const MAX_HISTORY_EVENTS: usize = 50;
/// The attribute the stored failure reason lives under (for the requeue condition).
pub const FAILURE_REASON_ATTRIBUTE: &str = "failure_reason";

const _: () = assert!(AMBIGUITY_TIMEOUT.as_secs() == 15 * MINUTE.as_secs());

/// The stored status of a notification delivery (seed 001's ten states, seed spelling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotificationStatus {
    /// Work is ready for dispatch or already on its channel queue.
    Queued,
    /// Reserved for later quiet-hours and digest processing; no current writer assigns it.
    Deferred,
    /// A consumer has claimed the delivery for an adapter attempt.
    Sending,
    /// The channel accepted the message and supplied its reference.
    Sent,
    /// Delivery is complete; console deliveries begin here.
    Delivered,
    /// Sending ended with permanent, exhausted or ambiguous failure.
    Failed,
    /// A recorded availability or reachability reason prevented sending.
    Skipped,
    /// The vocabulary allows provider bounce feedback, although current adapters do not report it.
    Bounced,
    /// Withdrawal ended the delivery before sending.
    Cancelled,
    /// The request deadline ended the delivery before sending.
    Expired,
}

impl Status for NotificationStatus {
    const ALL: &'static [Self] = &[
        NotificationStatus::Queued,
        NotificationStatus::Deferred,
        NotificationStatus::Sending,
        NotificationStatus::Sent,
        NotificationStatus::Delivered,
        NotificationStatus::Failed,
        NotificationStatus::Skipped,
        NotificationStatus::Bounced,
        NotificationStatus::Cancelled,
        NotificationStatus::Expired,
    ];
    fn as_str(self) -> &'static str {
        match self {
            NotificationStatus::Queued => "queued",
            NotificationStatus::Deferred => "deferred",
            NotificationStatus::Sending => "sending",
            NotificationStatus::Sent => "sent",
            NotificationStatus::Delivered => "delivered",
            NotificationStatus::Failed => "failed",
            NotificationStatus::Skipped => "skipped",
            NotificationStatus::Bounced => "bounced",
            NotificationStatus::Cancelled => "cancelled",
            NotificationStatus::Expired => "expired",
        }
    }
}

impl NotificationStatus {
    /// No channel worker moves the delivery any further: delivered, failed, skipped, bounced,
    /// cancelled, expired. (Only an operator can requeue a `failed` one, and only when exhausted.)
    pub fn is_final(self) -> bool {
        matches!(
            self,
            NotificationStatus::Delivered
                | NotificationStatus::Failed
                | NotificationStatus::Skipped
                | NotificationStatus::Bounced
                | NotificationStatus::Cancelled
                | NotificationStatus::Expired
        )
    }
}

impl fmt::Display for NotificationStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One variant per row trigger of seed 001.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotificationTrigger {
    Claim,
    AdapterAccepts,
    Confirm,
    RetryableResult,
    FailSending,
    AdapterUnavailable,
    AdapterMissing,
    Withdraw,
    Expire,
    OperatorRequeue,
}

impl Trigger for NotificationTrigger {
    const ALL: &'static [Self] = &[
        NotificationTrigger::Claim,
        NotificationTrigger::AdapterAccepts,
        NotificationTrigger::Confirm,
        NotificationTrigger::RetryableResult,
        NotificationTrigger::FailSending,
        NotificationTrigger::AdapterUnavailable,
        NotificationTrigger::AdapterMissing,
        NotificationTrigger::Withdraw,
        NotificationTrigger::Expire,
        NotificationTrigger::OperatorRequeue,
    ];
    fn seed_text(self) -> &'static str {
        match self {
            NotificationTrigger::Claim => "The channel consumer claims queued work.",
            NotificationTrigger::AdapterAccepts => "The adapter accepts the delivery.",
            NotificationTrigger::Confirm => "The adapter or provider confirms delivery.",
            NotificationTrigger::RetryableResult => {
                "A retryable adapter result or exception leaves another receive available."
            }
            NotificationTrigger::FailSending => {
                "The adapter refuses permanently, the last receive fails, or reconciliation detects fifteen minutes of ambiguity."
            }
            NotificationTrigger::AdapterUnavailable => "The adapter reports that delivery is unavailable.",
            NotificationTrigger::AdapterMissing => "Dispatch cannot find the named adapter.",
            NotificationTrigger::Withdraw => "Withdrawal or replacement reaches queued work.",
            NotificationTrigger::Expire => "Processing or reconciliation detects an expired request.",
            NotificationTrigger::OperatorRequeue => "An HQ operator requests an exhausted-delivery retry.",
        }
    }
}

use NotificationStatus as N;
use NotificationTrigger as NT;

const CHANNEL_WORKER: &str = "Channel delivery worker";
const STILL_SENDING: &str = "The delivery must remain in sending.";
const STILL_QUEUED: &str = "The delivery must still be queued.";

/// Seed 001's transition table, row for row, in the seed's order.
pub static NOTIFICATION_LIFECYCLE: Lifecycle<NotificationStatus, NotificationTrigger> = Lifecycle {
    name: "STATE-PFM-NOT-005",
    transitions: &[
        Transition {
            from: N::Queued,
            to: N::Sending,
            trigger: NT::Claim,
            guard: "Work is queued, the notice applies, the request is unexpired, an adapter exists and the conditional claim succeeds.",
            side_effects: &["Refresh the notice progress summary."],
            who: CHANNEL_WORKER,
        },
        Transition {
            from: N::Sending,
            to: N::Sent,
            trigger: NT::AdapterAccepts,
            guard: STILL_SENDING,
            side_effects: &["Save the provider reference and sent event."],
            who: CHANNEL_WORKER,
        },
        Transition {
            from: N::Sent,
            to: N::Delivered,
            trigger: NT::Confirm,
            guard: "The delivery must be sent.",
            side_effects: &["Append the delivery confirmation event."],
            who: CHANNEL_WORKER,
        },
        Transition {
            from: N::Sending,
            to: N::Queued,
            trigger: NT::RetryableResult,
            guard: "The receive count is below eight.",
            side_effects: &["Return work with exponential delay starting at thirty seconds, capped at thirty minutes with twenty-percent jitter and respecting a longer provider delay."],
            who: CHANNEL_WORKER,
        },
        Transition {
            from: N::Sending,
            to: N::Failed,
            trigger: NT::FailSending,
            guard: STILL_SENDING,
            side_effects: &[
                "Retain the provider, exhaustion or ambiguity reason.",
                "On the final receive, return the item immediately for dead-letter handling.",
                "Publish the terminal-failure metric for an HQ alert.",
            ],
            who: "Channel delivery worker; nightly reconciliation",
        },
        Transition {
            from: N::Sending,
            to: N::Skipped,
            trigger: NT::AdapterUnavailable,
            guard: STILL_SENDING,
            side_effects: &["Store the skip reason and emit a process-limited warning."],
            who: CHANNEL_WORKER,
        },
        Transition {
            from: N::Queued,
            to: N::Skipped,
            trigger: NT::AdapterMissing,
            guard: STILL_QUEUED,
            side_effects: &["Record adapter unavailability."],
            who: CHANNEL_WORKER,
        },
        Transition {
            from: N::Queued,
            to: N::Cancelled,
            trigger: NT::Withdraw,
            guard: STILL_QUEUED,
            side_effects: &["Delete the associated dispatch work."],
            who: "Notification processing worker; chat delivery consumer",
        },
        Transition {
            from: N::Queued,
            to: N::Expired,
            trigger: NT::Expire,
            guard: STILL_QUEUED,
            side_effects: &[],
            who: "Channel delivery worker; nightly reconciliation",
        },
        Transition {
            from: N::Failed,
            to: N::Queued,
            trigger: NT::OperatorRequeue,
            guard: "Only failed deliveries with attempts exhaustion qualify.",
            side_effects: &["Create fresh dispatch work for a later dispatcher run."],
            who: "Rhythm notification operator",
        },
    ],
    invalid: &[
        InvalidMove {
            from: N::Delivered,
            to: N::Queued,
            why: "Successful terminal delivery cannot return to the queue.",
        },
        InvalidMove {
            from: N::Sending,
            to: N::Sending,
            why: "A competing consumer cannot acquire an existing sending claim.",
        },
        InvalidMove {
            from: N::Failed,
            to: N::Sending,
            why: "A retry must first requeue work; ambiguous failures do not qualify.",
        },
        InvalidMove {
            from: N::Skipped,
            to: N::Queued,
            why: "Skipped deliveries retain their reason and remain terminal.",
        },
    ],
};

/// The stored failure reason of a `failed` delivery. Unit variants are stored as the plain strings
/// `"attempts_exhausted"` and `"ambiguous"`; a provider refusal as `{"provider": "<message>"}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureReason {
    /// The adapter or provider refused permanently; its message.
    Provider(String),
    /// The last queue receive failed (receive count reached [`MAX_RECEIVES`]).
    AttemptsExhausted,
    /// Reconciliation found the delivery `sending` for [`AMBIGUITY_TIMEOUT`]: it may have been sent.
    Ambiguous,
}

impl FailureReason {
    /// The reason's code: `provider`, `attempts_exhausted` or `ambiguous`.
    pub fn code(&self) -> &'static str {
        match self {
            FailureReason::Provider(_) => "provider",
            FailureReason::AttemptsExhausted => "attempts_exhausted",
            FailureReason::Ambiguous => "ambiguous",
        }
    }
}

impl fmt::Display for FailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailureReason::Provider(message) => write!(f, "provider: {message}"),
            other => f.write_str(other.code()),
        }
    }
}

/// Why an operator requeue was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequeueRefused {
    /// The delivery's status does not allow a requeue (the seed's why when it has one).
    #[error(transparent)]
    Lifecycle(#[from] TransitionError),
    /// The send may have happened; requeueing could deliver twice.
    #[error(
        "an ambiguous failure does not qualify for requeue: the provider may already have sent it"
    )]
    Ambiguous,
    /// The provider refused permanently; sending again would be refused again.
    #[error("a permanent provider failure does not qualify for requeue: {0}")]
    PermanentProviderFailure(String),
    /// A failed delivery without a recorded reason cannot be shown to be exhausted.
    #[error("a failed delivery without a recorded failure reason does not qualify for requeue")]
    NoRecordedReason,
}

/// The seed's guard for failed → queued: only failed deliveries with attempts exhaustion qualify.
pub fn requeue_allowed(
    status: NotificationStatus,
    reason: Option<&FailureReason>,
) -> Result<(), RequeueRefused> {
    NOTIFICATION_LIFECYCLE.check(status, NT::OperatorRequeue, N::Queued)?;
    match reason {
        Some(FailureReason::AttemptsExhausted) => Ok(()),
        Some(FailureReason::Ambiguous) => Err(RequeueRefused::Ambiguous),
        Some(FailureReason::Provider(message)) => {
            Err(RequeueRefused::PermanentProviderFailure(message.clone()))
        }
        None => Err(RequeueRefused::NoRecordedReason),
    }
}

/// The separate conditional update of an operator requeue: still `failed` and still
/// `attempts_exhausted`.
pub fn requeue_condition() -> StatusCondition {
    NOTIFICATION_LIFECYCLE
        .expect(N::Failed, NT::OperatorRequeue, N::Queued)
        .expect("failed → queued is a seed row")
        .and_attribute_equals(
            FAILURE_REASON_ATTRIBUTE,
            FailureReason::AttemptsExhausted.code(),
        )
}

/// What a retryable adapter result does, given the current queue receive count (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetryableOutcome {
    /// sending → queued: the message goes back with a delay (another receive is available).
    Requeue,
    /// sending → failed (`attempts_exhausted`): the last receive failed; return the message at
    /// once so the queue dead-letters it.
    Exhausted,
}

/// "The receive count is below eight" decides between requeue and exhaustion.
pub fn after_retryable_result(
    receive_count: u32,
) -> (NotificationTrigger, NotificationStatus, RetryableOutcome) {
    if receive_count < MAX_RECEIVES {
        (NT::RetryableResult, N::Queued, RetryableOutcome::Requeue)
    } else {
        (NT::FailSending, N::Failed, RetryableOutcome::Exhausted)
    }
}

/// Whether a delivery that has been `sending` since `claimed_at` is ambiguous at `now` (to be
/// settled as failed with [`FailureReason::Ambiguous`]).
pub fn is_ambiguous(status: NotificationStatus, claimed_at: Timestamp, now: Timestamp) -> bool {
    status == N::Sending && now.since(claimed_at) >= AMBIGUITY_TIMEOUT
}

/// Facts the queued → sending guard needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimFacts {
    pub status: NotificationStatus,
    /// The notice still applies (not withdrawn or superseded).
    pub notice_applies: bool,
    /// The request's deadline, if any.
    pub deadline: Option<Timestamp>,
    pub now: Timestamp,
    /// The channel names an adapter that exists.
    pub adapter_exists: bool,
}

/// Which part of the claim guard failed, and what the delivery should become instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimRefusal {
    /// Not queued (another consumer owns it, or it already ended): leave it alone.
    #[error("the delivery is {status}, not queued: leave it")]
    NotQueued { status: NotificationStatus },
    /// The notice was withdrawn or superseded: the delivery becomes cancelled.
    #[error("the notice was withdrawn or superseded: cancel the delivery")]
    NoticeWithdrawn,
    /// The request deadline passed: the delivery becomes expired.
    #[error("the request deadline {deadline} passed (now {now}): expire the delivery")]
    DeadlinePassed { deadline: Timestamp, now: Timestamp },
    /// No adapter for the channel: the delivery becomes skipped.
    #[error("no adapter exists for the channel: skip the delivery")]
    NoAdapter,
}

impl ClaimRefusal {
    /// The move the delivery should make instead of being claimed (`None`: leave it).
    pub fn becomes(&self) -> Option<(NotificationTrigger, NotificationStatus)> {
        match self {
            ClaimRefusal::NotQueued { .. } => None,
            ClaimRefusal::NoticeWithdrawn => Some((NT::Withdraw, N::Cancelled)),
            ClaimRefusal::DeadlinePassed { .. } => Some((NT::Expire, N::Expired)),
            ClaimRefusal::NoAdapter => Some((NT::AdapterMissing, N::Skipped)),
        }
    }
}

/// The seed's guard for queued → sending, in the seed's order: work is queued, the notice
/// applies, the request is unexpired (a deadline equal to `now` has passed), an adapter exists.
/// The conditional claim (`NOTIFICATION_LIFECYCLE.expect(Queued, Claim, Sending)`) is the last part
/// and belongs to storage.
pub fn claim_guard(facts: &ClaimFacts) -> Result<(), ClaimRefusal> {
    if facts.status != N::Queued {
        return Err(ClaimRefusal::NotQueued {
            status: facts.status,
        });
    }
    if !facts.notice_applies {
        return Err(ClaimRefusal::NoticeWithdrawn);
    }
    if let Some(deadline) = facts.deadline {
        if facts.now >= deadline {
            return Err(ClaimRefusal::DeadlinePassed {
                deadline,
                now: facts.now,
            });
        }
    }
    if !facts.adapter_exists {
        return Err(ClaimRefusal::NoAdapter);
    }
    Ok(())
}

/// One retained provider or lifecycle event of a delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEvent {
    /// The provider event id (or a deterministic id for our own events); the dedupe key.
    pub id: String,
    pub kind: String,
    pub at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Appends `event` unless an event with the same id is already retained, keeping the history
/// ordered by time (ties in arrival order) and at most [`MAX_HISTORY_EVENTS`] long, newest kept.
/// Returns whether the history changed (false for a duplicate, or for an event older than a full
/// history's oldest).
pub fn append_history(history: &mut Vec<HistoryEvent>, event: HistoryEvent) -> bool {
    if history.iter().any(|h| h.id == event.id) {
        return false;
    }
    let position = history.partition_point(|h| h.at <= event.at);
    if history.len() >= MAX_HISTORY_EVENTS && position == 0 {
        return false;
    }
    history.insert(position, event);
    if history.len() > MAX_HISTORY_EVENTS {
        let excess = history.len() - MAX_HISTORY_EVENTS;
        history.drain(..excess);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::lifecycle::testing::{assert_exhaustive, reachable};
    use proptest::prelude::*;

    const SEED_ROWS: &[(NotificationStatus, NotificationTrigger, NotificationStatus)] = &[
        (N::Queued, NT::Claim, N::Sending),
        (N::Sending, NT::AdapterAccepts, N::Sent),
        (N::Sent, NT::Confirm, N::Delivered),
        (N::Sending, NT::RetryableResult, N::Queued),
        (N::Sending, NT::FailSending, N::Failed),
        (N::Sending, NT::AdapterUnavailable, N::Skipped),
        (N::Queued, NT::AdapterMissing, N::Skipped),
        (N::Queued, NT::Withdraw, N::Cancelled),
        (N::Queued, NT::Expire, N::Expired),
        (N::Failed, NT::OperatorRequeue, N::Queued),
    ];
    const SEED_INVALID: &[(NotificationStatus, NotificationStatus, &str)] = &[
        (
            N::Delivered,
            N::Queued,
            "Successful terminal delivery cannot return to the queue.",
        ),
        (
            N::Sending,
            N::Sending,
            "A competing consumer cannot acquire an existing sending claim.",
        ),
        (
            N::Failed,
            N::Sending,
            "A retry must first requeue work; ambiguous failures do not qualify.",
        ),
        (
            N::Skipped,
            N::Queued,
            "Skipped deliveries retain their reason and remain terminal.",
        ),
    ];

    fn row(
        from: NotificationStatus,
        trigger: NotificationTrigger,
        to: NotificationStatus,
    ) -> &'static Transition<NotificationStatus, NotificationTrigger> {
        NOTIFICATION_LIFECYCLE
            .check(from, trigger, to)
            .expect("seed row allowed")
    }

    #[test]
    fn the_channel_consumer_claims_queued_work() {
        let r = row(N::Queued, NT::Claim, N::Sending);
        assert!(r.guard.contains("the conditional claim succeeds"));
        assert_eq!(r.side_effects, &["Refresh the notice progress summary."]);
    }
    #[test]
    fn the_adapter_accepts_the_delivery() {
        assert_eq!(
            row(N::Sending, NT::AdapterAccepts, N::Sent).guard,
            STILL_SENDING
        );
    }
    #[test]
    fn the_adapter_or_provider_confirms_delivery() {
        assert_eq!(
            row(N::Sent, NT::Confirm, N::Delivered).guard,
            "The delivery must be sent."
        );
    }
    #[test]
    fn a_retryable_result_leaves_another_receive_available() {
        assert_eq!(
            row(N::Sending, NT::RetryableResult, N::Queued).guard,
            "The receive count is below eight."
        );
    }
    #[test]
    fn the_adapter_refuses_permanently_or_the_last_receive_fails_or_ambiguity() {
        let r = row(N::Sending, NT::FailSending, N::Failed);
        assert_eq!(r.side_effects.len(), 3);
        assert_eq!(r.who, "Channel delivery worker; nightly reconciliation");
    }
    #[test]
    fn the_adapter_reports_that_delivery_is_unavailable() {
        assert_eq!(
            row(N::Sending, NT::AdapterUnavailable, N::Skipped).guard,
            STILL_SENDING
        );
    }
    #[test]
    fn dispatch_cannot_find_the_named_adapter() {
        assert_eq!(
            row(N::Queued, NT::AdapterMissing, N::Skipped).guard,
            STILL_QUEUED
        );
    }
    #[test]
    fn withdrawal_or_replacement_reaches_queued_work() {
        assert_eq!(
            row(N::Queued, NT::Withdraw, N::Cancelled).side_effects,
            &["Delete the associated dispatch work."]
        );
    }
    #[test]
    fn processing_or_reconciliation_detects_an_expired_request() {
        assert!(row(N::Queued, NT::Expire, N::Expired)
            .side_effects
            .is_empty());
    }
    #[test]
    fn an_hq_operator_requests_an_exhausted_delivery_retry() {
        assert_eq!(
            row(N::Failed, NT::OperatorRequeue, N::Queued).guard,
            "Only failed deliveries with attempts exhaustion qualify."
        );
    }

    #[test]
    fn invalid_rows_are_refused_with_the_seed_why() {
        for &(from, to, why) in SEED_INVALID {
            for &trigger in NotificationTrigger::ALL {
                assert_eq!(
                    NOTIFICATION_LIFECYCLE.check(from, trigger, to),
                    Err(TransitionError::ForbiddenBySeed {
                        lifecycle: "STATE-PFM-NOT-005",
                        from: from.as_str(),
                        to: to.as_str(),
                        why
                    })
                );
            }
        }
    }

    #[test]
    fn every_combination_outside_the_table_is_refused() {
        assert_eq!(
            assert_exhaustive(&NOTIFICATION_LIFECYCLE, SEED_ROWS, SEED_INVALID),
            10 * 10 * 10
        );
    }

    #[test]
    fn conditions_are_exactly_the_sources() {
        assert_eq!(
            NOTIFICATION_LIFECYCLE
                .condition(NT::Claim, N::Sending)
                .unwrap()
                .allowed(),
            vec!["queued"]
        );
        assert_eq!(
            NOTIFICATION_LIFECYCLE
                .condition(NT::FailSending, N::Failed)
                .unwrap()
                .allowed(),
            vec!["sending"]
        );
        let c = requeue_condition();
        assert_eq!(
            c.expression,
            "(#status IN (:status_from_0)) AND #failure_reason = :failure_reason_eq"
        );
        assert_eq!(
            c.sql_like(),
            "(status IN ('failed')) AND failure_reason = 'attempts_exhausted'"
        );
    }

    #[test]
    fn the_numbers() {
        assert_eq!(MAX_RECEIVES, 8);
        assert_eq!(AMBIGUITY_TIMEOUT, Duration::from_secs(900));
        assert_eq!(MAX_HISTORY_EVENTS, 50);
    }

    #[test]
    fn spelling_and_serde() {
        for &s in NotificationStatus::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert_eq!(
            serde_json::to_value(FailureReason::AttemptsExhausted).unwrap(),
            "attempts_exhausted"
        );
        assert_eq!(
            serde_json::to_value(FailureReason::Ambiguous).unwrap(),
            "ambiguous"
        );
        let provider = FailureReason::Provider("550 mailbox unavailable".into());
        let json = serde_json::to_value(&provider).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"provider": "550 mailbox unavailable"})
        );
        assert_eq!(
            serde_json::from_value::<FailureReason>(json).unwrap(),
            provider
        );
        assert_eq!(
            serde_json::from_str::<FailureReason>("\"ambiguous\"").unwrap(),
            FailureReason::Ambiguous
        );
        assert_eq!(provider.code(), "provider");
    }

    #[test]
    fn requeue_only_for_exhausted_failures() {
        assert_eq!(
            requeue_allowed(N::Failed, Some(&FailureReason::AttemptsExhausted)),
            Ok(())
        );
        let ambiguous = requeue_allowed(N::Failed, Some(&FailureReason::Ambiguous)).unwrap_err();
        assert_eq!(ambiguous, RequeueRefused::Ambiguous);
        assert!(ambiguous
            .to_string()
            .contains("ambiguous failure does not qualify"));
        assert!(matches!(
            requeue_allowed(N::Failed, Some(&FailureReason::Provider("no".into()))),
            Err(RequeueRefused::PermanentProviderFailure(_))
        ));
        assert_eq!(
            requeue_allowed(N::Failed, None),
            Err(RequeueRefused::NoRecordedReason)
        );
        let delivered =
            requeue_allowed(N::Delivered, Some(&FailureReason::AttemptsExhausted)).unwrap_err();
        assert_eq!(delivered.to_string(), "STATE-PFM-NOT-005: delivered → queued cannot happen: Successful terminal delivery cannot return to the queue.");
        assert!(matches!(
            requeue_allowed(N::Skipped, None),
            Err(RequeueRefused::Lifecycle(
                TransitionError::ForbiddenBySeed { .. }
            ))
        ));
        assert!(matches!(
            requeue_allowed(N::Sending, Some(&FailureReason::AttemptsExhausted)),
            Err(RequeueRefused::Lifecycle(
                TransitionError::NotInTable { .. }
            ))
        ));
    }

    #[test]
    fn retry_budget_is_the_receive_count() {
        for receive in 1..MAX_RECEIVES {
            assert_eq!(
                after_retryable_result(receive),
                (NT::RetryableResult, N::Queued, RetryableOutcome::Requeue)
            );
        }
        assert_eq!(
            after_retryable_result(8),
            (NT::FailSending, N::Failed, RetryableOutcome::Exhausted)
        );
        assert_eq!(after_retryable_result(9).2, RetryableOutcome::Exhausted);
    }

    #[test]
    fn ambiguity_after_fifteen_minutes_of_sending() {
        let t = Timestamp::from_millis(10_000_000);
        assert!(!is_ambiguous(
            N::Sending,
            t,
            t.plus(Duration::from_secs(899))
        ));
        assert!(is_ambiguous(N::Sending, t, t.plus(AMBIGUITY_TIMEOUT)));
        assert!(!is_ambiguous(N::Sent, t, t.plus(AMBIGUITY_TIMEOUT)));
    }

    #[test]
    fn claim_guard_checks_in_the_seed_order() {
        let now = Timestamp::from_millis(5_000);
        let ok = ClaimFacts {
            status: N::Queued,
            notice_applies: true,
            deadline: Some(now.plus(MINUTE)),
            now,
            adapter_exists: true,
        };
        assert_eq!(claim_guard(&ok), Ok(()));
        assert_eq!(
            claim_guard(&ClaimFacts {
                deadline: None,
                ..ok.clone()
            }),
            Ok(())
        );

        let sending = ClaimFacts {
            status: N::Sending,
            notice_applies: false,
            ..ok.clone()
        };
        let r = claim_guard(&sending).unwrap_err();
        assert_eq!(r, ClaimRefusal::NotQueued { status: N::Sending });
        assert_eq!(r.becomes(), None);

        let withdrawn = ClaimFacts {
            notice_applies: false,
            deadline: Some(now),
            adapter_exists: false,
            ..ok.clone()
        };
        let r = claim_guard(&withdrawn).unwrap_err();
        assert_eq!(r, ClaimRefusal::NoticeWithdrawn);
        assert_eq!(r.becomes(), Some((NT::Withdraw, N::Cancelled)));

        let late = ClaimFacts {
            deadline: Some(now),
            adapter_exists: false,
            ..ok.clone()
        };
        let r = claim_guard(&late).unwrap_err();
        assert_eq!(r, ClaimRefusal::DeadlinePassed { deadline: now, now });
        assert_eq!(r.becomes(), Some((NT::Expire, N::Expired)));

        let no_adapter = ClaimFacts {
            adapter_exists: false,
            ..ok.clone()
        };
        let r = claim_guard(&no_adapter).unwrap_err();
        assert_eq!(r.becomes(), Some((NT::AdapterMissing, N::Skipped)));

        // Every replacement move is itself a row from queued.
        for refusal in [
            ClaimRefusal::NoticeWithdrawn,
            ClaimRefusal::DeadlinePassed { deadline: now, now },
            ClaimRefusal::NoAdapter,
        ] {
            let (trigger, to) = refusal.becomes().unwrap();
            assert!(NOTIFICATION_LIFECYCLE.check(N::Queued, trigger, to).is_ok());
        }
    }

    fn ev(id: &str, at: i64) -> HistoryEvent {
        HistoryEvent {
            id: id.into(),
            kind: "delivered".into(),
            at: Timestamp::from_millis(at),
            detail: None,
        }
    }

    #[test]
    fn history_dedupes_by_provider_event_id() {
        let mut h = Vec::new();
        assert!(append_history(&mut h, ev("a", 1)));
        assert!(!append_history(&mut h, ev("a", 2)));
        assert!(append_history(&mut h, ev("b", 0)));
        assert_eq!(
            h.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
            vec!["b", "a"]
        );
        let json = serde_json::to_value(&h[0]).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"id": "b", "kind": "delivered", "at": 0})
        );
    }

    #[test]
    fn history_is_capped_at_fifty_keeping_the_newest() {
        let mut h = Vec::new();
        for i in 0..120 {
            assert!(append_history(&mut h, ev(&format!("e{i}"), i)));
            assert!(h.len() <= MAX_HISTORY_EVENTS);
        }
        assert_eq!(h.len(), 50);
        assert_eq!(h.first().unwrap().id, "e70");
        assert_eq!(h.last().unwrap().id, "e119");
        // An event older than everything retained in a full history is not kept.
        assert!(!append_history(&mut h, ev("old", 3)));
        // A late-arriving event newer than the oldest retained one is kept; the oldest goes.
        assert!(append_history(&mut h, ev("late", 100)));
        assert_eq!(h.len(), 50);
        assert_eq!(h.first().unwrap().id, "e71");
        assert!(h.windows(2).all(|w| w[0].at <= w[1].at));
        // Still deduplicated.
        assert!(!append_history(&mut h, ev("late", 100)));
    }

    fn any_status() -> impl Strategy<Value = NotificationStatus> {
        proptest::sample::select(NotificationStatus::ALL)
    }
    fn any_trigger() -> impl Strategy<Value = NotificationTrigger> {
        proptest::sample::select(NotificationTrigger::ALL)
    }

    proptest! {
        #[test]
        fn random_walks_move_only_along_table_rows(
            initial in any_status(),
            steps in proptest::collection::vec((any_trigger(), any_status()), 0..64),
        ) {
            let reachable_set = reachable(SEED_ROWS, initial);
            prop_assert_eq!(&NOTIFICATION_LIFECYCLE.reachable_from(initial), &reachable_set);
            let mut state = initial;
            let mut absorbed: Option<NotificationStatus> = None;
            for (trigger, to) in steps {
                let before = state;
                match NOTIFICATION_LIFECYCLE.check(state, trigger, to) {
                    Ok(_) => {
                        prop_assert!(SEED_ROWS.contains(&(state, trigger, to)));
                        state = to;
                    }
                    Err(_) => prop_assert!(!SEED_ROWS.contains(&(state, trigger, to))),
                }
                prop_assert!(reachable_set.contains(&state));
                // delivered, skipped, cancelled, expired are absorbing.
                if let Some(a) = absorbed {
                    prop_assert_eq!(state, a);
                }
                if matches!(state, N::Delivered | N::Skipped | N::Cancelled | N::Expired) {
                    absorbed = Some(state);
                }
                // sent only ever moves to delivered.
                if before == N::Sent && state != N::Sent {
                    prop_assert_eq!(state, N::Delivered);
                }
                // Nothing is ever written into deferred or bounced.
                if before != state {
                    prop_assert!(!matches!(state, N::Deferred | N::Bounced));
                }
            }
        }

        #[test]
        fn history_never_exceeds_the_cap_nor_holds_duplicates(
            events in proptest::collection::vec((0u8..80, 0i64..200), 0..300),
        ) {
            let mut h = Vec::new();
            for (id, at) in events {
                append_history(&mut h, ev(&format!("p{id}"), at));
                prop_assert!(h.len() <= MAX_HISTORY_EVENTS);
                let ids: std::collections::HashSet<_> = h.iter().map(|e| e.id.clone()).collect();
                prop_assert_eq!(ids.len(), h.len());
                prop_assert!(h.windows(2).all(|w| w[0].at <= w[1].at));
            }
        }
    }
}
