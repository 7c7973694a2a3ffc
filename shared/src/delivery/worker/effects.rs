//! What an outcome does beyond its delivery (`docs/lifecycles.md#integration-delivery`): a
//! success ends its subscription's run of dead deliveries and records a built-in handler's result
//! on its event; the fiftieth dead delivery in a row (or a 410 Gone to a subscription that pauses
//! on gone) pauses the subscription with its one administrator notice.
//!
//! Each is its own write after the outcome's, and a write can fail after the SDK's tries. Then the
//! message comes back, its delivery is settled and the claim refuses it; the refusal answers with
//! the delivery, and the worker makes what is still to make ([`DeliveryWorker::settled_effects`]).
//! Each effect is made once however often it is tried:
//!
//! * the run's end is kept on the delivery by the outcome's own write (no unit more: the run was
//!   read before it, once a batch, [`super::dead_runs`]) and taken off in one transaction with the
//!   end itself;
//! * the event's internal status moves from `new` to done only once, by its lifecycle's condition;
//! * a pause needs the subscription active and the run at fifty (or, on gone, no resume since the
//!   delivery ended), and its notice is written with it. A success that finds the run at fifty
//!   makes the pause first, so a lost pause is not undone by the success that ends the run.

use super::{DeliveryWorker, WorkerError};
use crate::domain::integration_delivery::DeliveryStatus;
use crate::domain::subscription::{should_auto_pause, SubscriptionStatus, MAX_CONSECUTIVE_DEAD};
use crate::domain::time::Timestamp;
use crate::store;
use crate::store::account_config::AccountConfig;
use crate::store::delivery::Delivery;
use crate::store::notice::{notice_item, subscription_gone_notice, subscription_paused_notice};
use crate::store::subscription::Subscription;
use crate::store::write::{send, send_resolving_conflicts, Write};

/// The run a success keeps on its delivery when it could not read it: the end is then pending and
/// its size is read when it is made.
pub(super) const RUN_UNREAD: u32 = 0;

impl DeliveryWorker {
    /// The effects still to make of a delivery the claim found settled (its message came back,
    /// or a copy of it came): a success's end of the dead run and a built-in handler's result
    /// while still kept on it, a dead one's pause when due. A delivery with nothing kept costs no
    /// request.
    pub(super) async fn settled_effects(
        &self,
        d: &Delivery,
        config: &AccountConfig,
    ) -> Result<(), WorkerError> {
        match d.status {
            DeliveryStatus::Delivered => {
                let internal = d.internal_result.as_deref();
                self.after_delivered(d, d.dead_run_seen, internal, config)
                    .await
            }
            DeliveryStatus::Dead => {
                let gone = config.subscription(&d.subscription_id).is_some_and(|c| {
                    c.subscription
                        .answer_rules()
                        .pauses_subscription(d.last_http_status)
                });
                self.pause_if_due(d, config, gone, d.updated_at).await
            }
            _ => Ok(()),
        }
    }

    /// After a delivery: the subscription's dead run ends (`run`: the run the success saw, kept on
    /// the delivery until it is ended; [`RUN_UNREAD`] when it could not be read), and a built-in
    /// handler's success is recorded on the event.
    pub(super) async fn after_delivered(
        &self,
        d: &Delivery,
        run: Option<u32>,
        internal_result: Option<&str>,
        config: &AccountConfig,
    ) -> Result<(), WorkerError> {
        if let Some(kept) = run {
            self.end_dead_run(d, kept, config).await?;
        }
        if let Some(result) = internal_result {
            let table = &self.config.delivery_table;
            let w =
                store::event::record_internal_result(table, &d.account_id, &d.change_id, result)?;
            // Refused: recorded already (by the first try of this success, its answer lost).
            send(&self.clients.dynamo, w).await?;
        }
        Ok(())
    }

