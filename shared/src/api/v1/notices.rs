//! Notices of the caller's account (account token), fanned out to email, Slack and the console by
//! the notification pipeline ([`crate::notify`]):
//!
//! * `POST /v1/notices` `{recipients, channels, subject, body, deadline?, supersede_key?,
//!   idempotency_key, reason?}` → `202` with the notice (`requested`; it is fanned out to one
//!   delivery per recipient × channel right after). The idempotency key may come as the
//!   `Idempotency-Key` header instead; repeating a request with the same key answers `200` with
//!   the first notice, a different request under the same key is `409`. A recipient is an email
//!   address or identity (`"ops@example.com"`), or `{id, email?, slack_webhook_url?}`. A later
//!   notice with the same `supersede_key` replaces this one (its queued deliveries are cancelled).
//!
//!   Bounds ([`crate::notify::bounds`]): at most [`crate::notify::bounds::MAX_RECIPIENTS`]
//!   recipients (`422`); every email address and Slack webhook the notice would send to must be
//!   one of the account's administrators or allowed by an operator
//!   (`/operator/accounts/{id}/notice-allowlist`), else `403` `recipient-not-allowed` naming
//!   each refused recipient; the account's notices reach at most the deployment's daily quota of
//!   recipients by email or Slack per UTC day, else `429` `quota-exceeded` with `Retry-After`
//!   (seconds until the next UTC day). A repeated request is not charged again.
//! * `GET /v1/notices/{notice_id}` → the notice with its progress summary (counts by state).
//! * `GET /v1/notices/{notice_id}/deliveries` → its deliveries (status, reasons, history).
//! * `POST /v1/notices/{notice_id}/withdraw` → the withdrawn notice and how many queued
//!   deliveries were cancelled; `409` when it was superseded.
//! * `GET /v1/console/notices?recipient=&limit=` → a recipient's console (in-app) notices, newest
//!   first.

use crate::domain::time::Timestamp;
use crate::ids::{AccountId, NoticeId};
use crate::notify::bounds::{outbound_recipients, refused_recipients, retry_after_secs};
use crate::notify::notice_service::{
    validate, CreateError, NewNotice, NoticeService, WithdrawError,
};
use crate::notify::NotifyError;
use crate::store::account;
use crate::store::console_inbox;
use crate::store::notice::{NoticeRecord, Recipient};
use crate::store::notice_progress::Progress;
use crate::store::notice_quota::next_utc_day;
use crate::store::notification_delivery::NotificationDelivery;
use crate::web::auth::AccountAuth;
use crate::web::extract::{page_limit, path_id, ApiPath, ApiQuery, Fields, JsonBody};
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

pub(crate) const IDEMPOTENCY_HEADER: &str = "idempotency-key";

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/v1/notices", post(create))
        .route("/v1/notices/{notice_id}", get(fetch))
        .route("/v1/notices/{notice_id}/deliveries", get(deliveries))
        .route("/v1/notices/{notice_id}/withdraw", post(withdraw))
        .route("/v1/console/notices", get(console))
}

pub(crate) fn service(state: &ApiState) -> NoticeService {
    crate::operations::notices::service(&state.clients, &state.config, state.clock.clone())
}

pub(crate) fn fault(e: NotifyError) -> ApiError {
    match e {
        NotifyError::Store(s) => s.into(),
        other => ApiError::internal(other.to_string()),
    }
}

/// A notice as the API shows it (recipients by identity only: addresses and webhook URLs stay
/// inside).
#[derive(Debug, Serialize)]
pub struct NoticeView {
    pub id: NoticeId,
    pub account_id: AccountId,
    pub status: String,
    pub reason: String,
    pub subject: String,
    pub body: String,
    pub channels: Vec<String>,
    pub recipients: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supersede_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<NoticeId>,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fanned_out_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub withdrawn_at: Option<String>,
    /// Deliveries by state, every state included (`total` is their sum).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<ProgressView>,
}

#[derive(Debug, Serialize)]
pub struct ProgressView {
    #[serde(flatten)]
    pub counts: std::collections::BTreeMap<String, i64>,
    pub total: i64,
}

