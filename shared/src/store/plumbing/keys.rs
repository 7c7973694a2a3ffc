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
//! | token listing | `TOKENS#{account}`          | `TOKEN#{token id}`  |
//! | audit entry   | `AUDIT#{account}`           | `AT#{time}#{id}`    |
//! | audit head    | `AUDIT#{account}`           | `CHAIN_HEAD`        |
//! | replay job    | `REPLAY#{account}`          | `JOB#{job}`         |
//! | snapshot      | `SNAP#{account}#{type}`     | the record's id     |
//! | test events   | `TESTQ#{account}#{minute}`  | `TEST_EVENTS`       |
//! | test event    | `TESTEV#{account}`          | `TEST#{id}`         |
//! | console session | `CSESSION#{session}`      | `SESSION`           |
//! | used login link | `CLINK#{link nonce}`      | `USED`              |
//! | account usage | `LIMITS#{account}`          | `LIMITS`            |
//! | running-job slot | `JOBSLOT#{account}#{subscription}` | `SLOT`     |
//! | jobs of a day | `JOBDAY#{account}#{day}`    | `JOBS`              |
//! | event type    | `EVENT_TYPES`               | `TYPE#{type}`       |
//! | publish key   | `PUBKEY#{account}#{key hash}` | `KEY`             |
//! | requests of a second | `APIRATE#{account}#{second}` | `REQUESTS`   |
//!
//! and the `listing` index's keys: `EVENTS#{account}` (an account's events),
//! `ATTENTION#{account}` (its dead and failed deliveries), `AUDIT#{account}#{subscription}` (a
//! subscription's audit), `REPLAYS_RUNNING#{shard}` (running replay jobs).
//!
//! The notification table's keys follow, in their own section.
//!
//! An account's configuration is one partition (one query loads it); an event and its deliveries
//! are one partition (one query rolls it up). The delivery key *is* the subscription-change
//! idempotency key: a conditional put on it can succeed once.

use crate::domain::time::Timestamp;
use crate::ids::{
    AccountId, AuditId, ChangeId, DeliveryId, IntegrationId, NoticeId, ReplayJobId, SubscriptionId,
    TokenId,
};

pub(crate) const ACCOUNT_SK: &str = "ACCOUNT";
pub const EVENT_SK: &str = "EVENT";
pub const TOKEN_SK: &str = "TOKEN";
pub(crate) const INTEGRATION_PREFIX: &str = "INTEG#";
pub(crate) const SUBSCRIPTION_PREFIX: &str = "SUB#";
pub const DELIVERY_PREFIX: &str = "DLV#";

/// Shards of the sparse `due` and `rollup` indexes (the latter holds only events the roll-up walk
/// found still open, or that moved to `partial`): enough that no one partition takes every
/// write at scale, few enough that a sweep's queries stay cheap (one query per shard).
pub(crate) const SHARDS: u32 = 16;

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
pub(crate) fn shard_of(key: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in key.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    (h % SHARDS).to_string()
}

/// `sub_sort` of the `by_subscription` index: change order (change ids are ULIDs, time-sortable).
pub(crate) fn subscription_sort(change_id: &ChangeId) -> String {
    change_id.to_string()
}

/// `list_sort` for time listings: zero-padded millis, then a tiebreaker.
pub(crate) fn time_sort(at: Timestamp, tiebreak: &str) -> String {
    format!("{:015}#{tiebreak}", at.millis().max(0))
}

/// Whether `text` has the form of a [`time_sort`] position (fifteen digits, `#`, then an id).
pub(crate) fn is_time_sort(text: &str) -> bool {
    text.split_once('#').is_some_and(|(millis, rest)| {
        millis.len() == 15
            && millis.bytes().all(|b| b.is_ascii_digit())
            && crate::ids::is_id_text(rest)
    })
}

/// The account and change of an event partition's key (`EVT#{account}#{change}`).
pub(crate) fn parse_event_pk(pk: &str) -> Option<(&str, &str)> {
    pk.strip_prefix("EVT#")?.split_once('#')
}

/// The `listing` key of an account's events.
pub fn events_list_key(account_id: &AccountId) -> String {
    format!("EVENTS#{account_id}")
}
/// The `listing` key of an account's needs-attention entries.
pub fn attention_list_key(account_id: &AccountId) -> String {
    format!("ATTENTION#{account_id}")
}