    /// Ends the dead run a success kept on `d` (`kept`), once: the run taken off the subscription
    /// and the kept run off the delivery in one transaction. A run at fifty is a pause due first.
    /// When the end is refused (the run is already shorter: resumed, or the subscription is
    /// gone), the kept run is taken off alone.
    async fn end_dead_run(
        &self,
        d: &Delivery,
        kept: u32,
        config: &AccountConfig,
    ) -> Result<(), WorkerError> {
        let table = &self.config.delivery_table;
        let dynamo = &self.clients.dynamo;
        let (account, subscription) = (&d.account_id, &d.subscription_id);
        let seen = match kept {
            RUN_UNREAD => {
                store::subscription::dead_count(dynamo, table, account, subscription).await?
            }
            seen => seen,
        };
        if seen >= MAX_CONSECUTIVE_DEAD {
            self.pause_if_due(d, config, false, d.updated_at).await?;
        }
        let taken_off = store::delivery::dead_run_ended(table, d, kept)?;
        if seen > 0 {
            let end = store::subscription::end_dead_run(table, account, subscription, seen)?;
            let both = Write::all([end, taken_off.clone()])?;
            if send_resolving_conflicts(dynamo, both).await?.applied() {
                return Ok(());
            }
        }
        // Refused as well when the transaction's first try applied and its answer was lost.
        send(dynamo, taken_off).await?;
        Ok(())
    }

    /// Pauses the subscription once its dead count reaches fifty, or at once when `gone` (a 410
    /// Gone to a subscription that pauses on gone, met by the delivery that ended at `died_at`),
    /// together with the one administrator notice (see [`store::subscription::auto_pause`] and
    /// [`store::subscription::pause_on_gone`]).
    pub(super) async fn pause_if_due(
        &self,
        d: &Delivery,
        config: &AccountConfig,
        gone: bool,
        died_at: Timestamp,
    ) -> Result<(), WorkerError> {
        let table = &self.config.delivery_table;
        let dynamo = &self.clients.dynamo;
        let Some(sub) =
            store::subscription::get(dynamo, table, &d.account_id, &d.subscription_id).await?
        else {
            return Ok(());
        };
        let gone = gone && sub.status == SubscriptionStatus::Active;
        if !gone && !should_auto_pause(sub.consecutive_dead, sub.status) {
            return Ok(());
        }
        let now = self.clock.now();
        let pause = self.pause_with_notice(&sub, config, gone, (now, died_at))?;
        // Refused: another worker paused it first (and requested the notice), a success ended
        // the run, or an operator resumed it since.
        if send_resolving_conflicts(dynamo, pause).await?.applied() {
            tracing::warn!(
                account_id = %d.account_id,
                subscription_id = %d.subscription_id,
                dead_count = sub.consecutive_dead,
                gone,
                "subscription paused (consecutive dead deliveries, or 410 Gone); administrator notice requested"
            );
        }
        Ok(())
    }

    /// The pause of `sub` (as read) with its notice to the account's administrators.
    fn pause_with_notice(
        &self,
        sub: &Subscription,
        config: &AccountConfig,
        gone: bool,
        (now, died_at): (Timestamp, Timestamp),
    ) -> Result<Write, WorkerError> {
        let admins = config
            .account
            .as_ref()
            .map(|a| a.admin_emails.clone())
            .unwrap_or_default();
        let (account, subscription) = (&sub.account_id, &sub.subscription_id);
        let notice = if gone {
            subscription_gone_notice(account, subscription, &admins, now)
        } else {
            subscription_paused_notice(account, subscription, &admins, sub.consecutive_dead, now)
        };
        let notice = store::write::put_new(&self.config.notification_table, notice_item(&notice)?)?;
        let table = &self.config.delivery_table;
        Ok(if gone {
            store::subscription::pause_on_gone(table, sub, notice, now, died_at)?
        } else {
            store::subscription::auto_pause(table, sub, notice, now)?
        })
    }
}
