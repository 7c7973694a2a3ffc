//! An account's health over the last day, for the operators' list of accounts: what its
//! deliveries did, what waits on an operator, and when trouble last came. Computed on read from
//! the listings the account already has (nothing on the delivery path counts for it):
//!
//! * delivered — the account's events listing (`EVENTS#{account}`) from a day ago, reading the
//!   events that are `sent` and adding up their push deliveries (a `sent` event is one whose
//!   every counted delivery was delivered);
//! * dead and failed — its needs-attention listing (`ATTENTION#{account}`) from a day ago;
//! * paused subscriptions — the partition query of its paused subscriptions (paused at any
//!   time: a paused subscription waits until an operator resumes it);
//! * notices failed — its notification deliveries that failed for good in the window (the
//!   notification table's `trouble` index from a day ago: [`store::failed_notices`]).
//!
//! Each listing is read at most [`listing::MAX_ROUNDS`] index pages of a hundred keys; an
//! account with more than that in the window is shown with the figures read so far and
//! `complete: false` (an operator opens its Event monitor for the rest).

use super::event_monitor::MonitorError;
use super::resource_ids::id_of;
use super::OpsError;
use crate::domain::event::EventStatus;
use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::time::{Timestamp, DAY};
use crate::ids::AccountId;
use crate::store;
use crate::store::account::Account;
use crate::store::event::EventQuery;
use crate::store::keys;
use crate::store::listing;
use serde::Serialize;
use std::str::FromStr;

/// How far back the figures look.
pub const WINDOW: std::time::Duration = DAY;
/// Items one figure reads at most (the listing's bound: ten index pages of a hundred keys).
pub(crate) const MAX_READ: u32 = (listing::MAX_ROUNDS as u32) * 100;

/// An account's figures over [`WINDOW`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Health {
    /// Push deliveries of the window's `sent` events.
    pub delivered: u64,
    /// Deliveries that went `dead` in the window (and are still dead).
    pub dead: u64,
    /// Deliveries that `failed` in the window (and still are).
    pub failed: u64,
    /// Subscriptions paused now.
    pub paused_subscriptions: u64,
    /// Notification deliveries that failed for good in the window (and still are failed).
    pub notices_failed: u64,
    /// The newest trouble: a dead or failed delivery or a failed notification of the window, or
    /// a pause (any time).
    pub last_trouble_at: Option<Timestamp>,
    /// Every listing of the window was read to its end (`false`: the figures are lower bounds).
    pub complete: bool,
}

impl Health {
    /// The figures of what the reads found: the push deliveries of each `sent` event, the
    /// status and settling time of each dead or failed delivery, when each paused
    /// subscription was paused, and when each failed notification failed.
    pub fn of(
        sent_push: &[u32],
        attention: &[(DeliveryStatus, Timestamp)],
        paused_at: &[Option<Timestamp>],
        notices_failed_at: &[Timestamp],
        complete: bool,
    ) -> Self {
        let settled = |status| attention.iter().filter(|(s, _)| *s == status).count() as u64;
        let last_trouble_at = attention
            .iter()
            .map(|(_, at)| *at)
            .chain(paused_at.iter().flatten().copied())
            .chain(notices_failed_at.iter().copied())
            .max();
        Health {
            delivered: sent_push.iter().copied().map(u64::from).sum(),
            dead: settled(DeliveryStatus::Dead),
            failed: settled(DeliveryStatus::Failed),
            paused_subscriptions: paused_at.len() as u64,
            notices_failed: notices_failed_at.len() as u64,
            last_trouble_at,
            complete,
        }
    }

    /// Anything waiting on an operator.
    pub fn troubled(&self) -> bool {
        self.dead + self.failed + self.paused_subscriptions + self.notices_failed > 0
    }
}

/// An account with its figures.
#[derive(Debug, Clone, PartialEq)]
pub struct AccountHealth {
    pub account: Account,
    pub health: Health,
}

/// Orders accounts newest trouble first; accounts without trouble follow, by name (then id).
pub(crate) fn by_trouble(accounts: &mut [AccountHealth]) {
    accounts.sort_by(|a, b| {
        b.health
            .last_trouble_at
            .cmp(&a.health.last_trouble_at)
            .then_with(|| {
                a.account
                    .name
                    .to_lowercase()
                    .cmp(&b.account.name.to_lowercase())
            })
            .then_with(|| a.account.account_id.cmp(&b.account.account_id))
    });
}

