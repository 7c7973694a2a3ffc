//! Publishing changes, for an owning application whose records are not in DynamoDB:
//!
//! * `POST /v1/changes` (a publish token, `rhy_pub_…`: it publishes for its own account and may
//!   call no other route) and `POST /operator/accounts/{account_id}/changes` (an operator naming
//!   the account). The body is one change, or `{"changes": [change…]}` with 1 to
//!   [`MAX_BATCH`] of them; the whole body is at most 256 KiB (413 past it).
//! * A change: `{change_id?, record_type, record_id, operation? | event_code?, occurred_at?,
//!   warehouse?, changed_fields?, trace_id?, record}`. `record_type` must be in the event-type catalog;
//!   `event_code` defaults to `{record_type}.{operation}` (`operation`: `created`, `updated` or
//!   `deleted`); `occurred_at` (RFC 3339) to now; `change_id` (a ULID, kept in upper case) to a
//!   new one. A change of a batch is at most [`MAX_CHANGE_BYTES`] of JSON (its own 413 problem
//!   past it); a single change is bounded by the body's 256 KiB.
//! * → 202 `{changes: [{index, change_id, result}…]}`: `result` is `published`, or `repeated`
//!   when a change with that id was published before (nothing is written again). A bad change of
//!   a batch gets `{index, problem}` (an RFC 7807 problem naming its fields) and the others are
//!   written all the same; a single change that is bad is the problem itself (422).
//! * The trace the changes were made in, for their deliveries' `traceparent`: a change's own
//!   `trace_id` field (X-Ray or W3C form; refused when malformed), else the request's
//!   `traceparent` or, without one, its `X-Amzn-Trace-Id` header (ignored when malformed, as
//!   W3C trace context asks). It is written with the change, normalized to 32 hex digits.
//! * Who published: every change item records its publisher (`published_by`: `token {id}` of
//!   the publish token, or `operator {identity}`); an operator's publish is also written to the
//!   account's audit history (`publish_changes`: the operator, how many changes, what became of
//!   them, the ids published).
//! * `Idempotency-Key` (with a single change): the first publish with the key decides the change
//!   id; a repeat answers that id, `repeated`. A batch's changes are made idempotent by their own
//!   `change_id`s.
//!
//! Each change is written into the changes table exactly as the owning application writes its own
//! ([`crate::store::published_change`]), so the same stream and ingest deliver it: one path, one
//! set of guarantees. Publish tokens are issued by operators (`POST
//! /operator/accounts/{account_id}/publish-tokens`) or the account's administrator (`POST
//! /v1/publish-tokens`), both `{revoke_existing?, expires_in?, reason?}` → 201, the token shown
//! once. An account token cannot publish: publishing is the owning application's credential, kept
//! apart from the one that manages subscriptions.

use crate::api::v1::event_types::{catalog, Catalog};
use crate::domain::change::{Change, ChangeError};
use crate::domain::time::Timestamp;
use crate::domain::trace_context;
use crate::ids::{AccountId, ChangeId};
use crate::operations::account::tokens::{self, TokenRequest};
use crate::operations::recovery::audit::write_with_audit;
use crate::operations::{MAX_REASON_CHARS, WRITE_CONCURRENCY};
use crate::store::account;
use crate::store::audit::{AuditAction, AuditRecord};
use crate::store::published_change::{self, Publisher};
use crate::store::write::{send, Written};
use crate::store::StoreError;
use crate::web::auth::{self, AccountAuth, IssuedTokenView, Operator, Principal};
use crate::web::extract::{path_id, ApiPath, Fields, JsonBody};
use crate::web::problem::{ApiError, Problem};
use crate::web::state::ApiState;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::{Json, Router};
use futures::{stream, StreamExt};
use serde::Serialize;
use serde_json::{Map, Value};
use std::sync::Arc;

