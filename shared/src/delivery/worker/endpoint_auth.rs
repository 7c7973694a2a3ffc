//! The worker's side of endpoint authentication ([`crate::domain::endpoint_auth`]): opening a
//! mode's sealed credential (through the same [`SecretOpener`] as signing secrets, so its data
//! key is unwrapped once per container) and turning it into the header an attempt carries. For
//! OAuth2 client credentials that header is a bearer token, fetched from the token URL (through
//! the same SSRF-guarded client as the webhook) and cached per container until shortly before it
//! expires.

use super::adapters::truncate;
use crate::data_keys::{SecretOpener, UnsealError};
use crate::domain::endpoint_auth::{
    basic_authorization, bearer_authorization, client_authorization, token_fresh_until,
    token_request_body, AuthMode,
};
use crate::domain::sealed::{Credential, SealedSecret};
use crate::domain::ssrf::{check_url, TargetPolicy};
use crate::domain::time::Timestamp;
use crate::guarded_http;
use crate::ids::{AccountId, IntegrationId};
use std::collections::HashMap;
use std::sync::Mutex;

/// Tokens kept per container; past this the cache starts over.
const TOKEN_CACHE_LIMIT: usize = 1024;
/// The most of a token endpoint's answer read (a token response is small).
const TOKEN_RESPONSE_LIMIT: usize = 16 * 1024;

/// Why an authentication header could not be made. The messages name no secret.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AuthFailure {
    /// The credential could not be opened (KMS unavailable, or the sealed text unusable).
    #[error("endpoint credential: {0}")]
    Unsealed(#[from] UnsealError),
    /// The OAuth2 token endpoint gave no token.
    #[error("OAuth2 token endpoint: {0}")]
    Token(String),
}

/// Cached OAuth2 access tokens, each with the time it stops being used: one per integration,
/// endpoint origin, token URL, client id and sealed client secret (a rotated secret is another
/// entry), so a token fetched for one endpoint is never sent to another, whatever the stored
/// settings say (an edit that moves the endpoint drops its authentication too).
#[derive(Default)]
pub(crate) struct TokenCache {
    tokens: Mutex<HashMap<TokenKey, (Credential, Timestamp)>>,
}

/// What a cached token was fetched for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct TokenKey {
    account_id: String,
    integration_id: String,
    /// The origin (scheme, host, port) of the endpoint the token is sent to.
    endpoint: String,
    token_url: String,
    client_id: String,
    /// The nonce of the sealed client secret.
    nonce: Vec<u8>,
}

fn token_key(
    integration: (&AccountId, &IntegrationId),
    endpoint: &url::Url,
    (mode, sealed): (&AuthMode, &SealedSecret),
) -> TokenKey {
    let (token_url, client_id) = match mode {
        AuthMode::OAuth2 {
            token_url,
            client_id,
            ..
        } => (token_url.clone(), client_id.clone()),
        _ => Default::default(),
    };
    TokenKey {
        account_id: integration.0.as_str().to_owned(),
        integration_id: integration.1.as_str().to_owned(),
        endpoint: endpoint.origin().ascii_serialization(),
        token_url,
        client_id,
        nonce: sealed.nonce.to_vec(),
    }
}

impl TokenCache {
    fn get(&self, key: &TokenKey, now: Timestamp) -> Option<Credential> {
        let tokens = self.tokens.lock().expect("the token cache lock");
        tokens
            .get(key)
            .filter(|(_, until)| now < *until)
            .map(|(token, _)| token.clone())
    }

    fn put(&self, key: TokenKey, token: Credential, until: Timestamp) {
        let mut tokens = self.tokens.lock().expect("the token cache lock");
        if tokens.len() >= TOKEN_CACHE_LIMIT {
            tokens.clear();
        }
        tokens.insert(key, (token, until));
    }
}

/// The header one authentication adds to an attempt, and whether it came from the token cache
/// (a 401 to a cached token is worth one fresh token).
pub(crate) struct AuthHeader {
    pub name: String,
    pub value: String,
    pub cached: bool,
}

/// What making an authentication header uses: the guarded client and its policy (for a token
/// endpoint), the opener of sealed credentials, and the container's token cache.
pub(crate) struct Authenticator<'a> {
    pub http: &'a reqwest::Client,
    pub policy: &'a TargetPolicy,
    pub opener: &'a SecretOpener,
    pub tokens: &'a TokenCache,
}

