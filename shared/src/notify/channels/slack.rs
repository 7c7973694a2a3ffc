//! The Slack channel: an incoming-webhook POST of `{"text": …}`. A 2xx means the message is in the
//! channel, so the adapter confirms delivery at once.
//!
//! | Slack answer                                     | answer |
//! |--------------------------------------------------|--------|
//! | 2xx                                              | `Accepted` (confirmed); reference `x-slack-req-id`, else the dispatch id |
//! | 429 (rate limited)                               | `Retryable` with the `Retry-After` delay |
//! | 408, 5xx, timeouts, connection failures          | `Retryable` (503's `Retry-After` honoured too) |
//! | 403 `action_prohibited`, 404 `channel_not_found` / `no_service`, 410 `channel_is_archived` | `Unavailable`: the webhook no longer reaches a channel |
//! | other 4xx (`invalid_payload`, `no_text`, …), 1xx, 3xx | `Permanent` |
//! | no webhook URL, a URL the SSRF guard refuses, or (in AWS) a host other than `hooks.slack.com` | `Unavailable`: the channel is not configured |
//!
//! SSRF: the URL is checked before the call and every resolved address again at connect time by
//! [`crate::guarded_http`]'s client; redirects are not followed, no proxy is used.

use super::{ChannelAdapter, ChannelAnswer, OutgoingMessage};
use crate::domain::classify::parse_retry_after;
use crate::domain::ssrf::{check_url, TargetPolicy};
use crate::domain::time::Timestamp;
use crate::guarded_http;
use std::time::Duration;

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The only host Slack incoming webhooks live on (enforced unless private targets are allowed).
pub(crate) const SLACK_WEBHOOK_HOST: &str = "hooks.slack.com";
const USER_AGENT: &str = concat!("Rhythm-Delivery-Notifications/", env!("CARGO_PKG_VERSION"));
const BODY_LIMIT: usize = 300;

/// Whether `address` may be a Slack incoming webhook under `policy`: the SSRF guard's URL check
/// and, unless private targets are allowed (the local demo and tests, whose receivers are on
/// loopback), https on [`SLACK_WEBHOOK_HOST`]. The API checks a notice's URLs with it, and the
/// adapter again before each call.
pub(crate) fn check_slack_url(address: &str, policy: &TargetPolicy) -> Result<url::Url, String> {
    let url = check_url(address, policy).map_err(|e| e.to_string())?;
    if !policy.allow_private
        && (url.scheme() != "https" || url.host_str() != Some(SLACK_WEBHOOK_HOST))
    {
        return Err(format!("must be an https URL on {SLACK_WEBHOOK_HOST}"));
    }
    Ok(url)
}

#[derive(Clone)]
pub(crate) struct SlackAdapter {
    client: reqwest::Client,
    policy: TargetPolicy,
}

impl SlackAdapter {
    pub fn new(policy: TargetPolicy, timeout: Duration) -> Self {
        SlackAdapter {
            client: guarded_http::client(policy, timeout, USER_AGENT),
            policy,
        }
    }
}

/// The Slack message for a notice: the subject in bold, then the body.
pub(crate) fn slack_payload(subject: &str, body: &str) -> serde_json::Value {
    serde_json::json!({ "text": format!("*{subject}*\n{body}") })
}

/// Classifies a Slack webhook answer (see the module table).
pub(crate) fn classify_slack(
    status: u16,
    retry_after: Option<&str>,
    body: &str,
    request_id: Option<&str>,
    dispatch_id: &str,
    now: Timestamp,
) -> ChannelAnswer {
    let body: String = body.chars().take(BODY_LIMIT).collect();
    let detail = if body.is_empty() {
        format!("Slack answered {status}")
    } else {
        format!("Slack answered {status}: {body}")
    };
    match status {
        200..=299 => ChannelAnswer::Accepted {
            provider_ref: request_id
                .map(str::to_string)
                .unwrap_or_else(|| format!("slack:{dispatch_id}")),
            confirmed: true,
        },
        429 | 503 => ChannelAnswer::Retryable {
            retry_after: retry_after.and_then(|v| parse_retry_after(v, now)),
            detail,
        },
        408 | 500..=599 => ChannelAnswer::retryable(detail),
        403 | 404 | 410 => ChannelAnswer::unavailable(detail),
        _ => ChannelAnswer::permanent(detail),
    }
}

