//! Who is using the console: signed login links, the session cookie and the CSRF token.
//!
//! * A **login link** is `/console/login?link=<token>`: `<token>` is the base64url JSON of
//!   [`Claims`] (audience, subject, account, expiry, a random nonce), a `.`, and the base64url
//!   HMAC-SHA256 of that JSON under the console key, in the `link` domain. It lives
//!   [`LINK_TTL`]. The operator route `POST /operator/console-links` issues one for an operator
//!   or for an account's administrator; `POST /v1/console-links` for the caller's account.
//! * The **session** is the cookie [`COOKIE`]: the same shape in the `session` domain, with a
//!   fresh nonce and [`SESSION_TTL`]. It is *stateless* on purpose: the API function keeps no
//!   session table (one less item kind, no write per login, nothing to sweep), and the expiry is
//!   inside the signature. The price is that a session cannot be revoked one by one before it
//!   expires; rotating the console key ends them all. Attributes: `HttpOnly; Secure;
//!   SameSite=Strict; Path=/console` (the stage prefix in front on a named API Gateway stage).
//! * The **CSRF token** of a session is the HMAC of its nonce in the `csrf` domain; every POST
//!   form carries it as the hidden field `csrf`, and a POST without the right one is a 403.
//!
//! The key (at least 32 bytes) comes from Secrets Manager in AWS (`CONSOLE_SIGNING_KEY_ARN`, read
//! once per container), from `CONSOLE_SIGNING_KEY` (hex) otherwise; without either a random key
//! of the process is used (the local server: its links and sessions last as long as it runs).

use crate::api::credentials::constant_time_eq;
use crate::domain::time::Timestamp;
use crate::ids::AccountId;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::fmt;
use std::time::Duration;

/// The session cookie's name.
pub const COOKIE: &str = "rhythm_console";
/// How long a login link may be used.
pub const LINK_TTL: Duration = Duration::from_secs(15 * 60);
/// How long a session lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 60 * 60);
/// Shortest console key accepted.
pub const MIN_KEY_BYTES: usize = 32;

/// The console's signing key. Its `Debug` is redacted.
#[derive(Clone)]
pub struct ConsoleKey(Vec<u8>);

impl fmt::Debug for ConsoleKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ConsoleKey(<redacted>)")
    }
}

impl ConsoleKey {
    /// A key of at least [`MIN_KEY_BYTES`] bytes.
    pub fn new(bytes: Vec<u8>) -> Result<Self, String> {
        if bytes.len() < MIN_KEY_BYTES {
            return Err(format!(
                "the console key must be at least {MIN_KEY_BYTES} bytes"
            ));
        }
        Ok(ConsoleKey(bytes))
    }

    /// A random key of this process.
    pub fn random() -> Self {
        let mut bytes = vec![0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        ConsoleKey(bytes)
    }

    /// The key a secret's text holds: hex, else its UTF-8 bytes (a generated password).
    pub fn from_text(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let hex = text.len() % 2 == 0 && text.bytes().all(|b| b.is_ascii_hexdigit());
        if hex {
            let bytes = (0..text.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&text[i..i + 2], 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|e| e.to_string())?;
            if let Ok(key) = Self::new(bytes) {
                return Ok(key);
            }
        }
        Self::new(text.as_bytes().to_vec())
    }

    /// In AWS the secret `CONSOLE_SIGNING_KEY_ARN` names (read once; call this once per
    /// container); else `CONSOLE_SIGNING_KEY`; else a random key of this process.
    pub async fn load(
        secrets_manager: &aws_sdk_secretsmanager::Client,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        if let Some(arn) = lookup("CONSOLE_SIGNING_KEY_ARN").filter(|a| !a.is_empty()) {
            let text = crate::aws::secret_string(secrets_manager, &arn, "the console key").await?;
            return Self::from_text(&text).map_err(|e| format!("{arn}: {e}"));
        }
        match lookup("CONSOLE_SIGNING_KEY").filter(|k| !k.is_empty()) {
            Some(text) => Self::from_text(&text).map_err(|e| format!("CONSOLE_SIGNING_KEY: {e}")),
            None => {
                tracing::warn!("no console key configured: console links and sessions last as long as this process");
                Ok(Self::random())
            }
        }
    }

    fn tag(&self, domain: &str, payload: &[u8]) -> Vec<u8> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("any key length");
        mac.update(domain.as_bytes());
        mac.update(&[0]);
        mac.update(payload);
        mac.finalize().into_bytes().to_vec()
    }

