//! Provider confirmations: events from a channel's provider about a sent delivery.
//!
//! Two ways in (routes in `api/v1/provider_events.rs`):
//!
//! * **SES through SNS** (`POST /v1/provider-events/ses`): an SNS HTTPS message whose signature
//!   verifies ([`super::sns`]) and whose topic is one of the configured ones; a subscription
//!   confirmation is confirmed, a notification carries an SES event (event publishing's
//!   `eventType` or the older `notificationType`). The event id is the SNS `MessageId`.
//! * **A generic signed form** (`POST /v1/provider-events/{provider}`), for other providers:
//!   `{"provider_ref", "type": "delivered" | "bounced" | "complained" | "delayed" | …, "at"?,
//!   "detail"?, "bounce_type"?}` signed as Standard Webhooks with the provider's secret; the event
//!   id is the `webhook-id` header.
//!
//! Applying an event: the provider reference (saved with `sent`) names the delivery; an event id
//! already in its history is a duplicate and changes nothing; a delivery confirmation moves
//! `sent → delivered` (conditionally: the lifecycle's condition and the version); a bounce is
//! recorded (history and `bounce`) without a status change, as the module docs of
//! [`crate::notify`] explain; anything else is recorded in the history. The history keeps at most
//! fifty events. A confirmation for a delivery not yet `sent` (possible only if it raced our own
//! write) is answered "retry later", so SNS delivers it again.

use super::sns::{self, SnsError, SnsHttp, SnsMessage};
use super::table::NotificationTable;
use super::NotifyError;
use crate::domain::notification_delivery::{NotificationStatus as N, NotificationTrigger as NT};
use crate::domain::signing::{self, SigningSecret, DEFAULT_TOLERANCE};
use crate::domain::time::Timestamp;
use crate::store::notification_delivery::{BounceRecord, Effects, NotificationDelivery};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// Writes of one event retried when a concurrent write moved the delivery's version.
const APPLY_TRIES: usize = 5;
/// The environment variable listing accepted SNS topic ARNs (comma-separated).
pub const TOPICS_VAR: &str = "SES_EVENTS_TOPIC_ARN";
/// The environment variable with the generic providers' secrets: `name=whsec_…,other=whsec_…`.
pub const SECRETS_VAR: &str = "NOTIFICATION_PROVIDER_SECRETS";
/// The environment variable naming the Secrets Manager secret that holds the providers' secrets
/// (in AWS; [`SECRETS_VAR`] is then not read).
pub const SECRETS_ARN_VAR: &str = "NOTIFICATION_PROVIDER_SECRETS_ARN";
/// The provider name SES events are recorded under (the email adapter's).
pub const SES: &str = "ses";

/// What an event says happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderEventKind {
    Delivered,
    Bounced { bounce_type: String },
    Complained,
    Delayed,
    Other(String),
}

impl ProviderEventKind {
    pub fn label(&self) -> &str {
        match self {
            ProviderEventKind::Delivered => "delivered",
            ProviderEventKind::Bounced { .. } => "bounced",
            ProviderEventKind::Complained => "complained",
            ProviderEventKind::Delayed => "delayed",
            ProviderEventKind::Other(kind) => kind,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderEvent {
    pub provider: String,
    /// The provider's event id: the dedupe key.
    pub event_id: String,
    /// The provider's reference of the message (saved when the delivery became `sent`).
    pub provider_ref: String,
    pub kind: ProviderEventKind,
    pub at: Timestamp,
    pub detail: Option<String>,
}

/// What applying an event did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfirmOutcome {
    /// `sent → delivered`.
    Delivered,
    /// Appended to the history (no status change).
    Recorded,
    /// The event id is already in the history.
    Duplicate,
    /// No delivery has this provider reference (not ours, or not yet saved).
    UnknownReference,
    /// The delivery is not `sent` yet: ask the provider to retry later.
    NotYetSent,
}

impl ConfirmOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            ConfirmOutcome::Delivered => "delivered",
            ConfirmOutcome::Recorded => "recorded",
            ConfirmOutcome::Duplicate => "duplicate",
            ConfirmOutcome::UnknownReference => "unknown_reference",
            ConfirmOutcome::NotYetSent => "not_yet_sent",
        }
    }
}

