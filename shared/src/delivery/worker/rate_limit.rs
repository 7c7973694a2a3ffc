//! The worker's side of an integration's rate limit ([`crate::domain::rate_limit`]): a claimed
//! delivery of a limited integration starts only in the slot its integration's schedule
//! ([`crate::store::rate_schedule`]) gives it. The claim comes first, so a copy the claim refuses
//! (a duplicate, a settled delivery) never takes a slot. A slot in the current second: the
//! attempt starts at once. A later one: the slot is kept on the delivery and the lease given up
//! in one write ([`crate::store::delivery::slot`]), and the delivery waits, unclaimed, as a
//! delayed copy of its work alone (the batch packs the copies waiting as long), however far its
//! slot: a copy that comes before it (SQS delays stop at fifteen minutes, or a duplicate) is
//! refused by the claim and put back for the rest of the wait, without another reservation; at
//! its slot the claim takes it and it starts without taking another. An integration without a
//! limit costs nothing here: no read, no write.
//!
//! A container remembers each integration's schedule as it last saw it, so a run that has gone
//! idle is restarted in one write rather than a take and a restart; one it has not seen yet is
//! taken from (a take creates a run where there is none). Within a container, a restart of an
//! integration's run waits for the takes under way and holds back new ones, and the attempts that
//! wait for it take from the run it began: no attempt races another of its container with a
//! restart refused (a write spent for nothing). A schedule that cannot be
//! written (throttled, unreachable) is treated as full: the lease is given up and the delivery
//! waits a second or two ([`crate::domain::rate_limit::deferral`]) and is tried again, never lost
//! and never sent over the limit.

use super::{DeliveryWorker, WorkOutcome, WorkerError, LEASE};
use crate::delivery::dispatch::delay_until;
use crate::delivery::dispatch::REDISPATCH_GRACE;
use crate::domain::rate_limit::{second_of, second_start, Schedule, Step};
use crate::domain::time::Timestamp;
use crate::ids::{IntegrationId, SubscriptionId};
use crate::store;
use crate::store::account_config::AccountConfig;
use crate::store::delivery::Delivery;
use crate::store::integration::Integration;
use crate::store::write::{send, Written};
use crate::store::StoreError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::RwLock;

/// Reservations tried before the schedule counts as unwritable (each try lost a race to another
/// worker's restart).
const TRIES: usize = 6;

/// The integration a subscription's deliveries go to, with its limit, when it has one.
pub fn limited<'a>(
    config: &'a AccountConfig,
    subscription_id: &SubscriptionId,
) -> Option<(&'a Integration, u32)> {
    let sub = config.subscription(subscription_id)?;
    let integration = config.integrations.get(&sub.subscription.integration_id)?;
    Some((integration, integration.rate_limit_per_second?))
}

/// How much longer a delivery the claim refused waits for a rate-limit slot still to come (as
/// an SQS delay): its copy is put back for that long. `None`: it waits for none.
pub(crate) fn waiting(d: &Delivery, now: Timestamp) -> Option<Duration> {
    let slot = d
        .rate_slot
        .filter(|slot| d.status.is_open() && *slot > now)?;
    Some(delay_until(slot, now))
}

/// Reserves slots of limited integrations (one per container).
#[derive(Default)]
pub(crate) struct RateGate {
    /// Each integration's schedule as last seen.
    seen: Mutex<HashMap<IntegrationId, Schedule>>,
    /// Each integration's turns: shared by takes, held alone by a restart.
    turns: Mutex<HashMap<IntegrationId, Arc<RwLock<()>>>>,
}