/// Makes the authentication header of `mode` with its sealed `credential` for an attempt to
/// `endpoint`: opened through the opener; for OAuth2 a token from the cache (one fetched for
/// this endpoint's origin) unless `fresh`, else from the token endpoint.
pub(crate) async fn auth_header(
    a: &Authenticator<'_>,
    (integration, endpoint): ((&AccountId, &IntegrationId), &url::Url),
    (mode, sealed): (&AuthMode, &SealedSecret),
    fresh: bool,
    now: Timestamp,
) -> Result<AuthHeader, AuthFailure> {
    let Authenticator {
        http,
        policy,
        opener,
        tokens,
    } = a;
    let header = |name: &str, value: String, cached: bool| AuthHeader {
        name: name.to_owned(),
        value,
        cached,
    };
    let key = || token_key(integration, endpoint, (mode, sealed));
    if let AuthMode::OAuth2 { .. } = mode {
        if !fresh {
            if let Some(token) = tokens.get(&key(), now) {
                return Ok(header("authorization", bearer_authorization(&token), true));
            }
        }
    }
    let credential = opener
        .open_credential(integration.0, integration.1, sealed)
        .await?;
    Ok(match mode {
        AuthMode::Header { name } => header(name, credential.expose().to_owned(), false),
        AuthMode::Basic { username } => header(
            "authorization",
            basic_authorization(username, &credential),
            false,
        ),
        AuthMode::OAuth2 {
            token_url,
            client_id,
            scope,
            audience,
        } => {
            let request = TokenRequest {
                token_url,
                client_id,
                scope: scope.as_deref(),
                audience: audience.as_deref(),
            };
            let (token, expires_in) = request.fetch(http, policy, &credential).await?;
            tokens.put(key(), token.clone(), token_fresh_until(now, expires_in));
            header("authorization", bearer_authorization(&token), false)
        }
    })
}

/// A client-credentials token request.
struct TokenRequest<'a> {
    token_url: &'a str,
    client_id: &'a str,
    scope: Option<&'a str>,
    audience: Option<&'a str>,
}

#[derive(serde::Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    expires_in: Option<serde_json::Value>,
}

impl TokenRequest<'_> {
    /// Posts the form (client authenticated by HTTP basic, RFC 6749 §2.3.1) and reads the token
    /// and its lifetime. Errors carry the status and the start of an error answer, never the
    /// client secret nor a token.
    async fn fetch(
        &self,
        http: &reqwest::Client,
        policy: &TargetPolicy,
        secret: &Credential,
    ) -> Result<(Credential, Option<u64>), AuthFailure> {
        let url = check_url(self.token_url, policy)
            .map_err(|e| AuthFailure::Token(format!("token URL refused: {e}")))?;
        let response = http
            .post(url)
            .header(
                reqwest::header::AUTHORIZATION,
                client_authorization(self.client_id, secret),
            )
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(reqwest::header::ACCEPT, "application/json")
            .body(token_request_body(self.scope, self.audience))
            .send()
            .await
            .map_err(|e| AuthFailure::Token(guarded_http::error_chain(&e.without_url())))?;
        let status = response.status();
        let body = guarded_http::read_capped(response, TOKEN_RESPONSE_LIMIT).await;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body).into_owned();
            return Err(AuthFailure::Token(truncate(format!(
                "answered {}: {text}",
                status.as_u16()
            ))));
        }
        let parsed: TokenResponse = serde_json::from_slice(&body)
            .map_err(|_| AuthFailure::Token("the answer holds no access_token".into()))?;
        // Some servers send the lifetime as a string.
        let expires_in = parsed.expires_in.and_then(|v| match v {
            serde_json::Value::Number(n) => n.as_u64(),
            serde_json::Value::String(s) => s.parse().ok(),
            _ => None,
        });
        Ok((Credential::new(parsed.access_token), expires_in))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;

    fn sealed(nonce: u8) -> SealedSecret {
        SealedSecret {
            key_id: "k".into(),
            wrapped_key: vec![1],
            nonce: [nonce; crate::domain::sealed::NONCE_BYTES],
            ciphertext: vec![2],
        }
    }

    fn oauth(token_url: &str, client_id: &str) -> AuthMode {
        AuthMode::OAuth2 {
            token_url: token_url.into(),
            client_id: client_id.into(),
            scope: None,
            audience: None,
        }
    }

    #[test]
    fn a_cached_token_is_found_only_for_the_endpoint_origin_token_url_and_client_it_was_fetched_for(
    ) {
        let (a, i) = (id("a1"), id("i1"));
        let at = |u: &str| url::Url::parse(u).unwrap();
        let mode = oauth("https://idp.test/token", "c1");
        let secret = sealed(7);
        let cache = TokenCache::default();
        let key = token_key((&a, &i), &at("https://hooks.acme.test/a"), (&mode, &secret));
        cache.put(key, Credential::new("tok".into()), Timestamp(10_000));
        let found = |endpoint: &str, mode: &AuthMode, secret: &SealedSecret| {
            let key = token_key((&a, &i), &at(endpoint), (mode, secret));
            cache.get(&key, Timestamp(1_000)).is_some()
        };
        // Another path of the same origin: the same token.
        assert!(found("https://hooks.acme.test/b?x=1", &mode, &secret));
        // Another origin, token URL, client or secret: none.
        assert!(!found("https://evil.test/a", &mode, &secret));
        assert!(!found("https://hooks.acme.test:8443/a", &mode, &secret));
        assert!(!found("http://hooks.acme.test/a", &mode, &secret));
        let other_idp = oauth("https://evil.test/token", "c1");
        assert!(!found("https://hooks.acme.test/a", &other_idp, &secret));
        let other_client = oauth("https://idp.test/token", "c2");
        assert!(!found("https://hooks.acme.test/a", &other_client, &secret));
        assert!(!found("https://hooks.acme.test/a", &mode, &sealed(8)));
        // Nor past its time.
        let key = token_key((&a, &i), &at("https://hooks.acme.test/a"), (&mode, &secret));
        assert!(cache.get(&key, Timestamp(10_000)).is_none());
    }
}
