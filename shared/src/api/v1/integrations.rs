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
//! The changing routes are thin handlers over named operations that take the request's
//! [`Fields`] and typed ids — [`create_integration`], [`update_integration`],
//! [`issue_integration_token`] — which the console's Manage page calls too.

use super::endpoint_settings::{self, AuthChange, AuthView};
use super::ListResponse;
use crate::api::auth;
use crate::api::auth::{AccountAuth, IssuedTokenView, OneTimeSecret, PlaintextToken, TokenKind};
use crate::api::extract::{
    cursor_id, page_limit, path_id, ApiPath, ApiQuery, Fields, JsonBody, Patch,
};
use crate::api::problem::ApiError;
use crate::api::state::ApiState;
use crate::domain::delivery_method::DeliveryMethod;
use crate::domain::endpoint_auth::{same_origin, Endpoint};
use crate::domain::sealed::{rotation_grace, PreviousSecret, SealedSecret};
use crate::domain::signing::SigningSecret;
use crate::domain::ssrf::check_url;
use crate::domain::target::{Target, WebhookSecret};
use crate::ids::{AccountId, IntegrationId};
use crate::operations::account::limits;
use crate::operations::account::tokens::{self, RevokeScope};
use crate::operations::recovery::audit::write_with_audit;
use crate::store::account_limits::Counted;
use crate::store::audit::{self, AuditAction, AuditRecord};
use crate::store::integration::{self, Integration};
use crate::store::token::{self, TokenRecord};
use crate::store::update::Edit;
use crate::store::write::Write;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub const INTEGRATION_KIND: &str = integration::KIND;
pub const MAX_NAME_CHARS: usize = 200;
/// Random bytes of a generated signing secret.
pub const GENERATED_SECRET_BYTES: usize = 32;

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

/// A fresh `whsec_…` signing secret.
pub fn generate_signing_secret() -> SigningSecret {
    let mut bytes = [0u8; GENERATED_SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    SigningSecret::from_bytes(&bytes).expect("32 bytes is a valid secret length")
}

fn check_webhook_url(state: &ApiState, f: &mut Fields, url: &str) -> Option<String> {
    match check_url(url.trim(), &state.target_policy()) {
        Ok(parsed) => Some(parsed.to_string()),
        Err(e) => {
            f.error("webhook_url", e.to_string());
            None
        }
    }
}

/// A requested rate limit, checked ([`crate::domain::rate_limit::check`]).
fn check_rate_limit(f: &mut Fields, per_second: u64) -> Option<u32> {
    match crate::domain::rate_limit::check(per_second) {
        Ok(n) => Some(n),
        Err(e) => {
            f.error("rate_limit_per_second", e.to_string());
            None
        }
    }
}

fn check_handler(state: &ApiState, f: &mut Fields, handler: String) -> Option<String> {
    let handler = handler.trim().to_owned();
    if state.is_known_internal_handler(&handler) {
        Some(handler)
    } else {
        f.error(
            "handler",
            format!(
                "is not a built-in handler; known handlers: {}",
                state.internal_handlers.join(", ")
            ),
        );
        None
    }
}

/// `secret` sealed for the integration; 503 when KMS cannot give a data key.
async fn seal(
    state: &ApiState,
    account_id: &AccountId,
    integration_id: &IntegrationId,
    secret: &SigningSecret,
) -> Result<SealedSecret, ApiError> {
    state
        .sealer
        .seal(account_id, integration_id, secret)
        .await
        .map_err(|e| {
            tracing::error!(%account_id, %integration_id, error = %e, "sealing a signing secret");
            ApiError::Unavailable {
                detail: "the signing secret could not be encrypted; try again".into(),
            }
        })
}

/// The secret's text for the one response that shows it.
fn shown_once(secret: &SigningSecret) -> OneTimeSecret {
    OneTimeSecret::new(secret.expose_whsec())
}

/// A new integration, with what its creation shows once.
pub struct CreatedIntegration {
    pub integration: Integration,
    /// The webhook's signing secret (given or generated).
    pub signing_secret: Option<OneTimeSecret>,
    /// The integration's first token.
    pub token: PlaintextToken,
}

/// An integration after an edit, with the signing secret a rotation made (shown once).
pub struct EditedIntegration {
    pub integration: Integration,
    pub new_signing_secret: Option<OneTimeSecret>,
    /// The edit moved the endpoint to another origin and dropped its stored authentication.
    pub auth_dropped: bool,
}

/// A new integration token and how many of the integration's others it revoked.
pub struct IssuedIntegrationToken {
    pub token: PlaintextToken,
    pub record: TokenRecord,
    pub revoked: u32,
}

/// What `POST /v1/integrations/{id}/tokens` asks.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokenRequest {
    /// Revoke the integration's other tokens.
    pub revoke_existing: bool,
    /// The token stops working this long after it is issued.
    pub expires_in: Option<std::time::Duration>,
}

