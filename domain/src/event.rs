//! The event monitor: every change is also an *event* whose status rolls up its deliveries
//! ([`EVENT_LIFECYCLE`], `docs/lifecycles.md#event-status`), plus an internal status for built-in
//! subscribers ([`INTERNAL_LIFECYCLE`], `docs/lifecycles.md#internal-status`) and 30-day retention
//! of final events.
//!
//! Delivery states are the integration delivery's
//! ([`DeliveryStatus`](super::integration_delivery::DeliveryStatus)); the Delivery log's words come
//! from the one mapping, [`transmit_status`](super::integration_delivery::transmit_status).
//!
//! **Deliberate choice.** The event monitor's description treats sent and failed events as
//! final, because it never retries a failed delivery. This project lets an operator restart a
//! failed, dead or delivered delivery (a retry, or a replay of a bounded window), so a restart reopens the
//! event: `sent | failed → partial` ([`EventTrigger::OperatorRestartReopens`]). The next roll-up
//! pass settles it again. `skipped` is never reopened: nothing was delivered, and replay does not
//! invent deliveries.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::integration_delivery::TransmitStatus;
use super::lifecycle::{row, status_enum, term_enum, Actor, Lifecycle};
use super::time::{Timestamp, DAY};

/// One roll-up pass looks at this many new or partial events, oldest first.
pub const ROLLUP_BATCH: usize = 100;
/// Terminal events (sent, failed, skipped) are kept this long, then deleted.
pub const RETENTION: Duration = Duration::from_secs(30 * 86_400);

const _: () = assert!(RETENTION.as_secs() == 30 * DAY.as_secs());

status_enum! {
    /// The event status (Event monitor column `event_status`).
    pub enum EventStatus {
        New = "new" => "written; no roll-up pass has looked at it yet",
        Partial = "partial" => "a counted (non-poll) delivery is still waiting or being attempted",
        Sent = "sent" => "every counted delivery is sent; final unless an operator restarts one",
        Failed = "failed" => "nothing waits and a counted delivery failed; final unless an operator restarts one",
        Skipped = "skipped" => "no active subscription took the change; final",
    }
}

impl EventStatus {
    /// sent, failed, skipped: the roll-up leaves them alone and retention applies.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            EventStatus::Sent | EventStatus::Failed | EventStatus::Skipped
        )
    }
}

status_enum! {
    /// The internal status (column `internal_status`): whether a built-in subscriber handled the event.
    #[derive(Default)]
    pub enum InternalStatus {
        #[default]
        New = "new" => "the default: no built-in handler has processed the event (one that failed leaves it here)",
        Done = "done" => "a built-in handler processed the event and its result is saved",
    }
}

term_enum! {
    /// The roll-up's verdicts (each is also its row's outcome), plus the operator's reopen. The
    /// text is the event's `status_reason` in the API.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum EventTrigger {
        NoSubscriberTookIt => "No active subscription took the change.",
        DeliveriesStillWaiting => "A counted delivery is still waiting or being attempted.",
        NothingWaitsSomeFailed => "No counted delivery waits any more, and one or more of them failed.",
        NothingWaitsNoneFailed => "No counted delivery waits any more, and none of them failed.",
        OperatorRestartReopens => "An operator restarted one of its deliveries.",
    }
}

term_enum! {
    /// What the shell does with an event move.
    pub enum EventEffect {
        StampRetention => "set the expiry to 30 days after this move",
        LookAgain => "leave it for the next roll-up pass",
        ClearRetention => "remove the expiry",
    }
}

term_enum! {
    /// The internal status's single move.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum InternalTrigger {
        RecordInternalResult => "built-in handler succeeded",
    }
}

term_enum! {
    /// What the shell does when the internal status moves.
    pub enum InternalEffect {
        StoreResult => "store the handler's result on the event",
    }
}

use EventEffect as EE;
use EventStatus as E;
use EventTrigger as ET;

const ROLLUP: &[Actor] = &[Actor::RollUp];
const FINAL: &[EventEffect] = &[EE::StampRetention];
const SKIPPED: &str = "no active subscription matches the change";
const WAITING: &str = "after the pass a counted delivery still waits (for example its retry delay)";
const FAILED: &str = "after the pass nothing waits and a counted delivery failed";
const SENT: &str =
    "after the pass no counted delivery is waiting or failed (poll deliveries are not counted)";
