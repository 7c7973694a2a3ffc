//! The event-type catalog, managed by operators:
//!
//! * `GET /operator/event-types` → `{data: [event type…]}` (as tenants see them, plus
//!   `updated_by`).
//! * `PUT /operator/event-types/{type}` `{schema, example, description?, version?, reason?}` →
//!   200 (201 when the type is new), the type as it is now. `schema` must be an object schema of
//!   the supported subset ([`crate::domain::event_type::check_schema`]) and `example` must fit it.
//!   The version is the stored one plus one, or `version` when given (it must be higher). The
//!   write is conditional on the version read, so of two concurrent edits one is a 409.
//!
//! A saved type is in this container's catalog at once; the API's other containers read it when
//! their catalog's lease ends ([`crate::operations::catalog_lease::LEASE`]).
//!
//! Audited (`put_event_type`, the version and a digest of the change in the details) in one
//! transaction with the write, in the catalog's own history
//! ([`crate::store::audit::CATALOG_HISTORY`]): the catalog belongs to no account.

use crate::api::v1::event_types::EventTypeView;
use crate::domain::event_type::{check_example, check_schema, is_type_name, MAX_DOCUMENT_BYTES};
use crate::operations::MAX_REASON_CHARS;
use crate::store::audit::{self, AuditAction, AuditRecord};
use crate::store::event_type::{self, EventType};
use crate::store::write::{send_resolving_conflicts, Write};
use crate::web::auth::Operator;
use crate::web::extract::{ApiPath, JsonBody};
use crate::web::problem::ApiError;
use crate::web::state::ApiState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, put};
use axum::{Json, Router};
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;

/// Longest description.
pub(crate) const MAX_DESCRIPTION_CHARS: usize = 2000;
/// Highest version an operator may give.
pub(crate) const MAX_VERSION: u32 = 1_000_000;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/operator/event-types", get(list))
        .route("/operator/event-types/{record_type}", put(save))
}

/// An event type as operators see it.
#[derive(Debug, Serialize)]
pub(crate) struct OperatorEventTypeView {
    #[serde(flatten)]
    pub event_type: EventTypeView,
    pub updated_by: String,
}

impl From<&EventType> for OperatorEventTypeView {
    fn from(t: &EventType) -> Self {
        OperatorEventTypeView {
            event_type: EventTypeView::from(t),
            updated_by: t.updated_by.clone(),
        }
    }
}

/// The catalog as stored (operators read the store, not the container's copy, and the read
/// renews that copy).
async fn list(
    _operator: Operator,
    State(state): State<Arc<ApiState>>,
) -> Result<Json<Value>, ApiError> {
    let stored = event_type::all(state.dynamo(), state.table()).await?;
    let catalog = state.catalog.refreshed(stored, state.clock.now()).await;
    let data: Vec<OperatorEventTypeView> = catalog
        .types
        .iter()
        .map(OperatorEventTypeView::from)
        .collect();
    Ok(Json(serde_json::json!({ "data": data })))
}

/// A JSON document of at most [`MAX_DOCUMENT_BYTES`], as compact text.
fn document(f: &mut crate::web::extract::Fields, name: &str) -> Option<(Value, String)> {
    let value: Value = f.required(name)?;
    let text = value.to_string();
    if text.len() > MAX_DOCUMENT_BYTES {
        f.error(
            name,
            format!("must be at most {MAX_DOCUMENT_BYTES} bytes of JSON"),
        );
        return None;
    }
    Some((value, text))
}

/// The fields of a `PUT`, checked.
struct EventTypeInput {
    /// The schema as compact text.
    schema: String,
    /// The example as compact text.
    example: String,
    description: String,
    version: Option<u32>,
    reason: String,
}