/// Applies one provider event (see the module docs).
pub async fn apply(
    store: &NotificationTable,
    event: &ProviderEvent,
    now: Timestamp,
) -> Result<ConfirmOutcome, NotifyError> {
    let Some(reference) = store
        .provider_ref(&event.provider, &event.provider_ref)
        .await?
    else {
        return Ok(ConfirmOutcome::UnknownReference);
    };
    let history_id = format!("{}:{}", event.provider, event.event_id);
    for _ in 0..APPLY_TRIES {
        let Some(current) = store
            .delivery(&reference.notice_id, &reference.delivery_key)
            .await?
        else {
            return Ok(ConfirmOutcome::UnknownReference);
        };
        if current.has_event(&history_id) {
            return Ok(ConfirmOutcome::Duplicate);
        }
        let mut next = current.clone();
        next.updated_at = now;
        let detail = event.detail.clone().or_else(|| match &event.kind {
            ProviderEventKind::Bounced { bounce_type } => Some(bounce_type.clone()),
            _ => None,
        });
        let kept = next.push_history_detail(&history_id, event.kind.label(), event.at, detail);
        let confirms = event.kind == ProviderEventKind::Delivered && current.status == N::Sent;
        if !kept && !confirms {
            // Older than every retained event of a full history, and it changes nothing else:
            // the retained window already covers it.
            return Ok(ConfirmOutcome::Duplicate);
        }
        let written = match (&event.kind, current.status) {
            (ProviderEventKind::Delivered, N::Sent) => {
                next.status = N::Delivered;
                next.delivered_at = Some(event.at);
                store
                    .transition(&current, next, NT::Confirm, Effects::none())
                    .await?
                    .map(|_| ConfirmOutcome::Delivered)
            }
            (ProviderEventKind::Delivered, N::Queued | N::Sending) => {
                return Ok(ConfirmOutcome::NotYetSent)
            }
            (kind, _) => {
                if let ProviderEventKind::Bounced { bounce_type } = kind {
                    next.bounce = Some(BounceRecord {
                        bounce_type: bounce_type.clone(),
                        at: event.at,
                    });
                }
                store
                    .record(&current, next)
                    .await?
                    .map(|_| ConfirmOutcome::Recorded)
            }
        };
        if let Some(outcome) = written {
            return Ok(outcome);
        }
        // The delivery moved meanwhile: read it again and decide again.
    }
    Err(NotifyError::Store(crate::store::StoreError::Dynamo(
        "the provider event kept losing to concurrent writes".into(),
    )))
}

