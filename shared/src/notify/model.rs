//! The notification table's items. One partition per notice:
//!
//! | item              | pk                                 | sk              | kind                    |
//! |-------------------|------------------------------------|-----------------|-------------------------|
//! | notice            | `NOTICE#{notice}`                  | `NOTICE`        | `notice`                |
//! | delivery          | `NOTICE#{notice}`                  | `DLV#{key}`     | `notification_delivery` |
//! | dispatch work     | `NOTICE#{notice}`                  | `WORK#{key}`    | `notification_work`     |
//! | progress shard    | `NOTICE#{notice}`                  | `PROGRESS#{n}`  | `notice_progress`       |
//! | provider ref      | `PROVREF#{provider}#{reference}`   | `REF`           | `provider_ref`          |
//! | supersede pointer | `SUPERSEDE#{account}#{key}`        | `CURRENT`       | `notice_supersede`      |
//!
//! A delivery's key is `{channel}-{recipient index}` (`email-0`, `console-2`): deterministic from
//! the notice, so a repeated fan-out creates nothing twice. Deliveries carry the `watch` index
//! attributes while settling may have to act on them (`sending`: claim + 15 min; `queued` with a
//! deadline: the deadline), and console deliveries the `inbox` index attributes.

use crate::domain::lifecycle::Status;
use crate::domain::notification_delivery::{
    FailureReason, HistoryEvent, NotificationStatus, AMBIGUITY_TIMEOUT,
};
use crate::domain::time::Timestamp;
use crate::store::keys::shard_of;
use crate::store::notices::{notice_pk, NoticeRequest, Recipient, NOTICE_SK};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

use crate::domain::notice::NoticeStatus;
pub use crate::store::notices::{Contact, NOTICE_KIND};

pub const DELIVERY_KIND: &str = "notification_delivery";
pub const WORK_KIND: &str = "notification_work";
pub const PROGRESS_KIND: &str = "notice_progress";
pub const PROVIDER_REF_KIND: &str = "provider_ref";
pub const SUPERSEDE_KIND: &str = "notice_supersede";

pub const DELIVERY_PREFIX: &str = "DLV#";
pub const WORK_PREFIX: &str = "WORK#";
pub const PROGRESS_PREFIX: &str = "PROGRESS#";
pub const PROVIDER_REF_SK: &str = "REF";
pub const SUPERSEDE_SK: &str = "CURRENT";
/// Progress counters are spread over this many items per notice.
pub const PROGRESS_SHARDS: u32 = 8;
/// The `watch` index (settling) and the `inbox` index (console).
pub const WATCH_INDEX: &str = "watch";
pub const INBOX_INDEX: &str = "inbox";

pub fn notice_key(notice_id: &str) -> (String, String) {
    (notice_pk(notice_id), NOTICE_SK.to_string())
}
pub fn delivery_sk(delivery_key: &str) -> String {
    format!("{DELIVERY_PREFIX}{delivery_key}")
}
pub fn work_sk(delivery_key: &str) -> String {
    format!("{WORK_PREFIX}{delivery_key}")
}
/// The progress shard a delivery counts on.
pub fn progress_sk(delivery_key: &str) -> String {
    format!("{PROGRESS_PREFIX}{}", fnv1a(delivery_key) % PROGRESS_SHARDS)
}
pub fn provider_ref_pk(provider: &str, reference: &str) -> String {
    format!("PROVREF#{provider}#{reference}")
}
pub fn supersede_pk(account_id: &str, key: &str) -> String {
    format!("SUPERSEDE#{account_id}#{key}")
}
pub fn inbox_key(account_id: &str, recipient: &str) -> String {
    format!("INBOX#{account_id}#{recipient}")
}
/// `{channel}-{recipient index}`.
pub fn delivery_key(channel: &str, recipient_index: usize) -> String {
    format!("{channel}-{recipient_index}")
}

fn fnv1a(key: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in key.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The channels this system has adapters for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    Email,
    Slack,
    Console,
}

