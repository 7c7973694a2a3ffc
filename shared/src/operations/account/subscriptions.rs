//! Creating, editing and deleting an account's subscriptions, for both doors. A door reads its
//! request into a draft and checks it ([`crate::domain::subscription_input`]); what needs the
//! store is checked here: the integration is the account's and the event-type catalog knows the
//! record types and fields ([`check_new_subscription`], and [`update_subscription`] once the
//! stored subscription is read). Each change is written with its audit entry in one transaction;
//! creates and deletes are counted against the account's cap ([`super::limits`]).

use super::limits;
use super::AccountOps;
use crate::domain::classify::AnswerRules;
use crate::domain::event_type::refusals;
use crate::domain::input::{FieldErrors, Patch};
use crate::domain::retry::RetryPolicy;
use crate::domain::subscription_input::{
    SubscriptionDraft, SubscriptionEdit, SubscriptionSpec, NO_SUCH_INTEGRATION,
};
use crate::ids::{AccountId, SubscriptionId};
use crate::operations::recovery::audit::write_with_audit;
use crate::operations::OpsError;
use crate::store::account_limits::Counted;
use crate::store::audit::{self, AuditAction, AuditRecord};
use crate::store::integration;
use crate::store::subscription::{self, NewSubscription, Subscription};
use crate::store::update::Edit;
use crate::store::write::Write;

/// A new subscription that keeps the rules, whose integration is the account's and whose record
/// types and fields the catalog knows: only [`check_new_subscription`] makes one.
#[derive(Debug, Clone)]
pub struct CheckedSubscription(SubscriptionSpec);

/// Checks a new subscription's draft: the domain's rules, then the integration (one of the
/// account's: another account's is as unknown as none) and the catalog. Every field at fault is
/// named at once ([`OpsError::Fields`]).
pub async fn check_new_subscription(
    ops: &AccountOps<'_>,
    account_id: &AccountId,
    draft: SubscriptionDraft,
) -> Result<CheckedSubscription, OpsError> {
    let (parts, mut errors) = draft.parts();
    if let Some(id) = &parts.integration_id {
        if integration::get(ops.dynamo(), ops.table(), account_id, id)
            .await?
            .is_none()
        {
            errors.add("integration_id", NO_SUCH_INTEGRATION);
        }
    }
    if let (Some(types), Some(fields)) = (&parts.record_types, &parts.fields) {
        catalog_refusals(ops, &mut errors, types, fields).await?;
    }
    Ok(CheckedSubscription(parts.finish(errors)?))
}

/// Records in `errors` what `record_types` and the projected `fields` name that the event-type
/// catalog does not have ([`refusals`]), so the 422 names the type or the field.
async fn catalog_refusals(
    ops: &AccountOps<'_>,
    errors: &mut FieldErrors,
    record_types: &[String],
    fields: &[String],
) -> Result<(), OpsError> {
    let catalog = ops
        .catalog
        .catalog(ops.dynamo(), ops.table(), ops.now())
        .await?;
    for (field, message) in refusals(&catalog.schemas(), record_types, fields) {
        errors.add(field, message);
    }
    Ok(())
}

/// Creates an `active` subscription of the account, audited for `actor` in the same
/// transaction and counted against the account's cap.
pub async fn create_subscription(
    ops: &AccountOps<'_>,
    account_id: &AccountId,
    actor: &str,
    checked: CheckedSubscription,
) -> Result<Subscription, OpsError> {
    let spec = checked.0;
    let now = ops.now();
    let subscription = Subscription::new(
        NewSubscription {
            account_id: account_id.clone(),
            subscription_id: SubscriptionId::new(),
            integration_id: spec.integration_id,
            record_types: spec.record_types,
            filter: spec.filter,
            fields: spec.fields,
            retry_policy: spec.retry_policy,
            answers: spec.answers,
        },
        now,
    );
    let entry = AuditRecord::new(
        AuditAction::CreateSubscription,
        account_id,
        &subscription.subscription_id,
        actor,
        "",
        now,
    )
    .detail("integration_id", &subscription.integration_id)
    .detail("record_types", subscription.record_types.join(","))
    .detail("fields", subscription.fields.join(","));
    limits::create_counted(
        ops,
        account_id,
        &[Counted::Subscriptions],
        Write::all([
            subscription::create(ops.table(), &subscription)?,
            audit::create(ops.table(), &entry)?,
        ])?,
    )
    .await?;
    tracing::info!(
        %account_id,
        subscription_id = %subscription.subscription_id,
        integration_id = %subscription.integration_id,
        "subscription created"
    );
    Ok(subscription)
}

