//! Who is using the console: signed login links, the session cookie and the CSRF token.
//!
//! * A **login link** is `/console/login?link=<token>`: `<token>` is the base64url JSON of
//!   its claims (audience, subject, account, expiry, a random nonce, and its grounds: the
//!   account token it was issued with, or the issuing operator's identity expiry), a `.`, and
//!   the base64url HMAC-SHA256 of that JSON under the console key, in the `link` domain. It
//!   lives [`LINK_TTL`] (less when the operator's identity expires sooner) and opens one session
//!   at most. The operator route `POST /operator/console-links` issues one for an operator or
//!   for an account's administrator; `POST /v1/console-links` for the caller's account.
//! * The **session** is the cookie [`COOKIE`]: the same shape in the `session` domain, with a
//!   fresh nonce, which names the session's stored item ([`crate::store::console_session`]).
//!   Every request reads that item ([`crate::web::console_signin`]): signing out deletes it, and
//!   a session opened with an account token ends when the token is revoked or expires. A session
//!   whose grounds are an operator's identity lasts at most [`OPERATOR_SESSION_TTL`] and never
//!   past the identity's expiry; one opened with an account token at most [`SESSION_TTL`].
//!   Attributes: `HttpOnly; Secure; SameSite=Strict; Path=/` (the `__Host-` prefix: the
//!   browser keeps it to this origin, set by it over HTTPS).
//! * The **CSRF token** of a session is the HMAC of its nonce in the `csrf` domain; every POST
//!   form carries it as the hidden field `csrf`, and a POST without the right one is a 403.
//!
//! The key (at least 32 bytes) comes from Secrets Manager in AWS (`CONSOLE_SIGNING_KEY_ARN`,
//! read again every [`crate::web::console_key::REFRESH`], so a rotated key takes effect without
//! a restart, and ends the sessions the old one signed), from `CONSOLE_SIGNING_KEY` (hex)
//! otherwise; without either a random key of the process is used (the local server: its links
//! and sessions last as long as it runs).

use crate::domain::time::Timestamp;
use crate::ids::{AccountId, TokenId};
use crate::web::credentials::constant_time_eq;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::fmt;
use std::time::Duration;

/// The session cookie's name (`__Host-`: only this origin, `Secure`, `Path=/`, no `Domain`).
pub const COOKIE: &str = "__Host-rhythm_console";
/// How long a login link may be used (at most).
pub const LINK_TTL: Duration = Duration::from_secs(15 * 60);
/// How long a session opened with an account token lasts (at most: it ends with the token).
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 60 * 60);
/// How long a session whose grounds are an operator's identity lasts (at most: never past the
/// identity's expiry).
pub const OPERATOR_SESSION_TTL: Duration = Duration::from_secs(60 * 60);
/// Shortest console key accepted.
pub(crate) const MIN_KEY_BYTES: usize = 32;

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

    /// A login link's token for `audience` on `grounds`, valid [`LINK_TTL`] from `now` (less
    /// when the grounds expire sooner).
    pub fn link(
        &self,
        audience: Audience,
        grounds: &Grounds,
        now: Timestamp,
    ) -> (String, Timestamp) {
        let expires = grounds.bound(now.plus(LINK_TTL));
        let mut claims = Claims::new(audience, expires);
        match grounds {
            Grounds::Token(token_id) => claims.tok = Some(token_id.clone()),
            Grounds::Operator {
                operator_id,
                expires,
            } => {
                if claims.aud == ACCOUNT {
                    claims.by = Some(operator_id.clone());
                }
                claims.gexp = expires.map(Timestamp::seconds);
            }
        }
        (self.seal("link", &claims), expires)
    }

    /// Reads a login link's token (its signature and expiry; whether it was used is stored).
    pub fn open_link(&self, text: &str, now: Timestamp) -> Result<Link, SessionError> {
        let claims = self.open("link", text, now)?;
        let grounds = claims.grounds()?;
        Ok(Link {
            nonce: claims.n.clone(),
            expires: Timestamp(claims.exp.saturating_mul(1000)),
            audience: claims.audience()?,
            grounds,
        })
    }

    /// A new session cookie's value for `audience`, valid until `expires`, and the signed
    /// session it names.
    pub fn session(&self, audience: Audience, expires: Timestamp) -> (String, SignedSession) {
        let claims = Claims::new(audience.clone(), expires);
        let value = self.seal("session", &claims);
        let signed = SignedSession {
            session_id: claims.n,
            audience,
            expires: Timestamp(claims.exp.saturating_mul(1000)),
        };
        (value, signed)
    }

    /// Reads a session cookie's value (its signature and expiry; the session itself is stored).
    pub(crate) fn open_session(
        &self,
        text: &str,
        now: Timestamp,
    ) -> Result<SignedSession, SessionError> {
        let claims = self.open("session", text, now)?;
        if claims.tok.is_some() || claims.by.is_some() || claims.gexp.is_some() {
            return Err(SessionError::Forged);
        }
        Ok(SignedSession {
            session_id: claims.n.clone(),
            expires: Timestamp(claims.exp.saturating_mul(1000)),
            audience: claims.audience()?,
        })
    }

    /// The CSRF token of the session `session_id`.
    pub fn csrf(&self, session_id: &str) -> String {
        URL_SAFE_NO_PAD.encode(self.tag("csrf", session_id.as_bytes()))
    }
}

