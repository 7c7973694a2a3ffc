//! Integration delivery progress: seed STATE-PFM-INT-012 (`000_…`), one record per
//! subscription × change.
//!
//! # One vocabulary, mapped once
//!
//! Seed 004 (event monitor) names a delivery's state with its own "transmit status" words. They
//! describe the same record as seed 000, so this project stores only 000's [`DeliveryStatus`] and
//! derives 004's word with [`transmit_status`] — this table is the only place the two meet:
//!
//! | seed 004 `transmit_status` | seed 000 `status`                                   |
//! |----------------------------|-----------------------------------------------------|
//! | `pending`                  | `pending` or `retrying`, no worker lease held       |
//! | `processing`               | `pending` or `retrying`, a worker holds the 60 s lease |
//! | `sent`                     | `delivered`                                         |
//! | `failed`                   | `failed` or `dead`                                  |
//! | (no delivery)              | `skipped_filter` — the change never became a delivery |
//!
//! 004's moves in 000's terms:
//!
//! * `pending → processing` is taking the lease (a claim on the numbered attempt), not a status
//!   write; the status stays `pending`/`retrying`.
//! * `processing → sent` is `pending → delivered` (Acknowledge initial push) or `retrying →
//!   delivered` (Acknowledge a later push).
//! * `processing → pending` (failure, attempts left) is `pending → retrying` (Defer unsuccessful
//!   push) or `retrying → retrying` (Schedule a further delivery attempt).
//! * `processing → failed` (attempts reached Max Retries) is `… → dead`.
//! * `pending → failed` when the subscriber's delivery method is not webhook, internal or poll
//!   (error `unknown delivery method {value}`) is a configuration failure in 000's terms:
//!   `pending → failed` by *Refuse initial delivery after configuration loss*
//!   ([`after_unknown_delivery_method`]). An operator can retry it once the subscriber is fixed.
//!
//! **Deliberate deviation from 004.** 004 says "a failed delivery is not tried again; there is no
//! button or API method to retry it". 000 lets an authorized operator restart `failed` and `dead`
//! deliveries (and `delivered`/`retrying` ones, for retry or bounded window replay). The richer
//! behaviour, 000's, wins: operator restarts exist, and they move the delivery back to `pending`.

use serde::{Deserialize, Serialize};
use std::fmt;

use super::event::DeliveryMethod;
use super::lifecycle::{InvalidMove, Lifecycle, Status, Transition, TransitionError, Trigger};
use super::time::Timestamp;

/// The stored status of an integration delivery (seed 000's states, seed spelling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// The projected change awaits push processing or a pull cursor.
    Pending,
    /// Classified transient failure has another delivery attempt due.
    Retrying,
    /// The adapter acknowledged the change or a cursor covered it.
    Delivered,
    /// Configuration or consent failure stopped this delivery and an operator can retry it.
    Failed,
    /// Retryable attempts were exhausted or a permanent attempt failure ended delivery.
    Dead,
    /// The change did not pass the subscription filter and has no queued delivery.
    SkippedFilter,
}

impl Status for DeliveryStatus {
    const ALL: &'static [Self] = &[
        DeliveryStatus::Pending,
        DeliveryStatus::Retrying,
        DeliveryStatus::Delivered,
        DeliveryStatus::Failed,
        DeliveryStatus::Dead,
        DeliveryStatus::SkippedFilter,
    ];
    fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Retrying => "retrying",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
            DeliveryStatus::Dead => "dead",
            DeliveryStatus::SkippedFilter => "skipped_filter",
        }
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
}

impl fmt::Display for DeliveryStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One variant per distinct trigger of seed 000.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryTrigger {
    AcknowledgeInitialPush,
    DeferUnsuccessfulPush,
    AcknowledgeLaterPush,
    EndDeliveryRetries,
    AdvancePullCursor,
    RestartDeadDelivery,
    RestartFailedDelivery,
    ScheduleFurtherAttempt,
    FailPermanentlyOnFirstAttempt,
    RefuseInitialDeliveryAfterConfigurationLoss,
    RefuseLaterDeliveryAfterConfigurationLoss,
    RestartEligibleDeliveryWork,
}

