//! Every key of the delivery table, in one place. The table is single-table design:
//!
//! | item          | pk                          | sk                  |
//! |---------------|-----------------------------|---------------------|
//! | account       | `ACCT#{account}`            | `ACCOUNT`           |
//! | integration   | `ACCT#{account}`            | `INTEG#{id}`        |
//! | subscription  | `ACCT#{account}`            | `SUB#{id}`          |
//! | token         | `TOKEN#{token id}`          | `TOKEN`             |
//! | event         | `EVT#{account}#{change}`    | `EVENT`             |
//! | delivery      | `EVT#{account}#{change}`    | `DLV#{subscription}`|
//! | walk mark     | `ROLLUP_WALK`               | `LISTING`           |
//!
//! An account's configuration is one partition (one query loads it); an event and its deliveries
//! are one partition (one query rolls it up). The delivery key *is* the subscription-change
//! idempotency key: a conditional put on it can succeed once.

use crate::domain::time::Timestamp;
use crate::ids::{AccountId, ChangeId, DeliveryId, IntegrationId, SubscriptionId, TokenId};

pub const ACCOUNT_SK: &str = "ACCOUNT";
pub const EVENT_SK: &str = "EVENT";
pub const TOKEN_SK: &str = "TOKEN";
pub const INTEGRATION_PREFIX: &str = "INTEG#";
pub const SUBSCRIPTION_PREFIX: &str = "SUB#";
pub const DELIVERY_PREFIX: &str = "DLV#";

/// Shards of the sparse `due` and `rollup` indexes (the latter holds only events the roll-up walk
/// found still open, or that moved to `partial`): enough that no one partition takes every
/// write at scale, few enough that a sweep's queries stay cheap (one query per shard).
pub const SHARDS: u32 = 16;

pub fn account_pk(account_id: &AccountId) -> String {
    format!("ACCT#{account_id}")
}
pub fn integration_sk(integration_id: &IntegrationId) -> String {
    format!("{INTEGRATION_PREFIX}{integration_id}")
}
pub fn subscription_sk(subscription_id: &SubscriptionId) -> String {
    format!("{SUBSCRIPTION_PREFIX}{subscription_id}")
}
pub fn token_pk(token_id: &TokenId) -> String {
    format!("TOKEN#{token_id}")
}
pub fn event_pk(account_id: &AccountId, change_id: &ChangeId) -> String {
    format!("EVT#{account_id}#{change_id}")
}
pub fn delivery_sk(subscription_id: &SubscriptionId) -> String {
    format!("{DELIVERY_PREFIX}{subscription_id}")
}

/// The stable delivery identifier adapters see (`webhook-id`): subscription × change.
pub fn delivery_id(change_id: &ChangeId, subscription_id: &SubscriptionId) -> DeliveryId {
    DeliveryId::of(change_id, subscription_id)
}

/// The shard of a key, by FNV-1a: stable across processes and releases.
pub fn shard_of(key: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in key.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    (h % SHARDS).to_string()
}

/// `sub_sort` of the `by_subscription` index: change order (change ids are ULIDs, time-sortable).
pub fn subscription_sort(change_id: &ChangeId) -> String {
    change_id.to_string()
}

/// `list_sort` for time listings: zero-padded millis, then a tiebreaker.
pub fn time_sort(at: Timestamp, tiebreak: &str) -> String {
    format!("{:015}#{tiebreak}", at.millis().max(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;

    #[test]
    fn keys_are_stable_and_shards_spread() {
        assert_eq!(event_pk(&id("a"), &id("c")), "EVT#a#c");
        assert_eq!(
            delivery_id(&id("01H"), &id("sub1")).as_str(),
            "dlv_01H_sub1"
        );
        assert_eq!(shard_of("x"), shard_of("x"));
        let shards: std::collections::HashSet<String> =
            (0..1000).map(|i| shard_of(&format!("k{i}"))).collect();
        assert_eq!(shards.len(), SHARDS as usize);
        assert!(time_sort(Timestamp(5), "a") < time_sort(Timestamp(40), "a"));
    }
}
