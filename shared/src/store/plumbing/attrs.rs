//! The names of stored attributes that expressions, conditions and indexes refer to: one place
//! for each name, so an index's attributes are never spelled twice. Attributes that only
//! `serde_dynamo` reads and writes (a field of an item type) are named by the type's field.

/// The item kind tag (`delivery`, `event`, …).
pub const KIND: &str = "kind";
/// A delivery's or a subscription's status.
pub const STATUS: &str = "status";
/// DynamoDB TTL attribute: epoch **seconds**.
pub const EXPIRES_AT: &str = "expires_at";

/// `due` index (sparse, sharded): retries and operator restarts waiting for the sweep.
pub mod due {
    pub const INDEX: &str = "due";
    pub(crate) const SHARD: &str = "due_shard";
    pub(crate) const AT: &str = "due_at";
}

/// `by_subscription` index (keys only): a subscription's deliveries in change order.
pub mod by_subscription {
    pub const INDEX: &str = "by_subscription";
    pub const KEY: &str = "sub_key";
    pub const SORT: &str = "sub_sort";
}

/// `rollup` index (sparse, sharded): events still `new` or `partial`.
pub mod rollup {
    pub const INDEX: &str = "rollup";
    pub(crate) const SHARD: &str = "rollup_shard";
    pub(crate) const AT: &str = "rollup_at";
}

/// `listing` index (keys only): time listings (an account's events, needs attention, audit).
pub mod listing {
    pub const INDEX: &str = "listing";
    pub const KEY: &str = "list_key";
    pub const SORT: &str = "list_sort";
}

/// `watch` index of the notification table (sparse, sharded): deliveries settling may have to act
/// on, by the instant it may (`store::notification_delivery`).
pub mod watch {
    pub const INDEX: &str = "watch";
    pub(crate) const SHARD: &str = "watch_shard";
    pub(crate) const AT: &str = "watch_at";
}

/// `inbox` index of the notification table (sparse): a recipient's console deliveries in time
/// order (`store::console_inbox`).
pub mod inbox {
    pub const INDEX: &str = "inbox";
    pub const KEY: &str = "inbox_key";
}

/// `trouble` index of the notification table (sparse, all attributes): an account's deliveries
/// that failed for good, in the order they failed (`store::failed_notices`).
pub mod trouble {
    pub const INDEX: &str = "trouble";
    pub const KEY: &str = "trouble_key";
    pub const SORT: &str = "trouble_sort";
}

/// The notification table's optimistic-concurrency counter (every delivery write adds one).
pub(crate) const VERSION: &str = "version";
