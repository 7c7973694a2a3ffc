//! An account's integrations: create one (with its first integration token), delete one (its
//! subscriptions stay; their deliveries fail as a configuration loss, and its tokens are
//! revoked), issue a token for one. Edits are in [`super::integration_edit`]. The checked input
//! is the domain's ([`crate::domain::integration_input`]); every change is audited in the same
//! transaction, and creates and deletes move the account's counts ([`super::limits`]).
//!
//! Signing secrets and endpoint credentials are stored sealed ([`crate::data_keys`]): sealed
//! here with a KMS data key, opened only by the delivery worker.

use super::limits;
use super::token_format::{OneTimeSecret, PlaintextToken};
use super::tokens::{self, RevokeScope, TokenRequest};
use super::AccountOps;
use crate::domain::endpoint_auth::{Endpoint, EndpointAuth, PreviousAuth};
use crate::domain::integration_input::{AuthInput, NewIntegration, NewTarget, TargetRules};
use crate::domain::sealed::{PreviousSecret, SealedSecret};
use crate::domain::signing::SigningSecret;
use crate::domain::target::{Target, WebhookSecret};
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, IntegrationId};
use crate::operations::OpsError;
use crate::store::account_limits::Counted;
use crate::store::audit::{self, AuditAction, AuditRecord};
use crate::store::integration::{self, Integration};
use crate::store::token::{self as token_store, TokenKind, TokenRecord};
use crate::store::write::Write;
use rand::RngCore;
use std::time::Duration;

/// Random bytes of a generated signing secret.
pub(crate) const GENERATED_SECRET_BYTES: usize = 32;

/// A new integration, with what its creation shows once.
pub struct CreatedIntegration {
    pub integration: Integration,
    /// The webhook's signing secret (given or generated).
    pub signing_secret: Option<OneTimeSecret>,
    /// The integration's first token.
    pub token: PlaintextToken,
}

/// A new integration token and how many of the integration's others it revoked.
pub struct IssuedIntegrationToken {
    pub token: PlaintextToken,
    pub record: TokenRecord,
    pub revoked: u32,
}

impl AccountOps<'_> {
    /// The rules a new integration or an edit is checked against in this deployment.
    pub fn target_rules(&self) -> TargetRules<'_> {
        TargetRules {
            policy: self.target_policy,
            handlers: self.internal_handlers,
        }
    }

    /// The account's integration `id`, or "integration not found" (another account's too).
    pub async fn integration_of(
        &self,
        account_id: &AccountId,
        id: &IntegrationId,
    ) -> Result<Integration, OpsError> {
        self.ops
            .integration(account_id, id)
            .await?
            .ok_or(OpsError::NotFound("integration"))
    }

    /// `secret` sealed for the integration; unavailable when KMS cannot give a data key.
    pub(super) async fn seal(
        &self,
        ids: (&AccountId, &IntegrationId),
        secret: &SigningSecret,
    ) -> Result<SealedSecret, OpsError> {
        let (account_id, integration_id) = ids;
        self.sealer
            .seal(account_id, integration_id, secret)
            .await
            .map_err(|e| {
                tracing::error!(%account_id, %integration_id, error = %e, "sealing a signing secret");
                OpsError::Unavailable("the signing secret could not be encrypted; try again".into())
            })
    }

    /// The authentication `input` sealed for the integration, keeping `replaced` (the one it
    /// replaces) for `grace` (none when the grace is zero).
    pub(super) async fn seal_auth(
        &self,
        ids: (&AccountId, &IntegrationId),
        input: &AuthInput,
        replaced: Option<&EndpointAuth>,
        grace: Duration,
        now: Timestamp,
    ) -> Result<EndpointAuth, OpsError> {
        let (account_id, integration_id) = ids;
        let credential = self
            .sealer
            .seal_credential(account_id, integration_id, &input.credential)
            .await
            .map_err(|e| {
                tracing::error!(%account_id, %integration_id, error = %e, "sealing an endpoint credential");
                OpsError::Unavailable(
                    "the endpoint credential could not be encrypted; try again".into(),
                )
            })?;
        let previous = replaced.filter(|_| !grace.is_zero()).map(|r| {
            Box::new(PreviousAuth {
                mode: r.mode.clone(),
                credential: PreviousSecret {
                    sealed: r.credential.clone(),
                    expires_at: now.plus(grace),
                },
            })
        });
        Ok(EndpointAuth {
            mode: input.mode.clone(),
            credential,
            previous,
        })
    }
}