/// Most changes in one batch.
pub(crate) const MAX_BATCH: usize = 100;
/// Largest change, in bytes of compact JSON (its item in the changes table stays well within
/// DynamoDB's 400 KB).
pub(crate) const MAX_CHANGE_BYTES: usize = 64 * 1024;
/// Longest `Idempotency-Key`.
pub(crate) const MAX_IDEMPOTENCY_KEY_CHARS: usize = 255;
pub(crate) const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// AWS X-Ray's trace header (`Root=1-…;Parent=…;Sampled=…`).
pub(crate) const X_RAY_TRACE_HEADER: &str = "x-amzn-trace-id";
const OPERATIONS: [&str; 3] = ["created", "updated", "deleted"];

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/v1/changes", post(publish))
        .route(
            "/operator/accounts/{account_id}/changes",
            post(publish_as_operator),
        )
        .route("/v1/publish-tokens", post(issue_own))
        .route(
            "/operator/accounts/{account_id}/publish-tokens",
            post(issue_as_operator),
        )
}

/// What became of one change of a publish.
#[derive(Debug, Serialize)]
pub(crate) struct PublishedView {
    pub index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_id: Option<ChangeId>,
    /// `published` or `repeated`; absent with a problem.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<Problem>,
}

#[derive(Debug, Serialize)]
pub(crate) struct PublishView {
    pub changes: Vec<PublishedView>,
}

/// The field of a change an invalid change names.
fn change_error(e: &ChangeError) -> ApiError {
    let field = match e {
        ChangeError::Empty { field }
        | ChangeError::ContainsHash { field, .. }
        | ChangeError::ControlCharacter { field, .. }
        | ChangeError::TooLong { field, .. } => (*field).to_string(),
        ChangeError::NotAChangeId { .. } => "change_id".into(),
        ChangeError::EmptyChangedField { index } => format!("changed_fields[{index}]"),
    };
    ApiError::field(field, e.to_string())
}

/// A body's (or a change's) `account_id`, when given, must be the credential's own account.
fn check_account(f: &mut Fields, account_id: &AccountId) -> Result<(), ApiError> {
    if f.has("account_id") {
        let named: Option<String> = f.optional("account_id");
        if named.as_deref() != Some(account_id.as_str()) {
            return Err(ApiError::forbidden(
                "changes are published for the credential's own account only",
            ));
        }
    }
    Ok(())
}

/// The trace of the request's headers (normalized), when one of them carries a well-formed one.
fn request_trace(headers: &HeaderMap) -> Option<String> {
    [trace_context::HEADER, X_RAY_TRACE_HEADER]
        .iter()
        .find_map(|name| {
            let value = headers.get(*name)?.to_str().ok()?;
            trace_context::normalized_trace_id(value)
        })
}

/// Reads one change of `account_id` from its fields: every invalid field named at once.
/// `trace`: the request's trace, for a change that names none of its own.
fn read_change(
    mut f: Fields,
    account_id: &AccountId,
    catalog: &Catalog,
    trace: Option<&str>,
    now: Timestamp,
) -> Result<Change, ApiError> {
    check_account(&mut f, account_id)?;
    let change_id = change_id_field(&mut f);
    let record_type = record_type_field(&mut f, catalog);
    let record_id: Option<String> = f.required("record_id");
    let (operation, event_code) = operation_fields(&mut f);
    let occurred_at = match f.optional::<String>("occurred_at") {
        Some(text) => Timestamp::parse_rfc3339(&text).or_else(|| {
            f.error("occurred_at", "must be an RFC 3339 date-time");
            None
        }),
        None => Some(now),
    };
    let warehouse: Option<String> = f.optional("warehouse");
    let changed_fields: Vec<String> = f.optional("changed_fields").unwrap_or_default();
    let record: Option<Map<String, Value>> = f.required("record");
    let trace_id = trace_id_field(&mut f, trace);
    f.finish()?;
    let (Some(change_id), Some(record_type), Some(record_id), Some(occurred_at), Some(record)) =
        (change_id, record_type, record_id, occurred_at, record)
    else {
        return Err(ApiError::internal("validated change fields missing"));
    };
    let event_code =
        event_code.unwrap_or_else(|| format!("{record_type}.{}", operation.unwrap_or_default()));
    let change = Change {
        account_id: account_id.clone(),
        change_id,
        record_type,
        record_id,
        event_code,
        warehouse,
        occurred_at,
        changed_fields,
        record,
        trace_id,
    };
    change.validate().map_err(|e| change_error(&e))?;
    Ok(change)
}

