//! Integrations of the caller's account (account token):
//!
//! * `POST /v1/integrations` → 201: the integration, its `signing_secret` (webhook; shown only
//!   now) and an integration `token` (shown only now).
//! * `GET /v1/integrations` (`?limit=&cursor=`), `GET /v1/integrations/{id}`: never a secret.
//! * `PATCH /v1/integrations/{id}`: `name`, `webhook_url` (webhook), `handler` (internal),
//!   `event_access_accepted`, `rotate_signing_secret: true` (webhook; the new secret is in this
//!   response only) with `rotation_grace_seconds` (0 to 604800, default 86400): the previous
//!   secret keeps signing beside the new one until `previous_secret_expires_at`; 0 retires
//!   it at once. The method cannot change. `rate_limit_per_second` (also on creation; 1 to 1000,
//!   `null` removes it): at most that many of its deliveries start in a second, the others wait
//!   ([`crate::domain::rate_limit`]).
//!
//! A webhook's `headers` and `auth` (create and `PATCH`; see [`super::endpoint_settings`]):
//! headers are shown as they are, the authentication's credential never (`…_set: true`). A
//! `PATCH` with a new `auth` keeps the replaced one as a fallback for `rotation_grace_seconds`
//! (default 86400; 0 drops it at once), until `previous_auth_expires_at`; `auth: null` removes it.
//! Credentials stay with their endpoint: a `PATCH` whose `webhook_url` has another scheme, host
//! or port than before drops the stored `auth` (and the replaced one kept for its grace, and any
//! OAuth2 token fetched for them) unless it gives `auth` again, which then keeps no replaced one;
//! the answer shows no `auth`, and the audit entry says why (`auth_dropped`). A new path or
//! query keeps them. Custom `headers` stay (configuration, not secrets). An edit of the URL or
//! the authentication applies only to the URL it was decided from (a concurrent move: `409`).
//!
//! Signing secrets are stored sealed ([`crate::data_keys::SecretSealer`]): the API seals them with
//! a KMS data key and cannot open them again; only the delivery worker can.
//! * `DELETE /v1/integrations/{id}` → 204. Its subscriptions stay; their deliveries fail as a
//!   configuration loss (`docs/lifecycles.md#integration-delivery`). Its integration tokens are revoked.
//! * `POST /v1/integrations/{id}/tokens` `{revoke_existing?}` → 201: a new integration token;
//!   `revoke_existing: true` revokes the integration's other tokens.
//!
//! Another account's integration is "not found", exactly like one that does not exist.
//!
//! The changing routes read the request into the domain's drafts
//! ([`crate::domain::integration_input`]), whose checks name every field at fault in one 422
//! together with the body's own problems (wrong types, unknown fields), and call the named
//! operations ([`crate::operations::account::integrations`], [`integration_edit`]) the
//! console's Manage page calls too.
//!
//! [`integration_edit`]: crate::operations::account::integration_edit

use super::endpoint_settings::{self, AuthView};
use super::ListResponse;
use crate::domain::integration_input::{IntegrationDraft, IntegrationEditDraft};
use crate::ids::{AccountId, IntegrationId};
use crate::operations::account::integration_edit::{check_edit, edit_integration};
use crate::operations::account::integrations::{
    create_integration, delete_integration, issue_integration_token,
};
use crate::operations::account::tokens::TokenRequest;
use crate::store::integration::{self, Integration};
use crate::web::auth::{self, AccountAuth, IssuedTokenView, OneTimeSecret, PlaintextToken};
use crate::web::extract::{cursor_id, page_limit, path_id, ApiPath, ApiQuery, Fields, JsonBody};
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/v1/integrations", post(create).get(list))
        .route(
            "/v1/integrations/{integration_id}",
            get(fetch).patch(update).delete(remove),
        )
        .route(
            "/v1/integrations/{integration_id}/tokens",
            post(rotate_token),
        )
}

/// An integration as the API shows it. The signing secret appears only in the responses that
/// create or rotate it.
#[derive(Debug, Serialize)]
pub struct IntegrationView {
    pub id: IntegrationId,
    pub account_id: AccountId,
    pub name: String,
    pub method: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handler: Option<String>,
    pub event_access_accepted: bool,
    /// Deliveries started at most per second; absent: no limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit_per_second: Option<u32>,
    pub created_at: String,
    pub updated_at: String,
    /// While a rotation's previous secret is kept: when it stops signing (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_secret_expires_at: Option<String>,
    /// A webhook's custom headers (values shown: they are not secrets).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<std::collections::BTreeMap<String, String>>,
    /// A webhook's authentication, without its credential.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthView>,
    /// While a replaced authentication is still tried: until when (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_auth_expires_at: Option<String>,
    /// Shown once: on creation (webhook) and on rotation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<OneTimeSecret>,
    /// The integration token, shown once, on creation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<PlaintextToken>,
}

impl From<&Integration> for IntegrationView {
    fn from(i: &Integration) -> Self {
        let (headers, auth, previous_auth_expires_at) = endpoint_settings::view(&i.endpoint);
        IntegrationView {
            id: i.integration_id.clone(),
            account_id: i.account_id.clone(),
            name: i.name.clone(),
            method: i.delivery_method().as_str().to_owned(),
            webhook_url: i.target.webhook_url().map(str::to_owned),
            handler: i.target.handler().map(str::to_owned),
            event_access_accepted: i.event_access_accepted,
            rate_limit_per_second: i.rate_limit_per_second,
            created_at: i.created_at.to_rfc3339(),
            updated_at: i.updated_at.to_rfc3339(),
            previous_secret_expires_at: i
                .target
                .webhook_secret()
                .and_then(|s| s.previous.as_ref())
                .map(|p| p.expires_at.to_rfc3339()),
            headers,
            auth,
            previous_auth_expires_at,
            signing_secret: None,
            token: None,
        }
    }
}

