//! What an account's notices may send from the platform (its SES identity, its Slack posts): the
//! pure checks behind `POST /v1/notices`.
//!
//! * **Who.** Every address a notice would send to must be the account's own: an email address
//!   of one of its administrators (`admin_emails` on the account item, set when an operator
//!   creates the account), or one the operator allowed it (the account's [`NoticeAllowlist`]:
//!   whole addresses, email domains, Slack workspaces). Console deliveries stay inside the
//!   platform (the account's own in-app inbox) and are not bounded. An address is only checked
//!   on the channels the notice uses: a recipient without an address on a channel is skipped
//!   there, not sent to.
//! * **How many per notice.** At most [`MAX_RECIPIENTS`] recipients.
//! * **How many per day.** The account's notices may name at most the deployment's daily quota
//!   of *outbound recipients* per UTC day ([`outbound_recipients`]: recipients with an email or
//!   Slack address on the notice's channels). Recipients rather than notices, because each one
//!   is a message the platform sends: a quota of notices would let one account send the cap
//!   times the quota. The counter: [`crate::store::notice_quota`]. Over it, the answer says how
//!   long until the next UTC day ([`retry_after_secs`]).

use crate::domain::time::Timestamp;
use crate::store::account::NoticeAllowlist;
use crate::store::notice::Recipient;
use crate::store::notice_quota::next_utc_day;
use serde::Serialize;

/// Recipients one notice may name.
pub const MAX_RECIPIENTS: usize = 100;
/// The channels that leave the platform; their addresses are bounded.
pub(crate) const OUTBOUND_CHANNELS: [&str; 2] = ["email", "slack"];

/// One recipient the account may not send to, as the refusal names it: by its place in the
/// request and its identity there (nothing about any other account).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct RefusedRecipient {
    /// `recipients[i]`.
    pub field: String,
    /// The recipient's identity as the request gave it.
    pub recipient: String,
    /// The channel whose address is not allowed.
    pub channel: String,
}

/// The Slack workspace (team id) of an incoming-webhook URL: the first segment after
/// `/services/`.
pub(crate) fn slack_workspace(webhook_url: &str) -> Option<String> {
    let url = url::Url::parse(webhook_url).ok()?;
    let mut segments = url.path_segments()?;
    (segments.next()? == "services")
        .then(|| segments.next())
        .flatten()
        .filter(|team| !team.is_empty())
        .map(str::to_string)
}

