//! The delivery worker's writes of one attempt (`docs/lifecycles.md#integration-delivery`, the
//! worker's rows): the claim of the next numbered attempt under a lease, the lease's read, and
//! the attempt's outcome.

use super::item::{key, AttemptRecord, Delivery, DeliveryWork};
use crate::domain::delivery_method::DeliveryMethod;
use crate::domain::event::delivery_expires_at;
use crate::domain::integration_delivery::{
    DeliveryMove, DeliveryStatus, DeliveryTrigger, ATTEMPT_CLAIM, DELIVERY_LIFECYCLE,
};
use crate::domain::time::Timestamp;
use crate::store::attrs::{due, listing, EXPIRES_AT};
use crate::store::expr::{n, s, Expr};
use crate::store::keys::{self, attention_list_key};
use crate::store::read::{self, Consistency};
use crate::store::write::{built, Write, Written};
use crate::store::{from_item, StoreError};
use aws_sdk_dynamodb::types::{AttributeValue, Update};
use std::time::Duration;

/// The lease token a delivery holds now (a consistent read of that attribute alone).
pub async fn lease_token(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    d: &Delivery,
) -> Result<Option<String>, StoreError> {
    let (pk, sk) = d.key();
    Ok(read::get_with(
        dynamo,
        table,
        &pk,
        &sk,
        Consistency::Strong,
        Some("lease_token"),
    )
    .await?
    .and_then(|i| i.get("lease_token").and_then(|v| v.as_s().ok()).cloned()))
}

/// Claims the next numbered attempt (`attempts + 1`) of the delivery `work` names with a lease,
/// in one conditional write that reads nothing first: only an open push delivery, due by
/// `due_by`, that holds no live lease, whose rate-limit slot (if it waits for one) has come, and
/// has made fewer than `max_attempts` attempts (its subscription's Max Retries; the condition is
/// the lifecycle's [`ATTEMPT_CLAIM`]) is claimed.
/// It is sent as an update that answers with the
/// delivery either way ([`Claim::of`]): as claimed, or as it stood when the condition refused it,
/// which tells the worker why without a read.
///
/// The claim leaves the `due` index alone (moving `due_at` there would bill two index writes
/// per attempt). If the worker dies, its message (with any other deliveries packed in it, whose
/// claims then refuse those already settled) is not deleted and comes back after the queue's
/// visibility timeout (longer than the lease); should that message be lost as well, a retry is
/// found by the sweep when its `due_at` passes and a first attempt by the roll-up of its open
/// event.
pub fn claim(
    table: &str,
    work: &DeliveryWork,
    token: &str,
    now: Timestamp,
    lease: Duration,
    due_by: Timestamp,
    max_attempts: u32,
) -> Result<Write, StoreError> {
    let (pk, sk) = key(&work.account_id, &work.change_id, &work.subscription_id);
    let mut e = Expr::new();
    let open = e.status(&ATTEMPT_CLAIM.condition(u64::from(max_attempts)));
    let e = e
        .name("#method", "method")
        .value(":poll", s(DeliveryMethod::Poll.as_str()))
        .value(":due_by", n(due_by.millis()))
        .value(":now", n(now.millis()))
        .value(":lease", n(now.plus(lease).millis()))
        .value(":token", s(token))
        .value(":updated", n(now.millis()));
    Ok(Write::UpdateReturningNew(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression(
                "SET lease_until = :lease, lease_token = :token, updated_at = :updated",
            )
            .condition_expression(format!(
                "{open} AND #method <> :poll \
                 AND (attribute_not_exists(not_before) OR not_before <= :due_by) \
                 AND (attribute_not_exists(lease_until) OR lease_until <= :now) \
                 AND (attribute_not_exists(rate_slot) OR rate_slot <= :now)"
            ))
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )?))
}

