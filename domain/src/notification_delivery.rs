//! Notification delivery: one record per notice × channel × recipient, and its lifecycle
//! ([`NOTIFICATION_LIFECYCLE`], `docs/lifecycles.md#notification-delivery`).
//!
//! The retry budget is the queue's receive count ([`MAX_RECEIVES`]); the table keeps no attempt
//! count. A write conditional on the state read (`NOTIFICATION_LIFECYCLE.expect`) settles which of
//! two racing consumers sends. An operator requeue is a conditional update of its own
//! ([`requeue_condition`]). A provider event's id keeps it from entering the history twice; the
//! history holds at most [`MAX_HISTORY_EVENTS`].
//!
//! `deferred` and `bounced` are in the vocabulary but no row writes them: `deferred` is
//! reserved for quiet hours and digests, `bounced` for provider bounce feedback no adapter reports
//! yet. Console deliveries are created directly in `delivered`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

use super::lifecycle::{
    cannot, row, status_enum, term_enum, Actor, Lifecycle, StatusCondition, TransitionError,
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

status_enum! {
    /// The stored status of a notification delivery.
    pub enum NotificationStatus {
        Queued = "queued" => "dispatch work exists, or the message is on its channel queue",
        Deferred = "deferred" => "kept for quiet hours and digests; nothing writes it yet",
        Sending = "sending" => "a channel worker holds the claim for one adapter attempt",
        Sent = "sent" => "the channel took the message and returned its reference",
        Delivered = "delivered" => "complete; console deliveries are created in this state",
        Failed = "failed" => "the provider refused for good, the receives ran out, or the send is ambiguous",
        Skipped = "skipped" => "not sent, for a recorded reason (no address, no adapter)",
        Bounced = "bounced" => "kept for provider bounce feedback; no adapter reports it yet",
        Cancelled = "cancelled" => "the notice was withdrawn or replaced before sending",
        Expired = "expired" => "the notice's deadline passed before sending",
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

term_enum! {
    /// The triggers of the notification delivery lifecycle (each is also its row's outcome).
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum NotificationTrigger {
        Claim => "a channel worker claims it",
        AdapterAccepts => "the adapter accepts it",
        Confirm => "delivery confirmed by adapter or provider",
        RetryableResult => "retryable result, receives left",
        FailSending => "refused for good, last receive failed, or ambiguous",
        AdapterUnavailable => "the adapter reports it cannot be delivered",
        AdapterMissing => "no adapter for the channel",
        Withdraw => "notice withdrawn or replaced",
        Expire => "deadline passed",
        OperatorRequeue => "operator requeues an exhausted delivery",
    }
}

term_enum! {
    /// What the shell does with a notification delivery move.
    pub enum NotificationEffect {
        RefreshProgress => "update the notice's progress counts",
        SaveProviderRef => "keep the provider's reference and record a sent event",
        AppendConfirmation => "append the confirmation to the history",
        ReturnWithBackoff => "return the message after a jittered backoff (30 s doubling, at most 30 min, a longer Retry-After wins)",
        SaveFailureReason => "save the reason: provider, attempts_exhausted or ambiguous",
        DeadLetterLastReceive => "on the last receive, give the message back at once so the queue dead-letters it",
        PublishFailureMetric => "emit the failed-notification metric that alarms",
        SaveSkipReason => "save the skip reason and log a rate-limited warning",
        RecordNoAdapter => "record that the channel has no adapter",
        DeleteDispatchWork => "delete the dispatch work",
        WriteDispatchWork => "write fresh dispatch work for the next dispatcher run",
    }
}

use Actor as A;
use NotificationEffect as NE;
use NotificationStatus as N;
use NotificationTrigger as NT;

const WORKER: &[Actor] = &[A::ChannelWorker];
const WORKER_OR_SETTLE: &[Actor] = &[A::ChannelWorker, A::NightlySettle];
const STILL_SENDING: &str = "still sending";
const STILL_QUEUED: &str = "still queued";

/// The notification delivery lifecycle, one row per line.
#[rustfmt::skip]
pub static NOTIFICATION_LIFECYCLE: Lifecycle<NotificationStatus, NotificationTrigger, NotificationEffect> = Lifecycle {
    name: "Notification delivery",
    reference: "notification delivery",
    summary: "One record per notice, channel and recipient. The retry budget is the queue's receive count (8); the table keeps no attempt count. A claim conditional on the state read settles which of two racing consumers sends; an operator requeue is a conditional update of its own; a provider event enters the history (at most 50 events) once, by its id. deferred and bounced belong to the vocabulary, but no row writes them.",
    initial: &[N::Queued, N::Delivered],
    transitions: &[
        row(N::Queued,  NT::Claim,              N::Sending,   "still queued, the notice still applies, its deadline lies ahead, the channel has an adapter, and this worker's conditional claim wins", &[NE::RefreshProgress], WORKER),
        row(N::Sending, NT::AdapterAccepts,     N::Sent,      STILL_SENDING, &[NE::SaveProviderRef], WORKER),
        row(N::Sent,    NT::Confirm,            N::Delivered, "already sent", &[NE::AppendConfirmation], &[A::ChannelWorker, A::ProviderFeedback]),
        row(N::Sending, NT::RetryableResult,    N::Queued,    "fewer than 8 receives so far", &[NE::ReturnWithBackoff], WORKER),
        row(N::Sending, NT::FailSending,        N::Failed,    STILL_SENDING, &[NE::SaveFailureReason, NE::DeadLetterLastReceive, NE::PublishFailureMetric], WORKER_OR_SETTLE),
        row(N::Sending, NT::AdapterUnavailable, N::Skipped,   STILL_SENDING, &[NE::SaveSkipReason], WORKER),
        row(N::Queued,  NT::AdapterMissing,     N::Skipped,   STILL_QUEUED, &[NE::RecordNoAdapter], WORKER),
        row(N::Queued,  NT::Withdraw,           N::Cancelled, STILL_QUEUED, &[NE::DeleteDispatchWork], &[A::NoticeService, A::ChannelWorker]),
        row(N::Queued,  NT::Expire,             N::Expired,   STILL_QUEUED, &[], WORKER_OR_SETTLE),
        row(N::Failed,  NT::OperatorRequeue,    N::Queued,    "failed because its receives ran out (not refused, not ambiguous)", &[NE::WriteDispatchWork], &[A::Operator]),
    ],
    invalid: &[
        cannot(N::Delivered, N::Queued,  "a delivered message never goes back to the queue"),
        cannot(N::Sending,   N::Sending, "a second consumer cannot take a claim that is already held"),
        cannot(N::Failed,    N::Sending, "a retry goes through an operator requeue first, and an ambiguous failure never qualifies"),
        cannot(N::Skipped,   N::Queued,  "a skipped delivery keeps its reason and stays final"),
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
    /// The reason a code names (the provider's message, for `provider`, is `detail`).
    pub fn from_code(code: &str, detail: Option<&str>) -> Option<FailureReason> {
        match code {
            "provider" => Some(FailureReason::Provider(
                detail.unwrap_or_default().to_string(),
            )),
            "attempts_exhausted" => Some(FailureReason::AttemptsExhausted),
            "ambiguous" => Some(FailureReason::Ambiguous),
            _ => None,
        }
    }

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
    /// The delivery's status does not allow a requeue (with the "cannot happen" reason if any).
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

/// The guard of failed → queued: only a delivery that failed because its receives ran out.
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
        .expect("failed → queued is a row")
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

/// A retryable result on receive `receive_count`: fewer than [`MAX_RECEIVES`] receives so far
/// requeue it, the last one fails it. The move is the `sending` row of the chosen trigger.
pub fn after_retryable_result(
    receive_count: u32,
) -> (NotificationTrigger, NotificationStatus, RetryableOutcome) {
    let (trigger, outcome) = if receive_count < MAX_RECEIVES {
        (NT::RetryableResult, RetryableOutcome::Requeue)
    } else {
        (NT::FailSending, RetryableOutcome::Exhausted)
    };
    (trigger, target(N::Sending, trigger), outcome)
}

/// The target of `trigger`'s row from `from`. Only called for rows the table has (unit-tested),
/// so a missing row is a programming error.
fn target(from: NotificationStatus, trigger: NotificationTrigger) -> NotificationStatus {
    NOTIFICATION_LIFECYCLE
        .on(from, trigger)
        .map(|row| row.to)
        .unwrap_or_else(|e| unreachable!("{e}"))
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
    /// The trigger of the move the delivery makes instead of being claimed (`None`: leave it).
    pub fn trigger(&self) -> Option<NotificationTrigger> {
        match self {
            ClaimRefusal::NotQueued { .. } => None,
            ClaimRefusal::NoticeWithdrawn => Some(NT::Withdraw),
            ClaimRefusal::DeadlinePassed { .. } => Some(NT::Expire),
            ClaimRefusal::NoAdapter => Some(NT::AdapterMissing),
        }
    }

    /// The move the delivery makes instead of being claimed: the trigger's `queued` row.
    pub fn becomes(&self) -> Option<(NotificationTrigger, NotificationStatus)> {
        self.trigger()
            .map(|trigger| (trigger, target(N::Queued, trigger)))
    }
}

/// The guard of queued → sending, checked in this order: the delivery is still queued, its notice
/// still applies, its deadline lies ahead (a deadline equal to `now` has passed), the channel has
/// an adapter.
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
    use crate::lifecycle::testing::{assert_exhaustive, reachable};
    use crate::lifecycle::{Status, Term};
    use proptest::prelude::*;

    #[test]
    fn a_failure_reason_is_read_back_from_its_code() {
        for reason in [
            FailureReason::AttemptsExhausted,
            FailureReason::Ambiguous,
            FailureReason::Provider("rejected".into()),
        ] {
            assert_eq!(
                FailureReason::from_code(reason.code(), Some("rejected")),
                Some(reason)
            );
        }
        assert_eq!(FailureReason::from_code("lost", None), None);
    }

    /// The lifecycle's rows, transcribed a second time, independently of the table.
    const ROWS: &[(NotificationStatus, NotificationTrigger, NotificationStatus)] = &[
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
    const INVALID: &[(NotificationStatus, NotificationStatus, &str)] = &[
        (
            N::Delivered,
            N::Queued,
            "a delivered message never goes back to the queue",
        ),
        (
            N::Sending,
            N::Sending,
            "a second consumer cannot take a claim that is already held",
        ),
        (
            N::Failed,
            N::Sending,
            "a retry goes through an operator requeue first, and an ambiguous failure never qualifies",
        ),
        (
            N::Skipped,
            N::Queued,
            "a skipped delivery keeps its reason and stays final",
        ),
    ];

    /// The row `from` takes on `trigger` leads to `to` with these effects.
    fn assert_row(
        from: NotificationStatus,
        trigger: NotificationTrigger,
        to: NotificationStatus,
        effects: &[NotificationEffect],
    ) {
        let row = NOTIFICATION_LIFECYCLE
            .on(from, trigger)
            .expect("a row of the table");
        assert_eq!((row.to, row.effects), (to, effects));
        assert!(!row.guard.is_empty() && !row.who.is_empty());
    }

    #[test]
    fn a_channel_worker_claims_queued_work_and_refreshes_the_progress() {
        assert_row(N::Queued, NT::Claim, N::Sending, &[NE::RefreshProgress]);
    }

    #[test]
    fn an_accepting_adapter_makes_it_sent_with_the_provider_reference() {
        assert_row(
            N::Sending,
            NT::AdapterAccepts,
            N::Sent,
            &[NE::SaveProviderRef],
        );
    }

    #[test]
    fn a_confirmation_delivers_a_sent_delivery_and_joins_the_history() {
        assert_row(
            N::Sent,
            NT::Confirm,
            N::Delivered,
            &[NE::AppendConfirmation],
        );
    }

    #[test]
    fn a_retryable_result_returns_the_message_with_backoff() {
        assert_row(
            N::Sending,
            NT::RetryableResult,
            N::Queued,
            &[NE::ReturnWithBackoff],
        );
    }

    #[test]
    fn a_failed_send_keeps_its_reason_dead_letters_and_alarms() {
        assert_row(
            N::Sending,
            NT::FailSending,
            N::Failed,
            &[
                NE::SaveFailureReason,
                NE::DeadLetterLastReceive,
                NE::PublishFailureMetric,
            ],
        );
    }

    #[test]
    fn an_unavailable_delivery_is_skipped_with_its_reason() {
        assert_row(
            N::Sending,
            NT::AdapterUnavailable,
            N::Skipped,
            &[NE::SaveSkipReason],
        );
    }

    #[test]
    fn a_channel_without_adapter_skips_queued_work() {
        assert_row(
            N::Queued,
            NT::AdapterMissing,
            N::Skipped,
            &[NE::RecordNoAdapter],
        );
    }

    #[test]
    fn a_withdrawn_or_replaced_notice_cancels_queued_work() {
        assert_row(
            N::Queued,
            NT::Withdraw,
            N::Cancelled,
            &[NE::DeleteDispatchWork],
        );
    }

    #[test]
    fn a_passed_deadline_expires_queued_work_without_side_effects() {
        assert_row(N::Queued, NT::Expire, N::Expired, &[]);
    }

    #[test]
    fn an_operator_requeue_writes_fresh_dispatch_work() {
        assert_row(
            N::Failed,
            NT::OperatorRequeue,
            N::Queued,
            &[NE::WriteDispatchWork],
        );
    }

    #[test]
    fn settling_shares_the_failure_and_expiry_rows_with_the_worker() {
        for (from, trigger, to) in [
            (N::Sending, NT::FailSending, N::Failed),
            (N::Queued, NT::Expire, N::Expired),
        ] {
            let row = NOTIFICATION_LIFECYCLE.check(from, trigger, to).unwrap();
            assert_eq!(row.who, &[Actor::ChannelWorker, Actor::NightlySettle]);
        }
        assert_eq!(
            NOTIFICATION_LIFECYCLE
                .check(N::Failed, NT::OperatorRequeue, N::Queued)
                .unwrap()
                .who,
            &[Actor::Operator]
        );
    }

    #[test]
    fn cannot_happen_rows_are_refused_with_their_reason() {
        for &(from, to, why) in INVALID {
            for &trigger in NotificationTrigger::ALL {
                assert_eq!(
                    NOTIFICATION_LIFECYCLE.check(from, trigger, to),
                    Err(TransitionError::ForbiddenByRule {
                        lifecycle: "Notification delivery",
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
            assert_exhaustive(&NOTIFICATION_LIFECYCLE, ROWS, INVALID),
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
        assert_eq!(
            delivered.to_string(),
            "Notification delivery: delivered → queued cannot happen: \
             a delivered message never goes back to the queue"
        );
        assert!(matches!(
            requeue_allowed(N::Skipped, None),
            Err(RequeueRefused::Lifecycle(
                TransitionError::ForbiddenByRule { .. }
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
    fn claim_guard_checks_in_the_guard_order() {
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
            let reachable_set = reachable(ROWS, initial);
            prop_assert_eq!(&NOTIFICATION_LIFECYCLE.reachable_from(initial), &reachable_set);
            let mut state = initial;
            let mut absorbed: Option<NotificationStatus> = None;
            for (trigger, to) in steps {
                let before = state;
                match NOTIFICATION_LIFECYCLE.check(state, trigger, to) {
                    Ok(_) => {
                        prop_assert!(ROWS.contains(&(state, trigger, to)));
                        state = to;
                    }
                    Err(_) => prop_assert!(!ROWS.contains(&(state, trigger, to))),
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
