//! The `webhook` adapter: an HTTPS POST signed as Standard Webhooks prescribe (`webhook-id` is the
//! stable delivery id, so a receiver deduplicates repeats after a lost acknowledgement).
//!
//! SSRF: the URL is checked when the integration is saved and again here, and every address the
//! host resolves to is checked by the client's resolver at connect time, so a DNS answer that
//! changes after the check (rebinding) cannot reach a private address either. Redirects are not
//! followed (a redirect could point anywhere) and no proxy is used.

use super::adapters::{truncate, AttemptResult};
use crate::domain::classify::{classify_http_status, classify_transport, TransportFailure};
use crate::domain::signing::{SigningSecret, WebhookHeaders};
use crate::domain::ssrf::{check_resolved, check_url, TargetPolicy};
use crate::domain::time::Timestamp;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const USER_AGENT: &str = concat!("Rhythm-Delivery/", env!("CARGO_PKG_VERSION"));

/// Error of a resolution whose every address the SSRF policy refuses.
#[derive(Debug, thiserror::Error)]
#[error("webhook target refused: {0}")]
struct ForbiddenTarget(String);

/// A resolver that drops every address the policy refuses.
struct GuardedResolver {
    policy: TargetPolicy,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy;
        Box::pin(async move {
            let host = name.as_str().to_string();
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refusal = None;
            let allowed: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|a| match check_resolved(a.ip(), &policy) {
                    Ok(()) => true,
                    Err(e) => {
                        refusal = Some(e.to_string());
                        false
                    }
                })
                .collect();
            if allowed.is_empty() {
                let why = refusal.unwrap_or_else(|| format!("{host} has no address"));
                return Err(
                    Box::new(ForbiddenTarget(why)) as Box<dyn std::error::Error + Send + Sync>
                );
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

#[derive(Clone)]
pub struct WebhookAdapter {
    client: reqwest::Client,
    policy: TargetPolicy,
}

impl WebhookAdapter {
    pub fn new(policy: TargetPolicy, timeout: Duration) -> Self {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(5)))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .user_agent(USER_AGENT)
            .dns_resolver(Arc::new(GuardedResolver { policy }))
            .build()
            .expect("the webhook client's settings are valid");
        WebhookAdapter { client, policy }
    }

    /// Posts `payload` to `url`, signed with `secret`, and classifies the answer.
    pub async fn deliver(
        &self,
        url: &str,
        secret: &str,
        delivery_id: &str,
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
            }
        };
        let secret = match SigningSecret::parse(secret) {
            Ok(s) => s,
            Err(e) => return AttemptResult::configuration_loss(format!("signing secret: {e}")),
        };
        let headers = WebhookHeaders::sign(&[secret], delivery_id, now, payload.as_bytes());
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
                let body = response.text().await.unwrap_or_default();
                AttemptResult::new(
                    classify_http_status(status, retry_after.as_deref(), now),
                    Some(status),
                    (!body.is_empty()).then(|| truncate(body)),
                )
            }
            Err(e) => {
                let failure = transport_failure(&e);
                AttemptResult::new(classify_transport(&failure), None, Some(error_chain(&e)))
            }
        }
    }
}

fn transport_failure(e: &reqwest::Error) -> TransportFailure {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if err.downcast_ref::<ForbiddenTarget>().is_some() {
            return TransportFailure::ForbiddenTarget;
        }
        source = err.source();
    }
    if e.is_timeout() {
        TransportFailure::Timeout
    } else if e.is_connect() {
        let text = error_chain(e).to_ascii_lowercase();
        if text.contains("certificate") || text.contains("tls") {
            TransportFailure::Tls
        } else {
            TransportFailure::Connect
        }
    } else {
        TransportFailure::Other
    }
}

/// The error and its causes on one line (reqwest's own message is terse).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(err) = source {
        text.push_str(": ");
        text.push_str(&err.to_string());
        source = err.source();
    }
    text
}
