//! The pull cursor's cover of a delivery: `pending → delivered` by `AdvancePullCursor`
//! (`docs/lifecycles.md#integration-delivery`).

use super::item::{update_delivery, Delivery};
use crate::domain::integration_delivery::{DeliveryStatus, DeliveryTrigger, DELIVERY_LIFECYCLE};
use crate::domain::time::Timestamp;
use crate::ids::ChangeId;
use crate::store::attrs::due;
use crate::store::expr::{n, s, Expr};
use crate::store::write::Write;
use crate::store::StoreError;

/// `pending → delivered` by `AdvancePullCursor` for a cursor at `cursor_change` ("the pull
/// cursor passes it", `docs/lifecycles.md#integration-delivery`), only while the delivery is
/// the pending, unleased one the read saw, written and restarted no later than the read's
/// `horizon`. `None` when the lifecycle has no such move from the status read
/// (the cursor then does not cover it).
pub fn cover_by_cursor(
    table: &str,
    d: &Delivery,
    horizon: Timestamp,
    cursor_change: &ChangeId,
    now: Timestamp,
) -> Result<Option<Write>, StoreError> {
    let Ok(condition) = DELIVERY_LIFECYCLE.expect(
        d.status,
        DeliveryTrigger::AdvancePullCursor,
        DeliveryStatus::Delivered,
    ) else {
        return Ok(None);
    };
    let mut e = Expr::new()
        .value(":delivered", s(DeliveryStatus::Delivered.to_string()))
        .value(":now", n(now.millis()))
        .value(":horizon", n(horizon.millis()))
        .value(":cursor", s(cursor_change));
    let status_condition = e.status(&condition);
    update_delivery(
        table,
        d,
        format!(
            "SET #status = :delivered, delivered_at = :now, updated_at = :now, \
             delivered_by_cursor = :cursor REMOVE {}, {}, not_before",
            due::AT,
            due::SHARD
        ),
        format!(
            "({status_condition}) AND created_at <= :horizon \
             AND (attribute_not_exists(restarted_at) OR restarted_at <= :horizon) \
             AND (attribute_not_exists(lease_until) OR lease_until <= :now)"
        ),
        &e,
    )
    .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::delivery_method::DeliveryMethod;
    use crate::ids::id;
    use crate::store::delivery::item::test_listed_delivery as delivery;
    use crate::store::update::expect_update as updated;

    #[test]
    fn a_cursor_covers_only_a_pending_unleased_delivery_visible_at_its_horizon() {
        let d = delivery(DeliveryStatus::Pending, DeliveryMethod::Poll);
        let u = updated(
            cover_by_cursor("t", &d, Timestamp(5_000), &id("01D"), Timestamp(6_000))
                .unwrap()
                .unwrap(),
        );
        assert!(u
            .update_expression()
            .starts_with("SET #status = :delivered"));
        assert!(u
            .update_expression()
            .ends_with("REMOVE due_at, due_shard, not_before"));
        let condition = u.condition_expression().unwrap();
        assert!(condition.contains("created_at <= :horizon"));
        assert!(condition.contains("restarted_at <= :horizon"));
        assert!(condition.ends_with("lease_until <= :now)"));
        let v = u.expression_attribute_values().unwrap();
        assert_eq!(v[":horizon"], n(5_000));
        assert_eq!(v[":cursor"], s("01D"));
        let dead = delivery(DeliveryStatus::Dead, DeliveryMethod::Poll);
        assert!(
            cover_by_cursor("t", &dead, Timestamp(5_000), &id("01D"), Timestamp(6_000))
                .unwrap()
                .is_none()
        );
    }
}
