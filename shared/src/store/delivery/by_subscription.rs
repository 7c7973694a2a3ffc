//! The reads of one subscription's deliveries, page by page ([`SubscriptionRange`]): on the
//! `by_subscription` index (pull reads; a pull subscription's history and replay walks), or
//! through its account's event listing (a push subscription's history and replay walks), each
//! page filtered as stored ([`Filter`]).

use super::item::Delivery;
use super::range::{
    excluded, range_query, sort_of, sort_range, IndexRange, SubscriptionRange, Upper,
};
use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, ChangeId, SubscriptionId};
use crate::store::attrs::{by_subscription, listing, STATUS};
use crate::store::event::events_list_key;
use crate::store::expr::{s, Expr};
use crate::store::keys;
use crate::store::read::{self, Consistency};
use crate::store::{Item, StoreError};

/// The listing position of `change`'s event (`None`: the event is gone).
async fn listing_position(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    change: &ChangeId,
) -> Result<Option<String>, StoreError> {
    let (pk, sk) = crate::store::event::key(account_id, change);
    let item = read::get_with(
        dynamo,
        table,
        &pk,
        &sk,
        Consistency::Eventual,
        Some(listing::SORT),
    )
    .await?;
    Ok(item.and_then(|i| i.get(listing::SORT)?.as_s().ok().cloned()))
}

/// One page of a push subscription's range read through the account's event listing: the
/// keys of the subscription's delivery of each change listed (with the change as their
/// `sub_sort`), and where the listing stopped. The bounds are their changes' listing
/// positions, with the key conditions of [`range_query`] (BETWEEN, inclusive, only when both
/// are given; [`excluded`] drops the bound entries). A bound whose event is gone bounds by
/// change id instead (the listing read from its end in that direction).
async fn listing_entries(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    range: &SubscriptionRange<'_>,
    start: Option<Item>,
    limit: i32,
) -> Result<(Vec<Item>, Option<Item>), StoreError> {
    let lo = match range.after {
        Some(c) => listing_position(dynamo, table, account_id, c).await?,
        None => None,
    };
    let (hi_change, hi_inclusive) = match range.upper.map(Upper::bound) {
        Some((c, inclusive)) => (Some(c), inclusive),
        None => (None, false),
    };
    let hi = match hi_change {
        Some(c) => listing_position(dynamo, table, account_id, c).await?,
        None => None,
    };
    let e = Expr::new()
        .name("#lk", listing::KEY)
        .value(":lk", s(events_list_key(account_id)));
    let r = IndexRange {
        index: listing::INDEX,
        partition: "#lk = :lk",
        e,
        sort_attr: listing::SORT,
        lo: lo.as_deref(),
        hi: hi.as_deref().map(|h| (h, hi_inclusive)),
    };
    let page = read::query_page(dynamo, &sort_range(table, r, range, start, limit)).await?;
    let after_lo = |c: &str| match (range.after, &lo) {
        (Some(after), None) => c > after.as_str(),
        _ => true,
    };
    let below_hi = |c: &str| match (hi_change, &hi) {
        (Some(bound), None) if hi_inclusive => c <= bound.as_str(),
        (Some(bound), None) => c < bound.as_str(),
        _ => true,
    };
    let sk = s(keys::delivery_sk(range.subscription_id));
    let entries = page
        .items
        .iter()
        .filter_map(|entry| {
            let pk = entry.get("pk")?.clone();
            let change = sort_of(entry)?;
            (after_lo(change) && below_hi(change)).then(|| {
                Item::from([
                    ("pk".to_string(), pk),
                    ("sk".to_string(), sk.clone()),
                    (by_subscription::SORT.to_string(), s(change)),
                ])
            })
        })
        .collect();
    Ok((entries, page.next))
}

/// One page of index entries of `range`, and where DynamoDB stopped.
async fn entries(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    range: &SubscriptionRange<'_>,
    start: Option<Item>,
    limit: i32,
) -> Result<(Vec<Item>, Option<Item>), StoreError> {
    let (items, next) = match range.listing {
        Some(account_id) => listing_entries(dynamo, table, account_id, range, start, limit).await?,
        None => {
            let page = read::query_page(dynamo, &range_query(table, range, start, limit)).await?;
            (page.items, page.next)
        }
    };
    let entries = items
        .into_iter()
        .filter(|entry| !excluded(range, entry))
        .collect();
    Ok((entries, next))
}

