//! A token's text and the check it carries ([`crate::web::auth`] describes the format).
//!
//! Every token the API issues ends in a check: the first 16 bytes of an HMAC-SHA256, keyed by
//! the deployment's token-check key, over the token's kind, id and random part. A request's
//! token is checked first, before any store call: a made-up or altered token (or one minted
//! under another key) is refused without a read. The key is a Secrets Manager secret the stack
//! generates (`TokenCheckKey`); the api function reads it once per container by the ARN in
//! `TOKEN_CHECK_KEY_ARN` ([`TokenCheckKeys`]). Changing it refuses every token issued before.

use crate::domain::time::Timestamp;
use crate::ids::{AccountId, IntegrationId, TokenId};
use crate::operations::OpsError;
use crate::store::token::{TokenKind, TokenRecord};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::{Digest, Sha256};
use std::fmt;
use std::sync::Arc;

pub const TOKEN_PREFIX: &str = "rhy";
/// Random bytes in a token's secret.
pub const RANDOM_BYTES: usize = 32;
/// Bytes of the check that follow them (a truncated HMAC-SHA256).
pub(crate) const CHECK_BYTES: usize = 16;
/// Bytes of a token's secret part: the random bytes and their check.
pub const SECRET_BYTES: usize = RANDOM_BYTES + CHECK_BYTES;
/// The shortest token-check key accepted (characters of the secret's value).
pub(crate) const MIN_KEY_CHARS: usize = 32;
/// What the check's MAC covers first, so it serves nothing else.
const CHECK_DOMAIN: &[u8] = b"rhythm-token-check/v1";

/// A secret shown once (a token's plaintext, a webhook signing secret). Its `Debug` is redacted;
/// the text leaves only through [`OneTimeSecret::expose`] and its serialization (the one
/// response that reveals it).
#[derive(Clone, PartialEq, Eq)]
pub struct OneTimeSecret(String);

/// A token's plaintext.
pub type PlaintextToken = OneTimeSecret;

impl OneTimeSecret {
    pub fn new(text: String) -> Self {
        OneTimeSecret(text)
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for OneTimeSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OneTimeSecret(<redacted>)")
    }
}

impl serde::Serialize for OneTimeSecret {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// Why a presented token cannot even be looked up. Messages never contain the token.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum TokenFormatError {
    #[error("a token reads rhy_{{kind}}_{{id}}_{{secret}}")]
    Shape,
    #[error("unknown token kind")]
    Kind,
    #[error("the token id is not a ULID")]
    Id,
    #[error("the token secret is not {SECRET_BYTES} bytes of base64url")]
    Secret,
}

/// A presented token, split into its parts (borrowing the presented text).
#[derive(Clone, PartialEq, Eq)]
pub struct ParsedToken<'a> {
    pub kind: TokenKind,
    pub token_id: TokenId,
    /// The secret part as presented (its SHA-256 is what the token item keeps).
    pub secret: &'a str,
    /// The secret part decoded: the random bytes, then their check.
    bytes: [u8; SECRET_BYTES],
}

impl fmt::Debug for ParsedToken<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParsedToken")
            .field("kind", &self.kind)
            .field("token_id", &self.token_id)
            .field("secret", &"<redacted>")
            .finish()
    }
}

impl ParsedToken<'_> {
    /// Whether the token carries the check `key` gives its kind, id and random part: false for
    /// a made-up token, one altered in any part, or one issued under another key.
    pub fn checks(&self, key: &TokenCheckKey) -> bool {
        let (random, check) = self.bytes.split_at(RANDOM_BYTES);
        key.mac(self.kind, &self.token_id, random)
            .verify_truncated_left(check)
            .is_ok()
    }
}

pub fn parse_token(text: &str) -> Result<ParsedToken<'_>, TokenFormatError> {
    let mut parts = text.splitn(4, '_');
    let (Some(prefix), Some(kind), Some(token_id), Some(secret)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenFormatError::Shape);
    };
    if prefix != TOKEN_PREFIX {
        return Err(TokenFormatError::Shape);
    }
    let kind = TokenKind::parse(kind).ok_or(TokenFormatError::Kind)?;
    // Ids are issued lowercase; anything else is not an issued token.
    if crate::ids::canonical_id(token_id).as_deref() != Some(token_id) {
        return Err(TokenFormatError::Id);
    }
    let bytes = URL_SAFE_NO_PAD
        .decode(secret)
        .ok()
        .and_then(|b| <[u8; SECRET_BYTES]>::try_from(b).ok())
        .ok_or(TokenFormatError::Secret)?;
    Ok(ParsedToken {
        kind,
        token_id: TokenId::from_stored(token_id),
        secret,
        bytes,
    })
}

