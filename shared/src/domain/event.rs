//! The event monitor (seed `004_…`): every change is also an *event* whose status rolls up its
//! deliveries, plus an internal status for built-in subscribers and 30-day retention of terminal
//! events.
//!
//! Delivery states are seed 000's ([`DeliveryStatus`](super::integration_delivery::DeliveryStatus));
//! 004's delivery words come from the one mapping,
//! [`transmit_status`](super::integration_delivery::transmit_status).
//!
//! **Deviation from 004.** 004 says a failed delivery is never tried again, so `sent` and `failed`
//! events are final there. Seed 000 lets an operator restart a failed, dead or delivered delivery
//! (retry or bounded window replay); this project follows 000, so an operator restart reopens the
//! event: `sent | failed → partial` ([`EventTrigger::OperatorRestartReopens`]). The next roll-up
//! pass settles it again. `skipped` is never reopened: nothing was delivered, and replay does not
//! invent deliveries.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

use super::integration_delivery::TransmitStatus;
use super::lifecycle::{Lifecycle, Status, Transition, Trigger};
use super::time::{Timestamp, DAY, SECOND};

/// One roll-up pass looks at this many new or partial events, oldest first.
pub const ROLLUP_BATCH: usize = 100;
/// Terminal events (sent, failed, skipped) are kept this long, then deleted.
pub const RETENTION: Duration = Duration::from_secs(30 * 86_400);
/// A worker that takes a delivery holds it this long; after that another worker may take it.
pub const PROCESSING_LEASE: Duration = Duration::from_secs(60);

const _: () = assert!(RETENTION.as_secs() == 30 * DAY.as_secs());
const _: () = assert!(PROCESSING_LEASE.as_secs() == 60 * SECOND.as_secs());

/// The event status (Event monitor column `event_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventStatus {
    /// The event was written; the roll-up has not handled it yet.
    New,
    /// At least one non-polling delivery is still pending or processing.
    Partial,
    /// Every delivery the roll-up counts is sent. Final (until an operator restart, see module docs).
    Sent,
    /// Nothing is pending and at least one delivery failed. Final (idem).
    Failed,
    /// No subscriber took the event. Final.
    Skipped,
}

impl Status for EventStatus {
    const ALL: &'static [Self] = &[
        EventStatus::New,
        EventStatus::Partial,
        EventStatus::Sent,
        EventStatus::Failed,
        EventStatus::Skipped,
    ];
    fn as_str(self) -> &'static str {
        match self {
            EventStatus::New => "new",
            EventStatus::Partial => "partial",
            EventStatus::Sent => "sent",
            EventStatus::Failed => "failed",
            EventStatus::Skipped => "skipped",
        }
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

impl fmt::Display for EventStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The internal status (column `internal_status`): whether a built-in subscriber handled the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum InternalStatus {
    /// The default. Nothing in-house has handled the event (also after a failed in-house handling).
    #[default]
    New,
    /// A built-in internal subscriber handled the event successfully and stored its result.
    Done,
}

impl Status for InternalStatus {
    const ALL: &'static [Self] = &[InternalStatus::New, InternalStatus::Done];
    fn as_str(self) -> &'static str {
        match self {
            InternalStatus::New => "new",
            InternalStatus::Done => "done",
        }
    }
}

impl fmt::Display for InternalStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The event moves of 004's table (one trigger per "When"), plus this project's operator reopen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventTrigger {
    /// No active subscriber exists, or no active subscriber matches.
    NoSubscriberTookIt,
    /// After this pass some non-polling delivery is still waiting.
    DeliveriesStillWaiting,
    /// After this pass nothing waits and at least one delivery is failed.
    NothingWaitsSomeFailed,
    /// After this pass nothing waits and nothing failed.
    NothingWaitsNoneFailed,
    /// Deviation from 004 (module docs): an operator restart of one of its deliveries.
    OperatorRestartReopens,
}

impl Trigger for EventTrigger {
    const ALL: &'static [Self] = &[
        EventTrigger::NoSubscriberTookIt,
        EventTrigger::DeliveriesStillWaiting,
        EventTrigger::NothingWaitsSomeFailed,
        EventTrigger::NothingWaitsNoneFailed,
        EventTrigger::OperatorRestartReopens,
    ];
    fn seed_text(self) -> &'static str {
        match self {
            EventTrigger::NoSubscriberTookIt => {
                "No active subscriber exists, or no active subscriber matches."
            }
            EventTrigger::DeliveriesStillWaiting => {
                "After this pass some non-polling delivery is still waiting."
            }
            EventTrigger::NothingWaitsSomeFailed => {
                "After this pass nothing waits and at least one delivery is failed."
            }
            EventTrigger::NothingWaitsNoneFailed => {
                "After this pass nothing waits and nothing failed."
            }
            EventTrigger::OperatorRestartReopens => {
                "An operator restarts one of the event's deliveries (deviation from 004)."
            }
        }
    }
}

