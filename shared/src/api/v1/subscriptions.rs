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
//! Creating and editing are named operations that take the request's [`Fields`] and typed ids
//! ([`create_subscription`], [`update_subscription`]); the handlers and the console's Manage page
//! both call them.

use super::ListResponse;
use crate::api::auth::AccountAuth;
use crate::api::extract::{
    cursor_id, page_limit, path_id, resource_id, ApiPath, ApiQuery, Fields, JsonBody, Patch,
};
use crate::api::problem::ApiError;
use crate::api::state::ApiState;
use crate::domain::classify::{answer_table, AnswerRules, MAX_RETRY_STATUSES};
use crate::domain::filter::Filter;
use crate::domain::projection::{Projection, ProjectionError};
use crate::domain::retry::{RetryPolicy, RetryPolicyError};
use crate::domain::subscription::SubscriptionStatus;
use crate::ids::{AccountId, IntegrationId, SubscriptionId};
use crate::operations::account::limits;
use crate::operations::recovery::audit::write_with_audit;
use crate::store::account_limits::Counted;
use crate::store::audit::{self, AuditAction, AuditRecord};
use crate::store::integration;
use crate::store::subscription::{self, NewSubscription, Subscription};
use crate::store::update::Edit;
use crate::store::write::Write;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

pub const SUBSCRIPTION_KIND: &str = subscription::KIND;
/// Most record types one subscription names.
pub const MAX_RECORD_TYPES: usize = 50;
pub const MAX_RECORD_TYPE_CHARS: usize = 128;

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

/// The answer rules to store; a wrong status is named by its index.
fn check_answers(f: &mut Fields, statuses: &[u16], pause_on_gone: bool) -> Option<AnswerRules> {
    if statuses.len() > MAX_RETRY_STATUSES {
        f.error(
            "retry_statuses",
            format!("at most {MAX_RETRY_STATUSES} statuses are accepted"),
        );
        return None;
    }
    match AnswerRules::new(statuses, pause_on_gone) {
        Ok(rules) => Some(rules),
        Err((i, e)) => {
            f.error(format!("retry_statuses[{i}]"), e.to_string());
            None
        }
    }
}

fn check_record_types(f: &mut Fields, types: Vec<String>) -> Option<Vec<String>> {
    if types.is_empty() {
        f.error(
            "record_types",
            "must name at least one record type (\"*\" for all)",
        );
        return None;
    }
    if types.len() > MAX_RECORD_TYPES {
        f.error(
            "record_types",
            format!("at most {MAX_RECORD_TYPES} record types are accepted"),
        );
        return None;
    }
    let mut out: Vec<String> = Vec::with_capacity(types.len());
    let mut ok = true;
    for (i, t) in types.iter().enumerate() {
        let t = t.trim();
        if t.is_empty() {
            f.error(format!("record_types[{i}]"), "must not be empty");
            ok = false;
        } else if t.chars().count() > MAX_RECORD_TYPE_CHARS
            || t.chars().any(|c| c.is_control() || c.is_whitespace())
        {
            f.error(
                format!("record_types[{i}]"),
                format!(
                    "must be at most {MAX_RECORD_TYPE_CHARS} characters without spaces or control characters"
                ),
            );
            ok = false;
        } else if !out.iter().any(|o| o == t) {
            out.push(t.to_owned());
        }
    }
    ok.then_some(out)
}

/// The filter to store: `None` for the empty filter, else its canonical JSON text.
fn check_filter(f: &mut Fields, value: &Value) -> Option<Option<String>> {
    match Filter::parse(value) {
        Ok(Filter::Always) => Some(None),
        Ok(filter) => Some(Some(filter.to_json().to_string())),
        Err(e) => {
            f.error("filter", e.to_string());
            None
        }
    }
}

fn check_fields(f: &mut Fields, fields: Vec<String>) -> Option<Vec<String>> {
    match Projection::new(fields.iter()) {
        Ok(_) => {
            let mut out: Vec<String> = Vec::with_capacity(fields.len());
            for field in fields {
                if !out.contains(&field) {
                    out.push(field);
                }
            }
            Some(out)
        }
        Err(ProjectionError::Path { index, source }) => {
            f.error(format!("fields[{index}]"), source.to_string());
            None
        }
        Err(e @ ProjectionError::TooManyFields { .. }) => {
            f.error("fields", e.to_string());
            None
        }
    }
}

