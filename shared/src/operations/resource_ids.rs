//! The ids a request names, read once from the texts a door was given (a path's segments, a
//! form's fields) into typed ids: a text that is not an id ([`crate::ids::is_id_text`]) names
//! nothing, so it is the resource not found, whichever door asked.

use super::OpsError;
use crate::domain::pull_cursor::change_id as change_id_text;
use crate::ids::{AccountId, ChangeId, SubscriptionId};
use std::str::FromStr;

/// `text` as the id `T`, used verbatim when it is an id's text (1 to [`crate::ids::MAX_ID_LEN`]
/// ASCII letters, digits, `-` or `_`); `None` otherwise.
pub fn id_of<T: FromStr>(text: &str) -> Option<T> {
    crate::ids::is_id_text(text)
        .then(|| text.parse().ok())
        .flatten()
}

/// The id of a `what` a request names, or "`what` not found".
pub fn named<T: FromStr>(text: &str, what: &'static str) -> Result<T, OpsError> {
    id_of(text).ok_or(OpsError::NotFound(what))
}

/// An account's subscription: `(account, subscription)`.
pub fn subscription_ids(
    account_id: &str,
    subscription_id: &str,
) -> Result<(AccountId, SubscriptionId), OpsError> {
    Ok((
        named(account_id, "account")?,
        named(subscription_id, "subscription")?,
    ))
}

/// A delivery: `(account, subscription, change)`; a change id that cannot be one is the delivery
/// not found.
pub fn delivery_ids(
    account_id: &str,
    subscription_id: &str,
    change_id: &str,
) -> Result<(AccountId, SubscriptionId, ChangeId), OpsError> {
    let (account_id, subscription_id) = subscription_ids(account_id, subscription_id)?;
    let change_id = change_id_text(change_id).ok_or(OpsError::NotFound("delivery"))?;
    Ok((account_id, subscription_id, change_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn missing<T: std::fmt::Debug>(r: Result<T, OpsError>) -> &'static str {
        match r {
            Err(OpsError::NotFound(what)) => what,
            other => panic!("expected not found, got {other:?}"),
        }
    }

    #[test]
    fn a_subscription_is_read_from_id_texts_and_anything_else_names_nothing() {
        let (a, s) = subscription_ids("acct_1", "01HZ-sub").unwrap();
        assert_eq!((a.as_str(), s.as_str()), ("acct_1", "01HZ-sub"));
        assert_eq!(missing(subscription_ids("acct 1", "s")), "account");
        assert_eq!(missing(subscription_ids("a", "")), "subscription");
        assert_eq!(
            missing(subscription_ids("a", &"s".repeat(65))),
            "subscription"
        );
    }

    #[test]
    fn a_delivery_whose_change_id_cannot_be_one_is_not_found() {
        let (_, _, c) = delivery_ids("a", "s", "order-1").unwrap();
        assert_eq!(c.as_str(), "order-1");
        assert_eq!(missing(delivery_ids("a", "s", "")), "delivery");
        assert_eq!(missing(delivery_ids("a/b", "s", "c")), "account");
    }
}
