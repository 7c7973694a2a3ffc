//! Amazon SNS message signatures (SES events reach us as SNS HTTPS notifications).
//!
//! A message is accepted only when:
//!
//! * `SignatureVersion` is `2` (RSA PKCS#1 v1.5 over SHA256): the topic is created to sign with
//!   it, so a version `1` (SHA1) message, however well signed, did not come from it;
//! * `SigningCertURL` is `https://sns.<region>.amazonaws.com/…pem` (or `.amazonaws.com.cn`), with
//!   no user info and no other port: nobody else's certificate is ever fetched;
//! * the certificate (fetched through an injectable [`SnsHttp`], cached per URL) is valid now and
//!   its RSA key verifies `Signature` over the canonical string: the fields `Message`,
//!   `MessageId`, `Subject` (notifications, when present), `SubscribeURL`, `Timestamp`, `Token`
//!   (confirmations), `TopicArn`, `Type`, each as `name\nvalue\n`, in that order.
//!
//! * its `Timestamp` is fresh: at most [`FRESHNESS`] old (longer than the subscription's delivery
//!   policy keeps retrying, about 40 minutes) and at most [`FUTURE_SKEW`] ahead (a replayed or
//!   forged-date message is refused), checked before any certificate is fetched.
//!
//! The topic must also be one the deployment expects, checked by the caller ([`super::confirm`])
//! before [`verify`], so that a foreign topic's message never makes us fetch a certificate: a
//! valid signature only proves that *some* SNS topic sent it.

