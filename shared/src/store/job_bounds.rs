//! The bounds on the jobs (replays and recoveries) an account starts through its own door: a
//! subscription's running-job slot, and the account's count of jobs started per UTC day.
//!
//! | item           | pk                                   | sk     | table    |
//! |----------------|--------------------------------------|--------|----------|
//! | running slot   | `JOBSLOT#{account}#{subscription}`   | `SLOT` | delivery |
//! | daily counter  | `JOBDAY#{account}#{yyyy-mm-dd}`      | `JOBS` | delivery |
//!
//! Both are taken by conditional writes in the one transaction that records the job and its
//! audit entry ([`take_slot`]: only while no job holds the slot; [`charge_day`]: an atomic `ADD`
//! only while the day's count is below the limit), so of any number of concurrent starts at most
//! one runs per subscription and at most the limit start per day, and a refused start takes
//! nothing. A job gives its slot back in the transaction that completes it ([`release_slot`]).
//! The daily counter expires (TTL `expires_at`) a day after its own day; neither `kind` is one the
//! delivery table's stream filters pass.

use super::attrs::EXPIRES_AT;
use super::expr::{n, s, Expr};
use super::read;
use super::update::conditional_update;
use super::write::Write;
use super::StoreError;
use crate::domain::time::{Timestamp, DAY};
use crate::ids::{AccountId, ReplayJobId, SubscriptionId};
use serde::{Deserialize, Serialize};

pub(crate) const SLOT_KIND: &str = "job_slot";
pub(crate) const SLOT_SK: &str = "SLOT";
pub(crate) const DAY_KIND: &str = "job_day";
pub(crate) const DAY_SK: &str = "JOBS";
/// The counted attribute of a daily counter.
pub(crate) const COUNT: &str = "started";

pub use super::notice_quota::{next_utc_day, utc_day};

/// The key of a subscription's running-job slot.
pub(crate) fn slot_key(
    account_id: &AccountId,
    subscription_id: &SubscriptionId,
) -> (String, String) {
    (
        super::keys::job_slot_pk(account_id, subscription_id),
        SLOT_SK.to_string(),
    )
}

/// The key of an account's counter of jobs started on the UTC day `at` falls on.
pub(crate) fn day_key(account_id: &AccountId, at: Timestamp) -> (String, String) {
    (
        super::keys::job_day_pk(account_id, &utc_day(at)),
        DAY_SK.to_string(),
    )
}

/// A slot as stored: the job holding it, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slot {
    pub account_id: AccountId,
    pub subscription_id: SubscriptionId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<ReplayJobId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_at: Option<Timestamp>,
}

/// A daily counter as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DayCount {
    pub account_id: AccountId,
    pub day: String,
    #[serde(default)]
    pub started: u32,
}

/// Takes the subscription's slot for `job_id`, only while no job holds it.
pub(crate) fn take_slot(
    table: &str,
    account_id: &AccountId,
    subscription_id: &SubscriptionId,
    job_id: &ReplayJobId,
    now: Timestamp,
) -> Result<Write, StoreError> {
    let e = Expr::new()
        .name("#kind", "kind")
        .value(":kind", s(SLOT_KIND))
        .value(":account", s(account_id))
        .value(":sub", s(subscription_id))
        .value(":job", s(job_id))
        .value(":now", n(now.millis()));
    conditional_update(
        table,
        slot_key(account_id, subscription_id),
        "SET #kind = :kind, account_id = :account, subscription_id = :sub, job_id = :job, \
         taken_at = :now"
            .into(),
        "attribute_not_exists(job_id)".into(),
        &e,
    )
}

/// Gives the slot back from `job_id` (also when nothing holds it: a repeated release).
pub(crate) fn release_slot(
    table: &str,
    account_id: &AccountId,
    subscription_id: &SubscriptionId,
    job_id: &ReplayJobId,
) -> Result<Write, StoreError> {
    let e = Expr::new().value(":job", s(job_id));
    conditional_update(
        table,
        slot_key(account_id, subscription_id),
        "REMOVE job_id, taken_at".into(),
        "attribute_not_exists(job_id) OR job_id = :job".into(),
        &e,
    )
}

/// Charges one job to the account's counter of the UTC day `now` falls on, only while that day's
/// count is below `limit`.
pub(crate) fn charge_day(
    table: &str,
    account_id: &AccountId,
    now: Timestamp,
    limit: u32,
) -> Result<Write, StoreError> {
    let day = utc_day(now);
    let expires = next_utc_day(now).plus(DAY).seconds();
    let e = Expr::new()
        .name("#count", COUNT)
        .name("#expires", EXPIRES_AT)
        .name("#kind", "kind")
        .name("#d", "day")
        .value(":one", n(1))
        .value(":limit", n(limit))
        .value(":account", s(account_id))
        .value(":day", s(&day))
        .value(":kind", s(DAY_KIND))
        .value(":expires", n(expires));
    conditional_update(
        table,
        day_key(account_id, now),
        "ADD #count :one SET account_id = :account, #d = :day, #kind = :kind, \
         #expires = :expires"
            .into(),
        "attribute_not_exists(#count) OR #count < :limit".into(),
        &e,
    )
}

/// The subscription's slot (a consistent read).
pub async fn slot(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    subscription_id: &SubscriptionId,
) -> Result<Option<Slot>, StoreError> {
    read::get_as(dynamo, table, slot_key(account_id, subscription_id)).await
}

/// Jobs the account started on the UTC day `at` falls on (a consistent read).
pub async fn started_on(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    at: Timestamp,
) -> Result<u32, StoreError> {
    Ok(
        read::get_as::<DayCount>(dynamo, table, day_key(account_id, at))
            .await?
            .map_or(0, |c| c.started),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;
    use crate::store::update::expect_update;

    // 2026-12-01T23:59:59.250Z
    const LATE: Timestamp = Timestamp(1_796_169_599_250);

    #[test]
    fn a_slot_is_taken_only_while_free_and_given_back_only_by_its_job() {
        let u =
            expect_update(take_slot("t", &id("acct_a"), &id("sub_1"), &id("job_1"), LATE).unwrap());
        assert_eq!(u.key()["pk"], s("JOBSLOT#acct_a#sub_1"));
        assert_eq!(
            u.condition_expression(),
            Some("attribute_not_exists(job_id)")
        );
        let u =
            expect_update(release_slot("t", &id("acct_a"), &id("sub_1"), &id("job_1")).unwrap());
        assert_eq!(
            u.condition_expression(),
            Some("attribute_not_exists(job_id) OR job_id = :job")
        );
        assert_eq!(u.update_expression(), "REMOVE job_id, taken_at");
    }

    #[test]
    fn a_day_is_charged_one_job_at_a_time_below_its_limit() {
        let u = expect_update(charge_day("t", &id("acct_a"), LATE, 10).unwrap());
        assert_eq!(u.key()["pk"], s("JOBDAY#acct_a#2026-12-01"));
        assert_eq!(
            u.condition_expression(),
            Some("attribute_not_exists(#count) OR #count < :limit")
        );
        assert!(u.update_expression().starts_with("ADD #count :one"));
        assert_eq!(u.expression_attribute_values().unwrap()[":limit"], n(10));
        // The next millisecond is the next day's counter.
        assert_ne!(
            day_key(&id("acct_a"), LATE),
            day_key(&id("acct_a"), Timestamp(LATE.millis() + 750))
        );
    }
}
