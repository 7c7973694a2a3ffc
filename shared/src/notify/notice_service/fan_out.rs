//! The fan-out of a requested notice to its deliveries, one per recipient × channel, each written
//! once; then `requested → active` (`docs/lifecycles.md#notice`).

use super::replacement::Replacement;
use super::{NoticeService, FAN_OUT_CONCURRENCY};
use crate::domain::notice::NoticeStatus;
use crate::domain::notification_delivery::NotificationStatus as N;
use crate::domain::time::Timestamp;
use crate::ids::NoticeId;
use crate::notify::channels::Channel;
use crate::notify::NotifyError;
use crate::store::console_inbox::{console_ref, inbox_key};
use crate::store::notice::{NoticeRecord, Recipient};
use crate::store::notice_retention;
use crate::store::notification_delivery::{delivery_key, NotificationDelivery};
use crate::store::notification_work::WorkRow;
use futures::stream::{self, StreamExt, TryStreamExt};

/// What a fan-out did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FanOutReport {
    /// Deliveries written now (a repeated fan-out writes none).
    pub created: u32,
    /// Deliveries the notice has.
    pub planned: u32,
    /// The notice was not fanned out: gone, no longer requested, or superseded at once.
    pub not_fanned_out: Option<&'static str>,
    /// Queued deliveries of a replaced notice cancelled on the way.
    pub cancelled_replaced: u32,
}

impl NoticeService {
    /// Fans a requested notice out. Safe to repeat: every delivery is written once.
    pub async fn fan_out(&self, notice_id: &NoticeId) -> Result<FanOutReport, NotifyError> {
        let mut report = FanOutReport::default();
        let Some(notice) = self.store.notice(notice_id).await? else {
            report.not_fanned_out = Some("no such notice");
            return Ok(report);
        };
        if notice.status != NoticeStatus::Requested {
            report.not_fanned_out = Some("the notice is no longer requested");
            return Ok(report);
        }
        if notice.request.supersede_key.is_some() {
            match self.resolve_replacement(&notice).await? {
                Replacement::Current { cancelled } => report.cancelled_replaced = cancelled,
                Replacement::SupersededAtOnce => {
                    report.not_fanned_out = Some("a later notice with the same key exists");
                    return Ok(report);
                }
            }
        }
        let now = self.clock.now();
        let planned: Vec<(NotificationDelivery, Option<WorkRow>)> = planned_deliveries(&notice)
            .into_iter()
            .map(|p| new_delivery(&notice, &p, now))
            .collect();
        report.planned = planned.len() as u32;
        let store = &self.store;
        let created: Vec<bool> = stream::iter(planned.iter())
            .map(|(d, w)| async move { store.create_delivery(d, w.as_ref()).await })
            .buffer_unordered(FAN_OUT_CONCURRENCY)
            .try_collect()
            .await?;
        report.created = created.iter().filter(|c| **c).count() as u32;
        self.store
            .send(notice_retention::activate(
                &self.store.table,
                notice_id,
                now,
                report.planned,
            )?)
            .await?;
        Ok(report)
    }
}

/// The deliveries a fan-out creates: one per distinct recipient × distinct channel, keyed
/// `{channel}-{recipient index}`, in channel then recipient order.
pub(crate) fn planned_deliveries(notice: &NoticeRecord) -> Vec<PlannedDelivery<'_>> {
    let mut channels: Vec<&str> = Vec::new();
    for c in &notice.request.channels {
        if !channels.contains(&c.as_str()) {
            channels.push(c);
        }
    }
    let mut recipients: Vec<&Recipient> = Vec::new();
    for r in &notice.request.recipients {
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

/// One delivery a fan-out creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlannedDelivery<'a> {
    pub key: String,
    pub channel: &'a str,
    pub recipient: &'a Recipient,
}

