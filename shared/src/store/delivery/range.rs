//! A range of one subscription's deliveries ([`SubscriptionRange`]) and the sort-key query of a
//! page of it on an index: the `by_subscription` index in change order (pull subscriptions), or
//! their account's event listing (push subscriptions, read by [`super::by_subscription`]).

use crate::ids::{AccountId, ChangeId, SubscriptionId};
use crate::store::attrs::{by_subscription, listing};
use crate::store::expr::{s, Expr};
use crate::store::read::Query;
use crate::store::Item;

/// The upper bound of a `by_subscription` read.
#[derive(Debug, Clone, Copy)]
pub enum Upper<'a> {
    /// `sub_sort <= bound`.
    Through(&'a ChangeId),
    /// `sub_sort < bound`.
    Before(&'a ChangeId),
}

impl<'a> Upper<'a> {
    /// The bound's change and whether it is inclusive.
    pub(super) fn bound(self) -> (&'a ChangeId, bool) {
        match self {
            Upper::Through(c) => (c, true),
            Upper::Before(c) => (c, false),
        }
    }
}

/// A range of one subscription's deliveries: on the `by_subscription` index in change order,
/// or (`listing`) through its account's event listing in the order changes were ingested.
#[derive(Debug, Clone)]
pub struct SubscriptionRange<'a> {
    pub subscription_id: &'a SubscriptionId,
    /// Exclusive lower bound of `sub_sort` (the change id).
    pub after: Option<&'a ChangeId>,
    pub upper: Option<Upper<'a>>,
    /// Change order (`true`) or newest first.
    pub forward: bool,
    /// `Some(account)`: a push subscription, whose deliveries are not on `by_subscription`.
    /// The range is read from the account's event listing (keys only) and each change's
    /// delivery to the subscription fetched by its key, the bounds placed at their changes'
    /// listing positions. `None`: the `by_subscription` index (pull subscriptions).
    pub listing: Option<&'a AccountId>,
}

/// The sort-key bounds of a range on one of `index`'s partitions (`partition`, its names and
/// values in `e`).
pub(super) struct IndexRange<'q> {
    pub(super) index: &'q str,
    pub(super) partition: &'q str,
    pub(super) e: Expr,
    pub(super) sort_attr: &'q str,
    /// Exclusive lower bound.
    pub(super) lo: Option<&'q str>,
    /// Upper bound, `true`: inclusive.
    pub(super) hi: Option<(&'q str, bool)>,
}

/// The query of a page of `r`, in `range`'s direction: the key condition `partition` plus
/// the bounds, after `lo`, up to `hi`. With both bounds it is `BETWEEN`, inclusive at both
/// ends (DynamoDB has no exclusive BETWEEN): the reader drops the bound entries
/// ([`excluded`]).
pub(super) fn sort_range(
    table: &str,
    r: IndexRange<'_>,
    range: &SubscriptionRange<'_>,
    start: Option<Item>,
    limit: i32,
) -> Query {
    let IndexRange {
        index,
        partition,
        mut e,
        sort_attr,
        lo,
        hi,
    } = r;
    let mut key = partition.to_string();
    if lo.is_some() || hi.is_some() {
        e = e.name("#sort", sort_attr);
    }
    match (lo, hi) {
        (Some(l), Some((h, _))) => {
            e = e.value(":lo", s(l)).value(":hi", s(h));
            key.push_str(" AND #sort BETWEEN :lo AND :hi");
        }
        (Some(l), None) => {
            e = e.value(":lo", s(l));
            key.push_str(" AND #sort > :lo");
        }
        (None, Some((h, inclusive))) => {
            e = e.value(":hi", s(h));
            key.push_str(if inclusive {
                " AND #sort <= :hi"
            } else {
                " AND #sort < :hi"
            });
        }
        (None, None) => {}
    }
    Query {
        table: table.to_owned(),
        index: Some(index.to_owned()),
        key_condition: key,
        expr: e,
        limit: Some(limit),
        start,
        backwards: !range.forward,
        ..Query::default()
    }
}