/// The change's id: the one given, or a new one.
fn change_id_field(f: &mut Fields) -> Option<ChangeId> {
    // Change ids compare bytewise (sort keys, the pull cursor), which is time order only within
    // one case: a published id is a ULID in its canonical upper case, whether given (in either
    // case) or minted here.
    match f.optional::<String>("change_id") {
        Some(text) => match text.to_ascii_uppercase().parse::<ChangeId>() {
            Ok(id) => Some(id),
            Err(e) => {
                f.error("change_id", e.to_string());
                None
            }
        },
        None => Some(ChangeId::from_stored(ulid::Ulid::new().to_string())),
    }
}

/// The record type, which must be in the event-type catalog.
fn record_type_field(f: &mut Fields, catalog: &Catalog) -> Option<String> {
    let record_type: Option<String> = f.required("record_type");
    if let Some(t) = &record_type {
        if !catalog.knows(t) {
            f.error(
                "record_type",
                format!("{t:?} is not a record type of the event-type catalog (GET /v1/event-types lists them)"),
            );
        }
    }
    record_type
}

/// The operation and the event code: one of them at least.
fn operation_fields(f: &mut Fields) -> (Option<String>, Option<String>) {
    let operation: Option<String> = f.optional("operation");
    if let Some(op) = &operation {
        if !OPERATIONS.contains(&op.as_str()) {
            f.error(
                "operation",
                format!("must be one of {}", OPERATIONS.join(", ")),
            );
        }
    }
    let event_code: Option<String> = f.optional("event_code");
    if operation.is_none() && event_code.is_none() && !f.has("operation") && !f.has("event_code") {
        f.error(
            "operation",
            "name the operation (created, updated, deleted) or an event_code",
        );
    }
    (operation, event_code)
}

/// The change's trace id, normalized, or the request's.
fn trace_id_field(f: &mut Fields, trace: Option<&str>) -> Option<String> {
    match f.optional::<String>("trace_id") {
        Some(text) => trace_context::normalized_trace_id(&text).or_else(|| {
            f.error(
                "trace_id",
                "must be a nonzero trace id: X-Ray's 1-<8 hex>-<24 hex>, 32 hex digits, or a traceparent",
            );
            None
        }),
        None => trace.map(str::to_owned),
    }
}

/// A store failure of one change, as that change's problem (a throttle is worth retrying).
fn store_problem(e: StoreError) -> ApiError {
    match e {
        StoreError::Throttled(_) => ApiError::Unavailable {
            detail: "the change could not be written now (throttled); publish it again".into(),
        },
        other => ApiError::internal(other.to_string()),
    }
}

/// Writes one change; with an idempotency key, claims the key first (see
/// [`crate::store::published_change`]).
async fn write_change(
    state: &ApiState,
    mut change: Change,
    publisher: &Publisher,
    idempotency_key: Option<&str>,
) -> Result<(ChangeId, &'static str), ApiError> {
    let dynamo = state.dynamo();
    if let Some(key) = idempotency_key {
        let claim = published_change::claim_key(
            state.table(),
            &change.account_id,
            key,
            &change.change_id,
            state.clock.now(),
        )?;
        if !send(dynamo, claim).await.map_err(store_problem)?.applied() {
            match published_change::claimed(dynamo, state.table(), &change.account_id, key)
                .await
                .map_err(store_problem)?
            {
                Some(first) => change.change_id = first,
                None => {
                    return Err(ApiError::conflict(
                        "the idempotency key is being claimed; retry",
                    ))
                }
            }
        }
    }
    let put = published_change::put(&state.config.changes_table, &change, publisher)?;
    let result = match send(dynamo, put).await.map_err(store_problem)? {
        Written::Applied(_) => "published",
        Written::Refused(_) => "repeated",
        Written::Conflict => return Err(ApiError::conflict("the change met a conflict; retry")),
    };
    Ok((change.change_id, result))
}

