//! An integration's schedule of rate-limit slots ([`crate::domain::rate_limit::Schedule`]): one
//! item per limited integration, holding the run of reservations its backlog is spread over.
//!
//! | item     | pk                               | sk         | table    |
//! |----------|----------------------------------|------------|----------|
//! | schedule | `RATE#{account}#{integration}`   | `SCHEDULE` | delivery |
//!
//! A reservation is one write that answers with the schedule: [`take`] adds one to the run's
//! slots atomically (creating the run in the current second when there is none), and the slot it
//! got is the count it answers with; when that slot is already past (the run was idle) or spaced
//! by another limit, [`restart`] begins a new run with the reservation's slot as its first, on
//! the condition that the run is still the one seen (another worker's restart or take refuses
//! it, and its answer is the schedule as it stands). Any number of workers in any number of
//! containers get distinct slots, `limit` to a second. The item is refreshed by every write and
//! expires a week after the last (TTL `expires_at`); its `kind` is none the delivery table's
//! stream filters pass.

use super::attrs::EXPIRES_AT;
use super::expr::{n, s, Expr};
use super::update::item_update;
use super::write::Write;
use super::{Item, StoreError};
use crate::domain::rate_limit::{second_of, Schedule};
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, IntegrationId};

/// The `kind` of a schedule item.
pub const KIND: &str = "rate_schedule";
pub(crate) const SK: &str = "SCHEDULE";
/// The second the run began in (seconds since the epoch).
const START: &str = "run_start";
/// The slots taken in the run.
const TAKEN: &str = "taken";
/// The limit the run's slots are spaced by.
const PER_SECOND: &str = "per_second";
/// How long the item outlives its last write (seconds).
const KEEP_SECS: i64 = 7 * 24 * 3600;

/// The key of an integration's schedule.
pub fn key(account_id: &AccountId, integration_id: &IntegrationId) -> (String, String) {
    (
        super::keys::rate_schedule_pk(account_id, integration_id),
        SK.to_string(),
    )
}

/// Takes the next slot of the integration's run (one atomic add), creating a run in the current
/// second spaced by `limit` when there is none; answers with the schedule after the add.
pub fn take(
    table: &str,
    account_id: &AccountId,
    integration_id: &IntegrationId,
    now: Timestamp,
    limit: u32,
) -> Result<Write, StoreError> {
    let e = names()
        .value(":one", n(1))
        .value(":now", n(second_of(now)))
        .value(":limit", n(limit))
        .value(":kind", s(KIND))
        .value(":expires", n(second_of(now) + KEEP_SECS));
    update(
        table,
        key(account_id, integration_id),
        "ADD #taken :one SET #start = if_not_exists(#start, :now), \
         #per = if_not_exists(#per, :limit), #kind = :kind, #expires = :expires",
        None,
        &e,
    )
}

/// Begins a new run in second `start` spaced by `limit`, its first slot the caller's, only while
/// the schedule is still `seen`; answers with the schedule as it is after the write, or as it
/// stood when refused.
pub fn restart(
    table: &str,
    account_id: &AccountId,
    integration_id: &IntegrationId,
    seen: &Schedule,
    start: i64,
    limit: u32,
    now: Timestamp,
) -> Result<Write, StoreError> {
    let e = names()
        .value(":one", n(1))
        .value(":start", n(start))
        .value(":limit", n(limit))
        .value(":kind", s(KIND))
        .value(":expires", n(second_of(now) + KEEP_SECS))
        .value(":seen_start", n(seen.start))
        .value(":seen_taken", n(seen.taken))
        .value(":seen_per", n(seen.per_second));
    let condition = "#start = :seen_start AND #taken = :seen_taken AND #per = :seen_per";
    update(
        table,
        key(account_id, integration_id),
        "SET #start = :start, #taken = :one, #per = :limit, #kind = :kind, #expires = :expires",
        Some(condition.to_string()),
        &e,
    )
}

/// A consistent read of an integration's schedule (`None`: it has none).
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    integration_id: &IntegrationId,
) -> Result<Option<Schedule>, StoreError> {
    let (pk, sk) = key(account_id, integration_id);
    let item = super::read::get(dynamo, table, &pk, &sk).await?;
    Ok(item.as_ref().and_then(schedule_of))
}

/// The schedule a [`take`] or [`restart`] answered with (`None`: not a schedule item).
pub fn schedule_of(item: &Item) -> Option<Schedule> {
    let number = |k: &str| item.get(k)?.as_n().ok()?.parse::<i64>().ok();
    Some(Schedule {
        start: number(START)?,
        taken: u64::try_from(number(TAKEN)?).ok()?,
        per_second: u32::try_from(number(PER_SECOND)?).ok()?,
    })
}

fn names() -> Expr {
    Expr::new()
        .name("#start", START)
        .name("#taken", TAKEN)
        .name("#per", PER_SECOND)
        .name("#kind", "kind")
        .name("#expires", EXPIRES_AT)
}

/// An update of the schedule that answers with it.
fn update(
    table: &str,
    key: (String, String),
    expression: &str,
    condition: Option<String>,
    e: &Expr,
) -> Result<Write, StoreError> {
    Ok(Write::UpdateReturningNew(item_update(
        table, key, expression, condition, e,
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;
    use aws_sdk_dynamodb::types::{AttributeValue, Update};

    fn expect(w: Write) -> Update {
        match w {
            Write::UpdateReturningNew(u) => u,
            other => panic!("not an update answering with the item: {other:?}"),
        }
    }

    #[test]
    fn a_take_adds_one_slot_to_the_run_and_creates_one_in_the_current_second() {
        let u = expect(take("t", &id("acct_a"), &id("intg_b"), Timestamp(7_250), 5).unwrap());
        assert_eq!(u.key()["pk"].as_s().unwrap(), "RATE#acct_a#intg_b");
        assert_eq!(u.key()["sk"].as_s().unwrap(), "SCHEDULE");
        assert!(u.update_expression().starts_with("ADD #taken :one"));
        assert!(u
            .update_expression()
            .contains("#start = if_not_exists(#start, :now)"));
        assert_eq!(u.condition_expression(), None);
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":now"].as_n().unwrap(), "7");
        assert_eq!(values[":limit"].as_n().unwrap(), "5");
        assert_eq!(values[":kind"].as_s().unwrap(), KIND);
    }

    #[test]
    fn a_restart_holds_only_while_the_run_is_the_one_seen() {
        let seen = Schedule {
            start: 3,
            taken: 12,
            per_second: 5,
        };
        let (a, b) = (id("acct_a"), id("intg_b"));
        let now = Timestamp(9_000);
        let u = expect(restart("t", &a, &b, &seen, 9, 5, now).unwrap());
        assert_eq!(
            u.condition_expression(),
            Some("#start = :seen_start AND #taken = :seen_taken AND #per = :seen_per")
        );
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":seen_taken"].as_n().unwrap(), "12");
        assert_eq!(values[":start"].as_n().unwrap(), "9");
    }

    #[test]
    fn the_answer_is_read_back_as_the_schedule() {
        let item = Item::from([
            (START.to_string(), AttributeValue::N("40".into())),
            (TAKEN.to_string(), AttributeValue::N("7".into())),
            (PER_SECOND.to_string(), AttributeValue::N("5".into())),
        ]);
        assert_eq!(
            schedule_of(&item),
            Some(Schedule {
                start: 40,
                taken: 7,
                per_second: 5
            })
        );
        assert_eq!(schedule_of(&Item::new()), None);
    }
}
