//! The one write that restarts a delivery (operator retry and window replay), the pull cursor's
//! rewind that precedes it for pull deliveries, and the event monitor's reopen that follows it.
//! See the module docs of [`super`].

use super::{build_update, send_update, Ops, OpsError, StoredDelivery, StoredSubscription};
use crate::domain::integration_delivery::{DeliveryMove, DELIVERY_LIFECYCLE};
use crate::domain::time::Timestamp;
use crate::ingest::FIRST_DISPATCH_GRACE;
use crate::store::expr::{n, s, Expr};
use crate::store::keys;

/// One restart to write.
#[derive(Debug, Clone, Copy)]
pub struct Restart<'a> {
    pub delivery: &'a StoredDelivery,
    /// From [`crate::domain::integration_delivery::operator_restart`] on the status read.
    pub movement: DeliveryMove,
    pub operator: &'a str,
    /// The replay job restarting it: the write is then refused if that job already did.
    pub replay_job: Option<&'a str>,
}

/// The restart as an update (see the module docs of [`super`] for what it sets and removes).
pub fn restart_update(
    table: &str,
    r: &Restart<'_>,
    now: Timestamp,
) -> Result<aws_sdk_dynamodb::types::Update, OpsError> {
    let d = &r.delivery.record;
    let (trigger, to) = r.movement;
    let condition = DELIVERY_LIFECYCLE.expect(d.status, trigger, to)?;
    let mut e = Expr::new()
        .value(":to", s(to.to_string()))
        .value(":zero", n(0))
        .value(":one", n(1))
        .value(":now", n(now.millis()))
        .value(":operator", s(r.operator));
    let status_condition = e.status(&condition);
    let mut set = vec![
        "#status = :to",
        "attempts = :zero",
        "updated_at = :now",
        "not_before = :now",
        "restarted_at = :now",
        "restarted_by = :operator",
        "restarts = if_not_exists(restarts, :zero) + :one",
    ];
    let mut remove = vec![
        "lease_until",
        "lease_token",
        "last_error",
        "last_http_status",
        "list_key",
        "list_sort",
        "delivered_at",
        crate::monitor::attrs::EXPIRES_AT,
    ];
    if d.method.is_poll() {
        // Pull deliveries are never dispatched: they wait for the adapter's cursor.
        remove.extend(["due_shard", "due_at"]);
    } else {
        // The stream publishes it as it enters pending; the sweep publishes it again if that
        // message is lost (the same grace ingest gives a new delivery).
        e = e
            .value(":shard", s(keys::shard_of(&d.delivery_id)))
            .value(":due", n(now.plus(FIRST_DISPATCH_GRACE).millis()));
        set.extend(["due_shard = :shard", "due_at = :due"]);
    }
    let mut condition_text = format!("({status_condition})");
    if let Some(job) = r.replay_job {
        e = e.value(":job", s(job));
        set.push("replay_job = :job");
        condition_text.push_str(" AND (attribute_not_exists(replay_job) OR replay_job <> :job)");
    }
    build_update(
        table,
        &keys::event_pk(&d.account_id, &d.change_id),
        &keys::delivery_sk(&d.subscription_id),
        format!("SET {} REMOVE {}", set.join(", "), remove.join(", ")),
        condition_text,
        &e,
    )
}

/// Writes one restart on its own (replay). `Ok(false)` when the delivery moved since it was read
/// (or this job already restarted it).
pub async fn restart_one(ops: &Ops<'_>, r: &Restart<'_>) -> Result<bool, OpsError> {
    send_update(ops, restart_update(ops.table, r, ops.now())?).await
}

/// After a push delivery's restart: its event, if final, is reopened so the roll-up settles it
/// again (seed 004's `sent | failed → partial`, this project's documented deviation). Pull
/// deliveries are left out of the roll-up, so their events are not touched. Returns what the
/// monitor did, for the response; a failure is logged and reported, never undoes the restart
/// (the event is rolled up again when the delivery settles).
pub async fn reopen_event(ops: &Ops<'_>, d: &StoredDelivery) -> Option<String> {
    if d.record.method.is_poll() {
        return None;
    }
    match crate::monitor::reopen_event(
        ops.dynamo,
        ops.table,
        &d.record.account_id,
        &d.record.change_id,
        ops.now(),
    )
    .await
    {
        Ok(outcome) => Some(
            match outcome {
                crate::monitor::ReopenOutcome::Reopened { .. } => "reopened",
                crate::monitor::ReopenOutcome::AlreadyOpen { .. } => "already_open",
                crate::monitor::ReopenOutcome::NotReopenable { .. } => "not_reopenable",
                crate::monitor::ReopenOutcome::Missing => "missing",
            }
            .to_owned(),
        ),
        Err(e) => {
            tracing::error!(
                delivery_id = %d.record.delivery_id,
                error = %e,
                "delivery restarted but its event could not be reopened; it is rolled up when the delivery settles"
            );
            Some("reopen_failed".to_owned())
        }
    }
}

/// Before restarting pull deliveries whose earliest change is `earliest`: moves the
/// subscription's acknowledged cursor back to just before `earliest` (if it is at or past it) and
/// increments the pull epoch, so that cursors read before the restart are refused as stale and the
/// adapter's next read shows the restarted deliveries. Returns the new epoch.
pub async fn rewind_pull_cursor(
    ops: &Ops<'_>,
    account_id: &str,
    subscription_id: &str,
    earliest: &str,
) -> Result<u32, OpsError> {
    let before = ops.change_before(subscription_id, earliest).await?;
    for _ in 0..8 {
        let sub: StoredSubscription = ops.subscription(account_id, subscription_id).await?;
        let epoch = sub.marks.pull_epoch;
        let current = sub.marks.pull_cursor.clone();
        let new_epoch = epoch.saturating_add(1);
        let now = ops.now();
        let mut e = Expr::new()
            .value(":epoch", n(epoch))
            .value(":new_epoch", n(new_epoch))
            .value(":now", n(now.millis()));
        let mut set = vec!["pull_epoch = :new_epoch", "pull_rewound_at = :now"];
        let mut remove = Vec::new();
        let mut condition = vec![
            "attribute_exists(pk)".to_string(),
            if epoch == 0 {
                "(attribute_not_exists(pull_epoch) OR pull_epoch = :epoch)".to_string()
            } else {
                "pull_epoch = :epoch".to_string()
            },
        ];
        match &current {
            Some(c) => {
                e = e.value(":seen", s(c));
                condition.push("pull_cursor = :seen".to_string());
                if c.as_str() >= earliest {
                    match &before {
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
        let u = build_update(
            ops.table,
            &keys::account_pk(account_id),
            &keys::subscription_sk(subscription_id),
            expression,
            condition.join(" AND "),
            &e,
        )?;
        if send_update(ops, u).await? {
            tracing::info!(
                %subscription_id,
                from = ?current,
                to = ?before,
                epoch = new_epoch,
                "pull cursor rewound for an operator restart"
            );
            return Ok(new_epoch);
        }
    }
    Err(OpsError::Conflict(
        "the subscription's pull cursor kept moving while it was being rewound; retry the request"
            .into(),
    ))
}
