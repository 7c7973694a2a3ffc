//! The rules of a valid integration, whichever door a request came through: what a door reads
//! ([`IntegrationDraft`] for a new one, [`IntegrationEditDraft`] for an edit, [`AuthDraft`] for
//! a webhook's authentication) and the checked values the operations take ([`NewIntegration`],
//! [`IntegrationEdit`]). A check names every field at fault at once ([`FieldErrors`]), with the
//! request's own field names.
//!
//! What needs I/O stays with the operation: that the integration is the account's, sealing the
//! secrets, a generated signing secret (randomness).

use super::delivery_method::DeliveryMethod;
use super::endpoint_auth::{
    check_header_name, check_header_value, check_headers, same_origin, AuthMode, MAX_HEADER_VALUE,
};
use super::input::{FieldErrors, Patch};
use super::rate_limit;
use super::sealed::{rotation_grace, Credential};
use super::signing::SigningSecret;
use super::ssrf::{check_url, TargetPolicy};
use std::collections::BTreeMap;
use std::time::Duration;

/// Longest integration name, in characters.
pub const MAX_NAME_CHARS: usize = 200;

/// Custom headers of a webhook, by lowercase name.
pub type Headers = BTreeMap<String, String>;

/// What the checks need from the deployment: the webhook target policy (the SSRF guard) and the
/// built-in handlers an internal integration may name.
#[derive(Debug, Clone, Copy)]
pub struct TargetRules<'a> {
    pub policy: TargetPolicy,
    pub handlers: &'a [String],
}

impl TargetRules<'_> {
    fn url(&self, errors: &mut FieldErrors, field: &str, url: &str) -> Option<String> {
        check_url(url.trim(), &self.policy)
            .map(|parsed| parsed.to_string())
            .map_err(|e| errors.add(field, e.to_string()))
            .ok()
    }

    fn handler(&self, errors: &mut FieldErrors, handler: &str) -> Option<String> {
        let handler = handler.trim();
        if self.handlers.iter().any(|h| h == handler) {
            return Some(handler.to_owned());
        }
        let known = self.handlers.join(", ");
        let message = format!("is not a built-in handler; known handlers: {known}");
        errors.add("handler", message);
        None
    }
}

/// An authentication as a request gives it: its mode and the plaintext credential, which the
/// operation seals before anything is stored. `Debug` shows no credential.
#[derive(Debug)]
pub struct AuthInput {
    pub mode: AuthMode,
    pub credential: Credential,
}

/// A webhook's `auth` as a door read it: its `type` and its text fields (`None`: given, but not
/// as text; the door has said why).
#[derive(Debug, Clone, Default)]
pub struct AuthDraft {
    pub kind: String,
    pub fields: BTreeMap<String, Option<String>>,
}

impl AuthDraft {
    /// The authentication it describes, or its problems named `auth.<field>` (no message names
    /// a credential). An OAuth2 token URL passes the SSRF guard.
    pub fn check(&self, rules: &TargetRules<'_>) -> Result<AuthInput, FieldErrors> {
        let mut errors = FieldErrors::default();
        let parsed = self.parse(rules, &mut errors);
        let mut named = FieldErrors::default();
        for e in errors.iter() {
            named.add(format!("auth.{}", e.field), e.message.clone());
        }
        named.or_value(|| {
            parsed.map(|(mode, secret)| AuthInput {
                mode,
                credential: Credential::new(secret),
            })
        })
    }

    /// A text field: present (unless optional), 1 to [`MAX_HEADER_VALUE`] bytes, no control
    /// characters.
    fn text(&self, errors: &mut FieldErrors, name: &str, required: bool) -> Option<String> {
        match self.fields.get(name) {
            None if !required => None,
            None => {
                errors.add(name, "is required");
                None
            }
            Some(None) => {
                errors.add(name, "must be a string");
                None
            }
            Some(Some(s)) if s.is_empty() || s.len() > MAX_HEADER_VALUE => {
                errors.add(name, format!("must be 1 to {MAX_HEADER_VALUE} bytes"));
                None
            }
            Some(Some(s)) if s.chars().any(char::is_control) => {
                errors.add(name, "must not contain control characters");
                None
            }
            Some(Some(s)) => Some(s.clone()),
        }
    }