/// A new token of `kind` for an account (and, for `intg`, an integration), checked under `key`:
/// the plaintext to show once and the record to store.
pub fn issue_token(
    key: &TokenCheckKey,
    kind: TokenKind,
    account_id: &AccountId,
    integration_id: Option<&IntegrationId>,
    now: Timestamp,
) -> (PlaintextToken, TokenRecord) {
    let token_id = TokenId::new();
    let mut bytes = [0u8; SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut bytes[..RANDOM_BYTES]);
    let check = key
        .mac(kind, &token_id, &bytes[..RANDOM_BYTES])
        .finalize()
        .into_bytes();
    bytes[RANDOM_BYTES..].copy_from_slice(&check[..CHECK_BYTES]);
    let secret = URL_SAFE_NO_PAD.encode(bytes);
    let plaintext = OneTimeSecret(format!(
        "{TOKEN_PREFIX}_{}_{token_id}_{secret}",
        kind.as_str()
    ));
    let record = TokenRecord::new(
        token_id,
        kind,
        account_id.clone(),
        integration_id.cloned(),
        sha256_hex(&secret),
        now,
    );
    (plaintext, record)
}

/// The deployment's token-check key. Its `Debug` is redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenCheckKey(Vec<u8>);

impl fmt::Debug for TokenCheckKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenCheckKey(<redacted>)")
    }
}

impl TokenCheckKey {
    /// The key of a secret's value (what Secrets Manager generates: 64 letters and digits), at
    /// least [`MIN_KEY_CHARS`] long.
    pub fn from_text(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.len() < MIN_KEY_CHARS {
            return Err(format!(
                "the token-check key must be at least {MIN_KEY_CHARS} characters"
            ));
        }
        Ok(TokenCheckKey(text.as_bytes().to_vec()))
    }

    /// A random key (unit tests; a key no deployment holds).
    pub fn random() -> Self {
        let mut bytes = vec![0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        TokenCheckKey(bytes)
    }

    fn mac(&self, kind: TokenKind, token_id: &TokenId, random: &[u8]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("any key length");
        for part in [
            CHECK_DOMAIN,
            kind.as_str().as_bytes(),
            token_id.as_str().as_bytes(),
        ] {
            mac.update(part);
            mac.update(&[0]);
        }
        mac.update(random);
        mac
    }
}

/// The token-check key as the API holds it: read from Secrets Manager once per container, on
/// first use (the api function reads it at start), or a key set outright.
pub struct TokenCheckKeys {
    source: Option<(aws_sdk_secretsmanager::Client, String)>,
    key: tokio::sync::OnceCell<Arc<TokenCheckKey>>,
}

impl fmt::Debug for TokenCheckKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenCheckKeys")
            .field("secret", &self.source.as_ref().map(|(_, arn)| arn))
            .field("loaded", &self.key.initialized())
            .finish()
    }
}

impl TokenCheckKeys {
    /// The key in the secret `arn` names (`None`: no secret is configured, and every token
    /// route answers 500 until one is).
    pub fn from_secret(client: aws_sdk_secretsmanager::Client, arn: Option<String>) -> Self {
        TokenCheckKeys {
            source: arn.filter(|a| !a.is_empty()).map(|arn| (client, arn)),
            key: tokio::sync::OnceCell::new(),
        }
    }

    /// Always `key`.
    pub fn fixed(key: TokenCheckKey) -> Self {
        TokenCheckKeys {
            source: None,
            key: tokio::sync::OnceCell::new_with(Some(Arc::new(key))),
        }
    }

    /// The key, read on first use. A failed read is a 503 (and is tried again next request).
    pub async fn current(&self) -> Result<Arc<TokenCheckKey>, OpsError> {
        self.key
            .get_or_try_init(|| async {
                let Some((client, arn)) = &self.source else {
                    return Err(OpsError::Internal(
                        "no token-check key is configured (TOKEN_CHECK_KEY_ARN)".into(),
                    ));
                };
                let text = crate::aws::secret_string(client, arn, "the token-check key")
                    .await
                    .map_err(|e| {
                        tracing::error!(error = %e, "the token-check key could not be read");
                        OpsError::Unavailable(
                            "tokens cannot be checked right now; try again".into(),
                        )
                    })?;
                TokenCheckKey::from_text(&text)
                    .map(Arc::new)
                    .map_err(|e| OpsError::Internal(format!("{arn}: {e}")))
            })
            .await
            .cloned()
    }
}