impl From<Progress> for ProgressView {
    fn from(p: Progress) -> Self {
        ProgressView {
            counts: p.counts,
            total: p.total,
        }
    }
}

fn rfc(t: Option<Timestamp>) -> Option<String> {
    t.map(|t| t.to_rfc3339())
}

impl NoticeView {
    pub fn new(n: &NoticeRecord, progress: Option<Progress>) -> Self {
        NoticeView {
            id: n.request.notice_id.clone(),
            account_id: n.request.account_id.clone(),
            status: n.status.to_string(),
            reason: n.request.reason.clone(),
            subject: n.request.subject.clone(),
            body: n.request.body.clone(),
            channels: n.request.channels.clone(),
            recipients: n
                .request
                .recipients
                .iter()
                .map(|r| r.id().to_string())
                .collect(),
            deadline: rfc(n.request.deadline),
            supersede_key: n.request.supersede_key.clone(),
            superseded_by: n.superseded_by.clone(),
            created_at: n.request.created_at.to_rfc3339(),
            fanned_out_at: rfc(n.fanned_out_at),
            withdrawn_at: rfc(n.withdrawn_at),
            progress: progress.map(ProgressView::from),
        }
    }
}

/// A delivery as the API shows it (without the recipient's address).
#[derive(Debug, Serialize)]
pub struct NoticeDeliveryView {
    pub key: String,
    pub notice_id: NoticeId,
    pub channel: String,
    pub recipient: String,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_ref: Option<String>,
    /// `provider`, `attempts_exhausted` or `ambiguous`, for a failed delivery.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_detail: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bounce: Option<Value>,
    pub created_at: String,
    pub updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    pub history: Vec<Value>,
}

impl From<&NotificationDelivery> for NoticeDeliveryView {
    fn from(d: &NotificationDelivery) -> Self {
        use crate::domain::notification_delivery::FailureReason;
        NoticeDeliveryView {
            key: d.delivery_key.clone(),
            notice_id: d.notice_id.clone(),
            channel: d.channel.clone(),
            recipient: d.recipient.clone(),
            status: d.status.to_string(),
            provider: d.provider.clone(),
            provider_ref: d.provider_ref.clone(),
            failure_reason: d.failure_reason.as_ref().map(|r| r.code().to_string()),
            failure_detail: match &d.failure_reason {
                Some(FailureReason::Provider(message)) => Some(message.clone()),
                _ => None,
            },
            skip_reason: d.skip_reason.clone(),
            last_error: d.last_error.clone(),
            bounce: d.bounce.as_ref().map(
                |b| serde_json::json!({"bounce_type": b.bounce_type, "at": b.at.to_rfc3339()}),
            ),
            created_at: d.created_at.to_rfc3339(),
            updated_at: d.updated_at.to_rfc3339(),
            sent_at: rfc(d.sent_at),
            delivered_at: rfc(d.delivered_at),
            subject: d.subject.clone(),
            body: d.body.clone(),
            history: d
                .history
                .iter()
                .map(|h| {
                    let mut v =
                        serde_json::json!({"id": h.id, "kind": h.kind, "at": h.at.to_rfc3339()});
                    if let Some(detail) = &h.detail {
                        v["detail"] = Value::String(detail.clone());
                    }
                    v
                })
                .collect(),
        }
    }
}