impl Channel {
    pub const ALL: [Channel; 3] = [Channel::Email, Channel::Slack, Channel::Console];
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Email => "email",
            Channel::Slack => "slack",
            Channel::Console => "console",
        }
    }
    pub fn parse(s: &str) -> Option<Channel> {
        Channel::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// ------------------------------------------------------------------------------------ notices

/// A notice as stored: the request plus its status and bookkeeping. Reads a bare
/// [`NoticeRequest`] item (the auto-pause notice) as well.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NoticeRecord {
    pub notice_id: String,
    pub account_id: String,
    pub recipients: Vec<Recipient>,
    pub channels: Vec<String>,
    pub subject: String,
    pub body: String,
    pub reason: String,
    pub created_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersede_key: Option<String>,
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
    pub superseded_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_at: Option<Timestamp>,
}

impl NoticeRecord {
    /// A new notice in `requested`.
    pub fn requested(request: NoticeRequest) -> Self {
        NoticeRecord {
            notice_id: request.notice_id,
            account_id: request.account_id,
            recipients: request.recipients,
            channels: request.channels,
            subject: request.subject,
            body: request.body,
            reason: request.reason,
            created_at: request.created_at,
            deadline: request.deadline,
            supersede_key: request.supersede_key,
            status: NoticeStatus::Requested,
            idempotency_key: None,
            request_hash: None,
            fanned_out_at: None,
            deliveries: None,
            withdrawn_at: None,
            superseded_by: None,
            superseded_at: None,
        }
    }

    /// The deliveries a fan-out creates: one per distinct recipient × distinct channel, keyed
    /// `{channel}-{recipient index}`, in channel then recipient order.
    pub fn planned_deliveries(&self) -> Vec<PlannedDelivery<'_>> {
        let mut channels: Vec<&str> = Vec::new();
        for c in &self.channels {
            if !channels.contains(&c.as_str()) {
                channels.push(c);
            }
        }
        let mut recipients: Vec<&Recipient> = Vec::new();
        for r in &self.recipients {
            if !recipients.iter().any(|seen| seen.id() == r.id()) {
                recipients.push(r);
            }
        }
        let mut out = Vec::with_capacity(channels.len() * recipients.len());
        for channel in &channels {
            for (i, recipient) in recipients.iter().enumerate() {
                out.push(PlannedDelivery {
                    key: delivery_key(channel, i),
                    channel,
                    recipient,
                });
            }
        }
        out
    }

    /// Whether `other` (same supersede key) is later than this notice: by creation time, then id.
    pub fn is_older_than(&self, other: &NoticeRecord) -> bool {
        (self.created_at, &self.notice_id) < (other.created_at, &other.notice_id)
    }
}

/// One delivery a fan-out creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedDelivery<'a> {
    pub key: String,
    pub channel: &'a str,
    pub recipient: &'a Recipient,
}

// --------------------------------------------------------------------------------- deliveries

/// A notification delivery: one notice × channel × recipient, with its seed status.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NotificationDelivery {
    pub notice_id: String,
    /// `{channel}-{recipient index}`, unique within the notice.
    pub delivery_key: String,
    pub account_id: String,
    pub channel: String,
    /// The recipient's identity.
    pub recipient: String,
    /// The recipient's address on the channel (email address, Slack webhook URL, inbox id);
    /// `None` when the recipient has none (the adapter reports it unavailable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    pub status: NotificationStatus,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Optimistic concurrency: every write adds one and is conditional on the value read.
    #[serde(default)]
    pub version: u64,
    /// The notice's deadline, copied so that settling needs only the delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Timestamp>,
    /// A retry's backoff ends here; a message that arrives earlier is put back until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_at: Option<Timestamp>,
    /// The provider that accepted it (`ses`, `slack`, `console`) and its reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<FailureReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    /// The last retryable failure, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Provider bounce feedback (recorded; the status does not change, see the module docs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounce: Option<BounceRecord>,
    /// Retained lifecycle and provider events, deduplicated by id, at most fifty.
    #[serde(default)]
    pub history: Vec<HistoryEvent>,
    /// Console deliveries keep their content: they are the console store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch_shard: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inbox_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inbox_at: Option<Timestamp>,
}

