//! Notices: creation (idempotent by key), fan-out to deliveries, withdrawal, replacement and the
//! progress summary.
//!
//! * **Create** writes the notice in `requested`. Its id is derived from the account and the
//!   caller's idempotency key, so a repeated request finds the first one (and a different request
//!   under the same key is refused).
//! * **Fan-out** (from the table's stream, so the delivery worker's auto-pause notice and API
//!   notices take one path) resolves replacement first, then writes one delivery per recipient ×
//!   channel, each once: console deliveries begin `delivered` (the console store), the others
//!   `queued` with a work row whose insertion publishes the message. Then `requested → active`.
//! * **Replacement**: per account and supersede key, a pointer names the current notice; a later
//!   notice (by creation time, then id) takes it over and the earlier one becomes `superseded`,
//!   its queued deliveries `cancelled`. A notice that arrives after a later one is superseded at
//!   once and never fanned out.
//! * **Withdrawal**: `requested | active → withdrawn`, queued deliveries `cancelled` (their work
//!   rows deleted). Deliveries already `sending` finish; ones the cancellation does not reach are
//!   cancelled by the worker's claim guard.

use super::bounds::outbound_recipients;
use super::channels::slack::check_slack_url;
use super::channels::Channel;
use super::table::NotificationTable;
use super::NotifyError;
use crate::clock::Clock;
use crate::domain::notice::NoticeStatus;
use crate::domain::notification_delivery::{NotificationStatus as N, NotificationTrigger as NT};
use crate::domain::ssrf::TargetPolicy;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, NoticeId};
use crate::store::console_inbox::{console_ref, inbox_key};
use crate::store::notice::{self, NoticeRecord, NoticeRequest, Recipient};
use crate::store::notice_progress::Progress;
use crate::store::notice_quota;
use crate::store::notice_retention;
use crate::store::notification_delivery::{delivery_key, Effects, NotificationDelivery};
use crate::store::notification_work::WorkRow;
use crate::store::supersede_pointer::{self, SupersedePointer};
use crate::store::write::Write;
use crate::store::StoreError;
use futures::stream::{self, StreamExt, TryStreamExt};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// Deliveries written concurrently by one fan-out.
pub const FAN_OUT_CONCURRENCY: usize = 16;
/// Queued deliveries one withdrawal or replacement cancels synchronously; the worker's claim guard
/// cancels the rest as their messages arrive.
pub const CANCEL_LIMIT: usize = 1000;
pub use super::bounds::MAX_RECIPIENTS;
pub const MAX_SUBJECT_CHARS: usize = 200;
pub const MAX_BODY_CHARS: usize = 10_000;
pub const MAX_KEY_CHARS: usize = 200;

/// A notice as the API receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewNotice {
    pub recipients: Vec<Recipient>,
    pub channels: Vec<String>,
    pub subject: String,
    pub body: String,
    pub deadline: Option<Timestamp>,
    pub supersede_key: Option<String>,
    pub idempotency_key: String,
    /// Why the notice exists (`api` when not given).
    pub reason: Option<String>,
}

