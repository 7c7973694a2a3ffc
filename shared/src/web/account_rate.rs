//! Each account's request rate: at most `requests_per_second` requests a second, of the clock,
//! from all of an account's credentials together (account, integration and publish tokens, and
//! the console sessions of the account's administrators), across every container of the API.
//!
//! A request is counted after its credential is authenticated and before the route does any
//! work of its own: one conditional `ADD` on the account's counter of the second
//! ([`crate::store::rate_window::take_request`]), refused once the count has reached the rate, so
//! of any number of concurrent requests exactly the rate pass. A refused request is a `429`
//! `rate-limited` with `Retry-After: 1` (the next second starts within it). Operators' own routes
//! (`/operator/*`) are not counted.
//!
//! The rate is the account's own, when an operator set one (`PUT
//! /operator/accounts/{account_id}/limits` `{"requests_per_second": n}`), else the deployment's
//! (`ACCOUNT_MAX_REQUESTS_PER_SECOND`, the template's `AccountMaxRequestsPerSecond`). A
//! container reads an account's own rate from its usage item once per [`OWN_RATE_LEASE`]
//! ([`OwnRates`]), so an operator's change holds in every container within that lease (at once in
//! the container that made it).

pub use super::own_rates::{OwnRates, OWN_RATE_LEASE};
use super::problem::ApiError;
use super::state::ApiState;
use crate::domain::time::Timestamp;
use crate::ids::AccountId;
use crate::store::account_limits;
use crate::store::rate_window;
use crate::store::write::{send, Written};
/// The `Retry-After` of a refused request: the counted second ends within it.
pub(crate) const RETRY_AFTER_SECS: u64 = 1;

/// The rate that applies to the account at `now`: its own, else the deployment's.
pub(crate) async fn rate_of(
    state: &ApiState,
    account_id: &AccountId,
    now: Timestamp,
) -> Result<u32, ApiError> {
    let own = match state.account_rates.leased(account_id, now) {
        Some(own) => own,
        None => {
            let usage = account_limits::get(state.dynamo(), state.table(), account_id).await?;
            let own = usage.and_then(|u| u.max_requests_per_second);
            state.account_rates.keep(account_id, own, now);
            own
        }
    };
    Ok(own.unwrap_or(state.config.account_limits.requests_per_second))
}

/// Counts one request of the account in the current second, or refuses it (429) when the
/// second's count has reached the account's rate.
pub async fn admit(state: &ApiState, account_id: &AccountId) -> Result<(), ApiError> {
    let now = state.clock.now();
    let per_second = rate_of(state, account_id, now).await?;
    let take = rate_window::take_request(state.table(), account_id, now, per_second)?;
    match send(state.dynamo(), take).await? {
        Written::Applied(_) => Ok(()),
        Written::Refused(_) | Written::Conflict => Err(ApiError::RateLimited {
            per_second,
            retry_after_secs: RETRY_AFTER_SECS,
        }),
    }
}