/// Hex SHA-256 of `text`.
pub fn sha256_hex(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// Equality whose time does not depend on where the inputs differ (only on their lengths, which
/// are public: both sides are hex SHA-256 digests).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;
    use crate::store::expr::s;
    use crate::store::keys::token_pk;

    #[test]
    fn issued_tokens_parse_back_check_and_store_only_the_hash() {
        let key = TokenCheckKey::random();
        let (plain, record) = issue_token(
            &key,
            TokenKind::Intg,
            &id("acc"),
            Some(&id("int")),
            Timestamp(5),
        );
        let text = plain.expose().to_owned();
        assert!(text.starts_with("rhy_intg_"));
        let parsed = parse_token(&text).unwrap();
        assert_eq!(parsed.kind, TokenKind::Intg);
        assert_eq!(parsed.token_id, record.token_id);
        assert!(parsed.checks(&key));
        assert_eq!(record.secret_sha256, sha256_hex(parsed.secret));
        assert_eq!(record.secret_sha256.len(), 64);
        assert!(!format!("{record:?}").contains(parsed.secret));
        assert!(!format!("{plain:?}").contains(parsed.secret));
        assert!(!format!("{parsed:?}").contains(parsed.secret));
        assert!(!format!("{key:?}").contains(&format!("{:?}", key.0)));
        let item = record.item().unwrap();
        assert!(item
            .values()
            .all(|v| v.as_s().map_or(true, |s| !s.contains(parsed.secret))));
        assert_eq!(item["pk"], s(token_pk(&record.token_id)));
        assert_eq!(item["token_kind"], s("intg"));
    }

    #[test]
    fn a_token_checks_only_under_its_key_and_with_every_part_as_issued() {
        let key = TokenCheckKey::random();
        let (plain, _) = issue_token(&key, TokenKind::Acct, &id("acc"), None, Timestamp(5));
        let text = plain.expose();
        assert!(!parse_token(text).unwrap().checks(&TokenCheckKey::random()));
        // Another kind, another id, or a changed random part: the check no longer holds.
        let other_kind = text.replacen("rhy_acct_", "rhy_pub_", 1);
        assert!(!parse_token(&other_kind).unwrap().checks(&key));
        let parsed = parse_token(text).unwrap();
        let other_id = text.replacen(parsed.token_id.as_str(), &crate::ids::new_id(), 1);
        assert!(!parse_token(&other_id).unwrap().checks(&key));
        let mut bytes = URL_SAFE_NO_PAD.decode(parsed.secret).unwrap();
        bytes[0] ^= 1;
        let altered = text.replacen(parsed.secret, &URL_SAFE_NO_PAD.encode(bytes), 1);
        assert!(!parse_token(&altered).unwrap().checks(&key));
        // A made-up secret of the right length parses but does not check.
        let made_up = format!(
            "rhy_acct_{}_{}",
            crate::ids::new_id(),
            URL_SAFE_NO_PAD.encode([7u8; SECRET_BYTES])
        );
        assert!(!parse_token(&made_up).unwrap().checks(&key));
    }

    #[test]
    fn secrets_may_contain_underscores() {
        // base64url uses `_`; only the first three underscores separate parts.
        let id = crate::ids::new_id();
        let secret = URL_SAFE_NO_PAD.encode([0xffu8; SECRET_BYTES]);
        assert!(secret.contains('_'));
        let text = format!("rhy_acct_{id}_{secret}");
        let parsed = parse_token(&text).unwrap();
        assert_eq!(parsed.secret, secret);
    }

    #[test]
    fn malformed_tokens_are_refused_before_any_lookup() {
        let id = crate::ids::new_id();
        let secret = URL_SAFE_NO_PAD.encode([7u8; SECRET_BYTES]);
        // A token of the format before the check (32 bytes of secret) is malformed now.
        let unchecked = URL_SAFE_NO_PAD.encode([7u8; RANDOM_BYTES]);
        let cases = [
            (String::new(), TokenFormatError::Shape),
            ("rhy_acct".to_string(), TokenFormatError::Shape),
            (format!("xyz_acct_{id}_{secret}"), TokenFormatError::Shape),
            (format!("rhy_root_{id}_{secret}"), TokenFormatError::Kind),
            (
                format!("rhy_acct_{}_{secret}", id.to_ascii_uppercase()),
                TokenFormatError::Id,
            ),
            (format!("rhy_acct_nope_{secret}"), TokenFormatError::Id),
            (format!("rhy_acct_{id}_short"), TokenFormatError::Secret),
            (
                format!("rhy_acct_{id}_{secret}AA"),
                TokenFormatError::Secret,
            ),
            (
                format!("rhy_acct_{id}_{unchecked}"),
                TokenFormatError::Secret,
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_token(&text).unwrap_err(), expected, "{text}");
        }
    }

    #[test]
    fn keys_are_at_least_32_characters() {
        assert!(TokenCheckKey::from_text("short").is_err());
        assert!(TokenCheckKey::from_text(&"k".repeat(MIN_KEY_CHARS)).is_ok());
    }

    #[tokio::test]
    async fn without_a_configured_secret_the_key_is_an_internal_error() {
        let sdk = aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .build();
        let keys = TokenCheckKeys::from_secret(aws_sdk_secretsmanager::Client::new(&sdk), None);
        assert!(matches!(keys.current().await, Err(OpsError::Internal(_))));
        let key = TokenCheckKey::random();
        let fixed = TokenCheckKeys::fixed(key.clone());
        assert_eq!(*fixed.current().await.unwrap(), key);
    }
}
