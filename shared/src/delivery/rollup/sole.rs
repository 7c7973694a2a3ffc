//! The prompt roll-up of an event from its sole delivery: when a push delivery that is the only
//! one its change made settles its first attempt, the event's move follows from that delivery
//! alone and is written without reading the partition.

use super::expiry::expiry_needs_write;
use super::{RollUp, RollUpError, RollUpOutcome};
use crate::domain::event::{roll_up_move, EventStatus, EventTrigger};
use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::retention::ttl_seconds;
use crate::domain::time::Timestamp;
use crate::store;
use crate::store::delivery::Delivery;
use crate::store::event::RollUpBasis;
use crate::store::write::send;

impl RollUp {
    /// The prompt roll-up of the event of a push delivery that just settled its first attempt
    /// (`previous`: the status it left), as the delivery stream shows it. When that delivery is
    /// its event's only one ([`sole_roll_up`]), the event's move is decided from the delivery
    /// alone and written without reading the partition: one query less per change. Otherwise, or
    /// when the write's condition refuses it (the event is no longer `new`, or an operator
    /// reopened it), the event is rolled up from a read, as [`Self::roll_up_pk`] does.
    pub async fn roll_up_settled(
        &self,
        d: &Delivery,
        previous: DeliveryStatus,
    ) -> Result<RollUpOutcome, RollUpError> {
        let now = self.clock.now();
        if let Some((basis, trigger, to)) = sole_roll_up(d, previous, now) {
            let w = store::event::roll_up(&self.table, &basis, trigger, to, now)?;
            if send(&self.dynamo, w).await?.applied() {
                super::log_move(
                    &basis.pk,
                    basis.status,
                    to,
                    trigger,
                    "from its sole delivery",
                );
                return Ok(RollUpOutcome::Moved {
                    from: basis.status,
                    to,
                });
            }
        }
        self.roll_up_pk(&d.key().0).await
    }
}

/// The roll-up of the event of `d`, a push delivery that has just left `previous`, decided
/// without reading the event, when `d` alone decides it: `d` is the only delivery its change made
/// ([`Delivery::sole`]), never restarted, and it left `pending`, so its event was created with
/// it, has taken no other move (only this delivery's settling moves it) and is `new` unless an
/// operator reopened it. That is the basis the write is conditional on (`new`, no reopen
/// counter), so a basis that no longer holds is refused, never written over. `None` when `d`
/// does not decide it alone, or when the roll-up would also have to write `d`'s retention
/// ([`expiry_needs_write`]): the caller reads the partition instead. The move is the one the
/// partition's read would decide ([`roll_up_move`] of `d`'s facts from `new`).
pub(crate) fn sole_roll_up(
    d: &Delivery,
    previous: DeliveryStatus,
    now: Timestamp,
) -> Option<(RollUpBasis, EventTrigger, EventStatus)> {
    if !d.sole || d.restarts > 0 || d.method.is_poll() || previous != DeliveryStatus::Pending {
        return None;
    }
    let facts = d.facts(now)?;
    let (trigger, to) = roll_up_move(EventStatus::New, true, &[facts])?;
    if to == EventStatus::New {
        return None;
    }
    (!expiry_needs_write(d, ttl_seconds(to, now))).then(|| {
        (
            RollUpBasis {
                pk: d.key().0,
                status: EventStatus::New,
                reopens: None,
                created_at: d.created_at,
            },
            trigger,
            to,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sole first-attempt delivery of `status`, settled at `at` with its own expiry stamped as
    /// the worker stamps it.
    fn settled(status: DeliveryStatus, at: Timestamp) -> Delivery {
        let mut d = store::delivery::test_delivery(status, 1);
        d.sole = true;
        d.expires_at = status
            .is_terminal()
            .then(|| crate::domain::event::delivery_expires_at(at).seconds());
        d
    }

    #[test]
    fn only_a_sole_never_restarted_push_delivery_leaving_pending_decides_its_event_alone() {
        let now = Timestamp(5_000);
        let cases = [
            (DeliveryStatus::Delivered, EventStatus::Sent),
            (DeliveryStatus::Dead, EventStatus::Failed),
            (DeliveryStatus::Failed, EventStatus::Failed),
            (DeliveryStatus::Retrying, EventStatus::Partial),
        ];
        for (status, to) in cases {
            let d = settled(status, now);
            let (basis, trigger, decided) =
                sole_roll_up(&d, DeliveryStatus::Pending, now).expect("decided alone");
            assert_eq!(decided, to, "{status}");
            // The move a read of the partition would decide.
            assert_eq!(
                roll_up_move(EventStatus::New, true, &[d.facts(now).unwrap()]),
                Some((trigger, to))
            );
            assert_eq!(
                basis,
                RollUpBasis {
                    pk: d.key().0,
                    status: EventStatus::New,
                    reopens: None,
                    created_at: d.created_at,
                }
            );
        }
        let delivered = settled(DeliveryStatus::Delivered, now);
        let not_alone = [
            Delivery {
                sole: false,
                ..delivered.clone()
            },
            Delivery {
                restarts: 1,
                ..delivered.clone()
            },
            Delivery {
                method: crate::domain::delivery_method::DeliveryMethod::Poll,
                ..delivered.clone()
            },
            // Its retention would have to be written too: the roll-up reads.
            Delivery {
                expires_at: None,
                ..delivered.clone()
            },
            Delivery {
                expires_at: Some(now.seconds()),
                ..delivered.clone()
            },
        ];
        for d in &not_alone {
            assert_eq!(sole_roll_up(d, DeliveryStatus::Pending, now), None, "{d:?}");
        }
        // A retry that ends: its event may be partial by now, which the delivery does not tell.
        assert_eq!(
            sole_roll_up(&delivered, DeliveryStatus::Retrying, now),
            None
        );
        let retrying_with_expiry = Delivery {
            expires_at: Some(now.seconds()),
            ..settled(DeliveryStatus::Retrying, now)
        };
        assert_eq!(
            sole_roll_up(&retrying_with_expiry, DeliveryStatus::Pending, now),
            None
        );
    }
}
