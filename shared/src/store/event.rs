//! The event item: one change as the event monitor shows it, in the partition it shares with its
//! deliveries (one query rolls it up). Every event is on its account's time listing; an event
//! still open when the roll-up walk reads that listing (or moved to `partial`) is put on the
//! sharded `rollup` index until it is final. A new event is not: most are final within seconds,
//! and an index entry written at ingest and removed by the roll-up would bill two more writes per
//! change (`docs/history.md`, "The index entries leave the happy path").

use super::attrs::{listing as listing_attrs, rollup, EXPIRES_AT};
use super::expr::{n, s, Expr};
use super::listing::{self, Listing, ListingCursor, ListingError, Page};
use super::read::{self, Query};
use super::write::{built, Write};
use super::{keys, Item, StoreError};
use crate::domain::change::Change;
use crate::domain::event::{
    EventStatus, EventTrigger, InternalStatus, InternalTrigger, EVENT_LIFECYCLE, INTERNAL_LIFECYCLE,
};
use crate::domain::lifecycle::{Status, StatusCondition};
use crate::domain::retention::{event_visible, ttl_seconds};
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, ChangeId};
use aws_sdk_dynamodb::types::Update;
use serde::{Deserialize, Serialize};

/// The `kind` of an event item.
pub const KIND: &str = "event";

/// One change as an event of the event monitor (`docs/lifecycles.md#event-status`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EventRecord {
    pub account_id: AccountId,
    pub change_id: ChangeId,
    pub record_type: String,
    pub record_id: String,
    pub event_code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warehouse: Option<String>,
    pub occurred_at: Timestamp,
    pub event_status: EventStatus,
    #[serde(default)]
    pub internal_status: InternalStatus,
    pub created_at: Timestamp,
    /// Subscriptions that took the change when it was ingested (a delivery each).
    #[serde(default)]
    pub subscribers: u32,
    /// Of those, the ones the worker pushes to (not `poll`). An event with none is rolled up as
    /// soon as it is written; the others are rolled up when their push deliveries finish.
    #[serde(default)]
    pub push_subscribers: u32,

    // What the roll-up and operator restarts add.
    /// TTL, epoch **seconds** (final events only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// When the event last became final (millis).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalized_at: Option<Timestamp>,
    /// When `event_status` last changed (millis).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_changed_at: Option<Timestamp>,
    /// The trigger of the last status move (its table row explains it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_trigger: Option<EventTrigger>,
    /// Incremented by every operator reopen; roll-up writes are conditional on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reopens: Option<i64>,
    /// What a built-in subscriber stored when it handled the event (JSON text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internal_result: Option<String>,

    // Index attributes.
    /// `rollup` index: present only while the event is open and the walk enrolled it (or it moved
    /// to `partial`, or an operator reopened it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollup_shard: Option<String>,
    /// `rollup` index: the event's creation time (millis).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollup_at: Option<i64>,
    /// `listing` index: `EVENTS#{account}` and the creation time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_sort: Option<String>,
}

/// The key of an event.
pub fn key(account_id: &AccountId, change_id: &ChangeId) -> (String, String) {
    (
        keys::event_pk(account_id, change_id),
        keys::EVENT_SK.to_string(),
    )
}

impl EventRecord {
    /// The event ingest records for a change: `new`, taken by `subscribers` (of whom
    /// `push_subscribers` are pushed to), on no index yet.
    pub fn ingested(
        change: &Change,
        subscribers: u32,
        push_subscribers: u32,
        now: Timestamp,
    ) -> Self {
        EventRecord {
            account_id: change.account_id.clone(),
            change_id: change.change_id.clone(),
            record_type: change.record_type.clone(),
            record_id: change.record_id.clone(),
            event_code: change.event_code.clone(),
            warehouse: change.warehouse.clone(),
            occurred_at: change.occurred_at,
            event_status: EventStatus::New,
            internal_status: InternalStatus::New,
            created_at: now,
            subscribers,
            push_subscribers,
            expires_at: None,
            finalized_at: None,
            status_changed_at: None,
            status_trigger: None,
            reopens: None,
            internal_result: None,
            rollup_shard: None,
            rollup_at: None,
            list_key: None,
            list_sort: None,
        }
    }

    pub fn key(&self) -> (String, String) {
        key(&self.account_id, &self.change_id)
    }

