//! A webhook integration's endpoint settings in the JSON API: reading a request's `headers`
//! (custom headers) and `auth` (one authentication mode and its credential) into the domain's
//! drafts ([`crate::domain::integration_input`], whose rules check them), and showing them:
//! headers as they are (configuration, not secrets), the authentication as its mode's public
//! fields and `…_set: true`, never its credential.

use crate::domain::endpoint_auth::{AuthMode, Endpoint};
use crate::domain::integration_input::{AuthDraft, Headers};
use crate::web::extract::{Fields, Patch};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The `headers` field of a request: an object of names to text values, `null` (none), or
/// absent. The domain checks the names and values.
pub(crate) fn read_headers(f: &mut Fields) -> Patch<Headers> {
    f.patch::<Headers>("headers")
}

/// The `auth` field of a request: an object with its `type` and text fields, `null` (none), or
/// absent. A field given as something else than text is named (`auth.<field>`, "must be a
/// string") by the domain's check, as is every other problem.
pub(crate) fn read_auth(f: &mut Fields) -> Patch<AuthDraft> {
    match f.patch::<Map<String, Value>>("auth") {
        Patch::Set(given) => Patch::Set(AuthDraft {
            kind: given
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            fields: given
                .iter()
                .filter(|(k, v)| *k != "type" && !v.is_null())
                .map(|(k, v)| (k.clone(), v.as_str().map(str::to_owned)))
                .collect(),
        }),
        Patch::Null => Patch::Null,
        Patch::Absent => Patch::Absent,
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