    fn parse(
        &self,
        rules: &TargetRules<'_>,
        errors: &mut FieldErrors,
    ) -> Option<(AuthMode, String)> {
        let (known, parsed): (&[&str], _) = match self.kind.as_str() {
            "header" => (&["name", "value"], self.header(errors)),
            "basic" => (&["username", "password"], self.basic(errors)),
            "oauth2_client_credentials" => (
                &[
                    "token_url",
                    "client_id",
                    "client_secret",
                    "scope",
                    "audience",
                ],
                self.oauth2(rules, errors),
            ),
            _ => {
                errors.add("type", "must be header, basic or oauth2_client_credentials");
                return None;
            }
        };
        for extra in self.fields.keys().filter(|k| !known.contains(&k.as_str())) {
            errors.add(
                extra.clone(),
                format!("is not a field of {} auth", self.kind),
            );
        }
        parsed
    }

    fn header(&self, errors: &mut FieldErrors) -> Option<(AuthMode, String)> {
        let name = self.text(errors, "name", true).and_then(|n| {
            // The static header may be `authorization` itself (say `Bearer <key>`).
            let checked = if n.eq_ignore_ascii_case("authorization") {
                Ok(n.to_ascii_lowercase())
            } else {
                check_header_name(&n)
            };
            checked.map_err(|e| errors.add("name", e)).ok()
        });
        let value = self.text(errors, "value", true).and_then(|v| {
            check_header_value("the auth header", &v)
                .map_err(|e| errors.add("value", e))
                .ok()
                .map(|_| v)
        });
        name.zip(value)
            .map(|(name, v)| (AuthMode::Header { name }, v))
    }

    fn basic(&self, errors: &mut FieldErrors) -> Option<(AuthMode, String)> {
        let username = self.text(errors, "username", true).and_then(|u| {
            if u.contains(':') {
                errors.add("username", "must not contain ':'");
                None
            } else {
                Some(u)
            }
        });
        let password = self.text(errors, "password", true);
        username
            .zip(password)
            .map(|(username, p)| (AuthMode::Basic { username }, p))
    }

    fn oauth2(
        &self,
        rules: &TargetRules<'_>,
        errors: &mut FieldErrors,
    ) -> Option<(AuthMode, String)> {
        let token_url = self
            .text(errors, "token_url", true)
            .and_then(|u| rules.url(errors, "token_url", &u));
        let client_id = self.text(errors, "client_id", true);
        let secret = self.text(errors, "client_secret", true);
        let scope = self.text(errors, "scope", false);
        let audience = self.text(errors, "audience", false);
        let (token_url, client_id, secret) = (token_url?, client_id?, secret?);
        let mode = AuthMode::OAuth2 {
            token_url,
            client_id,
            scope,
            audience,
        };
        Some((mode, secret))
    }
}

/// A webhook's `headers` as given: checked (each problem names its header), `null` or absent.
fn check_given_headers(errors: &mut FieldErrors, given: &Patch<Headers>) -> Patch<Headers> {
    match given {
        Patch::Set(h) => match check_headers(h) {
            Ok(headers) => Patch::Set(headers),
            Err(problems) => {
                problems.into_iter().for_each(|p| errors.add("headers", p));
                Patch::Absent
            }
        },
        Patch::Null => Patch::Null,
        Patch::Absent => Patch::Absent,
    }
}

