//! Integration delivery: one record per subscription × change, and its lifecycle
//! ([`DELIVERY_LIFECYCLE`], `docs/lifecycles.md#integration-delivery`).
//!
//! # One vocabulary, mapped once
//!
//! The event monitor's Delivery log shows a delivery with four words of its own (pending,
//! processing, sent, failed). They describe the same record, so only [`DeliveryStatus`] is stored
//! and the Delivery log's word is derived by [`transmit_status`], the one place the two meet
//! (rendered as `docs/lifecycles.md#delivery-log-words`):
//!
//! * *processing* is a held worker lease on a pending or retrying delivery, not a status write;
//! * *pending* is pending or retrying without a lease, *sent* is delivered, *failed* is failed or
//!   dead; a skipped_filter change never became a delivery and has no word;
//! * a subscriber whose delivery method the worker does not know is a configuration failure
//!   (`pending → failed`, [`after_unknown_delivery_method`]), recorded as
//!   `unknown delivery method {value}`; once the subscriber is fixed, an operator may restart it.
//!
//! **Deliberate choice.** The event monitor's description treats a failed delivery as final with
//! no way to retry it, while the delivery lifecycle lets an authorized operator restart failed,
//! dead, delivered and retrying deliveries (a retry, or a replay of a bounded window). The richer behaviour
//! wins: operator restarts exist and move the delivery back to `pending`
//! (`docs/lifecycles.md#integration-delivery`).

use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::delivery_method::DeliveryMethod;
use super::lifecycle::{
    cannot, row_on, status_enum, term_enum, Actor, ClaimRule, Lifecycle, TransitionError,
};
use super::time::{Timestamp, SECOND};

/// A worker that takes a delivery holds it this long; after that another worker may take it.
/// How long a new push delivery (or one an operator restarted) waits for its first worker before
/// it counts as lost and is published again: the stream path normally publishes it within a
/// second or two.
pub const FIRST_DISPATCH_GRACE: Duration = Duration::from_secs(5 * 60);
pub const PROCESSING_LEASE: Duration = Duration::from_secs(60);
const _: () = assert!(PROCESSING_LEASE.as_secs() == 60 * SECOND.as_secs());

status_enum! {
    /// The stored status of an integration delivery.
    pub enum DeliveryStatus {
        Pending = "pending" => "waiting for a push attempt, or for the adapter's pull cursor",
        Retrying = "retrying" => "a push failed with a transient error and a further attempt is scheduled",
        Delivered = "delivered" => "the adapter acknowledged the push, or its pull cursor passed the change",
        Failed = "failed" => "the configuration no longer allows delivery; an operator may retry it",
        Dead = "dead" => "the attempts ran out, or a failure was permanent",
        SkippedFilter = "skipped_filter" => "the subscription's filter left the change out; there is no delivery work",
    }
}

impl DeliveryStatus {
    /// Delivered, failed, dead and skipped_filter: no worker moves the delivery any further (only
    /// an operator restart can, and never for skipped_filter).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            DeliveryStatus::Delivered
                | DeliveryStatus::Failed
                | DeliveryStatus::Dead
                | DeliveryStatus::SkippedFilter
        )
    }

    /// Pending or retrying: a worker may still attempt it.
    pub fn is_open(self) -> bool {
        matches!(self, DeliveryStatus::Pending | DeliveryStatus::Retrying)
    }

    /// Whether a retry may restart a delivery in this status: the table has an operator-restart
    /// row from it (`docs/lifecycles.md#integration-delivery`).
    pub fn may_be_retried(self) -> bool {
        operator_restart(self).is_ok()
    }
}

term_enum! {
    /// The triggers of the delivery lifecycle (one per distinct row name).
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum DeliveryTrigger {
        AcknowledgeInitialPush => "first push acknowledged",
        DeferUnsuccessfulPush => "first push failed, try again later",
        AcknowledgeLaterPush => "a further push acknowledged",
        EndDeliveryRetries => "stop retrying",
        AdvancePullCursor => "the pull cursor passes it",
        RestartDeadDelivery => "operator restarts a dead delivery",
        RestartFailedDelivery => "operator restarts a failed delivery",
        ScheduleFurtherAttempt => "a further push failed, try again later",
        FailPermanentlyOnFirstAttempt => "first push failed for good",
        RefuseInitialDeliveryAfterConfigurationLoss => "first push refused, configuration lost",
        RefuseLaterDeliveryAfterConfigurationLoss => "further push refused, configuration lost",
        RestartEligibleDeliveryWork => "operator retries or replays it",
    }
}