/// The publish operation both doors call: the body's change or batch, for `account_id`, each
/// change recording its `publisher`; what became of each change.
pub async fn publish_changes(
    state: &ApiState,
    account_id: &AccountId,
    publisher: &Publisher,
    mut f: Fields,
    headers: &HeaderMap,
) -> Result<Vec<PublishedView>, ApiError> {
    let idempotency_key = idempotency_key(headers)?;
    check_account(&mut f, account_id)?;
    let catalog = catalog(state).await?;
    let now = state.clock.now();
    let trace = request_trace(headers);
    let trace = trace.as_deref();
    if !f.has("changes") {
        let change = read_change(f, account_id, &catalog, trace, now)?;
        let (change_id, result) =
            write_change(state, change, publisher, idempotency_key.as_deref()).await?;
        return Ok(vec![PublishedView {
            index: 0,
            change_id: Some(change_id),
            result: Some(result),
            problem: None,
        }]);
    }
    let items = batch_items(f, idempotency_key.is_some())?;
    let results: Vec<PublishedView> = stream::iter(items.into_iter().enumerate())
        .map(|(index, item)| {
            let catalog = &catalog;
            async move {
                let outcome = match item {
                    Value::Object(map)
                        if Value::Object(map.clone()).to_string().len() > MAX_CHANGE_BYTES =>
                    {
                        Err(ApiError::PayloadTooLarge {
                            detail: format!("a change is at most {MAX_CHANGE_BYTES} bytes of JSON"),
                        })
                    }
                    Value::Object(map) => {
                        match read_change(Fields::new(map), account_id, catalog, trace, now) {
                            Ok(change) => write_change(state, change, publisher, None).await,
                            Err(e) => Err(e),
                        }
                    }
                    _ => Err(ApiError::malformed("a change is a JSON object")),
                };
                batch_result(index, outcome)
            }
        })
        .buffered(WRITE_CONCURRENCY)
        .collect()
        .await;
    let written = results.iter().filter(|r| r.result.is_some()).count();
    tracing::info!(%account_id, changes = results.len(), written, "changes published");
    Ok(results)
}

/// The request's `Idempotency-Key`, trimmed, when it has one.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    match headers.get(IDEMPOTENCY_KEY) {
        None => Ok(None),
        Some(v) => match v.to_str() {
            Ok(k) if !k.trim().is_empty() && k.chars().count() <= MAX_IDEMPOTENCY_KEY_CHARS => {
                Ok(Some(k.trim().to_owned()))
            }
            _ => Err(ApiError::malformed(format!(
                "Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY_CHARS} visible ASCII characters"
            ))),
        },
    }
}

/// A batch's `changes`: 1 to [`MAX_BATCH`] of them, and no idempotency key.
fn batch_items(mut f: Fields, has_idempotency_key: bool) -> Result<Vec<Value>, ApiError> {
    let items: Option<Vec<Value>> = f.required("changes");
    if let Some(items) = &items {
        if items.is_empty() || items.len() > MAX_BATCH {
            f.error("changes", format!("must hold 1 to {MAX_BATCH} changes"));
        }
    }
    if has_idempotency_key {
        f.error(
            "changes",
            "Idempotency-Key applies to a single change; give each change of a batch its change_id",
        );
    }
    f.finish()?;
    Ok(items.unwrap_or_default())
}

