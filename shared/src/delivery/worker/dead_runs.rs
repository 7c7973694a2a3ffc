//! The dead runs a batch's successes end ([`super::effects`]). A subscription's run of dead
//! deliveries is read once a batch, by the first of the batch's first-attempt successes to it
//! that needs it (after that success's answer), and ended by that success alone: its other
//! successes in the batch share the reading and end nothing more. Each of them thereby takes off
//! the deaths saved before that reading, which lies within its own work (its batch began before
//! it, and its outcome is saved after): a death saved before its batch began is always taken off,
//! and one in flight beside it counts on one side of it or the other. A batch of a hundred
//! deliveries to one subscription reads its run once instead of a hundred times.
//!
//! A retry ends the run its claim read (with its Max Retries), as it did. A reading that failed
//! is not shared: the success keeps its end pending ([`RUN_UNREAD`]) and the next one reads again.
//! A success whose outcome was refused (its lease taken over) gives the run it took back, for the
//! next to end; one whose save failed keeps it, as its outcome may have landed with the run kept
//! on it (else its message comes back, and a later batch reads the run again).

use super::effects::RUN_UNREAD;
use super::DeliveryWorker;
use crate::ids::SubscriptionId;
use crate::store;
use crate::store::delivery::Delivery;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// What a batch knows of one subscription's run.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Reading {
    Unread,
    /// Read: this many deaths, to be ended by the success that takes them.
    ToEnd(u32),
    /// A success of the batch has taken the run to end (or there was none).
    Taken,
}

/// The dead runs of one batch's subscriptions, as read and taken.
#[derive(Debug, Default)]
pub(crate) struct BatchRuns {
    runs: Mutex<HashMap<SubscriptionId, Arc<tokio::sync::Mutex<Reading>>>>,
}

impl BatchRuns {
    fn reading(&self, subscription: &SubscriptionId) -> Arc<tokio::sync::Mutex<Reading>> {
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        let reading = runs.entry(subscription.clone());
        reading
            .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(Reading::Unread)))
            .clone()
    }

    /// The run the first-attempt success `d` is to end: the batch's reading of its subscription's
    /// run (read now, after this success's answer, when it is the first to need it), or `None`
    /// when there is none or another success of the batch has taken it. [`RUN_UNREAD`] when it
    /// could not be read.
    pub(crate) async fn take(&self, worker: &DeliveryWorker, d: &Delivery) -> Option<u32> {
        let reading = self.reading(&d.subscription_id);
        // Held while reading: the batch's other successes to this subscription wait for it.
        let mut reading = reading.lock().await;
        if *reading == Reading::Unread {
            let (dynamo, table) = (&worker.clients.dynamo, &worker.config.delivery_table);
            let read =
                store::subscription::dead_count(dynamo, table, &d.account_id, &d.subscription_id);
            match read.await {
                Ok(seen) => *reading = Reading::ToEnd(seen),
                Err(e) => {
                    tracing::warn!(
                        delivery_id = %d.delivery_id,
                        error = %e,
                        "the subscription's dead run could not be read; its end is kept pending"
                    );
                    return Some(RUN_UNREAD);
                }
            }
        }
        match std::mem::replace(&mut *reading, Reading::Taken) {
            Reading::ToEnd(seen) if seen > 0 => Some(seen),
            _ => None,
        }
    }

    /// Gives back the run `run` a success took but could not keep (its outcome was refused).
    pub(crate) async fn give_back(&self, subscription: &SubscriptionId, run: u32) {
        if run == RUN_UNREAD {
            return;
        }
        let reading = self.reading(subscription);
        let mut reading = reading.lock().await;
        if *reading == Reading::Taken {
            *reading = Reading::ToEnd(run);
        }
    }
}