impl Trigger for DeliveryTrigger {
    const ALL: &'static [Self] = &[
        DeliveryTrigger::AcknowledgeInitialPush,
        DeliveryTrigger::DeferUnsuccessfulPush,
        DeliveryTrigger::AcknowledgeLaterPush,
        DeliveryTrigger::EndDeliveryRetries,
        DeliveryTrigger::AdvancePullCursor,
        DeliveryTrigger::RestartDeadDelivery,
        DeliveryTrigger::RestartFailedDelivery,
        DeliveryTrigger::ScheduleFurtherAttempt,
        DeliveryTrigger::FailPermanentlyOnFirstAttempt,
        DeliveryTrigger::RefuseInitialDeliveryAfterConfigurationLoss,
        DeliveryTrigger::RefuseLaterDeliveryAfterConfigurationLoss,
        DeliveryTrigger::RestartEligibleDeliveryWork,
    ];
    fn seed_text(self) -> &'static str {
        match self {
            DeliveryTrigger::AcknowledgeInitialPush => "Acknowledge initial push",
            DeliveryTrigger::DeferUnsuccessfulPush => "Defer unsuccessful push",
            DeliveryTrigger::AcknowledgeLaterPush => "Acknowledge a later push",
            DeliveryTrigger::EndDeliveryRetries => "End delivery retries",
            DeliveryTrigger::AdvancePullCursor => "Advance a pull cursor",
            DeliveryTrigger::RestartDeadDelivery => "Restart dead delivery",
            DeliveryTrigger::RestartFailedDelivery => "Restart failed delivery",
            DeliveryTrigger::ScheduleFurtherAttempt => "Schedule a further delivery attempt",
            DeliveryTrigger::FailPermanentlyOnFirstAttempt => {
                "Fail permanently on the first attempt"
            }
            DeliveryTrigger::RefuseInitialDeliveryAfterConfigurationLoss => {
                "Refuse initial delivery after configuration loss"
            }
            DeliveryTrigger::RefuseLaterDeliveryAfterConfigurationLoss => {
                "Refuse later delivery after configuration loss"
            }
            DeliveryTrigger::RestartEligibleDeliveryWork => "Restart eligible delivery work",
        }
    }
}

use DeliveryStatus as D;
use DeliveryTrigger as DT;

const DELIVERY_WORKER: &str = "Delivery worker";
const OPERATOR: &str = "Executions operator";
const SUCCESSFUL_RESPONSE: &str = "The adapter returns a successful handled response";
const OPERATOR_RETRY: &str = "An authorized operator requests retry";
const OPERATOR_RETRY_OR_REPLAY: &str =
    "An authorized operator requests retry or bounded window replay";
const CONFIGURATION_LOSS: &str =
    "The subscription or account is gone, or accepted event access is absent";
const SAVE_OUTCOME: &[&str] = &["Save the outcome and any permitted next dispatch."];
const RESET_AND_NUDGE: &[&str] =
    &["Reset attempts and errors, audit the request and nudge dispatch."];

