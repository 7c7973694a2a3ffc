//! The `listing` index (keys only): an account's time listings — its events (`EVENTS#…`), its
//! needs-attention deliveries (`ATTENTION#…`) — read a page at a time behind an opaque cursor.
//! The index holds keys only (a status change of a listed item would otherwise bill an index
//! write), so each index page's items are read from the table and filtered by the caller's
//! `keep`.

use super::attrs::listing;
use super::cursor;
use super::expr::{s, Expr};
use super::item::{Item, StoreError};
use super::keys;
use super::read;
use crate::ids::{AccountId, ChangeId, SubscriptionId};
use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Index pages read for one listing page before it is returned short, with a cursor to go on.
pub(crate) const MAX_ROUNDS: usize = 10;
/// Items read per index page.
const FETCH: i32 = 100;

/// Why a listing could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ListingError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the cursor is not one this listing issued")]
    BadCursor,
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Pass back to read on; `None` on the last page.
    pub next_cursor: Option<String>,
}

impl Page<Item> {
    /// The page with each stored item read as its item type.
    pub fn parsed<T>(
        self,
        parse: impl Fn(Item) -> Result<T, StoreError>,
    ) -> Result<Page<T>, StoreError> {
        Ok(Page {
            items: self
                .items
                .into_iter()
                .map(parse)
                .collect::<Result<_, _>>()?,
            next_cursor: self.next_cursor,
        })
    }
}

/// A position in one of an account's listings. Opaque to callers: the one list-cursor encoding
/// ([`super::cursor`]) of its JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListingCursor {
    /// Which listing (`events`, `attention`): a cursor is refused by the others.
    #[serde(rename = "l")]
    list: String,
    #[serde(rename = "s")]
    list_sort: String,
    #[serde(rename = "p")]
    pk: String,
    #[serde(rename = "k")]
    sk: String,
}

impl ListingCursor {
    /// The cursor: `{time}.{change}` of an event (`events`), `{time}.{change}.{subscription}`
    /// of a delivery (`attention`); the keys of the position follow from it (see `decode`).
    pub fn encode(&self) -> String {
        let time = self.list_sort.split_once('#').map_or("", |(t, _)| t);
        let change = keys::parse_event_pk(&self.pk).map_or("", |(_, c)| c);
        match self.sk.strip_prefix(keys::DELIVERY_PREFIX) {
            Some(subscription) => cursor::join(&[time, change, subscription]),
            None => cursor::join(&[time, change]),
        }
    }

    /// Decodes a cursor of listing `list` for `account_id`: every cursor of the listing's form
    /// (see `encode`) names a position in the account's own partition (an item need not sit
    /// there); anything else is [`ListingError::BadCursor`].
    pub fn decode(text: &str, list: &str, account_id: &AccountId) -> Result<Self, ListingError> {
        let n = if list == "attention" { 3 } else { 2 };
        let parts = cursor::parts(text, n).ok_or(ListingError::BadCursor)?;
        if !cursor::is_time(parts[0]) || !parts[1..].iter().all(|p| cursor::is_id(p)) {
            return Err(ListingError::BadCursor);
        }
        let change = ChangeId::from_stored(parts[1]);
        let pk = keys::event_pk(account_id, &change);
        let (tiebreak, sk) = match parts.get(2) {
            Some(subscription) => {
                let subscription: SubscriptionId =
                    subscription.parse().map_err(|_| ListingError::BadCursor)?;
                (
                    keys::delivery_id(&change, &subscription).to_string(),
                    keys::delivery_sk(&subscription),
                )
            }
            None => (change.to_string(), keys::EVENT_SK.to_string()),
        };
        Ok(ListingCursor {
            list: list.to_owned(),
            list_sort: format!("{}#{tiebreak}", parts[0]),
            pk,
            sk,
        })
    }

    fn of_key(list: &str, item: &Item) -> Option<Self> {
        let get = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).cloned();
        Some(ListingCursor {
            list: list.to_owned(),
            list_sort: get("list_sort")?,
            pk: get("pk")?,
            sk: get("sk")?,
        })
    }

    fn start_key(&self, list_key: &str) -> HashMap<String, AttributeValue> {
        HashMap::from([
            ("list_key".to_string(), s(list_key)),
            ("list_sort".to_string(), s(&self.list_sort)),
            ("pk".to_string(), s(&self.pk)),
            ("sk".to_string(), s(&self.sk)),
        ])
    }
}

/// One page's read of a listing.
pub struct Listing<'a> {
    pub list: &'static str,
    pub list_key: String,
    /// `list_sort` bounds: `[lower, upper)`.
    pub lower: Option<String>,
    pub upper: Option<String>,
    pub forward: bool,
    pub limit: u32,
    pub cursor: Option<ListingCursor>,
    /// Which of the listed items the page shows.
    pub keep: &'a (dyn Fn(&Item) -> bool + Sync),
}

