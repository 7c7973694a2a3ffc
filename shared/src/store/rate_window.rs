//! Per-second counters: an integration's attempt starts, for its rate limit
//! ([`crate::domain::rate_limit`]; only an integration with a limit has one), and an account's
//! API requests, for its request rate ([`crate::web::account_rate`]).
//!
//! | item            | pk                                            | sk           | table    |
//! |-----------------|-----------------------------------------------|--------------|----------|
//! | second counter  | `RATE#{account}#{integration}#{epoch second}` | `DELIVERIES` | delivery |
//! | request counter | `APIRATE#{account}#{epoch second}`            | `REQUESTS`   | delivery |
//!
//! [`take`] adds one atomically, on the condition that the second's count is still below the
//! limit, before a delivery is claimed: of any number of workers in any number of containers,
//! exactly `limit` pass in a second. A start that is then not attempted (another worker holds the
//! delivery) still counts: the limit errs on the receiver's side. [`take_request`] counts an
//! account's requests the same way, of any number of the API's containers. One partition per
//! second, so no
//! key stays hot; the item expires (TTL `expires_at`) ten minutes after its second, and its
//! `kind` is none the delivery table's stream filters pass.

use super::attrs::EXPIRES_AT;
use super::expr::{n, s, Expr};
use super::update::conditional_update;
use super::write::Write;
use super::StoreError;
use crate::domain::rate_limit::second_of;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, IntegrationId};
use crate::store::keys::account_rate_window_pk;

/// The `kind` of a counter item.
pub const KIND: &str = "rate_window";
pub(crate) const SK: &str = "DELIVERIES";
/// The sort key of an account's request counter.
pub(crate) const REQUESTS_SK: &str = "REQUESTS";
/// The counted attribute.
pub(crate) const COUNT: &str = "started";
/// How long a counter outlives its second (seconds).
const KEEP_SECS: i64 = 600;

/// The key of an integration's counter for the second `at` falls in.
pub fn key(
    account_id: &AccountId,
    integration_id: &IntegrationId,
    at: Timestamp,
) -> (String, String) {
    (
        super::keys::rate_window_pk(account_id, integration_id, second_of(at)),
        SK.to_string(),
    )
}

/// Counts one attempt start of the integration in the second `now` falls in, only while that
/// second's count is below `limit` (refused otherwise: nothing is written).
pub fn take(
    table: &str,
    account_id: &AccountId,
    integration_id: &IntegrationId,
    now: Timestamp,
    limit: u32,
) -> Result<Write, StoreError> {
    take_in(table, key(account_id, integration_id, now), now, limit)
}

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
    fn a_start_counts_only_while_its_second_is_below_the_limit() {
        let u =
            expect_update(take("t", &id("acct_a"), &id("intg_b"), Timestamp(7_250), 3).unwrap());
        assert_eq!(
            u.condition_expression(),
            Some("attribute_not_exists(#count) OR #count < :limit")
        );
        assert!(u.update_expression().starts_with("ADD #count :one"));
        assert_eq!(u.key()["pk"].as_s().unwrap(), "RATE#acct_a#intg_b#7");
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":limit"].as_n().unwrap(), "3");
        assert_eq!(values[":expires"].as_n().unwrap(), "607");
    }

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

    #[test]
    fn each_second_and_integration_has_its_own_counter() {
        let (a, b) = (id("acct_a"), id("intg_b"));
        assert_eq!(key(&a, &b, Timestamp(7_000)), key(&a, &b, Timestamp(7_999)));
        assert_ne!(key(&a, &b, Timestamp(7_999)), key(&a, &b, Timestamp(8_000)));
        assert_ne!(
            key(&a, &b, Timestamp(7_000)),
            key(&a, &id("intg_c"), Timestamp(7_000))
        );
    }
}