/// The figures of one account at `now`: one partition query (paused subscriptions), two
/// listing reads (each an index query and a batch read per hundred keys of the window) on the
/// delivery table `table`, and one `trouble` index query on the notification table `notices`.
pub async fn health(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    notices: &str,
    account_id: &AccountId,
    now: Timestamp,
) -> Result<Health, MonitorError> {
    let since = now.minus(WINDOW);
    let (failed_notices, failed_read) = store::failed_notices::failed(
        dynamo,
        notices,
        account_id,
        Some(&keys::time_sort(since, "")),
        false,
        MAX_READ as usize,
        listing::MAX_ROUNDS,
    )
    .await?;
    let paused = store::subscription::paused(dynamo, table, account_id).await?;
    let attention = store::delivery::attention_from(
        dynamo,
        table,
        account_id,
        Some(keys::time_sort(since, "")),
        false,
        MAX_READ,
        now,
    )
    .await?;
    let sent = store::event::list_events(
        dynamo,
        table,
        account_id,
        &EventQuery {
            statuses: vec![EventStatus::Sent],
            from: Some(since),
            limit: MAX_READ,
            ..EventQuery::default()
        },
        now,
    )
    .await?;
    let complete = attention.next_cursor.is_none() && sent.next_cursor.is_none() && failed_read;
    let sent_push: Vec<u32> = sent.items.iter().map(|e| e.push_subscribers).collect();
    let settled: Vec<(DeliveryStatus, Timestamp)> = attention
        .items
        .iter()
        .map(|d| (d.status, d.updated_at))
        .collect();
    // A subscription paused before pauses were timed counts from its last change.
    let paused_at: Vec<Option<Timestamp>> = paused
        .iter()
        .map(|s| s.paused_at.or(Some(s.updated_at)))
        .collect();
    let notices_failed_at: Vec<Timestamp> = failed_notices
        .iter()
        .map(|d| d.failed_at.unwrap_or(d.updated_at))
        .collect();
    Ok(Health::of(
        &sent_push,
        &settled,
        &paused_at,
        &notices_failed_at,
        complete,
    ))
}

/// The figures of each of `accounts` (in their order).
pub(crate) async fn health_of_each(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    notices: &str,
    accounts: Vec<Account>,
    now: Timestamp,
) -> Result<Vec<AccountHealth>, MonitorError> {
    let mut out = Vec::with_capacity(accounts.len());
    for account in accounts {
        let health = health(dynamo, table, notices, &account.account_id, now).await?;
        out.push(AccountHealth { account, health });
    }
    Ok(out)
}

/// Which accounts a page lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountSearch {
    /// An account id (that account alone, when it exists) or the start of names (without
    /// regard to case); empty: every account.
    pub text: String,
    /// The account id the page continues after (the listing is in id order).
    pub after: Option<AccountId>,
    pub limit: u32,
}

/// Accounts per page at most (and by default [`DEFAULT_ACCOUNTS_PAGE`]): each account listed
/// costs its own reads.
pub(crate) const MAX_ACCOUNTS_PAGE: u32 = 50;
pub(crate) const DEFAULT_ACCOUNTS_PAGE: u32 = 25;
/// Longest search text.
pub(crate) const MAX_SEARCH_CHARS: usize = 200;

