//! `GET /operator/attention` (`?limit=&cursor=`): what needs an operator across every account,
//! oldest first ([`crate::operations::attention_queue`]): paused subscriptions, dead and failed
//! deliveries, notifications whose attempts ran out, replay jobs whose run stopped. Each entry names its account (id and name) and
//! the operator route that acts on it (`act`: method and path); the console's page links to its
//! confirmation form instead. An account's own view stays at
//! `GET /v1/attention` and the console's Needs Attention of the account.

use crate::api::auth::Operator;
use crate::api::extract::{page_limit, ApiQuery};
use crate::api::problem::ApiError;
use crate::api::state::ApiState;
use crate::api::v1::events::monitor_error;
use crate::api::v1::ListResponse;
use crate::ids::{AccountId, ChangeId, DeliveryId, NoticeId, ReplayJobId, SubscriptionId};
use crate::operations::attention_queue::{attention_queue, AttentionEntry, AttentionKind};
use crate::store::cursor;
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
pub struct AttentionView {
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
pub struct ListParams {
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

/// The queue position a `?cursor=` continues after (`422` when it is not one of this list's):
/// an entry's time and id, or a notification delivery's time, notice and key.
pub fn queue_position(cursor_text: Option<&str>) -> Result<Option<String>, ApiError> {
    use crate::store::keys::{is_time_sort, is_trouble_sort};
    cursor_text
        .map(|c| {
            cursor::decode(c)
                .filter(|p| is_time_sort(p) || is_trouble_sort(p))
                .ok_or_else(|| ApiError::field("cursor", "is not a cursor of this list"))
        })
        .transpose()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::audit;

    /// The audit histories' form (`TimeCursor`) and the operators' queue's (`QueueCursor`).
    #[test]
    fn every_time_and_queue_cursor_of_the_documented_form_decodes_and_others_are_refused() {
        let is_audit = |c: &str| cursor::decode(c).is_some_and(|p| audit::is_position(&p));
        for good in ["000000000000000.a", "999999999999999.01HZ-x_Y"] {
            assert!(is_audit(good), "{good}");
            assert!(queue_position(Some(good)).unwrap().is_some(), "{good}");
            let notice = format!("{good}~key_1");
            assert!(queue_position(Some(&notice)).unwrap().is_some(), "{notice}");
            assert!(!is_audit(&notice), "{notice}");
        }
        for bad in [
            "",
            "a",
            "000000000000000",
            "000000000000000.",
            "00000000000000.a",
            "0000000000000000.a",
            "00000000000000x.a",
            "000000000000000.a.b",
            "000000000000000.a~",
            "000000000000000.a~b~c",
            "000000000000000#a",
        ] {
            assert!(!is_audit(bad), "{bad:?}");
            assert!(queue_position(Some(bad)).is_err(), "{bad:?}");
        }
    }
}