/// Why a link or a cookie is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("the link or session is not one this console signed")]
    Forged,
    #[error("the link or session has expired")]
    Expired,
    #[error("this sign-in link has been used already (a link signs in once)")]
    Used,
    #[error("the session has ended: it was signed out, or the token it was opened with is no longer valid")]
    Ended,
    /// The session's account was deleted (or is being deleted): its sessions end, whatever
    /// opened them, and no new one opens.
    #[error("the session has ended: its account was deleted")]
    AccountGone,
    #[error("the console cannot check sessions right now; try again in a moment")]
    Unavailable,
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

/// What a link, and the session it opens, stands on: when that ends, so does the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grounds {
    /// An account token: the session lasts while the token is live (read on every request).
    Token(TokenId),
    /// An operator's identity (the identity provider's token), until its expiry when known.
    Operator {
        operator_id: String,
        expires: Option<Timestamp>,
    },
}

impl Grounds {
    /// `until`, or the grounds' own expiry when that is sooner.
    fn bound(&self, until: Timestamp) -> Timestamp {
        match self {
            Grounds::Operator {
                expires: Some(e), ..
            } => until.min(*e),
            _ => until,
        }
    }

    /// When a session opened on these grounds at `now` ends at the latest.
    pub(crate) fn session_expiry(&self, now: Timestamp) -> Timestamp {
        match self {
            Grounds::Token(_) => now.plus(SESSION_TTL),
            Grounds::Operator { .. } => self.bound(now.plus(OPERATOR_SESSION_TTL)),
        }
    }

    /// The account token the grounds are, if any.
    pub fn token_id(&self) -> Option<&TokenId> {
        match self {
            Grounds::Token(t) => Some(t),
            Grounds::Operator { .. } => None,
        }
    }
}

/// An opened login link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub audience: Audience,
    pub grounds: Grounds,
    /// The link's random nonce: its use is recorded under it.
    pub nonce: String,
    pub expires: Timestamp,
}

/// A session cookie whose signature holds: what it claims, to be checked against its item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedSession {
    pub session_id: String,
    pub audience: Audience,
    pub expires: Timestamp,
}

/// A verified session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub session_id: String,
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

const OPERATOR: &str = "operator";
const ACCOUNT: &str = "account";

/// Unknown claims are refused: a token carries exactly the claims this console writes.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Claims {
    /// `operator` or `account`.
    aud: String,
    sub: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    acct: Option<AccountId>,
    /// Expiry, Unix seconds.
    exp: i64,
    n: String,
    /// A link's grounds: the account token it was issued with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tok: Option<TokenId>,
    /// A link's grounds: the operator who issued an account's link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    by: Option<String>,
    /// A link's grounds: when the issuing operator's identity expires, Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gexp: Option<i64>,
}

