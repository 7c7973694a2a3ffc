//! The notice item: a request to tell recipients something on some channels, and the partition
//! of the notification table that everything about it lives in:
//!
//! | item              | pk                                 | sk              | module | expires (`expires_at`) |
//! |-------------------|------------------------------------|-----------------|--------|------------------------|
//! | notice            | `NOTICE#{notice}`                  | `NOTICE`        | here | N after each move of it and each requeue of one of its deliveries; never while `requested` |
//! | delivery          | `NOTICE#{notice}`                  | `DLV#{key}`     | [`super::notification_delivery`] (console ones: [`super::console_inbox`]) | R after it comes to rest (sent or final; console: at creation); a requeue removes it |
//! | dispatch work     | `NOTICE#{notice}`                  | `WORK#{key}`    | [`super::notification_work`] | never: deleted in the write that takes its delivery out of the queue |
//! | progress shard    | `NOTICE#{notice}`                  | `PROGRESS#{n}`  | [`super::notice_progress`] | N after each count on it, and with the notice at each move of it |
//! | provider ref      | `PROVREF#{provider}#{reference}`   | `REF`           | [`super::provider_ref`] | with its delivery's `sent` expiry |
//! | supersede pointer | `SUPERSEDE#{account}#{key}`        | `CURRENT`       | [`super::supersede_pointer`] | N after the fan-out that made its notice current |
//! | daily quota       | `QUOTA#{account}#{yyyy-mm-dd}`     | `RECIPIENTS`    | [`super::notice_quota`] | after its day |
//!
//! R is the events' retention (thirty days); N is R plus the bound within which an opened
//! delivery comes to rest ([`crate::domain::retention::NOTICE_SETTLE_BOUND`], seven days), so a
//! notice and its shards outlive every delivery of theirs (the reasoning:
//! [`crate::domain::retention`]). The moves that stamp the notice's shards with it are in
//! [`super::notice_retention`]. Readers treat an item past its expiry as gone (TTL deletes
//! lazily): [`NoticeRecord::visible`].
//!
//! Notices are written by the notices API ([`create`]) and, in a transaction with a
//! subscription's pause, by the delivery worker ([`request`]); the notification pipeline
//! (`notify`) fans each one out to its deliveries. The deterministic id makes a repeated
//! request a no-op. A notice's own status follows [`NOTICE_LIFECYCLE`]; every status write here
//! is conditional on the table's `from` states for its move.

use super::attrs::EXPIRES_AT;
use super::expr::{n, s, Expr};
use super::read::{self, Query};
use super::update::conditional_update;
use super::write::put_new;
use super::write::Write;
use super::{from_item, to_item, Item, StoreError};
use crate::domain::lifecycle::Status;
use crate::domain::notice::{NoticeStatus, NoticeTrigger, NOTICE_LIFECYCLE};
use crate::domain::notification_delivery::NotificationStatus;
use crate::domain::retention::{
    notice_status_ttl_seconds, notice_ttl_seconds, notification_visible,
};
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, NoticeId, SubscriptionId};
use aws_sdk_dynamodb::types::AttributeValue;
use serde::{de::DeserializeOwned, Deserialize, Serialize};

pub const NOTICE_SK: &str = "NOTICE";
/// The `kind` of a notice item.
pub(crate) const NOTICE_KIND: &str = "notice";
/// The status a notice is requested in; the fan-out picks up notices in this status.
pub(crate) const REQUESTED: &str = "requested";

pub use super::keys::notice_pk;

/// The key of a notice.
pub fn key(notice_id: &NoticeId) -> (String, String) {
    (notice_pk(notice_id), NOTICE_SK.to_string())
}

/// Who a notice is for.
///
/// Stored as a plain string when it is only an address (the administrator notice's email
/// addresses), else as an object. A plain string is the recipient's email address on the email
/// channel and its identity everywhere else; an object names each channel's address, and a channel
/// it names no address for is unavailable for that recipient (the delivery is skipped with that
/// reason).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum Recipient {
    Address(String),
    Contact(Contact),
}