/// Seed 000's transition table, row for row, in the seed's order.
pub static DELIVERY_LIFECYCLE: Lifecycle<DeliveryStatus, DeliveryTrigger> = Lifecycle {
    name: "STATE-PFM-INT-012",
    transitions: &[
        Transition {
            from: D::Pending,
            to: D::Delivered,
            trigger: DT::AcknowledgeInitialPush,
            guard: SUCCESSFUL_RESPONSE,
            side_effects: &["Save the acknowledgement."],
            who: DELIVERY_WORKER,
        },
        Transition {
            from: D::Pending,
            to: D::Retrying,
            trigger: DT::DeferUnsuccessfulPush,
            guard: "The classified error allows another attempt",
            side_effects: &["Write next delivery dispatch work."],
            who: DELIVERY_WORKER,
        },
        Transition {
            from: D::Retrying,
            to: D::Delivered,
            trigger: DT::AcknowledgeLaterPush,
            guard: SUCCESSFUL_RESPONSE,
            side_effects: &["Reset the subscription’s consecutive dead count."],
            who: DELIVERY_WORKER,
        },
        Transition {
            from: D::Retrying,
            to: D::Dead,
            trigger: DT::EndDeliveryRetries,
            guard: "The sixth attempt fails or failure is permanently non-retryable",
            side_effects: &["Record a dead outcome for the subscription threshold."],
            who: DELIVERY_WORKER,
        },
        Transition {
            from: D::Pending,
            to: D::Delivered,
            trigger: DT::AdvancePullCursor,
            guard: "The authorized adapter advances beyond pending deliveries",
            side_effects: &["Mark covered pending records delivered."],
            who: "Adapter callback",
        },
        Transition {
            from: D::Dead,
            to: D::Pending,
            trigger: DT::RestartDeadDelivery,
            guard: OPERATOR_RETRY,
            side_effects: &["Reset attempt progression and queue work with history."],
            who: OPERATOR,
        },
        Transition {
            from: D::Failed,
            to: D::Pending,
            trigger: DT::RestartFailedDelivery,
            guard: OPERATOR_RETRY,
            side_effects: &["Reset attempt progression and queue work."],
            who: OPERATOR,
        },
        Transition {
            from: D::Retrying,
            to: D::Retrying,
            trigger: DT::ScheduleFurtherAttempt,
            guard: "Another retryable failure occurs before the attempt ceiling",
            side_effects: SAVE_OUTCOME,
            who: DELIVERY_WORKER,
        },
        Transition {
            from: D::Pending,
            to: D::Dead,
            trigger: DT::FailPermanentlyOnFirstAttempt,
            guard: "The classified failure permits no retry",
            side_effects: SAVE_OUTCOME,
            who: DELIVERY_WORKER,
        },
        Transition {
            from: D::Pending,
            to: D::Failed,
            trigger: DT::RefuseInitialDeliveryAfterConfigurationLoss,
            guard: CONFIGURATION_LOSS,
            side_effects: SAVE_OUTCOME,
            who: DELIVERY_WORKER,
        },
        Transition {
            from: D::Retrying,
            to: D::Failed,
            trigger: DT::RefuseLaterDeliveryAfterConfigurationLoss,
            guard: CONFIGURATION_LOSS,
            side_effects: SAVE_OUTCOME,
            who: DELIVERY_WORKER,
        },
        Transition {
            from: D::Delivered,
            to: D::Pending,
            trigger: DT::RestartEligibleDeliveryWork,
            guard: OPERATOR_RETRY_OR_REPLAY,
            side_effects: RESET_AND_NUDGE,
            who: OPERATOR,
        },
        Transition {
            from: D::Retrying,
            to: D::Pending,
            trigger: DT::RestartEligibleDeliveryWork,
            guard: OPERATOR_RETRY_OR_REPLAY,
            side_effects: RESET_AND_NUDGE,
            who: OPERATOR,
        },
    ],
    invalid: &[InvalidMove {
        from: D::SkippedFilter,
        to: D::Pending,
        why:
            "Changing a filter does not reconstruct a delivery previously recorded as filtered out.",
    }],
};

/// A decided move: the trigger (whose row names the side effects) and the new status. Produce the
/// storage condition with `DELIVERY_LIFECYCLE.expect(from, trigger, to)`.
pub type DeliveryMove = (DeliveryTrigger, DeliveryStatus);

fn decide(
    from: DeliveryStatus,
    trigger: DeliveryTrigger,
    to: DeliveryStatus,
) -> Result<DeliveryMove, TransitionError> {
    DELIVERY_LIFECYCLE
        .check(from, trigger, to)
        .map(|row| (row.trigger, row.to))
}

/// The adapter acknowledged a push: pending → delivered (initial), retrying → delivered (later).
pub fn after_success(from: DeliveryStatus) -> Result<DeliveryMove, TransitionError> {
    let trigger = match from {
        D::Pending => DT::AcknowledgeInitialPush,
        _ => DT::AcknowledgeLaterPush,
    };
    decide(from, trigger, D::Delivered)
}