/// The partition listing an account's tokens (one reference item per token).
pub fn token_ref_pk(account_id: &AccountId) -> String {
    format!("TOKENS#{account_id}")
}
pub(crate) const TOKEN_REF_PREFIX: &str = "TOKEN#";
pub fn token_ref_sk(token_id: &TokenId) -> String {
    format!("{TOKEN_REF_PREFIX}{token_id}")
}

/// The item counting an account's integrations, subscriptions and live tokens against its
/// limits (kept out of the configuration partition, which ingest reads on the hot path).
pub fn account_limits_pk(account_id: &AccountId) -> String {
    format!("LIMITS#{account_id}")
}
pub(crate) const ACCOUNT_LIMITS_SK: &str = "LIMITS";

pub(crate) const AUDIT_SK_PREFIX: &str = "AT#";
/// The sort key of a hash-chained history's head, in the history's own partition (after its
/// entries' `AT#…` keys, so no listing of them meets it).
pub const CHAIN_HEAD_SK: &str = "CHAIN_HEAD";
pub fn audit_pk(account_id: &AccountId) -> String {
    format!("AUDIT#{account_id}")
}
pub fn audit_sk(at: Timestamp, audit_id: &AuditId) -> String {
    format!("{AUDIT_SK_PREFIX}{}", time_sort(at, audit_id.as_str()))
}
/// The `listing` key of a subscription's audit entries.
pub fn audit_list_key(account_id: &AccountId, subscription_id: &SubscriptionId) -> String {
    format!("AUDIT#{account_id}#{subscription_id}")
}

pub(crate) const JOB_SK_PREFIX: &str = "JOB#";
/// The `listing` key of a shard of the running replay jobs.
pub(crate) const RUNNING_LIST_PREFIX: &str = "REPLAYS_RUNNING#";
pub fn job_pk(account_id: &AccountId) -> String {
    format!("REPLAY#{account_id}")
}
pub fn job_sk(job_id: &ReplayJobId) -> String {
    format!("{JOB_SK_PREFIX}{job_id}")
}

/// The partition of a subscription's running-job slot (jobs started through the account's door).
pub(crate) fn job_slot_pk(account_id: &AccountId, subscription_id: &SubscriptionId) -> String {
    format!("JOBSLOT#{account_id}#{subscription_id}")
}
/// The partition of an account's count of jobs started on one UTC day (`yyyy-mm-dd`).
pub(crate) fn job_day_pk(account_id: &AccountId, day: &str) -> String {
    format!("JOBDAY#{account_id}#{day}")
}

/// The catalog's partition: every event type of the deployment (one query reads them all).
pub(crate) const EVENT_TYPES_PK: &str = "EVENT_TYPES";
pub(crate) const EVENT_TYPE_PREFIX: &str = "TYPE#";
pub(crate) fn event_type_sk(record_type: &str) -> String {
    format!("{EVENT_TYPE_PREFIX}{record_type}")
}

/// The partition of a published change's idempotency key (the key's SHA-256, so any text the
/// publisher chose fits a key).
pub(crate) fn publish_key_pk(account_id: &AccountId, key_sha256: &str) -> String {
    format!("PUBKEY#{account_id}#{key_sha256}")
}
pub(crate) const PUBLISH_KEY_SK: &str = "KEY";

/// The partition of an account's snapshots of one record type.
pub fn snapshot_pk(account_id: &AccountId, record_type: &str) -> String {
    format!("SNAP#{account_id}#{record_type}")
}

/// The partition of an account's test-event counter of one minute (minutes since the epoch).
pub(crate) fn test_event_quota_pk(account_id: &AccountId, minute: i64) -> String {
    format!("TESTQ#{account_id}#{minute}")
}

/// The partition of an integration's schedule of rate-limit slots.
pub(crate) fn rate_schedule_pk(account_id: &AccountId, integration_id: &IntegrationId) -> String {
    format!("RATE#{account_id}#{integration_id}")
}

/// The partition of an account's API request counter of one second (seconds since the epoch).
pub(crate) fn account_rate_window_pk(account_id: &AccountId, second: i64) -> String {
    format!("APIRATE#{account_id}#{second}")
}

/// The partition of an account's test events (what each was sent as and what it came to).
pub(crate) fn test_event_pk(account_id: &AccountId) -> String {
    format!("TESTEV#{account_id}")
}
pub(crate) fn test_event_sk(test_event_id: &str) -> String {
    format!("TEST#{test_event_id}")
}