term_enum! {
    /// What happened to a delivery; with its status, it picks the row ([`Lifecycle::on`]).
    pub enum DeliveryOutcome {
        Acknowledged => "acknowledged",
        RetryableFailure => "transient failure, attempts left",
        FinalFailure => "permanent failure, or no attempts left",
        ConfigurationLoss => "configuration lost",
        CursorPassed => "pull cursor passed it",
        OperatorRestart => "operator restart",
    }
}

term_enum! {
    /// What the shell does with a delivery move.
    pub enum DeliveryEffect {
        SaveOutcome => "save the attempt's outcome and release the lease",
        ResetDeadCount => "reset the subscription's run of dead deliveries",
        WriteNextDispatch => "put the next attempt on the due index",
        CountDead => "add one to the subscription's run of dead deliveries (50 pause it)",
        RecordCursor => "record the cursor that covered it",
        ResetAttempts => "reset attempts and last error, keep the attempt history",
        Audit => "write an audit entry",
        Requeue => "queue it again (a pull delivery rewinds the cursor instead)",
        ReopenEvent => "reopen the change's event",
    }
}

use Actor as A;
use DeliveryEffect as E;
use DeliveryOutcome as O;
use DeliveryStatus as D;
use DeliveryTrigger as T;

const WORKER: &[Actor] = &[A::DeliveryWorker];
const OPERATOR: &[Actor] = &[A::Operator];
const ACKNOWLEDGED: &[DeliveryEffect] = &[E::SaveOutcome, E::ResetDeadCount];
const RETRY: &[DeliveryEffect] = &[E::SaveOutcome, E::WriteNextDispatch];
const DEAD: &[DeliveryEffect] = &[E::SaveOutcome, E::CountDead];
const RESTART: &[DeliveryEffect] = &[E::ResetAttempts, E::Audit, E::Requeue, E::ReopenEvent];
const LOST: &str = "subscription or account deleted, or event access withdrawn";

/// The delivery lifecycle, one row per line.
#[rustfmt::skip]
pub static DELIVERY_LIFECYCLE: Lifecycle<DeliveryStatus, DeliveryTrigger, DeliveryEffect, DeliveryOutcome> = Lifecycle {
    name: "Integration delivery",
    reference: "integration delivery",
    summary: "One record per subscription and change. A push is acknowledged, retried after a classified transient failure, or ends dead (attempts used up, or a failure no retry can fix) or failed (the configuration no longer allows delivery). A pull delivery is delivered when the adapter's cursor passes it. An operator may restart a dead, failed, delivered or retrying delivery (retry, or window replay of at most seven days). Which attempt number a worker runs is claimed with a lease; the waits between attempts follow the subscription's retry policy.",
    initial: &[D::Pending, D::SkippedFilter],
    transitions: &[
        row_on(D::Pending,   O::Acknowledged,      T::AcknowledgeInitialPush,                      D::Delivered, "the adapter answered with a handled success", ACKNOWLEDGED, WORKER),
        row_on(D::Pending,   O::RetryableFailure,  T::DeferUnsuccessfulPush,                       D::Retrying,  "the error's class allows a further attempt", RETRY, WORKER),
        row_on(D::Retrying,  O::Acknowledged,      T::AcknowledgeLaterPush,                        D::Delivered, "the adapter answered with a handled success", ACKNOWLEDGED, WORKER),
        row_on(D::Retrying,  O::FinalFailure,      T::EndDeliveryRetries,                          D::Dead,      "the last allowed attempt failed, the failure is permanent, or Max Retries was lowered to the attempts already made (then without a further attempt)", DEAD, WORKER),
        row_on(D::Pending,   O::CursorPassed,      T::AdvancePullCursor,                           D::Delivered, "an authorized adapter moved its cursor past the delivery", &[E::RecordCursor], &[A::PullCursorApi]),
        row_on(D::Dead,      O::OperatorRestart,   T::RestartDeadDelivery,                         D::Pending,   "an authorized operator asks for a retry", RESTART, OPERATOR),
        row_on(D::Failed,    O::OperatorRestart,   T::RestartFailedDelivery,                       D::Pending,   "an authorized operator asks for a retry", RESTART, OPERATOR),
        row_on(D::Retrying,  O::RetryableFailure,  T::ScheduleFurtherAttempt,                      D::Retrying,  "another transient failure before the last allowed attempt", RETRY, WORKER),
        row_on(D::Pending,   O::FinalFailure,      T::FailPermanentlyOnFirstAttempt,               D::Dead,      "the error's class allows no retry (or the policy allows one attempt)", DEAD, WORKER),
        row_on(D::Pending,   O::ConfigurationLoss, T::RefuseInitialDeliveryAfterConfigurationLoss, D::Failed,    LOST, &[E::SaveOutcome], WORKER),
        row_on(D::Retrying,  O::ConfigurationLoss, T::RefuseLaterDeliveryAfterConfigurationLoss,   D::Failed,    LOST, &[E::SaveOutcome], WORKER),
        row_on(D::Delivered, O::OperatorRestart,   T::RestartEligibleDeliveryWork,                 D::Pending,   "an authorized operator asks for a retry or a window replay", RESTART, OPERATOR),
        row_on(D::Retrying,  O::OperatorRestart,   T::RestartEligibleDeliveryWork,                 D::Pending,   "an authorized operator asks for a retry or a window replay", RESTART, OPERATOR),
    ],
    invalid: &[
        cannot(D::SkippedFilter, D::Pending, "a later filter change does not bring back a delivery that was filtered out"),
    ],
};