/// Reads one page of a listing: index pages until `limit` items passed `keep`, the index is
/// exhausted, or [`MAX_ROUNDS`] pages were read (then the page comes back short, with a cursor).
/// The index holds keys only (a status change of a listed item would otherwise bill an index
/// write): each index page's items are read from the table (`store::read`) and filtered here.
pub async fn page(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    l: Listing<'_>,
) -> Result<Page<Item>, StoreError> {
    let mut key_condition = format!("{} = :lk", listing::KEY);
    let mut e = Expr::new().value(":lk", s(&l.list_key));
    match (&l.lower, &l.upper) {
        (Some(lo), Some(hi)) => {
            key_condition.push_str(&format!(" AND {} BETWEEN :lo AND :hi", listing::SORT));
            e = e.value(":lo", s(lo)).value(":hi", s(hi));
        }
        (Some(lo), None) => {
            key_condition.push_str(&format!(" AND {} >= :lo", listing::SORT));
            e = e.value(":lo", s(lo));
        }
        (None, Some(hi)) => {
            key_condition.push_str(&format!(" AND {} < :hi", listing::SORT));
            e = e.value(":hi", s(hi));
        }
        (None, None) => {}
    }
    let mut q = read::Query {
        table: table.into(),
        index: Some(listing::INDEX.into()),
        key_condition,
        expr: e,
        limit: Some(FETCH),
        start: l.cursor.as_ref().map(|c| c.start_key(&l.list_key)),
        backwards: !l.forward,
        ..Default::default()
    };
    let limit = l.limit.max(1) as usize;
    let mut out: Vec<Item> = Vec::new();
    for _ in 0..MAX_ROUNDS {
        let page = read::query_page(dynamo, &q).await?;
        for item in read::items_in_order(dynamo, table, &page.items).await? {
            // BETWEEN is inclusive; the upper bound is not (it never equals a stored key).
            let sort = item.get("list_sort").and_then(|v| v.as_s().ok());
            if l.upper.as_ref().is_some_and(|hi| sort >= Some(hi)) || !(l.keep)(&item) {
                continue;
            }
            out.push(item);
            if out.len() == limit {
                let next = out
                    .last()
                    .and_then(|i| ListingCursor::of_key(l.list, i))
                    .map(|c| c.encode());
                return Ok(Page {
                    items: out,
                    next_cursor: next,
                });
            }
        }
        match page.next {
            Some(k) => q.start = Some(k),
            None => {
                return Ok(Page {
                    items: out,
                    next_cursor: None,
                })
            }
        }
    }
    let next = q
        .start
        .and_then(|k| ListingCursor::of_key(l.list, &k))
        .map(|c| c.encode());
    Ok(Page {
        items: out,
        next_cursor: next,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::time::Timestamp;
    use crate::ids::id;

    #[test]
    fn cursors_round_trip_and_stay_in_their_account_and_listing() {
        let c = ListingCursor {
            list: "events".into(),
            list_sort: keys::time_sort(Timestamp(5), "c1"),
            pk: keys::event_pk(&id("a1"), &id("c1")),
            sk: keys::EVENT_SK.into(),
        };
        let text = c.encode();
        assert_eq!(text, "000000000000005.c1");
        assert_eq!(
            ListingCursor::decode(&text, "events", &id("a1")).unwrap(),
            c
        );
        // Another account's listing reads the same position in its own partition.
        assert_eq!(
            ListingCursor::decode(&text, "events", &id("a2"))
                .unwrap()
                .pk,
            keys::event_pk(&id("a2"), &id("c1"))
        );
        assert!(matches!(
            ListingCursor::decode(&text, "attention", &id("a1")),
            Err(ListingError::BadCursor)
        ));
        let d = ListingCursor {
            list: "attention".into(),
            list_sort: keys::time_sort(
                Timestamp(7),
                keys::delivery_id(&id("c1"), &id("s_1")).as_str(),
            ),
            pk: keys::event_pk(&id("a1"), &id("c1")),
            sk: keys::delivery_sk(&id("s_1")),
        };
        assert_eq!(d.encode(), "000000000000007.c1.s_1");
        assert_eq!(
            ListingCursor::decode(&d.encode(), "attention", &id("a1")).unwrap(),
            d
        );
    }

    #[test]
    fn every_cursor_of_a_listings_form_decodes_and_nothing_else_does() {
        let a: AccountId = id("a1");
        for good in [
            "000000000000000.x",
            "999999999999999.01HZ-_ab",
            &format!("000000000000001.{}", "c".repeat(64)),
        ] {
            assert!(ListingCursor::decode(good, "events", &a).is_ok(), "{good}");
            assert!(
                ListingCursor::decode(&format!("{good}.s1"), "attention", &a).is_ok(),
                "{good}"
            );
        }
        for bad in [
            "",
            "e30",
            "000000000000000",
            "000000000000000.",
            "00000000000000.c",
            "0000000000000000.c",
            "00000000000000a.c",
            "000000000000000.c#d",
            "000000000000000.c.d",
            "000000000000000.c/d",
            &format!("000000000000000.{}", "c".repeat(65)),
        ] {
            assert!(ListingCursor::decode(bad, "events", &a).is_err(), "{bad}");
        }
        for bad in [
            "000000000000000.c",
            "000000000000000.c.",
            "000000000000000.c.s.t",
            "000000000000000..s",
        ] {
            assert!(
                ListingCursor::decode(bad, "attention", &a).is_err(),
                "{bad}"
            );
        }
    }
}