/// What became of one change of a batch (an internal failure is logged: it is ours).
fn batch_result(
    index: usize,
    outcome: Result<(ChangeId, &'static str), ApiError>,
) -> PublishedView {
    match outcome {
        Ok((change_id, result)) => PublishedView {
            index,
            change_id: Some(change_id),
            result: Some(result),
            problem: None,
        },
        Err(e) => {
            if let ApiError::Internal(cause) = &e {
                tracing::error!(index, cause = %cause, "a published change was not written");
            }
            PublishedView {
                index,
                change_id: None,
                result: None,
                problem: Some(e.problem()),
            }
        }
    }
}

type Response = axum::response::Response;

fn accepted(changes: Vec<PublishedView>) -> Response {
    (StatusCode::ACCEPTED, Json(PublishView { changes })).into_response()
}

async fn publish(
    principal: Principal,
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
    JsonBody(f): JsonBody,
) -> Result<Response, ApiError> {
    let Principal::Publisher {
        account_id,
        token_id,
    } = principal
    else {
        return Err(ApiError::unauthorized(
            "this route needs a publish token (rhy_pub_…)",
        ));
    };
    let publisher = Publisher::Token(token_id);
    let results = publish_changes(&state, &account_id, &publisher, f, &headers).await?;
    Ok(accepted(results))
}

/// The account of an operator's path, or 404 (also while it is being deleted).
async fn existing(state: &ApiState, account_id: &str) -> Result<AccountId, ApiError> {
    let account_id: AccountId = path_id(account_id, "account")?;
    if !account::is_live(state.dynamo(), state.table(), &account_id).await? {
        return Err(crate::operations::OpsError::AccountGone.into());
    }
    Ok(account_id)
}

/// An operator's publish, audited in the account's history once its changes are written (a
/// batch may hold more changes than one transaction: the entry follows them): how many, what
/// became of them, and the ids of those published.
async fn publish_as_operator(
    operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath(account_id): ApiPath<String>,
    headers: HeaderMap,
    JsonBody(f): JsonBody,
) -> Result<Response, ApiError> {
    let account_id = existing(&state, &account_id).await?;
    let publisher = Publisher::Operator(operator.id.clone());
    let results = publish_changes(&state, &account_id, &publisher, f, &headers).await?;
    let of = |r: &str| results.iter().filter(|v| v.result == Some(r)).count();
    let published: Vec<&str> = results
        .iter()
        .filter(|v| v.result == Some("published"))
        .filter_map(|v| v.change_id.as_ref().map(ChangeId::as_str))
        .collect();
    let entry = AuditRecord::for_account(
        AuditAction::PublishChanges,
        &account_id,
        &operator.id,
        "",
        state.clock.now(),
    )
    .detail("changes", results.len())
    .detail("published", of("published"))
    .detail("repeated", of("repeated"))
    .detail(
        "refused",
        results.iter().filter(|v| v.problem.is_some()).count(),
    )
    .detail("change_ids", published.join(","));
    write_with_audit(&state.ops(), None, &entry).await?;
    tracing::info!(operator = %operator.id, %account_id, changes = results.len(), "operator published changes");
    Ok(accepted(results))
}

/// Issues a publish token for the account, audited for `actor`.
async fn issue_publish_token(
    state: &ApiState,
    account_id: &AccountId,
    actor: &str,
    mut f: Fields,
) -> Result<(StatusCode, Json<IssuedTokenView>), ApiError> {
    let revoke_existing: bool = f.optional("revoke_existing").unwrap_or(false);
    let expires_in = auth::read_token_expiry(&mut f);
    let reason = if f.has("reason") {
        f.required_text("reason", MAX_REASON_CHARS)
            .unwrap_or_default()
    } else {
        String::new()
    };
    f.finish()?;
    let request = TokenRequest {
        revoke_existing,
        expires_in,
    };
    let (token, record, revoked) =
        tokens::issue_publish_token(&state.account_ops(), account_id, actor, &reason, request)
            .await?;
    Ok((
        StatusCode::CREATED,
        Json(IssuedTokenView::new(token, &record, revoked)),
    ))
}

async fn issue_own(
    auth: AccountAuth,
    State(state): State<Arc<ApiState>>,
    JsonBody(f): JsonBody,
) -> Result<(StatusCode, Json<IssuedTokenView>), ApiError> {
    issue_publish_token(&state, &auth.account_id, &auth.actor(), f).await
}

async fn issue_as_operator(
    operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath(account_id): ApiPath<String>,
    JsonBody(f): JsonBody,
) -> Result<(StatusCode, Json<IssuedTokenView>), ApiError> {
    let account_id = existing(&state, &account_id).await?;
    issue_publish_token(&state, &account_id, &operator.id, f).await
}
