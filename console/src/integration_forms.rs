//! The Manage page's integrations: each integration's row (its rate limit, signing-secret
//! rotation, endpoint and pull-token forms) and the new-integration form, and what those forms
//! read: the domain's drafts of a new integration and of an edit
//! ([`shared::domain::integration_input`]), which the same checks as the API's accept or refuse.

use super::endpoint_form;
use super::page::{csrf_field, encode, field, when_text, Ctx};
use maud::{html, Markup};
use shared::api::v1::integrations::IntegrationView;
use shared::domain::input::{FieldErrors, Patch};
use shared::domain::integration_input::{IntegrationDraft, IntegrationEditDraft};
use shared::domain::rate_limit::MAX_PER_SECOND;
use shared::domain::time::Timestamp;
use shared::operations::OpsError;

pub(super) type Form = [(String, String)];

/// The rotation grace (seconds) the form proposes: the API's default.
const DEFAULT_GRACE_SECONDS: u64 = 86_400;

/// A time absolute and relative (`1 Dec 2026, 17:00:00 (in 1 day)`, by `console.js` in the
/// viewer's timezone; the UTC text without script).
fn when_both(t: Option<&str>) -> Markup {
    match t.and_then(Timestamp::parse_rfc3339) {
        Some(t) => {
            let rfc = t.to_rfc3339();
            html! { time datetime=(rfc) data-absolute { (rfc) } " (" (super::page::when(Some(t))) ")" }
        }
        None => when_text(None),
    }
}

/// While a rotation's previous secret still signs: until when.
pub(super) fn overlap(ctx: &Ctx, expires_at: Option<&str>) -> Markup {
    let open = expires_at
        .and_then(Timestamp::parse_rfc3339)
        .filter(|t| *t > ctx.now);
    html! {
        @if open.is_some() {
            p class="muted" data-testid="secret-overlap" {
                "The previous signing secret stays valid until " (when_both(expires_at))
                ": until then every delivery is signed with both."
            }
        }
    }
}

/// One integration's row of the Manage page's table.
pub(super) fn integration_row(ctx: &Ctx, i: &IntegrationView) -> Markup {
    let action = |path: &str| ctx.url(path);
    html! {
        tr data-testid="integration-row" data-integration-id=(i.id) {
            td data-label="Integration" { (i.name) " " span class="id mono" { (i.id) } }
            td data-label="Method" { (i.method) (overlap(ctx, i.previous_secret_expires_at.as_deref())) (endpoint_form::summary(i)) }
            td data-label="Actions" {
                div class="actions" {
                    form method="post" action=(action(&format!("/console/acct/manage/integrations/{}/rate-limit", encode(&i.id)))) {
                        (csrf_field(ctx))
                        label {
                            span { "Deliveries per second at most (empty: no limit)" }
                            input type="number" name="rate_limit_per_second" min="1" max=(MAX_PER_SECOND) step="1"
                                value=[i.rate_limit_per_second] data-testid="rate-limit";
                        }
                        button type="submit" class="secondary" data-testid="set-rate-limit" { "Set rate limit" }
                    }
                    @if i.method == "webhook" {
                        form method="post" action=(action(&format!("/console/acct/manage/integrations/{}/rotate-secret", encode(&i.id)))) {
                            (csrf_field(ctx))
                            label {
                                span { "Old secret valid for (seconds, 0 to 604800)" }
                                input type="number" name="rotation_grace_seconds" min="0" max="604800" step="1"
                                    value=(DEFAULT_GRACE_SECONDS) data-testid="rotation-grace";
                            }
                            button type="submit" class="secondary" data-testid="rotate-secret" { "Rotate signing secret" }
                        }
                        details {
                            summary { "Endpoint: URL, headers and authentication" }
                            form method="post" action=(action(&format!("/console/acct/manage/integrations/{}/endpoint", encode(&i.id)))) data-testid="endpoint-form" {
                                (csrf_field(ctx))
                                (endpoint_form::fields(&format!("endpoint-{}", i.id), Some(i)))
                                label {
                                    span { "A replaced credential is still tried after a 401 for (seconds, 0 to 604800)" }
                                    input type="number" name="rotation_grace_seconds" min="0" max="604800" step="1" value=(DEFAULT_GRACE_SECONDS);
                                }
                                button type="submit" class="secondary" data-testid="save-endpoint" { "Save the endpoint" }
                            }
                        }
                    }
                    form method="post" action=(action(&format!("/console/acct/manage/integrations/{}/tokens", encode(&i.id)))) {
                        (csrf_field(ctx))
                        label { span { "Revoke the others" } input type="checkbox" name="revoke_existing"; }
                        button type="submit" class="secondary" data-testid="issue-token" { "Issue a pull token" }
                    }
                }
            }
        }
    }
}

