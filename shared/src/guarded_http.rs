//! The one outbound HTTP client for user-supplied URLs (webhooks, Slack incoming webhooks).
//!
//! SSRF: every address a host resolves to is checked against the [`TargetPolicy`] at connect
//! time, so a DNS answer that changes after the URL was checked (rebinding) cannot reach a private
//! address either. Redirects are not followed (a redirect could point anywhere) and no proxy is
//! used. Callers still check the URL itself with [`crate::domain::ssrf::check_url`] (IP literals
//! never reach a resolver).

use crate::domain::ssrf::{check_resolved, TargetPolicy};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The error of a resolution whose every address the policy refuses.
#[derive(Debug, thiserror::Error)]
#[error("target refused: {0}")]
pub struct ForbiddenTarget(pub String);

/// The refusal in `error` or one of its causes, if the call failed on the SSRF policy.
pub fn refusal(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut source = Some(error);
    while let Some(err) = source {
        if let Some(forbidden) = err.downcast_ref::<ForbiddenTarget>() {
            return Some(forbidden.to_string());
        }
        source = err.source();
    }
    None
}

/// The error and its causes on one line (reqwest's own message is terse).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(err) = source {
        text.push_str(": ");
        text.push_str(&err.to_string());
        source = err.source();
    }
    text
}

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

/// A client with the SSRF-guarded resolver, no redirects, no proxy, and the given timeout.
pub fn client(
    policy: TargetPolicy,
    timeout: Duration,
    user_agent: &'static str,
) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .user_agent(user_agent)
        .dns_resolver(Arc::new(GuardedResolver { policy }))
        .build()
        .expect("the guarded client's settings are valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name that resolves to a forbidden address is refused at connect time, even when the URL
    /// check was skipped (or the DNS answer changed after it): the rebinding guard.
    #[tokio::test]
    async fn a_name_resolving_to_loopback_is_refused_at_connect_time() {
        let guarded = client(
            TargetPolicy {
                allow_private: false,
                require_https: false,
            },
            Duration::from_secs(2),
            "test",
        );
        let err = guarded
            .get("http://localhost:9/")
            .send()
            .await
            .expect_err("loopback is refused");
        let why = refusal(&err).expect("the refusal is reported as such");
        assert!(why.contains("127.0.0.1") || why.contains("::1"), "{why}");
    }
}