/// Edits the account's subscription `id`: only the fields the edit names change, so the status
/// and dead count the worker maintains are never overwritten. `404` when it is not the
/// account's; `422` when the catalog does not know what it will name, or its answers beside the
/// stored ones break the rules. An empty edit answers the subscription as it is.
pub async fn update_subscription(
    ops: &AccountOps<'_>,
    account_id: &AccountId,
    id: &SubscriptionId,
    actor: &str,
    edit: SubscriptionEdit,
) -> Result<Subscription, OpsError> {
    if edit.is_empty() {
        return ops.ops.subscription(account_id, id).await;
    }
    let current = ops.ops.subscription(account_id, id).await?;
    if edit.names_catalog() {
        // What the subscription will name once edited must be in the catalog.
        let mut errors = FieldErrors::default();
        let types = edit.record_types.as_ref().unwrap_or(&current.record_types);
        let projected = edit.fields.as_ref().unwrap_or(&current.fields);
        catalog_refusals(ops, &mut errors, types, projected).await?;
        errors.or_value(|| Some(()))?;
    }
    let answers = edit.answers(&current.retry_statuses, current.pause_on_gone)?;
    let now = ops.now();
    let mut change = Change {
        update: Edit::new().set("updated_at", &now)?,
        details: Vec::new(),
        current: &current,
    };
    change.names(&edit)?;
    change.policy(edit.retry_policy.as_ref(), answers.as_ref())?;
    let entry = AuditRecord::new(
        AuditAction::EditSubscription,
        account_id,
        id,
        actor,
        "",
        now,
    );
    let entry = change
        .details
        .into_iter()
        .fold(entry, |entry, (key, shown)| entry.detail(key, shown));
    let write = subscription::edit(ops.table(), account_id, id, change.update)?;
    if !write_with_audit(&ops.ops, Some(write), &entry).await? {
        return Err(OpsError::NotFound("subscription"));
    }
    ops.ops.subscription(account_id, id).await
}

/// An edit's update of the stored subscription, and the details of its audit entry, which show
/// each change as `before -> after`.
struct Change<'a> {
    update: Edit,
    details: Vec<(&'static str, String)>,
    current: &'a Subscription,
}

impl Change<'_> {
    fn detail(&mut self, key: &'static str, before: String, after: String) {
        self.details.push((key, format!("{before} -> {after}")));
    }

    /// The record types, filter and projected fields the edit names.
    fn names(&mut self, edit: &SubscriptionEdit) -> Result<(), OpsError> {
        let current = self.current;
        if let Some(types) = &edit.record_types {
            self.set("record_types", types)?;
            self.detail(
                "record_types",
                current.record_types.join(","),
                types.join(","),
            );
        }
        let shown = |f: Option<&String>| f.cloned().unwrap_or_else(|| "(none)".into());
        match &edit.filter {
            Patch::Set(text) => self.set("filter", text)?,
            Patch::Null => self.remove("filter"),
            Patch::Absent => {}
        }
        if !edit.filter.is_absent() {
            let after = shown(edit.filter.set());
            self.detail("filter", shown(current.filter.as_ref()), after);
        }
        if let Some(fields) = &edit.fields {
            self.set("fields", fields)?;
            self.detail("fields", current.fields.join(","), fields.join(","));
        }
        Ok(())
    }

    /// The retry policy and the answer rules the edit sets.
    fn policy(
        &mut self,
        policy: Option<&RetryPolicy>,
        answers: Option<&AnswerRules>,
    ) -> Result<(), OpsError> {
        let current = self.current;
        if let Some(policy) = policy {
            self.set("retry_policy", policy)?;
            let json = |p: &RetryPolicy| serde_json::to_string(p).unwrap_or_default();
            self.detail("retry_policy", json(&current.retry_policy), json(policy));
        }
        if let Some(rules) = answers {
            if rules.retry_statuses.is_empty() {
                self.remove("retry_statuses");
            } else {
                self.set("retry_statuses", &rules.retry_statuses)?;
            }
            if rules.pause_on_gone {
                self.set("pause_on_gone", &true)?;
            } else {
                self.remove("pause_on_gone");
            }
            let shown = |s: &[u16], gone: bool| format!("retry {s:?}, pause on gone {gone}");
            self.detail(
                "answers",
                shown(&current.retry_statuses, current.pause_on_gone),
                shown(&rules.retry_statuses, rules.pause_on_gone),
            );
        }
        Ok(())
    }

    fn set<T: serde::Serialize>(&mut self, attribute: &str, value: &T) -> Result<(), OpsError> {
        self.update = std::mem::take(&mut self.update).set(attribute, value)?;
        Ok(())
    }

    fn remove(&mut self, attribute: &str) {
        self.update = std::mem::take(&mut self.update).remove(attribute);
    }
}

/// Deletes the account's subscription `id` (`404` when it is not the account's), audited for
/// `actor` in the same transaction, and gives its place back to the account's cap.
pub async fn delete_subscription(
    ops: &AccountOps<'_>,
    account_id: &AccountId,
    id: &SubscriptionId,
    actor: &str,
) -> Result<(), OpsError> {
    let entry = AuditRecord::new(
        AuditAction::DeleteSubscription,
        account_id,
        id,
        actor,
        "",
        ops.now(),
    );
    limits::remove_counted(
        ops,
        account_id,
        &[Counted::Subscriptions],
        Write::all([
            subscription::delete(ops.table(), account_id, id)?,
            audit::create(ops.table(), &entry)?,
        ])?,
        "subscription",
    )
    .await?;
    tracing::info!(%account_id, subscription_id = %id, "subscription deleted");
    Ok(())
}