/// Provider bounce feedback on a delivery.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct BounceRecord {
    /// e.g. `Permanent`, `Transient`, `Undetermined`.
    pub bounce_type: String,
    pub at: Timestamp,
}

impl NotificationDelivery {
    /// When settling must look at this delivery again, if ever: a `sending` one when its claim
    /// becomes ambiguous, a `queued` one at its deadline.
    pub fn watch_until(&self) -> Option<Timestamp> {
        match self.status {
            NotificationStatus::Sending => self.claimed_at.map(|t| t.plus(AMBIGUITY_TIMEOUT)),
            NotificationStatus::Queued => self.deadline,
            _ => None,
        }
    }

    /// Sets (or clears) the `watch` index attributes from the state.
    pub fn refresh_watch(&mut self) {
        match self.watch_until() {
            Some(at) => {
                self.watch_shard = Some(shard_of(&format!(
                    "{}/{}",
                    self.notice_id, self.delivery_key
                )));
                self.watch_at = Some(at);
            }
            None => {
                self.watch_shard = None;
                self.watch_at = None;
            }
        }
    }

    /// Appends a history event (deduplicated by id, capped at fifty). `false` for a duplicate.
    pub fn push_history(&mut self, id: impl Into<String>, kind: &str, at: Timestamp) -> bool {
        self.push_history_detail(id, kind, at, None)
    }

    pub fn push_history_detail(
        &mut self,
        id: impl Into<String>,
        kind: &str,
        at: Timestamp,
        detail: Option<String>,
    ) -> bool {
        crate::domain::notification_delivery::append_history(
            &mut self.history,
            HistoryEvent {
                id: id.into(),
                kind: kind.to_string(),
                at,
                detail,
            },
        )
    }

    pub fn has_event(&self, id: &str) -> bool {
        self.history.iter().any(|h| h.id == id)
    }
}

/// The dispatch work of a queued delivery. Inserting it publishes a message naming `dispatch_id`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct WorkRow {
    pub notice_id: String,
    pub delivery_key: String,
    pub dispatch_id: String,
    pub created_at: Timestamp,
}

impl WorkRow {
    pub fn fresh(notice_id: &str, delivery_key: &str, now: Timestamp) -> Self {
        WorkRow {
            notice_id: notice_id.to_string(),
            delivery_key: delivery_key.to_string(),
            dispatch_id: ulid::Ulid::new().to_string(),
            created_at: now,
        }
    }

    pub fn message(&self) -> NotificationWork {
        NotificationWork {
            notice_id: self.notice_id.clone(),
            delivery_key: self.delivery_key.clone(),
            dispatch_id: self.dispatch_id.clone(),
        }
    }
}

/// The body of a notification queue message.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct NotificationWork {
    pub notice_id: String,
    pub delivery_key: String,
    pub dispatch_id: String,
}

/// Where a provider reference points.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProviderRef {
    pub provider: String,
    pub provider_ref: String,
    pub notice_id: String,
    pub delivery_key: String,
}

/// The current notice of a supersede key.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SupersedePointer {
    pub notice_id: String,
    pub created_at: Timestamp,
}

/// A notice's deliveries counted by state (the progress summary).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Every seed state, zero included, in the seed's order.
    pub counts: BTreeMap<String, i64>,
    pub total: i64,
}

impl Progress {
    pub fn empty() -> Self {
        Progress {
            counts: NotificationStatus::ALL
                .iter()
                .map(|s| (s.as_str().to_string(), 0))
                .collect(),
            total: 0,
        }
    }
    pub fn count(&self, status: NotificationStatus) -> i64 {
        self.counts.get(status.as_str()).copied().unwrap_or(0)
    }
    pub fn add(&mut self, status: &str, n: i64) {
        *self.counts.entry(status.to_string()).or_insert(0) += n;
        self.total += n;
    }
}