/// A recipient with an address per channel.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Contact {
    /// The recipient's identity: its console inbox, and how deliveries name it.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// A Slack incoming-webhook URL (a secret: never shown by the API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack_webhook_url: Option<String>,
}

impl Recipient {
    /// The recipient's identity (its console inbox, and how deliveries name it).
    pub fn id(&self) -> &str {
        match self {
            Recipient::Address(a) => a,
            Recipient::Contact(c) => &c.id,
        }
    }

    /// The recipient's address on `channel`, if it has one.
    pub fn address(&self, channel: &str) -> Option<&str> {
        match (self, channel) {
            (Recipient::Address(a), "email") => a.contains('@').then_some(a.as_str()),
            (Recipient::Address(_), "slack") => None,
            (Recipient::Address(a), _) => Some(a),
            (Recipient::Contact(c), "email") => c.email.as_deref(),
            (Recipient::Contact(c), "slack") => c.slack_webhook_url.as_deref(),
            (Recipient::Contact(c), _) => Some(&c.id),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NoticeRequest {
    pub notice_id: NoticeId,
    pub account_id: AccountId,
    /// Email addresses (email channel) and account ids (console channel), or contacts.
    pub recipients: Vec<Recipient>,
    /// `email`, `slack`, `console`.
    pub channels: Vec<String>,
    pub subject: String,
    pub body: String,
    /// Why the notice exists, e.g. `subscription_paused`.
    pub reason: String,
    pub created_at: Timestamp,
    /// After this instant the notice's unsent deliveries expire instead of being sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Timestamp>,
    /// A later notice of the same account with the same key supersedes this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersede_key: Option<String>,
}

/// The one notice that a subscription's pause at `paused_at` requests.
pub fn subscription_paused_notice(
    account_id: &AccountId,
    subscription_id: &SubscriptionId,
    admin_emails: &[String],
    dead_count: u32,
    paused_at: Timestamp,
) -> NoticeRequest {
    paused_notice(
        account_id,
        subscription_id,
        admin_emails,
        &format!("after {dead_count} deliveries in a row ended dead"),
        paused_at,
    )
}

/// The one notice that a subscription's pause on a 410 Gone (it chose to pause on gone) requests.
pub(crate) fn subscription_gone_notice(
    account_id: &AccountId,
    subscription_id: &SubscriptionId,
    admin_emails: &[String],
    paused_at: Timestamp,
) -> NoticeRequest {
    paused_notice(
        account_id,
        subscription_id,
        admin_emails,
        "because its endpoint answered 410 Gone (the subscription pauses on gone)",
        paused_at,
    )
}

fn paused_notice(
    account_id: &AccountId,
    subscription_id: &SubscriptionId,
    admin_emails: &[String],
    why: &str,
    paused_at: Timestamp,
) -> NoticeRequest {
    NoticeRequest {
        notice_id: NoticeId::from_stored(format!("pause_{subscription_id}_{}", paused_at.millis())),
        account_id: account_id.clone(),
        recipients: admin_emails
            .iter()
            .map(|e| Recipient::Address(e.clone()))
            .collect(),
        channels: vec!["email".into(), "console".into()],
        subject: format!("Subscription {subscription_id} was paused"),
        body: format!(
            "Subscription {subscription_id} was paused at {paused_at} {why}. Changes made while it is paused are skipped for good: resuming does not \
             deliver them. Fix the integration, then resume the subscription; dead deliveries can be retried \
             or replayed."
        ),
        reason: "subscription_paused".into(),
        created_at: paused_at,
        deadline: None,
        supersede_key: None,
    }
}

/// A notice as stored: the request (flattened: the stored attribute names are the request's)
/// plus its status and bookkeeping. Reads a bare [`NoticeRequest`] item (the auto-pause notice)
/// as well.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NoticeRecord {
    #[serde(flatten)]
    pub request: NoticeRequest,
    pub status: NoticeStatus,
    /// The caller's idempotency key (the notice id is derived from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// A digest of the request, so that a repeated key with a different request is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fanned_out_at: Option<Timestamp>,
    /// Deliveries the fan-out planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliveries: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withdrawn_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<NoticeId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_at: Option<Timestamp>,
    /// TTL, epoch **seconds**: stamped by every move out of `requested` and by a requeue of one
    /// of its deliveries ([`crate::domain::retention::notice_ttl_seconds`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

impl NoticeRecord {
    /// A new notice in `requested`.
    pub fn requested(request: NoticeRequest) -> Self {
        NoticeRecord {
            request,
            status: NoticeStatus::Requested,
            idempotency_key: None,
            request_hash: None,
            fanned_out_at: None,
            deliveries: None,
            withdrawn_at: None,
            superseded_by: None,
            superseded_at: None,
            expires_at: None,
        }
    }

    /// The read filter: a notice past its expiry is gone (with its whole partition), whatever
    /// TTL has deleted yet.
    pub fn visible(&self, now: Timestamp) -> bool {
        notification_visible(self.expires_at, now)
    }
}

/// The item of a notice request, in `status = requested`.
pub fn notice_item(notice: &NoticeRequest) -> Result<Item, StoreError> {
    let mut item = to_item(
        notice,
        &notice_pk(&notice.notice_id),
        NOTICE_SK,
        NOTICE_KIND,
    )?;
    item.insert("status".into(), s(REQUESTED));
    Ok(item)
}

/// Requests a notice unless it exists (the delivery worker's pause notice, in the pause's
/// transaction).
pub fn request(table: &str, notice: &NoticeRequest) -> Result<Write, StoreError> {
    put_new(table, notice_item(notice)?)
}

/// Creates a notice the API received unless its id (from the idempotency key) exists.
pub fn create(table: &str, notice: &NoticeRecord) -> Result<Write, StoreError> {
    put_new(
        table,
        to_item(
            notice,
            &notice_pk(&notice.request.notice_id),
            NOTICE_SK,
            NOTICE_KIND,
        )?,
    )
}

/// A consistent read of a notice.
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    notice_id: &NoticeId,
) -> Result<Option<NoticeRecord>, StoreError> {
    let (pk, sk) = key(notice_id);
    read::get(dynamo, table, &pk, &sk)
        .await?
        .map(from_item)
        .transpose()
}

/// `requested → active`: the notice was fanned out to `deliveries` deliveries at `at`.
pub(crate) fn activate(
    table: &str,
    notice_id: &NoticeId,
    at: Timestamp,
    deliveries: u32,
) -> Result<Write, StoreError> {
    moved(
        table,
        notice_id,
        NoticeTrigger::FanOut,
        NoticeStatus::Active,
        at,
        &[
            ("fanned_out_at", n(at.millis())),
            ("deliveries", n(deliveries)),
        ],
    )
}

/// `requested | active → withdrawn` at `at`.
pub fn withdraw(table: &str, notice_id: &NoticeId, at: Timestamp) -> Result<Write, StoreError> {
    moved(
        table,
        notice_id,
        NoticeTrigger::Withdraw,
        NoticeStatus::Withdrawn,
        at,
        &[("withdrawn_at", n(at.millis()))],
    )
}

/// `requested | active → superseded` by the later notice `by`, at `at`.
pub fn supersede(
    table: &str,
    notice_id: &NoticeId,
    by: &NoticeId,
    at: Timestamp,
) -> Result<Write, StoreError> {
    moved(
        table,
        notice_id,
        NoticeTrigger::Supersede,
        NoticeStatus::Superseded,
        at,
        &[("superseded_by", s(by)), ("superseded_at", n(at.millis()))],
    )
}

/// Moves a notice by its lifecycle at `at`, setting `sets` (`(attribute, value)` pairs) and its
/// retention from `at` too; refused when the notice is not in a source state of the move (or is
/// gone).
fn moved(
    table: &str,
    notice_id: &NoticeId,
    trigger: NoticeTrigger,
    to: NoticeStatus,
    at: Timestamp,
    sets: &[(&str, AttributeValue)],
) -> Result<Write, StoreError> {
    let condition = NOTICE_LIFECYCLE.condition(trigger, to)?;
    let mut e = Expr::new().value(":to", s(to.as_str()));
    let status_condition = e.status(&condition);
    let mut set = vec!["#status = :to".to_string()];
    let retention = notice_status_ttl_seconds(to, at).map(|ttl| (EXPIRES_AT, n(ttl)));
    for (i, (attribute, value)) in sets.iter().cloned().chain(retention).enumerate() {
        e = e
            .name(&format!("#a{i}"), attribute)
            .value(&format!(":v{i}"), value.clone());
        set.push(format!("#a{i} = :v{i}"));
    }
    conditional_update(
        table,
        key(notice_id),
        format!("SET {}", set.join(", ")),
        format!("attribute_exists(pk) AND ({status_condition})"),
        &e,
    )
}

/// Keeps a notice for one of its deliveries that an operator requeued at `at`: its expiry moves
/// to [`notice_ttl_seconds`] of `at` (later than any it had). Refused when the notice is gone.
pub fn retain(table: &str, notice_id: &NoticeId, at: Timestamp) -> Result<Write, StoreError> {
    let e = Expr::new()
        .name("#expires", EXPIRES_AT)
        .value(":expires", n(notice_ttl_seconds(at)));
    conditional_update(
        table,
        key(notice_id),
        "SET #expires = :expires".into(),
        "attribute_exists(pk)".into(),
        &e,
    )
}

/// The items of a notice's partition whose sort key starts with `prefix`, in key order; only
/// those in `status` if given, at most `limit` (consistent reads, page after page until the
/// limit is reached). The item modules of the partition read through this.
pub async fn partition(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    notice_id: &NoticeId,
    prefix: &str,
    status: Option<NotificationStatus>,
    limit: Option<usize>,
) -> Result<Vec<Item>, StoreError> {
    let mut q = partition_query(table, notice_id, prefix, status);
    let mut out = Vec::new();
    loop {
        let page = read::query_page(dynamo, &q).await?;
        out.extend(page.items);
        if let Some(limit) = limit.filter(|l| out.len() >= *l) {
            out.truncate(limit);
            return Ok(out);
        }
        match page.next {
            Some(next) => q.start = Some(next),
            None => return Ok(out),
        }
    }
}

/// [`partition`], read as items of type `T`.
pub(crate) async fn partition_of<T: DeserializeOwned>(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    notice_id: &NoticeId,
    prefix: &str,
    status: Option<NotificationStatus>,
    limit: Option<usize>,
) -> Result<Vec<T>, StoreError> {
    partition(dynamo, table, notice_id, prefix, status, limit)
        .await?
        .into_iter()
        .map(from_item)
        .collect()
}

fn partition_query(
    table: &str,
    notice_id: &NoticeId,
    prefix: &str,
    status: Option<NotificationStatus>,
) -> Query {
    let mut e = Expr::new().value(":pk", s(notice_pk(notice_id)));
    let key_condition = if prefix.is_empty() {
        "pk = :pk"
    } else {
        e = e.value(":prefix", s(prefix));
        "pk = :pk AND begins_with(sk, :prefix)"
    };
    let filter = status.map(|status| {
        e = std::mem::take(&mut e)
            .name("#status", "status")
            .value(":status", s(status.as_str()));
        "#status = :status".to_string()
    });
    Query {
        table: table.to_string(),
        key_condition: key_condition.to_string(),
        filter,
        expr: e,
        ..Query::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;
    use aws_sdk_dynamodb::types::{AttributeValue, Update};

    #[test]
    fn the_administrator_notice_stores_plain_addresses() {
        let n = subscription_paused_notice(
            &id("a"),
            &id("s"),
            &["admin@example.com".to_string()],
            50,
            Timestamp(1),
        );
        let item = notice_item(&n).unwrap();
        assert_eq!(
            item["recipients"],
            AttributeValue::L(vec![AttributeValue::S("admin@example.com".into())])
        );
        assert_eq!(item["status"], AttributeValue::S("requested".into()));
        assert!(!item.contains_key("deadline"));
        let back: NoticeRequest = crate::store::from_item(item).unwrap();
        assert_eq!(back, n);
    }

    #[test]
    fn recipients_have_an_address_per_channel() {
        let plain = Recipient::Address("ops@example.com".into());
        assert_eq!(plain.address("email"), Some("ops@example.com"));
        assert_eq!(plain.address("console"), Some("ops@example.com"));
        assert_eq!(plain.address("slack"), None);
        assert_eq!(Recipient::Address("u1".into()).address("email"), None);
        let contact: Recipient = serde_json::from_value(serde_json::json!({
            "id": "ops", "slack_webhook_url": "https://hooks.slack.com/services/T/B/x"
        }))
        .unwrap();
        assert_eq!(contact.id(), "ops");
        assert_eq!(contact.address("email"), None);
        assert_eq!(
            contact.address("slack"),
            Some("https://hooks.slack.com/services/T/B/x")
        );
        assert_eq!(contact.address("console"), Some("ops"));
    }

    fn update(w: Write) -> Update {
        match w {
            Write::Update(u) => u,
            other => panic!("not an update: {other:?}"),
        }
    }

    #[test]
    fn a_withdrawal_is_conditional_on_the_lifecycle_sources_and_the_notice_existing() {
        let u = update(withdraw("t", &id("n1"), Timestamp(7)).unwrap());
        assert_eq!(u.table_name(), "t");
        assert_eq!(u.key()["pk"].as_s().unwrap(), "NOTICE#n1");
        assert_eq!(u.key()["sk"].as_s().unwrap(), NOTICE_SK);
        assert_eq!(
            u.update_expression(),
            "SET #status = :to, #a0 = :v0, #a1 = :v1"
        );
        let condition = u.condition_expression().unwrap();
        assert!(condition.starts_with("attribute_exists(pk) AND (#status IN ("));
        let names = u.expression_attribute_names().unwrap();
        assert_eq!(names["#status"], "status");
        assert_eq!(names["#a0"], "withdrawn_at");
        assert_eq!(names["#a1"], EXPIRES_AT);
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":to"].as_s().unwrap(), "withdrawn");
        assert_eq!(values[":v0"].as_n().unwrap(), "7");
        assert_eq!(
            values[":v1"].as_n().unwrap(),
            &notice_ttl_seconds(Timestamp(7)).to_string()
        );
        let mut sources: Vec<&str> = values
            .iter()
            .filter(|(k, _)| k.starts_with(":status_from"))
            .map(|(_, v)| v.as_s().unwrap().as_str())
            .collect();
        sources.sort();
        assert_eq!(sources, ["active", "requested"]);
    }

    #[test]
    fn a_fan_out_activates_only_a_requested_notice_and_records_its_deliveries() {
        let u = update(activate("t", &id("n1"), Timestamp(9), 4).unwrap());
        assert_eq!(
            u.update_expression(),
            "SET #status = :to, #a0 = :v0, #a1 = :v1, #a2 = :v2"
        );
        let names = u.expression_attribute_names().unwrap();
        assert_eq!(
            (names["#a0"].as_str(), names["#a1"].as_str()),
            ("fanned_out_at", "deliveries")
        );
        assert_eq!(names["#a2"], EXPIRES_AT);
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":to"].as_s().unwrap(), "active");
        assert_eq!(values[":v1"].as_n().unwrap(), "4");
        let sources: Vec<&str> = values
            .iter()
            .filter(|(k, _)| k.starts_with(":status_from"))
            .map(|(_, v)| v.as_s().unwrap().as_str())
            .collect();
        assert_eq!(sources, ["requested"]);
    }

    #[test]
    fn a_replacement_names_the_later_notice() {
        let u = update(supersede("t", &id("old"), &id("new"), Timestamp(3)).unwrap());
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":to"].as_s().unwrap(), "superseded");
        assert_eq!(values[":v0"].as_s().unwrap(), "new");
        assert_eq!(values[":v1"].as_n().unwrap(), "3");
    }

    #[test]
    fn a_requeue_keeps_an_existing_notice_for_the_retention_from_its_instant() {
        let u = update(retain("t", &id("n1"), Timestamp(9_000)).unwrap());
        assert_eq!(u.key()["sk"].as_s().unwrap(), NOTICE_SK);
        assert_eq!(u.update_expression(), "SET #expires = :expires");
        assert_eq!(u.condition_expression(), Some("attribute_exists(pk)"));
        assert_eq!(
            u.expression_attribute_values().unwrap()[":expires"]
                .as_n()
                .unwrap(),
            &notice_ttl_seconds(Timestamp(9_000)).to_string()
        );
    }

    #[test]
    fn a_notice_past_its_expiry_is_not_visible_and_a_requested_one_has_none() {
        let req = subscription_paused_notice(&id("a"), &id("s"), &[], 3, Timestamp(1));
        let mut record = NoticeRecord::requested(req);
        assert!(record.visible(Timestamp(i64::MAX / 2)));
        record.expires_at = Some(100);
        assert!(record.visible(Timestamp(99_999)));
        assert!(!record.visible(Timestamp(100_000)));
    }

    #[test]
    fn requests_and_creations_write_a_notice_once() {
        let req = subscription_paused_notice(&id("a"), &id("s"), &[], 3, Timestamp(1));
        let Write::Put(p) = request("t", &req).unwrap() else {
            panic!("not a put")
        };
        assert_eq!(p.condition_expression(), Some("attribute_not_exists(pk)"));
        assert_eq!(p.item()["pk"].as_s().unwrap(), "NOTICE#pause_s_1");
        assert_eq!(p.item()["kind"].as_s().unwrap(), NOTICE_KIND);
        assert_eq!(p.item()["status"].as_s().unwrap(), REQUESTED);
        let mut record = NoticeRecord::requested(req);
        record.request_hash = Some("h".into());
        let Write::Put(p) = create("t", &record).unwrap() else {
            panic!("not a put")
        };
        assert_eq!(p.condition_expression(), Some("attribute_not_exists(pk)"));
        assert_eq!(p.item()["request_hash"].as_s().unwrap(), "h");
        assert_eq!(p.item()["status"].as_s().unwrap(), REQUESTED);
    }

    #[test]
    fn a_partition_query_reads_one_prefix_consistently_and_filters_by_status() {
        let q = partition_query("t", &id("n1"), "DLV#", Some(NotificationStatus::Queued));
        assert_eq!(q.key_condition, "pk = :pk AND begins_with(sk, :prefix)");
        assert_eq!(q.filter.as_deref(), Some("#status = :status"));
        assert_eq!(q.expr.values[":pk"].as_s().unwrap(), "NOTICE#n1");
        assert_eq!(q.expr.values[":status"].as_s().unwrap(), "queued");
        assert!(q.index.is_none() && !q.eventual && q.limit.is_none());
        let all = partition_query("t", &id("n1"), "", None);
        assert_eq!(all.key_condition, "pk = :pk");
        assert!(all.filter.is_none() && all.expr.names.is_empty());
    }

    #[test]
    fn a_bare_notice_request_item_reads_as_a_requested_notice() {
        let req = subscription_paused_notice(
            &id("acct"),
            &id("sub"),
            &["admin@example.com".into()],
            50,
            Timestamp(9),
        );
        let n: NoticeRecord = crate::store::from_item(notice_item(&req).unwrap()).unwrap();
        assert_eq!(n.status, NoticeStatus::Requested);
        assert_eq!(n.request.recipients.len(), 1);
        assert_eq!(n.request.channels, ["email", "console"]);
    }
}