/// Reads the SES event an SNS notification carries. `None` for a message that is not an SES
/// event about a message (nothing to record).
pub(crate) fn ses_event(message: &SnsMessage) -> Option<ProviderEvent> {
    let payload: Value = serde_json::from_str(&message.message).ok()?;
    let kind_text = payload
        .get("eventType")
        .or_else(|| payload.get("notificationType"))
        .and_then(Value::as_str)?;
    let provider_ref = payload
        .pointer("/mail/messageId")
        .and_then(Value::as_str)?
        .to_string();
    let section = |name: &str| payload.get(name).cloned().unwrap_or(Value::Null);
    let (kind, section_value) = match kind_text {
        "Delivery" => (ProviderEventKind::Delivered, section("delivery")),
        "Bounce" => {
            let bounce = section("bounce");
            let bounce_type = bounce
                .get("bounceType")
                .and_then(Value::as_str)
                .unwrap_or("Undetermined")
                .to_string();
            (ProviderEventKind::Bounced { bounce_type }, bounce)
        }
        "Complaint" => (ProviderEventKind::Complained, section("complaint")),
        "DeliveryDelay" => (ProviderEventKind::Delayed, section("deliveryDelay")),
        other => (
            ProviderEventKind::Other(other.to_ascii_lowercase()),
            Value::Null,
        ),
    };
    let at = section_value
        .get("timestamp")
        .and_then(Value::as_str)
        .and_then(Timestamp::parse_rfc3339)
        .or_else(|| Timestamp::parse_rfc3339(&message.timestamp))
        .or_else(|| {
            payload
                .pointer("/mail/timestamp")
                .and_then(Value::as_str)
                .and_then(Timestamp::parse_rfc3339)
        })
        .unwrap_or_default();
    let detail = match &kind {
        ProviderEventKind::Bounced { .. } => section_value
            .get("bouncedRecipients")
            .and_then(|r| r.get(0))
            .and_then(|r| r.get("diagnosticCode"))
            .and_then(Value::as_str)
            .map(|d| d.chars().take(300).collect()),
        ProviderEventKind::Delivered => section_value
            .get("smtpResponse")
            .and_then(Value::as_str)
            .map(|d| d.chars().take(300).collect()),
        _ => None,
    };
    Some(ProviderEvent {
        provider: SES.to_string(),
        event_id: message.message_id.clone(),
        provider_ref,
        kind,
        at,
        detail,
    })
}

// ----------------------------------------------------------------------------- settings

/// How provider events are authenticated. One per process: [`settings`] reads it from the
/// environment on first use, unless [`install`] put one in place first (tests, the local demo).
pub struct ProviderEventSettings {
    /// SNS topics whose messages are accepted. Empty: none (fail closed).
    pub sns_topic_arns: Vec<String>,
    /// Generic providers' Standard Webhooks secrets (several during rotation).
    pub secrets: HashMap<String, Vec<SigningSecret>>,
    pub sns_http: Arc<dyn SnsHttp>,
}

impl ProviderEventSettings {
    /// `SES_EVENTS_TOPIC_ARN` (comma-separated), `NOTIFICATION_PROVIDER_SECRETS`
    /// (`name=whsec_…` pairs, comma-separated; a name may repeat during rotation), real HTTPS.
    pub fn from_env() -> Self {
        Self::from_values(
            std::env::var(TOPICS_VAR).ok().as_deref(),
            std::env::var(SECRETS_VAR).ok().as_deref(),
            Arc::new(sns::HttpsSns::default()),
        )
    }

    /// In AWS: the topics from `SES_EVENTS_TOPIC_ARN` and the providers' secrets from the
    /// Secrets Manager secret `NOTIFICATION_PROVIDER_SECRETS_ARN` names, read once (call this
    /// once per container). Without that ARN (local, dev): [`Self::from_env`].
    pub async fn load(
        secrets_manager: &aws_sdk_secretsmanager::Client,
        lookup: impl Fn(&str) -> Option<String>,
        sns_http: Arc<dyn SnsHttp>,
    ) -> Result<Self, String> {
        let topics = lookup(TOPICS_VAR);
        let Some(arn) = lookup(SECRETS_ARN_VAR).filter(|a| !a.is_empty()) else {
            return Ok(Self::from_values(
                topics.as_deref(),
                lookup(SECRETS_VAR).as_deref(),
                sns_http,
            ));
        };
        let text = crate::aws::secret_string(secrets_manager, &arn, "the provider secrets").await?;
        let secrets = parse_secret_json(&text).map_err(|e| format!("{arn}: {e}"))?;
        Ok(Self::from_parts(topics.as_deref(), secrets, sns_http))
    }

