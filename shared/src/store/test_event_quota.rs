//! The per-minute counter of an account's test events (`POST …/test-event` and the console's
//! "Send test event"): each holds an API invocation until the endpoint answers or times out, so
//! an account that sent them without bound could take the API's concurrency from every other
//! account, and point the platform's signed requests at one endpoint as fast as it liked.
//!
//! | item           | pk                                 | sk            | table    |
//! |----------------|------------------------------------|---------------|----------|
//! | minute counter | `TESTQ#{account}#{epoch minute}`   | `TEST_EVENTS` | delivery |
//!
//! [`charge`] adds one atomically, on the condition that the minute's count is still below the
//! limit, before the event is sent: of any number of concurrent requests exactly `limit` pass in
//! a minute. A charged event whose send then fails still counts. The item expires (TTL
//! `expires_at`) an hour after its minute; its `kind` is none the delivery table's stream
//! filters pass.

use super::attrs::EXPIRES_AT;
use super::expr::{n, s, Expr};
use super::update::conditional_update;
use super::write::Write;
use super::StoreError;
use crate::domain::time::{Timestamp, MINUTE};
use crate::ids::AccountId;
use std::time::Duration;

/// The `kind` of a counter item.
pub const KIND: &str = "test_event_quota";
pub(crate) const SK: &str = "TEST_EVENTS";
/// The counted attribute.
pub(crate) const COUNT: &str = "sent";
/// Test events one account may send in one minute (UTC, from the minute's start).
pub(crate) const PER_MINUTE: u32 = 10;

const MINUTE_MS: i64 = MINUTE.as_millis() as i64;

/// The minute `at` falls in, as minutes since the epoch.
pub(crate) fn minute_of(at: Timestamp) -> i64 {
    at.millis().div_euclid(MINUTE_MS)
}

/// How long from `at` until the next minute starts (at least one second, as a `Retry-After`).
pub(crate) fn until_next_minute(at: Timestamp) -> Duration {
    let next = (minute_of(at) + 1) * MINUTE_MS;
    Duration::from_millis((next - at.millis()) as u64).max(Duration::from_secs(1))
}

/// The key of an account's counter for the minute `at` falls in.
pub fn key(account_id: &AccountId, at: Timestamp) -> (String, String) {
    (
        super::keys::test_event_quota_pk(account_id, minute_of(at)),
        SK.to_string(),
    )
}

/// Charges one test event to the account's counter for the minute `now` falls in, only while
/// that minute's count is below `limit` (refused otherwise: nothing is written).
pub(crate) fn charge(
    table: &str,
    account_id: &AccountId,
    now: Timestamp,
    limit: u32,
) -> Result<Write, StoreError> {
    let expires = Timestamp::from_millis((minute_of(now) + 1) * MINUTE_MS)
        .plus(Duration::from_secs(3600))
        .seconds();
    let e = Expr::new()
        .name("#count", COUNT)
        .name("#expires", EXPIRES_AT)
        .name("#account", "account_id")
        .name("#kind", "kind")
        .value(":one", n(1))
        .value(":limit", n(limit))
        .value(":account", s(account_id))
        .value(":kind", s(KIND))
        .value(":expires", n(expires));
    conditional_update(
        table,
        key(account_id, now),
        "ADD #count :one SET #account = :account, #kind = :kind, #expires = :expires".into(),
        "attribute_not_exists(#count) OR #count < :limit".into(),
        &e,
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
    fn a_minute_is_counted_from_its_start_and_the_wait_is_until_the_next_one() {
        let next = Timestamp::from_millis(LATE.millis() + 750);
        assert_eq!(minute_of(next), minute_of(LATE) + 1);
        assert_eq!(
            until_next_minute(LATE),
            Duration::from_secs(1),
            "750 ms rounds up to 1 s"
        );
        let start = Timestamp::from_millis(minute_of(LATE) * MINUTE_MS);
        assert_eq!(until_next_minute(start), MINUTE);
        assert_ne!(key(&id("acct_a"), LATE), key(&id("acct_a"), next));
        assert_ne!(key(&id("acct_a"), LATE), key(&id("acct_b"), LATE));
    }

    #[test]
    fn a_charge_adds_one_only_while_the_minute_is_below_the_limit() {
        let w = charge("t", &id("acct_a"), LATE, PER_MINUTE).unwrap();
        let u = expect_update(w);
        assert_eq!(
            u.condition_expression(),
            Some("attribute_not_exists(#count) OR #count < :limit")
        );
        assert!(u.update_expression().starts_with("ADD #count :one"));
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":limit"].as_n().unwrap(), "10");
        assert_eq!(values[":kind"].as_s().unwrap(), KIND);
    }
}
