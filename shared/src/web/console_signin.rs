//! Console sessions against stored state: signing in (a session item, the link's one use and,
//! for an account, the audit entry, in one transaction), the check of every request, and
//! signing out. The cookie and link formats are [`super::console_session`]'s; the items
//! [`crate::store::console_session`]'s.
//!
//! Why a session item rather than a "sessions valid after" mark per account and operator: a
//! session is then ended exactly (sign-out ends that one session, not every session of its
//! audience), operators have no stored record a mark could live on, and the check reads the
//! grounds themselves (the token item) so revoking or expiring a token needs no second write
//! that could be missed. An account's session also reads the account item (beside the token,
//! concurrently): the account's deletion ends every session in it, those an operator's link
//! opened included, and no new one opens. The price is two or three consistent reads per console
//! request (two round trips), off the delivery path.

use super::console_session::{Audience, Grounds, Link, Session, SessionError, SignedSession};
use super::state::ApiState;
use crate::domain::time::Timestamp;
use crate::ids::AccountId;
use crate::store::account;
use crate::store::audit::{self, AuditAction, AuditRecord};
use crate::store::console_session::{self as items, ConsoleSession};
use crate::store::token;
use crate::store::write::{send, Write, Written};
use serde::Serialize;

/// Opens `link` (its signature and expiry) and says whether it was used already.
pub async fn open_link(state: &ApiState, text: &str) -> Result<Link, SessionError> {
    let now = state.clock.now();
    let link = state.console_key(now).await.open_link(text, now)?;
    let used = items::link_used(state.dynamo(), state.table(), &link.nonce)
        .await
        .map_err(|_| SessionError::Unavailable)?;
    if used {
        return Err(SessionError::Used);
    }
    Ok(link)
}

/// A new session for `audience` on `grounds` (with `link`: the link it uses up). Answers the
/// cookie's value and the session.
pub async fn sign_in(
    state: &ApiState,
    audience: Audience,
    grounds: &Grounds,
    link: Option<&Link>,
) -> Result<(String, Session), SessionError> {
    let now = state.clock.now();
    let key = state.console_key(now).await;
    let mut expires = grounds.session_expiry(now);
    if let Some(link) = link {
        // A link's grounds were bounded when it was issued; its session is bounded the same.
        expires = expires.min(link.grounds.session_expiry(now));
    }
    let (value, signed) = key.session(audience.clone(), expires);
    let record = record_of(&signed, grounds, now);
    let unavailable = |_| SessionError::Unavailable;
    // An account's session opens only while the account is live (in the same transaction).
    let with = match (
        &audience,
        sign_in_audit(&audience, grounds, link.is_some(), expires, now),
    ) {
        (Audience::Account { account_id, .. }, Some(a)) => Some(
            Write::all([
                audit::create(state.table(), &a).map_err(unavailable)?,
                account::live_check(state.table(), account_id).map_err(unavailable)?,
            ])
            .map_err(unavailable)?,
        ),
        _ => None,
    };
    let write = items::open(
        state.table(),
        &record,
        link.map(|l| (l.nonce.as_str(), l.expires)),
        with,
    )
    .map_err(unavailable)?;
    match send(state.dynamo(), write).await {
        Ok(Written::Applied(_)) => {}
        // Refused: the account is gone, or the link was used, here or by a concurrent sign-in.
        Ok(Written::Refused(_) | Written::Conflict) => {
            if let Audience::Account { account_id, .. } = &audience {
                if !account_live(state, account_id).await? {
                    return Err(SessionError::AccountGone);
                }
            }
            return Err(match link {
                Some(_) => SessionError::Used,
                None => SessionError::Unavailable,
            });
        }
        Err(_) => return Err(SessionError::Unavailable),
    }
    if let Audience::Operator { operator_id } = &audience {
        tracing::info!(operator = %operator_id, credential = %credential(grounds, link.is_some()), "console sign-in");
    }
    let csrf = key.csrf(&signed.session_id);
    Ok((
        value,
        Session {
            session_id: signed.session_id,
            audience,
            expires: signed.expires,
            csrf,
        },
    ))
}

fn record_of(signed: &SignedSession, grounds: &Grounds, now: Timestamp) -> ConsoleSession {
    let (audience, subject, account_id) = match &signed.audience {
        Audience::Operator { operator_id } => ("operator", operator_id.clone(), None),
        Audience::Account { account_id, actor } => {
            ("account", actor.clone(), Some(account_id.clone()))
        }
    };
    ConsoleSession::new(
        signed.session_id.clone(),
        audience,
        subject,
        account_id,
        grounds.token_id().cloned(),
        now,
        signed.expires,
    )
}

/// Which credential a sign-in used, in words.
fn credential(grounds: &Grounds, by_link: bool) -> String {
    match (grounds, by_link) {
        (Grounds::Token(t), false) => format!("account token {t}"),
        (Grounds::Token(t), true) => format!("console link issued with account token {t}"),
        (Grounds::Operator { operator_id, .. }, true) => {
            format!("console link issued by operator {operator_id}")
        }
        (Grounds::Operator { .. }, false) => "operator token".to_string(),
    }
}