/// The claim of a push delivery's next numbered attempt: an open delivery whose attempts are
/// still fewer than its subscription's Max Retries. Its storage condition
/// ([`ClaimRule::condition`] with the subscription's [`RetryPolicy::max_attempts`]) is part of
/// the claim's conditional write, so a delivery whose attempts have reached Max Retries (say,
/// after Max Retries was lowered) is refused by storage and never attempted again; the worker
/// then ends it dead by [`DeliveryTrigger::EndDeliveryRetries`] without a further attempt. The
/// store adds the lease's own terms (push method, due, no live lease).
///
/// [`RetryPolicy::max_attempts`]: crate::retry::RetryPolicy::max_attempts
pub static ATTEMPT_CLAIM: ClaimRule<DeliveryStatus> = ClaimRule {
    name: "claim of an attempt",
    from: &[D::Pending, D::Retrying],
    guard: "a push delivery, due, without a live lease, whose attempts are fewer than its subscription's Max Retries",
    bound: Some(("attempts", "the subscription's Max Retries")),
    who: WORKER,
};

/// A decided move: the trigger (whose row names the side effects) and the new status. Produce the
/// storage condition with `DELIVERY_LIFECYCLE.expect(from, trigger, to)`.
pub type DeliveryMove = (DeliveryTrigger, DeliveryStatus);

/// The move `from` makes on `outcome`, looked up in [`DELIVERY_LIFECYCLE`].
pub fn after(
    from: DeliveryStatus,
    outcome: DeliveryOutcome,
) -> Result<DeliveryMove, TransitionError> {
    DELIVERY_LIFECYCLE
        .on(from, outcome)
        .map(|row| row.movement())
}

/// The adapter acknowledged a push.
pub fn after_success(from: DeliveryStatus) -> Result<DeliveryMove, TransitionError> {
    after(from, O::Acknowledged)
}

/// A classified transient failure, with or without attempts left (without, it is final).
pub fn after_transient_failure(
    from: DeliveryStatus,
    more_attempts_allowed: bool,
) -> Result<DeliveryMove, TransitionError> {
    let outcome = if more_attempts_allowed {
        O::RetryableFailure
    } else {
        O::FinalFailure
    };
    after(from, outcome)
}

/// A failure that permits no retry.
pub fn after_permanent_failure(from: DeliveryStatus) -> Result<DeliveryMove, TransitionError> {
    after(from, O::FinalFailure)
}