/// A fresh `whsec_…` signing secret.
pub(crate) fn generate_signing_secret() -> SigningSecret {
    let mut bytes = [0u8; GENERATED_SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    SigningSecret::from_bytes(&bytes).expect("32 bytes is a valid secret length")
}

/// The secret's text for the one answer that shows it.
pub(super) fn shown_once(secret: &SigningSecret) -> OneTimeSecret {
    OneTimeSecret::new(secret.expose_whsec())
}

/// The target and endpoint of a new integration, its secrets sealed; with the signing secret
/// to show once (a webhook's, given or generated).
async fn sealed_target(
    ops: &AccountOps<'_>,
    ids: (&AccountId, &IntegrationId),
    target: NewTarget,
    now: Timestamp,
) -> Result<(Target, Endpoint, Option<SigningSecret>), OpsError> {
    match target {
        NewTarget::Webhook {
            url,
            secret,
            headers,
            auth,
        } => {
            let secret = secret.unwrap_or_else(generate_signing_secret);
            let sealed = ops.seal(ids, &secret).await?;
            let auth = match &auth {
                Some(a) => Some(ops.seal_auth(ids, a, None, Duration::ZERO, now).await?),
                None => None,
            };
            let target = Target::Webhook {
                url,
                secret: WebhookSecret::new(sealed),
            };
            Ok((target, Endpoint { headers, auth }, Some(secret)))
        }
        NewTarget::Internal { handler } => {
            Ok((Target::Internal { handler }, Endpoint::default(), None))
        }
        NewTarget::Poll => Ok((Target::Poll, Endpoint::default(), None)),
    }
}

/// Creates an integration of the account with its first integration token, on behalf of
/// `actor` (who, for the audit history).
pub async fn create_integration(
    ops: &AccountOps<'_>,
    account_id: &AccountId,
    actor: &str,
    new: NewIntegration,
) -> Result<CreatedIntegration, OpsError> {
    let integration_id = IntegrationId::new();
    let now = ops.now();
    let ids = (account_id, &integration_id);
    let (target, endpoint, secret) = sealed_target(ops, ids, new.target, now).await?;
    let mut integration = Integration::new(
        account_id.clone(),
        integration_id,
        new.name,
        target,
        new.event_access_accepted,
        now,
    );
    integration.endpoint = endpoint;
    integration.rate_limit_per_second = new.rate_limit_per_second;
    let (token, record) = tokens::issue_token(
        ops,
        TokenKind::Intg,
        account_id,
        Some(&integration.integration_id),
        now,
    )
    .await?;
    let table = ops.table();
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
    let writes = Write::all([
        integration::create(table, &integration)?,
        token_store::create(table, &record)?,
        audit::create(table, &entry)?,
    ])?;
    let counted = [Counted::Integrations, Counted::LiveTokens];
    limits::create_counted(ops, account_id, &counted, writes).await?;
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

/// Deletes the account's integration `id` and revokes its integration tokens; its
/// subscriptions stay. "Integration not found" when it is not the account's.
pub async fn delete_integration(
    ops: &AccountOps<'_>,
    account_id: &AccountId,
    id: &IntegrationId,
    actor: &str,
) -> Result<(), OpsError> {
    let table = ops.table();
    let entry = AuditRecord::for_account(
        AuditAction::DeleteIntegration,
        account_id,
        actor,
        "",
        ops.now(),
    )
    .detail("integration_id", id);
    let writes = Write::all([
        integration::delete(table, account_id, id)?,
        audit::create(table, &entry)?,
    ])?;
    limits::remove_counted(
        ops,
        account_id,
        &[Counted::Integrations],
        writes,
        "integration",
    )
    .await?;
    let scope = RevokeScope {
        account_id,
        kind: TokenKind::Intg,
        integration_id: Some(id),
        except: None,
        actor,
        reason: "the integration was deleted",
    };
    let revoked = tokens::revoke_tokens(ops, scope, ops.now()).await?;
    tracing::info!(%account_id, integration_id = %id, revoked, "integration deleted");
    Ok(())
}

/// Issues a new token for the account's integration `id` ("integration not found" when it is
/// not the account's) on behalf of `actor`; with `revoke_existing` the integration's other
/// tokens are revoked. Each is audited.
pub async fn issue_integration_token(
    ops: &AccountOps<'_>,
    account_id: &AccountId,
    id: &IntegrationId,
    actor: &str,
    request: TokenRequest,
) -> Result<IssuedIntegrationToken, OpsError> {
    let integration = ops.integration_of(account_id, id).await?;
    let integration_id = &integration.integration_id;
    let entry = AuditRecord::for_account(
        AuditAction::IssueIntegrationToken,
        account_id,
        actor,
        "",
        ops.now(),
    )
    .detail("integration_id", integration_id);
    let (token, record, revoked) = tokens::issue_rotated(
        ops,
        TokenKind::Intg,
        account_id,
        Some(integration_id),
        request.revoke_existing,
        request.expires_in,
        entry,
    )
    .await?;
    tracing::info!(
        %account_id,
        %integration_id,
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

/// A webhook URL as the audit history keeps it: without user info, query or fragment (where
/// an endpoint's own credentials may be).
pub(super) fn url_for_audit(url: &str) -> String {
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
        entry.detail("headers", header_names(&endpoint.headers))
    };
    match &endpoint.auth {
        Some(a) => entry.detail("auth", a.mode.type_name()),
        None => entry,
    }
}

/// The headers' names, for the audit history (never a value).
pub(super) fn header_names(headers: &crate::domain::integration_input::Headers) -> String {
    headers
        .keys()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}