/// The form that creates an integration.
pub(super) fn new_integration_form(ctx: &Ctx) -> Markup {
    let action = |path: &str| ctx.url(path);
    html! {
        form class="panel" method="post" action=(action("/console/acct/manage/integrations")) aria-label="New integration" {
            h2 { "New integration" }
            (csrf_field(ctx))
            label for="new-name" { "Name" input id="new-name" name="name" required; }
            label for="new-method" { "Delivery method"
                select id="new-method" name="method" { option { "webhook" } option { "poll" } option { "internal" } }
            }
            label for="new-url" { "Webhook URL (webhook)" input id="new-url" name="webhook_url" type="url"; }
            label for="new-handler" { "Built-in handler (internal)" input id="new-handler" name="handler"; }
            label for="new-rate-limit" { "Rate limit: deliveries per second at most (1 to " (MAX_PER_SECOND) "; empty: none)" input id="new-rate-limit" name="rate_limit_per_second" type="number" min="1" max=(MAX_PER_SECOND) data-testid="new-rate-limit"; }
            label { span { "The integration may receive event data" } input type="checkbox" name="event_access_accepted"; }
            (endpoint_form::fields("new", None))
            div class="actions" { button type="submit" data-testid="create-integration" { "Create integration" } }
        }
    }
}

/// A form's trimmed text, `None` when empty.
pub(super) fn text(form: &Form, name: &str) -> Option<String> {
    field(form, name)
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// A form's whole number, `None` when empty; other text is the field's problem.
pub(super) fn number(form: &Form, name: &str, errors: &mut FieldErrors) -> Option<u64> {
    let given = text(form, name)?;
    given
        .parse()
        .map_err(|_| errors.add(name, "must be a whole number"))
        .ok()
}

/// A new integration from its form: the non-empty texts, and the checkbox as the acceptance
/// the domain requires.
pub(super) fn integration_draft(form: &Form, errors: &mut FieldErrors) -> IntegrationDraft {
    let (headers, auth) = endpoint_form::endpoint_drafts(form, false, errors);
    IntegrationDraft {
        name: text(form, "name"),
        method: text(form, "method"),
        event_access_accepted: Some(field(form, "event_access_accepted") == Some("on")),
        webhook_url: text(form, "webhook_url"),
        signing_secret: None,
        handler: text(form, "handler"),
        headers,
        auth,
        rate_limit_per_second: number(form, "rate_limit_per_second", errors),
    }
}

/// An endpoint edit: the URL, headers and authentication the form sets, and with a new
/// authentication the grace of the one it replaces (as a rotation's, [`rotation_draft`]).
pub(super) fn endpoint_draft(form: &Form, errors: &mut FieldErrors) -> IntegrationEditDraft {
    let (headers, auth) = endpoint_form::endpoint_drafts(form, true, errors);
    let grace = match auth {
        Patch::Set(_) => number(form, "rotation_grace_seconds", errors),
        _ => None,
    };
    IntegrationEditDraft {
        webhook_url: text(form, "webhook_url").map_or(Patch::Absent, Patch::Set),
        headers,
        auth,
        rotation_grace_seconds: grace,
        ..IntegrationEditDraft::default()
    }
}

/// A rotation, with the grace the form names (empty: the default).
pub(super) fn rotation_draft(form: &Form, errors: &mut FieldErrors) -> IntegrationEditDraft {
    IntegrationEditDraft {
        rotate_signing_secret: true,
        rotation_grace_seconds: number(form, "rotation_grace_seconds", errors),
        ..IntegrationEditDraft::default()
    }
}

/// The rate-limit form's edit: a number sets the limit, an empty field removes it.
pub(super) fn rate_limit_draft(form: &Form, errors: &mut FieldErrors) -> IntegrationEditDraft {
    let limit = number(form, "rate_limit_per_second", errors);
    IntegrationEditDraft {
        rate_limit_per_second: limit.map_or(Patch::Null, Patch::Set),
        ..IntegrationEditDraft::default()
    }
}

/// A draft read from a form, with the problems reading it found, checked by `check`: every
/// problem of both, or the checked value.
pub(super) fn checked<D, T>(
    form: &Form,
    read: fn(&Form, &mut FieldErrors) -> D,
    check: impl FnOnce(D) -> Result<T, FieldErrors>,
) -> Result<T, OpsError> {
    let mut errors = FieldErrors::default();
    let draft = read(form, &mut errors);
    match check(draft) {
        Ok(value) if errors.is_empty() => Ok(value),
        Ok(_) => Err(OpsError::Fields(errors)),
        Err(found) => {
            let named: Vec<String> = errors.iter().map(|e| e.field.clone()).collect();
            for e in found.into_vec() {
                if !named.contains(&e.field) {
                    errors.add(e.field, e.message);
                }
            }
            Err(OpsError::Fields(errors))
        }
    }
}
