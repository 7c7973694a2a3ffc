//! The `webhook` adapter: an HTTPS POST signed as Standard Webhooks prescribe (`webhook-id` is the
//! stable delivery id, so a receiver deduplicates repeats after a lost acknowledgement).
//!
//! SSRF: the URL is checked when the integration is saved and again here, and every address the
//! host resolves to is checked at connect time by [`crate::guarded_http`]'s client (no
//! redirects, no proxy).
//!
//! An integration's custom headers and authentication go on every attempt
//! ([`super::endpoint_auth`]); an endpoint that answers 401 is tried once more within the attempt
//! with a fresh OAuth2 token (when the refused one was cached) and then with the credential a
//! rotation replaced (during its grace). Every attempt carries a W3C `traceparent`.
//!
//! A hostile receiver: the attempt as a whole (connect, head, body) is bounded by the timeout,
//! and at most [`DETAIL_LIMIT`] bytes of the body are read before the connection is closed
//! (see [`crate::guarded_http`]); the attempt is classified by its status all the same.

use super::adapters::{truncate, AttemptResult, DETAIL_LIMIT};
use super::endpoint_auth::{auth_header, AuthFailure, Authenticator, TokenCache};
use crate::data_keys::{SecretOpener, UnsealError};
use crate::domain::classify::AttemptClass;
use crate::domain::classify::{classify_http_status, classify_transport, TransportFailure};
use crate::domain::endpoint_auth::{Endpoint, EndpointAuth};
use crate::domain::signing::WebhookHeaders;
use crate::domain::ssrf::{check_url, TargetPolicy};
use crate::domain::target::WebhookSecret;
use crate::domain::time::Timestamp;
use crate::guarded_http;
use crate::ids::{AccountId, IntegrationId};
use std::sync::Arc;
use std::time::Duration;

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Every header an attempt sets itself, lower-case, besides the transport's own (`host`,
/// `content-length`, `accept`, …) and the headers an integration configures. The receiver's guide
/// (`docs/receiving.md`) documents exactly these.
pub const SENT_HEADERS: &[&str] = &[
    "content-type",
    "user-agent",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "traceparent",
];
const USER_AGENT: &str = concat!("Rhythm-Delivery/", env!("CARGO_PKG_VERSION"));

#[derive(Clone)]
pub struct WebhookAdapter {
    client: reqwest::Client,
    policy: TargetPolicy,
    timeout: Duration,
    /// OAuth2 access tokens, per container.
    tokens: Arc<TokenCache>,
}

/// What one attempt sends, besides its authentication.
pub struct Message<'a> {
    /// `webhook-id`: the stable delivery (or test event) id.
    pub id: &'a str,
    pub payload: &'a str,
    /// The attempt's W3C `traceparent` value.
    pub traceparent: &'a str,
}

impl WebhookAdapter {
    pub fn new(policy: TargetPolicy, timeout: Duration) -> Self {
        WebhookAdapter {
            client: guarded_http::client(policy, timeout, USER_AGENT),
            policy,
            timeout,
            tokens: Arc::default(),
        }
    }

    /// The longest an attempt takes, from connecting until the (capped) body is read.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The SSRF policy this adapter enforces.
    pub fn policy(&self) -> TargetPolicy {
        self.policy
    }