/// The index query of a page of `range`. BETWEEN is inclusive at both ends: the entries at
/// an exclusive bound are dropped from the page ([`excluded`]).
pub fn range_query(
    table: &str,
    range: &SubscriptionRange<'_>,
    start: Option<Item>,
    limit: i32,
) -> Query {
    let e = Expr::new()
        .name("#sk_sub", by_subscription::KEY)
        .value(":sub", s(range.subscription_id));
    let r = IndexRange {
        index: by_subscription::INDEX,
        partition: "#sk_sub = :sub",
        e,
        sort_attr: by_subscription::SORT,
        lo: range.after.map(ChangeId::as_str),
        hi: range.upper.map(|u| {
            let (c, inclusive) = u.bound();
            (c.as_str(), inclusive)
        }),
    };
    sort_range(table, r, range, start, limit)
}

/// The change of an entry: its `sub_sort`, or the change of an event listing position
/// (`{millis}#{change}`, a listing page's last evaluated key).
pub(super) fn sort_of(item: &Item) -> Option<&str> {
    let text = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).map(String::as_str);
    text(by_subscription::SORT).or_else(|| {
        text(listing::SORT)
            .and_then(|p| p.split_once('#'))
            .map(|(_, c)| c)
    })
}

/// Whether an index entry sits on one of `range`'s exclusive bounds.
pub fn excluded(range: &SubscriptionRange<'_>, entry: &Item) -> bool {
    let sort = sort_of(entry);
    let below = range.after.is_some_and(|lo| sort == Some(lo.as_str()));
    let above = matches!(range.upper, Some(Upper::Before(hi)) if sort == Some(hi.as_str()));
    below || above
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::time::Timestamp;
    use crate::ids::id;
    use crate::store::keys;

    #[test]
    fn a_range_query_names_its_bounds_on_the_index() {
        let (sub, lo, hi): (SubscriptionId, ChangeId, ChangeId) =
            (id("sub1"), id("01A"), id("01F"));
        let range = |after, upper, forward| SubscriptionRange {
            subscription_id: &sub,
            after,
            upper,
            forward,
            listing: None,
        };
        let q = range_query(
            "t",
            &range(Some(&lo), Some(Upper::Before(&hi)), true),
            None,
            10,
        );
        assert_eq!(q.index.as_deref(), Some(by_subscription::INDEX));
        assert_eq!(
            q.key_condition,
            "#sk_sub = :sub AND #sort BETWEEN :lo AND :hi"
        );
        assert_eq!(q.expr.names["#sort"], by_subscription::SORT);
        assert!(!q.backwards);
        assert_eq!(q.limit, Some(10));
        let q = range_query("t", &range(None, Some(Upper::Through(&hi)), false), None, 1);
        assert_eq!(q.key_condition, "#sk_sub = :sub AND #sort <= :hi");
        assert!(q.backwards);
        let q = range_query("t", &range(Some(&lo), None, true), None, 1);
        assert_eq!(q.key_condition, "#sk_sub = :sub AND #sort > :lo");
        let q = range_query("t", &range(None, None, true), None, 1);
        assert_eq!(q.key_condition, "#sk_sub = :sub");
        assert!(!q.expr.names.contains_key("#sort"));
        // A listing page's last evaluated key names its change by its listing position.
        let listed = Item::from([(
            listing::SORT.to_string(),
            s(keys::time_sort(Timestamp(7), "01B")),
        )]);
        assert_eq!(sort_of(&listed), Some("01B"));
        let entry = |sort: &str| Item::from([(by_subscription::SORT.to_string(), s(sort))]);
        let r = range(Some(&lo), Some(Upper::Before(&hi)), true);
        assert!(excluded(&r, &entry("01A")) && excluded(&r, &entry("01F")));
        assert!(!excluded(&r, &entry("01C")));
        let through = range(None, Some(Upper::Through(&hi)), true);
        assert!(!excluded(&through, &entry("01F")), "Through is inclusive");
    }
}
