//! The roll-up walk's mark: how far (by event creation time) the walk has read every account's
//! event listing. One item, `ROLLUP_WALK` / `LISTING`, written once per walk that read them all.
//!
//! The walk reads each account's listing from a little before the mark
//! ([`crate::delivery::rollup::LISTING_OVERLAP`], for entries the eventually consistent index had
//! not shown yet) up to the walk's start, and puts the events still open on the `rollup` index.

use super::expr::{n, Expr};
use super::read;
use super::update::conditional_update;
use super::write::Write;
use super::StoreError;
use crate::domain::time::Timestamp;

pub(crate) const PK: &str = "ROLLUP_WALK";
pub(crate) const SK: &str = "LISTING";
/// Events created up to this instant (millis) are behind the mark.
pub(crate) const THROUGH: &str = "through";

/// The mark (`None` before the first complete walk). A consistent read.
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<Option<Timestamp>, StoreError> {
    Ok(read::get(dynamo, table, PK, SK).await?.and_then(|item| {
        item.get(THROUGH)?
            .as_n()
            .ok()?
            .parse::<i64>()
            .ok()
            .map(Timestamp)
    }))
}

/// Moves the mark on to `through`; refused (and harmless) when a later walk moved it further.
pub fn advance(table: &str, through: Timestamp) -> Result<Write, StoreError> {
    let e = Expr::new()
        .name("#through", THROUGH)
        .value(":through", n(through.millis()));
    conditional_update(
        table,
        (PK.to_string(), SK.to_string()),
        "SET #through = :through".into(),
        "attribute_not_exists(#through) OR #through < :through".into(),
        &e,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_only_moves_forward() {
        let Write::Update(u) = advance("t", Timestamp(42)).unwrap() else {
            panic!("not an update")
        };
        assert_eq!(u.key()["pk"].as_s().unwrap(), PK);
        assert_eq!(u.key()["sk"].as_s().unwrap(), SK);
        assert_eq!(
            u.condition_expression().unwrap(),
            "attribute_not_exists(#through) OR #through < :through"
        );
        assert_eq!(u.expression_attribute_values().unwrap()[":through"], n(42));
    }
}
