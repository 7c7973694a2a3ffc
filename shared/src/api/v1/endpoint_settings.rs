//! A webhook integration's endpoint settings in the API: `headers` (custom headers, shown as
//! they are: header values are configuration, not secrets) and `auth` (one authentication mode
//! whose credential is sealed and never shown again; read back as its mode's public fields and
//! `…_set: true`). Used by the integration operations of [`super::integrations`] (create, edit),
//! which the console calls too.

use crate::api::extract::{Fields, Patch};
use crate::api::problem::ApiError;
use crate::api::state::ApiState;
use crate::domain::endpoint_auth::{
    check_header_name, check_header_value, check_headers, AuthMode, Endpoint, EndpointAuth,
    PreviousAuth, MAX_HEADER_VALUE,
};
use crate::domain::sealed::{Credential, PreviousSecret};
use crate::domain::ssrf::check_url;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, IntegrationId};
use crate::store::audit::AuditRecord;
use crate::store::integration;
use crate::store::update::Edit;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// An authentication as a request gives it: its mode and the plaintext credential, which the
/// operation seals before anything is stored. `Debug` shows no credential.
#[derive(Debug)]
pub struct AuthInput {
    pub mode: AuthMode,
    pub credential: Credential,
}

/// The `headers` field of a request: `Set` (checked), `Null` (none), or absent; problems are
/// recorded on `f`, each naming its header.
pub fn read_headers(f: &mut Fields) -> Patch<BTreeMap<String, String>> {
    match f.patch::<BTreeMap<String, String>>("headers") {
        Patch::Set(given) => match check_headers(&given) {
            Ok(headers) => Patch::Set(headers),
            Err(problems) => {
                for p in problems {
                    f.error("headers", p);
                }
                Patch::Absent
            }
        },
        other => other,
    }
}

/// The `auth` field of a request: `Set` (checked; an OAuth2 token URL passes the SSRF guard),
/// `Null` (none), or absent; problems are recorded on `f` as `auth.<field>`. No message names a
/// credential.
pub fn read_auth(state: &ApiState, f: &mut Fields) -> Patch<AuthInput> {
    let given = match f.patch::<Map<String, Value>>("auth") {
        Patch::Set(given) => given,
        Patch::Null => return Patch::Null,
        Patch::Absent => return Patch::Absent,
    };
    let mut errors = Vec::new();
    let mut known = vec!["type"];
    let mut text = |name: &'static str, required: bool, errors: &mut Vec<(String, String)>| {
        known.push(name);
        match given.get(name) {
            None | Some(Value::Null) if !required => None,
            None | Some(Value::Null) => {
                errors.push((name.into(), "is required".into()));
                None
            }
            Some(Value::String(s)) if s.is_empty() || s.len() > MAX_HEADER_VALUE => {
                errors.push((
                    name.into(),
                    format!("must be 1 to {MAX_HEADER_VALUE} bytes"),
                ));
                None
            }
            Some(Value::String(s)) if s.chars().any(char::is_control) => {
                errors.push((name.into(), "must not contain control characters".into()));
                None
            }
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                errors.push((name.into(), "must be a string".into()));
                None
            }
        }
    };
    let kind = given
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let parsed = match kind {
        "header" => {
            let name = text("name", true, &mut errors).and_then(|n| {
                // The static header may be `authorization` itself (say `Bearer <key>`).
                let checked = if n.eq_ignore_ascii_case("authorization") {
                    Ok(n.to_ascii_lowercase())
                } else {
                    check_header_name(&n)
                };
                checked.map_err(|e| errors.push(("name".into(), e))).ok()
            });
            let value = text("value", true, &mut errors).and_then(|v| {
                check_header_value("the auth header", &v)
                    .map_err(|e| errors.push(("value".into(), e)))
                    .ok()
                    .map(|_| v)
            });
            name.zip(value)
                .map(|(name, v)| (AuthMode::Header { name }, v))
        }
        "basic" => {
            let username = text("username", true, &mut errors).and_then(|u| {
                if u.contains(':') {
                    errors.push(("username".into(), "must not contain ':'".into()));
                    None
                } else {
                    Some(u)
                }
            });
            let password = text("password", true, &mut errors);
            username
                .zip(password)
                .map(|(username, p)| (AuthMode::Basic { username }, p))
        }
        "oauth2_client_credentials" => {
            let token_url = text("token_url", true, &mut errors).and_then(|u| {
                check_url(u.trim(), &state.target_policy())
                    .map(|parsed| parsed.to_string())
                    .map_err(|e| errors.push(("token_url".into(), e.to_string())))
                    .ok()
            });
            let client_id = text("client_id", true, &mut errors);
            let secret = text("client_secret", true, &mut errors);
            let scope = text("scope", false, &mut errors);
            let audience = text("audience", false, &mut errors);
            match (token_url, client_id, secret) {
                (Some(token_url), Some(client_id), Some(secret)) => Some((
                    AuthMode::OAuth2 {
                        token_url,
                        client_id,
                        scope,
                        audience,
                    },
                    secret,
                )),
                _ => None,
            }
        }
        _ => {
            errors.push((
                "type".into(),
                "must be header, basic or oauth2_client_credentials".into(),
            ));
            None
        }
    };
    if matches!(kind, "header" | "basic" | "oauth2_client_credentials") {
        for extra in given.keys().filter(|k| !known.contains(&k.as_str())) {
            errors.push((extra.clone(), format!("is not a field of {kind} auth")));
        }
    }
    for (field, message) in &errors {
        f.error(format!("auth.{field}"), message.clone());
    }
    match parsed {
        Some((mode, secret)) if errors.is_empty() => Patch::Set(AuthInput {
            mode,
            credential: Credential::new(secret),
        }),
        _ => Patch::Absent,
    }
}