fn check_retry_policy(f: &mut Fields, policy: RetryPolicy) -> Option<RetryPolicy> {
    match policy.validate() {
        Ok(()) => Some(policy),
        Err(e) => {
            let field = match e {
                RetryPolicyError::MaxRetriesOutOfRange(_) => "retry_policy.max_retries",
                RetryPolicyError::RetryDelayOutOfRange(_) => "retry_policy.retry_delay_secs",
            };
            f.error(field, e.to_string());
            None
        }
    }
}

/// `POST /v1/subscriptions`: 201 with `Location` and the subscription.
async fn create(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    JsonBody(f): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    let subscription = create_subscription(&state, &auth.account_id, &auth.actor(), f).await?;
    let location = format!("/v1/subscriptions/{}", subscription.subscription_id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(SubscriptionView::from(&subscription)),
    ))
}

/// Creates an `active` subscription of the account from a request's fields (`integration_id`,
/// `record_types`, `filter`, `fields`, `retry_policy`); every invalid field, an integration
/// that is not the account's included, is named in one 422. Audited for `actor` in one
/// transaction with it.
pub async fn create_subscription(
    state: &ApiState,
    account_id: &AccountId,
    actor: &str,
    mut f: Fields,
) -> Result<Subscription, ApiError> {
    let integration_id: Option<String> = f.required("integration_id");
    let record_types = f
        .required::<Vec<String>>("record_types")
        .and_then(|t| check_record_types(&mut f, t));
    let filter = match f.raw("filter") {
        Patch::Set(v) => check_filter(&mut f, &v),
        Patch::Absent | Patch::Null => Some(None),
    };
    let fields = f
        .required::<Vec<String>>("fields")
        .and_then(|v| check_fields(&mut f, v));
    let retry_policy = match f.patch::<RetryPolicy>("retry_policy") {
        Patch::Set(p) => check_retry_policy(&mut f, p),
        Patch::Absent | Patch::Null => Some(RetryPolicy::default()),
    };
    let statuses = f.optional::<Vec<u16>>("retry_statuses").unwrap_or_default();
    let pause_on_gone = f.optional::<bool>("pause_on_gone").unwrap_or_default();
    let answers = check_answers(&mut f, &statuses, pause_on_gone);
    f.forbid("status", STATUS_IS_SYSTEMS);

    // The integration must be one of the caller's: another account's is as unknown as none.
    let integration_id = match integration_id {
        None => None,
        Some(text) => {
            let found = match resource_id::<IntegrationId>(&text) {
                Some(id) => {
                    integration::get(state.dynamo(), state.table(), account_id, &id).await?
                }
                None => None,
            };
            match found {
                Some(i) => Some(i.integration_id),
                None => {
                    f.error(
                        "integration_id",
                        "no integration with this id in the account",
                    );
                    None
                }
            }
        }
    };
    if let (Some(types), Some(projected)) = (&record_types, &fields) {
        super::event_types::check_subscription(state, &mut f, types, projected).await?;
    }
    f.finish()?;
    let (
        Some(integration_id),
        Some(record_types),
        Some(filter),
        Some(fields),
        Some(retry_policy),
        Some(answers),
    ) = (
        integration_id,
        record_types,
        filter,
        fields,
        retry_policy,
        answers,
    )
    else {
        return Err(ApiError::internal("validated subscription fields missing"));
    };

    let now = state.clock.now();
    let subscription = Subscription::new(
        NewSubscription {
            account_id: account_id.clone(),
            subscription_id: SubscriptionId::new(),
            integration_id,
            record_types,
            filter,
            fields,
            retry_policy,
            answers,
        },
        now,
    );
    let entry = AuditRecord::new(
        AuditAction::CreateSubscription,
        account_id,
        &subscription.subscription_id,
        actor,
        "",
        now,
    )
    .detail("integration_id", &subscription.integration_id)
    .detail("record_types", subscription.record_types.join(","))
    .detail("fields", subscription.fields.join(","));
    limits::create_counted(
        &state.account_ops(),
        account_id,
        &[Counted::Subscriptions],
        Write::all([
            subscription::create(state.table(), &subscription)?,
            audit::create(state.table(), &entry)?,
        ])?,
    )
    .await?;
    tracing::info!(
        %account_id,
        subscription_id = %subscription.subscription_id,
        integration_id = %subscription.integration_id,
        "subscription created"
    );
    Ok(subscription)
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

async fn load(
    state: &ApiState,
    account_id: &AccountId,
    id: &SubscriptionId,
) -> Result<Subscription, ApiError> {
    subscription::get(state.dynamo(), state.table(), account_id, id)
        .await?
        .ok_or_else(|| ApiError::not_found("subscription"))
}

async fn fetch(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<SubscriptionView>, ApiError> {
    let id = path_id(&id, "subscription")?;
    let sub = load(&state, &auth.account_id, &id).await?;
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
    let updated = update_subscription(&state, &auth.account_id, &id, &auth.actor(), f).await?;
    Ok(Json(SubscriptionView::from(&updated)))
}

/// Edits the account's subscription `id` with a request's fields (`record_types`, `filter`
/// (`null` removes it), `fields`, `retry_policy` (`null` restores the default), `retry_statuses`
/// and `pause_on_gone` (`null` restores `[]`, `false`)): every invalid
/// field named in one 422, then 404 when it is not the account's. Only the fields named change.
pub async fn update_subscription(
    state: &ApiState,
    account_id: &AccountId,
    id: &SubscriptionId,
    actor: &str,
    mut f: Fields,
) -> Result<Subscription, ApiError> {
    let record_types = match f.patch::<Vec<String>>("record_types") {
        Patch::Set(t) => check_record_types(&mut f, t),
        Patch::Null => {
            f.error("record_types", "must not be null");
            None
        }
        Patch::Absent => None,
    };
    // Some(None): remove the filter.
    let filter = match f.raw("filter") {
        Patch::Set(v) => check_filter(&mut f, &v),
        Patch::Null => Some(None),
        Patch::Absent => None,
    };
    let fields = match f.patch::<Vec<String>>("fields") {
        Patch::Set(v) => check_fields(&mut f, v),
        Patch::Null => {
            f.error("fields", "must not be null; use [] for no fields");
            None
        }
        Patch::Absent => None,
    };
    let retry_policy = match f.patch::<RetryPolicy>("retry_policy") {
        Patch::Set(p) => check_retry_policy(&mut f, p),
        Patch::Null => Some(RetryPolicy::default()),
        Patch::Absent => None,
    };
    let statuses = match f.patch::<Vec<u16>>("retry_statuses") {
        Patch::Set(v) => Some(v),
        Patch::Null => Some(Vec::new()),
        Patch::Absent => None,
    };
    let pause_on_gone = match f.patch::<bool>("pause_on_gone") {
        Patch::Set(v) => Some(v),
        Patch::Null => Some(false),
        Patch::Absent => None,
    };
    // Each named setting checked alone here; with the other as stored once it is read.
    if statuses.is_some() || pause_on_gone.is_some() {
        let given = statuses.as_deref().unwrap_or_default();
        check_answers(&mut f, given, pause_on_gone.unwrap_or_default());
    }
    f.forbid("status", STATUS_IS_SYSTEMS);
    f.forbid(
        "integration_id",
        "cannot be changed; create a subscription for the other integration",
    );
    f.finish()?;

    if record_types.is_none()
        && filter.is_none()
        && fields.is_none()
        && retry_policy.is_none()
        && statuses.is_none()
        && pause_on_gone.is_none()
    {
        return load(state, account_id, id).await;
    }
    let current = load(state, account_id, id).await?;
    if record_types.is_some() || fields.is_some() {
        // What the subscription will name once edited must be in the catalog.
        let mut f = Fields::new(serde_json::Map::new());
        let types = record_types.as_ref().unwrap_or(&current.record_types);
        let projected = fields.as_ref().unwrap_or(&current.fields);
        super::event_types::check_subscription(state, &mut f, types, projected).await?;
        f.finish()?;
    }
    let answers = if statuses.is_some() || pause_on_gone.is_some() {
        let mut f = Fields::new(serde_json::Map::new());
        let statuses = statuses.as_deref().unwrap_or(&current.retry_statuses);
        let rules = check_answers(
            &mut f,
            statuses,
            pause_on_gone.unwrap_or(current.pause_on_gone),
        );
        f.finish()?;
        rules
    } else {
        None
    };
    let now = state.clock.now();
    let mut entry = AuditRecord::new(
        AuditAction::EditSubscription,
        account_id,
        id,
        actor,
        "",
        now,
    );
    let mut u = Edit::new().set("updated_at", &now)?;
    if let Some(types) = &record_types {
        u = u.set("record_types", types)?;
        entry = entry.detail(
            "record_types",
            format!("{} -> {}", current.record_types.join(","), types.join(",")),
        );
    }
    match &filter {
        Some(Some(text)) => u = u.set("filter", text)?,
        Some(None) => u = u.remove("filter"),
        None => {}
    }
    if let Some(new) = &filter {
        let shown = |f: Option<&String>| f.cloned().unwrap_or_else(|| "(none)".into());
        entry = entry.detail(
            "filter",
            format!(
                "{} -> {}",
                shown(current.filter.as_ref()),
                shown(new.as_ref())
            ),
        );
    }
    if let Some(fields) = &fields {
        u = u.set("fields", fields)?;
        entry = entry.detail(
            "fields",
            format!("{} -> {}", current.fields.join(","), fields.join(",")),
        );
    }
    if let Some(policy) = &retry_policy {
        u = u.set("retry_policy", policy)?;
        let json = |p: &RetryPolicy| serde_json::to_string(p).unwrap_or_default();
        entry = entry.detail(
            "retry_policy",
            format!("{} -> {}", json(&current.retry_policy), json(policy)),
        );
    }
    if let Some(rules) = &answers {
        u = if rules.retry_statuses.is_empty() {
            u.remove("retry_statuses")
        } else {
            u.set("retry_statuses", &rules.retry_statuses)?
        };
        u = if rules.pause_on_gone {
            u.set("pause_on_gone", &true)?
        } else {
            u.remove("pause_on_gone")
        };
        let shown = |s: &[u16], gone: bool| format!("retry {s:?}, pause on gone {gone}");
        entry = entry.detail(
            "answers",
            format!(
                "{} -> {}",
                shown(&current.retry_statuses, current.pause_on_gone),
                shown(&rules.retry_statuses, rules.pause_on_gone)
            ),
        );
    }
    let write = subscription::edit(state.table(), account_id, id, u)?;
    if !write_with_audit(&state.ops(), Some(write), &entry).await? {
        return Err(ApiError::not_found("subscription"));
    }
    load(state, account_id, id).await
}

async fn remove(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    let id = path_id(&id, "subscription")?;
    let entry = AuditRecord::new(
        AuditAction::DeleteSubscription,
        &auth.account_id,
        &id,
        &auth.actor(),
        "",
        state.clock.now(),
    );
    limits::remove_counted(
        &state.account_ops(),
        &auth.account_id,
        &[Counted::Subscriptions],
        Write::all([
            subscription::delete(state.table(), &auth.account_id, &id)?,
            audit::create(state.table(), &entry)?,
        ])?,
        "subscription",
    )
    .await?;
    tracing::info!(account_id = %auth.account_id, subscription_id = %id, "subscription deleted");
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields() -> Fields {
        Fields::new(serde_json::Map::new())
    }

    #[test]
    fn record_types_are_trimmed_deduplicated_and_bounded() {
        let mut f = fields();
        assert_eq!(
            check_record_types(&mut f, vec![" order".into(), "order".into(), "*".into()]),
            Some(vec!["order".to_string(), "*".to_string()])
        );
        assert_eq!(check_record_types(&mut f, vec![]), None);
        assert_eq!(check_record_types(&mut f, vec!["a b".into()]), None);
        let Err(ApiError::Validation { errors }) = f.finish() else {
            panic!()
        };
        assert_eq!(errors[0].field, "record_types");
        assert_eq!(errors[1].field, "record_types[0]");
    }

    #[test]
    fn filters_are_stored_canonically_and_empty_filters_are_none() {
        let mut f = fields();
        assert_eq!(check_filter(&mut f, &json!({})), Some(None));
        let stored = check_filter(&mut f, &json!({"field": "warehouse", "eq": "W1"}))
            .unwrap()
            .unwrap();
        assert!(Filter::parse(&serde_json::from_str(&stored).unwrap()).is_ok());
        assert_eq!(
            check_filter(&mut f, &json!({"field": "nope", "eq": 1})),
            None
        );
        let Err(ApiError::Validation { errors }) = f.finish() else {
            panic!()
        };
        assert_eq!(errors[0].field, "filter");
        assert!(errors[0].message.contains("unknown field"));
    }

    #[test]
    fn field_paths_and_retry_policies_name_the_offending_part() {
        let mut f = fields();
        assert_eq!(check_fields(&mut f, vec!["a".into(), "b..c".into()]), None);
        assert_eq!(
            check_retry_policy(
                &mut f,
                RetryPolicy::Exponential {
                    max_retries: 0,
                    retry_delay_secs: 5
                }
            ),
            None
        );
        let Err(ApiError::Validation { errors }) = f.finish() else {
            panic!()
        };
        assert_eq!(errors[0].field, "fields[1]");
        assert_eq!(errors[1].field, "retry_policy.max_retries");
    }
}
