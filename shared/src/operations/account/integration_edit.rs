//! Editing an account's integration: the name, event access, the webhook URL or the handler,
//! the rate limit, custom headers and authentication, a signing-secret rotation with its grace.
//! The edit is checked against the integration as it is ([`check_edit`], the domain's rules),
//! then written with its audit entry (old and new values) in one transaction.
//!
//! Credentials stay with their endpoint: an edit whose URL has another scheme, host or port
//! than before drops the stored authentication (and the replaced one kept for its grace) unless
//! it gives one again, which then keeps no replaced one; the entry says why (`auth_dropped`). An
//! edit of the URL or the authentication applies only to the URL it was decided from: a
//! concurrent move refuses it.

use super::integrations::{generate_signing_secret, header_names, shown_once, url_for_audit};
use super::token_format::OneTimeSecret;
use super::AccountOps;
use crate::domain::input::{FieldErrors, Patch};
use crate::domain::integration_input::{EditedFrom, IntegrationEdit, IntegrationEditDraft};
use crate::domain::sealed::PreviousSecret;
use crate::domain::time::Timestamp;
use crate::operations::recovery::audit::write_with_audit;
use crate::operations::OpsError;
use crate::store::audit::{AuditAction, AuditRecord};
use crate::store::integration::{self, Integration};
use crate::store::update::Edit;
use std::fmt::Display;
use std::time::Duration;

/// Why an edit that moves a webhook to another origin leaves no stored authentication behind
/// (the audit entry's `auth_dropped`).
pub const MOVED_AWAY: &str = "the endpoint moved to another origin (scheme, host or port): \
     credentials given for the old one are not sent to the new one";

/// An integration after an edit, with the signing secret a rotation made (shown once).
pub struct EditedIntegration {
    pub integration: Integration,
    pub new_signing_secret: Option<OneTimeSecret>,
    /// The edit moved the endpoint to another origin and dropped its stored authentication.
    pub auth_dropped: bool,
}

/// What `current` is, as an edit is checked against it.
fn edited_from(current: &Integration) -> EditedFrom<'_> {
    EditedFrom {
        method: current.delivery_method(),
        webhook_url: current.target.webhook_url(),
        headers: &current.endpoint.headers,
        auth: current.endpoint.auth.as_ref().map(|a| &a.mode),
    }
}

/// The edit `draft` describes for `current`, checked by the domain's rules.
pub fn check_edit(
    ops: &AccountOps<'_>,
    current: &Integration,
    draft: IntegrationEditDraft,
) -> Result<IntegrationEdit, FieldErrors> {
    draft.check(&edited_from(current), &ops.target_rules())
}

fn change(old: &dyn Display, new: &dyn Display) -> String {
    format!("{old} -> {new}")
}

/// Applies a checked `edit` to `current` on behalf of `actor`. Changing nothing leaves it
/// untouched (no write, no entry).
pub async fn edit_integration(
    ops: &AccountOps<'_>,
    current: Integration,
    actor: &str,
    edit: IntegrationEdit,
) -> Result<EditedIntegration, OpsError> {
    if edit.is_empty() {
        return Ok(EditedIntegration {
            integration: current,
            new_signing_secret: None,
            auth_dropped: false,
        });
    }
    let now = ops.now();
    let account_id = &current.account_id;
    let entry = AuditRecord::for_account(AuditAction::EditIntegration, account_id, actor, "", now)
        .detail("integration_id", &current.integration_id);
    let u = Edit::new().set("updated_at", &now)?;
    let (u, entry) = plain_fields(&current, &edit, u, entry)?;
    let from = edited_from(&current);
    let auth = AuthChange::of(&edit, &current, &from);
    let (mut u, entry) = auth.apply(ops, &current, now, u, entry).await?;
    if let Some(seen) = from
        .webhook_url
        .filter(|_| edit.webhook_url.is_some() || auth.changes())
    {
        // Decided from the URL read above: a concurrent move refuses this edit.
        u = integration::while_url_is(u, seen)?;
    }
    let new_secret = edit.rotate_signing_secret.then(generate_signing_secret);
    let (u, entry) = match &new_secret {
        Some(secret) => rotation(ops, &current, secret, edit.grace, now, u, entry).await?,
        None => (u, entry),
    };
    let write = integration::edit(ops.table(), account_id, &current.integration_id, u)?;
    if !write_with_audit(&ops.ops, Some(write), &entry).await? {
        ops.integration_of(account_id, &current.integration_id)
            .await?;
        return Err(OpsError::Conflict(
            "the integration's webhook_url changed while this edit was made; read it and send the edit again".into(),
        ));
    }
    let updated = ops
        .integration_of(account_id, &current.integration_id)
        .await?;
    log_edit(&updated, new_secret.is_some(), auth.drops());
    Ok(EditedIntegration {
        integration: updated,
        new_signing_secret: new_secret.as_ref().map(shown_once),
        auth_dropped: auth.drops(),
    })
}