/// Reads and checks the posted fields: every field's error is reported together.
fn event_type_input(mut f: crate::web::extract::Fields) -> Result<EventTypeInput, ApiError> {
    let schema = document(&mut f, "schema");
    let example = document(&mut f, "example");
    let description = if f.has("description") {
        f.required_text("description", MAX_DESCRIPTION_CHARS)
    } else {
        Some(String::new())
    };
    let version: Option<u32> = f.optional("version");
    let reason = if f.has("reason") {
        f.required_text("reason", MAX_REASON_CHARS)
            .unwrap_or_default()
    } else {
        String::new()
    };
    if let Some((schema, _)) = &schema {
        match check_schema(schema) {
            Ok(()) => {
                if let Some((example, _)) = &example {
                    if let Err(e) = check_example(schema, example) {
                        f.error("example", e.to_string());
                    }
                }
            }
            Err(e) => f.error("schema", e.to_string()),
        }
    }
    if version.is_some_and(|v| v == 0 || v > MAX_VERSION) {
        f.error("version", format!("must be from 1 to {MAX_VERSION}"));
    }
    f.finish()?;
    let (Some((_, schema)), Some((_, example)), Some(description)) = (schema, example, description)
    else {
        return Err(ApiError::internal("validated event type fields missing"));
    };
    Ok(EventTypeInput {
        schema,
        example,
        description,
        version,
        reason,
    })
}

/// The version to store: the one given (higher than the stored one) or the stored one plus one.
fn next_version(given: Option<u32>, previous: Option<u32>) -> Result<u32, ApiError> {
    match (given, previous) {
        (Some(v), Some(p)) if v <= p => Err(ApiError::field(
            "version",
            format!("must be higher than the stored version {p}"),
        )),
        (Some(v), _) => Ok(v),
        (None, p) => Ok(p.unwrap_or(0) + 1),
    }
}

/// Creates or changes one type of the catalog (see the module notes).
pub async fn put_event_type(
    state: &ApiState,
    record_type: &str,
    operator: &str,
    f: crate::web::extract::Fields,
) -> Result<(EventType, bool), ApiError> {
    if !is_type_name(record_type) {
        return Err(ApiError::field(
            "type",
            "a record type is 1 to 128 ASCII letters, digits, '_', '-', '.' or ':'",
        ));
    }
    let input = event_type_input(f)?;
    let current = event_type::get(state.dynamo(), state.table(), record_type).await?;
    let previous = current.as_ref().map(|t| t.version);
    let next = next_version(input.version, previous)?;
    let now = state.clock.now();
    let t = EventType {
        record_type: record_type.to_owned(),
        version: next,
        description: input.description,
        schema: input.schema,
        example: input.example,
        updated_at: now,
        updated_by: operator.to_owned(),
    };
    let entry = AuditRecord::for_catalog(AuditAction::PutEventType, operator, &input.reason, now)
        .detail("type", record_type)
        .detail(
            "version",
            format!(
                "{} -> {next}",
                previous.map_or_else(|| "(new)".to_string(), |p| p.to_string())
            ),
        );
    save_with_audit(state, &t, previous, &entry).await?;
    // This container's catalog has the new version at once; the others' within their lease.
    state.catalog.saved(&t).await;
    tracing::info!(%operator, record_type, version = next, "event type saved");
    Ok((t, previous.is_none()))
}

/// Writes the type, conditional on the version read, in one transaction with its audit entry.
async fn save_with_audit(
    state: &ApiState,
    t: &EventType,
    previous: Option<u32>,
    entry: &AuditRecord,
) -> Result<(), ApiError> {
    let table = state.table();
    let written = send_resolving_conflicts(
        state.dynamo(),
        Write::all([
            event_type::save(table, t, previous)?,
            audit::create(table, entry)?,
        ])?,
    )
    .await?;
    if !written.applied() {
        return Err(ApiError::conflict(
            "the event type was changed concurrently; read it again and retry",
        ));
    }
    Ok(())
}

async fn save(
    operator: Operator,
    State(state): State<Arc<ApiState>>,
    ApiPath(record_type): ApiPath<String>,
    JsonBody(f): JsonBody,
) -> Result<(StatusCode, Json<OperatorEventTypeView>), ApiError> {
    let (t, created) = put_event_type(&state, &record_type, &operator.id, f).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(OperatorEventTypeView::from(&t))))
}