impl TokenRequest {
    /// The request a JSON body makes (every invalid field named in one 422).
    pub fn read(mut f: Fields) -> Result<Self, ApiError> {
        let revoke_existing: bool = f.optional("revoke_existing").unwrap_or(false);
        let expires_in = auth::read_token_expiry(&mut f);
        f.finish()?;
        Ok(TokenRequest {
            revoke_existing,
            expires_in,
        })
    }
}

/// `POST /v1/integrations`: 201 with `Location`, the integration and its once-shown secrets.
async fn create(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    JsonBody(f): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    let created = create_integration(&state, &auth.account_id, &auth.actor(), f).await?;
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

/// Creates an integration of the account from a request's fields (`name`, `method`,
/// `event_access_accepted`, the method's `webhook_url` and `signing_secret` or `handler`), with
/// its first integration token, on behalf of `actor` (who, for the audit history); every invalid
/// field is named in one 422.
pub async fn create_integration(
    state: &ApiState,
    account_id: &AccountId,
    actor: &str,
    mut f: Fields,
) -> Result<CreatedIntegration, ApiError> {
    let name = f.required_text("name", MAX_NAME_CHARS);
    let method: Option<String> = f.required("method");
    let method = method.and_then(|m| match DeliveryMethod::parse(&m) {
        DeliveryMethod::Unknown(other) => {
            f.error(
                "method",
                format!("must be webhook, internal or poll, not {other:?}"),
            );
            None
        }
        known => Some(known),
    });
    let event_access_accepted: Option<bool> = f.required("event_access_accepted");
    let webhook_url: Option<String> = f.optional("webhook_url");
    let signing_secret: Option<String> = f.optional("signing_secret");
    let handler: Option<String> = f.optional("handler");
    let headers = endpoint_settings::read_headers(&mut f);
    let auth = endpoint_settings::read_auth(state, &mut f);
    let rate_limit = match f.optional::<u64>("rate_limit_per_second") {
        Some(n) => check_rate_limit(&mut f, n).map(Some),
        None => Some(None),
    };

    // The target, when the method's fields are valid (a webhook's once its secret is sealed,
    // below); `secret` is shown once in the answer.
    let (mut target, mut secret, mut webhook) = (None, None, None);
    match &method {
        Some(DeliveryMethod::Webhook) => {
            let url = match webhook_url {
                Some(u) => check_webhook_url(state, &mut f, &u),
                None => {
                    f.error("webhook_url", "is required for webhook integrations");
                    None
                }
            };
            secret = match signing_secret {
                Some(text) => match SigningSecret::parse(&text) {
                    Ok(s) => Some(s),
                    Err(e) => {
                        f.error("signing_secret", e.to_string());
                        None
                    }
                },
                None => Some(generate_signing_secret()),
            };
            webhook = url.zip(secret.clone());
            if handler.is_some() {
                f.error("handler", "only internal integrations have a handler");
            }
            if let Patch::Set(h) = &headers {
                let mode = match &auth {
                    Patch::Set(a) => Some(&a.mode),
                    _ => None,
                };
                endpoint_settings::check_no_clash(&mut f, h, mode);
            }
        }
        Some(DeliveryMethod::Internal) => {
            match handler {
                Some(h) => {
                    target =
                        check_handler(state, &mut f, h).map(|handler| Target::Internal { handler })
                }
                None => f.error("handler", "is required for internal integrations"),
            }
            no_webhook_fields(&mut f, webhook_url.is_some(), signing_secret.is_some());
        }
        Some(_) => {
            target = Some(Target::Poll);
            no_webhook_fields(&mut f, webhook_url.is_some(), signing_secret.is_some());
            if handler.is_some() {
                f.error("handler", "only internal integrations have a handler");
            }
        }
        None => {}
    }
    if method
        .as_ref()
        .is_some_and(|m| *m != DeliveryMethod::Webhook)
    {
        no_endpoint_fields(&mut f, !headers.is_absent(), !auth.is_absent());
    } else {
        // Nothing to remove yet: `null` is for an edit.
        if headers == Patch::Null {
            f.error("headers", "must be an object of header names to values");
        }
        if matches!(auth, Patch::Null) {
            f.error("auth", "must be an authentication object");
        }
    }
    f.finish()?;
    let integration_id = IntegrationId::new();
    let now = state.clock.now();
    let mut endpoint = Endpoint::default();
    if let Some((url, s)) = webhook {
        let sealed = seal(state, account_id, &integration_id, &s).await?;
        target = Some(Target::Webhook {
            url,
            secret: WebhookSecret::new(sealed),
        });
        if let Patch::Set(h) = headers {
            endpoint.headers = h;
        }
        if let Patch::Set(a) = &auth {
            let ids = (account_id, &integration_id);
            endpoint.auth = Some(
                endpoint_settings::seal_auth(state, ids, a, None, Default::default(), now).await?,
            );
        }
    }
    let (Some(name), Some(target), Some(event_access_accepted)) =
        (name, target, event_access_accepted)
    else {
        return Err(ApiError::internal("validated integration fields missing"));
    };

    let mut integration = Integration::new(
        account_id.clone(),
        integration_id,
        name,
        target,
        event_access_accepted,
        now,
    );
    integration.endpoint = endpoint;
    integration.rate_limit_per_second = rate_limit.flatten();
    let (token, record) = tokens::issue_token(
        &state.account_ops(),
        TokenKind::Intg,
        account_id,
        Some(&integration.integration_id),
        now,
    )
    .await?;
    let table = state.table();
    let entry = target_details(
        AuditRecord::for_account(AuditAction::CreateIntegration, account_id, actor, "", now)
            .detail("integration_id", &integration.integration_id)
            .detail("name", &integration.name)
            .detail("method", integration.delivery_method())
            .detail("event_access_accepted", integration.event_access_accepted)
            .detail("token_id", &record.token_id),
        &integration.target,
    );
    let entry = endpoint_details(entry, &integration.endpoint);
    limits::create_counted(
        &state.account_ops(),
        account_id,
        &[Counted::Integrations, Counted::LiveTokens],
        Write::all([
            integration::create(table, &integration)?,
            token::create(table, &record)?,
            audit::create(table, &entry)?,
        ])?,
    )
    .await?;
    tracing::info!(
        %account_id,
        integration_id = %integration.integration_id,
        method = %integration.delivery_method(),
        "integration created"
    );
    Ok(CreatedIntegration {
        integration,
        signing_secret: secret.as_ref().map(shown_once),
        token,
    })
}

/// A webhook URL as the audit history keeps it: without user info, query or fragment (where
/// an endpoint's own credentials may be).
fn url_for_audit(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            u.set_query(None);
            u.set_fragment(None);
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        }
        Err(_) => "(unreadable)".into(),
    }
}

