//! Notice requests written into the notification table by other parts of the system (the
//! auto-pause administrator notice). The notification pipeline fans each one out to its channel
//! deliveries; the deterministic id makes a repeated request a no-op.

use super::{expr, to_item, Item, StoreError};
use crate::domain::time::Timestamp;
use serde::{Deserialize, Serialize};

pub const NOTICE_SK: &str = "NOTICE";

pub fn notice_pk(notice_id: &str) -> String {
    format!("NOTICE#{notice_id}")
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NoticeRequest {
    pub notice_id: String,
    pub account_id: String,
    /// Email addresses (email channel) and account ids (console channel).
    pub recipients: Vec<String>,
    /// `email`, `slack`, `console`.
    pub channels: Vec<String>,
    pub subject: String,
    pub body: String,
    /// Why the notice exists, e.g. `subscription_paused`.
    pub reason: String,
    pub created_at: Timestamp,
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
        recipients: admin_emails.to_vec(),
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
    }
}

/// The item of a notice request, in `status = requested`.
pub fn notice_item(notice: &NoticeRequest) -> Result<Item, StoreError> {
    let mut item = to_item(notice, &notice_pk(&notice.notice_id), NOTICE_SK, "notice")?;
    item.insert("status".into(), expr::s("requested"));
    Ok(item)
}