/// Ends a retrying push delivery dead without a further attempt because its attempts have reached
/// its subscription's Max Retries (`max_attempts`, lowered since its last attempt), so the claim
/// refuses it ([`ATTEMPT_CLAIM`]). The row is the lifecycle's `retrying → dead`; the write is
/// conditional on that, on the attempts the refused claim saw and on no live lease, and does what
/// a dead outcome does to the record (off the due index, onto the needs-attention listing, its
/// retention) without adding an attempt to the history. `held`: the lease token of a claim that
/// found, after claiming, that the stored Max Retries no longer allows the attempt; the write
/// then needs that lease instead of no live one.
pub fn end_exhausted(
    table: &str,
    d: &Delivery,
    max_attempts: u32,
    held: Option<&str>,
    now: Timestamp,
) -> Result<Write, StoreError> {
    let (pk, sk) = d.key();
    let condition = DELIVERY_LIFECYCLE.expect(
        d.status,
        DeliveryTrigger::EndDeliveryRetries,
        DeliveryStatus::Dead,
    )?;
    let mut e = Expr::new();
    let status_condition = e.status(&condition);
    let mut e = e
        .name("#st", "status")
        .name("#method", "method")
        .value(":poll", s(DeliveryMethod::Poll.as_str()))
        .value(":to", s(DeliveryStatus::Dead.to_string()))
        .value(":seen", n(d.attempts))
        .value(":max", n(max_attempts))
        .value(":now", n(now.millis()))
        .value(
            ":err",
            s(format!(
                "attempts reached Max Retries ({max_attempts}); no further attempt"
            )),
        )
        .value(":expires", n(delivery_expires_at(now).seconds()))
        .value(":attn", s(attention_list_key(&d.account_id)))
        .value(
            ":attn_sort",
            s(keys::time_sort(now, d.delivery_id.as_str())),
        );
    let lease = match held {
        Some(token) => {
            e = e.value(":token", s(token));
            "lease_token = :token"
        }
        None => "(attribute_not_exists(lease_until) OR lease_until <= :now)",
    };
    let set = [
        "#st = :to".to_string(),
        "updated_at = :now".into(),
        "last_error = :err".into(),
        format!("{EXPIRES_AT} = :expires"),
        format!("{} = :attn", listing::KEY),
        format!("{} = :attn_sort", listing::SORT),
    ];
    let remove = [
        due::AT,
        due::SHARD,
        "not_before",
        "lease_until",
        "lease_token",
    ];
    Ok(Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression(format!(
                "SET {} REMOVE {}",
                set.join(", "),
                remove.join(", ")
            ))
            .condition_expression(format!(
                "({status_condition}) AND #method <> :poll AND attempts = :seen \
                 AND attempts >= :max AND {lease}"
            ))
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )?))
}

/// What a [`claim`] came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// The attempt is ours: the delivery as the claim left it.
    Claimed(Delivery),
    /// Not claimed: the delivery as it stood (`None`: there is no such delivery).
    Refused(Option<Delivery>),
}

impl Claim {
    /// The claim's answer.
    pub fn of(written: Written) -> Result<Claim, StoreError> {
        match written {
            Written::Applied(Some(item)) => Ok(Claim::Claimed(from_item(item)?)),
            Written::Refused(item) => Ok(Claim::Refused(item.map(from_item).transpose()?)),
            other => Err(StoreError::Dynamo(format!(
                "a claim answered {other:?}, neither the claimed delivery nor a refusal"
            ))),
        }
    }
}

/// Takes a success's pending end of its subscription's dead run off the delivery, conditional on
/// it still being there with the run `seen`: sent in one transaction with the subscription's
/// [`crate::store::subscription::end_dead_run`], which then applies once; alone when that end is
/// refused (the run is already shorter: resumed, or the subscription is gone).
pub fn dead_run_ended(table: &str, d: &Delivery, seen: u32) -> Result<Write, StoreError> {
    let (pk, sk) = d.key();
    Ok(Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression("REMOVE dead_run_seen")
            .condition_expression("dead_run_seen = :seen")
            .expression_attribute_values(":seen", n(seen))
            .build(),
    )?))
}