/// Custom headers need a name the authentication does not set.
pub fn check_no_clash(f: &mut Fields, headers: &BTreeMap<String, String>, auth: Option<&AuthMode>) {
    let auth_name = match auth {
        Some(AuthMode::Header { name }) => name.as_str(),
        Some(_) => "authorization",
        None => return,
    };
    if headers.contains_key(auth_name) {
        f.error("headers", format!("header {auth_name:?} is set by auth"));
    }
}

/// The authentication `input` sealed for the integration, keeping `replaced` (the one it
/// replaces) for `grace` (none when the grace is zero); 503 when KMS cannot give a data key.
pub async fn seal_auth(
    state: &ApiState,
    ids: (&AccountId, &IntegrationId),
    input: &AuthInput,
    replaced: Option<&EndpointAuth>,
    grace: Duration,
    now: Timestamp,
) -> Result<EndpointAuth, ApiError> {
    let (account_id, integration_id) = ids;
    let credential = state
        .sealer
        .seal_credential(account_id, integration_id, &input.credential)
        .await
        .map_err(|e| {
            tracing::error!(%account_id, %integration_id, error = %e, "sealing an endpoint credential");
            ApiError::Unavailable {
                detail: "the endpoint credential could not be encrypted; try again".into(),
            }
        })?;
    Ok(EndpointAuth {
        mode: input.mode.clone(),
        credential,
        previous: replaced.filter(|_| !grace.is_zero()).map(|r| {
            Box::new(PreviousAuth {
                mode: r.mode.clone(),
                credential: PreviousSecret {
                    sealed: r.credential.clone(),
                    expires_at: now.plus(grace),
                },
            })
        }),
    })
}

/// Why an edit that moves a webhook to another origin leaves no stored authentication behind
/// (the audit entry's `auth_dropped`).
pub const MOVED_AWAY: &str = "the endpoint moved to another origin (scheme, host or port): \
     credentials given for the old one are not sent to the new one";

