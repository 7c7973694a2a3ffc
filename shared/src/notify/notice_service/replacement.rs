//! Replacement by supersede key: per account and key a pointer names the current notice; a later
//! notice takes it over and the earlier one becomes `superseded`, its queued deliveries
//! cancelled (`docs/lifecycles.md#notice`).

use super::{NoticeService, CANCEL_LIMIT};
use crate::ids::NoticeId;
use crate::notify::NotifyError;
use crate::store::notice::NoticeRecord;
use crate::store::notice_retention;
use crate::store::supersede_pointer::{self, SupersedePointer};
use crate::store::StoreError;

/// What resolving a fanning-out notice's supersede key came to.
pub(super) enum Replacement {
    Current { cancelled: u32 },
    SupersededAtOnce,
}

impl NoticeService {
    /// Takes the supersede key's pointer for `notice`, or finds it already replaced by a later
    /// notice.
    pub(super) async fn resolve_replacement(
        &self,
        notice: &NoticeRecord,
    ) -> Result<Replacement, NotifyError> {
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
}
