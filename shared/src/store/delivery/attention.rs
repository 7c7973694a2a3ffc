//! The account's needs-attention listing: its `dead` and `failed` deliveries (the worker puts
//! them on `ATTENTION#{account}` of the `listing` index), newest first, or from a position of
//! the listing (the operators' health figures and attention queue).

use super::item::Delivery;
use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::time::Timestamp;
use crate::ids::AccountId;
use crate::store::keys;
use crate::store::listing::{self, Listing, ListingCursor, ListingError, Page};
use crate::store::Item;

/// The account's `dead` and `failed` deliveries, newest first.
pub async fn attention_deliveries(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    limit: u32,
    cursor: Option<&str>,
    now: Timestamp,
) -> Result<Page<Delivery>, ListingError> {
    let cursor = cursor
        .map(|c| ListingCursor::decode(c, "attention", account_id))
        .transpose()?;
    read(dynamo, table, account_id, None, false, limit, cursor, now).await
}

/// The account's `dead` and `failed` deliveries listed at or after `lower` (when given: a position of the
/// listing: [`keys::time_sort`] of when they settled, then the delivery id), oldest first
/// (`forward`) or newest first; a `next_cursor` says the window holds more than `limit`.
pub async fn attention_from(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    lower: Option<String>,
    forward: bool,
    limit: u32,
    now: Timestamp,
) -> Result<Page<Delivery>, ListingError> {
    read(dynamo, table, account_id, lower, forward, limit, None, now).await
}

#[allow(clippy::too_many_arguments)]
async fn read(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    lower: Option<String>,
    forward: bool,
    limit: u32,
    cursor: Option<ListingCursor>,
    now: Timestamp,
) -> Result<Page<Delivery>, ListingError> {
    let keep = move |item: &Item| {
        item.get("kind")
            .and_then(|v| v.as_s().ok())
            .map(String::as_str)
            == Some("delivery")
            && Delivery::from_item(item.clone()).is_ok_and(|d| {
                d.visible(now) && matches!(d.status, DeliveryStatus::Dead | DeliveryStatus::Failed)
            })
    };
    let page = listing::page(
        dynamo,
        table,
        Listing {
            list: "attention",
            list_key: keys::attention_list_key(account_id),
            lower,
            upper: None,
            forward,
            limit,
            cursor,
            keep: &keep,
        },
    )
    .await?;
    Ok(page.parsed(Delivery::from_item)?)
}