    pub fn from_values(
        topics: Option<&str>,
        secrets: Option<&str>,
        sns_http: Arc<dyn SnsHttp>,
    ) -> Self {
        let mut map: HashMap<String, Vec<SigningSecret>> = HashMap::new();
        for pair in secrets.unwrap_or_default().split(',') {
            let Some((name, secret)) = pair.trim().split_once('=') else {
                continue;
            };
            match SigningSecret::parse(secret.trim()) {
                Ok(s) => map.entry(name.trim().to_string()).or_default().push(s),
                Err(e) => {
                    tracing::error!(provider = name.trim(), error = %e, "ignoring an unreadable provider secret")
                }
            }
        }
        Self::from_parts(topics, map, sns_http)
    }

    fn from_parts(
        topics: Option<&str>,
        secrets: HashMap<String, Vec<SigningSecret>>,
        sns_http: Arc<dyn SnsHttp>,
    ) -> Self {
        let sns_topic_arns = topics
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect();
        ProviderEventSettings {
            sns_topic_arns,
            secrets,
            sns_http,
        }
    }
}

/// The secret's value: a JSON object `{"<provider>": "whsec_…"}` (a list of secrets during
/// rotation); `{}` means none. Anything else is refused as a whole (a typo must not silently
/// drop a provider).
pub(crate) fn parse_secret_json(text: &str) -> Result<HashMap<String, Vec<SigningSecret>>, String> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    let map: HashMap<String, OneOrMany> = serde_json::from_str(text).map_err(|_| {
        "the value is not a JSON object of provider names to whsec_ secrets".to_string()
    })?;
    let mut out = HashMap::new();
    for (provider, secrets) in map {
        let list = match secrets {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        };
        let parsed = list
            .iter()
            .map(|s| SigningSecret::parse(s.trim()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("the secret of provider {provider:?} is unreadable: {e}"))?;
        out.insert(provider, parsed);
    }
    Ok(out)
}

static SETTINGS: OnceLock<ProviderEventSettings> = OnceLock::new();

/// Puts `settings` in place for this process. `false` when settings were already in place (the
/// first ones stay).
pub fn install(settings: ProviderEventSettings) -> bool {
    SETTINGS.set(settings).is_ok()
}

/// This process's settings (from the environment unless [`install`]ed first).
pub fn settings() -> &'static ProviderEventSettings {
    SETTINGS.get_or_init(ProviderEventSettings::from_env)
}

// ------------------------------------------------------------------------------ intake

