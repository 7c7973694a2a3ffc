//! `console_stack`: the local stack the browser tests (`local/browser/`) drive. It provisions the
//! template on the emulator, seeds three accounts through the HTTP API and the real pipeline (the
//! bulk account's thousand events are written straight into the table, as fixtures are), prints
//! one line `manifest: {json}` (URLs, tokens, ids), then serves the API and the console with the
//! pipeline pumped until its standard input closes, SIGINT or SIGTERM, or `CONSOLE_STACK_MAX_SECS`
//! (default 900) have passed: it never outlives the test run that started it.
//!
//! The seed:
//! * **Northwind Traders**: integrations Shop (a receiver answering 200) and Legacy CRM (500
//!   while the clock walks the whole backoff schedule, so its deliveries end `dead`; 200 after,
//!   so a retry is delivered), three changes through that walk and one after it; and Warehouse
//!   feed, whose subscription is paused (as after fifty dead deliveries in a row).
//! * **Contoso**: one integration and one delivered change (the other account of the isolation
//!   test).
//! * **Bulk Catalog**: [`BULK_EVENTS`] final events over the last hours (the Event monitor's
//!   page weight and first render are measured on it).

use anyhow::{Context, Result};
use futures::stream::{self, StreamExt, TryStreamExt};
use local::fixtures::catalog_change;
use local::pipeline::Pipeline;
use local::receiver::{Receiver, Reply};
use local::served::{back_date, interrupted, HttpApi, ServedStack};
use serde_json::{json, Value};
use shared::domain::change::Change;
use shared::domain::event::EventStatus;
use shared::domain::retry::FIXED_SCHEDULE;
use shared::domain::time::Timestamp;
use shared::ids::{AccountId, ChangeId};
use shared::store::event::{self, EventRecord};
use shared::web::{ApiState, OperatorAuth};
use std::sync::Arc;
use std::time::Duration;

const OPERATOR_TOKEN: &str = "browser-operator-token";
const OPERATOR: &str = "browser-operator";
/// Events of the bulk account.
const BULK_EVENTS: usize = 1000;

#[tokio::main]
async fn main() -> Result<()> {
    let max_secs: u64 = std::env::var("CONSOLE_STACK_MAX_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(900);
    let stop = stopped(Duration::from_secs(max_secs))?;

    let p = Arc::new(Pipeline::new().await);
    back_date(&p.clock, FIXED_SCHEDULE.iter().sum());
    let shop = Receiver::start().await;
    let crm = Receiver::start().await;
    crm.set_default(Reply::Full {
        status: 500,
        headers: vec![],
        body: "upstream database unavailable".into(),
    });
    let state = ApiState::new(
        p.stack.clients.clone(),
        p.stack.config.clone(),
        Arc::new(p.clock.clone()),
        OperatorAuth::static_token(OPERATOR_TOKEN, OPERATOR),
    );
    let served = ServedStack::serve(p.clone(), state).await?;
    let api = HttpApi::new(served.url(""), false);

    let northwind = account(&api, "Northwind Traders", "ops@northwind.example").await?;
    let shop_sub = webhook(&api, &northwind, "Shop", &shop.url("/rhythm")).await?;
    let crm_sub = webhook(&api, &northwind, "Legacy CRM", &crm.url("/crm")).await?;
    let mut northwind_changes = Vec::new();
    for price in [3.5, 24.0, 12.75] {
        let c = catalog_change(&northwind.id, p.now(), price);
        p.write_change(&c).await?;
        northwind_changes.push(c.change_id.to_string());
    }
    p.pump().await?;
    for wait in FIXED_SCHEDULE {
        p.advance(wait).await?;
    }
    // Legacy CRM is fixed: what an operator retries from now on is delivered.
    crm.set_default(Reply::Status(200));
    let later = catalog_change(&northwind.id, p.now(), 8.0);
    p.write_change(&later).await?;
    northwind_changes.push(later.change_id.to_string());

    // A third integration whose subscription the worker paused after fifty dead deliveries in
    // a row (written as the worker leaves it): the administrator's resume is driven on it.
    let feed_sub = webhook(&api, &northwind, "Warehouse feed", &shop.url("/feed")).await?;
    pause(&p, &northwind.id, &feed_sub).await?;

    let contoso = account(&api, "Contoso", "it@contoso.example").await?;
    let contoso_sub = webhook(&api, &contoso, "Contoso shop", &shop.url("/contoso")).await?;
    let contoso_change = catalog_change(&contoso.id, p.now(), 9.5);
    p.write_change(&contoso_change).await?;
    p.pump().await?;
    p.roll_up_pass().await?;

    let bulk = account(&api, "Bulk Catalog", "ops@bulk.example").await?;
    bulk_events(&p, &bulk.id, BULK_EVENTS).await?;

    let manifest = json!({
        "base": served.url(""),
        "operator_token": OPERATOR_TOKEN,
        "operator": OPERATOR,
        "northwind": {
            "id": northwind.id, "token": northwind.token,
            "subscriptions": {"shop": shop_sub, "crm": crm_sub, "feed": feed_sub},
            "changes": northwind_changes,
        },
        "contoso": {
            "id": contoso.id, "token": contoso.token,
            "subscription": contoso_sub, "change": contoso_change.change_id.to_string(),
        },
        "bulk": {"id": bulk.id, "token": bulk.token, "events": BULK_EVENTS},
        "receivers": {"crm_calls": crm.count()},
    });
    println!("manifest: {manifest}");

    let why = served.pump_until(None, stop).await;
    served.stop();
    eprintln!("console_stack: {why}; stopped");
    Ok(())
}

/// Resolves when standard input closes (the test run that started this process ended, however
/// it ended), on SIGINT or SIGTERM, or after `max`.
fn stopped(max: Duration) -> Result<impl std::future::Future<Output = &'static str>> {
    let signal = interrupted()?;
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        let _ = closed_tx.send(());
    });
    Ok(async move {
        tokio::select! {
            s = signal => s,
            _ = closed_rx => "standard input closed",
            _ = tokio::time::sleep(max) => "CONSOLE_STACK_MAX_SECS passed",
        }
    })
}

