//! The subscription item: what an integration wants delivered, filtered and projected, with its
//! lifecycle status (docs/lifecycles.md) and the run of consecutive dead deliveries that pauses
//! it. It lives in its account's partition, beside the account and its integrations.

use super::expr::{n, s, Expr};
use super::read::{self, Consistency};
use super::write::{built, Write};
use super::{keys, Item, StoreError};
use crate::domain::classify::AnswerRules;
use crate::domain::retry::RetryPolicy;
use crate::domain::subscription::{
    SubscriptionStatus, SubscriptionTrigger, MAX_CONSECUTIVE_DEAD, SUBSCRIPTION_LIFECYCLE,
};
use crate::domain::time::Timestamp;
use crate::ids::{AccountId, ChangeId, IntegrationId, SubscriptionId};
use aws_sdk_dynamodb::types::Update;
use serde::{Deserialize, Serialize};

/// The `kind` of a subscription item.
pub const KIND: &str = "subscription";

/// What an integration wants delivered, filtered and projected.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Subscription {
    pub account_id: AccountId,
    pub subscription_id: SubscriptionId,
    pub integration_id: IntegrationId,
    pub record_types: Vec<String>,
    /// The change-time filter as the API received it (JSON); absent means every change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// Fields of the record the deliveries carry (dotted paths).
    pub fields: Vec<String>,
    #[serde(default)]
    pub retry_policy: RetryPolicy,
    /// 4xx statuses retried on the backoff schedule (see [`AnswerRules`]); empty: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retry_statuses: Vec<u16>,
    /// A 410 Gone pauses the subscription at once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pause_on_gone: bool,
    pub status: SubscriptionStatus,
    #[serde(default)]
    pub consecutive_dead: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,

    // Marks of the pull cursor and operator resumes.
    /// The acknowledged position: the last change id the adapter's cursor covered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_cursor: Option<ChangeId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_cursor_at: Option<Timestamp>,
    /// Incremented by every operator restart of a pull delivery (see `domain::pull_cursor`).
    #[serde(default, skip_serializing_if = "operator_actions::is_zero")]
    pub pull_epoch: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_rewound_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_by: Option<String>,
}

/// The key of a subscription.
pub fn key(account_id: &AccountId, subscription_id: &SubscriptionId) -> (String, String) {
    (
        keys::account_pk(account_id),
        keys::subscription_sk(subscription_id),
    )
}

/// What a tenant sets when it subscribes an integration: the rest of a new subscription is the
/// system's ([`Subscription::new`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSubscription {
    pub account_id: AccountId,
    pub subscription_id: SubscriptionId,
    pub integration_id: IntegrationId,
    pub record_types: Vec<String>,
    pub filter: Option<String>,
    pub fields: Vec<String>,
    pub retry_policy: RetryPolicy,
    pub answers: AnswerRules,
}

impl Subscription {
    /// A new subscription: active, with no dead deliveries and no pull cursor yet.
    pub fn new(new: NewSubscription, now: Timestamp) -> Self {
        Subscription {
            account_id: new.account_id,
            subscription_id: new.subscription_id,
            integration_id: new.integration_id,
            record_types: new.record_types,
            filter: new.filter,
            fields: new.fields,
            retry_policy: new.retry_policy,
            retry_statuses: new.answers.retry_statuses,
            pause_on_gone: new.answers.pause_on_gone,
            status: SubscriptionStatus::Active,
            consecutive_dead: 0,
            paused_at: None,
            created_at: now,
            updated_at: now,
            pull_cursor: None,
            pull_cursor_at: None,
            pull_epoch: 0,
            pull_rewound_at: None,
            resumed_at: None,
            resumed_by: None,
        }
    }

    pub fn key(&self) -> (String, String) {
        key(&self.account_id, &self.subscription_id)
    }

    /// What this subscription chose some answers do (as stored: checked when it was set).
    pub fn answer_rules(&self) -> AnswerRules {
        AnswerRules {
            retry_statuses: self.retry_statuses.clone(),
            pause_on_gone: self.pause_on_gone,
        }
    }

    pub fn from_item(item: Item) -> Result<Self, StoreError> {
        super::from_item(item)
    }
}

/// A consistent read of a subscription.
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    subscription_id: &SubscriptionId,
) -> Result<Option<Subscription>, StoreError> {
    read::get_as(dynamo, table, key(account_id, subscription_id)).await
}