/// A webhook's `auth` as given: checked, `null` or absent.
fn check_given_auth(
    errors: &mut FieldErrors,
    given: &Patch<AuthDraft>,
    rules: &TargetRules<'_>,
) -> Patch<AuthInput> {
    match given {
        Patch::Set(draft) => match draft.check(rules) {
            Ok(auth) => Patch::Set(auth),
            Err(problems) => {
                problems
                    .into_vec()
                    .into_iter()
                    .for_each(|p| errors.add(p.field, p.message));
                Patch::Absent
            }
        },
        Patch::Null => Patch::Null,
        Patch::Absent => Patch::Absent,
    }
}

/// Custom headers need a name the authentication does not set.
pub fn check_no_clash(errors: &mut FieldErrors, headers: &Headers, auth: Option<&AuthMode>) {
    let auth_name = match auth {
        Some(AuthMode::Header { name }) => name.as_str(),
        Some(_) => "authorization",
        None => return,
    };
    if headers.contains_key(auth_name) {
        errors.add("headers", format!("header {auth_name:?} is set by auth"));
    }
}

/// An integration's name: trimmed, not empty, at most [`MAX_NAME_CHARS`] characters as sent, no
/// control characters.
pub fn check_name(errors: &mut FieldErrors, name: &str) -> Option<String> {
    let trimmed = name.trim();
    if trimmed.is_empty() {
        errors.add("name", "must not be empty");
    } else if name.chars().count() > MAX_NAME_CHARS {
        errors.add(
            "name",
            format!("must be at most {MAX_NAME_CHARS} characters"),
        );
    } else if trimmed.chars().any(char::is_control) {
        errors.add("name", "must not contain control characters");
    } else {
        return Some(trimmed.to_owned());
    }
    None
}

fn check_rate_limit(errors: &mut FieldErrors, per_second: u64) -> Option<u32> {
    rate_limit::check(per_second)
        .map_err(|e| errors.add("rate_limit_per_second", e.to_string()))
        .ok()
}

fn no_webhook_fields(errors: &mut FieldErrors, has_url: bool, has_secret: bool) {
    if has_url {
        errors.add(
            "webhook_url",
            "only webhook integrations have a webhook_url",
        );
    }
    if has_secret {
        errors.add(
            "signing_secret",
            "only webhook integrations have a signing secret",
        );
    }
}

fn no_endpoint_fields(errors: &mut FieldErrors, has_headers: bool, has_auth: bool) {
    if has_headers {
        errors.add("headers", "only webhook integrations have headers");
    }
    if has_auth {
        errors.add("auth", "only webhook integrations have auth");
    }
}

/// A new integration as a door read it. `None`: not given (or given unreadable, which the door
/// has said); the check says which are required.
#[derive(Debug, Default)]
pub struct IntegrationDraft {
    pub name: Option<String>,
    pub method: Option<String>,
    pub event_access_accepted: Option<bool>,
    pub webhook_url: Option<String>,
    pub signing_secret: Option<String>,
    pub handler: Option<String>,
    pub headers: Patch<Headers>,
    pub auth: Patch<AuthDraft>,
    pub rate_limit_per_second: Option<u64>,
}

/// Where a new integration's deliveries go.
#[derive(Debug)]
pub enum NewTarget {
    /// A signed webhook: its checked URL, the signing secret given (`None`: the operation
    /// generates one), custom headers and authentication.
    Webhook {
        url: String,
        secret: Option<SigningSecret>,
        headers: Headers,
        auth: Option<AuthInput>,
    },
    Internal {
        handler: String,
    },
    Poll,
}

/// A new integration, checked.
#[derive(Debug)]
pub struct NewIntegration {
    pub name: String,
    pub event_access_accepted: bool,
    pub target: NewTarget,
    pub rate_limit_per_second: Option<u32>,
}