/// A classified transient failure. With attempts left: pending → retrying (Defer unsuccessful
/// push) or retrying → retrying (Schedule a further attempt). Without: retrying → dead (End
/// delivery retries) or pending → dead (Fail permanently on the first attempt — "the classified
/// failure permits no retry", which covers a one-attempt policy).
pub fn after_transient_failure(
    from: DeliveryStatus,
    more_attempts_allowed: bool,
) -> Result<DeliveryMove, TransitionError> {
    match (from, more_attempts_allowed) {
        (D::Pending, true) => decide(from, DT::DeferUnsuccessfulPush, D::Retrying),
        (_, true) => decide(from, DT::ScheduleFurtherAttempt, D::Retrying),
        (_, false) => after_permanent_failure(from),
    }
}

/// A failure that permits no retry: pending → dead (Fail permanently on the first attempt),
/// retrying → dead (End delivery retries).
pub fn after_permanent_failure(from: DeliveryStatus) -> Result<DeliveryMove, TransitionError> {
    let trigger = match from {
        D::Pending => DT::FailPermanentlyOnFirstAttempt,
        _ => DT::EndDeliveryRetries,
    };
    decide(from, trigger, D::Dead)
}

/// The subscription or account is gone, or accepted event access is absent: pending → failed
/// (initial) or retrying → failed (later).
pub fn after_configuration_loss(from: DeliveryStatus) -> Result<DeliveryMove, TransitionError> {
    let trigger = match from {
        D::Pending => DT::RefuseInitialDeliveryAfterConfigurationLoss,
        _ => DT::RefuseLaterDeliveryAfterConfigurationLoss,
    };
    decide(from, trigger, D::Failed)
}

/// 004's `pending → failed` for a delivery method the worker does not know, in 000's terms: a
/// configuration failure ([`after_configuration_loss`]). The error to record is
/// [`UnknownDeliveryMethod`]'s message, `unknown delivery method {value}`.
pub fn after_unknown_delivery_method(
    from: DeliveryStatus,
) -> Result<DeliveryMove, TransitionError> {
    after_configuration_loss(from)
}

/// The error recorded when a subscriber's delivery method is not webhook, internal or poll
/// (seed 004's wording).
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

/// The authorized adapter's cursor moved beyond a pending delivery: pending → delivered.
pub fn after_pull_cursor_advance(from: DeliveryStatus) -> Result<DeliveryMove, TransitionError> {
    decide(from, DT::AdvancePullCursor, D::Delivered)
}

/// An authorized operator asks to retry (or replay) a delivery: dead → pending, failed → pending,
/// delivered | retrying → pending. skipped_filter is refused with the seed's why; pending (already
/// waiting) is refused as not in the table.
pub fn operator_restart(from: DeliveryStatus) -> Result<DeliveryMove, TransitionError> {
    let trigger = match from {
        D::Dead => DT::RestartDeadDelivery,
        D::Failed => DT::RestartFailedDelivery,
        _ => DT::RestartEligibleDeliveryWork,
    };
    decide(from, trigger, D::Pending)
}

/// Seed 004's delivery "transmit status" words (the Delivery log's column). Derived, never stored;
/// see the mapping table at the top of this module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransmitStatus {
    /// Created, or waiting for the next try after a failure, or a polling delivery nobody collected.
    Pending,
    /// A worker has taken the delivery and holds the 60-second lease.
    Processing,
    /// The webhook answered 2xx, or the in-house handler succeeded (or a cursor covered it).
    Sent,
    /// Attempts exhausted, permanent failure or configuration failure.
    Failed,
}

impl TransmitStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TransmitStatus::Pending => "pending",
            TransmitStatus::Processing => "processing",
            TransmitStatus::Sent => "sent",
            TransmitStatus::Failed => "failed",
        }
    }
}