/// Every problem with a new notice, as `(field, message)`. Slack webhook URLs are checked as the
/// Slack adapter will check them under `policy` (the deployment's target policy).
pub fn validate(
    notice: &NewNotice,
    now: Timestamp,
    policy: &TargetPolicy,
) -> Vec<(String, String)> {
    let mut errors = Vec::new();
    let mut err = |f: String, m: String| errors.push((f, m));
    if notice.recipients.is_empty() {
        err(
            "recipients".into(),
            "must name at least one recipient".into(),
        );
    }
    if notice.recipients.len() > MAX_RECIPIENTS {
        err(
            "recipients".into(),
            format!("at most {MAX_RECIPIENTS} recipients are accepted"),
        );
    }
    for (i, r) in notice.recipients.iter().enumerate() {
        let id = r.id();
        if id.trim().is_empty() || id.chars().count() > 320 || id.chars().any(char::is_control) {
            err(
                format!("recipients[{i}]"),
                "must be a non-empty identity of at most 320 characters".into(),
            );
        }
        if let Recipient::Contact(c) = r {
            if let Some(email) = &c.email {
                if !super::channels::email::plausible_address(email) {
                    err(
                        format!("recipients[{i}].email"),
                        "must be an email address".into(),
                    );
                }
            }
            if let Some(url) = &c.slack_webhook_url {
                if let Err(message) = check_slack_url(url, policy) {
                    err(format!("recipients[{i}].slack_webhook_url"), message);
                }
            }
        }
    }
    if notice.channels.is_empty() {
        err("channels".into(), "must name at least one channel".into());
    }
    for (i, c) in notice.channels.iter().enumerate() {
        if Channel::parse(c).is_none() {
            err(
                format!("channels[{i}]"),
                format!("unknown channel {c:?}; one of email, slack, console"),
            );
        }
    }
    if notice.subject.trim().is_empty() || notice.subject.chars().count() > MAX_SUBJECT_CHARS {
        err(
            "subject".into(),
            format!("must be 1 to {MAX_SUBJECT_CHARS} characters"),
        );
    }
    if notice.body.trim().is_empty() || notice.body.chars().count() > MAX_BODY_CHARS {
        err(
            "body".into(),
            format!("must be 1 to {MAX_BODY_CHARS} characters"),
        );
    }
    if let Some(deadline) = notice.deadline {
        if deadline <= now {
            err("deadline".into(), "must be in the future".into());
        }
    }
    for (field, value) in [
        ("supersede_key", notice.supersede_key.as_deref()),
        ("idempotency_key", Some(notice.idempotency_key.as_str())),
    ] {
        if let Some(v) = value {
            if v.is_empty() || v.chars().count() > MAX_KEY_CHARS || v.chars().any(char::is_control)
            {
                err(
                    field.into(),
                    format!("must be 1 to {MAX_KEY_CHARS} characters"),
                );
            }
        }
    }
    errors
}