#[async_trait::async_trait]
impl ChannelAdapter for SlackAdapter {
    fn provider(&self) -> &'static str {
        "slack"
    }

    async fn send(&self, message: &OutgoingMessage<'_>, now: Timestamp) -> ChannelAnswer {
        let Some(address) = message.address else {
            return ChannelAnswer::unavailable(format!(
                "recipient {} has no Slack webhook",
                message.recipient
            ));
        };
        let url = match check_slack_url(address, &self.policy) {
            Ok(u) => u,
            Err(e) => return ChannelAnswer::unavailable(format!("Slack webhook URL: {e}")),
        };
        let request = self
            .client
            .post(url)
            .json(&slack_payload(message.subject, message.body));
        match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                let header = |name: &str| {
                    response
                        .headers()
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string)
                };
                let retry_after = header("retry-after");
                let request_id = header("x-slack-req-id");
                let body = response.text().await.unwrap_or_default();
                classify_slack(
                    status,
                    retry_after.as_deref(),
                    &body,
                    request_id.as_deref(),
                    message.dispatch_id,
                    now,
                )
            }
            // The webhook URL is the channel's secret: reqwest's error names it, so it is
            // dropped before the error is kept or logged.
            Err(e) => {
                let e = e.without_url();
                match guarded_http::refusal(&e) {
                    Some(why) => ChannelAnswer::unavailable(why),
                    None => ChannelAnswer::retryable(format!(
                        "Slack call failed: {}",
                        guarded_http::error_chain(&e)
                    )),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Timestamp = Timestamp(1_700_000_000_000);

    #[test]
    fn a_429_is_retryable_carrying_retry_after() {
        assert_eq!(
            classify_slack(429, Some("120"), "rate_limited", None, "d", NOW),
            ChannelAnswer::Retryable {
                retry_after: Some(Duration::from_secs(120)),
                detail: "Slack answered 429: rate_limited".into()
            }
        );
        assert!(matches!(
            classify_slack(429, None, "", None, "d", NOW),
            ChannelAnswer::Retryable {
                retry_after: None,
                ..
            }
        ));
    }

    #[test]
    fn the_other_answers() {
        assert_eq!(
            classify_slack(200, None, "ok", Some("req-1"), "d", NOW),
            ChannelAnswer::Accepted {
                provider_ref: "req-1".into(),
                confirmed: true
            }
        );
        assert_eq!(
            classify_slack(200, None, "ok", None, "d1", NOW),
            ChannelAnswer::Accepted {
                provider_ref: "slack:d1".into(),
                confirmed: true
            }
        );
        assert!(matches!(
            classify_slack(500, None, "", None, "d", NOW),
            ChannelAnswer::Retryable { .. }
        ));
        assert!(matches!(
            classify_slack(404, None, "channel_not_found", None, "d", NOW),
            ChannelAnswer::Unavailable { .. }
        ));
        assert!(matches!(
            classify_slack(410, None, "channel_is_archived", None, "d", NOW),
            ChannelAnswer::Unavailable { .. }
        ));
        assert!(matches!(
            classify_slack(400, None, "invalid_payload", None, "d", NOW),
            ChannelAnswer::Permanent { .. }
        ));
        assert!(matches!(
            classify_slack(302, None, "", None, "d", NOW),
            ChannelAnswer::Permanent { .. }
        ));
        assert_eq!(
            slack_payload("Paused", "Fix it"),
            serde_json::json!({"text": "*Paused*\nFix it"})
        );
    }
}
