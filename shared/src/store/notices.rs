//! Notice requests written into the notification table by other parts of the system (the
//! auto-pause administrator notice) and by the notices API. The notification pipeline
//! ([`crate::notify`]) fans each one out to its channel deliveries; the deterministic id makes a
//! repeated request a no-op.

use super::{expr, to_item, Item, StoreError};
use crate::domain::time::Timestamp;
use serde::{Deserialize, Serialize};

pub const NOTICE_SK: &str = "NOTICE";
/// The `kind` of a notice item.
pub const NOTICE_KIND: &str = "notice";
/// The status a notice is requested in; the fan-out picks up notices in this status.
pub const REQUESTED: &str = "requested";

pub fn notice_pk(notice_id: &str) -> String {
    format!("NOTICE#{notice_id}")
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
    pub notice_id: String,
    pub account_id: String,
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
    account_id: &str,
    subscription_id: &str,
    admin_emails: &[String],
    dead_count: u32,
    paused_at: Timestamp,
) -> NoticeRequest {
    NoticeRequest {
        notice_id: format!("pause_{subscription_id}_{}", paused_at.millis()),
        account_id: account_id.to_string(),
        recipients: admin_emails
            .iter()
            .map(|e| Recipient::Address(e.clone()))
            .collect(),
        channels: vec!["email".into(), "console".into()],
        subject: format!("Subscription {subscription_id} was paused"),
        body: format!(
            "Subscription {subscription_id} was paused at {paused_at} after {dead_count} deliveries in a row \
             ended dead. New changes are not delivered while it is paused and are not recovered on \
             resume. Fix the integration, then resume the subscription; dead deliveries can be retried \
             or replayed."
        ),
        reason: "subscription_paused".into(),
        created_at: paused_at,
        deadline: None,
        supersede_key: None,
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
    item.insert("status".into(), expr::s(REQUESTED));
    Ok(item)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::AttributeValue;

    #[test]
    fn the_administrator_notice_stores_plain_addresses() {
        let n = subscription_paused_notice(
            "a",
            "s",
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
}