/// The partition of a console session (its id is the random nonce its signed cookie carries).
pub(crate) fn console_session_pk(session_id: &str) -> String {
    format!("CSESSION#{session_id}")
}
pub(crate) const CONSOLE_SESSION_SK: &str = "SESSION";

/// The partition that records a console login link's use (by the link's random nonce).
pub(crate) fn console_link_pk(nonce: &str) -> String {
    format!("CLINK#{nonce}")
}
pub(crate) const CONSOLE_LINK_SK: &str = "USED";

// The notification table:
//
// | item                  | pk                              | sk                  |
// |-----------------------|---------------------------------|---------------------|
// | notice                | `NOTICE#{notice}`               | `NOTICE`            |
// | notification delivery | `NOTICE#{notice}`               | `DLV#{channel}-{n}` |
// | work row              | `NOTICE#{notice}`               | `WORK#{channel}-{n}`|
// | progress shard        | `NOTICE#{notice}`               | `PROGRESS#{shard}`  |
// | recipients quota      | `QUOTA#{account}#{day}`         | `RECIPIENTS`        |
// | supersede pointer     | `SUPERSEDE#{account}#{key}`     | `CURRENT`           |
// | provider reference    | `PROVREF#{provider}#{ref}`      | `REF`               |
//
// and the `inbox` index's key `INBOX#{account}#{recipient}`, the `trouble` index's key
// `TROUBLE#{account}` (the account's deliveries failed for good).

pub fn notice_pk(notice_id: &NoticeId) -> String {
    format!("NOTICE#{notice_id}")
}
pub const NOTIFICATION_DELIVERY_PREFIX: &str = "DLV#";
pub fn notification_delivery_sk(delivery_key: &str) -> String {
    format!("{NOTIFICATION_DELIVERY_PREFIX}{delivery_key}")
}
pub const WORK_PREFIX: &str = "WORK#";
pub fn work_sk(delivery_key: &str) -> String {
    format!("{WORK_PREFIX}{delivery_key}")
}
pub const PROGRESS_PREFIX: &str = "PROGRESS#";
pub fn notice_quota_pk(account_id: &AccountId, day: &str) -> String {
    format!("QUOTA#{account_id}#{day}")
}
pub fn supersede_pk(account_id: &AccountId, key: &str) -> String {
    format!("SUPERSEDE#{account_id}#{key}")
}
pub fn provider_ref_pk(provider: &str, reference: &str) -> String {
    format!("PROVREF#{provider}#{reference}")
}
/// The `inbox` index key of a recipient of an account.
pub fn inbox_key(account_id: &AccountId, recipient: &str) -> String {
    format!("INBOX#{account_id}#{recipient}")
}
/// The `trouble` index key of an account: its notification deliveries that failed for good.
pub fn trouble_key(account_id: &AccountId) -> String {
    format!("TROUBLE#{account_id}")
}
/// A failed delivery's place on its account's `trouble` index: [`time_sort`] of when it failed
/// and `{notice}/{delivery key}`.
pub fn trouble_sort(at: Timestamp, notice_id: &NoticeId, delivery_key: &str) -> String {
    time_sort(at, &format!("{notice_id}/{delivery_key}"))
}
/// Whether `text` has the form of a [`trouble_sort`] position.
pub(crate) fn is_trouble_sort(text: &str) -> bool {
    text.split_once('/')
        .is_some_and(|(position, key)| is_time_sort(position) && crate::ids::is_id_text(key))
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
        assert!(is_time_sort(&time_sort(Timestamp(5), "sub_01")));
        for bad in [
            "",
            "5#a",
            "000000000000005#",
            "000000000000005#a b",
            "x00000000000005#a",
        ] {
            assert!(!is_time_sort(bad), "{bad}");
        }
        let failed = trouble_sort(Timestamp(5), &id("ntc_1"), "email-0");
        assert_eq!(failed, "000000000000005#ntc_1/email-0");
        assert!(is_trouble_sort(&failed) && !is_time_sort(&failed));
        assert!(!is_trouble_sort("000000000000005#ntc_1/") && !is_trouble_sort("5#a/b"));
        assert_eq!(trouble_key(&id("a")), "TROUBLE#a");
    }
}