impl IntegrationDraft {
    /// The integration it describes, or every problem with it.
    pub fn check(self, rules: &TargetRules<'_>) -> Result<NewIntegration, FieldErrors> {
        let mut errors = FieldErrors::default();
        for (field, missing) in [
            ("name", self.name.is_none()),
            ("method", self.method.is_none()),
            (
                "event_access_accepted",
                self.event_access_accepted.is_none(),
            ),
        ] {
            if missing {
                errors.add(field, "is required");
            }
        }
        let name = self
            .name
            .as_deref()
            .and_then(|n| check_name(&mut errors, n));
        let method = self.method.as_deref().map(DeliveryMethod::parse);
        if let Some(DeliveryMethod::Unknown(other)) = &method {
            let message = format!("must be webhook, internal or poll, not {other:?}");
            errors.add("method", message);
        }
        let headers = check_given_headers(&mut errors, &self.headers);
        let auth = check_given_auth(&mut errors, &self.auth, rules);
        let rate_limit = match self.rate_limit_per_second {
            Some(n) => check_rate_limit(&mut errors, n).map(Some),
            None => Some(None),
        };
        let target = match &method {
            Some(DeliveryMethod::Webhook) => self.webhook(&mut errors, rules, headers, auth),
            Some(DeliveryMethod::Internal) => self.internal(&mut errors, rules),
            Some(DeliveryMethod::Poll) => self.poll(&mut errors),
            _ => None,
        };
        if method
            .as_ref()
            .is_some_and(|m| *m != DeliveryMethod::Webhook)
        {
            no_endpoint_fields(
                &mut errors,
                !self.headers.is_absent(),
                !self.auth.is_absent(),
            );
        }
        let (event_access_accepted, rate_limit) = (self.event_access_accepted, rate_limit);
        errors.or_value(|| {
            Some(NewIntegration {
                name: name?,
                event_access_accepted: event_access_accepted?,
                target: target?,
                rate_limit_per_second: rate_limit?,
            })
        })
    }

    fn webhook(
        &self,
        errors: &mut FieldErrors,
        rules: &TargetRules<'_>,
        headers: Patch<Headers>,
        auth: Patch<AuthInput>,
    ) -> Option<NewTarget> {
        let url = match &self.webhook_url {
            Some(u) => rules.url(errors, "webhook_url", u),
            None => {
                errors.add("webhook_url", "is required for webhook integrations");
                None
            }
        };
        let secret = match &self.signing_secret {
            Some(text) => match SigningSecret::parse(text) {
                Ok(s) => Some(Some(s)),
                Err(e) => {
                    errors.add("signing_secret", e.to_string());
                    None
                }
            },
            None => Some(None),
        };
        if self.handler.is_some() {
            errors.add("handler", "only internal integrations have a handler");
        }
        // Nothing to remove yet: `null` is for an edit.
        if self.headers == Patch::Null {
            errors.add("headers", "must be an object of header names to values");
        }
        if matches!(self.auth, Patch::Null) {
            errors.add("auth", "must be an authentication object");
        }
        let headers = match headers {
            Patch::Set(h) => h,
            _ => Headers::new(),
        };
        let auth = match auth {
            Patch::Set(a) => Some(a),
            _ => None,
        };
        check_no_clash(errors, &headers, auth.as_ref().map(|a| &a.mode));
        Some(NewTarget::Webhook {
            url: url?,
            secret: secret?,
            headers,
            auth,
        })
    }

    fn internal(&self, errors: &mut FieldErrors, rules: &TargetRules<'_>) -> Option<NewTarget> {
        let handler = match &self.handler {
            Some(h) => rules.handler(errors, h),
            None => {
                errors.add("handler", "is required for internal integrations");
                None
            }
        };
        no_webhook_fields(
            errors,
            self.webhook_url.is_some(),
            self.signing_secret.is_some(),
        );
        handler.map(|handler| NewTarget::Internal { handler })
    }

    fn poll(&self, errors: &mut FieldErrors) -> Option<NewTarget> {
        no_webhook_fields(
            errors,
            self.webhook_url.is_some(),
            self.signing_secret.is_some(),
        );
        if self.handler.is_some() {
            errors.add("handler", "only internal integrations have a handler");
        }
        Some(NewTarget::Poll)
    }
}