/// The notice id of an account's idempotency key.
pub fn notice_id_for(account_id: &AccountId, idempotency_key: &str) -> NoticeId {
    let digest = Sha256::digest(format!("{account_id}\n{idempotency_key}").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    NoticeId::from_stored(format!("ntc_{}", &hex[..26]))
}

fn request_hash(n: &NewNotice) -> String {
    let canonical = serde_json::json!({
        "recipients": n.recipients,
        "channels": n.channels,
        "subject": n.subject,
        "body": n.body,
        "deadline": n.deadline,
        "supersede_key": n.supersede_key,
        "reason": n.reason,
    });
    let digest = Sha256::digest(canonical.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Why a notice could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("the idempotency key was already used for a different notice")]
    IdempotencyConflict,
    /// The key's notice is past its expiry (gone to every reader) but still stored until the
    /// table's TTL deletes it: the key cannot make a new notice yet, nor find the old one.
    #[error("the notice this idempotency key created has expired")]
    IdempotencyKeyExpired,
    /// The account's notices already named the day's quota of outbound recipients (or this
    /// notice would pass it).
    #[error("the account's daily quota of notice recipients has no room for this notice")]
    QuotaExceeded,
    #[error(transparent)]
    Fault(#[from] NotifyError),
}

/// Why a withdrawal was refused.
#[derive(Debug, thiserror::Error)]
pub enum WithdrawError {
    #[error("notice not found")]
    NotFound,
    #[error("the notice was superseded by {0}; it no longer applies")]
    Superseded(String),
    #[error(transparent)]
    Fault(#[from] NotifyError),
}

impl From<StoreError> for CreateError {
    fn from(e: StoreError) -> Self {
        CreateError::Fault(e.into())
    }
}
impl From<StoreError> for WithdrawError {
    fn from(e: StoreError) -> Self {
        WithdrawError::Fault(e.into())
    }
}

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

pub struct NoticeService {
    store: NotificationTable,
    clock: Arc<dyn Clock>,
}

impl NoticeService {
    pub fn new(store: NotificationTable, clock: Arc<dyn Clock>) -> Self {
        NoticeService { store, clock }
    }

    pub fn store(&self) -> &NotificationTable {
        &self.store
    }

    /// Creates the notice (`requested`), or finds the one this idempotency key created.
    /// `(notice, created)`. Charges no quota (the delivery worker's and internal notices).
    pub async fn create(
        &self,
        account_id: &AccountId,
        new: NewNotice,
    ) -> Result<(NoticeRecord, bool), CreateError> {
        self.create_within(account_id, new, None).await
    }

    /// [`Self::create`], charging the notice's outbound recipients to the account's counter of
    /// the day when `daily_quota` is given ([`crate::notify::bounds`]). The charge and the notice
    /// are one transaction: a repeated request (its notice exists) charges nothing, and a charge
    /// past the quota writes no notice ([`CreateError::QuotaExceeded`]).
    pub async fn create_within(
        &self,
        account_id: &AccountId,
        new: NewNotice,
        daily_quota: Option<u32>,
    ) -> Result<(NoticeRecord, bool), CreateError> {
        let now = self.clock.now();
        let notice_id = notice_id_for(account_id, &new.idempotency_key);
        let hash = request_hash(&new);
        let outbound = outbound_recipients(&new.recipients, &new.channels);
        let mut record = NoticeRecord::requested(NoticeRequest {
            notice_id: notice_id.clone(),
            account_id: account_id.clone(),
            recipients: new.recipients,
            channels: new.channels,
            subject: new.subject,
            body: new.body,
            reason: new.reason.unwrap_or_else(|| "api".into()),
            created_at: now,
            deadline: new.deadline,
            supersede_key: new.supersede_key,
        });
        record.idempotency_key = Some(new.idempotency_key);
        record.request_hash = Some(hash.clone());
        let created = notice::create(&self.store.table, &record)?;
        // A notice that sends nothing outside the platform is not counted.
        let charged = daily_quota.filter(|_| outbound > 0);
        let write = match charged {
            Some(quota) => Write::all([
                created,
                notice_quota::charge(&self.store.table, account_id, now, outbound, quota)?,
            ])?,
            None => created,
        };
        if self.store.send(write).await?.applied() {
            return Ok((record, true));
        }
        // Refused: the key was used before (the same request finds its notice again), or else
        // the day's quota has no room for this notice.
        match self.store.notice(&notice_id).await? {
            // Answered as gone, as a read of it is: not the expired notice.
            Some(existing) if !existing.visible(now) => Err(CreateError::IdempotencyKeyExpired),
            Some(existing)
                if &existing.request.account_id == account_id
                    && existing.request_hash.as_deref() == Some(hash.as_str()) =>
            {
                Ok((existing, false))
            }
            Some(_) => Err(CreateError::IdempotencyConflict),
            None if charged.is_some() => Err(CreateError::QuotaExceeded),
            None => Err(CreateError::IdempotencyConflict),
        }
    }

    /// The notice, unless it is past its expiry (then its whole partition is gone to readers).
    pub async fn notice(&self, notice_id: &NoticeId) -> Result<Option<NoticeRecord>, StoreError> {
        let now = self.clock.now();
        Ok(self
            .store
            .notice(notice_id)
            .await?
            .filter(|n| n.visible(now)))
    }

    /// The notice, if it belongs to `account_id` (and is not past its expiry).
    pub async fn notice_of(
        &self,
        account_id: &AccountId,
        notice_id: &NoticeId,
    ) -> Result<Option<NoticeRecord>, StoreError> {
        Ok(self
            .notice(notice_id)
            .await?
            .filter(|n| &n.request.account_id == account_id))
    }

    /// A notice's deliveries that are not past their expiry, in key order.
    pub async fn deliveries(
        &self,
        notice_id: &NoticeId,
    ) -> Result<Vec<NotificationDelivery>, StoreError> {
        let now = self.clock.now();
        let all = self.store.deliveries(notice_id).await?;
        Ok(all.into_iter().filter(|d| d.visible(now)).collect())
    }

    /// The progress summary (counts by state).
    pub async fn summary(&self, notice_id: &NoticeId) -> Result<Progress, StoreError> {
        self.store.progress(notice_id).await
    }

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

    async fn resolve_replacement(&self, notice: &NoticeRecord) -> Result<Replacement, NotifyError> {
        let Some(key) = notice.request.supersede_key.as_deref() else {
            return Ok(Replacement::Current { cancelled: 0 });
        };
        let (table, account) = (&self.store.table, &notice.request.account_id);
        let now = self.clock.now();
        let mine = SupersedePointer::to_notice(
            notice.request.notice_id.clone(),
            notice.request.created_at,
            now,
        );
        for _ in 0..5 {
            let pointer =
                supersede_pointer::get(&self.store.dynamo, table, account, key, now).await?;
            match pointer {
                Some(p) if p.notice_id == notice.request.notice_id => {
                    return Ok(Replacement::Current { cancelled: 0 })
                }
                None => {
                    let claim = supersede_pointer::claim(table, account, key, &mine, now)?;
                    if self.store.send(claim).await?.applied() {
                        return Ok(Replacement::Current { cancelled: 0 });
                    }
                }
                Some(p) => {
                    let earlier = (p.created_at, &p.notice_id)
                        < (notice.request.created_at, &notice.request.notice_id);
                    if !earlier {
                        // A later notice already holds the key: this one is replaced at once.
                        self.supersede(&notice.request.notice_id, &p.notice_id)
                            .await?;
                        return Ok(Replacement::SupersededAtOnce);
                    }
                    let take =
                        supersede_pointer::take_over(table, account, key, &mine, &p.notice_id)?;
                    if self.store.send(take).await?.applied() {
                        let cancelled = self
                            .supersede(&p.notice_id, &notice.request.notice_id)
                            .await?;
                        return Ok(Replacement::Current { cancelled });
                    }
                }
            }
        }
        Err(StoreError::Dynamo("the supersede pointer kept changing".into()).into())
    }

    /// Marks `replaced` superseded by `by` and cancels its queued deliveries.
    pub async fn supersede(&self, replaced: &NoticeId, by: &NoticeId) -> Result<u32, NotifyError> {
        let now = self.clock.now();
        self.store
            .send(notice_retention::supersede(
                &self.store.table,
                replaced,
                by,
                now,
            )?)
            .await?;
        self.cancel_queued(replaced, &format!("superseded by {by}"), CANCEL_LIMIT)
            .await
    }

    /// Withdraws an account's notice and cancels its queued deliveries. Repeating it is harmless.
    pub async fn withdraw(
        &self,
        account_id: &AccountId,
        notice_id: &NoticeId,
    ) -> Result<(NoticeRecord, u32), WithdrawError> {
        let Some(notice) = self.notice_of(account_id, notice_id).await? else {
            return Err(WithdrawError::NotFound);
        };
        let now = self.clock.now();
        if notice.status == NoticeStatus::Superseded {
            return Err(WithdrawError::Superseded(
                notice.superseded_by.map(String::from).unwrap_or_default(),
            ));
        }
        if notice.status != NoticeStatus::Withdrawn {
            let moved = self
                .store
                .send(notice_retention::withdraw(
                    &self.store.table,
                    notice_id,
                    now,
                )?)
                .await?
                .applied();
            if !moved {
                // Replaced or withdrawn concurrently: report what it is now.
                let current = self
                    .notice_of(account_id, notice_id)
                    .await?
                    .ok_or(WithdrawError::NotFound)?;
                if current.status == NoticeStatus::Superseded {
                    return Err(WithdrawError::Superseded(
                        current.superseded_by.map(String::from).unwrap_or_default(),
                    ));
                }
            }
        }
        let cancelled = self
            .cancel_queued(notice_id, "withdrawn", CANCEL_LIMIT)
            .await?;
        let notice = self
            .notice_of(account_id, notice_id)
            .await?
            .ok_or(WithdrawError::NotFound)?;
        Ok((notice, cancelled))
    }

    /// Cancels up to `limit` queued deliveries of a notice (deleting their work). Deliveries that
    /// moved meanwhile (claimed by a consumer) are left to finish.
    pub async fn cancel_queued(
        &self,
        notice_id: &NoticeId,
        why: &str,
        limit: usize,
    ) -> Result<u32, NotifyError> {
        let now = self.clock.now();
        let queued = self
            .store
            .deliveries_in(notice_id, N::Queued, limit)
            .await?;
        let store = &self.store;
        let results: Vec<bool> = stream::iter(queued)
            .map(|d| async move {
                let mut next = d.clone();
                next.status = N::Cancelled;
                next.updated_at = now;
                next.not_before = None;
                next.push_history_detail("cancelled", "cancelled", now, Some(why.to_string()));
                Ok::<bool, NotifyError>(
                    store
                        .transition(&d, next, NT::Withdraw, Effects::delete_work())
                        .await?
                        .is_some(),
                )
            })
            .buffer_unordered(FAN_OUT_CONCURRENCY)
            .try_collect()
            .await?;
        Ok(results.iter().filter(|c| **c).count() as u32)
    }
}

enum Replacement {
    Current { cancelled: u32 },
    SupersededAtOnce,
}

/// The deliveries a fan-out creates: one per distinct recipient × distinct channel, keyed
/// `{channel}-{recipient index}`, in channel then recipient order.
pub fn planned_deliveries(notice: &NoticeRecord) -> Vec<PlannedDelivery<'_>> {
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
pub struct PlannedDelivery<'a> {
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
    use super::*;
    use crate::ids::id;
    use crate::store::notice::Contact;

    fn new_notice() -> NewNotice {
        NewNotice {
            recipients: vec![
                Recipient::Address("ops@example.com".into()),
                Recipient::Contact(Contact {
                    id: "team".into(),
                    email: None,
                    slack_webhook_url: Some("https://hooks.slack.com/services/T/B/x".into()),
                }),
            ],
            channels: vec!["email".into(), "slack".into(), "console".into()],
            subject: "Subject".into(),
            body: "Body".into(),
            deadline: None,
            supersede_key: None,
            idempotency_key: "k1".into(),
            reason: None,
        }
    }

    #[test]
    fn validation_names_every_bad_field() {
        let now = Timestamp(1_000);
        assert!(validate(&new_notice(), now, &TargetPolicy::PRODUCTION).is_empty());
        let bad = NewNotice {
            recipients: vec![],
            channels: vec!["pigeon".into()],
            subject: " ".into(),
            body: String::new(),
            deadline: Some(now),
            supersede_key: Some(String::new()),
            idempotency_key: String::new(),
            reason: None,
        };
        let fields: Vec<String> = validate(&bad, now, &TargetPolicy::PRODUCTION)
            .into_iter()
            .map(|(f, _)| f)
            .collect();
        assert_eq!(
            fields,
            [
                "recipients",
                "channels[0]",
                "subject",
                "body",
                "deadline",
                "supersede_key",
                "idempotency_key"
            ]
        );
    }

    #[test]
    fn idempotency_keys_are_per_account() {
        assert_eq!(notice_id_for(&id("a"), "k"), notice_id_for(&id("a"), "k"));
        assert_ne!(notice_id_for(&id("a"), "k"), notice_id_for(&id("b"), "k"));
        assert!(notice_id_for(&id("a"), "k").as_str().starts_with("ntc_"));
        assert_eq!(notice_id_for(&id("a"), "k").as_str().len(), 30);
        let mut other = new_notice();
        assert_eq!(request_hash(&other), request_hash(&new_notice()));
        other.subject = "Other".into();
        assert_ne!(request_hash(&other), request_hash(&new_notice()));
    }

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