/// What an integration edit does to the endpoint's stored authentication: the request's `auth`,
/// what is stored, whether the edit moves the endpoint to another origin, and the grace a
/// replaced authentication would keep. Credentials stay with the origin they were given for: a
/// move drops the current authentication and the one kept for a rotation's grace (and with them
/// any OAuth2 token fetched for them) unless the same request gives an authentication again, and
/// even then keeps no replaced one.
pub struct AuthChange<'a> {
    pub requested: &'a Patch<AuthInput>,
    pub current: Option<&'a EndpointAuth>,
    pub moved: bool,
    pub grace: Duration,
}

impl AuthChange<'_> {
    /// The edit drops the stored authentication because the endpoint moves.
    pub fn drops(&self) -> bool {
        self.moved && self.requested.is_absent() && self.current.is_some()
    }

    /// Whether the stored authentication changes at all.
    pub fn changes(&self) -> bool {
        !self.requested.is_absent() || self.drops()
    }

    /// The authentication mode the edit leaves.
    pub fn mode_after(&self) -> Option<&AuthMode> {
        match self.requested {
            Patch::Set(a) => Some(&a.mode),
            Patch::Null => None,
            Patch::Absent if self.moved => None,
            Patch::Absent => self.current.map(|a| &a.mode),
        }
    }

    /// Adds the change to `edit` (sealing a new credential) and tells it in `entry`: the mode
    /// before and after, a new one's grace, and `auth_dropped` when the move dropped a stored one.
    pub async fn apply(
        &self,
        state: &ApiState,
        ids: (&AccountId, &IntegrationId),
        now: Timestamp,
        edit: Edit,
        entry: AuditRecord,
    ) -> Result<(Edit, AuditRecord), ApiError> {
        if !self.changes() {
            return Ok((edit, entry));
        }
        let old = self.current.map_or("none", |a| a.mode.type_name());
        let (edit, mut entry) = match self.requested {
            Patch::Set(input) => {
                // The replaced credential stays a fallback for the grace, as a replaced signing
                // secret keeps signing (sealed as it was: the API never opens it); never across
                // a move.
                let (replaced, grace) = match self.moved {
                    true => (None, Duration::ZERO),
                    false => (self.current, self.grace),
                };
                let sealed = seal_auth(state, ids, input, replaced, grace, now).await?;
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

/// An authentication as the API shows it: its mode's public fields, never its credential.
#[derive(Debug, Serialize, PartialEq)]
#[serde(tag = "type")]
pub enum AuthView {
    #[serde(rename = "header")]
    Header { name: String, value_set: bool },
    #[serde(rename = "basic")]
    Basic {
        username: String,
        password_set: bool,
    },
    #[serde(rename = "oauth2_client_credentials")]
    OAuth2 {
        token_url: String,
        client_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        scope: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        audience: Option<String>,
        client_secret_set: bool,
    },
}

impl From<&AuthMode> for AuthView {
    fn from(mode: &AuthMode) -> Self {
        match mode.clone() {
            AuthMode::Header { name } => AuthView::Header {
                name,
                value_set: true,
            },
            AuthMode::Basic { username } => AuthView::Basic {
                username,
                password_set: true,
            },
            AuthMode::OAuth2 {
                token_url,
                client_id,
                scope,
                audience,
            } => AuthView::OAuth2 {
                token_url,
                client_id,
                scope,
                audience,
                client_secret_set: true,
            },
        }
    }
}

/// The endpoint's settings as an integration view shows them: headers, the authentication, and
/// when a replaced authentication stops being tried.
pub fn view(
    endpoint: &Endpoint,
) -> (
    Option<BTreeMap<String, String>>,
    Option<AuthView>,
    Option<String>,
) {
    let auth = endpoint.auth.as_ref();
    (
        (!endpoint.headers.is_empty()).then(|| endpoint.headers.clone()),
        auth.map(|a| AuthView::from(&a.mode)),
        auth.and_then(|a| a.previous.as_ref())
            .map(|p| p.credential.expires_at.to_rfc3339()),
    )
}