async fn create(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
    JsonBody(mut f): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    let recipients: Option<Vec<Recipient>> = f.required("recipients");
    let channels: Option<Vec<String>> = f.required("channels");
    let subject: Option<String> = f.required("subject");
    let body: Option<String> = f.required("body");
    let deadline_text: Option<String> = f.optional("deadline");
    let supersede_key: Option<String> = f.optional("supersede_key");
    let reason: Option<String> = f.optional("reason");
    let idempotency_key = idempotency_key(&mut f, &headers);
    let deadline = deadline(&mut f, deadline_text);
    if let Some(reason) = &reason {
        // Characters, as the spec's maxLength counts them (not bytes).
        if reason.is_empty() || reason.chars().count() > 64 || reason.chars().any(char::is_control)
        {
            f.error("reason", "must be 1 to 64 characters");
        }
    }
    let now = state.clock.now();
    // Content fields are checked even when the key or deadline is wrong, so that one answer
    // names every invalid field.
    let key_ok = idempotency_key.is_some();
    let deadline_ok = deadline.is_some();
    let candidate = match (recipients, channels, subject, body) {
        (Some(recipients), Some(channels), Some(subject), Some(body)) => {
            let n = NewNotice {
                recipients,
                channels,
                subject,
                body,
                deadline: deadline.flatten(),
                supersede_key,
                idempotency_key: idempotency_key.unwrap_or_else(|| "-".into()),
                reason,
            };
            for (field, message) in validate(&n, now, &state.target_policy()) {
                let reported = (field == "idempotency_key" && !key_ok)
                    || (field == "deadline" && !deadline_ok);
                if !reported {
                    f.error(field, message);
                }
            }
            Some(n)
        }
        _ => None,
    };
    f.finish()?;
    let new = candidate.ok_or_else(|| ApiError::internal("validated notice fields missing"))?;
    let quota = state.config.notice_daily_recipient_quota;
    let outbound = check_recipients(&state, &auth.account_id, &new, quota).await?;
    let charge = (outbound > 0).then_some(quota);
    let (notice, created) = service(&state)
        .create_within(&auth.account_id, new, charge)
        .await
        .map_err(|e| create_refused(e, quota, outbound, now, state.clock.now()))?;
    if created {
        tracing::info!(account_id = %auth.account_id, notice_id = %notice.request.notice_id, "notice requested");
    }
    let location = format!("/v1/notices/{}", notice.request.notice_id);
    let status = if created {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        [(header::LOCATION, location)],
        Json(NoticeView::new(&notice, None)),
    ))
}

