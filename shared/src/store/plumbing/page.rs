//! One page of the items of a partition that share a sort-key prefix (an account's integrations,
//! its subscriptions, its token references), in sort-key order. A page continues after the id
//! (the sort key after the prefix) of the last item read; [`super::cursor`] makes that id the
//! list's opaque cursor.

use super::expr::{s, Expr};
use super::item::{from_item, Item, StoreError};
use super::read::{self, Query};
use serde::de::DeserializeOwned;
use std::collections::HashMap;

/// Which page to read.
#[derive(Debug, Clone)]
pub struct PrefixPage<'a> {
    pub table: &'a str,
    pub pk: &'a str,
    pub prefix: &'a str,
    pub limit: u32,
    /// Continue after the item with this id.
    pub after_id: Option<&'a str>,
    /// Narrows the page (expression and its values), which may then come back short with an id
    /// to continue after.
    pub filter: Option<(String, Expr)>,
}

impl PrefixPage<'_> {
    /// The query of this page (consistent: a list reflects every write acknowledged before it).
    pub fn query(&self) -> Query {
        let mut expr = Expr::new()
            .value(":pk", s(self.pk))
            .value(":p", s(self.prefix));
        let filter = self.filter.as_ref().map(|(expression, values)| {
            expr.names.extend(values.names.clone());
            expr.values.extend(values.values.clone());
            expression.clone()
        });
        Query {
            table: self.table.to_owned(),
            key_condition: "pk = :pk AND begins_with(sk, :p)".into(),
            filter,
            expr,
            limit: Some(self.limit as i32),
            start: self.after_id.map(|after| {
                Item::from([
                    ("pk".to_string(), s(self.pk)),
                    ("sk".to_string(), s(format!("{}{after}", self.prefix))),
                ])
            }),
            ..Query::default()
        }
    }

    /// The id the next page continues after, from where DynamoDB stopped.
    fn next_id(
        &self,
        next: Option<HashMap<String, aws_sdk_dynamodb::types::AttributeValue>>,
    ) -> Option<String> {
        next.and_then(|k| k.get("sk").and_then(|v| v.as_s().ok()).cloned())
            .and_then(|sk| sk.strip_prefix(self.prefix).map(str::to_owned))
    }
}

/// The page's items and the id to continue after (`None` on the last page).
pub async fn read<T: DeserializeOwned>(
    dynamo: &aws_sdk_dynamodb::Client,
    q: &PrefixPage<'_>,
) -> Result<(Vec<T>, Option<String>), StoreError> {
    let page = read::query_page(dynamo, &q.query()).await?;
    let items = page
        .items
        .into_iter()
        .map(from_item)
        .collect::<Result<Vec<T>, _>>()?;
    Ok((items, q.next_id(page.next)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_reads_one_prefix_of_one_partition_from_after_the_last_id() {
        let q = PrefixPage {
            table: "t",
            pk: "ACCT#a",
            prefix: "SUB#",
            limit: 2,
            after_id: Some("01x"),
            filter: Some((
                "integration_id = :iid".into(),
                Expr::new().value(":iid", s("i")),
            )),
        }
        .query();
        assert_eq!(q.key_condition, "pk = :pk AND begins_with(sk, :p)");
        assert_eq!(q.filter.as_deref(), Some("integration_id = :iid"));
        assert_eq!(q.expr.values[":p"], s("SUB#"));
        assert_eq!(q.expr.values[":iid"], s("i"));
        assert_eq!(q.limit, Some(2));
        assert!(q.index.is_none() && !q.eventual, "a consistent table query");
        assert_eq!(q.start.unwrap()["sk"], s("SUB#01x"));
    }

    #[test]
    fn the_next_id_is_the_sort_key_after_the_prefix() {
        let q = PrefixPage {
            table: "t",
            pk: "p",
            prefix: "INTEG#",
            limit: 1,
            after_id: None,
            filter: None,
        };
        let key = Item::from([
            ("pk".to_string(), s("p")),
            ("sk".to_string(), s("INTEG#01y")),
        ]);
        assert_eq!(q.next_id(Some(key)).as_deref(), Some("01y"));
        assert_eq!(q.next_id(None), None);
    }
}
