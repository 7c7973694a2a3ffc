//! The retention of a notice's partition as a whole: each move of the notice stamps the notice
//! and all its progress shards with one expiry ([`crate::domain::retention::notice_ttl_seconds`]
//! of the move), in one transaction, so that the progress summary is whole for as long as the
//! notice can be read. A requeue of one of its deliveries does the same ([`reopened`], part of
//! the delivery's transaction). The item table and what each item's expiry is:
//! [`super::notice`].

use super::notice;
use super::notice_progress;
use super::write::Write;
use super::StoreError;
use crate::domain::retention::notice_ttl_seconds;
use crate::domain::time::Timestamp;
use crate::ids::NoticeId;

/// [`notice::activate`] with the shards' retention.
pub(crate) fn activate(
    table: &str,
    notice_id: &NoticeId,
    at: Timestamp,
    deliveries: u32,
) -> Result<Write, StoreError> {
    with_shards(
        table,
        notice_id,
        at,
        notice::activate(table, notice_id, at, deliveries)?,
    )
}

/// [`notice::withdraw`] with the shards' retention.
pub fn withdraw(table: &str, notice_id: &NoticeId, at: Timestamp) -> Result<Write, StoreError> {
    with_shards(
        table,
        notice_id,
        at,
        notice::withdraw(table, notice_id, at)?,
    )
}

/// [`notice::supersede`] with the shards' retention.
pub fn supersede(
    table: &str,
    notice_id: &NoticeId,
    by: &NoticeId,
    at: Timestamp,
) -> Result<Write, StoreError> {
    with_shards(
        table,
        notice_id,
        at,
        notice::supersede(table, notice_id, by, at)?,
    )
}

/// The writes that keep a notice and its shards for a delivery requeued at `at` whose own count
/// is on `counted_on` (that shard is stamped by the count itself: one transaction may not write
/// an item twice).
pub fn reopened(
    table: &str,
    notice_id: &NoticeId,
    counted_on: &str,
    at: Timestamp,
) -> Result<Vec<Write>, StoreError> {
    let mut writes = vec![notice::retain(table, notice_id, at)?];
    writes.extend(notice_progress::retain(
        table,
        notice_id,
        notice_ttl_seconds(at),
        Some(counted_on),
    )?);
    Ok(writes)
}

fn with_shards(
    table: &str,
    notice_id: &NoticeId,
    at: Timestamp,
    moved: Write,
) -> Result<Write, StoreError> {
    let shards = notice_progress::retain(table, notice_id, notice_ttl_seconds(at), None)?;
    Write::all(std::iter::once(moved).chain(shards))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;
    use crate::store::attrs::EXPIRES_AT;
    use aws_sdk_dynamodb::types::TransactWriteItem;

    fn items(w: Write) -> Vec<TransactWriteItem> {
        match w {
            Write::All(items) => items,
            other => panic!("not a transaction: {other:?}"),
        }
    }

    fn expiry_of(u: &aws_sdk_dynamodb::types::Update) -> String {
        let names = u.expression_attribute_names().unwrap();
        let (placeholder, _) = names.iter().find(|(_, a)| *a == EXPIRES_AT).unwrap();
        let value = placeholder
            .replacen("#a", ":v", 1)
            .replacen("#expires", ":expires", 1);
        u.expression_attribute_values().unwrap()[&value]
            .as_n()
            .unwrap()
            .clone()
    }

    #[test]
    fn every_move_of_a_notice_stamps_it_and_all_eight_shards_with_one_expiry() {
        let at = Timestamp(1_700_000_000_000);
        let ttl = notice_ttl_seconds(at).to_string();
        for w in [
            activate("t", &id("n1"), at, 3).unwrap(),
            withdraw("t", &id("n1"), at).unwrap(),
            supersede("t", &id("n1"), &id("n2"), at).unwrap(),
        ] {
            let all = items(w);
            assert_eq!(all.len(), 9);
            let keys: Vec<&str> = all
                .iter()
                .map(|i| i.update().unwrap().key()["sk"].as_s().unwrap().as_str())
                .collect();
            assert_eq!(keys[0], "NOTICE");
            assert!(keys[1..].iter().all(|k| k.starts_with("PROGRESS#")));
            // The notice's move stays conditional on its lifecycle; the shards are not.
            assert!(all[0].update().unwrap().condition_expression().is_some());
            assert!(all[1..]
                .iter()
                .all(|i| i.update().unwrap().condition_expression().is_none()));
            for i in &all {
                assert_eq!(expiry_of(i.update().unwrap()), ttl);
            }
        }
    }

    #[test]
    fn a_requeue_keeps_the_notice_and_the_other_seven_shards() {
        let at = Timestamp(1_700_000_000_000);
        let writes = reopened("t", &id("n1"), "PROGRESS#2", at).unwrap();
        assert_eq!(writes.len(), 8);
        let Write::Update(notice) = &writes[0] else {
            panic!("not an update")
        };
        assert_eq!(notice.key()["sk"].as_s().unwrap(), "NOTICE");
        assert_eq!(expiry_of(notice), notice_ttl_seconds(at).to_string());
        assert!(writes[1..].iter().all(|w| matches!(w,
            Write::Update(u) if u.key()["sk"].as_s().unwrap() != "PROGRESS#2")));
    }
}