impl RateGate {
    /// Reserves the next slot of `integration`'s schedule (limited to `limit` a second) at
    /// `now`: the second it starts in. `None`: the schedule could not be written.
    pub async fn reserve(
        &self,
        dynamo: &aws_sdk_dynamodb::Client,
        table: &str,
        integration: &Integration,
        limit: u32,
        now: Timestamp,
    ) -> Option<i64> {
        let (account, id) = (&integration.account_id, &integration.integration_id);
        let mut seen = self.lock().get(id).copied();
        for _ in 0..TRIES {
            let mut step = Schedule::next_step(seen.as_ref(), now, limit);
            let turns = self.turns(id);
            // This attempt's turn at the schedule, held until the run it answers with is kept.
            let (mut _shared, mut _alone) = (None, None);
            match step {
                Step::Take => _shared = Some(turns.read_owned().await),
                Step::Restart { .. } => {
                    _alone = Some(turns.write_owned().await);
                    // The takes and restarts this waited for have moved the run on.
                    seen = self.lock().get(id).copied().or(seen);
                    step = Schedule::next_step(seen.as_ref(), now, limit);
                }
            }
            let (write, restarting) = match step {
                Step::Take => (
                    store::rate_schedule::take(table, account, id, now, limit),
                    None,
                ),
                Step::Restart { seen, start } => (
                    store::rate_schedule::restart(table, account, id, &seen, start, limit, now),
                    Some(start),
                ),
            };
            let answer = match write {
                Ok(w) => send(dynamo, w).await,
                Err(e) => Err(e),
            };
            let (applied, item) = match answer {
                Ok(Written::Applied(item)) => (true, item),
                Ok(Written::Refused(item)) => (false, item),
                Ok(Written::Conflict) => continue,
                Err(e) => return unwritable(integration, &e),
            };
            seen = item.as_ref().and_then(store::rate_schedule::schedule_of);
            if let Some(s) = seen {
                // Answers to concurrent takes come back in any order: the latest run is kept.
                let mut known = self.lock();
                let kept = known.entry(id.clone()).or_insert(s);
                if (s.start, s.taken) > (kept.start, kept.taken) || s.per_second != kept.per_second
                {
                    *kept = s;
                }
            }
            match (applied, restarting, seen) {
                // Our restart: the run's first slot is ours.
                (true, Some(start), _) => return Some(start),
                (true, None, Some(s)) => {
                    if let Some(second) = s.taken_slot(now, limit) {
                        return Some(second);
                    }
                }
                _ => {}
            }
        }
        unwritable(integration, &StoreError::Dynamo("contended".into()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IntegrationId, Schedule>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn turns(&self, id: &IntegrationId) -> Arc<RwLock<()>> {
        let mut turns = self.turns.lock().unwrap_or_else(|e| e.into_inner());
        turns.entry(id.clone()).or_default().clone()
    }
}

/// A schedule that could not be written: logged; the delivery waits as over the limit.
fn unwritable(integration: &Integration, e: &StoreError) -> Option<i64> {
    tracing::warn!(
        account_id = %integration.account_id,
        integration_id = %integration.integration_id,
        error = %e,
        "the rate-limit schedule could not be written; the delivery waits"
    );
    None
}

impl DeliveryWorker {
    /// Whether the claimed delivery `d` (under the lease `token`) may start now under its
    /// integration's rate limit: `None` to start (no limit; its slot has come; or the slot just
    /// reserved is in this second), else what it came to: it waits for its slot, the lease given
    /// up (see the module's header).
    pub(super) async fn rate_admits(
        &self,
        config: &AccountConfig,
        d: &Delivery,
        token: &str,
    ) -> Result<Option<WorkOutcome>, WorkerError> {
        let Some((integration, limit)) = limited(config, &d.subscription_id) else {
            return Ok(None);
        };
        // A slot reserved by an earlier copy: the claim took it only once the slot had come.
        if d.rate_slot.is_some() {
            return Ok(None);
        }
        // The clock as the slot is reserved (not as the work began): a run restarted at a time
        // already past would hand the next reservations slots already past.
        let now = self.clock.now();
        let (dynamo, table) = (&self.clients.dynamo, &self.config.delivery_table);
        let slot = (self
            .rate
            .reserve(dynamo, table, integration, limit, now)
            .await)
            .map(second_start);
        if slot.is_some_and(|at| second_of(at) <= second_of(now)) {
            return Ok(None);
        }
        let due_at = slot.map(|at| at.plus(REDISPATCH_GRACE));
        let w = store::delivery::slot::wait_for_slot(table, d, token, slot, due_at)?;
        Ok(Some(match (send(dynamo, w).await, slot) {
            (Ok(w), _) if !w.applied() => WorkOutcome::Skipped("lease taken over while reserving"),
            (Ok(_), Some(at)) => WorkOutcome::WaitsForRateSlot(delay_until(at, now)),
            (Ok(_), None) => WorkOutcome::OverRateLimit,
            // The lease could not be given up: the copy comes once it has lapsed (a slot reserved
            // but not kept is then reserved again).
            (Err(e), _) => {
                tracing::warn!(delivery_id = %d.delivery_id, error = %e, "the rate-limit wait could not be recorded; the delivery waits out its lease");
                WorkOutcome::WaitsForRateSlot(
                    slot.map_or(LEASE, |at| delay_until(at, now)).max(LEASE),
                )
            }
        }))
    }
}