/// The subscription or account was deleted, or event access withdrawn.
pub fn after_configuration_loss(from: DeliveryStatus) -> Result<DeliveryMove, TransitionError> {
    after(from, O::ConfigurationLoss)
}

/// A delivery method the worker does not know is a configuration failure
/// ([`after_configuration_loss`]). The error to record is [`UnknownDeliveryMethod`]'s message,
/// `unknown delivery method {value}`.
pub fn after_unknown_delivery_method(
    from: DeliveryStatus,
) -> Result<DeliveryMove, TransitionError> {
    after_configuration_loss(from)
}

/// The error recorded when a subscriber's delivery method is none of webhook, internal and poll.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown delivery method {0}")]
pub struct UnknownDeliveryMethod(pub String);

/// Checks that a subscriber's delivery method is one the worker knows.
pub fn known_delivery_method(method: &DeliveryMethod) -> Result<(), UnknownDeliveryMethod> {
    match method {
        DeliveryMethod::Unknown(value) => Err(UnknownDeliveryMethod(value.clone())),
        _ => Ok(()),
    }
}

/// The authorized adapter's cursor moved past a pending delivery.
pub fn after_pull_cursor_advance(from: DeliveryStatus) -> Result<DeliveryMove, TransitionError> {
    after(from, O::CursorPassed)
}

/// An authorized operator asks to retry (or replay) a delivery. skipped_filter is refused with
/// its "cannot happen" reason; pending (already waiting) has no move.
pub fn operator_restart(from: DeliveryStatus) -> Result<DeliveryMove, TransitionError> {
    after(from, O::OperatorRestart)
}

status_enum! {
    /// The Delivery log's word for a delivery. Derived, never stored; see the module docs.
    pub enum TransmitStatus {
        Pending = "pending" => "waiting: new, between attempts, or a poll delivery not collected yet",
        Processing = "processing" => "a worker holds the lease and is attempting it",
        Sent = "sent" => "acknowledged by the webhook or the built-in handler, or covered by a cursor",
        Failed = "failed" => "attempts used up, permanent failure or configuration failure",
    }
}

/// The one mapping from the stored status to the Delivery log's word (module docs). `None` for
/// skipped_filter: the change never became a delivery.
pub fn transmit_status(status: DeliveryStatus, lease_held: bool) -> Option<TransmitStatus> {
    match status {
        D::Pending | D::Retrying if lease_held => Some(TransmitStatus::Processing),
        D::Pending | D::Retrying => Some(TransmitStatus::Pending),
        D::Delivered => Some(TransmitStatus::Sent),
        D::Failed | D::Dead => Some(TransmitStatus::Failed),
        D::SkippedFilter => None,
    }
}