/// The entry with the integration's target: its webhook URL ([`url_for_audit`]) or handler.
fn target_details(entry: AuditRecord, target: &Target) -> AuditRecord {
    match (target.webhook_url(), target.handler()) {
        (Some(url), _) => entry.detail("webhook_url", url_for_audit(url)),
        (_, Some(handler)) => entry.detail("handler", handler),
        _ => entry,
    }
}

/// The entry with the endpoint's header names and authentication mode (never a value).
fn endpoint_details(entry: AuditRecord, endpoint: &Endpoint) -> AuditRecord {
    let entry = if endpoint.headers.is_empty() {
        entry
    } else {
        entry.detail("headers", header_names(endpoint))
    };
    match &endpoint.auth {
        Some(a) => entry.detail("auth", a.mode.type_name()),
        None => entry,
    }
}

fn header_names(endpoint: &Endpoint) -> String {
    endpoint
        .headers
        .keys()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

fn no_endpoint_fields(f: &mut Fields, has_headers: bool, has_auth: bool) {
    if has_headers {
        f.error("headers", "only webhook integrations have headers");
    }
    if has_auth {
        f.error("auth", "only webhook integrations have auth");
    }
}

fn no_webhook_fields(f: &mut Fields, has_url: bool, has_secret: bool) {
    if has_url {
        f.error(
            "webhook_url",
            "only webhook integrations have a webhook_url",
        );
    }
    if has_secret {
        f.error(
            "signing_secret",
            "only webhook integrations have a signing secret",
        );
    }
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

/// The caller's integration `id`, or 404 (for another account's, too).
pub async fn load(
    state: &ApiState,
    account_id: &AccountId,
    id: &IntegrationId,
) -> Result<Integration, ApiError> {
    integration::get(state.dynamo(), state.table(), account_id, id)
        .await?
        .ok_or_else(|| ApiError::not_found("integration"))
}

async fn fetch(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<IntegrationView>, ApiError> {
    let id = path_id(&id, "integration")?;
    let integration = load(&state, &auth.account_id, &id).await?;
    Ok(Json(IntegrationView::from(&integration)))
}

/// `PATCH /v1/integrations/{id}`: the integration as it is now (with a rotation's new secret).
async fn update(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(id): ApiPath<String>,
    JsonBody(f): JsonBody,
) -> Result<Json<IntegrationView>, ApiError> {
    let id = path_id(&id, "integration")?;
    let edited = update_integration(&state, &auth.account_id, &id, &auth.actor(), f).await?;
    Ok(Json(
        IntegrationView::from(&edited.integration).with_signing_secret(edited.new_signing_secret),
    ))
}

/// Edits the account's integration `id` with a request's fields (`name`,
/// `event_access_accepted`, `webhook_url` or `handler` as its method has, `rotate_signing_secret`
/// with `rotation_grace_seconds`): 404 before anything else when it is not the account's, then
/// every invalid field named in one 422. Fields that change nothing leave it untouched. The
/// edit is audited (old and new values) for `actor` in one transaction with it.
pub async fn update_integration(
    state: &ApiState,
    account_id: &AccountId,
    id: &IntegrationId,
    actor: &str,
    mut f: Fields,
) -> Result<EditedIntegration, ApiError> {
    let current = load(state, account_id, id).await?;
    let name = f.patch_text("name", MAX_NAME_CHARS);
    let event_access_accepted = match f.patch::<bool>("event_access_accepted") {
        Patch::Set(v) => Some(v),
        Patch::Null => {
            f.error("event_access_accepted", "must be true or false");
            None
        }
        Patch::Absent => None,
    };
    let webhook_url = f.patch::<String>("webhook_url");
    let handler = f.patch::<String>("handler");
    let rotate: bool = f.optional("rotate_signing_secret").unwrap_or(false);
    let grace_seconds: Option<u64> = f.optional("rotation_grace_seconds");
    let headers = endpoint_settings::read_headers(&mut f);
    let auth = endpoint_settings::read_auth(state, &mut f);
    // Some(None): remove the limit.
    let rate_limit = match f.patch::<u64>("rate_limit_per_second") {
        Patch::Set(n) => check_rate_limit(&mut f, n).map(Some),
        Patch::Null => Some(None),
        Patch::Absent => None,
    };
    f.forbid(
        "method",
        "cannot be changed; create a new integration for another delivery method",
    );
    f.forbid(
        "signing_secret",
        "cannot be set; use {\"rotate_signing_secret\": true} for a new one",
    );
    let is_webhook = current.delivery_method() == DeliveryMethod::Webhook;
    let is_internal = current.delivery_method() == DeliveryMethod::Internal;

    let url = match webhook_url {
        Patch::Absent => None,
        _ if !is_webhook => {
            f.error(
                "webhook_url",
                "only webhook integrations have a webhook_url",
            );
            None
        }
        Patch::Null => {
            f.error("webhook_url", "a webhook integration needs a webhook_url");
            None
        }
        Patch::Set(u) => check_webhook_url(state, &mut f, &u),
    };
    // The URL it has already is no change.
    let current_url = current.target.webhook_url();
    let url = url.filter(|u| Some(u.as_str()) != current_url);
    let handler = match handler {
        Patch::Absent => None,
        _ if !is_internal => {
            f.error("handler", "only internal integrations have a handler");
            None
        }
        Patch::Null => {
            f.error("handler", "an internal integration needs a handler");
            None
        }
        Patch::Set(h) => check_handler(state, &mut f, h),
    };
    if rotate && !is_webhook {
        f.error(
            "rotate_signing_secret",
            "only webhook integrations have a signing secret",
        );
    }
    if !is_webhook {
        no_endpoint_fields(&mut f, !headers.is_absent(), !auth.is_absent());
    }
    let new_auth = matches!(auth, Patch::Set(_));
    let grace = match rotation_grace(grace_seconds) {
        Ok(_) if grace_seconds.is_some() && !rotate && !new_auth => {
            f.error(
                "rotation_grace_seconds",
                "applies only with {\"rotate_signing_secret\": true} or a new auth",
            );
            None
        }
        Ok(g) => Some(g),
        Err(message) => {
            f.error("rotation_grace_seconds", message);
            None
        }
    };
    // The headers and authentication the edit leaves, checked together.
    let headers_after = match &headers {
        Patch::Set(h) => h.clone(),
        Patch::Null => Default::default(),
        Patch::Absent => current.endpoint.headers.clone(),
    };
    let auth_change = AuthChange {
        requested: &auth,
        current: current.endpoint.auth.as_ref(),
        moved: url
            .as_deref()
            .zip(current_url)
            .is_some_and(|(new, old)| !same_origin(old, new)),
        grace: grace.unwrap_or_default(),
    };
    if is_webhook {
        endpoint_settings::check_no_clash(&mut f, &headers_after, auth_change.mode_after());
    }
    f.finish()?;

    let new_secret = rotate.then(generate_signing_secret);
    if name.is_none()
        && event_access_accepted.is_none()
        && url.is_none()
        && handler.is_none()
        && new_secret.is_none()
        && headers.is_absent()
        && auth.is_absent()
        && rate_limit.is_none()
    {
        return Ok(EditedIntegration {
            integration: current,
            new_signing_secret: None,
            auth_dropped: false,
        });
    }
    let now = state.clock.now();
    let change =
        |old: &dyn std::fmt::Display, new: &dyn std::fmt::Display| format!("{old} -> {new}");
    let mut entry =
        AuditRecord::for_account(AuditAction::EditIntegration, account_id, actor, "", now)
            .detail("integration_id", &current.integration_id);
    let mut u = Edit::new().set("updated_at", &now)?;
    if let Some(name) = &name {
        u = u.set("name", name)?;
        entry = entry.detail("name", change(&current.name, name));
    }
    if let Some(v) = event_access_accepted {
        u = u.set("event_access_accepted", &v)?;
        entry = entry.detail(
            "event_access_accepted",
            change(&current.event_access_accepted, &v),
        );
    }
    if let Some(url) = &url {
        u = u.set("webhook_url", url)?;
        let old = current
            .target
            .webhook_url()
            .map(url_for_audit)
            .unwrap_or_default();
        entry = entry.detail("webhook_url", change(&old, &url_for_audit(url)));
    }
    if let Some(handler) = &handler {
        u = u.set("handler", handler)?;
        entry = entry.detail(
            "handler",
            change(&current.target.handler().unwrap_or_default(), handler),
        );
    }
    if !headers.is_absent() {
        u = integration::set_headers(u, &headers_after)?;
        let after = Endpoint {
            headers: headers_after.clone(),
            auth: None,
        };
        let (old, new) = (header_names(&current.endpoint), header_names(&after));
        entry = entry.detail("headers", change(&old, &new));
    }
    let ids = (account_id, &current.integration_id);
    (u, entry) = auth_change.apply(state, ids, now, u, entry).await?;
    if let Some(seen) = current_url.filter(|_| url.is_some() || auth_change.changes()) {
        // Decided from the URL read above: a concurrent move refuses this edit.
        u = integration::while_url_is(u, seen)?;
    }
    if let Some(limit) = rate_limit {
        u = match limit {
            Some(n) => u.set("rate_limit_per_second", &n)?,
            None => u.remove("rate_limit_per_second"),
        };
        let shown = |l: Option<u32>| l.map_or_else(|| "none".to_owned(), |n| n.to_string());
        entry = entry.detail(
            "rate_limit_per_second",
            change(&shown(current.rate_limit_per_second), &shown(limit)),
        );
    }
    if let Some(secret) = &new_secret {
        let sealed = seal(state, account_id, &current.integration_id, secret).await?;
        // The replaced secret keeps signing for the grace (sealed as it was: the API never
        // opens it); none is kept without grace or when there was no usable secret.
        let grace = grace.unwrap_or_default();
        let previous = current
            .target
            .webhook_secret()
            .filter(|_| !grace.is_zero())
            .map(|s| PreviousSecret {
                sealed: s.current.clone(),
                expires_at: now.plus(grace),
            });
        u = integration::rotate_secret(u, &sealed, previous.as_ref())?;
        entry = entry
            .detail("rotate_signing_secret", true)
            .detail("rotation_grace_seconds", grace.as_secs());
    }
    let write = integration::edit(state.table(), account_id, &current.integration_id, u)?;
    if !write_with_audit(&state.ops(), Some(write), &entry).await? {
        load(state, account_id, &current.integration_id).await?;
        return Err(ApiError::conflict(
            "the integration's webhook_url changed while this edit was made; read it and send the edit again",
        ));
    }
    let updated = load(state, account_id, &current.integration_id).await?;
    if new_secret.is_some() {
        let previous_expires_at = updated
            .target
            .webhook_secret()
            .and_then(|s| s.previous.as_ref())
            .map(|p| p.expires_at.to_rfc3339());
        tracing::info!(
            %account_id,
            integration_id = %updated.integration_id,
            previous_expires_at = previous_expires_at.as_deref(),
            "integration signing secret rotated"
        );
    }
    if auth_change.drops() {
        tracing::info!(%account_id, integration_id = %updated.integration_id, "endpoint moved to another origin: its authentication was dropped");
    }
    Ok(EditedIntegration {
        integration: updated,
        new_signing_secret: new_secret.as_ref().map(shown_once),
        auth_dropped: auth_change.drops(),
    })
}

async fn remove(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    let id = path_id(&id, "integration")?;
    let actor = auth.actor();
    let table = state.table();
    let entry = AuditRecord::for_account(
        AuditAction::DeleteIntegration,
        &auth.account_id,
        &actor,
        "",
        state.clock.now(),
    )
    .detail("integration_id", &id);
    limits::remove_counted(
        &state.account_ops(),
        &auth.account_id,
        &[Counted::Integrations],
        Write::all([
            integration::delete(table, &auth.account_id, &id)?,
            audit::create(table, &entry)?,
        ])?,
        "integration",
    )
    .await?;
    let revoked = tokens::revoke_tokens(
        &state.account_ops(),
        RevokeScope {
            account_id: &auth.account_id,
            kind: TokenKind::Intg,
            integration_id: Some(&id),
            except: None,
            actor: &actor,
            reason: "the integration was deleted",
        },
        state.clock.now(),
    )
    .await?;
    tracing::info!(account_id = %auth.account_id, integration_id = %id, revoked, "integration deleted");
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
    let request = TokenRequest::read(f)?;
    let id = path_id(&id, "integration")?;
    let issued =
        issue_integration_token(&state, &auth.account_id, &id, &auth.actor(), request).await?;
    Ok((
        StatusCode::CREATED,
        Json(IssuedTokenView::new(
            issued.token,
            &issued.record,
            issued.revoked,
        )),
    ))
}

/// Issues a new token for the account's integration `id` (404 when it is not the account's)
/// on behalf of `actor`; with `revoke_existing` the integration's other tokens are revoked. Each
/// is audited.
pub async fn issue_integration_token(
    state: &ApiState,
    account_id: &AccountId,
    id: &IntegrationId,
    actor: &str,
    request: TokenRequest,
) -> Result<IssuedIntegrationToken, ApiError> {
    let integration = load(state, account_id, id).await?;
    let entry = AuditRecord::for_account(
        AuditAction::IssueIntegrationToken,
        account_id,
        actor,
        "",
        state.clock.now(),
    )
    .detail("integration_id", &integration.integration_id);
    let (token, record, revoked) = tokens::issue_rotated(
        &state.account_ops(),
        TokenKind::Intg,
        account_id,
        Some(&integration.integration_id),
        request.revoke_existing,
        request.expires_in,
        entry,
    )
    .await?;
    tracing::info!(
        %account_id,
        integration_id = %integration.integration_id,
        token_id = %record.token_id,
        revoked,
        "integration token issued"
    );
    Ok(IssuedIntegrationToken {
        token,
        record,
        revoked,
    })
}