/// Which of a subscription's deliveries a page keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    /// The account the caller acts for: another account's item is never returned.
    pub account_id: AccountId,
    /// Any of these statuses (empty: any status).
    pub statuses: Vec<DeliveryStatus>,
    /// `occurred_at` at or after this.
    pub occurred_from: Option<Timestamp>,
    /// `occurred_at` before this.
    pub occurred_before: Option<Timestamp>,
    /// Created, and restarted if it ever was, no later than this.
    pub written_through: Option<Timestamp>,
    /// Only the delivery of this record's changes: the item's `record_id`, or for an item
    /// written before deliveries kept it, the `record_id` of its payload (the envelope). Like
    /// the others, a filter on the items a page reads anyway: it costs no extra request, but a
    /// rare record's deliveries can take many pages (each short page comes with a cursor).
    pub record_id: Option<String>,
}

impl Filter {
    pub fn account(account_id: &AccountId) -> Self {
        Filter {
            account_id: account_id.clone(),
            statuses: Vec::new(),
            occurred_from: None,
            occurred_before: None,
            written_through: None,
            record_id: None,
        }
    }

    /// Whether the stored item is kept (read as stored: before it is parsed).
    pub fn admits(&self, item: &Item) -> bool {
        let text = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).map(String::as_str);
        let millis = |k: &str| {
            item.get(k)
                .and_then(|v| v.as_n().ok())
                .and_then(|v| v.parse::<i64>().ok())
        };
        let status_ok = self.statuses.is_empty()
            || text(STATUS).is_some_and(|st| self.statuses.iter().any(|w| w.to_string() == st));
        let occurred = millis("occurred_at");
        let from_ok = self
            .occurred_from
            .is_none_or(|f| occurred.is_some_and(|o| o >= f.millis()));
        let before_ok = self
            .occurred_before
            .is_none_or(|b| occurred.is_some_and(|o| o < b.millis()));
        let written_ok = self.written_through.is_none_or(|h| {
            millis("created_at").is_some_and(|c| c <= h.millis())
                && millis("restarted_at").is_none_or(|r| r <= h.millis())
        });
        let record_ok = self
            .record_id
            .as_deref()
            .is_none_or(|want| match text("record_id") {
                Some(kept) => kept == want,
                None => text("payload")
                    .and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok())
                    .is_some_and(|envelope| {
                        envelope.get("record_id").and_then(|v| v.as_str()) == Some(want)
                    }),
            });
        text("account_id") == Some(self.account_id.as_str())
            && status_ok
            && record_ok
            && from_ok
            && before_ok
            && written_ok
    }
}

/// One page of a subscription's deliveries.
#[derive(Debug, Clone)]
pub struct DeliveryPage {
    /// The deliveries the filter kept, in index order.
    pub deliveries: Vec<Delivery>,
    /// The `sub_sort` of the last entry evaluated, when the range has more to read.
    pub last_sort: Option<ChangeId>,
    /// Where the next page starts (`None`: the range is done).
    pub next_start: Option<Item>,
}

/// One page of `range`'s deliveries that `filter` keeps. The index holds keys only (so that
/// claims, outcomes and acknowledgements, which change other attributes, do not also write
/// the index): the page's items are read from the table and filtered here. As with a
/// DynamoDB filter, `limit` counts the entries evaluated, not the deliveries kept.
pub async fn by_subscription_page(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    range: &SubscriptionRange<'_>,
    filter: &Filter,
    start: Option<Item>,
    limit: i32,
) -> Result<DeliveryPage, StoreError> {
    let (entries, next) = entries(dynamo, table, range, start, limit).await?;
    let deliveries = read::items_in_order(dynamo, table, &entries)
        .await?
        .into_iter()
        .filter(|item| filter.admits(item))
        .map(Delivery::from_item)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(DeliveryPage {
        deliveries,
        last_sort: next.as_ref().and_then(sort_of).map(ChangeId::from_stored),
        next_start: next,
    })
}

/// What pages of a range gathered.
#[derive(Debug, Clone, Default)]
pub struct Gathered {
    /// The deliveries kept, in index order (possibly more than wanted).
    pub deliveries: Vec<Delivery>,
    /// The `sub_sort` of the last entry evaluated, when the range has more to read.
    pub evaluated_to: Option<ChangeId>,
    /// The range has nothing more to read.
    pub exhausted: bool,
}

