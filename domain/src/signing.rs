//! Webhook signatures in the [Standard Webhooks](https://www.standardwebhooks.com) format.
//!
//! * A secret is `whsec_` followed by the base64 of 24 to 64 random bytes (the spec's bounds).
//! * The signed content is `{webhook-id}.{webhook-timestamp}.{body}`, the timestamp in whole
//!   seconds since the epoch.
//! * The `webhook-signature` header is `v1,<base64(HMAC-SHA256(secret, content))>`; during secret
//!   rotation it carries several such entries separated by spaces and a receiver accepts the
//!   message when any entry verifies.
//! * Receivers refuse timestamps further than a tolerance (default five minutes) from their clock,
//!   in either direction, which bounds replay.
//!
//! The caller supplies randomness (to generate a secret) and the time; nothing here reads either.

use crate::time::Timestamp;
use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;
use std::time::Duration;
use thiserror::Error;

type HmacSha256 = Hmac<Sha256>;

/// The prefix of a Standard Webhooks secret.
pub const SECRET_PREFIX: &str = "whsec_";
/// Fewest secret bytes accepted.
pub const MIN_SECRET_BYTES: usize = 24;
/// Most secret bytes accepted.
pub const MAX_SECRET_BYTES: usize = 64;
/// The default tolerance between the webhook timestamp and the receiver's clock.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(5 * 60);

/// Header names.
pub const HEADER_ID: &str = "webhook-id";
pub const HEADER_TIMESTAMP: &str = "webhook-timestamp";
pub const HEADER_SIGNATURE: &str = "webhook-signature";

/// Decodes base64 with or without padding.
const LENIENT_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// A webhook signing secret. Its `Debug` output is redacted; the secret text leaves only through
/// [`SigningSecret::expose_whsec`].
#[derive(Clone, PartialEq, Eq)]
pub struct SigningSecret {
    key: Vec<u8>,
}

/// Why a secret is not acceptable. Messages never contain the secret.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SecretError {
    #[error("a signing secret must start with \"{SECRET_PREFIX}\"")]
    MissingPrefix,
    #[error("the signing secret after \"{SECRET_PREFIX}\" is not valid base64")]
    InvalidBase64,
    #[error("a signing secret must hold {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes; this one holds {0}")]
    BadLength(usize),
}

impl SigningSecret {
    /// Parses `whsec_<base64>`.
    pub fn parse(text: &str) -> Result<Self, SecretError> {
        let encoded = text
            .trim()
            .strip_prefix(SECRET_PREFIX)
            .ok_or(SecretError::MissingPrefix)?;
        let key = LENIENT_BASE64
            .decode(encoded)
            .map_err(|_| SecretError::InvalidBase64)?;
        Self::from_bytes(&key)
    }

    /// A secret from random bytes the caller drew (24 to 64 of them; 32 is a good choice).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SecretError> {
        if !(MIN_SECRET_BYTES..=MAX_SECRET_BYTES).contains(&bytes.len()) {
            return Err(SecretError::BadLength(bytes.len()));
        }
        Ok(SigningSecret {
            key: bytes.to_vec(),
        })
    }

    /// The `whsec_…` text, for storing the secret and for showing it to its owner once.
    pub fn expose_whsec(&self) -> String {
        format!("{SECRET_PREFIX}{}", STANDARD.encode(&self.key))
    }

    fn mac(&self) -> HmacSha256 {
        HmacSha256::new_from_slice(&self.key).expect("HMAC accepts keys of any length")
    }
}

impl fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SigningSecret({SECRET_PREFIX}<redacted {} bytes>)",
            self.key.len()
        )
    }
}