impl Claims {
    fn new(audience: Audience, expires: Timestamp) -> Self {
        let mut nonce = [0u8; 16];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let n = URL_SAFE_NO_PAD.encode(nonce);
        let exp = expires.seconds();
        let (aud, sub, acct) = match audience {
            Audience::Operator { operator_id } => (OPERATOR, operator_id, None),
            Audience::Account { account_id, actor } => (ACCOUNT, actor, Some(account_id)),
        };
        Claims {
            aud: aud.into(),
            sub,
            acct,
            exp,
            n,
            tok: None,
            by: None,
            gexp: None,
        }
    }

    /// The audience, matched exactly: an operator only for an explicit operator claim without
    /// an account, an account's administrator only with its account.
    fn audience(&self) -> Result<Audience, SessionError> {
        match (self.aud.as_str(), &self.acct) {
            (OPERATOR, None) if !self.sub.is_empty() => Ok(Audience::Operator {
                operator_id: self.sub.clone(),
            }),
            (ACCOUNT, Some(account_id)) => Ok(Audience::Account {
                account_id: account_id.clone(),
                actor: self.sub.clone(),
            }),
            _ => Err(SessionError::Forged),
        }
    }

    /// A link's grounds: an operator's own link stands on its identity; an account's link on
    /// exactly one of the token or the operator it was issued with.
    fn grounds(&self) -> Result<Grounds, SessionError> {
        let expires = self.gexp.map(|s| Timestamp(s.saturating_mul(1000)));
        match (self.aud.as_str(), &self.tok, &self.by) {
            (OPERATOR, None, None) => Ok(Grounds::Operator {
                operator_id: self.sub.clone(),
                expires,
            }),
            (ACCOUNT, Some(token_id), None) if self.gexp.is_none() => {
                Ok(Grounds::Token(token_id.clone()))
            }
            (ACCOUNT, None, Some(operator_id)) => Ok(Grounds::Operator {
                operator_id: operator_id.clone(),
                expires,
            }),
            _ => Err(SessionError::Forged),
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

    fn op_grounds(expires: Option<Timestamp>) -> Grounds {
        Grounds::Operator {
            operator_id: "ops@example.com".into(),
            expires,
        }
    }

    /// A token of `domain` with these exact claims, signed by `key`.
    fn sealed(key: &ConsoleKey, domain: &str, json: serde_json::Value) -> String {
        let json = serde_json::to_vec(&json).unwrap();
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(&json),
            URL_SAFE_NO_PAD.encode(key.tag(domain, &json))
        )
    }

    #[test]
    fn a_link_opens_until_it_expires_and_only_as_a_link() {
        let key = ConsoleKey::random();
        let now = Timestamp(1_700_000_000_000);
        let (link, expires) = key.link(op(), &op_grounds(None), now);
        assert_eq!(expires, now.plus(LINK_TTL));
        let opened = key.open_link(&link, now).unwrap();
        assert_eq!(opened.audience, op());
        assert_eq!(opened.grounds, op_grounds(None));
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
    fn an_operator_link_and_session_end_with_the_operators_identity_and_within_an_hour() {
        let now = Timestamp(1_700_000_000_000);
        let key = ConsoleKey::random();
        let soon = now.plus(Duration::from_secs(10 * 60));
        let (link, expires) = key.link(op(), &op_grounds(Some(soon)), now);
        assert_eq!(expires, soon, "a link lasts no longer than its grounds");
        let opened = key.open_link(&link, now).unwrap();
        assert_eq!(opened.grounds, op_grounds(Some(soon)));
        assert_eq!(opened.grounds.session_expiry(now), soon);
        let later = now.plus(Duration::from_secs(5 * 60 * 60));
        assert_eq!(
            op_grounds(Some(later)).session_expiry(now),
            now.plus(OPERATOR_SESSION_TTL)
        );
        assert_eq!(
            op_grounds(None).session_expiry(now),
            now.plus(OPERATOR_SESSION_TTL)
        );
        assert_eq!(
            Grounds::Token(crate::ids::id("01tok")).session_expiry(now),
            now.plus(SESSION_TTL)
        );
    }

    #[test]
    fn claims_are_matched_exactly() {
        let key = ConsoleKey::random();
        let now = Timestamp(1_700_000_000_000);
        let exp = now.seconds() + 600;
        // Only an explicit operator claim without an account is an operator; an unknown
        // audience, an operator with an account, an account without one, an unknown claim:
        // all refused.
        for json in [
            serde_json::json!({"aud": "admin", "sub": "x", "exp": exp, "n": "a"}),
            serde_json::json!({"aud": "", "sub": "x", "exp": exp, "n": "a"}),
            serde_json::json!({"aud": "operator", "sub": "x", "acct": "a1", "exp": exp, "n": "a"}),
            serde_json::json!({"aud": "account", "sub": "x", "exp": exp, "n": "a"}),
            serde_json::json!({"aud": "operator", "sub": "x", "exp": exp, "n": "a", "role": "root"}),
            serde_json::json!({"aud": "operator", "sub": "", "exp": exp, "n": "a"}),
        ] {
            assert_eq!(
                key.open_session(&sealed(&key, "session", json.clone()), now),
                Err(SessionError::Forged),
                "{json}"
            );
            assert_eq!(
                key.open_link(&sealed(&key, "link", json.clone()), now),
                Err(SessionError::Forged),
                "{json}"
            );
        }
        // An account's link names exactly one of its grounds; a session carries none.
        for json in [
            serde_json::json!({"aud": "account", "sub": "x", "acct": "a1", "exp": exp, "n": "a"}),
            serde_json::json!({"aud": "account", "sub": "x", "acct": "a1", "exp": exp, "n": "a", "tok": "01tok", "by": "ops"}),
            serde_json::json!({"aud": "operator", "sub": "x", "exp": exp, "n": "a", "tok": "01tok"}),
        ] {
            assert_eq!(
                key.open_link(&sealed(&key, "link", json.clone()), now),
                Err(SessionError::Forged),
                "{json}"
            );
        }
        let with_grounds =
            serde_json::json!({"aud": "operator", "sub": "x", "exp": exp, "n": "a", "gexp": exp});
        assert_eq!(
            key.open_session(&sealed(&key, "session", with_grounds), now),
            Err(SessionError::Forged)
        );
        let plain = serde_json::json!({"aud": "operator", "sub": "x", "exp": exp, "n": "a"});
        assert!(key
            .open_session(&sealed(&key, "session", plain), now)
            .is_ok());
    }

    #[test]
    fn a_changed_claim_breaks_the_signature() {
        let key = ConsoleKey::random();
        let now = Timestamp(1_700_000_000_000);
        let account = Audience::Account {
            account_id: crate::ids::id("a1"),
            actor: "t1".into(),
        };
        let (cookie, signed) = key.session(account.clone(), now.plus(SESSION_TTL));
        let opened = key.open_session(&cookie, now).unwrap();
        assert_eq!(opened, signed);
        assert_eq!(opened.audience, account);
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
        let (_, other) = key.session(account, now.plus(SESSION_TTL));
        assert_ne!(key.csrf(&other.session_id), key.csrf(&signed.session_id));
    }

    #[test]
    fn keys_are_read_from_hex_or_text_and_must_be_long_enough() {
        assert!(ConsoleKey::from_text(&"ab".repeat(32)).is_ok());
        assert!(ConsoleKey::from_text("short").is_err());
        assert!(ConsoleKey::from_text(&"x".repeat(40)).is_ok());
        assert!(!format!("{:?}", ConsoleKey::random()).contains('['));
    }
}