impl fmt::Display for TransmitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The one mapping from seed 000's stored status to seed 004's transmit status (module docs).
/// `None` for skipped_filter: the change never became a delivery in 004's sense.
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
/// A lease ending exactly at `now` has lapsed and the delivery can be taken again.
pub fn lease_held(lease_until: Option<Timestamp>, now: Timestamp) -> bool {
    lease_until.is_some_and(|until| until > now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::lifecycle::testing::{assert_exhaustive, reachable};
    use proptest::prelude::*;
    use std::collections::HashSet;

    /// Seed 000's rows, transcribed a second time, independently of the table.
    const SEED_ROWS: &[(DeliveryStatus, DeliveryTrigger, DeliveryStatus)] = &[
        (D::Pending, DT::AcknowledgeInitialPush, D::Delivered),
        (D::Pending, DT::DeferUnsuccessfulPush, D::Retrying),
        (D::Retrying, DT::AcknowledgeLaterPush, D::Delivered),
        (D::Retrying, DT::EndDeliveryRetries, D::Dead),
        (D::Pending, DT::AdvancePullCursor, D::Delivered),
        (D::Dead, DT::RestartDeadDelivery, D::Pending),
        (D::Failed, DT::RestartFailedDelivery, D::Pending),
        (D::Retrying, DT::ScheduleFurtherAttempt, D::Retrying),
        (D::Pending, DT::FailPermanentlyOnFirstAttempt, D::Dead),
        (
            D::Pending,
            DT::RefuseInitialDeliveryAfterConfigurationLoss,
            D::Failed,
        ),
        (
            D::Retrying,
            DT::RefuseLaterDeliveryAfterConfigurationLoss,
            D::Failed,
        ),
        (D::Delivered, DT::RestartEligibleDeliveryWork, D::Pending),
        (D::Retrying, DT::RestartEligibleDeliveryWork, D::Pending),
    ];
    const FILTER_WHY: &str =
        "Changing a filter does not reconstruct a delivery previously recorded as filtered out.";

    fn assert_row(
        from: DeliveryStatus,
        trigger: DeliveryTrigger,
        to: DeliveryStatus,
        guard: &str,
        who: &str,
    ) {
        let row = DELIVERY_LIFECYCLE
            .check(from, trigger, to)
            .expect("seed row allowed");
        assert_eq!(row.guard, guard);
        assert_eq!(row.who, who);
        assert!(!row.side_effects.is_empty());
    }

    #[test]
    fn acknowledge_initial_push() {
        assert_row(
            D::Pending,
            DT::AcknowledgeInitialPush,
            D::Delivered,
            SUCCESSFUL_RESPONSE,
            "Delivery worker",
        );
        assert_eq!(
            DELIVERY_LIFECYCLE
                .check(D::Pending, DT::AcknowledgeInitialPush, D::Delivered)
                .unwrap()
                .side_effects,
            &["Save the acknowledgement."]
        );
    }
    #[test]
    fn defer_unsuccessful_push() {
        assert_row(
            D::Pending,
            DT::DeferUnsuccessfulPush,
            D::Retrying,
            "The classified error allows another attempt",
            "Delivery worker",
        );
    }
    #[test]
    fn acknowledge_a_later_push() {
        assert_row(
            D::Retrying,
            DT::AcknowledgeLaterPush,
            D::Delivered,
            SUCCESSFUL_RESPONSE,
            "Delivery worker",
        );
    }
    #[test]
    fn end_delivery_retries() {
        assert_row(
            D::Retrying,
            DT::EndDeliveryRetries,
            D::Dead,
            "The sixth attempt fails or failure is permanently non-retryable",
            "Delivery worker",
        );
    }
    #[test]
    fn advance_a_pull_cursor() {
        assert_row(
            D::Pending,
            DT::AdvancePullCursor,
            D::Delivered,
            "The authorized adapter advances beyond pending deliveries",
            "Adapter callback",
        );
    }
    #[test]
    fn restart_dead_delivery() {
        assert_row(
            D::Dead,
            DT::RestartDeadDelivery,
            D::Pending,
            OPERATOR_RETRY,
            "Executions operator",
        );
    }
    #[test]
    fn restart_failed_delivery() {
        assert_row(
            D::Failed,
            DT::RestartFailedDelivery,
            D::Pending,
            OPERATOR_RETRY,
            "Executions operator",
        );
    }
    #[test]
    fn schedule_a_further_delivery_attempt() {
        assert_row(
            D::Retrying,
            DT::ScheduleFurtherAttempt,
            D::Retrying,
            "Another retryable failure occurs before the attempt ceiling",
            "Delivery worker",
        );
    }
    #[test]
    fn fail_permanently_on_the_first_attempt() {
        assert_row(
            D::Pending,
            DT::FailPermanentlyOnFirstAttempt,
            D::Dead,
            "The classified failure permits no retry",
            "Delivery worker",
        );
    }
    #[test]
    fn refuse_initial_delivery_after_configuration_loss() {
        assert_row(
            D::Pending,
            DT::RefuseInitialDeliveryAfterConfigurationLoss,
            D::Failed,
            CONFIGURATION_LOSS,
            "Delivery worker",
        );
    }
    #[test]
    fn refuse_later_delivery_after_configuration_loss() {
        assert_row(
            D::Retrying,
            DT::RefuseLaterDeliveryAfterConfigurationLoss,
            D::Failed,
            CONFIGURATION_LOSS,
            "Delivery worker",
        );
    }
    #[test]
    fn restart_eligible_delivery_work_from_delivered() {
        assert_row(
            D::Delivered,
            DT::RestartEligibleDeliveryWork,
            D::Pending,
            OPERATOR_RETRY_OR_REPLAY,
            "Executions operator",
        );
    }
    #[test]
    fn restart_eligible_delivery_work_from_retrying() {
        assert_row(
            D::Retrying,
            DT::RestartEligibleDeliveryWork,
            D::Pending,
            OPERATOR_RETRY_OR_REPLAY,
            "Executions operator",
        );
    }

    #[test]
    fn invalid_skipped_filter_to_pending_is_refused_with_the_seed_why() {
        for &trigger in DeliveryTrigger::ALL {
            assert_eq!(
                DELIVERY_LIFECYCLE.check(D::SkippedFilter, trigger, D::Pending),
                Err(TransitionError::ForbiddenBySeed {
                    lifecycle: "STATE-PFM-INT-012",
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
            SEED_ROWS,
            &[(D::SkippedFilter, D::Pending, FILTER_WHY)],
        );
        assert_eq!(n, 6 * 6 * 12);
    }

    #[test]
    fn conditions_are_exactly_the_sources() {
        let c = DELIVERY_LIFECYCLE
            .condition(DT::RestartEligibleDeliveryWork, D::Pending)
            .unwrap();
        assert_eq!(c.expression, "#status IN (:status_from_0, :status_from_1)");
        assert_eq!(c.allowed(), vec!["delivered", "retrying"]);
        assert_eq!(c.names, vec![("#status".to_owned(), "status".to_owned())]);
        assert_eq!(
            DELIVERY_LIFECYCLE
                .condition(DT::AdvancePullCursor, D::Delivered)
                .unwrap()
                .allowed(),
            vec!["pending"]
        );
        assert_eq!(
            DELIVERY_LIFECYCLE
                .condition(DT::ScheduleFurtherAttempt, D::Retrying)
                .unwrap()
                .allowed(),
            vec!["retrying"]
        );
        assert_eq!(
            DELIVERY_LIFECYCLE.sources(DT::RestartEligibleDeliveryWork, D::Pending),
            vec![D::Delivered, D::Retrying]
        );
        assert!(DELIVERY_LIFECYCLE
            .condition(DT::RestartEligibleDeliveryWork, D::Dead)
            .is_err());
        let expected = DELIVERY_LIFECYCLE
            .expect(D::Retrying, DT::EndDeliveryRetries, D::Dead)
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
            Ok((DT::AcknowledgeInitialPush, D::Delivered))
        );
        assert_eq!(
            after_success(D::Retrying),
            Ok((DT::AcknowledgeLaterPush, D::Delivered))
        );
        assert!(after_success(D::Delivered).is_err());
        assert!(after_success(D::Dead).is_err());

        assert_eq!(
            after_transient_failure(D::Pending, true),
            Ok((DT::DeferUnsuccessfulPush, D::Retrying))
        );
        assert_eq!(
            after_transient_failure(D::Retrying, true),
            Ok((DT::ScheduleFurtherAttempt, D::Retrying))
        );
        assert_eq!(
            after_transient_failure(D::Retrying, false),
            Ok((DT::EndDeliveryRetries, D::Dead))
        );
        assert_eq!(
            after_transient_failure(D::Pending, false),
            Ok((DT::FailPermanentlyOnFirstAttempt, D::Dead))
        );
        assert!(after_transient_failure(D::Delivered, true).is_err());
        assert!(after_transient_failure(D::Failed, false).is_err());

        assert_eq!(
            after_permanent_failure(D::Pending),
            Ok((DT::FailPermanentlyOnFirstAttempt, D::Dead))
        );
        assert_eq!(
            after_permanent_failure(D::Retrying),
            Ok((DT::EndDeliveryRetries, D::Dead))
        );
        assert!(after_permanent_failure(D::Dead).is_err());

        assert_eq!(
            after_configuration_loss(D::Pending),
            Ok((DT::RefuseInitialDeliveryAfterConfigurationLoss, D::Failed))
        );
        assert_eq!(
            after_configuration_loss(D::Retrying),
            Ok((DT::RefuseLaterDeliveryAfterConfigurationLoss, D::Failed))
        );
        assert!(after_configuration_loss(D::Delivered).is_err());

        assert_eq!(
            after_pull_cursor_advance(D::Pending),
            Ok((DT::AdvancePullCursor, D::Delivered))
        );
        assert!(after_pull_cursor_advance(D::Retrying).is_err());
    }

    #[test]
    fn operator_restart_follows_the_table() {
        assert_eq!(
            operator_restart(D::Dead),
            Ok((DT::RestartDeadDelivery, D::Pending))
        );
        assert_eq!(
            operator_restart(D::Failed),
            Ok((DT::RestartFailedDelivery, D::Pending))
        );
        assert_eq!(
            operator_restart(D::Delivered),
            Ok((DT::RestartEligibleDeliveryWork, D::Pending))
        );
        assert_eq!(
            operator_restart(D::Retrying),
            Ok((DT::RestartEligibleDeliveryWork, D::Pending))
        );
        assert_eq!(
            operator_restart(D::SkippedFilter),
            Err(TransitionError::ForbiddenBySeed {
                lifecycle: "STATE-PFM-INT-012",
                from: "skipped_filter",
                to: "pending",
                why: FILTER_WHY
            })
        );
        assert!(matches!(
            operator_restart(D::Pending),
            Err(TransitionError::NotInTable { .. })
        ));
    }

    #[test]
    fn unknown_delivery_method_is_a_configuration_failure() {
        assert_eq!(
            after_unknown_delivery_method(D::Pending),
            Ok((DT::RefuseInitialDeliveryAfterConfigurationLoss, D::Failed))
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
        assert!(lease_held(
            Some(now.plus(crate::domain::event::PROCESSING_LEASE)),
            now
        ));
        assert!(!lease_held(Some(now), now));
        assert!(!lease_held(
            Some(now.minus(crate::domain::time::SECOND)),
            now
        ));
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
            let reachable_set: HashSet<_> = reachable(SEED_ROWS, initial);
            prop_assert_eq!(&DELIVERY_LIFECYCLE.reachable_from(initial), &reachable_set);
            let mut state = initial;
            for (trigger, to) in steps {
                match DELIVERY_LIFECYCLE.check(state, trigger, to) {
                    Ok(row) => {
                        prop_assert!(SEED_ROWS.contains(&(state, trigger, to)));
                        prop_assert_eq!((row.from, row.trigger, row.to), (state, trigger, to));
                        state = to;
                    }
                    Err(_) => prop_assert!(!SEED_ROWS.contains(&(state, trigger, to))),
                }
                prop_assert!(reachable_set.contains(&state));
                // skipped_filter is only ever a starting point.
                prop_assert!(state != D::SkippedFilter || initial == D::SkippedFilter);
            }
        }
    }
}