/// The fields an edit sets as they are given: name, event access, URL, handler, headers, rate
/// limit, each with its old and new value in the entry.
fn plain_fields(
    current: &Integration,
    edit: &IntegrationEdit,
    mut u: Edit,
    mut entry: AuditRecord,
) -> Result<(Edit, AuditRecord), OpsError> {
    if let Some(name) = &edit.name {
        u = u.set("name", name)?;
        entry = entry.detail("name", change(&current.name, name));
    }
    if let Some(v) = edit.event_access_accepted {
        u = u.set("event_access_accepted", &v)?;
        let old = current.event_access_accepted;
        entry = entry.detail("event_access_accepted", change(&old, &v));
    }
    if let Some(url) = &edit.webhook_url {
        u = u.set("webhook_url", url)?;
        let old = current.target.webhook_url().map(url_for_audit);
        let new = url_for_audit(url);
        entry = entry.detail("webhook_url", change(&old.unwrap_or_default(), &new));
    }
    if let Some(handler) = &edit.handler {
        u = u.set("handler", handler)?;
        let old = current.target.handler().unwrap_or_default();
        entry = entry.detail("handler", change(&old, handler));
    }
    if let Some(headers) = &edit.headers {
        u = integration::set_headers(u, headers)?;
        let (old, new) = (
            header_names(&current.endpoint.headers),
            header_names(headers),
        );
        entry = entry.detail("headers", change(&old, &new));
    }
    if let Some(limit) = edit.rate_limit_per_second {
        u = match limit {
            Some(n) => u.set("rate_limit_per_second", &n)?,
            None => u.remove("rate_limit_per_second"),
        };
        let shown = |l: Option<u32>| l.map_or_else(|| "none".to_owned(), |n| n.to_string());
        let old = shown(current.rate_limit_per_second);
        entry = entry.detail("rate_limit_per_second", change(&old, &shown(limit)));
    }
    Ok((u, entry))
}

/// A new signing secret, sealed; the replaced one keeps signing for `grace` (sealed as it was:
/// the API never opens it); none is kept without grace or when there was no usable secret.
async fn rotation(
    ops: &AccountOps<'_>,
    current: &Integration,
    secret: &crate::domain::signing::SigningSecret,
    grace: Duration,
    now: Timestamp,
    u: Edit,
    entry: AuditRecord,
) -> Result<(Edit, AuditRecord), OpsError> {
    let ids = (&current.account_id, &current.integration_id);
    let sealed = ops.seal(ids, secret).await?;
    let previous = current
        .target
        .webhook_secret()
        .filter(|_| !grace.is_zero())
        .map(|s| PreviousSecret {
            sealed: s.current.clone(),
            expires_at: now.plus(grace),
        });
    let u = integration::rotate_secret(u, &sealed, previous.as_ref())?;
    let entry = entry
        .detail("rotate_signing_secret", true)
        .detail("rotation_grace_seconds", grace.as_secs());
    Ok((u, entry))
}

fn log_edit(updated: &Integration, rotated: bool, auth_dropped: bool) {
    let (account_id, integration_id) = (&updated.account_id, &updated.integration_id);
    if rotated {
        let previous_expires_at = updated
            .target
            .webhook_secret()
            .and_then(|s| s.previous.as_ref())
            .map(|p| p.expires_at.to_rfc3339());
        tracing::info!(
            %account_id,
            %integration_id,
            previous_expires_at = previous_expires_at.as_deref(),
            "integration signing secret rotated"
        );
    }
    if auth_dropped {
        tracing::info!(%account_id, %integration_id, "endpoint moved to another origin: its authentication was dropped");
    }
}

/// What an edit does to the endpoint's stored authentication: the requested one, what is
/// stored, whether the edit moves the endpoint to another origin, and the grace a replaced
/// authentication would keep.
struct AuthChange<'a> {
    requested: &'a Patch<crate::domain::integration_input::AuthInput>,
    current: Option<&'a crate::domain::endpoint_auth::EndpointAuth>,
    moved: bool,
    grace: Duration,
}

impl<'a> AuthChange<'a> {
    fn of(edit: &'a IntegrationEdit, current: &'a Integration, from: &EditedFrom<'_>) -> Self {
        AuthChange {
            requested: &edit.auth,
            current: current.endpoint.auth.as_ref(),
            moved: edit.moves_origin(from),
            grace: edit.grace,
        }
    }

    /// The edit drops the stored authentication because the endpoint moves.
    fn drops(&self) -> bool {
        self.moved && self.requested.is_absent() && self.current.is_some()
    }

    /// Whether the stored authentication changes at all.
    fn changes(&self) -> bool {
        !self.requested.is_absent() || self.drops()
    }

    /// Adds the change to `edit` (sealing a new credential) and tells it in `entry`: the mode
    /// before and after, a new one's grace, and `auth_dropped` when the move dropped a stored one.
    async fn apply(
        &self,
        ops: &AccountOps<'_>,
        integration: &Integration,
        now: Timestamp,
        edit: Edit,
        entry: AuditRecord,
    ) -> Result<(Edit, AuditRecord), OpsError> {
        if !self.changes() {
            return Ok((edit, entry));
        }
        let old = self.current.map_or("none", |a| a.mode.type_name());
        let (edit, mut entry) = match self.requested {
            Patch::Set(input) => {
                // The replaced credential stays a fallback for the grace, as a replaced signing
                // secret keeps signing; never across a move.
                let (replaced, grace) = match self.moved {
                    true => (None, Duration::ZERO),
                    false => (self.current, self.grace),
                };
                let ids = (&integration.account_id, &integration.integration_id);
                let sealed = ops.seal_auth(ids, input, replaced, grace, now).await?;
                let entry = entry
                    .detail("auth", format!("{old} -> {}", input.mode.type_name()))
                    .detail("auth_grace_seconds", grace.as_secs());
                (integration::set_auth(edit, Some(&sealed))?, entry)
            }
            Patch::Null | Patch::Absent => {
                let entry = entry.detail("auth", format!("{old} -> none"));
                (integration::set_auth(edit, None)?, entry)
            }
        };
        if self.moved && self.current.is_some() {
            entry = entry.detail("auth_dropped", MOVED_AWAY);
        }
        Ok((edit, entry))
    }
}