/// Why a provider event was refused.
#[derive(Debug, thiserror::Error)]
pub enum IntakeError {
    #[error("the body is not an SNS message: {0}")]
    Malformed(String),
    #[error("the SNS signature was refused: {0}")]
    Signature(#[from] SnsError),
    #[error("topic {0} is not one this deployment subscribes to")]
    ForeignTopic(String),
    #[error("unknown provider {0}")]
    UnknownProvider(String),
    #[error("the webhook signature was refused: {0}")]
    Webhook(#[from] signing::VerifyError),
    #[error("missing header {0}")]
    MissingHeader(&'static str),
    #[error("the event is invalid: {0}")]
    InvalidEvent(String),
    #[error(transparent)]
    Fault(#[from] NotifyError),
}

/// What an intake did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IntakeOutcome {
    /// A subscription (or unsubscribe) confirmation was handled.
    SubscriptionConfirmed,
    /// The message carried no event about a message.
    Ignored,
    Applied(ConfirmOutcome),
}

/// An SNS message posted to the SES route.
pub async fn intake_sns(
    store: &NotificationTable,
    settings: &ProviderEventSettings,
    body: &[u8],
    now: Timestamp,
) -> Result<IntakeOutcome, IntakeError> {
    let message: SnsMessage =
        serde_json::from_slice(body).map_err(|e| IntakeError::Malformed(e.to_string()))?;
    // The topic first: a foreign topic's message never makes us fetch a certificate.
    if !settings.sns_topic_arns.contains(&message.topic_arn) {
        return Err(IntakeError::ForeignTopic(message.topic_arn));
    }
    sns::verify(&message, settings.sns_http.as_ref(), now).await?;
    match message.kind.as_str() {
        "SubscriptionConfirmation" => {
            let url = sns::check_sns_url(message.subscribe_url.as_deref().unwrap_or_default())?;
            settings.sns_http.confirm_subscription(&url).await?;
            tracing::info!(topic = %message.topic_arn, "SNS subscription confirmed");
            Ok(IntakeOutcome::SubscriptionConfirmed)
        }
        "UnsubscribeConfirmation" => {
            tracing::warn!(topic = %message.topic_arn, "SNS unsubscribed this endpoint");
            Ok(IntakeOutcome::SubscriptionConfirmed)
        }
        _ => match ses_event(&message) {
            Some(event) => Ok(IntakeOutcome::Applied(apply(store, &event, now).await?)),
            None => Ok(IntakeOutcome::Ignored),
        },
    }
}

/// The generic signed form's body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SignedEventBody {
    pub provider_ref: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub at: Option<String>,
    #[serde(default)]
    pub detail: Option<String>,
    #[serde(default)]
    pub bounce_type: Option<String>,
}

/// A Standard-Webhooks-signed event posted by `provider`.
pub async fn intake_signed(
    store: &NotificationTable,
    settings: &ProviderEventSettings,
    provider: &str,
    header: impl Fn(&str) -> Option<String>,
    body: &[u8],
    now: Timestamp,
) -> Result<IntakeOutcome, IntakeError> {
    let secrets = settings
        .secrets
        .get(provider)
        .ok_or_else(|| IntakeError::UnknownProvider(provider.to_string()))?;
    let id = header(signing::HEADER_ID).ok_or(IntakeError::MissingHeader(signing::HEADER_ID))?;
    let timestamp = header(signing::HEADER_TIMESTAMP)
        .ok_or(IntakeError::MissingHeader(signing::HEADER_TIMESTAMP))?;
    let signature = header(signing::HEADER_SIGNATURE)
        .ok_or(IntakeError::MissingHeader(signing::HEADER_SIGNATURE))?;
    let mut last = signing::VerifyError::NoSignature;
    let mut verified = false;
    for secret in secrets {
        match signing::verify(
            secret,
            &id,
            &timestamp,
            &signature,
            body,
            now,
            DEFAULT_TOLERANCE,
        ) {
            Ok(()) => {
                verified = true;
                break;
            }
            Err(e) => last = e,
        }
    }
    if !verified {
        return Err(IntakeError::Webhook(last));
    }
    let parsed: SignedEventBody =
        serde_json::from_slice(body).map_err(|e| IntakeError::InvalidEvent(e.to_string()))?;
    if parsed.provider_ref.is_empty() {
        return Err(IntakeError::InvalidEvent("provider_ref is empty".into()));
    }
    let kind = match parsed.kind.as_str() {
        "delivered" => ProviderEventKind::Delivered,
        "bounced" => ProviderEventKind::Bounced {
            bounce_type: parsed.bounce_type.unwrap_or_else(|| "Undetermined".into()),
        },
        "complained" => ProviderEventKind::Complained,
        "delayed" => ProviderEventKind::Delayed,
        other if !other.is_empty() && other.len() <= 64 => {
            ProviderEventKind::Other(other.to_string())
        }
        _ => {
            return Err(IntakeError::InvalidEvent(
                "type is empty or too long".into(),
            ))
        }
    };
    let at = match parsed.at.as_deref() {
        Some(text) => Timestamp::parse_rfc3339(text)
            .ok_or_else(|| IntakeError::InvalidEvent(format!("at {text:?} is not RFC 3339")))?,
        None => now,
    };
    let event = ProviderEvent {
        provider: provider.to_string(),
        event_id: id,
        provider_ref: parsed.provider_ref,
        kind,
        at,
        detail: parsed.detail.map(|d| d.chars().take(300).collect()),
    };
    Ok(IntakeOutcome::Applied(apply(store, &event, now).await?))
}

/// The delivery a provider reference names (for tests and operators).
pub async fn delivery_of(
    store: &NotificationTable,
    provider: &str,
    provider_ref: &str,
) -> Result<Option<NotificationDelivery>, NotifyError> {
    match store.provider_ref(provider, provider_ref).await? {
        Some(r) => Ok(store.delivery(&r.notice_id, &r.delivery_key).await?),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sns_with(payload: Value) -> SnsMessage {
        sns::local::notification(
            "arn:aws:sns:us-east-1:1:ses",
            "sns-1",
            &payload.to_string(),
            "2",
            Timestamp(0),
        )
    }

    #[test]
    fn reads_ses_event_publishing_and_notifications() {
        let delivery = sns_with(serde_json::json!({
            "eventType": "Delivery",
            "mail": {"messageId": "ses-1", "timestamp": "2026-01-01T00:00:00.000Z"},
            "delivery": {"timestamp": "2026-01-01T00:00:05.000Z", "smtpResponse": "250 ok"}
        }));
        let e = ses_event(&delivery).unwrap();
        assert_eq!(e.kind, ProviderEventKind::Delivered);
        assert_eq!(e.provider_ref, "ses-1");
        assert_eq!(e.event_id, "sns-1");
        assert_eq!(
            e.at,
            Timestamp::parse_rfc3339("2026-01-01T00:00:05Z").unwrap()
        );
        assert_eq!(e.detail.as_deref(), Some("250 ok"));

        let bounce = sns_with(serde_json::json!({
            "notificationType": "Bounce",
            "mail": {"messageId": "ses-2"},
            "bounce": {"bounceType": "Permanent", "bouncedRecipients": [{"diagnosticCode": "550 no such user"}]}
        }));
        let e = ses_event(&bounce).unwrap();
        assert_eq!(
            e.kind,
            ProviderEventKind::Bounced {
                bounce_type: "Permanent".into()
            }
        );
        assert_eq!(e.detail.as_deref(), Some("550 no such user"));

        let open = sns_with(serde_json::json!({"eventType": "Open", "mail": {"messageId": "m"}}));
        assert_eq!(
            ses_event(&open).unwrap().kind,
            ProviderEventKind::Other("open".into())
        );
        assert!(ses_event(&sns_with(serde_json::json!({"hello": 1}))).is_none());
    }

    #[test]
    fn the_secret_manager_value_is_a_json_object_of_provider_secrets() {
        let a = SigningSecret::from_bytes(&[1u8; 32])
            .unwrap()
            .expose_whsec();
        let b = SigningSecret::from_bytes(&[2u8; 32])
            .unwrap()
            .expose_whsec();
        assert!(parse_secret_json("{}").unwrap().is_empty());
        let map =
            parse_secret_json(&format!(r#"{{"acme": "{a}", "zeta": ["{a}", "{b}"]}}"#)).unwrap();
        assert_eq!(map["acme"].len(), 1);
        assert_eq!(map["zeta"].len(), 2);
        for bad in [
            "",
            "[]",
            r#"{"acme": 1}"#,
            r#"{"acme": "not-a-secret"}"#,
            "acme=whsec_x",
        ] {
            assert!(parse_secret_json(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn settings_read_topics_and_secrets() {
        let secret = SigningSecret::from_bytes(&[7u8; 32])
            .unwrap()
            .expose_whsec();
        let s = ProviderEventSettings::from_values(
            Some("arn:a, arn:b,"),
            Some(&format!("postmark={secret}, bad=nope")),
            Arc::new(sns::StaticSns::default()),
        );
        assert_eq!(s.sns_topic_arns, ["arn:a", "arn:b"]);
        assert_eq!(s.secrets.len(), 1);
        assert_eq!(s.secrets["postmark"].len(), 1);
        let none =
            ProviderEventSettings::from_values(None, None, Arc::new(sns::StaticSns::default()));
        assert!(
            none.sns_topic_arns.is_empty(),
            "no topic configured: nothing accepted"
        );
    }
}