    pub fn from_item(item: Item) -> Result<Self, StoreError> {
        super::from_item(item)
    }

    pub fn status(&self) -> EventStatus {
        self.event_status
    }

    /// Whether the event is on the `rollup` index.
    pub fn on_rollup_index(&self) -> bool {
        self.rollup_shard.is_some()
    }

    /// The read filter: a final event past its expiry is treated as gone before TTL deletes it.
    pub fn visible(&self, now: Timestamp) -> bool {
        event_visible(self.status(), self.expires_at, now)
    }
}

/// Records what a built-in subscriber stored when it handled the event: `internal_status` moves
/// to `done` (conditional on the internal lifecycle's `from` states; an event written before the
/// internal status existed has none) together with the result.
pub(crate) fn record_internal_result(
    table: &str,
    account_id: &AccountId,
    change_id: &ChangeId,
    result: &str,
) -> Result<Write, StoreError> {
    let condition = INTERNAL_LIFECYCLE
        .condition(InternalTrigger::RecordInternalResult, InternalStatus::Done)?;
    let mut e = Expr::new()
        .name("#internal", "internal_status")
        .value(":done", s(InternalStatus::Done.to_string()))
        .value(":result", s(result));
    let status_condition = e.status(&condition).replace("#status", "#internal");
    e.names.remove("#status");
    let (pk, sk) = key(account_id, change_id);
    Ok(Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression("SET #internal = :done, internal_result = :result")
            .condition_expression(format!(
                "attribute_exists(pk) AND (attribute_not_exists(#internal) OR {status_condition})"
            ))
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )?))
}

pub use super::keys::events_list_key;

/// The item ingest writes for a new event: on its account's time listing, off the `rollup` index
/// (the roll-up walk enrols it from the listing if it is still open when the walk looks).
pub fn new_item(event: &EventRecord) -> Result<Item, StoreError> {
    let mut event = event.clone();
    let (pk, sk) = event.key();
    event.rollup_shard = None;
    event.rollup_at = None;
    event.list_key = Some(events_list_key(&event.account_id));
    event.list_sort = Some(keys::time_sort(event.created_at, event.change_id.as_str()));
    super::to_item(&event, &pk, &sk, KIND)
}

/// Creates an event unless one exists for its change (the change's idempotency key).
pub fn create(table: &str, event: &EventRecord) -> Result<Write, StoreError> {
    super::write::put_new(table, new_item(event)?)
}

/// The stored name of the event status attribute.
pub(crate) const EVENT_STATUS: &str = "event_status";
/// When the event last became final (millis).
pub(crate) const FINALIZED_AT: &str = "finalized_at";
/// When `event_status` last changed (millis).
pub(crate) const STATUS_CHANGED_AT: &str = "status_changed_at";
/// How many times an operator restart reopened (or touched) the event.
pub(crate) const REOPENS: &str = "reopens";

/// Adds a lifecycle condition to `e`, aimed at the event's `event_status` attribute (the
/// lifecycle's conditions name the generic `status`), and returns its expression text.
fn event_status_condition(e: &mut Expr, condition: &StatusCondition) -> String {
    e.names.insert("#es".into(), EVENT_STATUS.into());
    for (placeholder, value) in &condition.values {
        e.values.insert(placeholder.clone(), s(value));
    }
    for (placeholder, value) in &condition.numbers {
        e.values.insert(placeholder.clone(), n(*value));
    }
    let mut text = condition.expression.clone();
    for (placeholder, _) in &condition.names {
        text = text.replace(placeholder.as_str(), "#es");
    }
    text
}

/// The trigger's stored name (`status_trigger`, written next to every status move).
pub(crate) fn trigger_name(trigger: EventTrigger) -> String {
    serde_json::to_value(trigger)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{trigger:?}"))
}

fn event_update(
    table: &str,
    pk: &str,
    expression: String,
    condition: String,
    e: Expr,
) -> Result<Write, StoreError> {
    Ok(Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(keys::EVENT_SK))
            .update_expression(expression)
            .condition_expression(condition)
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )?))
}