/// An edit as a door read it: each field left as it is (`Absent`), removed (`Null`) or set.
#[derive(Debug, Default)]
pub struct IntegrationEditDraft {
    pub name: Patch<String>,
    pub event_access_accepted: Patch<bool>,
    pub webhook_url: Patch<String>,
    pub handler: Patch<String>,
    pub rotate_signing_secret: bool,
    pub rotation_grace_seconds: Option<u64>,
    pub headers: Patch<Headers>,
    pub auth: Patch<AuthDraft>,
    pub rate_limit_per_second: Patch<u64>,
}

/// What an edit is checked against: the integration as it is.
#[derive(Debug, Clone)]
pub struct EditedFrom<'a> {
    pub method: DeliveryMethod,
    pub webhook_url: Option<&'a str>,
    pub headers: &'a Headers,
    pub auth: Option<&'a AuthMode>,
}

/// An integration edit, checked: `None` leaves a field as it is.
#[derive(Debug, Default)]
pub struct IntegrationEdit {
    pub name: Option<String>,
    pub event_access_accepted: Option<bool>,
    /// A new URL (the one it has already is no change).
    pub webhook_url: Option<String>,
    pub handler: Option<String>,
    /// Rotate the signing secret; the replaced one keeps signing for the grace.
    pub rotate_signing_secret: bool,
    /// How long a replaced secret or authentication is kept.
    pub grace: Duration,
    /// The headers the edit leaves, when it changes them.
    pub headers: Option<Headers>,
    /// A new authentication (`Set`), none (`Null`), or as it is.
    pub auth: Patch<AuthInput>,
    /// A new limit (`Some(Some)`), none (`Some(None)`), or as it is.
    pub rate_limit_per_second: Option<Option<u32>>,
}

impl IntegrationEdit {
    /// Whether the edit moves the webhook to another scheme, host or port than `from`'s.
    pub fn moves_origin(&self, from: &EditedFrom<'_>) -> bool {
        self.webhook_url
            .as_deref()
            .zip(from.webhook_url)
            .is_some_and(|(new, old)| !same_origin(old, new))
    }

    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.name.is_none()
            && self.event_access_accepted.is_none()
            && self.webhook_url.is_none()
            && self.handler.is_none()
            && !self.rotate_signing_secret
            && self.headers.is_none()
            && self.auth.is_absent()
            && self.rate_limit_per_second.is_none()
    }
}

impl IntegrationEditDraft {
    /// The edit it describes for the integration as it is (`from`), or every problem with it.
    pub fn check(
        self,
        from: &EditedFrom<'_>,
        rules: &TargetRules<'_>,
    ) -> Result<IntegrationEdit, FieldErrors> {
        let mut errors = FieldErrors::default();
        let is_webhook = from.method == DeliveryMethod::Webhook;
        let name = self.name_and_access(&mut errors);
        let headers = check_given_headers(&mut errors, &self.headers);
        let auth = check_given_auth(&mut errors, &self.auth, rules);
        let rate_limit = match self.rate_limit_per_second {
            Patch::Set(n) => check_rate_limit(&mut errors, n).map(|n| Some(Some(n))),
            Patch::Null => Some(Some(None)),
            Patch::Absent => Some(None),
        };
        let url = self.url(&mut errors, from, rules);
        let handler = self.handler(&mut errors, from, rules);
        if self.rotate_signing_secret && !is_webhook {
            errors.add(
                "rotate_signing_secret",
                "only webhook integrations have a signing secret",
            );
        }
        if !is_webhook {
            no_endpoint_fields(
                &mut errors,
                !self.headers.is_absent(),
                !self.auth.is_absent(),
            );
        }
        let grace = self.grace(&mut errors, matches!(auth, Patch::Set(_)));
        let headers = match headers {
            Patch::Set(h) => Some(h),
            Patch::Null => Some(Headers::new()),
            Patch::Absent => None,
        };
        let edit = IntegrationEdit {
            name: name.0,
            event_access_accepted: name.1,
            webhook_url: url,
            handler,
            rotate_signing_secret: self.rotate_signing_secret,
            grace: grace.unwrap_or_default(),
            headers,
            auth,
            rate_limit_per_second: rate_limit.flatten(),
        };
        if is_webhook {
            let headers_after = edit.headers.as_ref().unwrap_or(from.headers);
            check_no_clash(&mut errors, headers_after, edit.auth_mode_after(from));
        }
        errors.or_value(|| Some(edit))
    }

