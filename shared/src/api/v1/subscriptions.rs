//! Subscriptions of the caller's account (account token):
//!
//! * `POST /v1/subscriptions` `{integration_id, record_types, filter?, fields, retry_policy?,
//!   retry_statuses?, pause_on_gone?}` → 201, status `active`. The integration must be one of the
//!   account's; the filter is checked with [`Filter::parse`] and stored in its canonical JSON
//!   form, the fields with [`Projection::new`], the retry policy with [`RetryPolicy::validate`]
//!   (default `{"kind": "fixed_schedule"}`), the answers retried and the pause on a 410 with
//!   [`AnswerRules::new`] (default: none, `false`).
//! * `GET /v1/subscriptions` (`?integration_id=&limit=&cursor=`), `GET /v1/subscriptions/{id}`.
//! * `PATCH /v1/subscriptions/{id}`: `record_types`, `filter` (`null` removes it), `fields`,
//!   `retry_policy` (`null` restores the default), `retry_statuses` and `pause_on_gone` (`null`
//!   restores `[]` and `false`). Not `status`: a subscription is paused by the
//!   system (fifty dead deliveries in a row) and resumed by an operator. The edit touches only the
//!   fields it names, so it never overwrites the status or dead count the worker maintains.
//! * `DELETE /v1/subscriptions/{id}` → 204.
//!
//! The handlers read the body into the domain's drafts ([`read_new`], [`read_edit`]: a wrong
//! type or an unknown field is refused here), check them
//! ([`crate::domain::subscription_input`]) and call the named operations of
//! [`crate::operations::account::subscriptions`], which the console's Manage page calls too;
//! every field at fault is named in one 422.

use super::ListResponse;
use crate::domain::classify::answer_table;
use crate::domain::retry::RetryPolicy;
use crate::domain::subscription::SubscriptionStatus;
use crate::domain::subscription_input::{Given, SubscriptionDraft, SubscriptionEditDraft};
use crate::ids::{AccountId, IntegrationId, SubscriptionId};
use crate::operations::account::subscriptions as ops;
use crate::operations::OpsError;
use crate::store::subscription::{self, Subscription};
use crate::web::auth::AccountAuth;
use crate::web::extract::{
    cursor_id, page_limit, path_id, resource_id, ApiPath, ApiQuery, Fields, JsonBody, Patch,
};
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

const STATUS_IS_SYSTEMS: &str = "is not set through this API: the system pauses a subscription after fifty dead deliveries in a row and an operator resumes it";

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/v1/subscriptions", post(create).get(list))
        .route(
            "/v1/subscriptions/{subscription_id}",
            get(fetch).patch(update).delete(remove),
        )
}

/// A subscription as the API shows it.
#[derive(Debug, Serialize)]
pub struct SubscriptionView {
    pub id: SubscriptionId,
    pub account_id: AccountId,
    pub integration_id: IntegrationId,
    pub record_types: Vec<String>,
    /// The filter's canonical JSON; `null` when every change matches.
    pub filter: Value,
    pub fields: Vec<String>,
    pub retry_policy: RetryPolicy,
    /// 4xx statuses retried on the backoff schedule instead of ending the delivery dead.
    pub retry_statuses: Vec<u16>,
    /// A 410 Gone pauses the subscription at once.
    pub pause_on_gone: bool,
    /// What each answer of the receiver does for this subscription.
    pub answers: Vec<AnswerView>,
    pub status: SubscriptionStatus,
    pub consecutive_dead: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl From<&Subscription> for SubscriptionView {
    fn from(sub: &Subscription) -> Self {
        SubscriptionView {
            id: sub.subscription_id.clone(),
            account_id: sub.account_id.clone(),
            integration_id: sub.integration_id.clone(),
            record_types: sub.record_types.clone(),
            filter: sub
                .filter
                .as_deref()
                .map(|text| {
                    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
                })
                .unwrap_or(Value::Null),
            fields: sub.fields.clone(),
            retry_policy: sub.retry_policy.clone(),
            retry_statuses: sub.retry_statuses.clone(),
            pause_on_gone: sub.pause_on_gone,
            answers: answer_table(&sub.answer_rules())
                .into_iter()
                .map(|row| AnswerView {
                    answer: row.answer,
                    effect: row.effect.describe(),
                })
                .collect(),
            status: sub.status,
            consecutive_dead: sub.consecutive_dead,
            paused_at: sub.paused_at.map(|t| t.to_rfc3339()),
            created_at: sub.created_at.to_rfc3339(),
            updated_at: sub.updated_at.to_rfc3339(),
        }
    }
}

/// One row of a subscription's answer table: an answer and what it does.
#[derive(Debug, Serialize)]
pub struct AnswerView {
    pub answer: String,
    pub effect: &'static str,
}

/// `POST /v1/subscriptions`: 201 with `Location` and the subscription.
async fn create(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    JsonBody(f): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    let subscription = create_checked(&state, &auth.account_id, &auth.actor(), f).await?;
    let location = format!("/v1/subscriptions/{}", subscription.subscription_id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(SubscriptionView::from(&subscription)),
    ))
}

