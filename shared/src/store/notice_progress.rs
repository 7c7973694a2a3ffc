//! A notice's progress shards: its deliveries counted by state, spread over
//! [`PROGRESS_SHARDS`] items of the notice's partition (`PROGRESS#{n}`) so that a large notice
//! has no single hot item. A delivery's count changes in the same transaction as the status it
//! counts ([`count`], added by [`super::notification_delivery`]'s writes), so the summary (the
//! shards' sum, [`summary`]) is exact.
//!
//! Retention: every count stamps the shard's `expires_at` from its own instant
//! ([`crate::domain::retention::notice_ttl_seconds`]), and every move of the notice stamps all
//! shards with the notice's own ([`retain`]), so a shard never expires before its notice.

use super::attrs::EXPIRES_AT;
use super::expr::{n, s, Expr};
use super::keys::shard_of;
use super::notice::{notice_pk, partition};
use super::write::{built, Write};
use super::StoreError;
use crate::domain::lifecycle::Status;
use crate::domain::notification_delivery::NotificationStatus;
use crate::domain::retention::notice_ttl_seconds;
use crate::domain::time::Timestamp;
use crate::ids::NoticeId;
use aws_sdk_dynamodb::types::Update;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The `kind` of a progress shard.
pub(crate) const PROGRESS_KIND: &str = "notice_progress";
pub use super::keys::PROGRESS_PREFIX;
/// Progress counters are spread over this many items per notice.
pub const PROGRESS_SHARDS: u32 = 8;

/// The progress shard a delivery counts on. (The `due`-index shard hash modulo eight: the
/// index's sixteen shards are a multiple of eight, so this is the FNV-1a hash modulo eight.)
pub fn progress_sk(delivery_key: &str) -> String {
    let shard: u32 = shard_of(delivery_key).parse().unwrap_or(0);
    format!("{PROGRESS_PREFIX}{}", shard % PROGRESS_SHARDS)
}

/// The counter attribute of a status on a progress shard.
pub(crate) fn progress_attribute(status: NotificationStatus) -> String {
    format!("n_{}", status.as_str())
}

/// A notice's deliveries counted by state (the progress summary).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Every notification delivery state (`docs/lifecycles.md#notification-delivery`), zero
    /// included, keyed by its name.
    pub counts: BTreeMap<String, i64>,
    pub total: i64,
}

impl Progress {
    pub fn empty() -> Self {
        Progress {
            counts: NotificationStatus::ALL
                .iter()
                .map(|s| (s.as_str().to_string(), 0))
                .collect(),
            total: 0,
        }
    }
    pub fn count(&self, status: NotificationStatus) -> i64 {
        self.counts.get(status.as_str()).copied().unwrap_or(0)
    }
    pub fn add(&mut self, status: &str, n: i64) {
        *self.counts.entry(status.to_string()).or_insert(0) += n;
        self.total += n;
    }
}

/// Counts a delivery in `to` (and no longer in `from`, unless it is new) on its shard, and
/// stamps the shard's retention from `now`.
pub fn count(
    table: &str,
    notice_id: &NoticeId,
    delivery_key: &str,
    from: Option<NotificationStatus>,
    to: NotificationStatus,
    now: Timestamp,
) -> Result<Write, StoreError> {
    let mut e = Expr::new()
        .name("#to", &progress_attribute(to))
        .name("#kind", "kind")
        .name("#updated", "updated_at")
        .name("#expires", EXPIRES_AT)
        .value(":one", n(1))
        .value(":kind", s(PROGRESS_KIND))
        .value(":now", n(now.millis()))
        .value(":expires", n(notice_ttl_seconds(now)));
    let mut add = vec!["#to :one"];
    if let Some(from) = from {
        e = e
            .name("#from", &progress_attribute(from))
            .value(":minus_one", n(-1));
        add.push("#from :minus_one");
    }
    Ok(Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(notice_pk(notice_id)))
            .key("sk", s(progress_sk(delivery_key)))
            .update_expression(format!(
                "ADD {} SET #kind = :kind, #updated = :now, #expires = :expires",
                add.join(", ")
            ))
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )?))
}

/// Stamps every progress shard of a notice (but `except`, a shard the same transaction already
/// counts on) with the retention `expires_at` (epoch seconds). A shard nothing counted on yet is
/// written with no counts: it reads as zeros.
pub fn retain(
    table: &str,
    notice_id: &NoticeId,
    expires_at: i64,
    except: Option<&str>,
) -> Result<Vec<Write>, StoreError> {
    let e = Expr::new()
        .name("#kind", "kind")
        .name("#expires", EXPIRES_AT)
        .value(":kind", s(PROGRESS_KIND))
        .value(":expires", n(expires_at));
    (0..PROGRESS_SHARDS)
        .map(|shard| format!("{PROGRESS_PREFIX}{shard}"))
        .filter(|sk| Some(sk.as_str()) != except)
        .map(|sk| {
            Ok(Write::Update(built(
                Update::builder()
                    .table_name(table)
                    .key("pk", s(notice_pk(notice_id)))
                    .key("sk", s(sk))
                    .update_expression("SET #kind = :kind, #expires = :expires")
                    .set_expression_attribute_names(e.names_opt())
                    .set_expression_attribute_values(e.values_opt())
                    .build(),
            )?))
        })
        .collect()
}