/// The account's paused subscriptions (one partition query, consistent; an account has few
/// subscriptions).
pub async fn paused(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
) -> Result<Vec<Subscription>, StoreError> {
    let items = read::query_all(
        dynamo,
        &read::Query {
            table: table.into(),
            key_condition: "pk = :pk AND begins_with(sk, :p)".into(),
            filter: Some("#st = :paused".into()),
            expr: Expr::new()
                .name("#st", "status")
                .value(":pk", s(keys::account_pk(account_id)))
                .value(":p", s(keys::SUBSCRIPTION_PREFIX))
                .value(":paused", s(SubscriptionStatus::Paused.to_string())),
            ..Default::default()
        },
    )
    .await?;
    items.into_iter().map(Subscription::from_item).collect()
}

/// The subscription's run of consecutive dead deliveries (an eventually consistent read of
/// that attribute alone: a success reads it to learn whether there is a run to end).
pub(crate) async fn dead_count(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    subscription_id: &SubscriptionId,
) -> Result<u32, StoreError> {
    let (pk, sk) = key(account_id, subscription_id);
    Ok(read::get_with(
        dynamo,
        table,
        &pk,
        &sk,
        Consistency::Eventual,
        Some("consecutive_dead"),
    )
    .await?
    .and_then(|i| {
        i.get("consecutive_dead")
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse::<u32>().ok())
    })
    .unwrap_or(0))
}

/// What the claim of a retry checks of its subscription as stored ([`retry_bound`]).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RetryBound {
    #[serde(default)]
    pub retry_policy: RetryPolicy,
    #[serde(default)]
    pub consecutive_dead: u32,
}

/// The subscription's stored retry policy and run of dead deliveries, read when a retry is
/// claimed: its Max Retries binds at the claim, whatever a worker's cached configuration says,
/// and a success then ends the run it read without reading again (an eventually consistent read
/// of those attributes alone, the price of the read a success makes anyway). `None`: the
/// subscription is gone.
pub(crate) async fn retry_bound(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    account_id: &AccountId,
    subscription_id: &SubscriptionId,
) -> Result<Option<RetryBound>, StoreError> {
    let (pk, sk) = key(account_id, subscription_id);
    let projection = Some("retry_policy, consecutive_dead, pk");
    read::get_with(dynamo, table, &pk, &sk, Consistency::Eventual, projection)
        .await?
        .map(super::from_item)
        .transpose()
}

/// Adds one dead delivery to the subscription's run. The add is atomic, so concurrent dead
/// deliveries of one subscription never lose a count; it is sent in one transaction with the
/// dead outcome, so a redelivered message can never count twice.
pub(crate) fn count_dead(
    table: &str,
    account_id: &AccountId,
    subscription_id: &SubscriptionId,
    now: Timestamp,
) -> Result<Write, StoreError> {
    let (pk, sk) = key(account_id, subscription_id);
    Ok(Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression("ADD consecutive_dead :one SET updated_at = :now")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":now", n(now.millis()))
            .build(),
    )?))
}

/// Ends the run of dead deliveries a success saw: takes the `seen` count off the run,
/// atomically. A dead outcome that lands between the read and this write stays counted (a plain
/// reset to zero would lose it); when the run is already shorter than `seen` (a resume reset it,
/// or another success ended it) the condition refuses the write and the run is left alone.
pub(crate) fn end_dead_run(
    table: &str,
    account_id: &AccountId,
    subscription_id: &SubscriptionId,
    seen: u32,
) -> Result<Write, StoreError> {
    let (pk, sk) = key(account_id, subscription_id);
    Ok(Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression("ADD consecutive_dead :minus")
            .condition_expression("attribute_exists(pk) AND consecutive_dead >= :seen")
            .expression_attribute_values(":minus", n(-i64::from(seen)))
            .expression_attribute_values(":seen", n(seen))
            .build(),
    )?))
}

/// Pauses the subscription once its run of dead deliveries reaches the threshold, together with
/// the administrator notice (`notice`, a put of the notice item): the pause is conditional on
/// the lifecycle's `from` states for an automatic pause and on the count, so of several workers
/// that see the run at the threshold exactly one pauses and requests the notice.
pub fn auto_pause(
    table: &str,
    sub: &Subscription,
    notice: Write,
    now: Timestamp,
) -> Result<Write, StoreError> {
    pause(
        table,
        sub,
        SubscriptionTrigger::AutoPause,
        notice,
        (now, now),
    )
}

