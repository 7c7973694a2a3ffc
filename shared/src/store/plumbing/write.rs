//! Every write of the store is a [`Write`] value, built by a pure function of the item module that
//! owns it (`delivery::claim`, `subscription::count_dead`, …), and sent by [`send`] — the one place
//! a write meets the DynamoDB SDK. [`send`] tells the three answers a caller must treat
//! differently:
//!
//! * [`Written::Refused`]: a condition was false — someone else moved the item first. This is a
//!   decision (the caller re-reads or gives up), never a fault.
//! * [`Written::Conflict`]: a transaction was cancelled because another transaction was working on
//!   one of its items (`TransactionConflict`, `TransactionInProgressException`). Nothing was
//!   written and nothing was decided: the same write may simply be tried again, which
//!   [`send_resolving_conflicts`] does with a jittered backoff.
//! * [`StoreError::Throttled`]: DynamoDB refused the load and the SDK's own retries (the retry
//!   policy configured for production) did not get through. The caller fails the record so its
//!   trigger comes back later.
//!
//! Items marked to be hash-chained (audit entries, [`chain`]) are linked into their history by
//! [`send`] itself: it reads the history's head and puts the new one in the same transaction.

use super::chain;
pub use super::item::built;
use super::item::{Item, StoreError};
use super::read;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    ConditionCheck, Delete, Put, ReturnValue, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};
use std::collections::BTreeMap;
use std::time::Duration;

/// Tries of a write that keeps meeting concurrent transactions before the conflict is a fault.
pub(crate) const CONFLICT_TRIES: u32 = 8;

/// One write: a single-item put, update or delete, or a transaction of several.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    Put(Put),
    Update(Update),
    /// An update that answers with the item: as it is after the write, or, when its condition
    /// refuses it, as it stood (so the caller learns why without a read).
    UpdateReturningNew(Update),
    Delete(Delete),
    /// All of the writes or none of them.
    All(Vec<TransactWriteItem>),
}

/// What DynamoDB did with a [`Write`].
#[derive(Debug, Clone, PartialEq)]
pub enum Written {
    /// The write was applied; for [`Write::UpdateReturningNew`], with the item as it is now.
    Applied(Option<Item>),
    /// A condition was false: nothing was written. For [`Write::UpdateReturningNew`], with the
    /// item as it stood (`None`: there is no such item); `None` for every other write.
    Refused(Option<Item>),
    /// A concurrent transaction cancelled this one: nothing was written; try again.
    Conflict,
}

impl Written {
    pub fn applied(&self) -> bool {
        matches!(self, Written::Applied(_))
    }
}

impl Write {
    /// A transaction of the given writes. A single item's write stays a single write (cheaper:
    /// DynamoDB bills a transactional write twice).
    pub fn all(writes: impl IntoIterator<Item = Write>) -> Result<Write, StoreError> {
        let mut items = Vec::new();
        for w in writes {
            match w {
                Write::All(inner) => items.extend(inner),
                other => items.push(other.transact_item()?),
            }
        }
        Ok(Write::All(items))
    }

    /// This write as one item of a transaction.
    pub(crate) fn transact_item(self) -> Result<TransactWriteItem, StoreError> {
        Ok(match self {
            Write::Put(p) => TransactWriteItem::builder().put(p).build(),
            Write::Update(u) | Write::UpdateReturningNew(u) => {
                TransactWriteItem::builder().update(u).build()
            }
            Write::Delete(d) => TransactWriteItem::builder().delete(d).build(),
            Write::All(_) => {
                return Err(StoreError::Dynamo(
                    "a transaction cannot be an item of another transaction".into(),
                ))
            }
        })
    }

    /// A condition check as an item of a transaction (`Write::all` takes it like any other).
    pub fn check(check: ConditionCheck) -> Write {
        Write::All(vec![TransactWriteItem::builder()
            .condition_check(check)
            .build()])
    }