/// The delivery (and work row) a fan-out writes for one planned delivery.
fn new_delivery(
    notice: &NoticeRecord,
    planned: &PlannedDelivery<'_>,
    now: Timestamp,
) -> (NotificationDelivery, Option<WorkRow>) {
    let console = planned.channel == Channel::Console.as_str();
    let recipient = planned.recipient.id().to_string();
    let mut d = NotificationDelivery::new(
        &notice.request.notice_id,
        &planned.key,
        &notice.request.account_id,
        planned.channel,
        &recipient,
        if console { N::Delivered } else { N::Queued },
        now,
    );
    d.address = planned
        .recipient
        .address(planned.channel)
        .map(str::to_string);
    d.deadline = notice.request.deadline;
    if console {
        // The console store: the delivery is the in-app message, listed by the `inbox` index.
        d.provider = Some("console".into());
        d.provider_ref = Some(console_ref(&notice.request.notice_id, &planned.key));
        d.delivered_at = Some(now);
        d.subject = Some(notice.request.subject.clone());
        d.body = Some(notice.request.body.clone());
        d.inbox_key = Some(inbox_key(&notice.request.account_id, &recipient));
        d.inbox_at = Some(now);
        d.push_history("delivered", "delivered", now);
        (d, None)
    } else {
        d.push_history("queued", "queued", now);
        let work = WorkRow::fresh(&notice.request.notice_id, &planned.key, now);
        (d, Some(work))
    }
}

#[cfg(test)]
mod tests {
    use super::super::request::test_notice as new_notice;
    use super::*;
    use crate::ids::id;
    use crate::store::notice::NoticeRequest;

    #[test]
    fn console_deliveries_begin_delivered_and_others_queued_with_work() {
        let n = new_notice();
        let mut record = NoticeRecord::requested(NoticeRequest {
            notice_id: "n1".parse().unwrap(),
            account_id: "acct".parse().unwrap(),
            recipients: n.recipients,
            channels: n.channels,
            subject: n.subject,
            body: n.body,
            reason: "api".into(),
            created_at: Timestamp(1),
            deadline: None,
            supersede_key: None,
        });
        record.status = NoticeStatus::Requested;
        let now = Timestamp(10);
        let made: Vec<_> = planned_deliveries(&record)
            .iter()
            .map(|p| new_delivery(&record, p, now))
            .collect();
        assert_eq!(made.len(), 6);
        for (d, w) in &made {
            if d.channel == "console" {
                assert_eq!(d.status, N::Delivered);
                assert!(w.is_none());
                assert_eq!(
                    d.inbox_key.as_deref(),
                    Some(&*inbox_key(&id("acct"), &d.recipient))
                );
            } else {
                assert_eq!(d.status, N::Queued);
                assert_eq!(w.as_ref().unwrap().delivery_key, d.delivery_key);
            }
        }
        let slack_team = made
            .iter()
            .find(|(d, _)| d.delivery_key == "slack-1")
            .unwrap();
        assert_eq!(
            slack_team.0.address.as_deref(),
            Some("https://hooks.slack.com/services/T/B/x")
        );
        let slack_ops = made
            .iter()
            .find(|(d, _)| d.delivery_key == "slack-0")
            .unwrap();
        assert_eq!(slack_ops.0.address, None, "no Slack webhook: skipped later");
    }

    #[test]
    fn fan_out_plans_one_delivery_per_recipient_and_channel_without_duplicates() {
        let n = NoticeRecord::requested(NoticeRequest {
            notice_id: "n1".parse().unwrap(),
            account_id: "a".parse().unwrap(),
            recipients: vec![
                Recipient::Address("a@example.com".into()),
                Recipient::Address("b@example.com".into()),
                Recipient::Address("a@example.com".into()),
            ],
            channels: ["email", "console", "email"].map(String::from).to_vec(),
            subject: "s".into(),
            body: "b".into(),
            reason: "api".into(),
            created_at: Timestamp(5),
            deadline: None,
            supersede_key: None,
        });
        let keys: Vec<String> = planned_deliveries(&n).into_iter().map(|p| p.key).collect();
        assert_eq!(keys, ["email-0", "email-1", "console-0", "console-1"]);
        let planned = planned_deliveries(&n);
        assert_eq!(planned[3].recipient.id(), "b@example.com");
        assert_eq!(planned[3].channel, "console");
    }

    #[test]
    fn the_administrator_notice_plans_an_email_and_a_console_delivery() {
        let req = crate::store::notice::subscription_paused_notice(
            &id("acct"),
            &id("sub"),
            &["admin@example.com".into()],
            50,
            Timestamp(9),
        );
        let item = crate::store::notice::notice_item(&req).unwrap();
        let n: NoticeRecord = crate::store::from_item(item).unwrap();
        assert_eq!(n.status, NoticeStatus::Requested);
        assert_eq!(planned_deliveries(&n).len(), 2);
    }
}