/// Pauses the subscription at once on a 410 Gone (it chose `pause_on_gone`), together with the
/// administrator notice, as [`auto_pause`] does at the threshold: conditional on the lifecycle's
/// `from` states, so of several workers that meet the 410 exactly one pauses and requests it; and
/// on no resume since the delivery that met it ended (`died_at`), so a pause made again for that
/// delivery after an operator resumed the subscription is refused.
pub fn pause_on_gone(
    table: &str,
    sub: &Subscription,
    notice: Write,
    now: Timestamp,
    died_at: Timestamp,
) -> Result<Write, StoreError> {
    pause(
        table,
        sub,
        SubscriptionTrigger::GonePause,
        notice,
        (now, died_at),
    )
}

fn pause(
    table: &str,
    sub: &Subscription,
    trigger: SubscriptionTrigger,
    notice: Write,
    (now, died_at): (Timestamp, Timestamp),
) -> Result<Write, StoreError> {
    let pause = SUBSCRIPTION_LIFECYCLE.expect(sub.status, trigger, SubscriptionStatus::Paused)?;
    let mut e = Expr::new()
        .value(":paused", s(SubscriptionStatus::Paused.to_string()))
        .value(":now", n(now.millis()));
    let mut condition = format!("({})", e.status(&pause));
    if trigger == SubscriptionTrigger::AutoPause {
        e = e.value(":threshold", n(MAX_CONSECUTIVE_DEAD));
        condition.push_str(" AND consecutive_dead >= :threshold");
    } else {
        e = e.value(":died", n(died_at.millis()));
        condition.push_str(" AND (attribute_not_exists(resumed_at) OR resumed_at < :died)");
    }
    let (pk, sk) = sub.key();
    let update = Write::Update(built(
        Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression("SET #status = :paused, paused_at = :now, updated_at = :now")
            .condition_expression(condition)
            .set_expression_attribute_names(e.names_opt())
            .set_expression_attribute_values(e.values_opt())
            .build(),
    )?);
    Write::all([update, notice])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;

    fn update(w: Write) -> Update {
        match w {
            Write::Update(u) => u,
            other => panic!("not an update: {other:?}"),
        }
    }

    #[test]
    fn a_dead_delivery_adds_one_to_the_run_of_an_existing_subscription() {
        let u = update(count_dead("t", &id("a"), &id("s"), Timestamp(7)).unwrap());
        assert_eq!(u.key()["sk"].as_s().unwrap(), "SUB#s");
        assert!(u
            .update_expression()
            .starts_with("ADD consecutive_dead :one"));
        assert_eq!(u.condition_expression(), Some("attribute_exists(pk)"));
    }

    #[test]
    fn a_success_takes_off_only_the_run_it_saw() {
        let u = update(end_dead_run("t", &id("a"), &id("s"), 3).unwrap());
        let values = u.expression_attribute_values().unwrap();
        assert_eq!(values[":minus"].as_n().unwrap(), "-3");
        assert_eq!(values[":seen"].as_n().unwrap(), "3");
        assert!(u
            .condition_expression()
            .unwrap()
            .contains("consecutive_dead >= :seen"));
    }
}

// ---- operator actions and the pull cursor
//
// The API's writes of a subscription (create, edit, delete, list) and the operator actions'
// (resume) and pull cursor's (move, rewind). In a module of their own so that their imports
// never meet the ones above.

pub use self::operator_actions::*;

mod operator_actions {
    use super::{key, Subscription, KIND};
    use crate::domain::pull_cursor::Acknowledged;
    use crate::domain::subscription::{
        ResumeDecision, SubscriptionTrigger, SUBSCRIPTION_LIFECYCLE,
    };
    use crate::domain::time::Timestamp;
    use crate::ids::{AccountId, ChangeId, IntegrationId, SubscriptionId};
    use crate::store::expr::{n, s, Expr};
    use crate::store::page::{self, PrefixPage};
    use crate::store::update::{conditional_update, delete_existing, Edit};
    use crate::store::write::put_new;
    use crate::store::write::Write;
    use crate::store::{keys, to_item, StoreError};

