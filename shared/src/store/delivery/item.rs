//! The delivery item itself: its shape, its key and the work it names, the records ingest
//! creates, a read by key, and its expiry.

use crate::domain::change::Change;
use crate::domain::delivery_method::DeliveryMethod;
use crate::domain::event::DeliveryFacts;
use crate::domain::integration_delivery::{
    lease_held, transmit_status, DeliveryStatus, TransmitStatus, FIRST_DISPATCH_GRACE,
};
use crate::domain::retention::delivery_visible;
use crate::domain::time::Timestamp;
use crate::domain::trace_context;
use crate::ids::{AccountId, ChangeId, DeliveryId, IntegrationId, ReplayJobId, SubscriptionId};
use crate::store::attrs::EXPIRES_AT;
use crate::store::expr::{n, s, Expr};
use crate::store::read;
use crate::store::update::conditional_update;
use crate::store::write::{built, Write};
use crate::store::{from_item, keys, Item, StoreError};
use aws_sdk_dynamodb::types::Update;
use serde::{Deserialize, Serialize};

/// The `kind` of a delivery item.
pub const KIND: &str = "delivery";

/// One numbered attempt's outcome, kept on its delivery.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AttemptRecord {
    pub number: u32,
    pub at: Timestamp,
    /// `success`, `transient`, `permanent` or `configuration_loss`.
    pub class: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    pub duration_ms: u64,
    /// The start of the response body or the error, truncated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The classified error of an attempt that got no HTTP answer (`timeout`, `connect`, `tls`,
    /// `transport`, `forbidden_target`, `signing_secret`, `endpoint_credential`, `token_endpoint`,
    /// `configuration_loss`; the worker's
    /// classification, kept as it decided); absent for an answer, and on attempts recorded
    /// before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A delivery item, whole: the progress of one subscription × change, the marks operator
/// restarts and the pull cursor leave, and its index attributes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Delivery {
    pub delivery_id: DeliveryId,
    pub account_id: AccountId,
    pub change_id: ChangeId,
    pub subscription_id: SubscriptionId,
    pub integration_id: IntegrationId,
    pub method: DeliveryMethod,
    pub status: DeliveryStatus,
    /// The changed record's id (the history's record-id filter); absent on deliveries written
    /// before it was kept, which that filter finds through their payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_id: Option<String>,
    /// Attempts made in the current progression (reset by an operator restart).
    #[serde(default)]
    pub attempts: u32,
    /// The only delivery its change made: its settling alone decides its event's prompt
    /// roll-up, which is then written without reading the event
    /// ([`crate::delivery::rollup::sole::sole_roll_up`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sole: bool,
    /// The envelope delivered to the adapter (JSON text); absent for `skipped_filter`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The change's time, for replay windows.
    pub occurred_at: Timestamp,
    /// Earliest time of the next attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<Timestamp>,
    /// The start of the rate-limit slot its next attempt waits for (its integration's limit,
    /// [`crate::domain::rate_limit`]): no claim before it, and none of its copies reserves
    /// another; removed by the attempt's outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_slot: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_http_status: Option<u16>,
    #[serde(default)]
    pub attempt_log: Vec<AttemptRecord>,
    /// The trace its change carried (32 hex digits), for the attempts' `traceparent`; absent,
    /// and no byte stored, when the change carried none (the trace is then the change id's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,

    // Marks of operator restarts and the pull cursor.
    /// Operator restarts (retry or replay) of this delivery.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub restarts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted_by: Option<String>,
    /// The replay job that last restarted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_job: Option<ReplayJobId>,
    /// When it was last delivered (a push acknowledgement or a cursor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<Timestamp>,
    /// A success's end of its subscription's dead run, not yet made: the run it read before its
    /// outcome was saved. The write that takes the run off the subscription removes it in the same
    /// transaction, so the end is made once however often it is tried, by the worker that
    /// delivered or by whoever next meets the delivery settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_run_seen: Option<u32>,
    /// A built-in handler's result (JSON text), kept with its successful outcome so that its
    /// recording on the event can be made again by whoever next meets the delivery settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internal_result: Option<String>,
    /// TTL, epoch **seconds** (set once the delivery or its event is final).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,

    // Index attributes.
    /// `due` index: the shard while a retry or a restart waits for the sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_shard: Option<String>,
    /// `due` index: when it is due (millis).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_at: Option<i64>,
    /// `listing` index: `ATTENTION#{account}` while dead or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_sort: Option<String>,
    /// `by_subscription` index (pull deliveries): the subscription and the change order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_sort: Option<String>,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// One delivery's work, as the delivery queue carries it: a message's body is one of these, or an