fn signed_mac(
    secret: &SigningSecret,
    msg_id: &str,
    timestamp_secs: i64,
    body: &[u8],
) -> HmacSha256 {
    let mut mac = secret.mac();
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp_secs.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The signature entry `v1,<base64>` for one secret.
pub fn sign(secret: &SigningSecret, msg_id: &str, timestamp_secs: i64, body: &[u8]) -> String {
    let tag = signed_mac(secret, msg_id, timestamp_secs, body)
        .finalize()
        .into_bytes();
    format!("v1,{}", STANDARD.encode(tag))
}

/// The `webhook-signature` header for several secrets (rotation): entries separated by spaces.
pub fn sign_all(
    secrets: &[SigningSecret],
    msg_id: &str,
    timestamp_secs: i64,
    body: &[u8],
) -> String {
    secrets
        .iter()
        .map(|s| sign(s, msg_id, timestamp_secs, body))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Why a signed webhook is refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum VerifyError {
    #[error("webhook-timestamp {0:?} is not a whole number of seconds")]
    InvalidTimestamp(String),
    #[error("webhook-timestamp is {age_secs} s old; at most {tolerance_secs} s are accepted")]
    TimestampTooOld { age_secs: u64, tolerance_secs: u64 },
    #[error("webhook-timestamp is {ahead_secs} s in the future; at most {tolerance_secs} s are accepted")]
    TimestampInFuture {
        ahead_secs: u64,
        tolerance_secs: u64,
    },
    #[error("webhook-signature has no v1 signature")]
    NoSignature,
    #[error("no webhook-signature entry matches")]
    SignatureMismatch,
}

/// Verifies a received webhook against one secret: the timestamp must be within `tolerance` of
/// `now` (both directions) and some `v1,` entry of `signature_header` must be the HMAC of the
/// content. Entries of other versions are ignored. The comparison is constant-time.
pub fn verify(
    secret: &SigningSecret,
    msg_id: &str,
    timestamp_header: &str,
    signature_header: &str,
    body: &[u8],
    now: Timestamp,
    tolerance: Duration,
) -> Result<(), VerifyError> {
    let ts_text = timestamp_header.trim();
    let timestamp_secs: i64 = if !ts_text.is_empty() && ts_text.bytes().all(|b| b.is_ascii_digit())
    {
        ts_text
            .parse()
            .map_err(|_| VerifyError::InvalidTimestamp(timestamp_header.to_owned()))?
    } else {
        return Err(VerifyError::InvalidTimestamp(timestamp_header.to_owned()));
    };
    let tolerance_secs = tolerance.as_secs();
    let now_secs = now.seconds();
    if timestamp_secs < now_secs {
        let age_secs = now_secs.abs_diff(timestamp_secs);
        if age_secs > tolerance_secs {
            return Err(VerifyError::TimestampTooOld {
                age_secs,
                tolerance_secs,
            });
        }
    } else {
        let ahead_secs = timestamp_secs.abs_diff(now_secs);
        if ahead_secs > tolerance_secs {
            return Err(VerifyError::TimestampInFuture {
                ahead_secs,
                tolerance_secs,
            });
        }
    }

    let expected = signed_mac(secret, msg_id, timestamp_secs, body);
    let mut saw_v1 = false;
    for entry in signature_header.split(' ').filter(|e| !e.is_empty()) {
        let Some(encoded) = entry.strip_prefix("v1,") else {
            continue;
        };
        saw_v1 = true;
        let Ok(candidate) = LENIENT_BASE64.decode(encoded) else {
            continue;
        };
        if expected.clone().verify_slice(&candidate).is_ok() {
            return Ok(());
        }
    }
    Err(if saw_v1 {
        VerifyError::SignatureMismatch
    } else {
        VerifyError::NoSignature
    })
}

/// The three headers a signed webhook carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookHeaders {
    pub webhook_id: String,
    pub webhook_timestamp: String,
    pub webhook_signature: String,
}

impl WebhookHeaders {
    /// Signs `body` as message `msg_id` sent at `now` with every secret in `secrets` (the current
    /// one, plus the previous one during rotation).
    pub fn sign(secrets: &[SigningSecret], msg_id: &str, now: Timestamp, body: &[u8]) -> Self {
        let timestamp_secs = now.seconds();
        WebhookHeaders {
            webhook_id: msg_id.to_owned(),
            webhook_timestamp: timestamp_secs.to_string(),
            webhook_signature: sign_all(secrets, msg_id, timestamp_secs, body),
        }
    }

    /// `(name, value)` pairs, ready to set on a request.
    pub fn pairs(&self) -> [(&'static str, &str); 3] {
        [
            (HEADER_ID, &self.webhook_id),
            (HEADER_TIMESTAMP, &self.webhook_timestamp),
            (HEADER_SIGNATURE, &self.webhook_signature),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The Standard Webhooks reference vector (also svix-webhooks' golden test).
    const VECTOR_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const VECTOR_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const VECTOR_TS: i64 = 1_614_265_330;
    const VECTOR_BODY: &[u8] = br#"{"test": 2432232314}"#;
    const VECTOR_SIG: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_millis(secs * 1000)
    }

    fn secret(byte: u8) -> SigningSecret {
        SigningSecret::from_bytes(&[byte; 32]).unwrap()
    }

    #[test]
    fn hmac_sha256_matches_rfc_4231_test_case_2() {
        let mut mac = HmacSha256::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn standard_webhooks_reference_vector() {
        let s = SigningSecret::parse(VECTOR_SECRET).unwrap();
        assert_eq!(sign(&s, VECTOR_ID, VECTOR_TS, VECTOR_BODY), VECTOR_SIG);
        assert_eq!(
            verify(
                &s,
                VECTOR_ID,
                "1614265330",
                VECTOR_SIG,
                VECTOR_BODY,
                at(VECTOR_TS + 10),
                DEFAULT_TOLERANCE
            ),
            Ok(())
        );
        assert_eq!(s.expose_whsec(), VECTOR_SECRET);
    }

    #[test]
    fn secrets_parse_and_generate_with_typed_errors() {
        assert_eq!(
            SigningSecret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            Err(SecretError::MissingPrefix)
        );
        assert_eq!(
            SigningSecret::parse("whsec_not base64!"),
            Err(SecretError::InvalidBase64)
        );
        assert_eq!(
            SigningSecret::parse("whsec_c2hvcnQ="),
            Err(SecretError::BadLength(5))
        );
        assert_eq!(
            SigningSecret::from_bytes(&[1; 23]),
            Err(SecretError::BadLength(23))
        );
        assert_eq!(
            SigningSecret::from_bytes(&[1; 65]),
            Err(SecretError::BadLength(65))
        );
        assert!(SigningSecret::from_bytes(&[1; 24]).is_ok());
        assert!(SigningSecret::from_bytes(&[1; 64]).is_ok());
        let s = secret(7);
        assert_eq!(SigningSecret::parse(&s.expose_whsec()), Ok(s.clone()));
        // Unpadded base64 is accepted too.
        let unpadded = s.expose_whsec().trim_end_matches('=').to_owned();
        assert_eq!(SigningSecret::parse(&unpadded), Ok(s));
        assert_eq!(
            SecretError::BadLength(5).to_string(),
            "a signing secret must hold 24 to 64 bytes; this one holds 5"
        );
    }

    #[test]
    fn debug_output_is_redacted() {
        let s = SigningSecret::parse(VECTOR_SECRET).unwrap();
        let shown = format!("{s:?}");
        assert_eq!(shown, "SigningSecret(whsec_<redacted 24 bytes>)");
        assert!(!shown.contains("MfKQ9r8"));
        assert!(!format!("{:?}", SigningSecret::parse("whsec_c2hvcnQ=")).contains("c2hvcnQ"));
    }

    #[test]
    fn round_trip_and_tamper_detection() {
        let s = secret(1);
        let body = br#"{"type":"order.updated"}"#;
        let sig = sign(&s, "msg_1", 1_700_000_000, body);
        let now = at(1_700_000_000);
        let ok = |id: &str, ts: &str, sig: &str, body: &[u8]| {
            verify(&s, id, ts, sig, body, now, DEFAULT_TOLERANCE)
        };
        assert_eq!(ok("msg_1", "1700000000", &sig, body), Ok(()));
        assert_eq!(
            ok("msg_1", "1700000000", &sig, br#"{"type":"order.deleted"}"#),
            Err(VerifyError::SignatureMismatch)
        );
        assert_eq!(
            ok("msg_2", "1700000000", &sig, body),
            Err(VerifyError::SignatureMismatch)
        );
        assert_eq!(
            ok("msg_1", "1700000001", &sig, body),
            Err(VerifyError::SignatureMismatch)
        );
        let mut flipped = sig.clone().into_bytes();
        flipped[5] = if flipped[5] == b'A' { b'B' } else { b'A' };
        assert_eq!(
            ok(
                "msg_1",
                "1700000000",
                std::str::from_utf8(&flipped).unwrap(),
                body
            ),
            Err(VerifyError::SignatureMismatch)
        );
        assert_eq!(
            ok("msg_1", "1700000000", "v1,!!!", body),
            Err(VerifyError::SignatureMismatch)
        );
        assert_eq!(
            ok("msg_1", "1700000000", "v2,abc", body),
            Err(VerifyError::NoSignature)
        );
        assert_eq!(
            ok("msg_1", "1700000000", "", body),
            Err(VerifyError::NoSignature)
        );
        // Truncated signatures do not pass.
        assert_eq!(
            ok("msg_1", "1700000000", &sig[..sig.len() - 8], body),
            Err(VerifyError::SignatureMismatch)
        );
    }

    #[test]
    fn wrong_secret_fails() {
        let sig = sign(&secret(1), "msg_1", 1_700_000_000, b"{}");
        assert_eq!(
            verify(
                &secret(2),
                "msg_1",
                "1700000000",
                &sig,
                b"{}",
                at(1_700_000_000),
                DEFAULT_TOLERANCE
            ),
            Err(VerifyError::SignatureMismatch)
        );
    }

    #[test]
    fn timestamps_outside_the_tolerance_fail() {
        let s = secret(3);
        let sig = sign(&s, "m", 1_700_000_000, b"x");
        let check = |now_secs: i64| {
            verify(
                &s,
                "m",
                "1700000000",
                &sig,
                b"x",
                at(now_secs),
                DEFAULT_TOLERANCE,
            )
        };
        assert_eq!(check(1_700_000_300), Ok(()), "exactly five minutes old");
        assert_eq!(check(1_699_999_700), Ok(()), "exactly five minutes ahead");
        assert_eq!(
            check(1_700_000_301),
            Err(VerifyError::TimestampTooOld {
                age_secs: 301,
                tolerance_secs: 300
            })
        );
        assert_eq!(
            check(1_699_999_699),
            Err(VerifyError::TimestampInFuture {
                ahead_secs: 301,
                tolerance_secs: 300
            })
        );
        for bad in ["", "abc", "-5", "1.5", "99999999999999999999999"] {
            assert_eq!(
                verify(
                    &s,
                    "m",
                    bad,
                    &sig,
                    b"x",
                    at(1_700_000_000),
                    DEFAULT_TOLERANCE
                ),
                Err(VerifyError::InvalidTimestamp(bad.into())),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn rotation_signs_with_every_secret_and_verifies_with_any() {
        let old = secret(1);
        let new = secret(2);
        let now = at(1_700_000_000);
        let headers = WebhookHeaders::sign(&[new.clone(), old.clone()], "msg_9", now, b"{}");
        assert_eq!(headers.webhook_id, "msg_9");
        assert_eq!(headers.webhook_timestamp, "1700000000");
        let entries: Vec<&str> = headers.webhook_signature.split(' ').collect();
        assert_eq!(entries.len(), 2);
        assert!(entries.iter().all(|e| e.starts_with("v1,")));
        for s in [&old, &new] {
            assert_eq!(
                verify(
                    s,
                    "msg_9",
                    &headers.webhook_timestamp,
                    &headers.webhook_signature,
                    b"{}",
                    now,
                    DEFAULT_TOLERANCE
                ),
                Ok(())
            );
        }
        assert_eq!(
            verify(
                &secret(3),
                "msg_9",
                &headers.webhook_timestamp,
                &headers.webhook_signature,
                b"{}",
                now,
                DEFAULT_TOLERANCE
            ),
            Err(VerifyError::SignatureMismatch)
        );
        assert_eq!(
            headers.pairs(),
            [
                ("webhook-id", "msg_9"),
                ("webhook-timestamp", "1700000000"),
                ("webhook-signature", headers.webhook_signature.as_str())
            ]
        );
        // Timestamps are whole seconds even when `now` has milliseconds.
        let h = WebhookHeaders::sign(&[old], "m", Timestamp::from_millis(1_700_000_000_999), b"");
        assert_eq!(h.webhook_timestamp, "1700000000");
    }
}