/// What a roll-up's status write is decided on: the event, its stored status and reopen
/// counter as the decision saw them, and its creation time (the `rollup` index's sort key,
/// should the event stay open). Read from the event ([`EventRecord::roll_up_basis`]), or, for an
/// event whose only delivery just settled, known from that delivery
/// ([`crate::delivery::rollup::sole::sole_roll_up`]): a new event never reopened, created with it (at
/// the delivery's `created_at`: ingest writes both with one clock reading).
#[derive(Debug, Clone, PartialEq)]
pub struct RollUpBasis {
    pub pk: String,
    pub status: EventStatus,
    pub reopens: Option<i64>,
    pub created_at: Timestamp,
}

impl EventRecord {
    pub(crate) fn roll_up_basis(&self) -> RollUpBasis {
        RollUpBasis {
            pk: self.key().0,
            status: self.status(),
            reopens: self.reopens,
            created_at: self.created_at,
        }
    }
}

/// A roll-up's status move `basis.status → to` by `trigger`: conditional on the stored status
/// still being the one the decision was made on (the table's `from` states) and on no operator
/// reopen since (the counter as the basis has it). A final status carries the retention and
/// leaves the `rollup` index.
pub fn roll_up(
    table: &str,
    basis: &RollUpBasis,
    trigger: EventTrigger,
    to: EventStatus,
    now: Timestamp,
) -> Result<Write, StoreError> {
    let condition = EVENT_LIFECYCLE.expect(basis.status, trigger, to)?;
    let mut e = Expr::new()
        .value(":to", s(to.as_str()))
        .value(":now", n(now.millis()))
        .value(":trigger", s(trigger_name(trigger)));
    let status_condition = event_status_condition(&mut e, &condition);
    let mut set = vec![
        "#es = :to".to_string(),
        format!("{STATUS_CHANGED_AT} = :now"),
        "status_trigger = :trigger".to_string(),
    ];
    let mut remove: Vec<&str> = Vec::new();
    let pk = &basis.pk;
    if let Some(ttl) = ttl_seconds(to, now) {
        e = e.value(":ttl", n(ttl));
        set.push(format!("{FINALIZED_AT} = :now"));
        set.push(format!("{EXPIRES_AT} = :ttl"));
        remove.extend([rollup::SHARD, rollup::AT]);
    } else {
        // An event that stays open (a delivery waits on its retries) enters the index, where
        // every later walk looks at it; `if_not_exists` leaves an entry that is there alone.
        e = e
            .value(":shard", s(keys::shard_of(pk)))
            .value(":at", n(basis.created_at.millis()));
        set.push(format!(
            "{shard} = if_not_exists({shard}, :shard)",
            shard = rollup::SHARD
        ));
        set.push(format!("{at} = if_not_exists({at}, :at)", at = rollup::AT));
    }
    let fence = match basis.reopens {
        Some(r) => {
            e = e.value(":reopens", n(r));
            format!("{REOPENS} = :reopens")
        }
        None => format!("attribute_not_exists({REOPENS})"),
    };
    let mut expression = format!("SET {}", set.join(", "));
    if !remove.is_empty() {
        expression.push_str(&format!(" REMOVE {}", remove.join(", ")));
    }
    event_update(
        table,
        pk,
        expression,
        format!("({status_condition}) AND {fence}"),
        e,
    )
}

/// Puts an open event the roll-up walk found on its account's listing on the `rollup` index
/// (refused, and harmless, when it is final by now or already there).
pub(crate) fn enrol(table: &str, pk: &str, created_at: Timestamp) -> Result<Write, StoreError> {
    let e = Expr::new()
        .name("#es", EVENT_STATUS)
        .name("#shard", rollup::SHARD)
        .value(":new", s(EventStatus::New.as_str()))
        .value(":partial", s(EventStatus::Partial.as_str()))
        .value(":shard", s(keys::shard_of(pk)))
        .value(":at", n(created_at.millis()));
    event_update(
        table,
        pk,
        format!("SET #shard = :shard, {} = :at", rollup::AT),
        "#es IN (:new, :partial) AND attribute_not_exists(#shard)".into(),
        e,
    )
}

/// One page of the keys of an account's events created in `[from, through]` (the `listing`
/// index, oldest first).
pub(crate) async fn listing_keys_page(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    from: Timestamp,
    through: Timestamp,
    start: Option<Item>,
) -> Result<read::Page, StoreError> {
    read::query_page(
        dynamo,
        &Query {
            table: table.into(),
            index: Some(listing_attrs::INDEX.into()),
            key_condition: "#lk = :lk AND #ls BETWEEN :lo AND :hi".into(),
            expr: Expr::new()
                .name("#lk", listing_attrs::KEY)
                .name("#ls", listing_attrs::SORT)
                .value(":lk", s(events_list_key(account_id)))
                .value(":lo", s(keys::time_sort(from, "")))
                // `~` sorts after every change id: the whole last millisecond is in.
                .value(":hi", s(keys::time_sort(through, "~"))),
            start,
            ..Default::default()
        },
    )
    .await
}

