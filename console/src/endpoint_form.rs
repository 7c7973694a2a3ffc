//! The Manage page's endpoint settings of a webhook integration: custom headers (one `Name: value`
//! a line) and authentication (a static secret header, HTTP basic, OAuth2 client credentials).
//! The form's fields become the request fields of the integration operations
//! (`headers`, `auth`), so a refusal is the API's problem. A credential is an input only: the page
//! shows an authentication's public fields and that its secret is set, never the secret.

use super::page::field;
use maud::{html, Markup};
use shared::api::v1::endpoint_settings::AuthView;
use shared::api::v1::integrations::IntegrationView;
use shared::domain::input::{FieldErrors, Patch};
use shared::domain::integration_input::{AuthDraft, Headers};

/// Custom headers from the form's text, one `Name: value` a line; a line without a colon is
/// the field's problem.
fn headers(text: &str, errors: &mut FieldErrors) -> Headers {
    let mut headers = Headers::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        match line.split_once(':') {
            Some((name, value)) => {
                headers.insert(name.trim().to_owned(), value.trim().to_owned());
            }
            None => errors.add("headers", "must be lines of `Name: value`"),
        }
    }
    headers
}

/// The form's endpoint settings as the drafts of an integration's `headers` and `auth`
/// ([`shared::domain::integration_input`]). On an edit (`edit`), an emptied headers field removes
/// the headers and the auth type "none" the authentication; "keep" (or none chosen) leaves it.
pub fn endpoint_drafts(
    form: &[(String, String)],
    edit: bool,
    errors: &mut FieldErrors,
) -> (Patch<Headers>, Patch<AuthDraft>) {
    let given = |name: &str| field(form, name).map(str::trim).filter(|v| !v.is_empty());
    let headers = match field(form, "headers").map(|t| headers(t, errors)) {
        Some(h) if h.is_empty() && edit => Patch::Null,
        Some(h) if h.is_empty() => Patch::Absent,
        Some(h) => Patch::Set(h),
        None => Patch::Absent,
    };
    let names: &[&str] = match given("auth_type") {
        Some("none") if edit => return (headers, Patch::Null),
        Some("header") => &["name", "value"],
        Some("basic") => &["username", "password"],
        Some("oauth2_client_credentials") => &[
            "token_url",
            "client_id",
            "client_secret",
            "scope",
            "audience",
        ],
        Some(other) if other != "none" && other != "keep" => &[],
        _ => return (headers, Patch::Absent),
    };
    let auth = AuthDraft {
        kind: given("auth_type").unwrap_or_default().to_owned(),
        fields: names
            .iter()
            .filter_map(|name| {
                let v = given(&format!("auth_{name}"))?;
                Some(((*name).to_owned(), Some(v.to_owned())))
            })
            .collect(),
    };
    (headers, Patch::Set(auth))
}

/// What an integration's endpoint sends besides the payload, as the page lists it.
pub fn summary(i: &IntegrationView) -> Markup {
    html! {
        @if let Some(h) = &i.headers {
            p class="muted" data-testid="endpoint-headers" {
                "Headers: "
                @for (n, (name, value)) in h.iter().enumerate() {
                    @if n > 0 { ", " }
                    code { (name) ": " (value) }
                }
            }
        }
        @if let Some(a) = &i.auth {
            p class="muted" data-testid="endpoint-auth" {
                "Authentication: "
                @match a {
                    AuthView::Header { name, .. } => { "header " code { (name) } " (value set)" }
                    AuthView::Basic { username, .. } => { "HTTP basic as " code { (username) } " (password set)" }
                    AuthView::OAuth2 { token_url, client_id, scope, .. } => {
                        "OAuth2 client credentials: " code { (client_id) } " at " code { (token_url) }
                        @if let Some(s) = scope { ", scope " code { (s) } }
                        " (client secret set)"
                    }
                }
                @if let Some(until) = &i.previous_auth_expires_at {
                    "; the replaced one is tried after a 401 until " (until)
                }
            }
        }
    }
}

/// The endpoint inputs (`prefix` keeps element ids unique): the headers text area (with the
/// integration's headers, on an edit) and the authentication mode with each mode's fields.
pub fn fields(prefix: &str, current: Option<&IntegrationView>) -> Markup {
    let id = |name: &str| format!("{prefix}-{name}");
    let lines = current
        .and_then(|i| i.headers.as_ref())
        .map(|h| {
            h.iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    let url = current.and_then(|i| i.webhook_url.as_deref());
    html! {
        @if current.is_some() {
            label for=(id("url")) { "Webhook URL (another scheme, host or port drops the stored authentication unless it is given again below)"
                input id=(id("url")) type="url" name="webhook_url" value=[url] data-testid="endpoint-url";
            }
        }
        fieldset class="endpoint" {
            legend { "Endpoint headers and authentication (webhook)" }
            label for=(id("headers")) { "Custom headers, one " code { "Name: value" } " a line (shown to administrators; put a secret in the authentication)"
                textarea id=(id("headers")) name="headers" data-testid="endpoint-headers-input" { (lines) }
            }
            label for=(id("auth-type")) { "Authentication"
                select id=(id("auth-type")) name="auth_type" data-testid="auth-type" {
                    @if current.is_some() { option value="keep" selected { "keep as it is" } option value="none" { "none (remove)" } }
                    @else { option value="none" selected { "none" } }
                    option value="header" { "a secret header (API key)" }
                    option value="basic" { "HTTP basic" }
                    option value="oauth2_client_credentials" { "OAuth2 client credentials" }
                }
            }
            label for=(id("auth-name")) { "Header name (secret header)" input id=(id("auth-name")) name="auth_name"; }
            label for=(id("auth-value")) { "Header value (secret header; never shown again)" input id=(id("auth-value")) name="auth_value" type="password" autocomplete="off"; }
            label for=(id("auth-username")) { "User name (basic)" input id=(id("auth-username")) name="auth_username" autocomplete="off"; }
            label for=(id("auth-password")) { "Password (basic; never shown again)" input id=(id("auth-password")) name="auth_password" type="password" autocomplete="off"; }
            label for=(id("auth-token-url")) { "Token URL (OAuth2)" input id=(id("auth-token-url")) name="auth_token_url" type="url"; }
            label for=(id("auth-client-id")) { "Client id (OAuth2)" input id=(id("auth-client-id")) name="auth_client_id" autocomplete="off"; }
            label for=(id("auth-client-secret")) { "Client secret (OAuth2; never shown again)" input id=(id("auth-client-secret")) name="auth_client_secret" type="password" autocomplete="off"; }
            label for=(id("auth-scope")) { "Scope (OAuth2, optional)" input id=(id("auth-scope")) name="auth_scope"; }
            label for=(id("auth-audience")) { "Audience (OAuth2, optional)" input id=(id("auth-audience")) name="auth_audience"; }
        }
    }
}
