//! `GET /operator/attention` (`?limit=&cursor=`): what needs an operator across every account,
//! oldest first ([`crate::operations::attention_queue`]): paused subscriptions, dead and failed
//! deliveries, notifications whose attempts ran out, replay jobs whose run stopped. Each entry names its account (id and name) and
//! the operator route that acts on it (`act`: method and path); the console's page links to its
//! confirmation form instead. An account's own view stays at
//! `GET /v1/attention` and the console's Needs Attention of the account.

use crate::api::v1::events::monitor_error;
use crate::api::v1::ListResponse;
use crate::ids::{AccountId, ChangeId, DeliveryId, NoticeId, ReplayJobId, SubscriptionId};
use crate::operations::attention_queue::{
    attention_queue, queue_position, AttentionEntry, AttentionKind,
};
use crate::web::auth::Operator;
use crate::web::extract::{page_limit, ApiQuery};
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new().route("/operator/attention", get(list))
}

/// The operator route that acts on an entry.
#[derive(Debug, Serialize)]
pub struct Act {
    pub method: &'static str,
    pub path: String,
}

/// An entry of the queue as the API shows it.
#[derive(Debug, Serialize)]
pub(crate) struct AttentionView {
    pub kind: AttentionKind,
    pub account_id: AccountId,
    pub account_name: String,
    /// Since when it needs an operator.
    pub since: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription_id: Option<SubscriptionId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_id: Option<ChangeId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_id: Option<DeliveryId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<ReplayJobId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice_id: Option<NoticeId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub act: Act,
}

/// The operator route that acts on `e`.
pub fn act(e: &AttentionEntry) -> Act {
    let account = format!("/operator/accounts/{}", e.account_id);
    let sub = e
        .subscription_id
        .as_ref()
        .map(|s| s.to_string())
        .unwrap_or_default();
    let path = match (e.kind, &e.change_id, &e.job_id, &e.notice_id) {
        (AttentionKind::DeadDelivery | AttentionKind::FailedDelivery, Some(c), _, _) => {
            format!("{account}/subscriptions/{sub}/deliveries/{c}/retry")
        }
        (AttentionKind::StalledReplay, _, Some(j), _) => format!("{account}/replays/{j}/resume"),
        (AttentionKind::ExhaustedNotification, _, _, Some(n)) => format!(
            "/operator/notifications/{n}/deliveries/{}/requeue",
            e.delivery_key.as_deref().unwrap_or_default()
        ),
        _ => format!("{account}/subscriptions/{sub}/resume"),
    };
    Act {
        method: "POST",
        path,
    }
}

impl AttentionView {
    pub fn new(e: &AttentionEntry, account_name: &str) -> Self {
        AttentionView {
            kind: e.kind,
            account_id: e.account_id.clone(),
            account_name: account_name.to_owned(),
            since: e.at.to_rfc3339(),
            subscription_id: e.subscription_id.clone(),
            change_id: e.change_id.clone(),
            delivery_id: e.delivery_id.clone(),
            job_id: e.job_id.clone(),
            notice_id: e.notice_id.clone(),
            delivery_key: e.delivery_key.clone(),
            last_error: e.detail.clone(),
            act: act(e),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListParams {
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

async fn list(
    _operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<ListResponse<AttentionView>>, ApiError> {
    let limit = page_limit(params.limit)?;
    let after = queue_position(params.cursor.as_deref())?;
    let (entries, next) = attention_queue(
        state.dynamo(),
        state.table(),
        &state.config.notification_table,
        after.as_deref(),
        limit,
        state.clock.now(),
    )
    .await
    .map_err(monitor_error)?;
    Ok(Json(ListResponse::new(
        entries
            .iter()
            .map(|(e, name)| AttentionView::new(e, name))
            .collect(),
        next,
    )))
}
