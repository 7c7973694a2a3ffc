//! The sparse `due` index: a retry or an operator restart of a push delivery waits on it for the
//! dispatcher's sweep, which reads a shard ([`due_by`]) and postpones what it published; the
//! roll-up puts a push delivery whose first dispatch was lost on it ([`requeue_lost_dispatch`]).

use super::item::{key, work_from_key, Delivery, DeliveryWork};
use crate::domain::integration_delivery::{DeliveryStatus, FIRST_DISPATCH_GRACE};
use crate::domain::time::Timestamp;
use crate::store::attrs::due;
use crate::store::expr::{n, s, Expr};
use crate::store::keys;
use crate::store::read;
use crate::store::write::{built, Write};
use crate::store::StoreError;
use aws_sdk_dynamodb::types::Update;

/// Puts a push delivery whose first dispatch went missing ([`Delivery::first_dispatch_lost`])
/// on the `due` index, due now, for the dispatcher's next sweep to publish; conditional on it
/// still being in that state (a worker or an operator may have moved it since the read, or it
/// has since reserved a rate-limit slot).
pub fn requeue_lost_dispatch(
    table: &str,
    d: &Delivery,
    now: Timestamp,
) -> Result<Write, StoreError> {
    let (pk, sk) = d.key();
    let e = Expr::new()
        .name("#status", "status")
        .value(":pending", s(DeliveryStatus::Pending.to_string()))
        .value(":zero", n(0))
        .value(":now", n(now.millis()))
        .value(":slot_by", n(now.minus(FIRST_DISPATCH_GRACE).millis()))
        .value(":shard", s(keys::shard_of(d.delivery_id.as_str())));
    Ok(Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression(format!("SET {} = :shard, {} = :now", due::SHARD, due::AT))
            .condition_expression(format!(
                "#status = :pending AND attempts = :zero AND attribute_not_exists({}) \
                 AND (attribute_not_exists(lease_until) OR lease_until <= :now) \
                 AND (attribute_not_exists(rate_slot) OR rate_slot <= :slot_by)",
                due::SHARD
            ))
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )?))
}

/// A delivery waiting on the `due` index: its work and when it is due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    pub work: DeliveryWork,
    pub due_at: Timestamp,
}

/// The query of one shard of the `due` index: deliveries due by `horizon`, at most `limit`.
pub fn due_query(table: &str, shard: &str, horizon: Timestamp, limit: i32) -> read::Query {
    read::Query {
        table: table.into(),
        index: Some(due::INDEX.into()),
        key_condition: format!("{} = :shard AND {} <= :horizon", due::SHARD, due::AT),
        expr: Expr::new()
            .value(":shard", s(shard))
            .value(":horizon", n(horizon.millis())),
        limit: Some(limit),
        ..Default::default()
    }
}

/// One page of a `due` shard (the index holds the keys and `due_at`).
pub async fn due_by(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    shard: &str,
    horizon: Timestamp,
    limit: i32,
) -> Result<Vec<Due>, StoreError> {
    let page = read::query_page(dynamo, &due_query(table, shard, horizon, limit)).await?;
    Ok(page
        .items
        .iter()
        .filter_map(|item| {
            let text = |k: &str| item.get(k).and_then(|v| v.as_s().ok());
            let due_at = item
                .get(due::AT)
                .and_then(|v| v.as_n().ok())
                .and_then(|v| v.parse::<i64>().ok())
                .map(Timestamp)?;
            let work = work_from_key(text("pk")?, text("sk")?)?;
            Some(Due { work, due_at })
        })
        .collect())
}

/// Moves a published delivery's `due_at` on to `next`, unless the delivery moved since the sweep
/// read `seen` (an outcome or a restart wrote it).
pub fn postpone(table: &str, due: &Due, next: Timestamp) -> Result<Write, StoreError> {
    let w = &due.work;
    let (pk, sk) = key(&w.account_id, &w.change_id, &w.subscription_id);
    Ok(Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression(format!("SET {} = :next", due::AT))
            .condition_expression(format!("{} = :seen", due::AT))
            .expression_attribute_values(":next", n(next.millis()))
            .expression_attribute_values(":seen", n(due.due_at.millis()))
            .build(),
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::delivery::item::test_delivery as delivery;
    use crate::store::update::expect_update as update;

    #[test]
    fn a_postponement_is_conditional_on_the_due_time_the_sweep_read() {
        let due = Due {
            work: delivery(DeliveryStatus::Retrying, 1).work(),
            due_at: Timestamp(5_000),
        };
        let u = update(postpone("t", &due, Timestamp(9_000)).unwrap());
        assert_eq!(u.condition_expression(), Some("due_at = :seen"));
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":seen"].as_n().unwrap(), "5000");
        assert_eq!(values[":next"].as_n().unwrap(), "9000");
    }
}