const REOPEN: &str =
    "an authorized operator restarted one of its deliveries (a retry or a window replay)";

/// The event status lifecycle: the roll-up's moves from new and partial, then this project's
/// reopen rows.
#[rustfmt::skip]
pub static EVENT_LIFECYCLE: Lifecycle<EventStatus, EventTrigger, EventEffect> = Lifecycle {
    name: "Event status",
    reference: "event monitor, event status",
    summary: "Every change is an event whose status rolls up its deliveries. A roll-up pass looks at new and partial events, oldest first, 100 at a time, and leaves poll deliveries out of the count: an event whose open deliveries are all poll ones is sent. Final events are deleted 30 days after they became final. Because an operator may restart deliveries here, a restart reopens a sent or failed event; a skipped event has no delivery to restart.",
    initial: &[E::New],
    transitions: &[
        row(E::New,     ET::NoSubscriberTookIt,     E::Skipped, SKIPPED, FINAL, ROLLUP),
        row(E::Partial, ET::NoSubscriberTookIt,     E::Skipped, SKIPPED, FINAL, ROLLUP),
        row(E::New,     ET::DeliveriesStillWaiting, E::Partial, WAITING, &[EE::LookAgain], ROLLUP),
        row(E::Partial, ET::DeliveriesStillWaiting, E::Partial, WAITING, &[EE::LookAgain], ROLLUP),
        row(E::New,     ET::NothingWaitsSomeFailed, E::Failed,  FAILED, FINAL, ROLLUP),
        row(E::Partial, ET::NothingWaitsSomeFailed, E::Failed,  FAILED, FINAL, ROLLUP),
        row(E::New,     ET::NothingWaitsNoneFailed, E::Sent,    SENT, FINAL, ROLLUP),
        row(E::Partial, ET::NothingWaitsNoneFailed, E::Sent,    SENT, FINAL, ROLLUP),
        row(E::Sent,    ET::OperatorRestartReopens, E::Partial, REOPEN, &[EE::ClearRetention], &[Actor::Operator]),
        row(E::Failed,  ET::OperatorRestartReopens, E::Partial, REOPEN, &[EE::ClearRetention], &[Actor::Operator]),
    ],
    invalid: &[],
};

/// The internal status: new → done, written when a built-in subscriber succeeds.
#[rustfmt::skip]
pub static INTERNAL_LIFECYCLE: Lifecycle<InternalStatus, InternalTrigger, InternalEffect> = Lifecycle {
    name: "Internal status",
    reference: "event monitor, internal status",
    summary: "Whether a built-in (internal) handler has processed the event. It plays no part in the event's retention. When the handler fails, the status stays new and the failure shows on the delivery itself.",
    initial: &[InternalStatus::New],
    transitions: &[
        row(InternalStatus::New, InternalTrigger::RecordInternalResult, InternalStatus::Done, "a built-in handler processed the event and its result is saved", &[InternalEffect::StoreResult], &[Actor::DeliveryWorker]),
    ],
    invalid: &[],
};

/// What the roll-up needs to know about one of the event's deliveries. A change the filter left
/// out never became a delivery (`transmit_status` = `None`) and is not passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryFacts {
    pub method_is_poll: bool,
    pub transmit: TransmitStatus,
}

/// The roll-up's verdict from the facts alone: no subscriber took the event → skipped; poll
/// deliveries are left out; some remaining delivery pending or processing → still waiting; else
/// at least one failed → failed; else sent (so an event only poll subscribers wait for is sent).
///
/// `any_active_matching_subscriber`: whether an active subscription matched the event (one whose
/// change-time filter left the change out did not take it).
pub fn roll_up_verdict(
    any_active_matching_subscriber: bool,
    deliveries: &[DeliveryFacts],
) -> EventTrigger {
    if !any_active_matching_subscriber {
        return ET::NoSubscriberTookIt;
    }
    let counted = || deliveries.iter().filter(|d| !d.method_is_poll);
    if counted().any(|d| {
        matches!(
            d.transmit,
            TransmitStatus::Pending | TransmitStatus::Processing
        )
    }) {
        ET::DeliveriesStillWaiting
    } else if counted().any(|d| d.transmit == TransmitStatus::Failed) {
        ET::NothingWaitsSomeFailed
    } else {
        ET::NothingWaitsNoneFailed
    }
}