    /// The number of items this write touches.
    pub fn len(&self) -> usize {
        match self {
            Write::All(items) => items.len(),
            _ => 1,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A put of `item` (replacing any item with its key).
pub fn put(table: &str, item: Item) -> Result<Write, StoreError> {
    Ok(Write::Put(built(
        Put::builder()
            .table_name(table)
            .set_item(Some(item))
            .build(),
    )?))
}

/// A put of `item` that succeeds only when no item has its key yet (an idempotency key).
pub fn put_new(table: &str, item: Item) -> Result<Write, StoreError> {
    Ok(Write::Put(built(
        Put::builder()
            .table_name(table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .build(),
    )?))
}

/// Sends one write and says what DynamoDB did with it (see the module notes). A write with items
/// marked to be chained ([`chain::pending`]: audit entries) is linked into their histories first
/// ([`send_chained`]).
pub async fn send(dynamo: &aws_sdk_dynamodb::Client, write: Write) -> Result<Written, StoreError> {
    match write {
        Write::Put(p) if chain::is_pending_put(&p) => {
            send_chained(dynamo, vec![TransactWriteItem::builder().put(p).build()]).await
        }
        Write::All(items) if !chain::pending_histories(&items).is_empty() => {
            send_chained(dynamo, items).await
        }
        write => send_linked(dynamo, write).await,
    }
}

/// Sends a transaction whose marked items are linked into their histories: each history's head
/// is read, the items numbered and hashed after it, and the new head put with them on the
/// condition that the head is still the one read ([`chain::link`]). A refusal after which a
/// head has moved was another writer's entry landing first: the heads are read again and the
/// transaction tried again, at most [`chain::TRIES`] times. A refusal with the heads unmoved is
/// the write's own (an entry's key taken, the action's condition false). A transaction conflict
/// (concurrent writers of one head, in AWS) is retried the same way, so a chained write never
/// answers [`Written::Conflict`].
async fn send_chained(
    dynamo: &aws_sdk_dynamodb::Client,
    items: Vec<TransactWriteItem>,
) -> Result<Written, StoreError> {
    let histories = chain::pending_histories(&items);
    let table = items
        .iter()
        .filter_map(TransactWriteItem::put)
        .find(|p| chain::is_pending_put(p))
        .map(|p| p.table_name().to_owned())
        .unwrap_or_default();
    let mut heads = read_heads(dynamo, &table, &histories).await?;
    for attempt in 1..=chain::TRIES {
        let linked = Write::All(chain::link(items.clone(), &heads)?);
        match send_linked(dynamo, linked).await? {
            Written::Refused(item) => {
                let now = read_heads(dynamo, &table, &histories).await?;
                if now == heads {
                    return Ok(Written::Refused(item));
                }
                tracing::debug!(attempt, "a history's head moved; linking again");
                heads = now;
                tokio::time::sleep(conflict_backoff(attempt)).await;
            }
            // Another writer's transaction on the head (or an item of the action) was under
            // way: as a moved head, read again and retry.
            Written::Conflict => {
                tracing::debug!(
                    attempt,
                    "transaction conflict on a chained write; trying again"
                );
                tokio::time::sleep(conflict_backoff(attempt)).await;
                heads = read_heads(dynamo, &table, &histories).await?;
            }
            decided => return Ok(decided),
        }
    }
    Err(StoreError::Conflict(format!(
        "the head of {histories:?} kept moving after {} tries",
        chain::TRIES
    )))
}

/// Each history's head as stored (`None`: no head yet).
async fn read_heads(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    histories: &[String],
) -> Result<BTreeMap<String, Option<chain::Head>>, StoreError> {
    let mut heads = BTreeMap::new();
    for pk in histories {
        let head = match read::get(dynamo, table, pk, chain::CHAIN_HEAD_SK).await? {
            None => None,
            Some(item) => Some(chain::Head::of(&item).ok_or_else(|| {
                StoreError::Dynamo(format!("the head of history {pk} is unreadable"))
            })?),
        };
        heads.insert(pk.clone(), head);
    }
    Ok(heads)
}

/// Sends one write as it is (its chained items, if any, already linked).
async fn send_linked(
    dynamo: &aws_sdk_dynamodb::Client,
    write: Write,
) -> Result<Written, StoreError> {
    match write {
        Write::Put(p) => answer(
            dynamo
                .put_item()
                .table_name(p.table_name())
                .set_item(Some(p.item().clone()))
                .set_condition_expression(p.condition_expression().map(str::to_string))
                .set_expression_attribute_names(p.expression_attribute_names().cloned())
                .set_expression_attribute_values(p.expression_attribute_values().cloned())
                .send()
                .await
                .map(|_| None),
        ),
        Write::Update(u) => answer(update(dynamo, u, false).await),
        Write::UpdateReturningNew(u) => {
            let result = update(dynamo, u, true).await;
            if let Err(SdkError::ServiceError(e)) = &result {
                if let UpdateItemError::ConditionalCheckFailedException(refused) = e.err() {
                    return Ok(Written::Refused(refused.item().cloned()));
                }
            }
            answer(result)
        }
        Write::Delete(d) => answer(
            dynamo
                .delete_item()
                .table_name(d.table_name())
                .set_key(Some(d.key().clone()))
                .set_condition_expression(d.condition_expression().map(str::to_string))
                .set_expression_attribute_names(d.expression_attribute_names().cloned())
                .set_expression_attribute_values(d.expression_attribute_values().cloned())
                .send()
                .await
                .map(|_| None),
        ),
        Write::All(items) if items.is_empty() => Ok(Written::Applied(None)),
        Write::All(items) => match dynamo
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
        {
            Ok(_) => Ok(Written::Applied(None)),
            Err(e) => transaction_failure(e),
        },
    }
}

/// Sends a write, trying it again (with a jittered backoff) while concurrent transactions cancel
/// it. Never answers [`Written::Conflict`]: after [`CONFLICT_TRIES`] it is a
/// [`StoreError::Conflict`].
pub(crate) async fn send_resolving_conflicts(
    dynamo: &aws_sdk_dynamodb::Client,
    write: Write,
) -> Result<Written, StoreError> {
    for attempt in 1..=CONFLICT_TRIES {
        match send(dynamo, write.clone()).await? {
            Written::Conflict => {
                tracing::debug!(attempt, "transaction conflict; trying again");
                tokio::time::sleep(conflict_backoff(attempt)).await;
            }
            decided => return Ok(decided),
        }
    }
    Err(StoreError::Conflict(format!(
        "a transaction of {} items kept conflicting after {CONFLICT_TRIES} tries",
        write.len()
    )))
}

/// Full jitter over 10 ms × 2^attempt, at most 640 ms.
fn conflict_backoff(attempt: u32) -> Duration {
    let ceiling = 10u64 << attempt.min(6);
    Duration::from_millis(rand::random::<u64>() % ceiling + 1)
}

async fn update(
    dynamo: &aws_sdk_dynamodb::Client,
    u: Update,
    return_new: bool,
) -> Result<Option<Item>, SdkError<UpdateItemError, aws_smithy_runtime_api::http::Response>> {
    dynamo
        .update_item()
        .table_name(u.table_name())
        .set_key(Some(u.key().clone()))
        .update_expression(u.update_expression())
        .set_condition_expression(u.condition_expression().map(str::to_string))
        .set_expression_attribute_names(u.expression_attribute_names().cloned())
        .set_expression_attribute_values(u.expression_attribute_values().cloned())
        .set_return_values(return_new.then_some(ReturnValue::AllNew))
        // Costs no read capacity: the item comes with the refusal.
        .set_return_values_on_condition_check_failure(
            return_new.then_some(ReturnValuesOnConditionCheckFailure::AllOld),
        )
        .send()
        .await
        .map(|out| out.attributes)
}

/// A single-item write's answer: a failed condition is a decision.
fn answer<E, R>(result: Result<Option<Item>, SdkError<E, R>>) -> Result<Written, StoreError>
where
    E: ProvideErrorMetadata + std::fmt::Debug + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match result {
        Ok(item) => Ok(Written::Applied(item)),
        Err(e) => match error_code(&e) {
            Some("ConditionalCheckFailedException") => Ok(Written::Refused(None)),
            Some(code) if is_throttle(code) => Err(StoreError::throttled(e)),
            _ => Err(StoreError::dynamo(e)),
        },
    }
}

fn error_code<E: ProvideErrorMetadata, R>(e: &SdkError<E, R>) -> Option<&str> {
    match e {
        SdkError::ServiceError(service) => service.err().code(),
        _ => None,
    }
}

fn is_throttle(code: &str) -> bool {
    matches!(
        code,
        "ProvisionedThroughputExceededException"
            | "ThrottlingException"
            | "RequestLimitExceeded"
            | "ThrottlingError"
            | "ProvisionedThroughputExceeded"
    )
}

/// What a cancelled transaction's reasons say. A failed condition wins over a conflict: when one
/// of the items' conditions is false, trying again cannot help.
fn transaction_failure(
    e: SdkError<TransactWriteItemsError, aws_smithy_runtime_api::http::Response>,
) -> Result<Written, StoreError> {
    if let SdkError::ServiceError(service) = &e {
        match service.err() {
            TransactWriteItemsError::TransactionCanceledException(cancelled) => {
                let codes: Vec<&str> = cancelled
                    .cancellation_reasons()
                    .iter()
                    .filter_map(|r| r.code())
                    .collect();
                let message = cancelled.message().unwrap_or_default();
                if codes.contains(&"ConditionalCheckFailed")
                    || (codes.is_empty() && message.contains("ConditionalCheckFailed"))
                {
                    return Ok(Written::Refused(None));
                }
                if codes.contains(&"TransactionConflict")
                    || (codes.is_empty() && message.contains("TransactionConflict"))
                {
                    return Ok(Written::Conflict);
                }
                if codes.iter().any(|c| is_throttle(c)) {
                    return Err(StoreError::throttled(e));
                }
            }
            TransactWriteItemsError::TransactionInProgressException(_) => {
                return Ok(Written::Conflict)
            }
            other => {
                if other.code().is_some_and(is_throttle) {
                    return Err(StoreError::throttled(e));
                }
            }
        }
    }
    Err(StoreError::dynamo(e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::plumbing::expr::s;

    fn put(pk: &str) -> Write {
        Write::Put(
            Put::builder()
                .table_name("t")
                .item("pk", s(pk))
                .item("sk", s("X"))
                .condition_expression("attribute_not_exists(pk)")
                .build()
                .unwrap(),
        )
    }

    #[test]
    fn a_transaction_of_writes_flattens_nested_transactions() {
        let inner = Write::all([put("a"), put("b")]).unwrap();
        let outer = Write::all([inner, put("c")]).unwrap();
        assert_eq!(outer.len(), 3);
        let Write::All(items) = outer else {
            panic!("not a transaction")
        };
        let pks: Vec<_> = items
            .iter()
            .map(|i| i.put().unwrap().item()["pk"].as_s().unwrap().clone())
            .collect();
        assert_eq!(pks, ["a", "b", "c"]);
    }

    #[test]
    fn a_transaction_cannot_be_an_item_of_another() {
        let inner = Write::all([put("a")]).unwrap();
        assert!(inner.transact_item().is_err());
    }

    #[test]
    fn conflict_backoff_grows_and_stays_bounded() {
        for attempt in 1..=CONFLICT_TRIES {
            let wait = conflict_backoff(attempt);
            assert!(wait >= Duration::from_millis(1));
            assert!(wait <= Duration::from_millis(641));
        }
    }
}
