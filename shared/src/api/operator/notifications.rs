//! Notification deliveries, as operators read and requeue them (the operator's row of
//! `docs/lifecycles.md#notification-delivery`):
//!
//! * `GET /operator/notifications/{notice_id}` → the notice (any account), its progress summary
//!   and every delivery with its reasons and history.
//! * `POST /operator/notifications/{notice_id}/deliveries/{delivery_key}/requeue` `{reason}` →
//!   the delivery back in `queued` with fresh dispatch work, and nothing else changed. Only
//!   `failed` deliveries whose reason is `attempts_exhausted` qualify; anything else is `409`
//!   with the reason (an ambiguous failure: "the provider may already have sent it").

use super::subscriptions::reason;
use crate::api::v1::notices::{fault, service, NoticeDeliveryView, NoticeView};
use crate::notify::requeue::{requeue as requeue_delivery, RequeueError};
use crate::notify::table::NotificationTable;
use crate::operations::notices::{notice_with_deliveries, NoticeWithDeliveries};
use crate::web::auth::Operator;
use crate::web::extract::{path_id, ApiPath, JsonBody};
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use std::sync::Arc;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/operator/notifications/{notice_id}", get(fetch))
        .route(
            "/operator/notifications/{notice_id}/deliveries/{delivery_key}/requeue",
            post(requeue),
        )
}

#[derive(Debug, Serialize)]
pub struct OperatorNoticeView {
    pub notice: NoticeView,
    pub deliveries: Vec<NoticeDeliveryView>,
}

async fn fetch(
    _operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath(notice_id): ApiPath<String>,
) -> Result<Json<OperatorNoticeView>, ApiError> {
    let found = notice_with_deliveries(&service(&state), &notice_id).await?;
    Ok(Json(OperatorNoticeView::from(found)))
}

impl From<NoticeWithDeliveries> for OperatorNoticeView {
    fn from(found: NoticeWithDeliveries) -> Self {
        OperatorNoticeView {
            notice: NoticeView::new(&found.notice, Some(found.progress)),
            deliveries: found
                .deliveries
                .iter()
                .map(NoticeDeliveryView::from)
                .collect(),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct RequeuedView {
    pub delivery: NoticeDeliveryView,
    /// The fresh dispatch work's id (its message is published from the work row).
    pub dispatch_id: String,
}

pub async fn requeue(
    operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath((notice_id, delivery_key)): ApiPath<(String, String)>,
    JsonBody(mut f): JsonBody,
) -> Result<Json<RequeuedView>, ApiError> {
    let reason = reason(&mut f);
    f.finish()?;
    let reason = reason.ok_or_else(|| ApiError::internal("validated reason missing"))?;
    let notice_id = path_id(&notice_id, "notification delivery")?;
    let delivery_key: String = path_id(&delivery_key, "notification delivery")?;
    let store = NotificationTable::from_config(&state.clients, &state.config);
    let (delivery, work) = requeue_delivery(
        &store,
        &notice_id,
        &delivery_key,
        &operator.id,
        &reason,
        state.clock.now(),
    )
    .await?;
    Ok(Json(RequeuedView {
        delivery: NoticeDeliveryView::from(&delivery),
        dispatch_id: work.dispatch_id,
    }))
}

/// A requeue's refusal as a problem: a delivery not found, one whose status or failure does not
/// qualify (or that moved meanwhile) a conflict.
impl From<RequeueError> for ApiError {
    fn from(e: RequeueError) -> Self {
        match e {
            RequeueError::NotFound => ApiError::not_found("notification delivery"),
            RequeueError::Refused(_) | RequeueError::Changed => ApiError::conflict(e.to_string()),
            RequeueError::Fault(e) => fault(e),
        }
    }
}