/// Takes a final event (`status`) that is still on the `rollup` index off it.
pub(crate) fn leave_rollup_index(
    table: &str,
    pk: &str,
    status: EventStatus,
) -> Result<Write, StoreError> {
    let e = Expr::new()
        .name("#es", EVENT_STATUS)
        .value(":status", s(status.as_str()));
    event_update(
        table,
        pk,
        format!("REMOVE {}, {}", rollup::SHARD, rollup::AT),
        "#es = :status".into(),
        e,
    )
}

/// An operator restart's reopen of a final event: `sent | failed → partial` with the condition of
/// the lifecycle's reopen rows; back on the `rollup` index, without its expiry, and the reopen
/// counter moved on.
pub fn reopen(table: &str, event: &EventRecord, now: Timestamp) -> Result<Write, StoreError> {
    let trigger = EventTrigger::OperatorRestartReopens;
    let condition = EVENT_LIFECYCLE.expect(event.status(), trigger, EventStatus::Partial)?;
    let (pk, _) = event.key();
    let mut e = Expr::new()
        .value(":partial", s(EventStatus::Partial.as_str()))
        .value(":now", n(now.millis()))
        .value(":trigger", s(trigger_name(trigger)))
        .value(":shard", s(keys::shard_of(&pk)))
        .value(":at", n(event.created_at.millis()))
        .value(":one", n(1));
    let status_condition = event_status_condition(&mut e, &condition);
    event_update(
        table,
        &pk,
        format!(
            "SET #es = :partial, {STATUS_CHANGED_AT} = :now, status_trigger = :trigger, \
             {shard} = :shard, {at} = :at \
             REMOVE {EXPIRES_AT}, {FINALIZED_AT} ADD {REOPENS} :one",
            shard = rollup::SHARD,
            at = rollup::AT,
        ),
        status_condition,
        e,
    )
}

/// An operator restart of a delivery of a still-open event: not a status move, a fence that
/// moves the reopen counter on so no roll-up decided before the restart can land (and puts the
/// event back on the `rollup` index if it had left it).
pub(crate) fn fence_open(table: &str, event: &EventRecord) -> Result<Write, StoreError> {
    let (pk, _) = event.key();
    let e = Expr::new()
        .name("#es", EVENT_STATUS)
        .value(":status", s(event.status().as_str()))
        .value(":one", n(1))
        .value(":shard", s(keys::shard_of(&pk)))
        .value(":at", n(event.created_at.millis()));
    event_update(
        table,
        &pk,
        format!(
            "SET {shard} = if_not_exists({shard}, :shard), {at} = if_not_exists({at}, :at) \
             REMOVE {EXPIRES_AT}, {FINALIZED_AT} ADD {REOPENS} :one",
            shard = rollup::SHARD,
            at = rollup::AT,
        ),
        "#es = :status".into(),
        e,
    )
}

/// Every item of an event's partition (the event and its deliveries), consistent.
pub async fn partition_items(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: &str,
) -> Result<Vec<Item>, StoreError> {
    read::query_all(
        dynamo,
        &Query {
            table: table.into(),
            key_condition: "pk = :pk".into(),
            expr: Expr::new().value(":pk", s(pk)),
            ..Default::default()
        },
    )
    .await
}

/// One page of a shard of the `rollup` index (keys and `rollup_at`), from `start`.
pub(crate) async fn rollup_index_page(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    shard: &str,
    limit: i32,
    start: Option<Item>,
) -> Result<read::Page, StoreError> {
    read::query_page(
        dynamo,
        &Query {
            table: table.into(),
            index: Some(rollup::INDEX.into()),
            key_condition: "#shard = :shard".into(),
            expr: Expr::new()
                .name("#shard", rollup::SHARD)
                .value(":shard", s(shard)),
            limit: Some(limit),
            start,
            ..Default::default()
        },
    )
    .await
}

