//! Per-second counters: an account's API requests, for its request rate
//! ([`crate::web::account_rate`]). (An integration's rate limit hands out slots of a schedule
//! instead: [`crate::store::rate_schedule`].)
//!
//! | item            | pk                                 | sk         | table    |
//! |-----------------|------------------------------------|------------|----------|
//! | request counter | `APIRATE#{account}#{epoch second}` | `REQUESTS` | delivery |
//!
//! [`take_request`] adds one atomically, on the condition that the second's count is still below
//! the limit: of any number of the API's containers, exactly `limit` pass in a second. One
//! partition per second, so no key stays hot; the item expires (TTL `expires_at`) ten minutes
//! after its second, and its `kind` is none the delivery table's stream filters pass.

use super::attrs::EXPIRES_AT;
use super::expr::{n, s, Expr};
use super::update::conditional_update;
use super::write::Write;
use super::StoreError;
use crate::domain::rate_limit::second_of;
use crate::domain::time::Timestamp;
use crate::ids::AccountId;
use crate::store::keys::account_rate_window_pk;

/// The `kind` of a counter item.
pub const KIND: &str = "rate_window";
/// The sort key of an account's request counter.
pub(crate) const REQUESTS_SK: &str = "REQUESTS";
/// The counted attribute.
pub(crate) const COUNT: &str = "started";
/// How long a counter outlives its second (seconds).
const KEEP_SECS: i64 = 600;

/// Counts one API request of the account in the second `now` falls in, only while that second's
/// count is below `limit` (refused otherwise: nothing is written).
pub(crate) fn take_request(
    table: &str,
    account_id: &AccountId,
    now: Timestamp,
    limit: u32,
) -> Result<Write, StoreError> {
    let key = (
        account_rate_window_pk(account_id, second_of(now)),
        REQUESTS_SK.to_string(),
    );
    take_in(table, key, now, limit)
}

/// Adds one to the counter `key` (of the second `now` falls in) while it is below `limit`.
fn take_in(
    table: &str,
    key: (String, String),
    now: Timestamp,
    limit: u32,
) -> Result<Write, StoreError> {
    let e = Expr::new()
        .name("#count", COUNT)
        .name("#expires", EXPIRES_AT)
        .name("#kind", "kind")
        .value(":one", n(1))
        .value(":limit", n(limit))
        .value(":kind", s(KIND))
        .value(":expires", n(second_of(now) + KEEP_SECS));
    conditional_update(
        table,
        key,
        "ADD #count :one SET #kind = :kind, #expires = :expires".into(),
        "attribute_not_exists(#count) OR #count < :limit".into(),
        &e,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;
    use crate::store::update::expect_update;

    #[test]
    fn an_accounts_requests_count_per_second_on_their_own_item() {
        let u = expect_update(take_request("t", &id("acct_a"), Timestamp(7_250), 50).unwrap());
        assert_eq!(u.key()["pk"].as_s().unwrap(), "APIRATE#acct_a#7");
        assert_eq!(u.key()["sk"].as_s().unwrap(), "REQUESTS");
        assert_eq!(
            u.condition_expression(),
            Some("attribute_not_exists(#count) OR #count < :limit")
        );
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":limit"].as_n().unwrap(), "50");
        assert_eq!(values[":kind"].as_s().unwrap(), KIND);
    }
}