/// The notice's idempotency key: the body's `idempotency_key` or the `Idempotency-Key` header
/// (the same one if both); `None` after recording why there is none.
fn idempotency_key(f: &mut Fields, headers: &HeaderMap) -> Option<String> {
    let header_key = headers
        .get(IDEMPOTENCY_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body_key: Option<String> = f.optional("idempotency_key");
    match (body_key, header_key) {
        (Some(b), Some(h)) if b != h => {
            f.error(
                "idempotency_key",
                "differs from the Idempotency-Key header; send one of them",
            );
            None
        }
        (Some(k), _) | (None, Some(k)) => Some(k),
        (None, None) => {
            f.error(
                "idempotency_key",
                "is required (or send the Idempotency-Key header)",
            );
            None
        }
    }
}

/// The optional `deadline` (`Some(None)`: none given); `None` after recording that it is not a
/// time.
fn deadline(f: &mut Fields, text: Option<String>) -> Option<Option<Timestamp>> {
    match text {
        None => Some(None),
        Some(text) => match Timestamp::parse_rfc3339(&text) {
            Some(t) => Some(Some(t)),
            None => {
                f.error("deadline", "must be an RFC 3339 date-time");
                None
            }
        },
    }
}

/// A create the notice service refused, as a problem (`quota`: the account's daily recipients;
/// `outbound`: this notice's; `now`: the request's time, `refused_at`: the refusal's).
fn create_refused(
    e: CreateError,
    quota: u32,
    outbound: u32,
    now: Timestamp,
    refused_at: Timestamp,
) -> ApiError {
    match e {
        CreateError::IdempotencyConflict => {
            ApiError::conflict("the idempotency key was already used for a different notice")
        }
        CreateError::IdempotencyKeyExpired => ApiError::conflict(
            "the notice this idempotency key created has expired; send the notice with a \
             new idempotency key",
        ),
        CreateError::QuotaExceeded => ApiError::QuotaExceeded {
            detail: format!(
                "the account's notices may reach {quota} recipients by email or Slack per \
                 UTC day, and today's have no room for this notice's {outbound}; the quota \
                 is renewed at {}",
                next_utc_day(now).to_rfc3339()
            ),
            retry_after_secs: retry_after_secs(refused_at),
        },
        CreateError::Fault(e) => fault(e),
    }
}

/// The bounds of [`crate::notify::bounds`] that a notice meets before it is written: at most the
/// daily quota of outbound recipients in one notice (422), and every address it sends to is the
/// account's administrators' or allowed by an operator (403, naming each refused recipient).
/// Answers the number of outbound recipients the notice charges to the quota. A notice that
/// sends nothing outside the platform (console only) reads nothing.
async fn check_recipients(
    state: &ApiState,
    account_id: &AccountId,
    new: &NewNotice,
    quota: u32,
) -> Result<u32, ApiError> {
    let outbound = outbound_recipients(&new.recipients, &new.channels);
    if outbound == 0 {
        return Ok(0);
    }
    if outbound > quota {
        return Err(ApiError::field(
            "recipients",
            format!(
                "names {outbound} recipients by email or Slack, more than the account's daily \
                 quota of {quota}"
            ),
        ));
    }
    let account = account::get(state.dynamo(), state.table(), account_id)
        .await?
        .filter(account::Account::is_live)
        .ok_or_else(|| ApiError::from(crate::operations::OpsError::AccountGone))?;
    let (admins, allowlist) = (account.admin_emails, account.notice_allowlist);
    let refused = refused_recipients(&new.recipients, &new.channels, &admins, &allowlist);
    if !refused.is_empty() {
        return Err(ApiError::RecipientsRefused { refused });
    }
    Ok(outbound)
}

async fn own_notice(
    state: &ApiState,
    account_id: &AccountId,
    notice_id: &str,
) -> Result<NoticeRecord, ApiError> {
    let id = path_id(notice_id, "notice")?;
    service(state)
        .notice_of(account_id, &id)
        .await?
        .ok_or_else(|| ApiError::not_found("notice"))
}

async fn fetch(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(notice_id): ApiPath<String>,
) -> Result<Json<NoticeView>, ApiError> {
    let notice = own_notice(&state, &auth.account_id, &notice_id).await?;
    let progress = service(&state).summary(&notice.request.notice_id).await?;
    Ok(Json(NoticeView::new(&notice, Some(progress))))
}

#[derive(Debug, Serialize)]
pub(crate) struct DeliveriesResponse {
    pub data: Vec<NoticeDeliveryView>,
}

async fn deliveries(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(notice_id): ApiPath<String>,
) -> Result<Json<DeliveriesResponse>, ApiError> {
    let notice = own_notice(&state, &auth.account_id, &notice_id).await?;
    let all = service(&state)
        .deliveries(&notice.request.notice_id)
        .await?;
    Ok(Json(DeliveriesResponse {
        data: all.iter().map(NoticeDeliveryView::from).collect(),
    }))
}

#[derive(Debug, Serialize)]
pub(crate) struct WithdrawnView {
    pub notice: NoticeView,
    /// Queued deliveries cancelled now.
    pub cancelled: u32,
}

async fn withdraw(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(notice_id): ApiPath<String>,
) -> Result<Json<WithdrawnView>, ApiError> {
    let id = path_id(&notice_id, "notice")?;
    let svc = service(&state);
    match svc.withdraw(&auth.account_id, &id).await {
        Ok((notice, cancelled)) => {
            tracing::info!(account_id = %auth.account_id, notice_id = %id, cancelled, "notice withdrawn");
            let progress = svc.summary(&id).await?;
            Ok(Json(WithdrawnView {
                notice: NoticeView::new(&notice, Some(progress)),
                cancelled,
            }))
        }
        Err(WithdrawError::NotFound) => Err(ApiError::not_found("notice")),
        Err(e @ WithdrawError::Superseded(_)) => Err(ApiError::conflict(e.to_string())),
        Err(WithdrawError::Fault(e)) => Err(fault(e)),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConsoleParams {
    recipient: Option<String>,
    limit: Option<u32>,
}

async fn console(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiQuery(params): ApiQuery<ConsoleParams>,
) -> Result<Json<DeliveriesResponse>, ApiError> {
    let limit = page_limit(params.limit)?;
    let recipient = params
        .recipient
        .filter(|r| !r.is_empty() && r.len() <= 320)
        .ok_or_else(|| ApiError::field("recipient", "is required"))?;
    let data = console_inbox::newest(
        &state.clients.dynamo,
        &state.config.notification_table,
        &auth.account_id,
        &recipient,
        limit as i32,
        state.clock.now(),
    )
    .await?;
    Ok(Json(DeliveriesResponse {
        data: data.iter().map(NoticeDeliveryView::from).collect(),
    }))
}
