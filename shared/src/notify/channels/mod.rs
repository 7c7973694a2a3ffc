//! Channel adapters. Each answers one of four ways (the outcomes of the notification delivery
//! lifecycle, `docs/lifecycles.md#notification-delivery`):
//!
//! | answer        | meaning                                              | the delivery becomes |
//! |---------------|------------------------------------------------------|----------------------|
//! | `Accepted`    | the channel took it and gave a reference             | `sent` (then `delivered` on confirmation; an adapter whose acceptance *is* delivery confirms at once) |
//! | `Retryable`   | try again later, after at least `retry_after`         | `queued` (another receive remains) or `failed` (`attempts_exhausted`) |
//! | `Permanent`   | the provider refuses this message for good            | `failed` (provider reason) |
//! | `Unavailable` | the recipient is unreachable or the channel is not configured | `skipped` (reason) |
//!
//! A channel with no adapter at all is the lifecycle's "no adapter for the channel" row
//! (`queued → skipped`), decided before any claim.

pub(crate) mod console;
pub(crate) mod email;
pub(crate) mod slack;

use crate::aws::Clients;
use crate::config::Config;
use crate::domain::ssrf::TargetPolicy;
use crate::domain::time::Timestamp;
use crate::ids::NoticeId;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The channels this system has adapters for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    Email,
    Slack,
    Console,
}

impl Channel {
    pub const ALL: [Channel; 3] = [Channel::Email, Channel::Slack, Channel::Console];
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Email => "email",
            Channel::Slack => "slack",
            Channel::Console => "console",
        }
    }
    pub fn parse(s: &str) -> Option<Channel> {
        Channel::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One message for one recipient on one channel.
#[derive(Debug, Clone, Copy)]
pub struct OutgoingMessage<'a> {
    pub notice_id: &'a NoticeId,
    pub delivery_key: &'a str,
    /// The dispatch this attempt belongs to (stable across retries of one dispatch).
    pub dispatch_id: &'a str,
    pub recipient: &'a str,
    /// The recipient's address on this channel, if it has one.
    pub address: Option<&'a str>,
    pub subject: &'a str,
    pub body: &'a str,
}

/// What an adapter made of one send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelAnswer {
    /// The channel accepted it. `confirmed`: the acceptance is the delivery itself (a chat post),
    /// so the adapter confirms at once (`sent → delivered`).
    Accepted {
        provider_ref: String,
        confirmed: bool,
    },
    /// Worth another receive, after at least `retry_after` when the provider asked for one.
    Retryable {
        retry_after: Option<Duration>,
        detail: String,
    },
    /// Refused for good.
    Permanent { detail: String },
    /// The recipient is unreachable or the channel is not configured.
    Unavailable { reason: String },
}

impl ChannelAnswer {
    pub fn retryable(detail: impl Into<String>) -> Self {
        ChannelAnswer::Retryable {
            retry_after: None,
            detail: detail.into(),
        }
    }
    pub fn permanent(detail: impl Into<String>) -> Self {
        ChannelAnswer::Permanent {
            detail: detail.into(),
        }
    }
    pub fn unavailable(reason: impl Into<String>) -> Self {
        ChannelAnswer::Unavailable {
            reason: reason.into(),
        }
    }
}

#[async_trait::async_trait]
pub trait ChannelAdapter: Send + Sync {
    /// The provider name stored with the reference (`ses`, `slack`, `console`).
    fn provider(&self) -> &'static str;
    async fn send(&self, message: &OutgoingMessage<'_>, now: Timestamp) -> ChannelAnswer;
}

/// The adapters the worker knows, by channel name.
#[derive(Clone, Default)]
pub struct Adapters {
    by_channel: HashMap<String, Arc<dyn ChannelAdapter>>,
}

impl Adapters {
    pub fn empty() -> Self {
        Adapters::default()
    }

    /// Email through SES v2 (from `config.notification_sender`, with the configuration set named
    /// by `NOTIFICATION_CONFIGURATION_SET` if set), Slack incoming webhooks (behind the SSRF
    /// guard; only `hooks.slack.com` unless private targets are allowed), and the console.
    pub fn standard(clients: &Clients, config: &Config) -> Self {
        let policy = TargetPolicy {
            allow_private: config.allow_private_targets,
            require_https: !config.allow_private_targets,
        };
        Adapters::empty()
            .with(
                "email",
                Arc::new(email::EmailAdapter::new(
                    clients.ses.clone(),
                    &config.notification_sender,
                    std::env::var(email::CONFIGURATION_SET_VAR)
                        .ok()
                        .filter(|s| !s.is_empty()),
                )),
            )
            .with(
                "slack",
                Arc::new(slack::SlackAdapter::new(policy, slack::DEFAULT_TIMEOUT)),
            )
            .with("console", Arc::new(console::ConsoleAdapter))
    }

    pub fn with(mut self, channel: &str, adapter: Arc<dyn ChannelAdapter>) -> Self {
        self.by_channel.insert(channel.to_string(), adapter);
        self
    }

    pub fn without(mut self, channel: &str) -> Self {
        self.by_channel.remove(channel);
        self
    }

    pub fn get(&self, channel: &str) -> Option<&Arc<dyn ChannelAdapter>> {
        self.by_channel.get(channel)
    }
}