/// Reads pages of `page` entries of `range` until `wanted` deliveries passed `filter`, the
/// range is exhausted, or `rounds` pages were read.
pub async fn gather_by_subscription(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    range: &SubscriptionRange<'_>,
    filter: &Filter,
    wanted: usize,
    page: i32,
    rounds: usize,
) -> Result<Gathered, StoreError> {
    let mut gathered = Gathered::default();
    let mut start = None;
    for _ in 0..rounds {
        let read = by_subscription_page(dynamo, table, range, filter, start.take(), page).await?;
        gathered.deliveries.extend(read.deliveries);
        gathered.evaluated_to = read.last_sort;
        match read.next_start {
            Some(next) if gathered.deliveries.len() < wanted => start = Some(next),
            Some(_) => break,
            None => {
                gathered.exhausted = true;
                break;
            }
        }
    }
    Ok(gathered)
}

/// The subscription's last change id in change order (any status), if any.
pub async fn last_change(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    subscription_id: &SubscriptionId,
) -> Result<Option<ChangeId>, StoreError> {
    neighbour(dynamo, table, subscription_id, None).await
}

/// The subscription's change immediately before `change_id` in change order, if any.
pub async fn change_before(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    subscription_id: &SubscriptionId,
    change_id: &ChangeId,
) -> Result<Option<ChangeId>, StoreError> {
    neighbour(dynamo, table, subscription_id, Some(change_id)).await
}

async fn neighbour(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    subscription_id: &SubscriptionId,
    before: Option<&ChangeId>,
) -> Result<Option<ChangeId>, StoreError> {
    let range = SubscriptionRange {
        subscription_id,
        after: None,
        upper: before.map(Upper::Before),
        forward: false,
        listing: None,
    };
    let (entries, _) = entries(dynamo, table, &range, None, 1).await?;
    Ok(entries.first().and_then(sort_of).map(ChangeId::from_stored))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;
    use crate::store::expr::n;
    use std::collections::HashMap;

    fn stored(status: &str, occurred: i64, created: i64, restarted: Option<i64>) -> Item {
        let num = |v: i64| n(v);
        let mut item: Item = HashMap::from([
            ("account_id".to_string(), s("acc_1")),
            ("status".to_string(), s(status)),
            ("occurred_at".to_string(), num(occurred)),
            ("created_at".to_string(), num(created)),
        ]);
        if let Some(r) = restarted {
            item.insert("restarted_at".into(), num(r));
        }
        item
    }

    #[test]
    fn a_filter_keeps_only_its_account_statuses_window_and_horizon() {
        let item = stored("pending", 100, 200, None);
        assert!(Filter::account(&id("acc_1")).admits(&item));
        assert!(
            !Filter::account(&id("acc_2")).admits(&item),
            "another account's item"
        );
        let statuses = |st: Vec<DeliveryStatus>| Filter {
            statuses: st,
            ..Filter::account(&id("acc_1"))
        };
        assert!(statuses(vec![DeliveryStatus::Dead, DeliveryStatus::Pending]).admits(&item));
        assert!(!statuses(vec![DeliveryStatus::Delivered]).admits(&item));
        let window = |from, before| Filter {
            occurred_from: from,
            occurred_before: before,
            ..Filter::account(&id("acc_1"))
        };
        assert!(window(Some(Timestamp(100)), Some(Timestamp(101))).admits(&item));
        assert!(
            !window(Some(Timestamp(101)), None).admits(&item),
            "before the window"
        );
        assert!(
            !window(None, Some(Timestamp(100))).admits(&item),
            "the end is exclusive"
        );
        let horizon = |h| Filter {
            written_through: Some(Timestamp(h)),
            ..Filter::account(&id("acc_1"))
        };
        assert!(horizon(200).admits(&item));
        assert!(!horizon(199).admits(&item), "created after the horizon");
        let restarted = stored("pending", 100, 200, Some(300));
        assert!(horizon(300).admits(&restarted));
        assert!(
            !horizon(299).admits(&restarted),
            "restarted after the horizon"
        );
        let record = |r: &str| Filter {
            record_id: Some(r.into()),
            ..Filter::account(&id("acc_1"))
        };
        let mut kept = item.clone();
        kept.insert("record_id".into(), s("ord-7"));
        assert!(record("ord-7").admits(&kept));
        assert!(!record("ord-8").admits(&kept));
        let mut older = item.clone();
        older.insert(
            "payload".into(),
            s(r#"{"type":"order.updated","record_type":"order","record_id":"ord-7"}"#),
        );
        assert!(record("ord-7").admits(&older), "found through the payload");
        assert!(!record("ord-8").admits(&older));
        assert!(!record("ord-7").admits(&item), "no record id, no payload");
        let mut no_account = item.clone();
        no_account.remove("account_id");
        assert!(!Filter::account(&id("acc_1")).admits(&no_account));
    }
}