/// An account administrator's sign-in, for the account's audit history: who (the token, or the
/// operator whose link it was), when, with which credential, until when.
fn sign_in_audit(
    audience: &Audience,
    grounds: &Grounds,
    by_link: bool,
    expires: Timestamp,
    now: Timestamp,
) -> Option<AuditRecord> {
    let Audience::Account { account_id, .. } = audience else {
        return None;
    };
    let who = match grounds {
        Grounds::Token(t) => format!("token {t}"),
        Grounds::Operator { operator_id, .. } => operator_id.clone(),
    };
    Some(
        AuditRecord::for_account(AuditAction::ConsoleSignIn, account_id, &who, "", now)
            .detail("credential", credential(grounds, by_link))
            .detail("session_expires", expires.to_rfc3339()),
    )
}

/// The session a cookie names, checked against its item (and, when it was opened with an
/// account token, against that token) at this request.
pub async fn check(state: &ApiState, cookie: &str) -> Result<Session, SessionError> {
    let now = state.clock.now();
    let key = state.console_key(now).await;
    let signed = key.open_session(cookie, now)?;
    let (dynamo, table) = (state.dynamo(), state.table());
    let record = items::get(dynamo, table, &signed.session_id)
        .await
        .map_err(|_| SessionError::Unavailable)?
        .ok_or(SessionError::Ended)?;
    // The item is the session; the cookie must claim exactly what it holds.
    let claimed = record_of(&signed, &grounds_of(&record), record.created_at);
    if record != claimed {
        return Err(SessionError::Forged);
    }
    if record.expires <= now {
        return Err(SessionError::Expired);
    }
    // The grounds (the token, if any) and, for an account's session, the account: read
    // together, so a deleted account's sessions end whatever opened them.
    let token_live = async {
        match &record.token_id {
            Some(token_id) => Ok(token::get(dynamo, table, token_id)
                .await
                .map_err(|_| SessionError::Unavailable)?
                .is_some_and(|t| t.is_live(now))),
            None => Ok(true),
        }
    };
    let account_live = async {
        match &record.account_id {
            Some(account_id) => account_live(state, account_id).await,
            None => Ok(true),
        }
    };
    let (token_live, account_live) = tokio::try_join!(token_live, account_live)?;
    if !account_live {
        return Err(SessionError::AccountGone);
    }
    if !token_live {
        return Err(SessionError::Ended);
    }
    Ok(Session {
        csrf: key.csrf(&signed.session_id),
        session_id: signed.session_id,
        audience: signed.audience,
        expires: record.expires,
    })
}

/// Whether the account exists and is not being deleted.
async fn account_live(state: &ApiState, account_id: &AccountId) -> Result<bool, SessionError> {
    account::is_live(state.dynamo(), state.table(), account_id)
        .await
        .map_err(|_| SessionError::Unavailable)
}

/// The grounds a stored session keeps, as far as its item says (the token, if any).
fn grounds_of(record: &ConsoleSession) -> Grounds {
    match &record.token_id {
        Some(t) => Grounds::Token(t.clone()),
        None => Grounds::Operator {
            operator_id: record.subject.clone(),
            expires: None,
        },
    }
}

/// Ends `session` (sign-out): its item goes, so its cookie is refused from now on.
pub async fn sign_out(state: &ApiState, session: &Session) -> Result<(), SessionError> {
    let write =
        items::close(state.table(), &session.session_id).map_err(|_| SessionError::Unavailable)?;
    send(state.dynamo(), write)
        .await
        .map(|_| ())
        .map_err(|_| SessionError::Unavailable)
}

/// Every path of the console's pages begins with this (the links name its sign-in page); they are
/// HTML, not part of the JSON API (`openapi.yaml` leaves them out, see [`crate::api::routes`]).
pub const CONSOLE_PREFIX: &str = "/console";

/// An issued login link.
#[derive(Debug, Serialize)]
pub struct ConsoleLinkView {
    /// The link's path; put the API's base URL in front.
    pub url: String,
    /// `operator` or `account`.
    pub audience: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_id: Option<AccountId>,
    pub expires_at: String,
    /// How long the link may be used, in seconds.
    pub expires_in: u64,
}

/// A login link's view for `audience` on `grounds`, valid from now.
pub async fn issue(state: &ApiState, audience: Audience, grounds: &Grounds) -> ConsoleLinkView {
    let now = state.clock.now();
    let key = state.console_key(now).await;
    let (token, expires) = key.link(audience.clone(), grounds, now);
    let (kind, account_id) = match audience {
        Audience::Operator { .. } => ("operator", None),
        Audience::Account { account_id, .. } => ("account", Some(account_id)),
    };
    ConsoleLinkView {
        url: format!("{CONSOLE_PREFIX}/login?link={token}"),
        audience: kind,
        account_id,
        expires_at: expires.to_rfc3339(),
        expires_in: expires.since(now).as_secs(),
    }
}
