//! A notice as operators read it (any account's): the notice, its progress summary and every
//! channel delivery, through the notice service ([`crate::notify::notice_service`]). Both doors
//! read it here: `GET /operator/notifications/{notice_id}` and the console's notification page.

use super::resource_ids::named;
use super::OpsError;
use crate::aws::Clients;
use crate::clock::Clock;
use crate::config::Config;
use crate::ids::NoticeId;
use crate::notify::notice_service::NoticeService;
use crate::notify::table::NotificationTable;
use crate::store::notice::NoticeRecord;
use crate::store::notice_progress::Progress;
use crate::store::notification_delivery::NotificationDelivery;
use std::sync::Arc;

/// The notice service over the configured notification table.
pub fn service(clients: &Clients, config: &Config, clock: Arc<dyn Clock>) -> NoticeService {
    NoticeService::new(NotificationTable::from_config(clients, config), clock)
}

/// A notice with what the operator's page shows beside it.
#[derive(Debug)]
pub struct NoticeWithDeliveries {
    pub notice: NoticeRecord,
    pub progress: Progress,
    pub deliveries: Vec<NotificationDelivery>,
}

/// The notice `notice_id` names with its progress and its deliveries; "notice not found" for a
/// text that is not an id, an unknown notice or one past its retention.
pub async fn notice_with_deliveries(
    svc: &NoticeService,
    notice_id: &str,
) -> Result<NoticeWithDeliveries, OpsError> {
    let id: NoticeId = named(notice_id, "notice")?;
    let notice = svc.notice(&id).await?.ok_or(OpsError::NotFound("notice"))?;
    let progress = svc.summary(&id).await?;
    let deliveries = svc.deliveries(&id).await?;
    Ok(NoticeWithDeliveries {
        notice,
        progress,
        deliveries,
    })
}