/// The progress summary: the sum of the notice's progress shards (one consistent query).
pub async fn summary(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    notice_id: &NoticeId,
) -> Result<Progress, StoreError> {
    let mut progress = Progress::empty();
    for item in partition(dynamo, table, notice_id, PROGRESS_PREFIX, None, None).await? {
        for status in NotificationStatus::ALL {
            let count = item
                .get(&progress_attribute(*status))
                .and_then(|v| v.as_n().ok())
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(0);
            progress.add(status.as_str(), count);
        }
    }
    Ok(progress)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;
    use NotificationStatus as N;

    fn update(w: Write) -> Update {
        match w {
            Write::Update(u) => u,
            other => panic!("not an update: {other:?}"),
        }
    }

    #[test]
    fn progress_shards_are_stable_and_spread() {
        // Stored shards must not move: these are the FNV-1a hashes modulo eight.
        assert_eq!(progress_sk("email-0"), "PROGRESS#2");
        assert_eq!(progress_sk("console-3"), "PROGRESS#2");
        assert_eq!(progress_sk("slack-12"), "PROGRESS#5");
        let shards: std::collections::HashSet<String> = (0..200)
            .map(|i| progress_sk(&format!("email-{i}")))
            .collect();
        assert_eq!(shards.len(), PROGRESS_SHARDS as usize);
        assert_eq!(progress_attribute(N::Sending), "n_sending");
    }

    #[test]
    fn a_move_counts_the_delivery_in_its_new_state_and_out_of_its_old_one() {
        let u = update(
            count(
                "t",
                &id("n1"),
                "email-0",
                Some(N::Queued),
                N::Sending,
                Timestamp(5),
            )
            .unwrap(),
        );
        assert_eq!(u.key()["pk"].as_s().unwrap(), "NOTICE#n1");
        assert_eq!(u.key()["sk"].as_s().unwrap(), "PROGRESS#2");
        assert_eq!(
            u.update_expression(),
            "ADD #to :one, #from :minus_one SET #kind = :kind, #updated = :now, #expires = :expires"
        );
        assert_eq!(u.condition_expression(), None, "counting is never refused");
        let names = u.expression_attribute_names().unwrap();
        assert_eq!(names["#to"], "n_sending");
        assert_eq!(names["#from"], "n_queued");
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":minus_one"].as_n().unwrap(), "-1");
        assert_eq!(values[":kind"].as_s().unwrap(), PROGRESS_KIND);
        assert_eq!(
            values[":expires"].as_n().unwrap(),
            &notice_ttl_seconds(Timestamp(5)).to_string()
        );
    }

    #[test]
    fn retention_stamps_every_shard_but_the_one_already_counted_on() {
        let all = retain("t", &id("n1"), 1_800_000_000, None).unwrap();
        assert_eq!(all.len(), PROGRESS_SHARDS as usize);
        let others = retain("t", &id("n1"), 1_800_000_000, Some("PROGRESS#2")).unwrap();
        let keys: Vec<String> = others
            .into_iter()
            .map(|w| {
                let u = update(w);
                assert_eq!(
                    u.update_expression(),
                    "SET #kind = :kind, #expires = :expires"
                );
                assert_eq!(u.condition_expression(), None);
                assert_eq!(
                    u.expression_attribute_values().unwrap()[":expires"]
                        .as_n()
                        .unwrap(),
                    "1800000000"
                );
                u.key()["sk"].as_s().unwrap().clone()
            })
            .collect();
        assert_eq!(keys.len(), 7);
        assert!(!keys.contains(&"PROGRESS#2".to_string()));
    }

    #[test]
    fn a_new_delivery_is_only_counted_in() {
        let u = update(count("t", &id("n1"), "email-0", None, N::Queued, Timestamp(5)).unwrap());
        assert_eq!(
            u.update_expression(),
            "ADD #to :one SET #kind = :kind, #updated = :now, #expires = :expires"
        );
        assert!(!u
            .expression_attribute_names()
            .unwrap()
            .contains_key("#from"));
        assert!(!u
            .expression_attribute_values()
            .unwrap()
            .contains_key(":minus_one"));
    }
}
