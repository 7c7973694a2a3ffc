//! A notice as the API receives it: its bounds, its validation, and the notice id and request
//! hash of its idempotency key.

use crate::domain::ssrf::TargetPolicy;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, NoticeId};
use crate::notify::channels::slack::check_slack_url;
use crate::notify::channels::Channel;
use crate::store::notice::Recipient;
use sha2::{Digest, Sha256};

pub use crate::notify::bounds::MAX_RECIPIENTS;

pub const MAX_SUBJECT_CHARS: usize = 200;
pub const MAX_BODY_CHARS: usize = 10_000;
pub const MAX_KEY_CHARS: usize = 200;

/// A notice as the API receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewNotice {
    pub recipients: Vec<Recipient>,
    pub channels: Vec<String>,
    pub subject: String,
    pub body: String,
    pub deadline: Option<Timestamp>,
    pub supersede_key: Option<String>,
    pub idempotency_key: String,
    /// Why the notice exists (`api` when not given).
    pub reason: Option<String>,
}

/// Every problem with a new notice, as `(field, message)`. Slack webhook URLs are checked as the
/// Slack adapter will check them under `policy` (the deployment's target policy).
pub fn validate(
    notice: &NewNotice,
    now: Timestamp,
    policy: &TargetPolicy,
) -> Vec<(String, String)> {
    let mut errors = Vec::new();
    recipient_errors(&notice.recipients, policy, &mut errors);
    channel_errors(&notice.channels, &mut errors);
    text_errors(notice, &mut errors);
    if let Some(deadline) = notice.deadline {
        if deadline <= now {
            errors.push(("deadline".into(), "must be in the future".into()));
        }
    }
    for (field, value) in [
        ("supersede_key", notice.supersede_key.as_deref()),
        ("idempotency_key", Some(notice.idempotency_key.as_str())),
    ] {
        if let Some(v) = value {
            if v.is_empty() || v.chars().count() > MAX_KEY_CHARS || v.chars().any(char::is_control)
            {
                errors.push((
                    field.into(),
                    format!("must be 1 to {MAX_KEY_CHARS} characters"),
                ));
            }
        }
    }
    errors
}

/// The recipients: how many, and each one's identity and contact addresses.
fn recipient_errors(
    recipients: &[Recipient],
    policy: &TargetPolicy,
    errors: &mut Vec<(String, String)>,
) {
    let mut err = |f: String, m: String| errors.push((f, m));
    if recipients.is_empty() {
        err(
            "recipients".into(),
            "must name at least one recipient".into(),
        );
    }
    if recipients.len() > MAX_RECIPIENTS {
        err(
            "recipients".into(),
            format!("at most {MAX_RECIPIENTS} recipients are accepted"),
        );
    }
    for (i, r) in recipients.iter().enumerate() {
        let id = r.id();
        if id.trim().is_empty() || id.chars().count() > 320 || id.chars().any(char::is_control) {
            err(
                format!("recipients[{i}]"),
                "must be a non-empty identity of at most 320 characters".into(),
            );
        }
        if let Recipient::Contact(c) = r {
            if let Some(email) = &c.email {
                if !crate::notify::channels::email::plausible_address(email) {
                    err(
                        format!("recipients[{i}].email"),
                        "must be an email address".into(),
                    );
                }
            }
            if let Some(url) = &c.slack_webhook_url {
                if let Err(message) = check_slack_url(url, policy) {
                    err(format!("recipients[{i}].slack_webhook_url"), message);
                }
            }
        }
    }
}

/// The channels: at least one, each a known one.
fn channel_errors(channels: &[String], errors: &mut Vec<(String, String)>) {
    if channels.is_empty() {
        errors.push(("channels".into(), "must name at least one channel".into()));
    }
    for (i, c) in channels.iter().enumerate() {
        if Channel::parse(c).is_none() {
            errors.push((
                format!("channels[{i}]"),
                format!("unknown channel {c:?}; one of email, slack, console"),
            ));
        }
    }
}