    fn name_and_access(&self, errors: &mut FieldErrors) -> (Option<String>, Option<bool>) {
        let name = match &self.name {
            Patch::Set(n) => check_name(errors, n),
            Patch::Null => {
                errors.add("name", "must not be null");
                None
            }
            Patch::Absent => None,
        };
        let access = match self.event_access_accepted {
            Patch::Set(v) => Some(v),
            Patch::Null => {
                errors.add("event_access_accepted", "must be true or false");
                None
            }
            Patch::Absent => None,
        };
        (name, access)
    }

    fn url(
        &self,
        errors: &mut FieldErrors,
        from: &EditedFrom<'_>,
        rules: &TargetRules<'_>,
    ) -> Option<String> {
        let url = match &self.webhook_url {
            Patch::Absent => None,
            _ if from.method != DeliveryMethod::Webhook => {
                errors.add(
                    "webhook_url",
                    "only webhook integrations have a webhook_url",
                );
                None
            }
            Patch::Null => {
                errors.add("webhook_url", "a webhook integration needs a webhook_url");
                None
            }
            Patch::Set(u) => rules.url(errors, "webhook_url", u),
        };
        // The URL it has already is no change.
        url.filter(|u| Some(u.as_str()) != from.webhook_url)
    }

    fn handler(
        &self,
        errors: &mut FieldErrors,
        from: &EditedFrom<'_>,
        rules: &TargetRules<'_>,
    ) -> Option<String> {
        match &self.handler {
            Patch::Absent => None,
            _ if from.method != DeliveryMethod::Internal => {
                errors.add("handler", "only internal integrations have a handler");
                None
            }
            Patch::Null => {
                errors.add("handler", "an internal integration needs a handler");
                None
            }
            Patch::Set(h) => rules.handler(errors, h),
        }
    }

    fn grace(&self, errors: &mut FieldErrors, new_auth: bool) -> Option<Duration> {
        match rotation_grace(self.rotation_grace_seconds) {
            Ok(_)
                if self.rotation_grace_seconds.is_some()
                    && !self.rotate_signing_secret
                    && !new_auth =>
            {
                errors.add(
                    "rotation_grace_seconds",
                    "applies only with {\"rotate_signing_secret\": true} or a new auth",
                );
                None
            }
            Ok(g) => Some(g),
            Err(message) => {
                errors.add("rotation_grace_seconds", message);
                None
            }
        }
    }
}