    pub(super) fn is_zero(v: &u32) -> bool {
        *v == 0
    }

    impl Subscription {
        /// The pull cursor's acknowledged position and epoch.
        pub fn acknowledged(&self) -> Acknowledged {
            Acknowledged {
                epoch: self.pull_epoch,
                change_id: self.pull_cursor.clone(),
            }
        }
    }

    /// One page of the account's subscriptions in id order (of one integration, if given), and
    /// the id to continue after. Filtered pages may come back short.
    pub async fn list(
        dynamo: &aws_sdk_dynamodb::Client,
        table: &str,
        account_id: &AccountId,
        integration_id: Option<&IntegrationId>,
        limit: u32,
        after_id: Option<&SubscriptionId>,
    ) -> Result<(Vec<Subscription>, Option<SubscriptionId>), StoreError> {
        let pk = keys::account_pk(account_id);
        let (items, next) = page::read(
            dynamo,
            &PrefixPage {
                table,
                pk: &pk,
                prefix: keys::SUBSCRIPTION_PREFIX,
                limit,
                after_id: after_id.map(SubscriptionId::as_str),
                filter: integration_id.map(|id| {
                    (
                        "integration_id = :iid".to_string(),
                        Expr::new().value(":iid", s(id)),
                    )
                }),
            },
        )
        .await?;
        Ok((items, next.map(SubscriptionId::from_stored)))
    }

    /// Creates the subscription unless its id is taken.
    pub fn create(table: &str, sub: &Subscription) -> Result<Write, StoreError> {
        let (pk, sk) = sub.key();
        put_new(table, to_item(sub, &pk, &sk, KIND)?)
    }

    /// Applies the API's `edit` if the subscription exists, answering with it as it is now. An
    /// edit names only the fields the caller changes, never the status or the dead count.
    pub fn edit(
        table: &str,
        account_id: &AccountId,
        subscription_id: &SubscriptionId,
        edit: Edit,
    ) -> Result<Write, StoreError> {
        let (pk, sk) = key(account_id, subscription_id);
        edit.of_existing(table, &pk, &sk)
    }

    /// Deletes the subscription; refused when there is none.
    pub fn delete(
        table: &str,
        account_id: &AccountId,
        subscription_id: &SubscriptionId,
    ) -> Result<Write, StoreError> {
        let (pk, sk) = key(account_id, subscription_id);
        delete_existing(table, &pk, &sk)
    }

    fn update(
        table: &str,
        sub: &Subscription,
        expression: String,
        condition: String,
        e: &Expr,
    ) -> Result<Write, StoreError> {
        conditional_update(table, sub.key(), expression, condition, e)
    }

    /// An operator's resume of `sub` as read (`decision` from
    /// [`crate::domain::subscription::on_resume`]): the new status and dead count, who resumed
    /// it and when, the pause time removed; conditional on the lifecycle's `from` states.
    pub fn resume(
        table: &str,
        sub: &Subscription,
        decision: &ResumeDecision,
        operator: &str,
        now: Timestamp,
    ) -> Result<Write, StoreError> {
        let condition = SUBSCRIPTION_LIFECYCLE.expect(
            sub.status,
            SubscriptionTrigger::OperatorResume,
            decision.status,
        )?;
        let mut e = Expr::new()
            .value(":active", s(decision.status.to_string()))
            .value(":count", n(decision.new_count))
            .value(":now", n(now.millis()))
            .value(":operator", s(operator));
        let status_condition = e.status(&condition);
        update(
            table,
            sub,
            "SET #status = :active, consecutive_dead = :count, updated_at = :now, \
             resumed_at = :now, resumed_by = :operator REMOVE paused_at"
                .to_owned(),
            format!("attribute_exists(pk) AND ({status_condition})"),
            &e,
        )
    }

