//! The email channel: Amazon SES v2 `SendEmail` (a simple text message from the configured sender).
//! The SES message id is the provider reference; delivery and bounces arrive later as SES events
//! through SNS ([`crate::notify::confirm`]).
//!
//! | SES answer                                                  | answer        |
//! |-------------------------------------------------------------|---------------|
//! | message id                                                  | `Accepted`    |
//! | `TooManyRequestsException`, `LimitExceededException`, throttling, 5xx, timeouts, connection failures | `Retryable` |
//! | `MessageRejected`, `BadRequestException`, invalid parameters | `Permanent`   |
//! | `MailFromDomainNotVerifiedException`, `SendingPausedException`, `AccountSuspendedException`, `NotFoundException` (configuration set) | `Unavailable` (the channel is not configured to send) |
//! | recipient without a plausible address                       | `Unavailable` (recipient unreachable) |

use super::{ChannelAdapter, ChannelAnswer, OutgoingMessage};
use crate::domain::time::Timestamp;
use aws_sdk_sesv2::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sesv2::types::{Body, Content, Destination, EmailContent, Message};

/// The environment variable naming the SES configuration set (event publishing to SNS).
pub(crate) const CONFIGURATION_SET_VAR: &str = "NOTIFICATION_CONFIGURATION_SET";

pub(crate) struct EmailAdapter {
    ses: aws_sdk_sesv2::Client,
    sender: String,
    configuration_set: Option<String>,
}

impl EmailAdapter {
    pub fn new(
        ses: aws_sdk_sesv2::Client,
        sender: &str,
        configuration_set: Option<String>,
    ) -> Self {
        EmailAdapter {
            ses,
            sender: sender.to_string(),
            configuration_set,
        }
    }
}

/// A plausible mailbox address: `local@domain.tld`, no spaces, at most 254 characters.
pub(crate) fn plausible_address(address: &str) -> bool {
    if address.len() > 254 || address.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    match address.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.contains('@')
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
        }
        None => false,
    }
}

fn text(data: &str) -> Result<Content, String> {
    Content::builder()
        .data(data)
        .charset("UTF-8")
        .build()
        .map_err(|e| e.to_string())
}

/// Classifies an SES error code (see the module table). `None` for codes it does not know.
pub(crate) fn classify_ses_code(code: &str, message: &str) -> Option<ChannelAnswer> {
    let detail = format!("SES {code}: {message}");
    Some(match code {
        "TooManyRequestsException"
        | "LimitExceededException"
        | "ThrottlingException"
        | "Throttling"
        | "ServiceUnavailable"
        | "InternalFailure" => ChannelAnswer::retryable(detail),
        "MessageRejected" | "BadRequestException" | "InvalidParameterValue" => {
            ChannelAnswer::permanent(detail)
        }
        "MailFromDomainNotVerifiedException"
        | "SendingPausedException"
        | "AccountSuspendedException"
        | "NotFoundException" => ChannelAnswer::unavailable(detail),
        _ => return None,
    })
}

#[async_trait::async_trait]
impl ChannelAdapter for EmailAdapter {
    fn provider(&self) -> &'static str {
        "ses"
    }

    async fn send(&self, message: &OutgoingMessage<'_>, _now: Timestamp) -> ChannelAnswer {
        let Some(address) = message.address.filter(|a| plausible_address(a)) else {
            return ChannelAnswer::unavailable(format!(
                "recipient {} has no email address",
                message.recipient
            ));
        };
        let (subject, body) = match (text(message.subject), text(message.body)) {
            (Ok(s), Ok(b)) => (s, b),
            (Err(e), _) | (_, Err(e)) => return ChannelAnswer::permanent(e),
        };
        let content = EmailContent::builder()
            .simple(
                Message::builder()
                    .subject(subject)
                    .body(Body::builder().text(body).build())
                    .build(),
            )
            .build();
        let result = self
            .ses
            .send_email()
            .from_email_address(&self.sender)
            .destination(Destination::builder().to_addresses(address).build())
            .content(content)
            .set_configuration_set_name(self.configuration_set.clone())
            .send()
            .await;
        match result {
            Ok(out) => match out.message_id() {
                Some(id) => ChannelAnswer::Accepted {
                    provider_ref: id.to_string(),
                    confirmed: false,
                },
                None => ChannelAnswer::retryable("SES accepted the message without a message id"),
            },
            Err(SdkError::ServiceError(e)) => {
                let code = e.err().code().unwrap_or("Unknown").to_string();
                let msg = e.err().message().unwrap_or_default().to_string();
                let status = e.raw().status().as_u16();
                classify_ses_code(&code, &msg).unwrap_or_else(|| {
                    let detail = format!("SES {code} (HTTP {status}): {msg}");
                    if status >= 500 || status == 429 {
                        ChannelAnswer::retryable(detail)
                    } else {
                        ChannelAnswer::permanent(detail)
                    }
                })
            }
            // Timeouts, dispatch (connection) failures, unreadable responses: try again.
            Err(other) => ChannelAnswer::retryable(format!("SES call failed: {other}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_the_ses_errors() {
        assert!(matches!(
            classify_ses_code("TooManyRequestsException", "slow down"),
            Some(ChannelAnswer::Retryable { .. })
        ));
        assert!(matches!(
            classify_ses_code("MessageRejected", "Email address not verified"),
            Some(ChannelAnswer::Permanent { .. })
        ));
        assert!(matches!(
            classify_ses_code("SendingPausedException", "paused"),
            Some(ChannelAnswer::Unavailable { .. })
        ));
        assert_eq!(classify_ses_code("SomethingNew", "x"), None);
    }

    #[test]
    fn plausible_addresses() {
        assert!(plausible_address("admin@example.com"));
        assert!(!plausible_address("admin"));
        assert!(!plausible_address("a b@example.com"));
        assert!(!plausible_address("a@localhost"));
        assert!(!plausible_address("@example.com"));
    }
}
