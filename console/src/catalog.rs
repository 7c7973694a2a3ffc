//! The event-type catalog's page (`/console/acct/catalog` for an account's administrators,
//! `/console/op/catalog` for operators): every record type a subscription may name, with its
//! description, version, the fields its schema declares and an example payload. It reads the
//! catalog as `GET /v1/event-types` does: the container's copy, held for a short lease (the
//! state's `catalog`).

use crate::account::Admin;
use crate::account_parts::nav_at;
use crate::operator::{nav, Op};
use crate::page::{error_page, html_response, shell, when_text, Ctx, Nav};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use maud::{html, Markup};
use serde_json::Value;
use shared::web::state::ApiState;
use std::sync::Arc;

pub fn router() -> Router<Arc<ApiState>> {
    Router::new()
        .route("/console/acct/catalog", get(for_admin))
        .route("/console/op/catalog", get(for_operator))
}

/// The schema's fields as dotted paths with their types (`customer.email: string`).
fn fields(schema: &Value, prefix: &str, out: &mut Vec<(String, String)>) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, sub) in props {
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        let kind = match sub.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" or "),
            _ => "any".into(),
        };
        out.push((path.clone(), kind));
        fields(sub, &path, out);
    }
}

async fn page(state: &ApiState, ctx: &Ctx, nav: &Nav) -> Response {
    let held = state
        .catalog
        .catalog(state.dynamo(), state.table(), state.clock.now());
    let catalog = match held.await {
        Ok(c) => c,
        Err(e) => return error_page(ctx, nav, &e.into()),
    };
    let listed: Vec<Vec<(String, String)>> = catalog
        .types
        .iter()
        .map(|t| {
            let mut out = Vec::new();
            fields(&t.schema_json(), "", &mut out);
            out
        })
        .collect();
    let body: Markup = html! {
        main id="main" {
            h1 { "Event types" }
            p { "The record types a subscription may name, and the fields of each that it may project (dotted for nested fields). A delivery's " code { "data" } " holds the projected fields only." }
            @if catalog.types.is_empty() {
                p data-testid="catalog-empty" { "The catalog has no record types yet: an operator adds them." }
            }
            @for (t, listed) in catalog.types.iter().zip(&listed) {
                @let id = format!("type-{}", t.record_type);
                section class="panel" aria-labelledby=(id) data-testid="event-type" data-type=(t.record_type) {
                    h2 id=(id) { code { (t.record_type) } }
                    p { "Version " (t.version) " · updated " (when_text(Some(&t.updated_at.to_rfc3339()))) }
                    @if !t.description.is_empty() { p { (t.description) } }
                    div class="table-wrap" {
                        table class="stack" {
                            caption { "Fields of " (t.record_type) }
                            thead { tr { th scope="col" { "Field" } th scope="col" { "Type" } } }
                            tbody {
                                @for (path, kind) in listed {
                                    tr { td data-label="Field" { code { (path) } } td data-label="Type" { (kind) } }
                                }
                            }
                        }
                    }
                    h3 { "Example" }
                    pre class="mono payload" data-testid="event-type-example" tabindex="0" aria-label=(format!("Example payload of {}", t.record_type)) {
                        (serde_json::to_string_pretty(&t.example_json()).unwrap_or_default())
                    }
                }
            }
        }
    };
    html_response(StatusCode::OK, shell(Some((ctx, nav)), "Event types", body))
}

async fn for_admin(admin: Admin, State(state): State<Arc<ApiState>>) -> Response {
    page(&state, &admin.ctx, &nav_at("nav-catalog")).await
}

async fn for_operator(op: Op, State(state): State<Arc<ApiState>>) -> Response {
    page(&state, &op.ctx, &nav(None, "nav-catalog")).await
}