/// The roll-up decision with its trigger (for the table row and the storage condition): the
/// verdict's row from `current` in [`EVENT_LIFECYCLE`]. `None` for final events, which have no
/// roll-up row.
pub fn roll_up_move(
    current: EventStatus,
    any_active_matching_subscriber: bool,
    deliveries: &[DeliveryFacts],
) -> Option<(EventTrigger, EventStatus)> {
    let verdict = roll_up_verdict(any_active_matching_subscriber, deliveries);
    EVENT_LIFECYCLE
        .on(current, verdict)
        .ok()
        .map(|row| row.movement())
}

/// The roll-up decision: the event's next status, or `None` for final events (see
/// [`roll_up_move`]).
pub fn roll_up(
    current: EventStatus,
    any_active_matching_subscriber: bool,
    deliveries: &[DeliveryFacts],
) -> Option<EventStatus> {
    roll_up_move(current, any_active_matching_subscriber, deliveries).map(|(_, to)| to)
}

/// When an event may be deleted: [`RETENTION`] after it became sent, failed or skipped; never for
/// new or partial events (their deliveries may still be in flight). Internal status plays no part.
///
/// DynamoDB TTL reads epoch *seconds*: store `expires_at(..).map(Timestamp::seconds)`.
pub fn expires_at(status: EventStatus, became_terminal_at: Timestamp) -> Option<Timestamp> {
    status
        .is_final()
        .then(|| became_terminal_at.plus(RETENTION))
}

/// How much longer than its event a push delivery is kept. The worker stamps a delivery's expiry
/// when the delivery ends (in the same write as its outcome), before the event itself is final;
/// the margin makes sure the delivery does not vanish before its event, without a second write
/// at roll-up. Fixed-schedule deliveries of one event finish within 8½ hours of each other.
pub const DELIVERY_RETENTION_MARGIN: Duration = Duration::from_secs(2 * 86_400);

/// The expiry of a delivery that ended at `ended_at`: its event's retention plus the margin.
pub fn delivery_expires_at(ended_at: Timestamp) -> Timestamp {
    ended_at.plus(RETENTION).plus(DELIVERY_RETENTION_MARGIN)
}

/// The read filter for expired events (TTL deletion lags by up to days): a final event whose
/// expiry has passed is treated as gone. New and partial events are never expired, whatever a
/// stale expiry says.
pub fn is_expired(status: EventStatus, expires_at: Option<Timestamp>, now: Timestamp) -> bool {
    status.is_final() && expires_at.is_some_and(|at| now >= at)
}

#[cfg(test)]
mod delivery_retention_tests {
    use super::*;

