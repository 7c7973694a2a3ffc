//! A claimed delivery of a rate-limited integration that must wait for a later slot
//! ([`crate::domain::rate_limit`]): the slot is kept on the delivery and the lease given up, in
//! one write on still holding the lease. The claim then refuses every copy of its work until the
//! slot comes (none of them reserves another), the roll-up does not take it for a lost first
//! dispatch, and a retry on the `due` index is moved past its slot so the sweep does not publish
//! it again meanwhile.

use super::item::Delivery;
use crate::domain::time::Timestamp;
use crate::store::attrs::due;
use crate::store::expr::{n, s, Expr};
use crate::store::update::conditional_update;
use crate::store::write::Write;
use crate::store::StoreError;

/// Keeps `slot` on the delivery `d` and gives up the lease `token` (only while it is held);
/// `due_at`: where a delivery on the `due` index is moved to. Without a slot (none could be
/// reserved), only gives up the lease.
pub fn wait_for_slot(
    table: &str,
    d: &Delivery,
    token: &str,
    slot: Option<Timestamp>,
    due_at: Option<Timestamp>,
) -> Result<Write, StoreError> {
    let mut e = Expr::new().value(":token", s(token));
    let mut set = Vec::new();
    if let Some(slot) = slot {
        e = e.value(":slot", n(slot.millis()));
        set.push("rate_slot = :slot".to_string());
        if let Some(at) = due_at.filter(|_| d.on_due_index()) {
            e = e.value(":due_at", n(at.millis()));
            set.push(format!("{} = :due_at", due::AT));
        }
    }
    let set = match set.is_empty() {
        true => String::new(),
        false => format!("SET {} ", set.join(", ")),
    };
    conditional_update(
        table,
        d.key(),
        format!("{set}REMOVE lease_until, lease_token"),
        "lease_token = :token".into(),
        &e,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::integration_delivery::DeliveryStatus;
    use crate::store::delivery::item::test_delivery as delivery;
    use crate::store::update::expect_update;

    #[test]
    fn the_slot_is_kept_and_the_lease_given_up_only_while_it_is_held() {
        let d = delivery(DeliveryStatus::Pending, 0);
        let w = wait_for_slot("t", &d, "tok", Some(Timestamp(9_000)), None).unwrap();
        let u = expect_update(w);
        assert_eq!(
            u.update_expression(),
            "SET rate_slot = :slot REMOVE lease_until, lease_token"
        );
        assert_eq!(u.condition_expression(), Some("lease_token = :token"));
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":slot"].as_n().unwrap(), "9000");
        assert_eq!(values[":token"].as_s().unwrap(), "tok");
    }

    #[test]
    fn a_retry_on_the_due_index_moves_past_its_slot_and_no_slot_only_gives_up_the_lease() {
        let mut d = delivery(DeliveryStatus::Retrying, 1);
        let later = Some(Timestamp(99_000));
        let first = wait_for_slot("t", &d, "tok", Some(Timestamp(9_000)), later).unwrap();
        assert!(!expect_update(first).update_expression().contains(due::AT));
        d.due_shard = Some("3".into());
        let u =
            expect_update(wait_for_slot("t", &d, "tok", Some(Timestamp(9_000)), later).unwrap());
        assert_eq!(
            u.update_expression(),
            format!(
                "SET rate_slot = :slot, {} = :due_at REMOVE lease_until, lease_token",
                due::AT
            )
        );
        let none = expect_update(wait_for_slot("t", &d, "tok", None, later).unwrap());
        assert_eq!(none.update_expression(), "REMOVE lease_until, lease_token");
    }
}