/// array of up to ten of one account's (`delivery::dispatch::publish::pack`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeliveryWork {
    pub account_id: AccountId,
    pub change_id: ChangeId,
    pub subscription_id: SubscriptionId,
}

/// The key of a delivery.
pub fn key(
    account_id: &AccountId,
    change_id: &ChangeId,
    subscription_id: &SubscriptionId,
) -> (String, String) {
    (
        keys::event_pk(account_id, change_id),
        keys::delivery_sk(subscription_id),
    )
}

impl Delivery {
    /// The delivery ingest records of a change for one subscription: `pending` with its projected
    /// `payload`, or `skipped_filter` (the change-time filter refused it) with none. `sole`: the
    /// only delivery the change makes.
    pub fn ingested(
        change: &Change,
        subscription_id: &SubscriptionId,
        integration_id: &IntegrationId,
        method: DeliveryMethod,
        payload: Option<String>,
        sole: bool,
        now: Timestamp,
    ) -> Self {
        let matched = payload.is_some();
        Delivery {
            delivery_id: keys::delivery_id(&change.change_id, subscription_id),
            account_id: change.account_id.clone(),
            change_id: change.change_id.clone(),
            subscription_id: subscription_id.clone(),
            integration_id: integration_id.clone(),
            method,
            record_id: Some(change.record_id.clone()),
            status: if matched {
                DeliveryStatus::Pending
            } else {
                DeliveryStatus::SkippedFilter
            },
            attempts: 0,
            sole,
            payload,
            created_at: now,
            updated_at: now,
            occurred_at: change.occurred_at,
            not_before: matched.then_some(now),
            lease_until: None,
            rate_slot: None,
            lease_token: None,
            last_error: None,
            last_http_status: None,
            attempt_log: Vec::new(),
            trace_id: change
                .trace_id
                .as_deref()
                .and_then(trace_context::normalized_trace_id),
            restarts: 0,
            restarted_at: None,
            restarted_by: None,
            replay_job: None,
            delivered_at: None,
            dead_run_seen: None,
            internal_result: None,
            expires_at: None,
            due_shard: None,
            due_at: None,
            list_key: None,
            list_sort: None,
            sub_key: None,
            sub_sort: None,
        }
    }

    pub fn key(&self) -> (String, String) {
        key(&self.account_id, &self.change_id, &self.subscription_id)
    }

    pub fn work(&self) -> DeliveryWork {
        DeliveryWork {
            account_id: self.account_id.clone(),
            change_id: self.change_id.clone(),
            subscription_id: self.subscription_id.clone(),
        }
    }

    /// Whether the delivery is on the dispatcher's `due` index.
    pub fn on_due_index(&self) -> bool {
        self.due_shard.is_some()
    }

    pub fn from_item(item: Item) -> Result<Self, StoreError> {
        from_item(item)
    }

    /// The Delivery log's word for the delivery at `now` (`None`: `skipped_filter`, which the
    /// log does not count as a delivery).
    pub fn transmit_status(&self, now: Timestamp) -> Option<TransmitStatus> {
        transmit_status(self.status, lease_held(self.lease_until, now))
    }

    /// What the roll-up counts of this delivery; `None` when the subscriber did not take the
    /// event (`skipped_filter`).
    pub fn facts(&self, now: Timestamp) -> Option<DeliveryFacts> {
        self.transmit_status(now).map(|transmit| DeliveryFacts {
            method_is_poll: self.method.is_poll(),
            transmit,
        })
    }

    /// The read filter: a delivery past its expiry is treated as gone before TTL deletes it.
    pub fn visible(&self, now: Timestamp) -> bool {
        delivery_visible(self.expires_at, now)
    }