    /// The pull epoch `epoch` as a condition: a subscription that never had one is at zero.
    fn epoch_condition(epoch: u32) -> &'static str {
        if epoch == 0 {
            "(attribute_not_exists(pull_epoch) OR pull_epoch = :epoch)"
        } else {
            "pull_epoch = :epoch"
        }
    }

    /// Before pull deliveries whose earliest change is `earliest` are restarted: the next pull
    /// epoch, and the acknowledged cursor of `sub` (as read) moved back to `before` (the change
    /// before `earliest`; `None`: no cursor) when it is at or past `earliest`. Conditional on the
    /// epoch and cursor read, so a concurrent acknowledgement or rewind refuses it.
    pub fn rewind_pull_cursor(
        table: &str,
        sub: &Subscription,
        earliest: &ChangeId,
        before: Option<&ChangeId>,
        now: Timestamp,
    ) -> Result<Write, StoreError> {
        let epoch = sub.pull_epoch;
        let mut e = Expr::new()
            .value(":epoch", n(epoch))
            .value(":new_epoch", n(epoch.saturating_add(1)))
            .value(":now", n(now.millis()));
        let mut set = vec!["pull_epoch = :new_epoch", "pull_rewound_at = :now"];
        let mut remove = Vec::new();
        let mut condition = vec![
            "attribute_exists(pk)".to_string(),
            epoch_condition(epoch).to_string(),
        ];
        match &sub.pull_cursor {
            Some(c) => {
                e = e.value(":seen", s(c));
                condition.push("pull_cursor = :seen".to_string());
                if c >= earliest {
                    match before {
                        Some(b) => {
                            e = e.value(":back", s(b));
                            set.push("pull_cursor = :back");
                        }
                        None => remove.push("pull_cursor"),
                    }
                }
            }
            None => condition.push("attribute_not_exists(pull_cursor)".to_string()),
        }
        let mut expression = format!("SET {}", set.join(", "));
        if !remove.is_empty() {
            expression.push_str(&format!(" REMOVE {}", remove.join(", ")));
        }
        update(table, sub, expression, condition.join(" AND "), &e)
    }

    /// Moves the acknowledged position to `to`, conditional on the cursor's `epoch` and on not
    /// moving backwards.
    pub fn move_pull_cursor(
        table: &str,
        sub: &Subscription,
        epoch: u32,
        to: &ChangeId,
        now: Timestamp,
    ) -> Result<Write, StoreError> {
        let e = Expr::new()
            .value(":to", s(to))
            .value(":now", n(now.millis()))
            .value(":epoch", n(epoch));
        update(
            table,
            sub,
            "SET pull_cursor = :to, pull_cursor_at = :now".to_owned(),
            format!(
                "attribute_exists(pk) AND {} \
                 AND (attribute_not_exists(pull_cursor) OR pull_cursor <= :to)",
                epoch_condition(epoch)
            ),
            &e,
        )
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::domain::retry::RetryPolicy;
        use crate::domain::subscription::{on_resume, SubscriptionStatus};
        use crate::ids::id;

        fn sub(status: SubscriptionStatus) -> Subscription {
            Subscription {
                account_id: "a1".parse().unwrap(),
                subscription_id: "s1".parse().unwrap(),
                integration_id: "i1".parse().unwrap(),
                record_types: vec!["order".into()],
                filter: None,
                fields: vec!["id".into()],
                retry_policy: RetryPolicy::default(),
                retry_statuses: Vec::new(),
                pause_on_gone: false,
                status,
                consecutive_dead: 50,
                paused_at: Some(Timestamp(3)),
                created_at: Timestamp(1),
                updated_at: Timestamp(1),
                pull_cursor: None,
                pull_cursor_at: None,
                pull_epoch: 0,
                pull_rewound_at: None,
                resumed_at: None,
                resumed_by: None,
            }
        }

        use crate::store::update::expect_update as updated;

        #[test]
        fn a_new_subscription_is_created_once_without_marks() {
            let Write::Put(p) = create("t", &sub(SubscriptionStatus::Active)).unwrap() else {
                panic!("not a put")
            };
            assert_eq!(p.condition_expression(), Some("attribute_not_exists(pk)"));
            assert_eq!(p.item()["sk"].as_s().unwrap(), "SUB#s1");
            assert_eq!(p.item()["kind"].as_s().unwrap(), KIND);
            for mark in ["pull_epoch", "pull_cursor", "resumed_at"] {
                assert!(!p.item().contains_key(mark), "{mark}");
            }
            let back = Subscription::from_item(p.item().clone()).unwrap();
            assert_eq!(back.pull_epoch, 0);
            assert_eq!(back.acknowledged().change_id, None);
        }

        #[test]
        fn an_edit_or_a_delete_needs_the_subscription_to_exist() {
            let Write::Delete(d) = delete("t", &id("a1"), &id("s1")).unwrap() else {
                panic!("not a delete")
            };
            assert_eq!(d.key()["sk"].as_s().unwrap(), "SUB#s1");
            assert_eq!(d.condition_expression(), Some("attribute_exists(pk)"));
            let Write::UpdateReturningNew(u) =
                edit("t", &id("a1"), &id("s1"), Edit::new().remove("filter")).unwrap()
            else {
                panic!("not an update returning the item")
            };
            assert_eq!(u.condition_expression(), Some("attribute_exists(pk)"));
        }

        #[test]
        fn a_resume_is_conditional_on_the_paused_status_and_resets_the_count() {
            let paused = sub(SubscriptionStatus::Paused);
            let decision = on_resume(paused.status).unwrap();
            let u = updated(resume("t", &paused, &decision, "ops", Timestamp(9)).unwrap());
            let condition = u.condition_expression().unwrap();
            assert!(condition.starts_with("attribute_exists(pk) AND ("));
            assert!(u.update_expression().ends_with("REMOVE paused_at"));
            let v = u.expression_attribute_values().unwrap();
            assert_eq!(v[":active"], s("active"));
            assert_eq!(v[":count"], n(0));
            assert_eq!(v[":operator"], s("ops"));
            assert!(
                v.values().any(|x| x == &s("paused")),
                "the status read is the condition"
            );
        }

        #[test]
        fn a_rewind_moves_a_cursor_at_or_past_the_restart_back_and_bumps_the_epoch() {
            let mut read = sub(SubscriptionStatus::Active);
            read.pull_cursor = Some(id("01d"));
            read.pull_epoch = 2;
            let u = updated(
                rewind_pull_cursor("t", &read, &id("01c"), Some(&id("01b")), Timestamp(9)).unwrap(),
            );
            assert_eq!(
                u.update_expression(),
                "SET pull_epoch = :new_epoch, pull_rewound_at = :now, pull_cursor = :back"
            );
            assert_eq!(
                u.condition_expression(),
                Some("attribute_exists(pk) AND pull_epoch = :epoch AND pull_cursor = :seen")
            );
            let v = u.expression_attribute_values().unwrap();
            assert_eq!(v[":new_epoch"], n(3));
            assert_eq!(v[":back"], s("01b"));
            // Nothing before the earliest restarted change: the cursor goes.
            let u =
                updated(rewind_pull_cursor("t", &read, &id("01a"), None, Timestamp(9)).unwrap());
            assert!(u.update_expression().ends_with("REMOVE pull_cursor"));
            // A cursor before the restart stays where it is.
            let u = updated(
                rewind_pull_cursor("t", &read, &id("01e"), Some(&id("01d")), Timestamp(9)).unwrap(),
            );
            assert_eq!(
                u.update_expression(),
                "SET pull_epoch = :new_epoch, pull_rewound_at = :now"
            );
        }

        #[test]
        fn a_rewind_of_a_subscription_never_acknowledged_needs_it_still_so() {
            let read = sub(SubscriptionStatus::Active);
            let u =
                updated(rewind_pull_cursor("t", &read, &id("01c"), None, Timestamp(9)).unwrap());
            assert_eq!(
                u.condition_expression(),
                Some(
                    "attribute_exists(pk) AND (attribute_not_exists(pull_epoch) OR pull_epoch = :epoch) \
                     AND attribute_not_exists(pull_cursor)"
                )
            );
        }

        #[test]
        fn a_cursor_moves_only_forward_in_its_epoch() {
            let read = sub(SubscriptionStatus::Active);
            let u = updated(move_pull_cursor("t", &read, 1, &id("01f"), Timestamp(9)).unwrap());
            assert_eq!(
                u.update_expression(),
                "SET pull_cursor = :to, pull_cursor_at = :now"
            );
            assert_eq!(
                u.condition_expression(),
                Some(
                    "attribute_exists(pk) AND pull_epoch = :epoch \
                     AND (attribute_not_exists(pull_cursor) OR pull_cursor <= :to)"
                )
            );
            let u = updated(move_pull_cursor("t", &read, 0, &id("01f"), Timestamp(9)).unwrap());
            assert!(u
                .condition_expression()
                .unwrap()
                .contains("attribute_not_exists(pull_epoch) OR pull_epoch = :epoch"));
        }
    }
}