/// The counter attribute of a status on a progress shard.
pub fn progress_attribute(status: NotificationStatus) -> String {
    format!("n_{}", status.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice(recipients: Vec<Recipient>, channels: &[&str]) -> NoticeRecord {
        NoticeRecord::requested(NoticeRequest {
            notice_id: "n1".into(),
            account_id: "a".into(),
            recipients,
            channels: channels.iter().map(|c| c.to_string()).collect(),
            subject: "s".into(),
            body: "b".into(),
            reason: "api".into(),
            created_at: Timestamp(5),
            deadline: None,
            supersede_key: None,
        })
    }

    #[test]
    fn fan_out_plans_one_delivery_per_recipient_and_channel_without_duplicates() {
        let n = notice(
            vec![
                Recipient::Address("a@example.com".into()),
                Recipient::Address("b@example.com".into()),
                Recipient::Address("a@example.com".into()),
            ],
            &["email", "console", "email"],
        );
        let keys: Vec<String> = n.planned_deliveries().into_iter().map(|p| p.key).collect();
        assert_eq!(keys, ["email-0", "email-1", "console-0", "console-1"]);
        let planned = n.planned_deliveries();
        assert_eq!(planned[3].recipient.id(), "b@example.com");
        assert_eq!(planned[3].channel, "console");
    }

    #[test]
    fn progress_shards_are_stable_and_spread() {
        assert_eq!(progress_sk("email-0"), progress_sk("email-0"));
        let shards: std::collections::HashSet<String> = (0..200)
            .map(|i| progress_sk(&format!("email-{i}")))
            .collect();
        assert_eq!(shards.len(), PROGRESS_SHARDS as usize);
        assert_eq!(progress_attribute(NotificationStatus::Sending), "n_sending");
    }

    #[test]
    fn the_watch_follows_the_state() {
        let mut d = NotificationDelivery {
            notice_id: "n".into(),
            delivery_key: "email-0".into(),
            account_id: "a".into(),
            channel: "email".into(),
            recipient: "r".into(),
            address: None,
            status: NotificationStatus::Queued,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
            version: 0,
            deadline: None,
            not_before: None,
            claim_token: None,
            claimed_at: None,
            provider: None,
            provider_ref: None,
            sent_at: None,
            delivered_at: None,
            failure_reason: None,
            failed_at: None,
            skip_reason: None,
            last_error: None,
            bounce: None,
            history: vec![],
            subject: None,
            body: None,
            watch_shard: None,
            watch_at: None,
            inbox_key: None,
            inbox_at: None,
        };
        d.refresh_watch();
        assert_eq!(
            d.watch_at, None,
            "queued without a deadline: nothing to settle"
        );
        d.deadline = Some(Timestamp(1_000));
        d.refresh_watch();
        assert_eq!(d.watch_at, Some(Timestamp(1_000)));
        assert!(d.watch_shard.is_some());
        d.status = NotificationStatus::Sending;
        d.claimed_at = Some(Timestamp(2_000));
        d.refresh_watch();
        assert_eq!(d.watch_at, Some(Timestamp(2_000).plus(AMBIGUITY_TIMEOUT)));
        d.status = NotificationStatus::Sent;
        d.refresh_watch();
        assert_eq!((d.watch_at, d.watch_shard), (None, None));
    }

    #[test]
    fn a_bare_notice_request_item_reads_as_a_requested_notice() {
        let req = crate::store::notices::subscription_paused_notice(
            "acct",
            "sub",
            &["admin@example.com".into()],
            50,
            Timestamp(9),
        );
        let item = crate::store::notices::notice_item(&req).unwrap();
        let n: NoticeRecord = crate::store::from_item(item).unwrap();
        assert_eq!(n.status, NoticeStatus::Requested);
        assert_eq!(n.planned_deliveries().len(), 2);
    }
}