/// What [`list_events`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventQuery {
    /// Only these statuses (empty: all).
    pub statuses: Vec<EventStatus>,
    /// Created at or after.
    pub from: Option<Timestamp>,
    /// Created before.
    pub to: Option<Timestamp>,
    /// Oldest first instead of newest first.
    pub oldest_first: bool,
    pub limit: u32,
    pub cursor: Option<String>,
    /// Only events of this event code (the console's filter; `None`: all).
    pub event_code: Option<String>,
    /// Only events of this internal status (the console's filter; `None`: all).
    pub internal_status: Option<InternalStatus>,
    /// Only events of this record type (`None`: all).
    pub record_type: Option<String>,
    /// Only events of this record id (`None`: all). Like the other filters, applied to the
    /// events each listing page reads: no extra request, but a rare record's events can take
    /// many short pages, each with a cursor.
    pub record_id: Option<String>,
}

/// An account's events by creation time (see [`EventQuery`]); expired events are never listed.
pub async fn list_events(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    q: &EventQuery,
    now: Timestamp,
) -> Result<Page<EventRecord>, ListingError> {
    let cursor = q
        .cursor
        .as_deref()
        .map(|c| ListingCursor::decode(c, "events", account_id))
        .transpose()?;
    let keep = move |item: &Item| {
        item.get("kind")
            .and_then(|v| v.as_s().ok())
            .map(String::as_str)
            == Some("event")
            && EventRecord::from_item(item.clone()).is_ok_and(|e| {
                e.visible(now)
                    && (q.statuses.is_empty() || q.statuses.contains(&e.status()))
                    && q.event_code.as_ref().is_none_or(|c| *c == e.event_code)
                    && q.internal_status.is_none_or(|i| i == e.internal_status)
                    && q.record_type.as_ref().is_none_or(|r| *r == e.record_type)
                    && q.record_id.as_ref().is_none_or(|r| *r == e.record_id)
            })
    };
    let page = listing::page(
        dynamo,
        table,
        Listing {
            list: "events",
            list_key: keys::events_list_key(account_id),
            lower: q.from.map(|t| keys::time_sort(t, "")),
            upper: q.to.map(|t| keys::time_sort(t, "")),
            forward: q.oldest_first,
            limit: q.limit,
            cursor,
            keep: &keep,
        },
    )
    .await?;
    Ok(page.parsed(EventRecord::from_item)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;

    fn event(status: EventStatus, reopens: Option<i64>) -> EventRecord {
        EventRecord {
            account_id: "a".parse().unwrap(),
            change_id: crate::ids::id("c"),
            record_type: "catalog_item".into(),
            record_id: "r".into(),
            event_code: "catalog_item.updated".into(),
            warehouse: None,
            occurred_at: Timestamp(1),
            event_status: status,
            internal_status: InternalStatus::New,
            created_at: Timestamp(1_000),
            subscribers: 1,
            push_subscribers: 1,
            expires_at: None,
            finalized_at: None,
            status_changed_at: None,
            status_trigger: None,
            reopens,
            internal_result: None,
            rollup_shard: None,
            rollup_at: None,
            list_key: None,
            list_sort: None,
        }
    }

    fn update(w: Write) -> Update {
        match w {
            Write::Update(u) => u,
            other => panic!("not an update: {other:?}"),
        }
    }

    #[test]
    fn conditions_aim_at_event_status() {
        let c = EVENT_LIFECYCLE
            .expect(
                EventStatus::Partial,
                EventTrigger::NothingWaitsNoneFailed,
                EventStatus::Sent,
            )
            .unwrap();
        let mut e = Expr::new();
        let text = event_status_condition(&mut e, &c);
        assert_eq!(text, "#es IN (:status_from_0)");
        assert_eq!(e.names["#es"], "event_status");
        assert_eq!(e.values[":status_from_0"], s("partial"));
        assert!(!e.names.contains_key("#status"));
        let reopen = EVENT_LIFECYCLE
            .condition(EventTrigger::OperatorRestartReopens, EventStatus::Partial)
            .unwrap();
        assert_eq!(reopen.allowed(), vec!["sent", "failed"]);
    }

    #[test]
    fn triggers_are_stored_by_their_serde_name() {
        assert_eq!(
            trigger_name(EventTrigger::NothingWaitsSomeFailed),
            "nothing_waits_some_failed"
        );
    }

    #[test]
    fn a_new_event_is_on_its_accounts_listing_and_off_the_rollup_index() {
        let item = new_item(&event(EventStatus::New, None)).unwrap();
        assert!(!item.contains_key(rollup::SHARD));
        assert!(!item.contains_key(rollup::AT));
        assert_eq!(item["list_key"].as_s().unwrap(), "EVENTS#a");
        let back = EventRecord::from_item(item).unwrap();
        assert!(!back.on_rollup_index());
    }

    #[test]
    fn an_open_event_is_enrolled_once_and_a_move_to_partial_enters_the_index() {
        let u = update(enrol("t", "EVT#a#c", Timestamp(1_000)).unwrap());
        assert_eq!(
            u.update_expression(),
            "SET #shard = :shard, rollup_at = :at"
        );
        assert_eq!(
            u.condition_expression().unwrap(),
            "#es IN (:new, :partial) AND attribute_not_exists(#shard)"
        );
        assert_eq!(
            u.expression_attribute_values().unwrap()[":shard"],
            s(keys::shard_of("EVT#a#c"))
        );
        let e = event(EventStatus::New, None);
        let partial = update(
            roll_up(
                "t",
                &e.roll_up_basis(),
                EventTrigger::DeliveriesStillWaiting,
                EventStatus::Partial,
                Timestamp(5),
            )
            .unwrap(),
        );
        let expression = partial.update_expression();
        assert!(expression.contains("rollup_shard = if_not_exists(rollup_shard, :shard)"));
        assert!(expression.contains("rollup_at = if_not_exists(rollup_at, :at)"));
        assert!(!expression.contains("REMOVE"));
    }

    #[test]
    fn a_final_roll_up_carries_its_retention_leaves_the_index_and_is_fenced_by_reopens() {
        let e = event(EventStatus::New, Some(2));
        let move_to = crate::domain::event::roll_up_move(
            EventStatus::New,
            true,
            &[crate::domain::event::DeliveryFacts {
                method_is_poll: false,
                transmit: crate::domain::integration_delivery::TransmitStatus::Sent,
            }],
        );
        let (trigger, to) = move_to.expect("all sent is a move");
        let u = update(roll_up("t", &e.roll_up_basis(), trigger, to, Timestamp(5_000)).unwrap());
        let expression = u.update_expression();
        assert!(expression.contains("expires_at = :ttl"));
        assert!(expression.contains("REMOVE rollup_shard, rollup_at"));
        let condition = u.condition_expression().unwrap();
        assert!(condition.contains("#es"));
        assert!(condition.ends_with("reopens = :reopens"));
        assert_eq!(u.expression_attribute_names().unwrap()["#es"], EVENT_STATUS);
    }

    #[test]
    fn a_roll_up_of_a_never_reopened_event_needs_no_reopen_since() {
        let e = event(EventStatus::New, None);
        let w = roll_up(
            "t",
            &e.roll_up_basis(),
            EventTrigger::OperatorRestartReopens,
            EventStatus::Partial,
            Timestamp(1),
        );
        // `new → partial` is not a reopen row: the table refuses to build it.
        assert!(matches!(w, Err(StoreError::Transition(_))));
        let fenced = update(fence_open("t", &e).unwrap());
        assert!(fenced.update_expression().contains("ADD reopens :one"));
    }

    #[test]
    fn a_reopen_puts_a_final_event_back_on_the_index_without_its_expiry() {
        let u = update(reopen("t", &event(EventStatus::Sent, Some(1)), Timestamp(9)).unwrap());
        let expression = u.update_expression();
        assert!(expression.contains("rollup_shard = :shard"));
        assert!(expression.contains("REMOVE expires_at, finalized_at"));
        assert!(expression.contains("ADD reopens :one"));
    }

    #[test]
    fn an_internal_result_moves_the_internal_status_by_its_table() {
        let w = record_internal_result("t", &id("a"), &id("c"), "{\"ok\":true}").unwrap();
        let Write::Update(u) = w else {
            panic!("not an update")
        };
        assert_eq!(u.key()["pk"].as_s().unwrap(), "EVT#a#c");
        let names = u.expression_attribute_names().unwrap();
        assert_eq!(names["#internal"], "internal_status");
        assert!(!names.contains_key("#status"));
        assert!(u.condition_expression().unwrap().contains("#internal"));
    }
}
