//! The event-type catalog through the API, against the emulator: operators write types (schema,
//! example, version, audited in the catalog's history), every token reads them, and a
//! subscription naming a type the catalog lacks, or projecting a field its schema lacks, is a 422
//! naming it, on create and on edit alike.

use axum::http::StatusCode;
use local::testkit::api::{ApiAccount, OPERATOR, OPERATOR_TOKEN};
use local::testkit::World;
use serde_json::{json, Value};

fn invoice() -> Value {
    json!({
        "schema": {"type": "object", "required": ["number"], "properties": {
            "number": {"type": "string"},
            "amount": {"type": "number"},
            "customer": {"type": "object", "properties": {"email": {"type": "string"}}}
        }},
        "example": {"number": "INV-1", "amount": 12.5, "customer": {"email": "a@example.com"}},
        "description": "An issued invoice."
    })
}

async fn webhook(w: &World, tenant: &ApiAccount) -> String {
    let created = w
        .api
        .post(
            "/v1/integrations",
            &tenant.token,
            json!({"name": "Books", "method": "webhook", "event_access_accepted": true,
                   "webhook_url": w.receiver.url("/hooks/rhythm")}),
        )
        .await;
    created.created()["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn operators_put_event_types_with_versions_audited_and_every_token_reads_the_catalog() {
    let w = World::new().await;
    let api = &w.api;
    let put = api
        .put("/operator/event-types/invoice", OPERATOR_TOKEN, invoice())
        .await;
    let created = put.created();
    assert_eq!(created["type"], "invoice");
    assert_eq!(created["version"], 1);
    assert_eq!(created["updated_by"], OPERATOR);
    assert_eq!(created["example"]["amount"], 12.5);
    // The next PUT bumps the version; a given version must be higher than the stored one. (The
    // clock moves between writes, so the history's order is the writes'.)
    let tick = || w.pipeline.clock.advance(std::time::Duration::from_secs(1));
    tick();
    let mut v2 = invoice();
    v2["reason"] = json!("amount is in cents now");
    assert_eq!(
        api.put("/operator/event-types/invoice", OPERATOR_TOKEN, v2.clone())
            .await
            .ok()["version"],
        2
    );
    let mut stale = invoice();
    stale["version"] = json!(2);
    let r = api
        .put("/operator/event-types/invoice", OPERATOR_TOKEN, stale)
        .await;
    assert_eq!(r.fields(), ["version"]);
    tick();
    v2["version"] = json!(10);
    assert_eq!(
        api.put("/operator/event-types/invoice", OPERATOR_TOKEN, v2)
            .await
            .ok()["version"],
        10
    );

    // Each write is in the catalog's history, append-only like an account's.
    let history = api
        .get("/operator/accounts/_catalog/audit", OPERATOR_TOKEN)
        .await;
    let entries = history.ok()["data"].as_array().unwrap().clone();
    assert_eq!(entries.len(), 3);
    assert!(entries.iter().all(|e| e["action"] == "put_event_type"
        && e["operator"] == OPERATOR
        && e["details"]["type"] == "invoice"));
    assert_eq!(entries[0]["details"]["version"], "2 -> 10");
    assert_eq!(entries[1]["reason"], "amount is in cents now");
    assert_eq!(entries[2]["details"]["version"], "(new) -> 1");

    // An account token reads the catalog (the seeded types and the new one), in name order.
    let tenant = api.account("Acme").await;
    let list = api.get("/v1/event-types", &tenant.token).await;
    let names: Vec<&str> = list.ok()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["type"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["catalog_item", "invoice", "order"]);
    assert!(list.ok()["data"][1].get("updated_by").is_none());
    let one = api.get("/v1/event-types/invoice", &tenant.token).await;
    assert_eq!(one.ok()["schema"]["required"], json!(["number"]));
    api.get("/v1/event-types/invoices", &tenant.token)
        .await
        .problem(StatusCode::NOT_FOUND);
    assert_eq!(
        api.get("/operator/event-types", OPERATOR_TOKEN).await.ok()["data"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    // Tenants cannot write it, and the catalog route needs a token.
    api.put("/operator/event-types/invoice", &tenant.token, invoice())
        .await
        .problem(StatusCode::UNAUTHORIZED);
    api.call(axum::http::Method::GET, "/v1/event-types", None, None)
        .await
        .problem(StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_schema_outside_the_subset_or_an_example_that_does_not_fit_it_is_refused_naming_it() {
    let w = World::new().await;
    let api = &w.api;
    let with = |key: &str, value: Value| {
        let mut body = invoice();
        body[key] = value;
        body
    };
    let cases = [
        (
            with("schema", json!({"type": "string"})),
            "schema",
            "object schema",
        ),
        (
            with(
                "schema",
                json!({"type": "object", "properties": {"a": {"pattern": "x"}}}),
            ),
            "schema",
            "properties.a.pattern",
        ),
        (
            with("example", json!({"amount": 1})),
            "example",
            "number: is required",
        ),
        (
            with("example", json!({"number": "1", "amont": 1})),
            "example",
            "amont: is not a property",
        ),
        (
            with("example", json!({"number": 7})),
            "example",
            "must be of type string",
        ),
        (with("version", json!(0)), "version", "from 1"),
    ];
    for (body, field, message) in cases {
        let r = api
            .put(
                "/operator/event-types/invoice",
                OPERATOR_TOKEN,
                body.clone(),
            )
            .await;
        assert_eq!(r.fields(), [field], "{body}: {}", r.text);
        assert!(r.text.contains(message), "{message:?} not in {}", r.text);
    }
    // A name that cannot be a record type.
    let r = api
        .put("/operator/event-types/a*b", OPERATOR_TOKEN, invoice())
        .await;
    assert_eq!(r.fields(), ["type"]);
    // Nothing was written.
    assert!(api
        .get("/operator/accounts/_catalog/audit", OPERATOR_TOKEN)
        .await
        .problem(StatusCode::NOT_FOUND)["detail"]
        .as_str()
        .unwrap()
        .contains("account"));
}

#[tokio::test]
async fn a_subscription_naming_an_unknown_type_or_a_field_its_schema_lacks_is_refused_naming_it() {
    let w = World::new().await;
    let api = &w.api;
    let tenant = api.account("Acme").await;
    let integration = webhook(&w, &tenant).await;
    let sub = |types: Value, fields: Value| json!({"integration_id": integration, "record_types": types, "fields": fields});
    // A typo in a record type: refused, the type named.
    let r = api
        .post(
            "/v1/subscriptions",
            &tenant.token,
            sub(json!(["order", "ordr"]), json!(["status"])),
        )
        .await;
    assert_eq!(r.fields(), ["record_types[1]"]);
    assert!(r.text.contains("\\\"ordr\\\""), "{}", r.text);
    // A field the type's schema lacks (nested paths too): refused, the field named.
    let r = api
        .post(
            "/v1/subscriptions",
            &tenant.token,
            sub(json!(["order"]), json!(["status", "customer.mail", "totl"])),
        )
        .await;
    assert_eq!(r.fields(), ["fields[1]", "fields[2]"]);
    assert!(r.text.contains("customer.mail"));
    // Nothing was created.
    assert_eq!(
        api.get("/v1/subscriptions", &tenant.token).await.ok()["data"],
        json!([])
    );
    // A field of one of the named types is enough; "*" checks against every type.
    let created = api
        .post(
            "/v1/subscriptions",
            &tenant.token,
            sub(
                json!(["order", "catalog_item"]),
                json!(["status", "sku", "customer.email"]),
            ),
        )
        .await;
    let id = created.created()["id"].as_str().unwrap().to_owned();
    api.post(
        "/v1/subscriptions",
        &tenant.token,
        sub(json!(["*"]), json!(["price"])),
    )
    .await
    .created();

    // An edit is held to the catalog too: the fields against the new types, new fields against
    // the current types.
    let path = format!("/v1/subscriptions/{id}");
    let r = api
        .patch(&path, &tenant.token, json!({"record_types": ["order"]}))
        .await;
    assert_eq!(r.fields(), ["fields[1]"], "{}", r.text);
    let r = api
        .patch(&path, &tenant.token, json!({"fields": ["sku", "nope"]}))
        .await;
    assert_eq!(r.fields(), ["fields[1]"]);
    let r = api
        .patch(&path, &tenant.token, json!({"record_types": ["invoice"]}))
        .await;
    assert_eq!(r.fields(), ["record_types[0]"]);
    // Once the type is in the catalog, the same edit passes.
    api.put("/operator/event-types/invoice", OPERATOR_TOKEN, invoice())
        .await
        .created();
    let ok = api
        .patch(
            &path,
            &tenant.token,
            json!({"record_types": ["invoice"], "fields": ["number", "customer.email"]}),
        )
        .await;
    assert_eq!(ok.ok()["record_types"], json!(["invoice"]));
    // An edit that names neither types nor fields is not re-checked.
    api.patch(&path, &tenant.token, json!({"filter": null}))
        .await
        .ok();
}

#[tokio::test]
async fn the_console_shows_the_catalog_with_fields_and_examples_to_administrators_and_operators() {
    use super::console::{assert_page, get, operator, sign_in_with_token};
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    let admin = sign_in_with_token(&w, &tenant.token).await;
    let page = get(&w, Some(&admin.cookie), "/console/acct/catalog").await;
    assert_page(&page, "/console/acct/catalog");
    assert!(page.text.contains("data-testid=\"nav-catalog\""));
    assert_eq!(page.text.matches("data-testid=\"event-type\"").count(), 2);
    assert!(page.text.contains("data-type=\"catalog_item\""));
    // Nested fields are listed dotted, with their types; the example is shown as JSON.
    assert!(
        page.text.contains("<code>supplier.contact</code>"),
        "{}",
        page.text
    );
    assert!(
        page.text.contains("&quot;sku&quot;: &quot;SKU-1&quot;"),
        "{}",
        page.text
    );
    // A new type shows on the operators' page (and not on another audience's URL).
    w.api
        .put("/operator/event-types/invoice", OPERATOR_TOKEN, invoice())
        .await
        .created();
    let op = operator(&w).await;
    let page = get(&w, Some(&op.cookie), "/console/op/catalog").await;
    assert_page(&page, "/console/op/catalog");
    assert!(page.text.contains("data-type=\"invoice\""));
    assert!(page.text.contains("An issued invoice."));
    assert_eq!(
        get(&w, Some(&admin.cookie), "/console/op/catalog")
            .await
            .status,
        StatusCode::FORBIDDEN
    );
}

#[tokio::test]
async fn the_consoles_subscription_form_is_refused_the_same_unknown_type_and_field_by_the_same_check(
) {
    use super::console::{post, sign_in_with_token};
    let w = World::new().await;
    let tenant = w.api.account("Acme").await;
    let integration = webhook(&w, &tenant).await;
    let admin = sign_in_with_token(&w, &tenant.token).await;
    let create = |types: &'static str, fields: &'static str| {
        let (w, admin, integration) = (&w, &admin, integration.clone());
        async move {
            post(
                w,
                Some(&admin.cookie),
                "/console/acct/manage/subscriptions",
                &[
                    ("csrf", &admin.csrf),
                    ("integration_id", &integration),
                    ("record_types", types),
                    ("fields", fields),
                ],
            )
            .await
        }
    };
    let typo = create("catalog_itme", "price").await;
    assert_eq!(
        typo.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        typo.text
    );
    assert!(typo.text.contains("data-testid=\"problem\""));
    assert!(typo.text.contains("record_types[0]") && typo.text.contains("catalog_itme"));
    let field = create("catalog_item", "price, prize").await;
    assert_eq!(
        field.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        field.text
    );
    assert!(field.text.contains("fields[1]") && field.text.contains("prize"));
    assert_eq!(
        w.api.get("/v1/subscriptions", &tenant.token).await.ok()["data"],
        json!([])
    );
    let ok = create("catalog_item", "price, supplier.name").await;
    assert!(
        ok.status.is_success() || ok.status.is_redirection(),
        "{}",
        ok.text
    );
    assert_eq!(
        w.api.get("/v1/subscriptions", &tenant.token).await.ok()["data"][0]["fields"],
        json!(["price", "supplier.name"])
    );
}

/// A change of `record_type` as a publisher sends it.
fn change(record_type: &str, id: &str) -> Value {
    json!({"record_type": record_type, "record_id": id, "operation": "updated",
           "record": {"number": id}})
}

#[tokio::test]
async fn a_container_reads_the_catalog_once_per_lease_and_an_operators_put_refreshes_it_at_once() {
    use local::faults::Matcher;
    use shared::operations::catalog_lease::LEASE;
    use std::time::Duration;
    let w = World::new().await;
    let api = &w.api;
    let tenant = api.account("Shop").await;
    let issued = api
        .post(
            "/v1/publish-tokens",
            &tenant.token,
            json!({"reason": "the shop"}),
        )
        .await;
    let publisher = issued.created()["token"].as_str().unwrap().to_owned();
    // The catalog's reads, counted at the SDK boundary: queries of its partition.
    let reads = w
        .pipeline
        .stack
        .faults
        .count_matching(Matcher::operation("Query").on("EVENT_TYPES"));

    // Publishes, listings, single types and a subscription's check within the lease: one read.
    for i in 0..5 {
        let r = api
            .post(
                "/v1/changes",
                &publisher,
                change("order", &format!("O-{i}")),
            )
            .await;
        assert_eq!(r.accepted()["changes"][0]["result"], "published");
        assert_eq!(
            api.get("/v1/event-types", &tenant.token).await.ok()["data"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        api.get("/v1/event-types/order", &publisher).await.ok();
    }
    let integration = webhook(&w, &tenant).await;
    api.post(
        "/v1/subscriptions",
        &tenant.token,
        json!({"integration_id": integration, "record_types": ["ordr"]}),
    )
    .await
    .problem(StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(reads.get(), 1, "one read for the whole lease");
    w.pipeline.clock.advance(LEASE - Duration::from_secs(1));
    api.post("/v1/changes", &publisher, change("order", "O-9"))
        .await
        .accepted();
    assert_eq!(reads.get(), 1, "the lease has not ended");
    // The lease ends: the next use reads it again, once.
    w.pipeline.clock.advance(Duration::from_secs(1));
    for i in 0..3 {
        api.post(
            "/v1/changes",
            &publisher,
            change("order", &format!("P-{i}")),
        )
        .await
        .accepted();
        api.get("/v1/event-types", &tenant.token).await.ok();
    }
    assert_eq!(reads.get(), 2, "one more read after the lease");

    // Another container of the API, which has read the catalog too.
    let other = local::testkit::api::ApiClient::new(w.api_state());
    other.get("/v1/event-types", &tenant.token).await.ok();
    assert_eq!(reads.get(), 3);
    // An operator adds a type in this container: published and read here at once, no new read.
    api.put("/operator/event-types/invoice", OPERATOR_TOKEN, invoice())
        .await
        .created();
    let r = api
        .post("/v1/changes", &publisher, change("invoice", "INV-1"))
        .await;
    assert_eq!(r.accepted()["changes"][0]["result"], "published");
    assert_eq!(
        api.get("/v1/event-types/invoice", &tenant.token).await.ok()["version"],
        1
    );
    assert_eq!(
        reads.get(),
        3,
        "the writing container has its write without reading"
    );
    // The other container sees it when its lease ends, not before.
    other
        .get("/v1/event-types/invoice", &tenant.token)
        .await
        .problem(StatusCode::NOT_FOUND);
    let refused = other
        .post("/v1/changes", &publisher, change("invoice", "INV-2"))
        .await;
    assert_eq!(refused.fields(), ["record_type"], "{}", refused.text);
    w.pipeline.clock.advance(LEASE);
    assert_eq!(
        other
            .get("/v1/event-types/invoice", &tenant.token)
            .await
            .ok()["version"],
        1
    );
    assert_eq!(reads.get(), 4);
}