/// A new subscription's body read into its draft (`integration_id`, `record_types`, `filter`,
/// `fields`, `retry_policy`, `retry_statuses`, `pause_on_gone`): a value of the wrong type is
/// named here, the rules of a valid subscription by the check.
pub(crate) fn read_new(f: &mut Fields) -> SubscriptionDraft {
    SubscriptionDraft {
        integration_id: given(f, "integration_id"),
        record_types: given(f, "record_types"),
        filter: f.raw("filter").set().cloned(),
        fields: given(f, "fields"),
        retry_policy: f.patch("retry_policy").set().cloned(),
        retry_statuses: f.optional("retry_statuses").unwrap_or_default(),
        pause_on_gone: f.optional("pause_on_gone").unwrap_or_default(),
    }
}

/// A field a new subscription requires: missing (the check names it), refused (a wrong type or
/// `null`, named here) or its value.
fn given<T: DeserializeOwned>(f: &mut Fields, name: &str) -> Given<T> {
    match f.patch(name) {
        Patch::Set(v) => Given::Value(v),
        Patch::Null => {
            f.error(name, "is required and must not be null");
            Given::Refused
        }
        Patch::Absent if f.has(name) => Given::Refused,
        Patch::Absent => Given::Missing,
    }
}

/// An edit's body read into its draft (`record_types`, `filter`, `fields`, `retry_policy`,
/// `retry_statuses`, `pause_on_gone`; `status` and `integration_id` are refused).
pub(crate) fn read_edit(f: &mut Fields) -> SubscriptionEditDraft {
    SubscriptionEditDraft {
        record_types: f.patch("record_types"),
        filter: f.raw("filter"),
        fields: f.patch("fields"),
        retry_policy: f.patch("retry_policy"),
        retry_statuses: f.patch("retry_statuses"),
        pause_on_gone: f.patch("pause_on_gone"),
    }
}

/// `POST /v1/subscriptions`: every field at fault, the integration and the catalog's refusals
/// included, in one 422.
async fn create_checked(
    state: &ApiState,
    account_id: &AccountId,
    actor: &str,
    mut f: Fields,
) -> Result<Subscription, ApiError> {
    let draft = read_new(&mut f);
    let ops = state.account_ops();
    let checked = match ops::check_new_subscription(&ops, account_id, draft).await {
        Ok(checked) => Some(checked),
        Err(OpsError::Fields(errors)) => {
            f.absorb(errors);
            None
        }
        Err(e) => return Err(e.into()),
    };
    f.forbid("status", STATUS_IS_SYSTEMS);
    f.finish()?;
    let checked = checked.ok_or_else(|| ApiError::internal("checked subscription missing"))?;
    Ok(ops::create_subscription(&ops, account_id, actor, checked).await?)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    integration_id: Option<String>,
    limit: Option<u32>,
    cursor: Option<String>,
}

async fn list(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<ListResponse<SubscriptionView>>, ApiError> {
    let limit = page_limit(params.limit)?;
    let after_id: Option<SubscriptionId> = cursor_id(params.cursor.as_deref())?;
    let integration_id = params
        .integration_id
        .map(|text| {
            resource_id::<IntegrationId>(&text)
                .ok_or_else(|| ApiError::field("integration_id", "is not an integration id"))
        })
        .transpose()?;
    let (items, next) = subscription::list(
        state.dynamo(),
        state.table(),
        &auth.account_id,
        integration_id.as_ref(),
        limit,
        after_id.as_ref(),
    )
    .await?;
    Ok(Json(ListResponse::new(
        items.iter().map(SubscriptionView::from).collect(),
        next,
    )))
}

async fn fetch(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<SubscriptionView>, ApiError> {
    let id = path_id(&id, "subscription")?;
    let sub = state.ops().subscription(&auth.account_id, &id).await?;
    Ok(Json(SubscriptionView::from(&sub)))
}

/// `PATCH /v1/subscriptions/{id}`: the subscription as it is now.
async fn update(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(id): ApiPath<String>,
    JsonBody(f): JsonBody,
) -> Result<Json<SubscriptionView>, ApiError> {
    let id = path_id(&id, "subscription")?;
    let updated = update_checked(&state, &auth.account_id, &id, &auth.actor(), f).await?;
    Ok(Json(SubscriptionView::from(&updated)))
}

/// `PATCH`: the body's every field at fault in one 422, then the operation's refusals (`404`
/// when the subscription is not the account's).
async fn update_checked(
    state: &ApiState,
    account_id: &AccountId,
    id: &SubscriptionId,
    actor: &str,
    mut f: Fields,
) -> Result<Subscription, ApiError> {
    let draft = read_edit(&mut f);
    let edit = draft.check().map_err(|errors| f.absorb(errors)).ok();
    f.forbid("status", STATUS_IS_SYSTEMS);
    f.forbid(
        "integration_id",
        "cannot be changed; create a subscription for the other integration",
    );
    f.finish()?;
    let edit = edit.ok_or_else(|| ApiError::internal("checked subscription edit missing"))?;
    let ops = state.account_ops();
    Ok(ops::update_subscription(&ops, account_id, id, actor, edit).await?)
}

async fn remove(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    let id = path_id(&id, "subscription")?;
    let ops = state.account_ops();
    ops::delete_subscription(&ops, &auth.account_id, &id, &auth.actor()).await?;
    Ok(StatusCode::NO_CONTENT)
}