/// The outcome of one attempt, decided by the worker.
#[derive(Debug, Clone)]
pub struct Outcome<'a> {
    /// The lifecycle move: trigger and new status.
    pub movement: DeliveryMove,
    /// For `retrying`: the wait before the next attempt.
    pub retry_in: Option<Duration>,
    pub attempt: &'a AttemptRecord,
    /// For a success: the subscription's dead run it read, when there is one to end (kept on the
    /// delivery until the end is made: [`dead_run_ended`]).
    pub dead_run_seen: Option<u32>,
    /// For a built-in handler's success: its result, kept so that its recording on the event can
    /// be made again.
    pub internal_result: Option<&'a str>,
}

/// Saves an attempt's outcome: the new status and attempt count, the history entry, the lease
/// released; conditional on the lifecycle's `from` states for the move and on still holding the
/// lease `token`. A retry goes onto the `due` index (the sweep publishes it); a terminal outcome
/// carries its retention; a dead or failed one goes onto the account's needs-attention listing.
pub fn save_outcome(
    table: &str,
    d: &Delivery,
    token: &str,
    outcome: &Outcome<'_>,
    now: Timestamp,
) -> Result<Write, StoreError> {
    let (pk, sk) = d.key();
    let (trigger, to) = outcome.movement;
    let attempt = outcome.attempt;
    let condition = DELIVERY_LIFECYCLE.expect(d.status, trigger, to)?;
    let mut e = Expr::new();
    let status_condition = e.status(&condition);
    let entry = serde_dynamo::to_attribute_value::<_, AttributeValue>(attempt).map_err(|err| {
        StoreError::Shape {
            key: format!("{pk}/{sk}"),
            message: err.to_string(),
        }
    })?;
    e = e
        .name("#st", "status")
        .value(":to", s(to.to_string()))
        .value(":n", n(attempt.number))
        .value(":now", n(now.millis()))
        .value(":entry", AttributeValue::L(vec![entry]))
        .value(":empty", AttributeValue::L(vec![]))
        .value(":token", s(token));
    if to.is_terminal() {
        // Terminal outcomes carry their retention (epoch seconds, DynamoDB TTL).
        e = e.value(":expires", n(delivery_expires_at(now).seconds()));
    }
    let mut set = vec![
        "#st = :to".to_string(),
        "attempts = :n".into(),
        "updated_at = :now".into(),
        "attempt_log = list_append(if_not_exists(attempt_log, :empty), :entry)".into(),
    ];
    // A rate-limit slot served this attempt alone.
    let mut remove = vec![
        "lease_until".to_string(),
        "lease_token".into(),
        "rate_slot".into(),
    ];
    e = with_last_answer(e, (&mut set, &mut remove), attempt, to);
    e = with_placement(e, (&mut set, &mut remove), d, outcome, now);
    let expression = format!("SET {} REMOVE {}", set.join(", "), remove.join(", "));
    Ok(Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression(expression)
            .condition_expression(format!("({status_condition}) AND lease_token = :token"))
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )?))
}

/// The attempt's answer on the item: its HTTP status when there was one, and the error kept (none
/// once delivered).
fn with_last_answer(
    mut e: Expr,
    (set, remove): (&mut Vec<String>, &mut Vec<String>),
    attempt: &AttemptRecord,
    to: DeliveryStatus,
) -> Expr {
    match attempt.http_status {
        Some(code) => {
            e = e.value(":http", n(code));
            set.push("last_http_status = :http".into());
        }
        None => remove.push("last_http_status".into()),
    }
    match (&attempt.detail, to) {
        (_, DeliveryStatus::Delivered) | (None, _) => remove.push("last_error".into()),
        (Some(detail), _) => {
            e = e.value(":err", s(detail));
            set.push("last_error = :err".into());
        }
    }
    e
}