    /// A push delivery whose first dispatch went missing: still `pending` with no attempt made,
    /// no live lease, nothing scheduled on the `due` index, and ingested more than
    /// [`FIRST_DISPATCH_GRACE`] ago, or waiting for a rate-limit slot that came more than that
    /// long ago. New push work is published from the table's stream and reaches the worker within
    /// seconds (a rate-limited one at its slot); a delivery in this state lost its stream record
    /// or its message (or the message went to the dead-letter queue), and nothing else would ever
    /// publish it again.
    pub(crate) fn first_dispatch_lost(&self, now: Timestamp) -> bool {
        self.status == DeliveryStatus::Pending
            && !self.method.is_poll()
            && self.attempts == 0
            && !self.on_due_index()
            && !lease_held(self.lease_until, now)
            && self.created_at.plus(FIRST_DISPATCH_GRACE) <= now
            && (self.rate_slot).is_none_or(|slot| slot.plus(FIRST_DISPATCH_GRACE) <= now)
    }
}

/// A consistent read of the delivery `work` names.
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    work: &DeliveryWork,
) -> Result<Option<Delivery>, StoreError> {
    let (pk, sk) = key(&work.account_id, &work.change_id, &work.subscription_id);
    read::get(dynamo, table, &pk, &sk)
        .await?
        .map(from_item)
        .transpose()
}

/// Whether the delivery `work` names exists (a consistent read; the item is not parsed).
pub async fn exists(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    work: &DeliveryWork,
) -> Result<bool, StoreError> {
    let (pk, sk) = key(&work.account_id, &work.change_id, &work.subscription_id);
    Ok(read::get(dynamo, table, &pk, &sk).await?.is_some())
}

/// Sets (`Some`) or removes (`None`) a delivery's expiry (epoch seconds), if it still exists.
pub fn set_expiry(table: &str, d: &Delivery, ttl: Option<i64>) -> Result<Write, StoreError> {
    let (pk, sk) = d.key();
    let update = Update::builder()
        .table_name(table)
        .key("pk", s(pk))
        .key("sk", s(sk))
        .condition_expression("attribute_exists(pk)");
    let update = match ttl {
        Some(ttl) => update
            .update_expression(format!("SET {EXPIRES_AT} = :ttl"))
            .expression_attribute_values(":ttl", n(ttl)),
        None => update.update_expression(format!("REMOVE {EXPIRES_AT}")),
    };
    Ok(Write::Update(built(update.build())?))
}

/// The work a delivery's key names (`EVT#{account}#{change}` / `DLV#{subscription}`).
pub fn work_from_key(pk: &str, sk: &str) -> Option<DeliveryWork> {
    let (account_id, change_id) = keys::parse_event_pk(pk)?;
    let subscription_id = sk.strip_prefix(keys::DELIVERY_PREFIX)?;
    Some(DeliveryWork {
        account_id: AccountId::from_stored(account_id),
        change_id: ChangeId::from_stored(change_id),
        subscription_id: SubscriptionId::from_stored(subscription_id),
    })
}

/// A conditional update of `d`'s item: `expression` under `condition`, with `e`'s names and
/// values (the operator's restart and the pull cursor's cover).
pub(super) fn update_delivery(
    table: &str,
    d: &Delivery,
    expression: String,
    condition: String,
    e: &Expr,
) -> Result<Write, StoreError> {
    let delivery_key = key(&d.account_id, &d.change_id, &d.subscription_id);
    conditional_update(table, delivery_key, expression, condition, e)
}

/// A webhook delivery of change `01C` to `sub1` of `acct`, for the crate's unit tests.
#[cfg(test)]
pub(crate) fn test_delivery(status: DeliveryStatus, attempts: u32) -> Delivery {
    let change = crate::domain::change::Change {
        account_id: "acct".parse().unwrap(),
        change_id: crate::ids::id("01C"),
        record_type: "order".into(),
        record_id: "o-1".into(),
        event_code: "order.updated".into(),
        warehouse: None,
        occurred_at: Timestamp(900),
        changed_fields: Vec::new(),
        record: Default::default(),
        trace_id: None,
    };
    let mut d = Delivery::ingested(
        &change,
        &"sub1".parse().unwrap(),
        &"int1".parse().unwrap(),
        DeliveryMethod::Webhook,
        Some("{}".into()),
        false,
        Timestamp(1_000),
    );
    d.status = status;
    d.attempts = attempts;
    d
}