use crate::domain::time::Timestamp;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rsa::pkcs8::DecodePublicKey;
use rsa::{Pkcs1v15Sign, RsaPublicKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use url::Url;
use x509_cert::der::{DecodePem, Encode};
use x509_cert::Certificate;

/// An SNS HTTP(S) message, as posted (`x-amz-sns-message-type` names its `Type`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnsMessage {
    #[serde(rename = "Type")]
    pub kind: String,
    #[serde(rename = "MessageId")]
    pub message_id: String,
    #[serde(rename = "TopicArn")]
    pub topic_arn: String,
    #[serde(rename = "Subject", default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(rename = "Message")]
    pub message: String,
    #[serde(rename = "Timestamp")]
    pub timestamp: String,
    #[serde(rename = "SignatureVersion")]
    pub signature_version: String,
    #[serde(rename = "Signature")]
    pub signature: String,
    #[serde(rename = "SigningCertURL")]
    pub signing_cert_url: String,
    #[serde(rename = "Token", default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(
        rename = "SubscribeURL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub subscribe_url: Option<String>,
    #[serde(
        rename = "UnsubscribeURL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub unsubscribe_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnsError {
    #[error("unsupported SignatureVersion {0:?}: only 2 (SHA256) is accepted")]
    SignatureVersion(String),
    #[error("unsupported SNS message type {0:?}")]
    MessageType(String),
    #[error("the {field} field is missing")]
    MissingField { field: &'static str },
    #[error("SigningCertURL refused: {0}")]
    CertificateUrl(String),
    #[error("the signing certificate could not be fetched: {0}")]
    Fetch(String),
    #[error("the signing certificate is unreadable: {0}")]
    Certificate(String),
    #[error("the signing certificate is not valid at {0}")]
    CertificateExpired(String),
    #[error("the signature is not base64")]
    SignatureEncoding,
    #[error("the signature does not verify")]
    SignatureMismatch,
    #[error("the subscription could not be confirmed: {0}")]
    Confirm(String),
    #[error("the Timestamp {0:?} is not RFC 3339")]
    Timestamp(String),
    #[error("the message is not fresh: Timestamp {0}")]
    Stale(String),
}

/// How old an SNS message may be.
pub(crate) const FRESHNESS: Duration = Duration::from_secs(60 * 60);
/// How far ahead of our clock an SNS message's Timestamp may be.
pub(crate) const FUTURE_SKEW: Duration = Duration::from_secs(5 * 60);

/// Refuses a message whose `Timestamp` is older than [`FRESHNESS`] or further than
/// [`FUTURE_SKEW`] in the future.
pub(crate) fn check_freshness(message: &SnsMessage, now: Timestamp) -> Result<(), SnsError> {
    let at = Timestamp::parse_rfc3339(&message.timestamp)
        .ok_or_else(|| SnsError::Timestamp(message.timestamp.clone()))?;
    let (oldest, newest) = (
        now.millis() - FRESHNESS.as_millis() as i64,
        now.millis() + FUTURE_SKEW.as_millis() as i64,
    );
    if at.millis() < oldest || at.millis() > newest {
        return Err(SnsError::Stale(message.timestamp.clone()));
    }
    Ok(())
}

/// Only AWS's SNS hosts: `sns.<region>.amazonaws.com` (or `.amazonaws.com.cn`).
pub(crate) fn is_sns_host(host: &str) -> bool {
    let rest = match host
        .strip_suffix(".amazonaws.com")
        .or_else(|| host.strip_suffix(".amazonaws.com.cn"))
    {
        Some(r) => r,
        None => return false,
    };
    match rest.strip_prefix("sns.") {
        Some(region) => {
            region.len() >= 3
                && region
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        }
        None => false,
    }
}

/// Checks an SNS URL (`SigningCertURL`, `SubscribeURL`): https, an SNS host, no user info, the
/// default port.
pub(crate) fn check_sns_url(text: &str) -> Result<Url, SnsError> {
    let url = Url::parse(text).map_err(|e| SnsError::CertificateUrl(format!("{text}: {e}")))?;
    if url.scheme() != "https" {
        return Err(SnsError::CertificateUrl(format!("{text}: not https")));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(SnsError::CertificateUrl(format!(
            "{text}: carries user info"
        )));
    }
    if url.port().is_some_and(|p| p != 443) {
        return Err(SnsError::CertificateUrl(format!("{text}: not port 443")));
    }
    match url.host_str() {
        Some(host) if is_sns_host(host) => Ok(url),
        _ => Err(SnsError::CertificateUrl(format!(
            "{text}: not an sns.<region>.amazonaws.com host"
        ))),
    }
}

/// Checks `SigningCertURL`: an SNS URL whose path is a `.pem` file.
pub(crate) fn check_certificate_url(text: &str) -> Result<Url, SnsError> {
    let url = check_sns_url(text)?;
    if !url.path().ends_with(".pem") {
        return Err(SnsError::CertificateUrl(format!("{text}: not a .pem path")));
    }
    Ok(url)
}

/// The string SNS signs.
pub(crate) fn canonical_string(m: &SnsMessage) -> Result<String, SnsError> {
    let mut out = String::new();
    let mut push = |name: &str, value: &str| {
        out.push_str(name);
        out.push('\n');
        out.push_str(value);
        out.push('\n');
    };
    match m.kind.as_str() {
        "Notification" => {
            push("Message", &m.message);
            push("MessageId", &m.message_id);
            if let Some(subject) = &m.subject {
                push("Subject", subject);
            }
            push("Timestamp", &m.timestamp);
            push("TopicArn", &m.topic_arn);
            push("Type", &m.kind);
        }
        "SubscriptionConfirmation" | "UnsubscribeConfirmation" => {
            push("Message", &m.message);
            push("MessageId", &m.message_id);
            push(
                "SubscribeURL",
                m.subscribe_url.as_deref().ok_or(SnsError::MissingField {
                    field: "SubscribeURL",
                })?,
            );
            push("Timestamp", &m.timestamp);
            push(
                "Token",
                m.token
                    .as_deref()
                    .ok_or(SnsError::MissingField { field: "Token" })?,
            );
            push("TopicArn", &m.topic_arn);
            push("Type", &m.kind);
        }
        other => return Err(SnsError::MessageType(other.to_string())),
    }
    Ok(out)
}

/// The two HTTP calls SNS verification needs, injectable so that tests (and the local demo) use a
/// locally generated certificate and no network.
#[async_trait::async_trait]
pub trait SnsHttp: Send + Sync {
    /// The PEM certificate at an already checked `SigningCertURL`.
    async fn certificate_pem(&self, url: &Url) -> Result<String, SnsError>;
    /// Visits an already checked `SubscribeURL` (confirming the subscription).
    async fn confirm_subscription(&self, url: &Url) -> Result<(), SnsError>;
}

/// The real thing: HTTPS GETs (no redirects, short timeouts), certificates cached per URL.
pub struct HttpsSns {
    client: reqwest::Client,
    cache: Mutex<HashMap<String, String>>,
}

impl Default for HttpsSns {
    fn default() -> Self {
        HttpsSns {
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .redirect(reqwest::redirect::Policy::none())
                .https_only(true)
                .build()
                .expect("the SNS client's settings are valid"),
            cache: Mutex::new(HashMap::new()),
        }
    }
}

#[async_trait::async_trait]
impl SnsHttp for HttpsSns {
    async fn certificate_pem(&self, url: &Url) -> Result<String, SnsError> {
        if let Some(pem) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(url.as_str())
        {
            return Ok(pem.clone());
        }
        let response = self
            .client
            .get(url.clone())
            .send()
            .await
            .map_err(|e| SnsError::Fetch(e.to_string()))?;
        if !response.status().is_success() {
            return Err(SnsError::Fetch(format!("HTTP {}", response.status())));
        }
        let pem = response
            .text()
            .await
            .map_err(|e| SnsError::Fetch(e.to_string()))?;
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(url.to_string(), pem.clone());
        Ok(pem)
    }

    async fn confirm_subscription(&self, url: &Url) -> Result<(), SnsError> {
        let response = self
            .client
            .get(url.clone())
            .send()
            .await
            .map_err(|e| SnsError::Confirm(e.to_string()))?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(SnsError::Confirm(format!("HTTP {}", response.status())))
        }
    }
}