/// Where an outcome leaves the delivery: a retry onto the `due` index at its next attempt; a
/// terminal outcome its retention, off the `due` index, and a dead or failed one onto the
/// account's needs-attention listing.
fn with_placement(
    mut e: Expr,
    (set, remove): (&mut Vec<String>, &mut Vec<String>),
    d: &Delivery,
    outcome: &Outcome<'_>,
    now: Timestamp,
) -> Expr {
    let to = outcome.movement.1;
    let off_due = [due::AT, due::SHARD, "not_before"].map(String::from);
    match to {
        DeliveryStatus::Retrying => {
            let next = now.plus(outcome.retry_in.unwrap_or_default());
            e = e
                .value(":next", n(next.millis()))
                .value(":shard", s(keys::shard_of(d.delivery_id.as_str())));
            set.push("not_before = :next".into());
            // Onto the `due` index (a first attempt is not on it): the sweep publishes it.
            set.push(format!("{} = :shard", due::SHARD));
            set.push(format!("{} = :next", due::AT));
        }
        DeliveryStatus::Delivered => {
            set.push("delivered_at = :now".into());
            // The effects still to make after it, on the record until they are made; a run kept
            // by an earlier success of the delivery (restarted since) is this one's no more.
            match outcome.dead_run_seen {
                Some(seen) => {
                    e = e.value(":run_seen", n(seen));
                    set.push("dead_run_seen = :run_seen".into());
                }
                None => remove.push("dead_run_seen".into()),
            }
            if let Some(result) = outcome.internal_result {
                e = e.value(":internal_result", s(result));
                set.push("internal_result = :internal_result".into());
            }
            set.push(format!("{EXPIRES_AT} = :expires"));
            remove.extend(off_due);
        }
        _ => {
            set.push(format!("{EXPIRES_AT} = :expires"));
            // Dead or failed: off the due index, onto the account's needs-attention listing.
            e = e
                .value(":attn", s(attention_list_key(&d.account_id)))
                .value(
                    ":attn_sort",
                    s(keys::time_sort(now, d.delivery_id.as_str())),
                );
            set.push(format!("{} = :attn", listing::KEY));
            set.push(format!("{} = :attn_sort", listing::SORT));
            remove.extend(off_due);
        }
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::integration_delivery::{after_success, after_transient_failure};
    use crate::store::delivery::item::test_delivery as delivery;

    fn attempt(number: u32, http: Option<u16>, detail: Option<&str>) -> AttemptRecord {
        AttemptRecord {
            number,
            at: Timestamp(2_000),
            class: "transient".into(),
            http_status: http,
            duration_ms: 12,
            detail: detail.map(str::to_string),
            error: None,
        }
    }

    fn update(w: Write) -> Update {
        match w {
            Write::Update(u) | Write::UpdateReturningNew(u) => u,
            other => panic!("not an update: {other:?}"),
        }
    }

    #[test]
    fn a_claim_needs_an_open_due_push_delivery_without_a_live_lease_and_answers_with_it() {
        let d = delivery(DeliveryStatus::Retrying, 2);
        let (now, due_by) = (Timestamp(5_000), Timestamp(7_000));
        let w = claim(
            "t",
            &d.work(),
            "tok",
            now,
            Duration::from_secs(60),
            due_by,
            6,
        )
        .unwrap();
        assert!(matches!(w, Write::UpdateReturningNew(_)), "{w:?}");
        let u = update(w);
        let condition = u.condition_expression().unwrap();
        assert!(condition.starts_with("(#status IN ("), "{condition}");
        assert!(
            condition.contains("#attempts < :attempts_below"),
            "{condition}"
        );
        assert!(condition.contains("#method <> :poll"), "{condition}");
        assert!(condition.contains("not_before <= :due_by"), "{condition}");
        assert!(condition.contains("lease_until <= :now"), "{condition}");
        assert!(condition.contains("rate_slot <= :now"), "{condition}");
        let values = u.expression_attribute_values().unwrap();
        let mut open: Vec<&str> = values
            .iter()
            .filter(|(k, _)| k.starts_with(":status"))
            .map(|(_, v)| v.as_s().unwrap().as_str())
            .collect();
        open.sort();
        assert_eq!(open, ["pending", "retrying"]);
        assert_eq!(values[":due_by"].as_n().unwrap(), "7000");
        assert_eq!(values[":lease"].as_n().unwrap(), "65000");
        assert_eq!(values[":attempts_below"].as_n().unwrap(), "6");
        assert_eq!(
            u.expression_attribute_names().unwrap()["#attempts"],
            "attempts"
        );
        assert!(!u.update_expression().contains(due::AT));
        assert!(!u.update_expression().contains("attempts"));
    }

    #[test]
    fn ending_an_exhausted_delivery_needs_the_attempts_the_claim_saw_and_adds_no_attempt() {
        let d = delivery(DeliveryStatus::Retrying, 3);
        let u = update(end_exhausted("t", &d, 2, None, Timestamp(9_000)).unwrap());
        let condition = u.condition_expression().unwrap();
        assert!(condition.contains("attempts = :seen"), "{condition}");
        assert!(condition.contains("attempts >= :max"), "{condition}");
        assert!(condition.contains("lease_until <= :now"), "{condition}");
        let expression = u.update_expression();
        assert!(!expression.contains("attempt_log") && !expression.contains("attempts ="));
        assert!(expression.contains("list_key = :attn") && expression.contains("due_shard"));
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":seen"].as_n().unwrap(), "3");
        assert_eq!(values[":to"].as_s().unwrap(), "dead");
        assert_eq!(values[":status_from_0"].as_s().unwrap(), "retrying");
        // Only a retrying delivery has attempts to have run out of.
        assert!(end_exhausted(
            "t",
            &delivery(DeliveryStatus::Pending, 0),
            1,
            None,
            Timestamp(1)
        )
        .is_err());
    }

    #[test]
    fn a_retry_outcome_goes_onto_the_due_index_and_needs_the_lease() {
        let d = delivery(DeliveryStatus::Pending, 0);
        let a = attempt(1, Some(503), Some("unavailable"));
        let outcome = Outcome {
            movement: after_transient_failure(DeliveryStatus::Pending, true).unwrap(),
            retry_in: Some(Duration::from_secs(60)),
            attempt: &a,
            dead_run_seen: None,
            internal_result: None,
        };
        let u = update(save_outcome("t", &d, "tok", &outcome, Timestamp(2_000)).unwrap());
        let expression = u.update_expression();
        assert!(expression.contains("due_shard = :shard"));
        assert!(expression.contains("due_at = :next"));
        assert!(expression.contains("last_error = :err"));
        assert!(u
            .condition_expression()
            .unwrap()
            .ends_with("lease_token = :token"));
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":next"].as_n().unwrap(), "62000");
        assert!(!values.contains_key(":expires"));
    }

    #[test]
    fn a_dead_outcome_leaves_the_due_index_for_the_attention_listing_with_its_retention() {
        let d = delivery(DeliveryStatus::Retrying, 4);
        let a = attempt(5, Some(500), Some("boom"));
        let outcome = Outcome {
            movement: after_transient_failure(DeliveryStatus::Retrying, false).unwrap(),
            retry_in: None,
            attempt: &a,
            dead_run_seen: None,
            internal_result: None,
        };
        let u = update(save_outcome("t", &d, "tok", &outcome, Timestamp(2_000)).unwrap());
        let expression = u.update_expression();
        assert!(expression.contains("list_key = :attn"));
        assert!(expression.contains("REMOVE") && expression.contains("due_shard"));
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":attn"].as_s().unwrap(), "ATTENTION#acct");
        assert!(values.contains_key(":expires"));
    }

    #[test]
    fn an_outcome_the_lifecycle_forbids_is_not_built() {
        // The move of a pending delivery's success, applied to a delivered one.
        let d = delivery(DeliveryStatus::Delivered, 1);
        let a = attempt(2, Some(200), None);
        let outcome = Outcome {
            movement: after_success(DeliveryStatus::Pending).unwrap(),
            retry_in: Some(Duration::from_secs(1)),
            attempt: &a,
            dead_run_seen: None,
            internal_result: None,
        };
        assert!(matches!(
            save_outcome("t", &d, "tok", &outcome, Timestamp(2_000)),
            Err(StoreError::Transition(_))
        ));
    }
}
