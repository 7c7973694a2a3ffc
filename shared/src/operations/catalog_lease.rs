//! The event-type catalog as an API container holds it: read once, used by every reader of the
//! container (publishing, the `/v1/event-types` routes, the subscription checks, the console's
//! catalog page) until [`LEASE`] has passed, then read again. Before, each of those requests
//! made a consistent query of the catalog's one partition, so one tenant looping on publish could
//! throttle the catalog for every tenant; now a container reads it at most once per lease.
//!
//! An operator's write of a type ([`crate::api::operator::event_types`]) puts the new version in
//! the catalog of the container that wrote it at once; other containers see it when their lease
//! ends (at most [`LEASE`] later). The clock is the caller's: each use passes `now`, so tests move
//! a manual clock past the lease instead of sleeping.

use crate::domain::time::Timestamp;
use crate::store::event_type::{self, Catalog, EventType};
use crate::store::StoreError;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// How long a container uses the catalog it read before reading it again: how late a type an
/// operator added or changed in another container is seen here. The catalog changes rarely (an
/// operator's edit) while it is read on every publish; 30 s keeps a new type's wait short for
/// the operator and caps the catalog's reads at two a minute per container, whatever the load.
pub const LEASE: Duration = Duration::from_secs(30);

/// A catalog and when it was read.
#[derive(Debug)]
struct Held {
    catalog: Arc<Catalog>,
    read_at: Timestamp,
}

/// The container's catalog (shared by every clone of the API's state).
#[derive(Debug, Default)]
pub struct CatalogLease {
    /// Held across a read, so the requests that find the lease ended wait for one read rather
    /// than each making its own.
    held: Mutex<Option<Held>>,
}

impl CatalogLease {
    /// The catalog at `now`: the one held while its lease lasts, else read again. A failed read
    /// keeps serving the catalog held (and the next request tries again); with none held it is
    /// the caller's error.
    pub async fn catalog(
        &self,
        dynamo: &aws_sdk_dynamodb::Client,
        table: &str,
        now: Timestamp,
    ) -> Result<Arc<Catalog>, StoreError> {
        let mut held = self.held.lock().await;
        if let Some(h) = held.as_ref().filter(|h| is_current(h.read_at, now)) {
            return Ok(h.catalog.clone());
        }
        match event_type::all(dynamo, table).await {
            Ok(catalog) => Ok(Self::keep(&mut held, catalog, now)),
            Err(e) => match held.as_ref() {
                Some(h) => {
                    tracing::warn!(error = %e, "the event-type catalog could not be read again; keeping the one held");
                    Ok(h.catalog.clone())
                }
                None => Err(e),
            },
        }
    }

    /// Holds `catalog`, read at `now` (a read made for another reason, e.g. the operators'
    /// listing, which always reads the store).
    pub(crate) async fn refreshed(&self, catalog: Catalog, now: Timestamp) -> Arc<Catalog> {
        Self::keep(&mut *self.held.lock().await, catalog, now)
    }

    /// Puts `t`, just written by this container, in the catalog held (its lease unchanged): the
    /// writer's container sees its write at once. With none held, the next use reads it.
    pub async fn saved(&self, t: &EventType) {
        if let Some(h) = self.held.lock().await.as_mut() {
            h.catalog = Arc::new((*h.catalog).clone().with(t.clone()));
        }
    }

    fn keep(held: &mut Option<Held>, catalog: Catalog, now: Timestamp) -> Arc<Catalog> {
        let catalog = Arc::new(catalog);
        *held = Some(Held {
            catalog: catalog.clone(),
            read_at: now,
        });
        catalog
    }
}

/// Whether a catalog read at `read_at` may still be used at `now` (a clock set back before the
/// read does not extend it).
fn is_current(read_at: Timestamp, now: Timestamp) -> bool {
    now >= read_at && now < read_at.plus(LEASE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_catalog_is_used_for_its_lease_and_no_longer() {
        let read = Timestamp(1_700_000_000_000);
        assert!(is_current(read, read));
        assert!(is_current(
            read,
            read.plus(LEASE - Duration::from_millis(1))
        ));
        assert!(!is_current(read, read.plus(LEASE)));
        assert!(!is_current(read, Timestamp(read.millis() - 1)));
    }
}