struct Account {
    id: AccountId,
    token: String,
}

async fn account(api: &HttpApi, name: &str, admin: &str) -> Result<Account> {
    let created = api
        .post(
            "/operator/accounts",
            OPERATOR_TOKEN,
            json!({"name": name, "admin_emails": [admin]}),
        )
        .await?;
    Ok(Account {
        id: text(&created["account"]["id"])?.parse()?,
        token: text(&created["token"])?,
    })
}

/// A webhook integration of `account` and its subscription to catalog changes; the subscription's
/// id.
async fn webhook(api: &HttpApi, account: &Account, name: &str, url: &str) -> Result<String> {
    let integration = api
        .post(
            "/v1/integrations",
            &account.token,
            json!({"name": name, "method": "webhook", "webhook_url": url, "event_access_accepted": true}),
        )
        .await?;
    let sub = api
        .post(
            "/v1/subscriptions",
            &account.token,
            json!({"integration_id": integration["id"], "record_types": ["catalog_item"], "fields": ["sku", "name", "price"]}),
        )
        .await?;
    text(&sub["id"])
}

fn text(v: &Value) -> Result<String> {
    Ok(v.as_str().context("a string in the answer")?.to_string())
}

/// Pauses a subscription as the worker leaves it at the threshold of dead deliveries.
async fn pause(p: &Pipeline, account_id: &AccountId, subscription: &str) -> Result<()> {
    let config = &p.stack.config;
    let mut sub = shared::store::subscription::get(
        &p.stack.clients.dynamo,
        &config.delivery_table,
        account_id,
        &subscription.parse()?,
    )
    .await?
    .context("the subscription just created")?;
    sub.status = shared::domain::subscription::SubscriptionStatus::Paused;
    sub.consecutive_dead = shared::domain::subscription::MAX_CONSECUTIVE_DEAD;
    sub.paused_at = Some(p.now());
    let fixtures = local::fixtures::Fixtures {
        clients: &p.stack.clients,
        table: &config.delivery_table,
        signing_key_id: &config.signing_key_id,
        now: p.now(),
    };
    fixtures.save_subscription(&sub).await
}

/// `n` final events of `account_id`, one every twenty seconds back from now, mostly `sent`, some
/// `failed` and `skipped`, written straight into the table (they are off the roll-up index, as
/// final events are).
async fn bulk_events(p: &Pipeline, account_id: &AccountId, n: usize) -> Result<()> {
    let now = p.now();
    stream::iter(0..n)
        .map(|i| async move {
            let at = Timestamp(now.millis() - (i as i64) * 20_000);
            let status = match i % 10 {
                7 => EventStatus::Failed,
                8 => EventStatus::Skipped,
                _ => EventStatus::Sent,
            };
            let subscribers = if status == EventStatus::Skipped { 0 } else { 2 };
            let change_id = ulid::Ulid::from_parts(at.millis() as u64, i as u128).to_string();
            let change = Change {
                account_id: account_id.clone(),
                change_id: ChangeId::from_stored(change_id),
                record_type: "catalog_item".into(),
                record_id: format!("SKU-{i:04}"),
                event_code: if i % 4 == 0 {
                    "catalog_item.created"
                } else {
                    "catalog_item.updated"
                }
                .into(),
                warehouse: Some("W1".into()),
                occurred_at: at,
                changed_fields: Vec::new(),
                record: Default::default(),
                trace_id: None,
            };
            let mut record = EventRecord::ingested(&change, subscribers, subscribers, at);
            record.event_status = status;
            record.finalized_at = Some(at);
            record.status_changed_at = Some(at);
            let mut item = event::new_item(&record)?;
            // Final events are off the roll-up index.
            item.remove("rollup_shard");
            item.remove("rollup_at");
            let put = shared::store::write::put(&p.stack.config.delivery_table, item)?;
            shared::store::write::send(&p.stack.clients.dynamo, put).await?;
            anyhow::Ok(())
        })
        .buffer_unordered(8)
        .try_collect::<()>()
        .await?;
    Ok(())
}