fn same(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

/// Whether the account may email `address`.
pub(crate) fn admits_email(address: &str, admins: &[String], allow: &NoticeAllowlist) -> bool {
    if admins
        .iter()
        .chain(&allow.addresses)
        .any(|a| same(a, address))
    {
        return true;
    }
    match address.rsplit_once('@') {
        Some((_, domain)) => allow.domains.iter().any(|d| same(d, domain)),
        None => false,
    }
}

/// Whether the account may post to the Slack webhook `url`.
pub(crate) fn admits_slack(url: &str, allow: &NoticeAllowlist) -> bool {
    slack_workspace(url).is_some_and(|team| allow.slack_workspaces.iter().any(|w| same(w, &team)))
}

/// The recipients (with the channel) a notice on `channels` may not reach, in request order.
pub fn refused_recipients(
    recipients: &[Recipient],
    channels: &[String],
    admins: &[String],
    allow: &NoticeAllowlist,
) -> Vec<RefusedRecipient> {
    let mut refused = Vec::new();
    for (i, r) in recipients.iter().enumerate() {
        for channel in channels
            .iter()
            .filter(|c| OUTBOUND_CHANNELS.contains(&c.as_str()))
        {
            let Some(address) = r.address(channel) else {
                continue;
            };
            let admitted = match channel.as_str() {
                "email" => admits_email(address, admins, allow),
                _ => admits_slack(address, allow),
            };
            if !admitted {
                refused.push(RefusedRecipient {
                    field: format!("recipients[{i}]"),
                    recipient: r.id().to_string(),
                    channel: channel.clone(),
                });
            }
        }
    }
    refused
}

/// The recipients that count against the daily quota: those the notice would send to on an
/// outbound channel.
pub(crate) fn outbound_recipients(recipients: &[Recipient], channels: &[String]) -> u32 {
    recipients
        .iter()
        .filter(|r| {
            channels
                .iter()
                .filter(|c| OUTBOUND_CHANNELS.contains(&c.as_str()))
                .any(|c| r.address(c).is_some())
        })
        .count() as u32
}

/// Whole seconds from `now` until the next UTC day begins (when the quota is available again),
/// rounded up: between 1 and 86 400.
pub fn retry_after_secs(now: Timestamp) -> u64 {
    let ms = next_utc_day(now).millis() - now.millis();
    (ms as u64).div_ceil(1000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::notice::Contact;

    fn allow() -> NoticeAllowlist {
        NoticeAllowlist {
            addresses: vec!["Pager@Partner.test".into()],
            domains: vec!["acme.test".into()],
            slack_workspaces: vec!["T024".into()],
        }
    }

    fn admins() -> Vec<String> {
        vec!["admin@example.com".into()]
    }

    fn contact(id: &str, email: Option<&str>, slack: Option<&str>) -> Recipient {
        Recipient::Contact(Contact {
            id: id.into(),
            email: email.map(str::to_string),
            slack_webhook_url: slack.map(str::to_string),
        })
    }

    fn channels(c: &[&str]) -> Vec<String> {
        c.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn an_email_is_admitted_by_the_admin_list_an_allowed_address_or_its_exact_domain() {
        let (admins, allow) = (admins(), allow());
        assert!(admits_email("ADMIN@example.com", &admins, &allow));
        assert!(admits_email("pager@partner.test", &admins, &allow));
        assert!(admits_email("anyone@acme.test", &admins, &allow));
        assert!(admits_email("anyone@ACME.test", &admins, &allow));
        assert!(!admits_email("anyone@sub.acme.test", &admins, &allow));
        assert!(!admits_email("anyone@acme.test.evil", &admins, &allow));
        assert!(!admits_email("other@partner.test", &admins, &allow));
        assert!(!admits_email(
            "admin@example.com",
            &[],
            &NoticeAllowlist::default()
        ));
    }

    #[test]
    fn a_slack_webhook_is_admitted_by_its_workspace() {
        let allow = allow();
        assert_eq!(
            slack_workspace("https://hooks.slack.com/services/T024/B1/secret").as_deref(),
            Some("T024")
        );
        assert!(admits_slack(
            "https://hooks.slack.com/services/T024/B1/secret",
            &allow
        ));
        assert!(!admits_slack(
            "https://hooks.slack.com/services/T999/B1/secret",
            &allow
        ));
        assert!(!admits_slack("https://hooks.slack.com/other/T024", &allow));
        assert!(!admits_slack("not a url", &allow));
    }

    #[test]
    fn names_each_refused_recipient_and_channel_and_skips_what_the_notice_does_not_send() {
        let recipients = vec![
            Recipient::Address("admin@example.com".into()),
            Recipient::Address("stranger@elsewhere.test".into()),
            contact(
                "ops",
                Some("ops@acme.test"),
                Some("https://hooks.slack.com/services/T999/B/x"),
            ),
            // No address on either outbound channel: only its console inbox.
            Recipient::Address("user-1".into()),
        ];
        let refused = refused_recipients(
            &recipients,
            &channels(&["email", "slack", "console"]),
            &admins(),
            &allow(),
        );
        assert_eq!(
            refused,
            vec![
                RefusedRecipient {
                    field: "recipients[1]".into(),
                    recipient: "stranger@elsewhere.test".into(),
                    channel: "email".into(),
                },
                RefusedRecipient {
                    field: "recipients[2]".into(),
                    recipient: "ops".into(),
                    channel: "slack".into(),
                },
            ]
        );
        // On the console alone nothing leaves the platform.
        assert!(refused_recipients(&recipients, &channels(&["console"]), &[], &allow()).is_empty());
        // Email only: the Slack webhook is not used, so not checked.
        assert_eq!(
            refused_recipients(&recipients, &channels(&["email"]), &admins(), &allow()).len(),
            1
        );
    }

    #[test]
    fn counts_the_recipients_that_an_outbound_channel_would_reach() {
        let recipients = vec![
            Recipient::Address("a@acme.test".into()),
            Recipient::Address("user-1".into()),
            contact(
                "ops",
                None,
                Some("https://hooks.slack.com/services/T024/B/x"),
            ),
        ];
        assert_eq!(
            outbound_recipients(&recipients, &channels(&["email", "slack", "console"])),
            2
        );
        assert_eq!(outbound_recipients(&recipients, &channels(&["email"])), 1);
        assert_eq!(outbound_recipients(&recipients, &channels(&["console"])), 0);
    }

    #[test]
    fn retry_after_is_the_whole_seconds_until_the_next_utc_midnight() {
        let midnight = Timestamp::parse_rfc3339("2026-12-02T00:00:00Z").unwrap();
        assert_eq!(retry_after_secs(midnight), 86_400);
        assert_eq!(retry_after_secs(Timestamp(midnight.millis() - 1)), 1);
        assert_eq!(retry_after_secs(Timestamp(midnight.millis() - 1_000)), 1);
        assert_eq!(retry_after_secs(Timestamp(midnight.millis() - 1_001)), 2);
        let afternoon = Timestamp::parse_rfc3339("2026-12-01T13:30:00Z").unwrap();
        assert_eq!(retry_after_secs(afternoon), 10 * 3600 + 30 * 60);
    }
}