/// The internal status's single move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InternalTrigger {
    /// A built-in internal subscriber handled the event successfully and stored its result.
    RecordInternalResult,
}

impl Trigger for InternalTrigger {
    const ALL: &'static [Self] = &[InternalTrigger::RecordInternalResult];
    fn seed_text(self) -> &'static str {
        "A built-in internal subscriber handled the event successfully and stored its result."
    }
}

use EventStatus as E;
use EventTrigger as ET;

const ROLLUP: &str = "Event roll-up pass";
const PASS_GUARD_SKIPPED: &str = "No active subscriber exists, or no active subscriber matches.";
const PASS_GUARD_PARTIAL: &str =
    "After this pass some non-polling delivery is still waiting (for example a retry delay).";
const PASS_GUARD_FAILED: &str =
    "After this pass nothing waits and at least one delivery is failed.";
const PASS_GUARD_SENT: &str =
    "After this pass nothing waits and nothing failed (polling deliveries do not count).";
const FINAL_EFFECTS: &[&str] = &["Set the retention expiry to 30 days after this move."];
const REOPEN_GUARD: &str = "An authorized operator restarts one of the event's deliveries (retry or bounded window replay)";

/// Seed 004's event move table (`new, partial → …` expanded to one row per source), then this
/// project's deviation rows.
pub static EVENT_LIFECYCLE: Lifecycle<EventStatus, EventTrigger> = Lifecycle {
    name: "004 event status",
    transitions: &[
        Transition {
            from: E::New,
            to: E::Skipped,
            trigger: ET::NoSubscriberTookIt,
            guard: PASS_GUARD_SKIPPED,
            side_effects: FINAL_EFFECTS,
            who: ROLLUP,
        },
        Transition {
            from: E::Partial,
            to: E::Skipped,
            trigger: ET::NoSubscriberTookIt,
            guard: PASS_GUARD_SKIPPED,
            side_effects: FINAL_EFFECTS,
            who: ROLLUP,
        },
        Transition {
            from: E::New,
            to: E::Partial,
            trigger: ET::DeliveriesStillWaiting,
            guard: PASS_GUARD_PARTIAL,
            side_effects: &["Pick the event up again on the next pass."],
            who: ROLLUP,
        },
        Transition {
            from: E::Partial,
            to: E::Partial,
            trigger: ET::DeliveriesStillWaiting,
            guard: PASS_GUARD_PARTIAL,
            side_effects: &["Pick the event up again on the next pass."],
            who: ROLLUP,
        },
        Transition {
            from: E::New,
            to: E::Failed,
            trigger: ET::NothingWaitsSomeFailed,
            guard: PASS_GUARD_FAILED,
            side_effects: FINAL_EFFECTS,
            who: ROLLUP,
        },
        Transition {
            from: E::Partial,
            to: E::Failed,
            trigger: ET::NothingWaitsSomeFailed,
            guard: PASS_GUARD_FAILED,
            side_effects: FINAL_EFFECTS,
            who: ROLLUP,
        },
        Transition {
            from: E::New,
            to: E::Sent,
            trigger: ET::NothingWaitsNoneFailed,
            guard: PASS_GUARD_SENT,
            side_effects: FINAL_EFFECTS,
            who: ROLLUP,
        },
        Transition {
            from: E::Partial,
            to: E::Sent,
            trigger: ET::NothingWaitsNoneFailed,
            guard: PASS_GUARD_SENT,
            side_effects: FINAL_EFFECTS,
            who: ROLLUP,
        },
        Transition {
            from: E::Sent,
            to: E::Partial,
            trigger: ET::OperatorRestartReopens,
            guard: REOPEN_GUARD,
            side_effects: &["Remove the retention expiry."],
            who: "Executions operator",
        },
        Transition {
            from: E::Failed,
            to: E::Partial,
            trigger: ET::OperatorRestartReopens,
            guard: REOPEN_GUARD,
            side_effects: &["Remove the retention expiry."],
            who: "Executions operator",
        },
    ],
    invalid: &[],
};

/// Seed 004's internal status: new → done, written when a built-in subscriber succeeds.
pub static INTERNAL_LIFECYCLE: Lifecycle<InternalStatus, InternalTrigger> = Lifecycle {
    name: "004 internal status",
    transitions: &[Transition {
        from: InternalStatus::New,
        to: InternalStatus::Done,
        trigger: InternalTrigger::RecordInternalResult,
        guard:
            "A built-in internal subscriber handled the event successfully and stored its result",
        side_effects: &["Store the internal result."],
        who: "Delivery worker",
    }],
    invalid: &[],
};

