//! Accounts' own request rates as one container of the API last read them
//! ([`crate::web::account_rate`]): each used for [`OWN_RATE_LEASE`], then read again.

use crate::domain::time::Timestamp;
use crate::ids::AccountId;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// How long a container uses an account's own rate before it reads it again.
pub const OWN_RATE_LEASE: Duration = Duration::from_secs(60);
/// Accounts whose own rates a container keeps before it drops the expired ones.
const KEPT: usize = 10_000;

/// Accounts' own rates as this container last read them, each with when it was read.
#[derive(Debug, Default)]
pub struct OwnRates(Mutex<HashMap<AccountId, (Option<u32>, Timestamp)>>);

impl OwnRates {
    /// The account's own rate (`Some(None)`: it has none) if read within the lease before `now`.
    pub fn leased(&self, account_id: &AccountId, now: Timestamp) -> Option<Option<u32>> {
        let rates = self.0.lock().unwrap_or_else(|p| p.into_inner());
        rates
            .get(account_id)
            .filter(|(_, read_at)| now < read_at.plus(OWN_RATE_LEASE) && *read_at <= now)
            .map(|(own, _)| *own)
    }

    /// Keeps the account's own rate as read at `now`.
    pub fn keep(&self, account_id: &AccountId, own: Option<u32>, now: Timestamp) {
        let mut rates = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if rates.len() >= KEPT {
            rates.retain(|_, (_, read_at)| now < read_at.plus(OWN_RATE_LEASE));
        }
        rates.insert(account_id.clone(), (own, now));
    }

    /// Forgets the account's own rate (an operator just changed it): the next request reads it.
    pub(crate) fn forget(&self, account_id: &AccountId) {
        let mut rates = self.0.lock().unwrap_or_else(|p| p.into_inner());
        rates.remove(account_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::id;

    #[test]
    fn an_own_rate_is_used_for_its_lease_then_read_again() {
        let rates = OwnRates::default();
        let (a, t0) = (id("acct_a"), Timestamp(1_000_000));
        assert_eq!(rates.leased(&a, t0), None);
        rates.keep(&a, Some(7), t0);
        assert_eq!(rates.leased(&a, t0.plus(OWN_RATE_LEASE / 2)), Some(Some(7)));
        assert_eq!(rates.leased(&a, t0.plus(OWN_RATE_LEASE)), None);
        // A clock that went back does not keep a read from the future.
        assert_eq!(rates.leased(&a, Timestamp(999_000)), None);
        rates.keep(&a, None, t0);
        assert_eq!(rates.leased(&a, t0), Some(None));
        rates.forget(&a);
        assert_eq!(rates.leased(&a, t0), None);
    }
}
