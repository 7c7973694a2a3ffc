//! Creating a notice (`requested`), idempotent by its key, its outbound recipients charged to the
//! account's daily quota when one is given.

use super::errors::CreateError;
use super::request::{notice_id_for, request_hash, NewNotice};
use super::NoticeService;
use crate::ids::AccountId;
use crate::notify::bounds::outbound_recipients;
use crate::store::notice::{self, NoticeRecord, NoticeRequest};
use crate::store::notice_quota;
use crate::store::write::Write;

impl NoticeService {
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
    pub(crate) async fn create_within(
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
}
