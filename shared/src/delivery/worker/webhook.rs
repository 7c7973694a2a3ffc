//! The `webhook` adapter: an HTTPS POST signed as Standard Webhooks prescribe (`webhook-id` is the
//! stable delivery id, so a receiver deduplicates repeats after a lost acknowledgement).
//!
//! SSRF: the URL is checked when the integration is saved and again here, and every address the
//! host resolves to is checked at connect time by [`crate::guarded_http`]'s client (no
//! redirects, no proxy).
//!
//! A hostile receiver: the attempt as a whole (connect, head, body) is bounded by the timeout,
//! and at most [`DETAIL_LIMIT`] bytes of the body are read before the connection is closed
//! (see [`crate::guarded_http`]); the attempt is classified by its status all the same.

use super::adapters::{truncate, AttemptResult, DETAIL_LIMIT};
use crate::data_keys::{SecretOpener, UnsealError};
use crate::domain::classify::AttemptClass;
use crate::domain::classify::{classify_http_status, classify_transport, TransportFailure};
use crate::domain::signing::{SigningSecret, WebhookHeaders};
use crate::domain::ssrf::{check_url, TargetPolicy};
use crate::domain::target::WebhookSecret;
use crate::domain::time::Timestamp;
use crate::guarded_http;
use crate::ids::{AccountId, IntegrationId};
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
];
const USER_AGENT: &str = concat!("Rhythm-Delivery/", env!("CARGO_PKG_VERSION"));

#[derive(Clone)]
pub struct WebhookAdapter {
    client: reqwest::Client,
    policy: TargetPolicy,
    timeout: Duration,
}

impl WebhookAdapter {
    pub fn new(policy: TargetPolicy, timeout: Duration) -> Self {
        WebhookAdapter {
            client: guarded_http::client(policy, timeout, USER_AGENT),
            policy,
            timeout,
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
    /// previous one while its rotation grace lasts) and posts `payload` to `url` signed with
    /// them, as `message_id` (`webhook-id`). The worker's attempts and the API's test events
    /// both send through here. A secret that cannot be opened is the attempt's failure
    /// (transient while KMS is unavailable, else a configuration loss).
    #[allow(clippy::too_many_arguments)]
    pub async fn send_signed(
        &self,
        opener: &SecretOpener,
        integration: (&AccountId, &IntegrationId),
        url: &str,
        secret: &WebhookSecret,
        message_id: &str,
        payload: &str,
        now: Timestamp,
    ) -> AttemptResult {
        let (account_id, integration_id) = integration;
        let mut secrets = Vec::with_capacity(2);
        for sealed in secret.signing_at(now) {
            match opener.open(account_id, integration_id, sealed).await {
                Ok(s) => secrets.push(s),
                Err(e) => return unsealed_failure(&e),
            }
        }
        self.deliver(url, &secrets, message_id, payload, now).await
    }

    /// Posts `payload` to `url`, signed with every secret of `secrets` (the current one first;
    /// during a rotation's grace the previous one too), and classifies the answer.
    pub async fn deliver(
        &self,
        url: &str,
        secrets: &[SigningSecret],
        message_id: &str,
        payload: &str,
        now: Timestamp,
    ) -> AttemptResult {
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
        let headers = WebhookHeaders::sign(secrets, message_id, now, payload.as_bytes());
        let mut request = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json");
        for (name, value) in headers.pairs() {
            request = request.header(name, value);
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

/// The attempt a signing secret that cannot be used comes to: a KMS outage is retried; a sealed
/// secret that does not open (altered, moved from another integration, its data key refused)
/// fails the delivery as configuration loss until the secret is rotated. Nothing secret is in
/// the detail.
fn unsealed_failure(e: &UnsealError) -> AttemptResult {
    let detail = format!("signing secret: {e}");
    if e.is_transient() {
        AttemptResult::new(
            AttemptClass::Transient { retry_after: None },
            None,
            Some(detail),
        )
        .error("signing_secret")
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