impl IntegrationView {
    /// The view with the signing secret an answer shows once.
    pub fn with_signing_secret(mut self, secret: Option<OneTimeSecret>) -> Self {
        self.signing_secret = secret;
        self
    }

    /// The view with the integration token its creation shows once.
    pub fn with_token(mut self, token: PlaintextToken) -> Self {
        self.token = Some(token);
        self
    }
}

/// A new integration as the body gives it: each field read with its type (problems recorded
/// on `f`); the domain's check does the rest.
fn read_new(f: &mut Fields) -> IntegrationDraft {
    IntegrationDraft {
        name: f.required("name"),
        method: f.required("method"),
        event_access_accepted: f.required("event_access_accepted"),
        webhook_url: f.optional("webhook_url"),
        signing_secret: f.optional("signing_secret"),
        handler: f.optional("handler"),
        headers: endpoint_settings::read_headers(f),
        auth: endpoint_settings::read_auth(f),
        rate_limit_per_second: f.optional("rate_limit_per_second"),
    }
}

/// An edit as the body gives it; `method` and `signing_secret` cannot be edited.
fn read_edit(f: &mut Fields) -> IntegrationEditDraft {
    f.forbid(
        "method",
        "cannot be changed; create a new integration for another delivery method",
    );
    f.forbid(
        "signing_secret",
        "cannot be set; use {\"rotate_signing_secret\": true} for a new one",
    );
    IntegrationEditDraft {
        name: f.patch("name"),
        event_access_accepted: f.patch("event_access_accepted"),
        webhook_url: f.patch("webhook_url"),
        handler: f.patch("handler"),
        rotate_signing_secret: f.optional("rotate_signing_secret").unwrap_or(false),
        rotation_grace_seconds: f.optional("rotation_grace_seconds"),
        headers: endpoint_settings::read_headers(f),
        auth: endpoint_settings::read_auth(f),
        rate_limit_per_second: f.patch("rate_limit_per_second"),
    }
}

/// What `POST …/tokens` asks (every invalid field named in one 422).
pub(crate) fn read_token_request(mut f: Fields) -> Result<TokenRequest, ApiError> {
    let revoke_existing: bool = f.optional("revoke_existing").unwrap_or(false);
    let expires_in = auth::read_token_expiry(&mut f);
    f.finish()?;
    Ok(TokenRequest {
        revoke_existing,
        expires_in,
    })
}

/// `POST /v1/integrations`: 201 with `Location`, the integration and its once-shown secrets.
async fn create(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    JsonBody(mut f): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    let ops = state.account_ops();
    let draft = read_new(&mut f);
    let new = f.finish_with(draft.check(&ops.target_rules()))?;
    let created = create_integration(&ops, &auth.account_id, &auth.actor(), new).await?;
    let location = format!("/v1/integrations/{}", created.integration.integration_id);
    let view = IntegrationView::from(&created.integration)
        .with_signing_secret(created.signing_secret)
        .with_token(created.token);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(view),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    limit: Option<u32>,
    cursor: Option<String>,
}

async fn list(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<ListResponse<IntegrationView>>, ApiError> {
    let limit = page_limit(params.limit)?;
    let after_id: Option<IntegrationId> = cursor_id(params.cursor.as_deref())?;
    let (items, next) = integration::list(
        state.dynamo(),
        state.table(),
        &auth.account_id,
        limit,
        after_id.as_ref(),
    )
    .await?;
    Ok(Json(ListResponse::new(
        items.iter().map(IntegrationView::from).collect(),
        next,
    )))
}

async fn fetch(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<IntegrationView>, ApiError> {
    let id = path_id(&id, "integration")?;
    let integration = state
        .account_ops()
        .integration_of(&auth.account_id, &id)
        .await?;
    Ok(Json(IntegrationView::from(&integration)))
}

/// `PATCH /v1/integrations/{id}`: 404 before anything else when it is not the account's, then
/// every invalid field named in one 422; the integration as it is now (with a rotation's new
/// secret).
async fn update(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(id): ApiPath<String>,
    JsonBody(mut f): JsonBody,
) -> Result<Json<IntegrationView>, ApiError> {
    let id = path_id(&id, "integration")?;
    let ops = state.account_ops();
    let current = ops.integration_of(&auth.account_id, &id).await?;
    let draft = read_edit(&mut f);
    let edit = f.finish_with(check_edit(&ops, &current, draft))?;
    let edited = edit_integration(&ops, current, &auth.actor(), edit).await?;
    Ok(Json(
        IntegrationView::from(&edited.integration).with_signing_secret(edited.new_signing_secret),
    ))
}

async fn remove(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    let id = path_id(&id, "integration")?;
    delete_integration(&state.account_ops(), &auth.account_id, &id, &auth.actor()).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /v1/integrations/{id}/tokens`: 201 with the token (shown once).
async fn rotate_token(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(id): ApiPath<String>,
    JsonBody(f): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    // The body is checked before the path's id, as this route always has.
    let request = read_token_request(f)?;
    let id = path_id(&id, "integration")?;
    let ops = state.account_ops();
    let issued =
        issue_integration_token(&ops, &auth.account_id, &id, &auth.actor(), request).await?;
    Ok((
        StatusCode::CREATED,
        Json(IssuedTokenView::new(
            issued.token,
            &issued.record,
            issued.revoked,
        )),
    ))
}