/// Whether a worker's processing lease (expiring at `lease_until`) is still held at `now`.
/// A lease ending exactly at `now` has lapsed: another worker may claim the delivery.
pub fn lease_held(lease_until: Option<Timestamp>, now: Timestamp) -> bool {
    lease_until.is_some_and(|until| until > now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::testing::{assert_exhaustive, reachable};
    use crate::lifecycle::{Status, Term};
    use proptest::prelude::*;
    use std::collections::HashSet;

    #[test]
    fn a_retry_may_restart_a_delivery_only_where_the_table_has_an_operator_restart_row() {
        let restartable = [D::Delivered, D::Retrying, D::Failed, D::Dead];
        for &s in D::ALL {
            assert_eq!(s.may_be_retried(), restartable.contains(&s), "{s}");
        }
    }

    /// The lifecycle's rows, transcribed a second time, independently of the table.
    const ROWS: &[(DeliveryStatus, DeliveryTrigger, DeliveryStatus)] = &[
        (D::Pending, T::AcknowledgeInitialPush, D::Delivered),
        (D::Pending, T::DeferUnsuccessfulPush, D::Retrying),
        (D::Retrying, T::AcknowledgeLaterPush, D::Delivered),
        (D::Retrying, T::EndDeliveryRetries, D::Dead),
        (D::Pending, T::AdvancePullCursor, D::Delivered),
        (D::Dead, T::RestartDeadDelivery, D::Pending),
        (D::Failed, T::RestartFailedDelivery, D::Pending),
        (D::Retrying, T::ScheduleFurtherAttempt, D::Retrying),
        (D::Pending, T::FailPermanentlyOnFirstAttempt, D::Dead),
        (
            D::Pending,
            T::RefuseInitialDeliveryAfterConfigurationLoss,
            D::Failed,
        ),
        (
            D::Retrying,
            T::RefuseLaterDeliveryAfterConfigurationLoss,
            D::Failed,
        ),
        (D::Delivered, T::RestartEligibleDeliveryWork, D::Pending),
        (D::Retrying, T::RestartEligibleDeliveryWork, D::Pending),
    ];
    const FILTER_WHY: &str =
        "a later filter change does not bring back a delivery that was filtered out";

    // The effects of each kind of row, written out again independently of the table's consts.
    const ACKNOWLEDGED: &[DeliveryEffect] = &[E::SaveOutcome, E::ResetDeadCount];
    const RETRY: &[DeliveryEffect] = &[E::SaveOutcome, E::WriteNextDispatch];
    const DEAD: &[DeliveryEffect] = &[E::SaveOutcome, E::CountDead];
    const RESTART: &[DeliveryEffect] = &[E::ResetAttempts, E::Audit, E::Requeue, E::ReopenEvent];
    const WORKER: &[Actor] = &[A::DeliveryWorker];
    const OPERATOR: &[Actor] = &[A::Operator];

    /// The row `from` takes on `outcome` is `trigger → to` with these effects and actors.
    fn assert_row(
        (from, outcome): (DeliveryStatus, DeliveryOutcome),
        (trigger, to): (DeliveryTrigger, DeliveryStatus),
        effects: &[DeliveryEffect],
        who: &[Actor],
    ) {
        let row = DELIVERY_LIFECYCLE
            .on(from, outcome)
            .expect("a row of the table");
        assert_eq!((row.from, row.trigger, row.to), (from, trigger, to));
        assert_eq!((row.effects, row.who), (effects, who));
        assert!(!row.guard.is_empty());
    }

    #[test]
    fn the_first_acknowledged_push_delivers_and_ends_the_dead_run() {
        assert_row(
            (D::Pending, O::Acknowledged),
            (T::AcknowledgeInitialPush, D::Delivered),
            ACKNOWLEDGED,
            WORKER,
        );
    }

    #[test]
    fn a_first_transient_failure_schedules_a_retry() {
        assert_row(
            (D::Pending, O::RetryableFailure),
            (T::DeferUnsuccessfulPush, D::Retrying),
            RETRY,
            WORKER,
        );
    }

    #[test]
    fn a_later_acknowledged_push_delivers_and_ends_the_dead_run() {
        assert_row(
            (D::Retrying, O::Acknowledged),
            (T::AcknowledgeLaterPush, D::Delivered),
            ACKNOWLEDGED,
            WORKER,
        );
    }

    #[test]
    fn the_last_failed_retry_makes_the_delivery_dead_and_counts_it() {
        assert_row(
            (D::Retrying, O::FinalFailure),
            (T::EndDeliveryRetries, D::Dead),
            DEAD,
            WORKER,
        );
    }

    #[test]
    fn the_pull_cursor_delivers_a_pending_delivery_and_records_itself() {
        assert_row(
            (D::Pending, O::CursorPassed),
            (T::AdvancePullCursor, D::Delivered),
            &[E::RecordCursor],
            &[A::PullCursorApi],
        );
    }

    #[test]
    fn an_operator_restarts_a_dead_delivery() {
        assert_row(
            (D::Dead, O::OperatorRestart),
            (T::RestartDeadDelivery, D::Pending),
            RESTART,
            OPERATOR,
        );
    }

    #[test]
    fn an_operator_restarts_a_failed_delivery() {
        assert_row(
            (D::Failed, O::OperatorRestart),
            (T::RestartFailedDelivery, D::Pending),
            RESTART,
            OPERATOR,
        );
    }

    #[test]
    fn a_further_transient_failure_schedules_another_retry() {
        assert_row(
            (D::Retrying, O::RetryableFailure),
            (T::ScheduleFurtherAttempt, D::Retrying),
            RETRY,
            WORKER,
        );
    }

    #[test]
    fn a_first_permanent_failure_makes_the_delivery_dead_and_counts_it() {
        assert_row(
            (D::Pending, O::FinalFailure),
            (T::FailPermanentlyOnFirstAttempt, D::Dead),
            DEAD,
            WORKER,
        );
    }

    #[test]
    fn a_configuration_loss_fails_a_pending_delivery() {
        assert_row(
            (D::Pending, O::ConfigurationLoss),
            (T::RefuseInitialDeliveryAfterConfigurationLoss, D::Failed),
            &[E::SaveOutcome],
            WORKER,
        );
    }

    #[test]
    fn a_configuration_loss_fails_a_retrying_delivery() {
        assert_row(
            (D::Retrying, O::ConfigurationLoss),
            (T::RefuseLaterDeliveryAfterConfigurationLoss, D::Failed),
            &[E::SaveOutcome],
            WORKER,
        );
    }

    #[test]
    fn an_operator_retries_or_replays_a_delivered_delivery() {
        assert_row(
            (D::Delivered, O::OperatorRestart),
            (T::RestartEligibleDeliveryWork, D::Pending),
            RESTART,
            OPERATOR,
        );
    }

    #[test]
    fn an_operator_retries_or_replays_a_retrying_delivery() {
        assert_row(
            (D::Retrying, O::OperatorRestart),
            (T::RestartEligibleDeliveryWork, D::Pending),
            RESTART,
            OPERATOR,
        );
    }

    #[test]
    fn the_claim_of_an_attempt_needs_an_open_delivery_with_attempts_below_max_retries() {
        let c = ATTEMPT_CLAIM.condition(3);
        assert_eq!(c.allowed(), vec!["pending", "retrying"]);
        assert_eq!(
            c.expression,
            "(#status IN (:status_from_0, :status_from_1)) \
             AND (attribute_not_exists(#attempts) OR #attempts < :attempts_below)"
        );
        assert_eq!(c.numbers, vec![(":attempts_below".to_owned(), 3)]);
        assert_eq!(
            c.sql_like(),
            "(status IN ('pending', 'retrying')) \
             AND (attribute_not_exists(attempts) OR attempts < 3)"
        );
        // Exactly the open states, which are the sources of the worker's rows.
        let open: Vec<_> = D::ALL.iter().copied().filter(|s| s.is_open()).collect();
        assert_eq!(ATTEMPT_CLAIM.from, open.as_slice());
        for &from in ATTEMPT_CLAIM.from {
            assert!(after_success(from).is_ok() && after_configuration_loss(from).is_ok());
        }
        assert!(ATTEMPT_CLAIM
            .condition_text()
            .contains("attempts < the subscription's Max Retries"));
    }

    #[test]
    fn every_effect_and_outcome_is_used() {
        for &effect in DeliveryEffect::ALL {
            assert!(
                DELIVERY_LIFECYCLE
                    .transitions
                    .iter()
                    .any(|t| t.effects.contains(&effect)),
                "{effect:?}"
            );
        }
        assert!(DeliveryOutcome::ALL.iter().all(|o| !o.text().is_empty()));
    }

    #[test]
    fn skipped_filter_to_pending_is_refused_with_its_reason() {
        for &trigger in DeliveryTrigger::ALL {
            assert_eq!(
                DELIVERY_LIFECYCLE.check(D::SkippedFilter, trigger, D::Pending),
                Err(TransitionError::ForbiddenByRule {
                    lifecycle: "Integration delivery",
                    from: "skipped_filter",
                    to: "pending",
                    why: FILTER_WHY,
                })
            );
        }
    }

    #[test]
    fn every_combination_outside_the_table_is_refused() {
        let n = assert_exhaustive(
            &DELIVERY_LIFECYCLE,
            ROWS,
            &[(D::SkippedFilter, D::Pending, FILTER_WHY)],
        );
        assert_eq!(n, 6 * 6 * 12);
    }

    #[test]
    fn conditions_are_exactly_the_sources() {
        let c = DELIVERY_LIFECYCLE
            .condition(T::RestartEligibleDeliveryWork, D::Pending)
            .unwrap();
        assert_eq!(c.expression, "#status IN (:status_from_0, :status_from_1)");
        assert_eq!(c.allowed(), vec!["delivered", "retrying"]);
        assert_eq!(c.names, vec![("#status".to_owned(), "status".to_owned())]);
        assert_eq!(
            DELIVERY_LIFECYCLE
                .condition(T::AdvancePullCursor, D::Delivered)
                .unwrap()
                .allowed(),
            vec!["pending"]
        );
        assert_eq!(
            DELIVERY_LIFECYCLE
                .condition(T::ScheduleFurtherAttempt, D::Retrying)
                .unwrap()
                .allowed(),
            vec!["retrying"]
        );
        assert_eq!(
            DELIVERY_LIFECYCLE.sources(T::RestartEligibleDeliveryWork, D::Pending),
            vec![D::Delivered, D::Retrying]
        );
        assert!(DELIVERY_LIFECYCLE
            .condition(T::RestartEligibleDeliveryWork, D::Dead)
            .is_err());
        let expected = DELIVERY_LIFECYCLE
            .expect(D::Retrying, T::EndDeliveryRetries, D::Dead)
            .unwrap();
        assert_eq!(expected.allowed(), vec!["retrying"]);
    }

    #[test]
    fn status_spelling_matches_serde_and_terminality() {
        for &s in DeliveryStatus::ALL {
            assert_eq!(
                serde_json::to_value(s).unwrap(),
                serde_json::Value::String(s.as_str().to_owned())
            );
            assert_eq!(s.to_string(), s.as_str());
        }
        let terminal: Vec<_> = DeliveryStatus::ALL
            .iter()
            .copied()
            .filter(|s| s.is_terminal())
            .collect();
        assert_eq!(
            terminal,
            vec![D::Delivered, D::Failed, D::Dead, D::SkippedFilter]
        );
        assert!(DeliveryStatus::ALL
            .iter()
            .all(|s| s.is_terminal() != s.is_open()));
        assert!(DELIVERY_LIFECYCLE.is_absorbing(D::SkippedFilter));
    }

    #[test]
    fn helpers_follow_the_table() {
        assert_eq!(
            after_success(D::Pending),
            Ok((T::AcknowledgeInitialPush, D::Delivered))
        );
        assert_eq!(
            after_success(D::Retrying),
            Ok((T::AcknowledgeLaterPush, D::Delivered))
        );
        assert!(after_success(D::Delivered).is_err());
        assert!(after_success(D::Dead).is_err());

        assert_eq!(
            after_transient_failure(D::Pending, true),
            Ok((T::DeferUnsuccessfulPush, D::Retrying))
        );
        assert_eq!(
            after_transient_failure(D::Retrying, true),
            Ok((T::ScheduleFurtherAttempt, D::Retrying))
        );
        assert_eq!(
            after_transient_failure(D::Retrying, false),
            Ok((T::EndDeliveryRetries, D::Dead))
        );
        assert_eq!(
            after_transient_failure(D::Pending, false),
            Ok((T::FailPermanentlyOnFirstAttempt, D::Dead))
        );
        assert!(after_transient_failure(D::Delivered, true).is_err());
        assert!(after_transient_failure(D::Failed, false).is_err());

        assert_eq!(
            after_permanent_failure(D::Pending),
            Ok((T::FailPermanentlyOnFirstAttempt, D::Dead))
        );
        assert_eq!(
            after_permanent_failure(D::Retrying),
            Ok((T::EndDeliveryRetries, D::Dead))
        );
        assert!(after_permanent_failure(D::Dead).is_err());

        assert_eq!(
            after_configuration_loss(D::Pending),
            Ok((T::RefuseInitialDeliveryAfterConfigurationLoss, D::Failed))
        );
        assert_eq!(
            after_configuration_loss(D::Retrying),
            Ok((T::RefuseLaterDeliveryAfterConfigurationLoss, D::Failed))
        );
        assert!(after_configuration_loss(D::Delivered).is_err());

        assert_eq!(
            after_pull_cursor_advance(D::Pending),
            Ok((T::AdvancePullCursor, D::Delivered))
        );
        assert!(after_pull_cursor_advance(D::Retrying).is_err());
    }

    #[test]
    fn operator_restart_follows_the_table() {
        assert_eq!(
            operator_restart(D::Dead),
            Ok((T::RestartDeadDelivery, D::Pending))
        );
        assert_eq!(
            operator_restart(D::Failed),
            Ok((T::RestartFailedDelivery, D::Pending))
        );
        assert_eq!(
            operator_restart(D::Delivered),
            Ok((T::RestartEligibleDeliveryWork, D::Pending))
        );
        assert_eq!(
            operator_restart(D::Retrying),
            Ok((T::RestartEligibleDeliveryWork, D::Pending))
        );
        assert_eq!(
            operator_restart(D::SkippedFilter),
            Err(TransitionError::ForbiddenByRule {
                lifecycle: "Integration delivery",
                from: "skipped_filter",
                to: "pending",
                why: FILTER_WHY
            })
        );
        assert!(matches!(
            operator_restart(D::Pending),
            Err(TransitionError::NoMove { .. })
        ));
    }

    #[test]
    fn unknown_delivery_method_is_a_configuration_failure() {
        assert_eq!(
            after_unknown_delivery_method(D::Pending),
            Ok((T::RefuseInitialDeliveryAfterConfigurationLoss, D::Failed))
        );
        let err = known_delivery_method(&DeliveryMethod::Unknown("queue".into())).unwrap_err();
        assert_eq!(err.to_string(), "unknown delivery method queue");
        assert!(known_delivery_method(&DeliveryMethod::Webhook).is_ok());
        assert!(known_delivery_method(&DeliveryMethod::Internal).is_ok());
        assert!(known_delivery_method(&DeliveryMethod::Poll).is_ok());
    }

    #[test]
    fn transmit_status_mapping_table() {
        use TransmitStatus as X;
        let table = [
            (D::Pending, false, Some(X::Pending)),
            (D::Pending, true, Some(X::Processing)),
            (D::Retrying, false, Some(X::Pending)),
            (D::Retrying, true, Some(X::Processing)),
            (D::Delivered, false, Some(X::Sent)),
            (D::Delivered, true, Some(X::Sent)),
            (D::Failed, false, Some(X::Failed)),
            (D::Failed, true, Some(X::Failed)),
            (D::Dead, false, Some(X::Failed)),
            (D::Dead, true, Some(X::Failed)),
            (D::SkippedFilter, false, None),
            (D::SkippedFilter, true, None),
        ];
        for (status, lease, expected) in table {
            assert_eq!(
                transmit_status(status, lease),
                expected,
                "{status} lease={lease}"
            );
        }
        assert_eq!(serde_json::to_value(X::Processing).unwrap(), "processing");
        assert_eq!(X::Sent.to_string(), "sent");
    }

    #[test]
    fn lease_lapses_at_its_end() {
        let now = Timestamp::from_millis(1_000_000);
        assert!(!lease_held(None, now));
        assert!(lease_held(Some(now.plus(PROCESSING_LEASE)), now));
        assert!(!lease_held(Some(now), now));
        assert!(!lease_held(Some(now.minus(crate::time::SECOND)), now));
    }

    fn any_status() -> impl Strategy<Value = DeliveryStatus> {
        proptest::sample::select(DeliveryStatus::ALL)
    }
    fn any_trigger() -> impl Strategy<Value = DeliveryTrigger> {
        proptest::sample::select(DeliveryTrigger::ALL)
    }

    proptest! {
        #[test]
        fn random_walks_move_only_along_table_rows(
            initial in any_status(),
            steps in proptest::collection::vec((any_trigger(), any_status()), 0..64),
        ) {
            let reachable_set: HashSet<_> = reachable(ROWS, initial);
            prop_assert_eq!(&DELIVERY_LIFECYCLE.reachable_from(initial), &reachable_set);
            let mut state = initial;
            for (trigger, to) in steps {
                match DELIVERY_LIFECYCLE.check(state, trigger, to) {
                    Ok(row) => {
                        prop_assert!(ROWS.contains(&(state, trigger, to)));
                        prop_assert_eq!((row.from, row.trigger, row.to), (state, trigger, to));
                        state = to;
                    }
                    Err(_) => prop_assert!(!ROWS.contains(&(state, trigger, to))),
                }
                prop_assert!(reachable_set.contains(&state));
                // skipped_filter is only ever a starting point.
                prop_assert!(state != D::SkippedFilter || initial == D::SkippedFilter);
            }
        }
    }
}