/// A search of the accounts as a request writes it (the JSON door's `?q=&limit=&cursor=`, the
/// console's search form).
#[derive(Debug, Clone, Default)]
pub struct SearchText {
    /// An account id or the start of names; surrounding spaces are no part of it.
    pub q: Option<String>,
    pub limit: Option<u32>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

impl SearchText {
    /// The search, or the first value refused (the limit, the text, then the cursor).
    pub fn read(&self) -> Result<AccountSearch, OpsError> {
        let limit = match self.limit {
            None => DEFAULT_ACCOUNTS_PAGE,
            Some(n) if (1..=MAX_ACCOUNTS_PAGE).contains(&n) => n,
            Some(n) => {
                return Err(OpsError::invalid(
                    "limit",
                    format!("must be between 1 and {MAX_ACCOUNTS_PAGE}; got {n}"),
                ))
            }
        };
        let text = self.q.as_deref().unwrap_or("").trim().to_owned();
        if text.chars().count() > MAX_SEARCH_CHARS {
            return Err(OpsError::invalid(
                "q",
                format!("must be at most {MAX_SEARCH_CHARS} characters"),
            ));
        }
        let after = match self.cursor.as_deref() {
            None => None,
            Some(c) => Some(
                store::cursor::decode(c)
                    .and_then(|position| id_of(&position))
                    .ok_or_else(OpsError::bad_cursor)?,
            ),
        };
        Ok(AccountSearch { text, after, limit })
    }
}

/// Whether an account's name starts with `prefix`, without regard to case.
pub(crate) fn name_starts_with(name: &str, prefix: &str) -> bool {
    name.to_lowercase().starts_with(&prefix.to_lowercase())
}

/// Accounts read per listing page while searching names (the listing's id order, so a name
/// search reads pages until enough match, at most [`listing::MAX_ROUNDS`] of them).
const SEARCH_PAGE: i32 = 100;

/// One page of accounts with their figures, newest trouble first, and the account id the
/// next page continues after. Reads the `ACCOUNTS` listing (keys only, then the accounts by
/// batch); an id is looked up directly. `notices`: the notification table.
pub async fn list_accounts(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    notices: &str,
    search: &AccountSearch,
    now: Timestamp,
) -> Result<(Vec<AccountHealth>, Option<AccountId>), MonitorError> {
    let text = search.text.trim();
    let limit = search.limit.max(1) as usize;
    let (accounts, next) = if text.is_empty() {
        store::account::page_after(dynamo, table, search.after.as_ref(), limit as i32).await?
    } else {
        let by_id = match (
            search.after.is_none(),
            crate::ids::is_id_text(text)
                .then(|| AccountId::from_str(text).ok())
                .flatten(),
        ) {
            (true, Some(id)) => store::account::get(dynamo, table, &id).await?,
            _ => None,
        };
        match by_id {
            Some(account) => (vec![account], None),
            None => search_names(dynamo, table, text, search.after.clone(), limit).await?,
        }
    };
    let mut listed = health_of_each(dynamo, table, notices, accounts, now).await?;
    by_trouble(&mut listed);
    Ok((listed, next))
}

async fn search_names(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    prefix: &str,
    mut after: Option<AccountId>,
    limit: usize,
) -> Result<(Vec<Account>, Option<AccountId>), MonitorError> {
    let mut found = Vec::new();
    for _ in 0..listing::MAX_ROUNDS {
        let (page, next) =
            store::account::page_after(dynamo, table, after.as_ref(), SEARCH_PAGE).await?;
        for account in page {
            after = Some(account.account_id.clone());
            if name_starts_with(&account.name, prefix) {
                found.push(account);
                if found.len() == limit {
                    return Ok((found, after));
                }
            }
        }
        if next.is_none() {
            return Ok((found, None));
        }
    }
    Ok((found, after))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;

    fn account(name: &str, id_text: &str) -> Account {
        Account::new(id(id_text), name.into(), vec![], Timestamp(0))
    }

    fn with(name: &str, id_text: &str, last: Option<i64>) -> AccountHealth {
        AccountHealth {
            account: account(name, id_text),
            health: Health {
                last_trouble_at: last.map(Timestamp),
                ..Health::default()
            },
        }
    }

    #[test]
    fn a_name_search_is_a_prefix_without_regard_to_case() {
        assert!(name_starts_with("Acme Rockets", "acme"));
        assert!(name_starts_with("Äpfel GmbH", "äp"));
        assert!(!name_starts_with("Rocket Acme", "acme"));
    }

    #[test]
    fn accounts_are_ordered_newest_trouble_first_then_by_name() {
        let mut list = vec![
            with("beta", "a2", None),
            with("Alpha", "a1", None),
            with("old trouble", "a3", Some(10)),
            with("new trouble", "a4", Some(20)),
        ];
        by_trouble(&mut list);
        let names: Vec<&str> = list.iter().map(|a| a.account.name.as_str()).collect();
        assert_eq!(names, ["new trouble", "old trouble", "Alpha", "beta"]);
    }

    #[test]
    fn health_counts_delivered_push_deliveries_dead_failed_paused_and_failed_notices_with_the_newest_trouble(
    ) {
        let h = Health::of(
            &[3, 3],
            &[
                (DeliveryStatus::Dead, Timestamp(50)),
                (DeliveryStatus::Failed, Timestamp(70)),
            ],
            &[Some(Timestamp(60))],
            &[Timestamp(65), Timestamp(80)],
            true,
        );
        assert_eq!(
            h,
            Health {
                delivered: 6,
                dead: 1,
                failed: 1,
                paused_subscriptions: 1,
                notices_failed: 2,
                last_trouble_at: Some(Timestamp(80)),
                complete: true,
            }
        );
        assert!(h.troubled());
        assert!(!Health::of(&[5], &[], &[], &[], true).troubled());
        assert!(Health::of(&[], &[], &[], &[Timestamp(1)], true).troubled());
    }

    fn refused_field(search: SearchText) -> String {
        match search.read() {
            Err(OpsError::Invalid { field, .. }) => field,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_search_is_trimmed_and_pages_by_default_at_twenty_five_accounts() {
        let search = SearchText {
            q: Some("  Acme ".into()),
            ..SearchText::default()
        }
        .read()
        .unwrap();
        assert_eq!(search.text, "Acme");
        assert_eq!(search.limit, DEFAULT_ACCOUNTS_PAGE);
        assert_eq!(search.after, None);
        let next = SearchText {
            limit: Some(MAX_ACCOUNTS_PAGE),
            cursor: Some(store::cursor::encode("acct_9")),
            ..SearchText::default()
        }
        .read()
        .unwrap();
        assert_eq!(next.after.map(|a| a.to_string()).as_deref(), Some("acct_9"));
        assert_eq!(next.limit, MAX_ACCOUNTS_PAGE);
    }

    #[test]
    fn a_search_refuses_a_page_too_large_a_text_too_long_and_a_foreign_cursor() {
        let limit = |n| SearchText {
            limit: Some(n),
            ..SearchText::default()
        };
        assert_eq!(refused_field(limit(0)), "limit");
        assert_eq!(refused_field(limit(MAX_ACCOUNTS_PAGE + 1)), "limit");
        let long = SearchText {
            q: Some("a".repeat(MAX_SEARCH_CHARS + 1)),
            ..SearchText::default()
        };
        assert_eq!(refused_field(long), "q");
        let foreign = SearchText {
            cursor: Some(store::cursor::encode("not an id")),
            ..SearchText::default()
        };
        assert_eq!(refused_field(foreign), "cursor");
    }
}
