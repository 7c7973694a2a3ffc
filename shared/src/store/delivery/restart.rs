//! An operator restart (retry or replay) of a delivery from its first attempt
//! (`docs/lifecycles.md#integration-delivery`, the operator's rows).

use super::item::{update_delivery, Delivery};
use crate::domain::integration_delivery::DeliveryMove;
use crate::domain::integration_delivery::DELIVERY_LIFECYCLE;
use crate::domain::time::Timestamp;
use crate::ids::ReplayJobId;
use crate::store::attrs::{due, listing, EXPIRES_AT};
use crate::store::expr::{n, s, Expr};
use crate::store::keys;
use crate::store::write::Write;
use crate::store::StoreError;
use std::time::Duration;

/// One operator restart of a delivery (retry or replay).
#[derive(Debug, Clone, Copy)]
pub struct Restart<'a> {
    /// The delivery as read.
    pub delivery: &'a Delivery,
    /// From [`crate::domain::integration_delivery::operator_restart`] on the status read.
    pub movement: DeliveryMove,
    pub operator: &'a str,
    /// The replay job restarting it: the write is then refused if that job already did.
    pub replay_job: Option<&'a ReplayJobId>,
}

/// Restarts a delivery from its first attempt: `pending`, `attempts = 0`, `not_before =
/// now`, one more restart with who and when; the last error, the worker's lease (a worker
/// still attempting it then fails its outcome write), the needs-attention listing, the
/// delivered time and any retention removed; the attempt log kept. Conditional on the
/// lifecycle's `from` states for the move (the status read), and for a replay on not having
/// been restarted by the same job. A push delivery goes back on the `due` index, due after
/// `grace` (the stream publishes it as it enters pending; the sweep publishes it again if
/// that message is lost); a pull delivery waits for the adapter's cursor, off the index.
pub fn restart(
    table: &str,
    r: &Restart<'_>,
    grace: Duration,
    now: Timestamp,
) -> Result<Write, StoreError> {
    let d = r.delivery;
    let (trigger, to) = r.movement;
    let condition = DELIVERY_LIFECYCLE.expect(d.status, trigger, to)?;
    let mut e = Expr::new()
        .value(":to", s(to.to_string()))
        .value(":zero", n(0))
        .value(":one", n(1))
        .value(":now", n(now.millis()))
        .value(":operator", s(r.operator));
    let status_condition = e.status(&condition);
    let mut set = vec![
        "#status = :to".to_string(),
        "attempts = :zero".into(),
        "updated_at = :now".into(),
        "not_before = :now".into(),
        "restarted_at = :now".into(),
        "restarted_by = :operator".into(),
        "restarts = if_not_exists(restarts, :zero) + :one".into(),
    ];
    let mut remove = vec![
        "lease_until".to_string(),
        "lease_token".into(),
        "last_error".into(),
        "last_http_status".into(),
        listing::KEY.into(),
        listing::SORT.into(),
        "delivered_at".into(),
        EXPIRES_AT.into(),
    ];
    if d.method.is_poll() {
        remove.extend([due::SHARD.to_string(), due::AT.into()]);
    } else {
        e = e
            .value(":shard", s(keys::shard_of(d.delivery_id.as_str())))
            .value(":due", n(now.plus(grace).millis()));
        set.push(format!("{} = :shard", due::SHARD));
        set.push(format!("{} = :due", due::AT));
    }
    let mut condition_text = format!("({status_condition})");
    if let Some(job) = r.replay_job {
        e = e.value(":job", s(job));
        set.push("replay_job = :job".into());
        condition_text.push_str(" AND (attribute_not_exists(replay_job) OR replay_job <> :job)");
    }
    update_delivery(
        table,
        d,
        format!("SET {} REMOVE {}", set.join(", "), remove.join(", ")),
        condition_text,
        &e,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::delivery_method::DeliveryMethod;
    use crate::domain::integration_delivery::{operator_restart, DeliveryStatus};
    use crate::ids::id;
    use crate::store::delivery::item::test_listed_delivery as delivery;

    use crate::store::update::expect_update as updated;
    use aws_sdk_dynamodb::types::Update;

    fn restart_of(d: &Delivery, job: Option<&ReplayJobId>) -> Update {
        let r = Restart {
            delivery: d,
            movement: operator_restart(d.status).unwrap(),
            operator: "ops",
            replay_job: job,
        };
        updated(restart("t", &r, Duration::from_secs(300), Timestamp(10_000)).unwrap())
    }

    #[test]
    fn a_restart_of_a_push_delivery_resets_it_and_puts_it_back_on_the_due_index() {
        let d = delivery(DeliveryStatus::Dead, DeliveryMethod::Webhook);
        let u = restart_of(&d, None);
        let expression = u.update_expression();
        assert!(expression.contains("attempts = :zero"));
        assert!(expression.contains("restarts = if_not_exists(restarts, :zero) + :one"));
        assert!(expression.contains("due_shard = :shard, due_at = :due"));
        assert!(expression.ends_with(
            "REMOVE lease_until, lease_token, last_error, last_http_status, list_key, \
             list_sort, delivered_at, expires_at"
        ));
        assert!(!expression.contains("attempt_log"), "the history is kept");
        let v = u.expression_attribute_values().unwrap();
        assert_eq!(v[":due"], n(310_000));
        assert_eq!(v[":to"], s("pending"));
        assert_eq!(v[":operator"], s("ops"));
        assert!(
            v.values().any(|x| x == &s("dead")),
            "the status read is the condition"
        );
        assert!(!u.condition_expression().unwrap().contains("replay_job"));
    }

    #[test]
    fn a_restart_of_a_pull_delivery_leaves_the_due_index_and_a_replay_restarts_once() {
        let d = delivery(DeliveryStatus::Delivered, DeliveryMethod::Poll);
        let u = restart_of(&d, Some(&id("job1")));
        let expression = u.update_expression();
        assert!(expression.ends_with("expires_at, due_shard, due_at"));
        assert!(expression.contains("replay_job = :job"));
        assert!(u
            .condition_expression()
            .unwrap()
            .ends_with("AND (attribute_not_exists(replay_job) OR replay_job <> :job)"));
        assert_eq!(u.expression_attribute_values().unwrap()[":job"], s("job1"));
        assert_eq!(u.key()["sk"].as_s().unwrap(), "DLV#sub1");
    }
}