/// A failed-looking delivery on the attention and subscription listings, with an expiry, for the
/// crate's unit tests.
#[cfg(test)]
pub(crate) fn test_listed_delivery(status: DeliveryStatus, method: DeliveryMethod) -> Delivery {
    Delivery {
        method,
        not_before: None,
        last_error: Some("boom".into()),
        last_http_status: Some(500),
        expires_at: Some(99),
        list_key: Some("ATTENTION#acct".into()),
        list_sort: Some("x".into()),
        sub_key: Some("sub1".into()),
        sub_sort: Some("01C".into()),
        ..test_delivery(status, 3)
    }
}

#[cfg(test)]
mod tests {
    use super::test_delivery as delivery;
    use super::*;
    use crate::domain::time::SECOND;
    use crate::ids::id;

    #[test]
    fn keys_name_their_work() {
        let w = work_from_key(
            &keys::event_pk(&id("a1"), &id("c1")),
            &keys::delivery_sk(&id("s1")),
        )
        .unwrap();
        assert_eq!(
            w,
            DeliveryWork {
                account_id: "a1".parse().unwrap(),
                change_id: id("c1"),
                subscription_id: "s1".parse().unwrap()
            }
        );
        assert!(work_from_key("ACCT#a", "DLV#s").is_none());
        assert!(work_from_key("EVT#a#c", "EVENT").is_none());
    }

    /// A new push delivery ingested at `created`.
    fn push_delivery(created: Timestamp) -> Delivery {
        let mut d = delivery(DeliveryStatus::Pending, 0);
        d.created_at = created;
        d.updated_at = created;
        d
    }

    #[test]
    fn a_first_dispatch_is_lost_only_when_nothing_else_can_bring_the_delivery_back() {
        let created = Timestamp(1_700_000_000_000);
        let due = created.plus(FIRST_DISPATCH_GRACE);
        let d = push_delivery(created);
        assert!(d.first_dispatch_lost(due));
        assert!(
            !d.first_dispatch_lost(due.minus(SECOND)),
            "within the grace"
        );

        let mut scheduled = push_delivery(created);
        scheduled.due_shard = Some("3".into());
        assert!(!scheduled.first_dispatch_lost(due), "the sweep has it");

        let mut leased = push_delivery(created);
        leased.lease_until = Some(due.plus(SECOND));
        assert!(!leased.first_dispatch_lost(due), "a worker holds it");
        leased.lease_until = Some(due);
        assert!(leased.first_dispatch_lost(due), "the lease lapsed");

        let mut waiting = push_delivery(created);
        waiting.rate_slot = Some(due.minus(SECOND));
        assert!(!waiting.first_dispatch_lost(due), "its rate slot is near");
        assert!(
            waiting.first_dispatch_lost(due.minus(SECOND).plus(FIRST_DISPATCH_GRACE)),
            "its slot came and went"
        );

        let mut attempted = push_delivery(created);
        attempted.attempts = 1;
        assert!(!attempted.first_dispatch_lost(due), "not a first dispatch");

        let mut pull = push_delivery(created);
        pull.method = DeliveryMethod::Poll;
        assert!(
            !pull.first_dispatch_lost(due),
            "pull deliveries wait for a cursor"
        );

        for status in [
            DeliveryStatus::Delivered,
            DeliveryStatus::Retrying,
            DeliveryStatus::Dead,
            DeliveryStatus::Failed,
            DeliveryStatus::SkippedFilter,
        ] {
            let mut moved = push_delivery(created);
            moved.status = status;
            assert!(!moved.first_dispatch_lost(due), "{status}");
        }
    }

    #[test]
    fn a_delivery_key_names_its_work_and_nothing_else_does() {
        let (pk, sk) = key(&id("acct"), &id("01C"), &id("sub1"));
        let work = work_from_key(&pk, &sk).unwrap();
        assert_eq!(work.subscription_id.as_str(), "sub1");
        assert_eq!(work.change_id.as_str(), "01C");
        assert!(work_from_key(&pk, "EVENT").is_none());
        assert!(work_from_key("ACCT#a", &sk).is_none());
    }
}