    #[test]
    fn a_delivery_outlives_its_event_by_the_margin() {
        let ended = Timestamp(1_000_000);
        assert_eq!(
            delivery_expires_at(ended),
            ended.plus(Duration::from_secs(32 * 86_400))
        );
        // An event that becomes final within the margin of its delivery ending expires first.
        let event_final = ended.plus(Duration::from_secs(86_400));
        assert!(expires_at(EventStatus::Sent, event_final).unwrap() < delivery_expires_at(ended));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::testing::{assert_exhaustive, reachable};
    use crate::lifecycle::{Status, Term, TransitionError};
    use crate::time::SECOND;
    use proptest::prelude::*;
    use TransmitStatus as X;

    const EVENT_ROWS: &[(EventStatus, EventTrigger, EventStatus)] = &[
        (E::New, ET::NoSubscriberTookIt, E::Skipped),
        (E::Partial, ET::NoSubscriberTookIt, E::Skipped),
        (E::New, ET::DeliveriesStillWaiting, E::Partial),
        (E::Partial, ET::DeliveriesStillWaiting, E::Partial),
        (E::New, ET::NothingWaitsSomeFailed, E::Failed),
        (E::Partial, ET::NothingWaitsSomeFailed, E::Failed),
        (E::New, ET::NothingWaitsNoneFailed, E::Sent),
        (E::Partial, ET::NothingWaitsNoneFailed, E::Sent),
        (E::Sent, ET::OperatorRestartReopens, E::Partial),
        (E::Failed, ET::OperatorRestartReopens, E::Partial),
    ];
    const INTERNAL_ROWS: &[(InternalStatus, InternalTrigger, InternalStatus)] = &[(
        InternalStatus::New,
        InternalTrigger::RecordInternalResult,
        InternalStatus::Done,
    )];

    fn push(transmit: TransmitStatus) -> DeliveryFacts {
        DeliveryFacts {
            method_is_poll: false,
            transmit,
        }
    }
    fn poll(transmit: TransmitStatus) -> DeliveryFacts {
        DeliveryFacts {
            method_is_poll: true,
            transmit,
        }
    }

    #[test]
    fn event_table_is_exactly_the_roll_up_rows_and_the_reopen_rows() {
        assert_eq!(
            assert_exhaustive(&EVENT_LIFECYCLE, EVENT_ROWS, &[]),
            5 * 5 * 5
        );
        assert_eq!(
            EVENT_LIFECYCLE
                .condition(ET::NothingWaitsNoneFailed, E::Sent)
                .unwrap()
                .allowed(),
            vec!["new", "partial"]
        );
        assert_eq!(
            EVENT_LIFECYCLE
                .condition(ET::OperatorRestartReopens, E::Partial)
                .unwrap()
                .allowed(),
            vec!["sent", "failed"]
        );
        assert!(EVENT_LIFECYCLE.is_absorbing(E::Skipped));
        assert!(matches!(
            EVENT_LIFECYCLE.check(E::Skipped, ET::OperatorRestartReopens, E::Partial),
            Err(TransitionError::NotInTable { .. })
        ));
    }

    #[test]
    fn internal_table_is_new_to_done() {
        assert_eq!(
            assert_exhaustive(&INTERNAL_LIFECYCLE, INTERNAL_ROWS, &[]),
            2 * 2
        );
        assert!(INTERNAL_LIFECYCLE
            .check(
                InternalStatus::Done,
                InternalTrigger::RecordInternalResult,
                InternalStatus::New
            )
            .is_err());
        assert_eq!(InternalStatus::default(), InternalStatus::New);
    }

    // The roll-up rows, one test each.
    #[test]
    fn new_or_partial_to_skipped_when_no_subscriber_took_it() {
        for current in [E::New, E::Partial] {
            assert_eq!(roll_up(current, false, &[]), Some(E::Skipped));
            assert_eq!(
                roll_up(current, false, &[push(X::Pending)]),
                Some(E::Skipped)
            );
        }
    }
    #[test]
    fn new_or_partial_to_partial_while_a_non_polling_delivery_waits() {
        for current in [E::New, E::Partial] {
            assert_eq!(
                roll_up(current, true, &[push(X::Pending), push(X::Sent)]),
                Some(E::Partial)
            );
            assert_eq!(
                roll_up(current, true, &[push(X::Processing), push(X::Failed)]),
                Some(E::Partial)
            );
        }
    }
    #[test]
    fn new_or_partial_to_failed_when_nothing_waits_and_one_failed() {
        for current in [E::New, E::Partial] {
            assert_eq!(
                roll_up(
                    current,
                    true,
                    &[push(X::Sent), push(X::Failed), poll(X::Pending)]
                ),
                Some(E::Failed)
            );
        }
    }
    #[test]
    fn new_or_partial_to_sent_when_nothing_waits_and_nothing_failed() {
        for current in [E::New, E::Partial] {
            assert_eq!(
                roll_up(current, true, &[push(X::Sent), push(X::Sent)]),
                Some(E::Sent)
            );
        }
    }
    #[test]
    fn an_event_only_polling_subscribers_wait_for_becomes_sent() {
        assert_eq!(
            roll_up(E::New, true, &[poll(X::Pending), poll(X::Processing)]),
            Some(E::Sent)
        );
        assert_eq!(roll_up(E::New, true, &[]), Some(E::Sent));
        // A failed poll delivery does not count either.
        assert_eq!(
            roll_up(E::New, true, &[poll(X::Failed), push(X::Sent)]),
            Some(E::Sent)
        );
    }
    #[test]
    fn final_events_are_not_rolled() {
        for current in [E::Sent, E::Failed, E::Skipped] {
            assert_eq!(roll_up(current, true, &[push(X::Pending)]), None);
            assert_eq!(roll_up(current, false, &[]), None);
        }
    }

    #[test]
    fn every_roll_up_is_a_table_row() {
        let facts = [
            push(X::Pending),
            push(X::Processing),
            push(X::Sent),
            push(X::Failed),
            poll(X::Pending),
            poll(X::Failed),
        ];
        for &current in EventStatus::ALL {
            for any in [false, true] {
                for mask in 0u32..(1 << facts.len()) {
                    let ds: Vec<_> = (0..facts.len())
                        .filter(|i| mask & (1 << i) != 0)
                        .map(|i| facts[i])
                        .collect();
                    if let Some((trigger, to)) = roll_up_move(current, any, &ds) {
                        assert!(
                            EVENT_LIFECYCLE.check(current, trigger, to).is_ok(),
                            "{current:?} {trigger:?} {to:?}"
                        );
                    } else {
                        assert!(current.is_final());
                    }
                }
            }
        }
    }

    #[test]
    fn the_numbers() {
        assert_eq!(ROLLUP_BATCH, 100);
        assert_eq!(RETENTION, Duration::from_secs(30 * 24 * 3600));
    }

    #[test]
    fn retention_applies_to_final_events_only() {
        let t = Timestamp::from_millis(1_700_000_000_000);
        let thirty_days = Timestamp::from_millis(1_700_000_000_000 + 30 * 86_400_000);
        for s in [E::Sent, E::Failed, E::Skipped] {
            assert_eq!(expires_at(s, t), Some(thirty_days));
            assert!(!is_expired(s, Some(thirty_days), thirty_days.minus(SECOND)));
            assert!(is_expired(s, Some(thirty_days), thirty_days));
            assert!(!is_expired(s, None, thirty_days));
        }
        for s in [E::New, E::Partial] {
            assert_eq!(expires_at(s, t), None);
            assert!(!is_expired(s, Some(t), thirty_days));
        }
    }

    #[test]
    fn statuses_serialize_with_their_stored_spelling() {
        for &s in EventStatus::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        for &s in InternalStatus::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
    }

    fn any_status() -> impl Strategy<Value = EventStatus> {
        proptest::sample::select(EventStatus::ALL)
    }
    fn any_trigger() -> impl Strategy<Value = EventTrigger> {
        proptest::sample::select(EventTrigger::ALL)
    }
    fn any_facts() -> impl Strategy<Value = DeliveryFacts> {
        (
            any::<bool>(),
            proptest::sample::select(&[X::Pending, X::Processing, X::Sent, X::Failed][..]),
        )
            .prop_map(|(method_is_poll, transmit)| DeliveryFacts {
                method_is_poll,
                transmit,
            })
    }

    proptest! {
        #[test]
        fn random_walks_move_only_along_table_rows(
            initial in any_status(),
            steps in proptest::collection::vec((any_trigger(), any_status()), 0..64),
        ) {
            let reachable_set = reachable(EVENT_ROWS, initial);
            prop_assert_eq!(&EVENT_LIFECYCLE.reachable_from(initial), &reachable_set);
            let mut state = initial;
            for (trigger, to) in steps {
                let before = state;
                match EVENT_LIFECYCLE.check(state, trigger, to) {
                    Ok(_) => { prop_assert!(EVENT_ROWS.contains(&(state, trigger, to))); state = to; }
                    Err(_) => prop_assert!(!EVENT_ROWS.contains(&(state, trigger, to))),
                }
                prop_assert!(reachable_set.contains(&state));
                // skipped is absorbing; nothing ever returns to new.
                prop_assert!(before != E::Skipped || state == E::Skipped);
                prop_assert!(before == E::New || state != E::New);
            }
        }

        #[test]
        fn roll_up_agrees_with_the_rules(
            current in any_status(),
            any_subscriber in any::<bool>(),
            deliveries in proptest::collection::vec(any_facts(), 0..12),
        ) {
            let decided = roll_up(current, any_subscriber, &deliveries);
            let counted: Vec<_> = deliveries.iter().filter(|d| !d.method_is_poll).collect();
            let expected = if current.is_final() {
                None
            } else if !any_subscriber {
                Some(E::Skipped)
            } else if counted.iter().any(|d| d.transmit == X::Pending || d.transmit == X::Processing) {
                Some(E::Partial)
            } else if counted.iter().any(|d| d.transmit == X::Failed) {
                Some(E::Failed)
            } else {
                Some(E::Sent)
            };
            prop_assert_eq!(decided, expected);
        }
    }
}