    /// Opens the integration's signing secrets that sign at `now` (the current one, then the
    /// previous one while its rotation grace lasts) and posts the message's payload to `url`
    /// signed with them, with the endpoint's headers and authentication. The worker's attempts
    /// and the API's test events both send through here. A secret or credential that cannot be
    /// opened is the attempt's failure (transient while KMS is unavailable, else a configuration
    /// loss); a token endpoint that gives no token is a transient failure.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn send_signed(
        &self,
        opener: &SecretOpener,
        integration: (&AccountId, &IntegrationId),
        url: &str,
        secret: &WebhookSecret,
        endpoint: &Endpoint,
        message: Message<'_>,
        now: Timestamp,
    ) -> AttemptResult {
        let (account_id, integration_id) = integration;
        let mut secrets = Vec::with_capacity(2);
        for sealed in secret.signing_at(now) {
            match opener.open(account_id, integration_id, sealed).await {
                Ok(s) => secrets.push(s),
                Err(e) => return unsealed_failure("signing secret", "signing_secret", &e),
            }
        }
        let url = match check_url(url, &self.policy) {
            Ok(u) => u,
            Err(e) => {
                return AttemptResult::new(
                    classify_transport(&TransportFailure::ForbiddenTarget),
                    None,
                    Some(e.to_string()),
                )
                .error(TransportFailure::ForbiddenTarget.as_str())
            }
        };
        let signed = WebhookHeaders::sign(&secrets, message.id, now, message.payload.as_bytes());
        let mut headers: Vec<(&str, &str)> = vec![("content-type", "application/json")];
        headers.extend(signed.pairs());
        headers.push(("traceparent", message.traceparent));
        headers.extend(
            endpoint
                .headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        );
        let Some(auth) = &endpoint.auth else {
            return self.post(&url, &headers, None, message.payload, now).await;
        };
        // The token request and the extra tries share the attempt's timeout: an attempt never
        // takes longer than one without authentication could (the batch's deadline relies on it).
        let authenticated = self.authenticated(
            opener,
            integration,
            auth,
            &url,
            &headers,
            message.payload,
            now,
        );
        match tokio::time::timeout(self.timeout, authenticated).await {
            Ok(result) => result,
            Err(_) => AttemptResult::new(
                classify_transport(&TransportFailure::Timeout),
                None,
                Some(format!(
                    "the authenticated attempt took longer than {} s",
                    self.timeout.as_secs()
                )),
            )
            .error(TransportFailure::Timeout.as_str()),
        }
    }

    /// The attempt with authentication: the current one, then the one a rotation replaced
    /// (during its grace), each tried only when the endpoint refused the one before with 401; a
    /// cached OAuth2 token the endpoint refuses is fetched again, once.
    #[allow(clippy::too_many_arguments)]
    async fn authenticated(
        &self,
        opener: &SecretOpener,
        integration: (&AccountId, &IntegrationId),
        auth: &EndpointAuth,
        url: &url::Url,
        headers: &[(&str, &str)],
        payload: &str,
        now: Timestamp,
    ) -> AttemptResult {
        let authenticator = Authenticator {
            http: &self.client,
            policy: &self.policy,
            opener,
            tokens: &self.tokens,
        };
        let mut last = None;
        for tried in auth.tried_at(now) {
            let mut fresh = false;
            loop {
                let header = match auth_header(
                    &authenticator,
                    (integration, url),
                    tried,
                    fresh,
                    now,
                )
                .await
                {
                    Ok(h) => h,
                    Err(e) => {
                        last = Some(auth_failure(&e));
                        break;
                    }
                };
                let result = self.post(url, headers, Some(&header), payload, now).await;
                if result.http_status != Some(401) {
                    return result;
                }
                last = Some(result);
                if !header.cached {
                    break;
                }
                fresh = true;
            }
        }
        last.expect("an authentication is always tried")
    }

    /// Posts `payload` to `url` with `headers` (and the authentication header) and classifies
    /// the answer.
    async fn post(
        &self,
        url: &url::Url,
        headers: &[(&str, &str)],
        auth: Option<&super::endpoint_auth::AuthHeader>,
        payload: &str,
        now: Timestamp,
    ) -> AttemptResult {
        let mut request = self.client.post(url.clone());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(a) = auth {
            request = request.header(a.name.as_str(), a.value.as_str());
        }
        match request.body(payload.to_string()).send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                let retry_after = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                // One byte past the cap tells `truncate` that the body went on.
                let body = guarded_http::read_capped(response, DETAIL_LIMIT + 1).await;
                let body = String::from_utf8_lossy(&body).into_owned();
                AttemptResult::new(
                    classify_http_status(status, retry_after.as_deref(), now),
                    Some(status),
                    (!body.is_empty()).then(|| truncate(body)),
                )
            }
            Err(e) => {
                // An endpoint's URL may carry a secret (a token in its path or query): the error
                // kept on the attempt (and logged) does not name it.
                let e = e.without_url();
                let failure = transport_failure(&e);
                AttemptResult::new(
                    classify_transport(&failure),
                    None,
                    Some(guarded_http::error_chain(&e)),
                )
                .error(failure.as_str())
            }
        }
    }
}