/// The subject (one line) and the body, within their lengths.
fn text_errors(notice: &NewNotice, errors: &mut Vec<(String, String)>) {
    if notice.subject.trim().is_empty() || notice.subject.chars().count() > MAX_SUBJECT_CHARS {
        errors.push((
            "subject".into(),
            format!("must be 1 to {MAX_SUBJECT_CHARS} characters"),
        ));
    } else if notice.subject.chars().any(char::is_control) {
        // A subject is one line: an email's Subject header, a Slack message's bold first line.
        errors.push((
            "subject".into(),
            "must not contain control characters (line breaks, tabs, …)".into(),
        ));
    }
    if notice.body.trim().is_empty() || notice.body.chars().count() > MAX_BODY_CHARS {
        errors.push((
            "body".into(),
            format!("must be 1 to {MAX_BODY_CHARS} characters"),
        ));
    }
}

/// The notice id of an account's idempotency key.
pub fn notice_id_for(account_id: &AccountId, idempotency_key: &str) -> NoticeId {
    let digest = Sha256::digest(format!("{account_id}\n{idempotency_key}").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    NoticeId::from_stored(format!("ntc_{}", &hex[..26]))
}

pub(super) fn request_hash(n: &NewNotice) -> String {
    let canonical = serde_json::json!({
        "recipients": n.recipients,
        "channels": n.channels,
        "subject": n.subject,
        "body": n.body,
        "deadline": n.deadline,
        "supersede_key": n.supersede_key,
        "reason": n.reason,
    });
    let digest = Sha256::digest(canonical.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A valid notice to three recipients over email, Slack and the console, for the unit tests.
#[cfg(test)]
pub(super) fn test_notice() -> NewNotice {
    NewNotice {
        recipients: vec![
            Recipient::Address("ops@example.com".into()),
            Recipient::Contact(crate::store::notice::Contact {
                id: "team".into(),
                email: None,
                slack_webhook_url: Some("https://hooks.slack.com/services/T/B/x".into()),
            }),
        ],
        channels: vec!["email".into(), "slack".into(), "console".into()],
        subject: "Subject".into(),
        body: "Body".into(),
        deadline: None,
        supersede_key: None,
        idempotency_key: "k1".into(),
        reason: None,
    }
}

#[cfg(test)]
mod tests {
    use super::test_notice as new_notice;
    use super::*;
    use crate::ids::id;

    #[test]
    fn validation_names_every_bad_field() {
        let now = Timestamp(1_000);
        assert!(validate(&new_notice(), now, &TargetPolicy::PRODUCTION).is_empty());
        let bad = NewNotice {
            recipients: vec![],
            channels: vec!["pigeon".into()],
            subject: " ".into(),
            body: String::new(),
            deadline: Some(now),
            supersede_key: Some(String::new()),
            idempotency_key: String::new(),
            reason: None,
        };
        let fields: Vec<String> = validate(&bad, now, &TargetPolicy::PRODUCTION)
            .into_iter()
            .map(|(f, _)| f)
            .collect();
        assert_eq!(
            fields,
            [
                "recipients",
                "channels[0]",
                "subject",
                "body",
                "deadline",
                "supersede_key",
                "idempotency_key"
            ]
        );
    }

    #[test]
    fn a_subject_with_a_control_character_is_refused() {
        let now = Timestamp(1_000);
        for subject in [
            "Deploy\r\nBcc: all@example.com",
            "tab\there",
            "bell\u{7}",
            "nel\u{85}x",
        ] {
            let mut n = new_notice();
            n.subject = subject.into();
            let refused = validate(&n, now, &TargetPolicy::PRODUCTION);
            assert_eq!(refused.len(), 1, "{subject:?}: {refused:?}");
            assert_eq!(refused[0].0, "subject");
            assert!(refused[0].1.contains("control characters"));
        }
        let mut fine = new_notice();
        fine.subject = "Déploiement terminé — 100 %".into();
        assert!(validate(&fine, now, &TargetPolicy::PRODUCTION).is_empty());
    }

    #[test]
    fn idempotency_keys_are_per_account() {
        assert_eq!(notice_id_for(&id("a"), "k"), notice_id_for(&id("a"), "k"));
        assert_ne!(notice_id_for(&id("a"), "k"), notice_id_for(&id("b"), "k"));
        assert!(notice_id_for(&id("a"), "k").as_str().starts_with("ntc_"));
        assert_eq!(notice_id_for(&id("a"), "k").as_str().len(), 30);
        let mut other = new_notice();
        assert_eq!(request_hash(&other), request_hash(&new_notice()));
        other.subject = "Other".into();
        assert_ne!(request_hash(&other), request_hash(&new_notice()));
    }
}
