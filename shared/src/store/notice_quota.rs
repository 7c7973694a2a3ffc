//! The daily quota counter of an account's notices: how many outbound recipients (see
//! [`crate::notify::bounds::outbound_recipients`]) the account's notices named on one UTC day.
//!
//! | item          | pk                            | sk           | table        |
//! |---------------|-------------------------------|--------------|--------------|
//! | daily counter | `QUOTA#{account}#{yyyy-mm-dd}`| `RECIPIENTS` | notification |
//!
//! The counter is charged by [`charge`], an atomic `ADD` whose condition is `count + n <= quota`
//! (written as `count <= quota - n`), in one transaction with the notice it pays for: a notice
//! that is not written (its idempotency key was used, or it is refused) charges nothing, and a
//! charge that would pass the quota writes neither. The item expires (TTL `expires_at`) a day
//! after its own day ends, so counters never pile up. It is not a `kind` the notification
//! table's stream filter passes.

use super::attrs::EXPIRES_AT;
use super::expr::{n, s, Expr};
use super::read;
use super::update::conditional_update;
use super::write::Write;
use super::StoreError;
use crate::domain::time::{Timestamp, DAY};
use crate::ids::AccountId;
use serde::{Deserialize, Serialize};

/// The `kind` of a counter item.
pub const KIND: &str = "notice_quota";
pub(crate) const SK: &str = "RECIPIENTS";
/// The counted attribute.
pub(crate) const COUNT: &str = "recipients";

const DAY_MS: i64 = DAY.as_millis() as i64;

/// The UTC day `at` falls on, `yyyy-mm-dd`.
pub fn utc_day(at: Timestamp) -> String {
    let start = Timestamp::from_millis(at.millis().div_euclid(DAY_MS) * DAY_MS);
    start.to_rfc3339()[..10].to_string()
}

/// The first instant of the UTC day after the one `at` falls on.
pub fn next_utc_day(at: Timestamp) -> Timestamp {
    Timestamp::from_millis((at.millis().div_euclid(DAY_MS) + 1) * DAY_MS)
}

pub use super::keys::notice_quota_pk as pk;

/// The key of an account's counter for `day`.
pub fn key(account_id: &AccountId, day: &str) -> (String, String) {
    (pk(account_id, day), SK.to_string())
}

/// A counter as stored.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DailyCount {
    pub account_id: AccountId,
    pub day: String,
    pub recipients: u32,
    pub expires_at: i64,
}

/// Charges `recipients` to the account's counter of the day `now` falls on, only while the day's
/// total stays within `quota`. A charge larger than the quota itself is refused here (the API
/// answers it as too many recipients before it gets this far).
pub(crate) fn charge(
    table: &str,
    account_id: &AccountId,
    now: Timestamp,
    recipients: u32,
    quota: u32,
) -> Result<Write, StoreError> {
    if recipients > quota {
        return Err(StoreError::Dynamo(format!(
            "a charge of {recipients} recipients cannot fit a daily quota of {quota}"
        )));
    }
    let day = utc_day(now);
    // Kept one day past its own, then DynamoDB's TTL removes it.
    let expires = next_utc_day(now).plus(DAY).seconds();
    let e = Expr::new()
        .name("#count", COUNT)
        .name("#expires", EXPIRES_AT)
        .name("#account", "account_id")
        .name("#d", "day")
        .name("#kind", "kind")
        .value(":n", n(recipients))
        .value(":room", n(quota - recipients))
        .value(":account", s(account_id))
        .value(":day", s(&day))
        .value(":kind", s(KIND))
        .value(":expires", n(expires));
    conditional_update(
        table,
        key(account_id, &day),
        "ADD #count :n SET #account = :account, #d = :day, #kind = :kind, #expires = :expires"
            .into(),
        "attribute_not_exists(#count) OR #count <= :room".into(),
        &e,
    )
}

/// The account's counter for `day`, if anything was charged to it (a consistent read).
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    day: &str,
) -> Result<Option<DailyCount>, StoreError> {
    let (pk, sk) = key(account_id, day);
    read::get(dynamo, table, &pk, &sk)
        .await?
        .map(super::from_item)
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;
    use crate::store::update::expect_update;

    // 2026-12-01T23:59:59.250Z
    const LATE: Timestamp = Timestamp(1_796_169_599_250);

    #[test]
    fn the_day_is_the_utc_date_and_the_next_day_starts_at_midnight_utc() {
        assert_eq!(utc_day(LATE), "2026-12-01");
        let next = next_utc_day(LATE);
        assert_eq!(next.to_rfc3339(), "2026-12-02T00:00:00.000Z");
        assert_eq!(utc_day(next), "2026-12-02");
        // Midnight itself belongs to the day it starts.
        assert_eq!(next_utc_day(next), next.plus(DAY));
    }

    #[test]
    fn a_charge_adds_atomically_only_while_the_total_stays_within_the_quota() {
        let u = expect_update(charge("notifications", &id("a1"), LATE, 3, 200).unwrap());
        assert_eq!(u.table_name(), "notifications");
        assert_eq!(u.key()["pk"].as_s().unwrap(), "QUOTA#a1#2026-12-01");
        assert_eq!(u.key()["sk"].as_s().unwrap(), SK);
        assert_eq!(
            u.update_expression(),
            "ADD #count :n SET #account = :account, #d = :day, #kind = :kind, #expires = :expires"
        );
        assert_eq!(
            u.condition_expression(),
            Some("attribute_not_exists(#count) OR #count <= :room")
        );
        let names = u.expression_attribute_names().unwrap();
        assert_eq!(names["#count"], COUNT);
        assert_eq!(names["#d"], "day");
        assert_eq!(names["#expires"], EXPIRES_AT);
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":n"].as_n().unwrap(), "3");
        // count + 3 <= 200  ⇔  count <= 197
        assert_eq!(values[":room"].as_n().unwrap(), "197");
        assert_eq!(values[":kind"].as_s().unwrap(), KIND);
        // The TTL: the end of the next day, in seconds.
        assert_eq!(
            values[":expires"].as_n().unwrap(),
            &next_utc_day(LATE).plus(DAY).seconds().to_string()
        );
    }

    #[test]
    fn a_charge_that_fills_the_quota_exactly_leaves_no_room_and_a_larger_one_is_not_built() {
        let u = expect_update(charge("t", &id("a1"), LATE, 200, 200).unwrap());
        assert_eq!(
            u.expression_attribute_values().unwrap()[":room"]
                .as_n()
                .unwrap(),
            "0"
        );
        assert!(charge("t", &id("a1"), LATE, 201, 200).is_err());
    }
}