/// Fixed certificates by URL, and a record of confirmations (tests, the local demo).
#[derive(Default)]
pub struct StaticSns {
    pub certificates: HashMap<String, String>,
    pub confirmed: Mutex<Vec<String>>,
    /// Every certificate URL asked for, in order.
    pub fetched: Mutex<Vec<String>>,
}

impl StaticSns {
    pub(crate) fn with_certificate(mut self, url: &str, pem: &str) -> Self {
        self.certificates.insert(url.to_string(), pem.to_string());
        self
    }
    pub fn confirmations(&self) -> Vec<String> {
        self.confirmed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[async_trait::async_trait]
impl SnsHttp for StaticSns {
    async fn certificate_pem(&self, url: &Url) -> Result<String, SnsError> {
        self.fetched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(url.to_string());
        self.certificates
            .get(url.as_str())
            .cloned()
            .ok_or_else(|| SnsError::Fetch(format!("no certificate at {url}")))
    }
    async fn confirm_subscription(&self, url: &Url) -> Result<(), SnsError> {
        self.confirmed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(url.to_string());
        Ok(())
    }
}

fn public_key(pem: &str, now: Timestamp) -> Result<RsaPublicKey, SnsError> {
    let cert =
        Certificate::from_pem(pem.as_bytes()).map_err(|e| SnsError::Certificate(e.to_string()))?;
    let validity = &cert.tbs_certificate.validity;
    let now_secs = Duration::from_millis(now.millis().max(0) as u64);
    if validity.not_before.to_unix_duration() > now_secs
        || validity.not_after.to_unix_duration() < now_secs
    {
        return Err(SnsError::CertificateExpired(now.to_rfc3339()));
    }
    let spki = cert
        .tbs_certificate
        .subject_public_key_info
        .to_der()
        .map_err(|e| SnsError::Certificate(e.to_string()))?;
    RsaPublicKey::from_public_key_der(&spki).map_err(|e| SnsError::Certificate(e.to_string()))
}

/// Verifies a message's signature and freshness (see the module docs). `now` is for the
/// freshness and the certificate's validity.
pub async fn verify(
    message: &SnsMessage,
    http: &dyn SnsHttp,
    now: Timestamp,
) -> Result<(), SnsError> {
    let version = message.signature_version.as_str();
    // Version 1 signs with SHA1; the topic signs with version 2 only (template.yaml).
    if version != "2" {
        return Err(SnsError::SignatureVersion(version.to_string()));
    }
    let canonical = canonical_string(message)?;
    check_freshness(message, now)?;
    let url = check_certificate_url(&message.signing_cert_url)?;
    let pem = http.certificate_pem(&url).await?;
    let key = public_key(&pem, now)?;
    let signature = STANDARD
        .decode(message.signature.trim())
        .map_err(|_| SnsError::SignatureEncoding)?;
    let verified = key.verify(
        Pkcs1v15Sign::new::<Sha256>(),
        &Sha256::digest(canonical.as_bytes()),
        &signature,
    );
    verified.map_err(|_| SnsError::SignatureMismatch)
}

/// Signing as SNS does, for the local harness: the demo and the tests post SES events "from SNS"
/// signed with a locally generated key whose certificate they hand to a [`StaticSns`].
pub mod local {
    use super::*;
    use rsa::pkcs8::DecodePrivateKey;
    use rsa::RsaPrivateKey;
    use sha1::Sha1;

    /// A locally generated 2048-bit test key (`testdata/`), never trusted outside the harness: it
    /// is only accepted where a [`StaticSns`] serves [`TEST_CERT_PEM`].
    pub const TEST_KEY_PEM: &str = include_str!("testdata/sns-local.key.pem");
    /// Its self-signed certificate (valid 2020–2120).
    pub(crate) const TEST_CERT_PEM: &str = include_str!("testdata/sns-local.cert.pem");
    /// The certificate URL the local harness signs with.
    pub(crate) const TEST_CERT_URL: &str =
        "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-local-test.pem";

    /// A [`StaticSns`] serving the test certificate at [`TEST_CERT_URL`].
    pub fn test_http() -> StaticSns {
        StaticSns::default().with_certificate(TEST_CERT_URL, TEST_CERT_PEM)
    }

    /// Sets `Signature` (and `SigningCertURL` to the test URL) for `message`'s
    /// `SignatureVersion`, with `key_pem` (PKCS#8).
    pub fn sign(message: &mut SnsMessage, key_pem: &str) -> Result<(), String> {
        let key = RsaPrivateKey::from_pkcs8_pem(key_pem).map_err(|e| e.to_string())?;
        message.signing_cert_url = TEST_CERT_URL.to_string();
        let canonical = canonical_string(message).map_err(|e| e.to_string())?;
        let signature = match message.signature_version.as_str() {
            "1" => key.sign(
                Pkcs1v15Sign::new::<Sha1>(),
                &Sha1::digest(canonical.as_bytes()),
            ),
            _ => key.sign(
                Pkcs1v15Sign::new::<Sha256>(),
                &Sha256::digest(canonical.as_bytes()),
            ),
        }
        .map_err(|e| e.to_string())?;
        message.signature = STANDARD.encode(signature);
        Ok(())
    }

    /// A signed SNS notification carrying `payload` from `topic_arn`, published `at`.
    pub fn notification(
        topic_arn: &str,
        message_id: &str,
        payload: &str,
        version: &str,
        at: Timestamp,
    ) -> SnsMessage {
        let mut m = SnsMessage {
            kind: "Notification".into(),
            message_id: message_id.into(),
            topic_arn: topic_arn.into(),
            subject: None,
            message: payload.into(),
            timestamp: at.to_rfc3339(),
            signature_version: version.into(),
            signature: String::new(),
            signing_cert_url: TEST_CERT_URL.into(),
            token: None,
            subscribe_url: None,
            unsubscribe_url: Some(format!(
                "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn={topic_arn}:x"
            )),
        };
        sign(&mut m, TEST_KEY_PEM).expect("the test key signs");
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        Timestamp::parse_rfc3339("2026-06-01T00:00:00Z").unwrap()
    }

    #[tokio::test]
    async fn accepts_signature_version_2_and_refuses_tampering() {
        let http = local::test_http();
        for version in ["2"] {
            let m = local::notification(
                "arn:aws:sns:us-east-1:1:ses",
                "m-1",
                "{\"a\":1}",
                version,
                now(),
            );
            verify(&m, &http, now()).await.unwrap();
            let mut tampered = m.clone();
            tampered.message = "{\"a\":2}".into();
            assert_eq!(
                verify(&tampered, &http, now()).await,
                Err(SnsError::SignatureMismatch)
            );
            let mut other_topic = m.clone();
            other_topic.topic_arn = "arn:aws:sns:us-east-1:2:evil".into();
            assert_eq!(
                verify(&other_topic, &http, now()).await,
                Err(SnsError::SignatureMismatch)
            );
        }
        let mut v3 = local::notification("arn:t", "m", "x", "2", now());
        v3.signature_version = "3".into();
        assert!(matches!(
            verify(&v3, &http, now()).await,
            Err(SnsError::SignatureVersion(_))
        ));
        let mut garbage = local::notification("arn:t", "m", "x", "2", now());
        garbage.signature = "not base64!".into();
        assert_eq!(
            verify(&garbage, &http, now()).await,
            Err(SnsError::SignatureEncoding)
        );
        let old = Timestamp::parse_rfc3339("2019-01-01T00:00:00Z").unwrap();
        assert!(matches!(
            verify(
                &local::notification("arn:t", "m", "x", "2", old),
                &http,
                old
            )
            .await,
            Err(SnsError::CertificateExpired(_))
        ));
    }

    /// The topic signs with version 2: a version 1 (SHA1) message is refused before any
    /// certificate is fetched, even when its signature is genuine.
    #[tokio::test]
    async fn a_genuinely_signed_signature_version_1_message_is_refused() {
        let v1 = local::notification("arn:aws:sns:us-east-1:1:ses", "m-1", "{}", "1", now());
        assert_eq!(
            verify(&v1, &StaticSns::default(), now()).await,
            Err(SnsError::SignatureVersion("1".into()))
        );
        assert_eq!(
            verify(&v1, &local::test_http(), now()).await,
            Err(SnsError::SignatureVersion("1".into()))
        );
    }

    #[tokio::test]
    async fn fetches_certificates_only_from_sns_hosts() {
        let http = local::test_http();
        for url in [
            "http://sns.us-east-1.amazonaws.com/c.pem",
            "https://sns.us-east-1.amazonaws.com.evil.example/c.pem",
            "https://evil.example/sns.us-east-1.amazonaws.com/c.pem",
            "https://user@sns.us-east-1.amazonaws.com/c.pem",
            "https://sns.us-east-1.amazonaws.com:8443/c.pem",
            "https://sns.us-east-1.amazonaws.com/c.txt",
            "https://s3.us-east-1.amazonaws.com/c.pem",
        ] {
            let mut m = local::notification("arn:t", "m", "x", "2", now());
            m.signing_cert_url = url.into();
            assert!(
                matches!(
                    verify(&m, &http, now()).await,
                    Err(SnsError::CertificateUrl(_))
                ),
                "{url}"
            );
        }
        assert!(check_certificate_url("https://sns.eu-west-1.amazonaws.com/x.pem").is_ok());
        assert!(check_certificate_url("https://sns.cn-north-1.amazonaws.com.cn/x.pem").is_ok());
    }

    #[tokio::test]
    async fn a_stale_or_future_sns_message_is_refused_before_any_certificate_is_fetched() {
        let http = local::test_http();
        let at = |offset_secs: i64| Timestamp(now().millis() + offset_secs * 1000);
        for offset in [-3601, -86_400, 301, 3600] {
            let m = local::notification("arn:t", "m", "x", "2", at(offset));
            assert!(
                matches!(verify(&m, &http, now()).await, Err(SnsError::Stale(_))),
                "{offset}"
            );
        }
        let mut garbled = local::notification("arn:t", "m", "x", "2", now());
        garbled.timestamp = "yesterday".into();
        assert!(matches!(
            verify(&garbled, &http, now()).await,
            Err(SnsError::Timestamp(_))
        ));
        assert!(
            http.fetched.lock().unwrap().is_empty(),
            "no certificate fetched"
        );
        for offset in [-3599, -60, 0, 299] {
            let m = local::notification("arn:t", "m", "x", "2", at(offset));
            verify(&m, &http, now()).await.unwrap();
        }
        assert_eq!(http.fetched.lock().unwrap().len(), 4);
    }

    #[test]
    fn canonical_strings_follow_the_documented_order() {
        let mut m = local::notification("arn:t", "id", "body", "1", now());
        m.subject = Some("subj".into());
        assert_eq!(
            canonical_string(&m).unwrap(),
            format!(
                "Message\nbody\nMessageId\nid\nSubject\nsubj\nTimestamp\n{}\nTopicArn\narn:t\nType\nNotification\n",
                m.timestamp
            )
        );
        m.kind = "SubscriptionConfirmation".into();
        assert_eq!(
            canonical_string(&m),
            Err(SnsError::MissingField {
                field: "SubscribeURL"
            })
        );
        m.subscribe_url =
            Some("https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription".into());
        m.token = Some("tok".into());
        let c = canonical_string(&m).unwrap();
        assert!(c.contains("SubscribeURL\nhttps://sns"));
        assert!(c.contains("Token\ntok\n"));
        assert!(!c.contains("Subject"));
        m.kind = "Other".into();
        assert!(matches!(
            canonical_string(&m),
            Err(SnsError::MessageType(_))
        ));
    }
}