/// The attempt an authentication that could not be made comes to: a credential that cannot be
/// opened as a signing secret that cannot; a token endpoint without a token is transient.
fn auth_failure(e: &AuthFailure) -> AttemptResult {
    match e {
        AuthFailure::Unsealed(u) => {
            unsealed_failure("endpoint credential", "endpoint_credential", u)
        }
        AuthFailure::Token(_) => AttemptResult::new(
            AttemptClass::Transient { retry_after: None },
            None,
            Some(e.to_string()),
        )
        .error("token_endpoint"),
    }
}

/// The attempt a signing secret that cannot be used comes to: a KMS outage is retried; a sealed
/// secret that does not open (altered, moved from another integration, its data key refused)
/// fails the delivery as configuration loss until the secret is rotated. Nothing secret is in
/// the detail.
fn unsealed_failure(what: &str, error: &'static str, e: &UnsealError) -> AttemptResult {
    let detail = format!("{what}: {e}");
    if e.is_transient() {
        AttemptResult::new(
            AttemptClass::Transient { retry_after: None },
            None,
            Some(detail),
        )
        .error(error)
    } else {
        AttemptResult::configuration_loss(detail)
    }
}

fn transport_failure(e: &reqwest::Error) -> TransportFailure {
    if guarded_http::refusal(e).is_some() {
        return TransportFailure::ForbiddenTarget;
    }
    if e.is_timeout() {
        TransportFailure::Timeout
    } else if e.is_connect() {
        let text = guarded_http::error_chain(e).to_ascii_lowercase();
        if text.contains("certificate") || text.contains("tls") {
            TransportFailure::Tls
        } else {
            TransportFailure::Connect
        }
    } else {
        TransportFailure::Other
    }
}

#[cfg(test)]
mod tests {
    use crate::domain::sealed::{open, seal, DataKey, PreviousSecret};
    use crate::domain::signing::{verify, SigningSecret, WebhookHeaders, DEFAULT_TOLERANCE};
    use crate::domain::target::WebhookSecret;
    use crate::domain::time::Timestamp;

    /// The header the worker builds at `now`: the secrets `signing_at(now)` opened, then signed.
    fn header_at(secret: &WebhookSecret, key: &DataKey, now: Timestamp) -> WebhookHeaders {
        let opened: Vec<SigningSecret> = secret
            .signing_at(now)
            .into_iter()
            .map(|s| open(key, s, "a1", "i1").unwrap())
            .collect();
        WebhookHeaders::sign(&opened, "msg_1", now, b"{}")
    }

    #[test]
    fn the_signature_header_carries_both_secrets_until_the_grace_ends_then_only_the_new_one() {
        let key = DataKey::from_slice(&[4; 32]).unwrap();
        let old = SigningSecret::from_bytes(&[1; 32]).unwrap();
        let new = SigningSecret::from_bytes(&[2; 32]).unwrap();
        let sealed = |s: &SigningSecret, n: u8| seal(&key, "k", b"w", [n; 12], "a1", "i1", s);
        let expires_at = Timestamp::from_millis(1_700_000_000_000);
        let secret = WebhookSecret {
            current: sealed(&new, 1),
            previous: Some(Box::new(PreviousSecret {
                sealed: sealed(&old, 2),
                expires_at,
            })),
        };
        let verifies = |s: &SigningSecret, h: &WebhookHeaders, now: Timestamp| {
            verify(
                s,
                &h.webhook_id,
                &h.webhook_timestamp,
                &h.webhook_signature,
                b"{}",
                now,
                DEFAULT_TOLERANCE,
            )
            .is_ok()
        };

        let within = expires_at.minus(std::time::Duration::from_millis(1));
        let h = header_at(&secret, &key, within);
        let entries: Vec<&str> = h.webhook_signature.split(' ').collect();
        assert_eq!(entries.len(), 2, "{}", h.webhook_signature);
        // The new secret's signature comes first.
        assert_eq!(
            entries[0],
            WebhookHeaders::sign(std::slice::from_ref(&new), "msg_1", within, b"{}")
                .webhook_signature
        );
        assert!(verifies(&old, &h, within) && verifies(&new, &h, within));

        for after in [
            expires_at,
            expires_at.plus(std::time::Duration::from_secs(3600)),
        ] {
            let h = header_at(&secret, &key, after);
            assert_eq!(h.webhook_signature.split(' ').count(), 1);
            assert!(verifies(&new, &h, after));
            assert!(
                !verifies(&old, &h, after),
                "the old secret verifies after its expiry"
            );
        }
    }
}