impl IntegrationEdit {
    /// The authentication mode the endpoint has after the edit: the new one, none, or (unless
    /// the edit moves it to another origin, which drops it) the one it has.
    pub fn auth_mode_after<'a>(&'a self, from: &EditedFrom<'a>) -> Option<&'a AuthMode> {
        match &self.auth {
            Patch::Set(a) => Some(&a.mode),
            Patch::Null => None,
            Patch::Absent if self.moves_origin(from) => None,
            Patch::Absent => from.auth,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(handlers: &[String]) -> TargetRules<'_> {
        TargetRules {
            policy: TargetPolicy {
                allow_private: false,
                require_https: true,
            },
            handlers,
        }
    }

    fn fields(errors: &FieldErrors) -> Vec<String> {
        errors.iter().map(|e| e.field.clone()).collect()
    }

    fn webhook(url: &str) -> IntegrationDraft {
        IntegrationDraft {
            name: Some(" Orders ".into()),
            method: Some("webhook".into()),
            event_access_accepted: Some(true),
            webhook_url: Some(url.into()),
            ..IntegrationDraft::default()
        }
    }

    fn auth(kind: &str, given: &[(&str, &str)]) -> AuthDraft {
        AuthDraft {
            kind: kind.into(),
            fields: given
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Some((*v).to_owned())))
                .collect(),
        }
    }

    #[test]
    fn a_new_webhook_is_checked_into_its_target_with_a_trimmed_name() {
        let new = webhook("https://example.com/hook")
            .check(&rules(&[]))
            .unwrap();
        assert_eq!(new.name, "Orders");
        match new.target {
            NewTarget::Webhook { url, secret, .. } => {
                assert_eq!(url, "https://example.com/hook");
                assert!(secret.is_none(), "the operation generates it");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_new_integration_names_every_missing_field_at_once() {
        let refused = IntegrationDraft::default().check(&rules(&[])).unwrap_err();
        assert_eq!(
            fields(&refused),
            ["name", "method", "event_access_accepted"]
        );
    }

    #[test]
    fn a_webhook_to_a_private_address_or_over_http_is_refused_by_the_guard() {
        for url in ["http://example.com/hook", "https://127.0.0.1/hook"] {
            let refused = webhook(url).check(&rules(&[])).unwrap_err();
            assert_eq!(fields(&refused), ["webhook_url"], "{url}");
        }
    }

    #[test]
    fn an_internal_integration_may_name_only_a_known_handler() {
        let known = ["record_snapshot".to_owned()];
        let draft = |h: &str| IntegrationDraft {
            name: Some("i".into()),
            method: Some("internal".into()),
            event_access_accepted: Some(false),
            handler: Some(h.into()),
            ..IntegrationDraft::default()
        };
        assert!(draft("record_snapshot").check(&rules(&known)).is_ok());
        let refused = draft("rm_rf").check(&rules(&known)).unwrap_err();
        assert_eq!(fields(&refused), ["handler"]);
        assert!(refused.to_string().contains("record_snapshot"));
    }

    #[test]
    fn a_pull_integration_refuses_the_fields_of_other_methods() {
        let draft = IntegrationDraft {
            name: Some("p".into()),
            method: Some("poll".into()),
            event_access_accepted: Some(true),
            webhook_url: Some("https://example.com".into()),
            handler: Some("record_snapshot".into()),
            headers: Patch::Set(Headers::from([("x-a".into(), "1".into())])),
            ..IntegrationDraft::default()
        };
        let refused = draft.check(&rules(&[])).unwrap_err();
        assert_eq!(fields(&refused), ["webhook_url", "handler", "headers"]);
    }

    #[test]
    fn an_unknown_method_is_named_with_what_it_may_be() {
        let draft = IntegrationDraft {
            method: Some("carrier-pigeon".into()),
            ..webhook("https://example.com/hook")
        };
        let refused = draft.check(&rules(&[])).unwrap_err();
        assert_eq!(fields(&refused), ["method"]);
        assert!(refused.to_string().contains("webhook, internal or poll"));
    }

    #[test]
    fn custom_headers_may_not_set_the_header_the_authentication_sets() {
        let draft = IntegrationDraft {
            headers: Patch::Set(Headers::from([("x-api-key".into(), "v".into())])),
            auth: Patch::Set(auth("header", &[("name", "X-Api-Key"), ("value", "k")])),
            ..webhook("https://example.com/hook")
        };
        let refused = draft.check(&rules(&[])).unwrap_err();
        assert_eq!(fields(&refused), ["headers"]);
    }

    #[test]
    fn an_authentication_names_each_problem_under_auth_and_never_its_credential() {
        let draft = auth(
            "oauth2_client_credentials",
            &[
                ("token_url", "http://10.0.0.1/token"),
                ("client_secret", "s3cr3t-value"),
                ("colour", "blue"),
            ],
        );
        let refused = draft.check(&rules(&[])).unwrap_err();
        assert_eq!(
            fields(&refused),
            ["auth.token_url", "auth.client_id", "auth.colour"]
        );
        assert!(!refused.to_string().contains("s3cr3t-value"));
        let unknown = auth("kerberos", &[]).check(&rules(&[])).unwrap_err();
        assert_eq!(fields(&unknown), ["auth.type"]);
    }

    fn from<'a>(headers: &'a Headers, mode: Option<&'a AuthMode>) -> EditedFrom<'a> {
        EditedFrom {
            method: DeliveryMethod::Webhook,
            webhook_url: Some("https://a.example.com/hook"),
            headers,
            auth: mode,
        }
    }

    #[test]
    fn an_edit_to_the_url_the_webhook_has_changes_nothing() {
        let headers = Headers::new();
        let draft = IntegrationEditDraft {
            webhook_url: Patch::Set("https://a.example.com/hook".into()),
            ..IntegrationEditDraft::default()
        };
        let edit = draft.check(&from(&headers, None), &rules(&[])).unwrap();
        assert!(edit.is_empty());
    }

    #[test]
    fn an_edit_to_another_origin_leaves_no_authentication_unless_it_gives_one() {
        let headers = Headers::new();
        let mode = AuthMode::Basic {
            username: "u".into(),
        };
        let moved = IntegrationEditDraft {
            webhook_url: Patch::Set("https://b.example.com/hook".into()),
            ..IntegrationEditDraft::default()
        };
        let from = from(&headers, Some(&mode));
        let edit = moved.check(&from, &rules(&[])).unwrap();
        assert!(edit.moves_origin(&from));
        assert_eq!(edit.auth_mode_after(&from), None);
        let same_origin = IntegrationEditDraft {
            webhook_url: Patch::Set("https://a.example.com/other".into()),
            ..IntegrationEditDraft::default()
        };
        let edit = same_origin.check(&from, &rules(&[])).unwrap();
        assert!(!edit.moves_origin(&from));
        assert_eq!(edit.auth_mode_after(&from), Some(&mode));
    }

    #[test]
    fn an_edit_refuses_fields_its_method_has_not_and_a_grace_with_nothing_to_keep() {
        let headers = Headers::new();
        let poll = EditedFrom {
            method: DeliveryMethod::Poll,
            webhook_url: None,
            headers: &headers,
            auth: None,
        };
        let draft = IntegrationEditDraft {
            webhook_url: Patch::Set("https://example.com".into()),
            handler: Patch::Set("record_snapshot".into()),
            rotate_signing_secret: true,
            rotation_grace_seconds: Some(60),
            ..IntegrationEditDraft::default()
        };
        let refused = draft.check(&poll, &rules(&[])).unwrap_err();
        assert_eq!(
            fields(&refused),
            ["webhook_url", "handler", "rotate_signing_secret"]
        );
        let grace_alone = IntegrationEditDraft {
            rotation_grace_seconds: Some(60),
            ..IntegrationEditDraft::default()
        };
        let refused = grace_alone
            .check(&from(&headers, None), &rules(&[]))
            .unwrap_err();
        assert_eq!(fields(&refused), ["rotation_grace_seconds"]);
    }

    #[test]
    fn an_edit_removes_a_rate_limit_with_null_and_refuses_one_out_of_range() {
        let headers = Headers::new();
        let removed = IntegrationEditDraft {
            rate_limit_per_second: Patch::Null,
            ..IntegrationEditDraft::default()
        };
        let edit = removed.check(&from(&headers, None), &rules(&[])).unwrap();
        assert_eq!(edit.rate_limit_per_second, Some(None));
        let too_many = IntegrationEditDraft {
            rate_limit_per_second: Patch::Set(1_000_000),
            ..IntegrationEditDraft::default()
        };
        let refused = too_many
            .check(&from(&headers, None), &rules(&[]))
            .unwrap_err();
        assert_eq!(fields(&refused), ["rate_limit_per_second"]);
    }
}