    fn seal(&self, domain: &str, claims: &Claims) -> String {
        let json = serde_json::to_vec(claims).unwrap_or_default();
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(&json),
            URL_SAFE_NO_PAD.encode(self.tag(domain, &json))
        )
    }

    fn open(&self, domain: &str, text: &str, now: Timestamp) -> Result<Claims, SessionError> {
        let (body, tag) = text.trim().split_once('.').ok_or(SessionError::Forged)?;
        let json = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| SessionError::Forged)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| SessionError::Forged)?;
        if !constant_time_eq(&self.tag(domain, &json), &tag) {
            return Err(SessionError::Forged);
        }
        let claims: Claims = serde_json::from_slice(&json).map_err(|_| SessionError::Forged)?;
        if claims.exp <= now.seconds() {
            return Err(SessionError::Expired);
        }
        Ok(claims)
    }

    /// A login link's token for `audience`, valid [`LINK_TTL`] from `now`.
    pub fn link(&self, audience: Audience, now: Timestamp) -> (String, Timestamp) {
        let expires = now.plus(LINK_TTL);
        (self.seal("link", &Claims::new(audience, expires)), expires)
    }

    /// Reads a login link's token.
    pub fn open_link(&self, text: &str, now: Timestamp) -> Result<Audience, SessionError> {
        Ok(self.open("link", text, now)?.audience())
    }

    /// A session cookie's value for `audience`, valid [`SESSION_TTL`] from `now`.
    pub fn session(&self, audience: Audience, now: Timestamp) -> (String, Timestamp) {
        let expires = now.plus(SESSION_TTL);
        (
            self.seal("session", &Claims::new(audience, expires)),
            expires,
        )
    }

    /// Reads a session cookie's value.
    pub fn open_session(&self, text: &str, now: Timestamp) -> Result<Session, SessionError> {
        let claims = self.open("session", text, now)?;
        let csrf = URL_SAFE_NO_PAD.encode(self.tag("csrf", claims.n.as_bytes()));
        let expires = Timestamp(claims.exp.saturating_mul(1000));
        Ok(Session {
            audience: claims.audience(),
            expires,
            csrf,
        })
    }
}

/// Why a link or a cookie is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("the link or session is not one this console signed")]
    Forged,
    #[error("the link or session has expired")]
    Expired,
}

/// Who a link or a session is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Audience {
    /// An operator (all accounts).
    Operator { operator_id: String },
    /// An account's administrator; `actor` says who signed in (a token id, or the operator or
    /// account that issued the link).
    Account {
        account_id: AccountId,
        actor: String,
    },
}

impl Audience {
    pub fn is_operator(&self) -> bool {
        matches!(self, Audience::Operator { .. })
    }
}

/// A verified session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub audience: Audience,
    pub expires: Timestamp,
    /// The value every POST form of this session must carry as `csrf`.
    pub csrf: String,
}

impl Session {
    /// Whether `presented` is this session's CSRF token (compared in constant time).
    pub fn csrf_matches(&self, presented: &str) -> bool {
        constant_time_eq(self.csrf.as_bytes(), presented.trim().as_bytes())
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    /// `operator` or `account`.
    aud: String,
    sub: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    acct: Option<AccountId>,
    /// Expiry, Unix seconds.
    exp: i64,
    n: String,
}

impl Claims {
    fn new(audience: Audience, expires: Timestamp) -> Self {
        let mut nonce = [0u8; 16];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let n = URL_SAFE_NO_PAD.encode(nonce);
        let exp = expires.seconds();
        match audience {
            Audience::Operator { operator_id } => Claims {
                aud: "operator".into(),
                sub: operator_id,
                acct: None,
                exp,
                n,
            },
            Audience::Account { account_id, actor } => Claims {
                aud: "account".into(),
                sub: actor,
                acct: Some(account_id),
                exp,
                n,
            },
        }
    }

    fn audience(self) -> Audience {
        match (self.aud.as_str(), self.acct) {
            ("account", Some(account_id)) => Audience::Account {
                account_id,
                actor: self.sub,
            },
            _ => Audience::Operator {
                operator_id: self.sub,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op() -> Audience {
        Audience::Operator {
            operator_id: "ops@example.com".into(),
        }
    }

    #[test]
    fn a_link_opens_until_it_expires_and_only_as_a_link() {
        let key = ConsoleKey::random();
        let now = Timestamp(1_700_000_000_000);
        let (link, expires) = key.link(op(), now);
        assert_eq!(expires, now.plus(LINK_TTL));
        assert_eq!(key.open_link(&link, now).unwrap(), op());
        assert_eq!(
            key.open_link(&link, expires),
            Err(SessionError::Expired),
            "expired at its expiry"
        );
        assert_eq!(key.open_session(&link, now), Err(SessionError::Forged));
        assert_eq!(
            ConsoleKey::random().open_link(&link, now),
            Err(SessionError::Forged)
        );
    }

    #[test]
    fn a_changed_claim_breaks_the_signature() {
        let key = ConsoleKey::random();
        let now = Timestamp(1_700_000_000_000);
        let account = Audience::Account {
            account_id: crate::ids::id("a1"),
            actor: "t1".into(),
        };
        let (cookie, _) = key.session(account.clone(), now);
        let session = key.open_session(&cookie, now).unwrap();
        assert_eq!(session.audience, account);
        assert!(session.csrf_matches(&session.csrf));
        assert!(!session.csrf_matches("nope"));
        let (body, tag) = cookie.split_once('.').unwrap();
        let json = String::from_utf8(URL_SAFE_NO_PAD.decode(body).unwrap()).unwrap();
        let forged = URL_SAFE_NO_PAD.encode(json.replace("\"a1\"", "\"a2\""));
        assert_eq!(
            key.open_session(&format!("{forged}.{tag}"), now),
            Err(SessionError::Forged)
        );
        for junk in ["", ".", "abc", "a.b.c"] {
            assert_eq!(key.open_session(junk, now), Err(SessionError::Forged));
        }
        // Two sessions of one audience have different CSRF tokens.
        let (other, _) = key.session(account, now);
        assert_ne!(key.open_session(&other, now).unwrap().csrf, session.csrf);
    }

    #[test]
    fn keys_are_read_from_hex_or_text_and_must_be_long_enough() {
        assert!(ConsoleKey::from_text(&"ab".repeat(32)).is_ok());
        assert!(ConsoleKey::from_text("short").is_err());
        assert!(ConsoleKey::from_text(&"x".repeat(40)).is_ok());
        assert!(!format!("{:?}", ConsoleKey::random()).contains('['));
    }
}