/// A subscriber's delivery method. Anything other than `webhook`, `internal` or `poll` is kept
/// verbatim as `Unknown` so the worker can fail the delivery with `unknown delivery method {value}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum DeliveryMethod {
    /// Push over HTTPS.
    Webhook,
    /// A built-in handler in this code base.
    Internal,
    /// Pulled by the adapter through the cursor API.
    Poll,
    /// Not known to the worker (for example `queue`).
    Unknown(String),
}

impl DeliveryMethod {
    pub fn parse(value: &str) -> DeliveryMethod {
        match value {
            "webhook" => DeliveryMethod::Webhook,
            "internal" => DeliveryMethod::Internal,
            "poll" => DeliveryMethod::Poll,
            other => DeliveryMethod::Unknown(other.to_owned()),
        }
    }
    pub fn as_str(&self) -> &str {
        match self {
            DeliveryMethod::Webhook => "webhook",
            DeliveryMethod::Internal => "internal",
            DeliveryMethod::Poll => "poll",
            DeliveryMethod::Unknown(other) => other,
        }
    }
    pub fn is_poll(&self) -> bool {
        matches!(self, DeliveryMethod::Poll)
    }
}

impl From<String> for DeliveryMethod {
    fn from(value: String) -> Self {
        DeliveryMethod::parse(&value)
    }
}

impl From<DeliveryMethod> for String {
    fn from(value: DeliveryMethod) -> Self {
        match value {
            DeliveryMethod::Unknown(other) => other,
            known => known.as_str().to_owned(),
        }
    }
}

impl fmt::Display for DeliveryMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the roll-up needs to know about one of the event's deliveries. Deliveries that never
/// became deliveries in 004's sense (`skipped_filter`, `transmit_status` = `None`) are not passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryFacts {
    pub method_is_poll: bool,
    pub transmit: TransmitStatus,
}

/// The roll-up decision with its trigger (for the table row and the storage condition).
/// `None` for final events, which the roll-up does not look at.
///
/// `any_active_matching_subscriber`: whether any subscriber took the event — an active
/// subscription matched it (a subscription whose change-time filter left the change out did not
/// take it). Rules, in order: no subscriber took it → skipped; poll deliveries are left out; some
/// remaining delivery pending or processing → partial; else at least one failed → failed; else
/// sent (so an event only polling subscribers wait for becomes sent).
pub fn roll_up_move(
    current: EventStatus,
    any_active_matching_subscriber: bool,
    deliveries: &[DeliveryFacts],
) -> Option<(EventTrigger, EventStatus)> {
    if current.is_final() {
        return None;
    }
    if !any_active_matching_subscriber {
        return Some((ET::NoSubscriberTookIt, E::Skipped));
    }
    let counted = || deliveries.iter().filter(|d| !d.method_is_poll);
    if counted().any(|d| {
        matches!(
            d.transmit,
            TransmitStatus::Pending | TransmitStatus::Processing
        )
    }) {
        return Some((ET::DeliveriesStillWaiting, E::Partial));
    }
    if counted().any(|d| d.transmit == TransmitStatus::Failed) {
        return Some((ET::NothingWaitsSomeFailed, E::Failed));
    }
    Some((ET::NothingWaitsNoneFailed, E::Sent))
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
/// new or partial events (they may still need delivery work). Internal status takes no part.
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
    use crate::domain::lifecycle::testing::{assert_exhaustive, reachable};
    use crate::domain::lifecycle::TransitionError;
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
    fn event_table_is_exactly_the_seed_rows_and_the_deviation() {
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

    // 004's event move table, row by row.
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
        assert_eq!(PROCESSING_LEASE, Duration::from_secs(60));
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
    fn delivery_method_serde() {
        for (text, method) in [
            ("webhook", DeliveryMethod::Webhook),
            ("internal", DeliveryMethod::Internal),
            ("poll", DeliveryMethod::Poll),
            ("queue", DeliveryMethod::Unknown("queue".into())),
        ] {
            assert_eq!(
                serde_json::from_value::<DeliveryMethod>(serde_json::json!(text)).unwrap(),
                method
            );
            assert_eq!(serde_json::to_value(&method).unwrap(), text);
            assert_eq!(method.to_string(), text);
        }
        assert!(DeliveryMethod::Poll.is_poll());
        assert!(!DeliveryMethod::Webhook.is_poll());
    }

    #[test]
    fn statuses_serialize_with_the_seed_spelling() {
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
